"""Simulation tops of the fabric's testbenches and of ``scin bench-port``: small tops that wire
real transport and switch blocks together. None of them is meant for synthesis.

Pass this module as ``top_module`` to :func:`scin.sim.runner.verilog_for`, so an edit here
re-elaborates the models built on these tops (and nothing else).
"""

from amaranth.hdl import Module, Signal, Cat, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...hdl.packet import NUM_CLASSES
from ...hdl.transport import TransportPort, Link, packet_signature


__all__ = ["TransportPair", "PortHarness", "SwitchHarness", "PacketGen", "PortBench"]


class TransportPair(wiring.Component):
    """Two :class:`TransportPort` s, ``a`` and ``b``, joined by a :class:`Link`.

    Members
    -------
    a_tx, b_tx : In(packet_signature).array(NUM_CLASSES)
        What each end sends, per class.
    a_rx, b_rx : Out(packet_signature).array(NUM_CLASSES)
        What each end receives, per class.
    overflow, credit_error : Out(2)
        Sticky error flags of ``a`` (bit 0) and ``b`` (bit 1).
    a_available, b_available : Out(range(credits + 1)).array(NUM_CLASSES)
        Send credits of each end.
    """

    def __init__(self, params, *, credits, latency):
        self._params, self._credits, self._latency = params, credits, latency
        pkt = packet_signature(params)
        super().__init__({
            "a_tx": In(pkt).array(NUM_CLASSES), "a_rx": Out(pkt).array(NUM_CLASSES),
            "b_tx": In(pkt).array(NUM_CLASSES), "b_rx": Out(pkt).array(NUM_CLASSES),
            "overflow": Out(2), "credit_error": Out(2),
            "a_available": Out(range(credits + 1)).array(NUM_CLASSES),
            "b_available": Out(range(credits + 1)).array(NUM_CLASSES),
        })

    def elaborate(self, platform):
        m = Module()
        a = m.submodules.a = TransportPort(self._params, self._credits)
        b = m.submodules.b = TransportPort(self._params, self._credits)
        link = m.submodules.link = Link(self._params, self._latency)
        connect(m, a.link, link.a)
        connect(m, b.link, link.b)
        for c in range(NUM_CLASSES):
            connect(m, flipped(self.a_tx[c]), a.tx[c])
            connect(m, flipped(self.b_tx[c]), b.tx[c])
            connect(m, a.rx[c], flipped(self.a_rx[c]))
            connect(m, b.rx[c], flipped(self.b_rx[c]))
            m.d.comb += [self.a_available[c].eq(a.available[c]),
                         self.b_available[c].eq(b.available[c])]
        m.d.comb += [
            self.overflow.eq(Cat(a.overflow, b.overflow)),
            self.credit_error.eq(Cat(a.credit_error, b.credit_error)),
        ]
        return m


class PortHarness(wiring.Component):
    """An endpoint-side :class:`TransportPort` joined by a :class:`Link` to one :class:`SwitchPort`,
    with the switch port's core side exposed (the testbench plays the switch core).

    Members
    -------
    ep_tx : In(packet_signature).array(NUM_CLASSES)
        What the endpoint sends to the switch port.
    ep_rx : Out(packet_signature).array(NUM_CLASSES)
        What the endpoint receives from the switch port.
    isa_rx, isa_tx, core_rx, core_tx, errors
        The switch port's members of the same names.
    overflow, credit_error : Out(2)
        Sticky transport errors of the endpoint (bit 0) and the switch port (bit 1).
    """

    def __init__(self, params, *, credits, latency, isa_depth):
        from ...hdl.switch.filter import error_layout
        self._params, self._credits, self._latency, self._isa_depth = \
            params, credits, latency, isa_depth
        pkt = packet_signature(params)
        super().__init__({
            "ep_tx": In(pkt).array(NUM_CLASSES), "ep_rx": Out(pkt).array(NUM_CLASSES),
            "isa_rx": Out(pkt).array(NUM_CLASSES), "isa_tx": In(pkt).array(NUM_CLASSES),
            "core_rx": Out(pkt).array(NUM_CLASSES), "core_tx": In(pkt).array(NUM_CLASSES),
            "errors": Out(error_layout()),
            "overflow": Out(2), "credit_error": Out(2),
        })

    def elaborate(self, platform):
        from ...hdl.switch import SwitchPort
        m = Module()
        ep = m.submodules.ep = TransportPort(self._params, self._credits)
        link = m.submodules.link = Link(self._params, self._latency)
        sp = m.submodules.port = SwitchPort(self._params, self._credits, self._isa_depth)
        connect(m, ep.link, link.a)
        connect(m, sp.link, link.b)
        for c in range(NUM_CLASSES):
            connect(m, flipped(self.ep_tx[c]), ep.tx[c])
            connect(m, ep.rx[c], flipped(self.ep_rx[c]))
            connect(m, sp.isa_rx[c], flipped(self.isa_rx[c]))
            connect(m, flipped(self.isa_tx[c]), sp.isa_tx[c])
            connect(m, sp.core_rx[c], flipped(self.core_rx[c]))
            connect(m, flipped(self.core_tx[c]), sp.core_tx[c])
        m.d.comb += [
            self.errors.eq(sp.errors),
            self.overflow.eq(Cat(ep.overflow, sp.overflow)),
            self.credit_error.eq(Cat(ep.credit_error, sp.credit_error)),
        ]
        return m


class SwitchHarness(wiring.Component):
    """A :class:`Switch` with, on every port, a :class:`Link` and an endpoint-side
    :class:`TransportPort`, so credits are modelled in HDL and a testbench only drives per-class
    packet streams.

    Members
    -------
    ep_tx : In(packet_signature).array(ports, NUM_CLASSES)
        ``ep_tx[p][c]``: what endpoint ``p`` sends.
    ep_rx : Out(packet_signature).array(ports, NUM_CLASSES)
        ``ep_rx[p][c]``: what endpoint ``p`` receives.
    isa_rx, isa_tx, errors
        The switch's members of the same names.
    overflow, credit_error : Out(2 * ports)
        Sticky transport errors: endpoints in the low ``ports`` bits, switch ports above.
    """

    def __init__(self, params, *, credits, latency, isa_depth):
        from ...hdl.switch.filter import error_layout
        self._params, self._credits, self._latency, self._isa_depth = \
            params, credits, latency, isa_depth
        pkt = packet_signature(params)
        n = params.ports
        super().__init__({
            "ep_tx": In(pkt).array(n, NUM_CLASSES), "ep_rx": Out(pkt).array(n, NUM_CLASSES),
            "isa_rx": Out(pkt).array(n, NUM_CLASSES), "isa_tx": In(pkt).array(n, NUM_CLASSES),
            "errors": Out(error_layout()).array(n),
            "overflow": Out(2 * n), "credit_error": Out(2 * n),
        })

    def elaborate(self, platform):
        from ...hdl.switch import Switch
        m = Module()
        n = self._params.ports
        sw = m.submodules.switch = Switch(self._params, self._credits, self._isa_depth)
        eps = []
        for p in range(n):
            ep = m.submodules[f"ep{p}"] = TransportPort(self._params, self._credits)
            link = m.submodules[f"link{p}"] = Link(self._params, self._latency)
            connect(m, ep.link, link.a)
            connect(m, sw.link[p], link.b)
            eps.append(ep)
            for c in range(NUM_CLASSES):
                connect(m, flipped(self.ep_tx[p][c]), ep.tx[c])
                connect(m, ep.rx[c], flipped(self.ep_rx[p][c]))
                connect(m, sw.isa_rx[p][c], flipped(self.isa_rx[p][c]))
                connect(m, flipped(self.isa_tx[p][c]), sw.isa_tx[p][c])
            m.d.comb += self.errors[p].eq(sw.errors[p])
        m.d.comb += [
            self.overflow.eq(Cat(*(ep.overflow for ep in eps), sw.overflow)),
            self.credit_error.eq(Cat(*(ep.credit_error for ep in eps), sw.credit_error)),
        ]
        return m


class PacketGen(wiring.Component):
    """Sends back-to-back copies of one packet while ``enable`` is high (saturating traffic for
    benchmarks): the header given at construction, then ``payload_flits`` flits of a running count.

    Members
    -------
    o : Out(packet_signature)
    enable : In(1)
    """

    def __init__(self, params, header, payload_flits):
        self._params, self._header, self._payload_flits = params, header, payload_flits
        super().__init__({"o": Out(packet_signature(params)), "enable": In(1)})

    def elaborate(self, platform):
        m = Module()
        k = Signal(range(self._payload_flits + 1))
        count = Signal(self._params.flit_width)
        m.d.comb += [
            self.o.valid.eq(self.enable),
            self.o.payload.data.eq(Mux(k == 0, self._header, count)),
            self.o.payload.last.eq(k == self._payload_flits),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += [k.eq(Mux(k == self._payload_flits, 0, k + 1)), count.eq(count + 1)]
        return m


class PortBench(wiring.Component):
    """Saturation benchmark of one switch port's TX link (``scripts/bench_port.py``).

    A :class:`Switch` with a :class:`Link` and an endpoint :class:`TransportPort` on every port.
    While ``enable`` is high, a :class:`PacketGen` fills the ISA TX queue of port 0 (INC=1 packets
    in ``isa_class``) and the endpoints listed in ``core_sources`` each send INC=0 packets to port 0
    in ``core_class`` through the core. Endpoint 0 accepts everything; the counters say how many
    flits it received, split by the INC bit of their packet's header.

    Members
    -------
    enable : In(1)
    cycles, isa_flits, core_flits : Out(32)
        Cycles with ``enable`` high, and flits received by endpoint 0 from the ISA and the core.
    errors : Out(1)
        Any transport error or dropped packet anywhere (must stay 0).
    """

    def __init__(self, params, *, credits, latency, isa_depth, payload_flits, core_sources,
                 isa_class, core_class):
        self._params, self._credits, self._latency, self._isa_depth = \
            params, credits, latency, isa_depth
        self._payload_flits, self._core_sources = payload_flits, tuple(core_sources)
        self._isa_class, self._core_class = isa_class, core_class
        super().__init__({"enable": In(1), "cycles": Out(32), "isa_flits": Out(32),
                          "core_flits": Out(32), "errors": Out(1)})

    def elaborate(self, platform):
        from ...hdl.packet import Opcode, OPCODE_CLASS
        from ...hdl.switch import Switch
        m = Module()
        p = self._params
        n = p.ports
        sw = m.submodules.switch = Switch(p, self._credits, self._isa_depth)
        length = self._payload_flits * p.flit_bytes
        # Payload-carrying opcode of each class the generators may use.
        opcode = {OPCODE_CLASS[op].value: op for op in (Opcode.WRITE, Opcode.READ_RESP)}
        eps, errs = [], []
        for q in range(n):
            ep = m.submodules[f"ep{q}"] = TransportPort(p, self._credits)
            link = m.submodules[f"link{q}"] = Link(p, self._latency)
            connect(m, ep.link, link.a)
            connect(m, sw.link[q], link.b)
            eps.append(ep)
            errs += [ep.overflow, ep.credit_error, sw.errors[q].as_value().any()]
            if q in self._core_sources:
                hdr = p.pack_header(opcode=opcode[self._core_class], msg_class=self._core_class,
                                    inc=0, src=q, dst=0, length=length)
                gen = m.submodules[f"gen{q}"] = PacketGen(p, hdr, self._payload_flits)
                connect(m, gen.o, ep.tx[self._core_class])
                m.d.comb += gen.enable.eq(self.enable)
            for c in range(NUM_CLASSES):
                m.d.comb += sw.isa_rx[q][c].ready.eq(1)
        errs += [sw.overflow.any(), sw.credit_error.any()]
        hdr = p.pack_header(opcode=opcode[self._isa_class], msg_class=self._isa_class, inc=1,
                            src=0, dst=0, length=length)
        gen = m.submodules.gen_isa = PacketGen(p, hdr, self._payload_flits)
        connect(m, gen.o, sw.isa_tx[0][self._isa_class])
        m.d.comb += gen.enable.eq(self.enable)

        # Endpoint 0 takes everything and counts flits by the INC bit of their packet's header.
        inc_bit = p.header_layout["inc"].offset
        isa_flits, core_flits = [], []
        for c in range(NUM_CLASSES):
            rx = eps[0].rx[c]
            m.d.comb += rx.ready.eq(1)
            in_packet, held_inc = Signal(name=f"in_packet{c}"), Signal(name=f"inc{c}")
            inc = Signal(name=f"cur_inc{c}")
            m.d.comb += inc.eq(Mux(in_packet, held_inc, rx.payload.data[inc_bit]))
            with m.If(rx.valid):
                m.d.sync += [in_packet.eq(~rx.payload.last), held_inc.eq(inc)]
            isa_flits.append(rx.valid & inc)
            core_flits.append(rx.valid & ~inc)
        with m.If(self.enable):
            m.d.sync += [
                self.cycles.eq(self.cycles + 1),
                self.isa_flits.eq(self.isa_flits + sum(isa_flits)),
                self.core_flits.eq(self.core_flits + sum(core_flits)),
            ]
        with m.If(Cat(*errs).any()):
            m.d.sync += self.errors.eq(1)
        return m
