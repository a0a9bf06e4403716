"""SwitchCore: the crossbar between switch ports, one per message class."""

from amaranth.hdl import Module, Signal, Mux
from amaranth.lib import wiring, data
from amaranth.lib.wiring import In, Out

from ..packet import MsgClass, NUM_CLASSES
from ..transport.signature import check_params, packet_signature
from .arbiter import PacketArbiter


__all__ = ["SwitchCore"]


class SwitchCore(wiring.Component):
    """Forwards packets between ``params.ports`` ports by the header's ``dst``, per message class.

    For every class ``c`` and input ``s``, a demultiplexer reads ``dst`` from the header flit and
    sends the whole packet (through its ``last`` flit) to output ``dst``; every output has a
    :class:`PacketArbiter` that takes whole packets round robin from the inputs. Classes are fully
    independent (separate demultiplexers, arbiters and wires), so a blocked class never stalls
    another. A packet may go back out of the port it came in (``dst == s``).

    Head-of-line blocking: an input holds its packet until the target output's arbiter takes it,
    so a packet to a busy output blocks packets behind it *in the same class on the same input*,
    even if they go to idle outputs. This is acceptable here because each port's traffic is mostly
    one-to-one (memory requests and responses) or ISA traffic that does not cross the core; the
    receive queues in front (``credits`` deep) absorb bursts. Virtual output queues would remove it
    at the cost of ``ports`` times the buffering.

    ``dst`` is trusted (:class:`PacketFilter` dropped out-of-range ones); should one still reach
    the core, its packet is discarded rather than left to block the input.

    Latency: 1 cycle (the arbiter's output register); one flit per cycle per output per class.

    Parameters
    ----------
    params : FabricParams
        ``params.ports`` is the number of ports.

    Members
    -------
    i : In(packet_signature).array(ports, NUM_CLASSES)
        ``i[s][c]``: packets from port ``s`` in class ``c``.
    o : Out(packet_signature).array(ports, NUM_CLASSES)
        ``o[d][c]``: packets for port ``d`` in class ``c``.
    """

    def __init__(self, params):
        self._params = check_params(params)
        sig = packet_signature(params)
        n = params.ports
        super().__init__({"i": In(sig).array(n, NUM_CLASSES), "o": Out(sig).array(n, NUM_CLASSES)})

    def elaborate(self, platform):
        m = Module()
        p = self._params
        n = p.ports
        layout = p.header_layout
        for c in range(NUM_CLASSES):
            cls = MsgClass(c).name.lower()
            arbs = []
            for d in range(n):
                arb = m.submodules[f"arb_{cls}_{d}"] = PacketArbiter(p, n)
                m.d.comb += [self.o[d][c].valid.eq(arb.o.valid),
                             self.o[d][c].payload.eq(arb.o.payload),
                             arb.o.ready.eq(self.o[d][c].ready)]
                arbs.append(arb)
            for s in range(n):
                i = self.i[s][c]
                hdr = data.View(layout, i.payload.data[:layout.size])
                in_packet = Signal(name=f"in_packet_{cls}_{s}")
                dst_held = Signal(p.port_bits, name=f"dst_{cls}_{s}")
                dst = Signal(p.port_bits, name=f"dst_cur_{cls}_{s}")
                m.d.comb += dst.eq(Mux(in_packet, dst_held, hdr.dst))
                with m.If(i.valid & i.ready):
                    m.d.sync += in_packet.eq(~i.payload.last)
                    with m.If(~in_packet):
                        m.d.sync += dst_held.eq(hdr.dst)
                # Out-of-range dst: swallow the packet (see the class docstring).
                m.d.comb += i.ready.eq(dst >= n)
                for d in range(n):
                    m.d.comb += [
                        arbs[d].i[s].valid.eq(i.valid & (dst == d)),
                        arbs[d].i[s].payload.eq(i.payload),
                    ]
                    with m.If(dst == d):
                        m.d.comb += i.ready.eq(arbs[d].i[s].ready)
        return m
