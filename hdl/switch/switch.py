"""Switch: N switch ports and the crossbar core (the ISA attaches to the ``isa_*`` streams)."""

from amaranth.hdl import Module, Cat
from amaranth.lib.wiring import In, Out, connect, flipped

from ..packet import NUM_CLASSES
from ..transport.signature import packet_signature, link_end_signature
from .core import SwitchCore
from .filter import error_layout
from .port import SwitchOptions, SwitchPort


__all__ = ["Switch", "SWITCH_LATENCY"]

#: Cycles a packet spends in the switch besides its two transport halves: filter register, core
#: arbiter, port arbiter. Endpoint to endpoint through the core (user stream to user stream) takes
#: ``2 * (link latency + TRANSPORT_LATENCY) + SWITCH_LATENCY`` cycles; link end to link end through
#: the switch, ``TRANSPORT_LATENCY + SWITCH_LATENCY`` = 6 (measured by tb/block/test_switch.py).
SWITCH_LATENCY = 3


class Switch(SwitchOptions):
    """An N-port switch (``N = params.ports``): one :class:`SwitchPort` per port and a
    :class:`SwitchCore` between them.

    Each port's link goes to one endpoint. Packets with INC=0 are forwarded by ``dst`` through the
    core; packets with INC=1 leave on ``isa_rx[port][class]``, and the ISA sends on
    ``isa_tx[port][class]``, sharing each port's link with core traffic packet by packet (round
    robin). Malformed packets are dropped at the port that received them and counted in
    ``errors[port]``.

    Latency, link end to link end through the core: transport RX 2 (queue) + filter 1 + core 1 +
    port arbiter 1 + transport TX 1 = 6 cycles. From an endpoint's TX stream to ``isa_rx``:
    link latency + 3 (transport) + 1 (filter) + 2 (ISA RX queue) = link latency + 6.

    Parameters
    ----------
    params : FabricParams
    credits : int
        Per-class receive-queue depth of every port, and the credits each endpoint starts with
        (default 256: enough for one flit per cycle over a 70-cycle link, see
        :func:`~scin.hdl.transport.credits_for_full_rate`).
    isa_depth : int
        Depth of every ISA RX and TX queue, in flits (default 256).
    nvls : bool
        Add ``nvls_rx``/``nvls_tx``, the NVLS engine's streams of every port and class
        (:class:`SwitchPort`; docs/NVLS.md).
    push : bool
        The ISA has push mode: push WRITEs join its read responses (:class:`SwitchPort`).

    Members
    -------
    link : Out(link_end_signature).array(ports)
        ``link[p]``: the link end of port ``p``, towards endpoint ``p``.
    isa_rx : Out(packet_signature).array(ports, NUM_CLASSES)
        ``isa_rx[p][c]``: INC=1 packets received on port ``p`` in class ``c``.
    isa_tx : In(packet_signature).array(ports, NUM_CLASSES)
        ``isa_tx[p][c]``: packets the ISA sends on port ``p`` in class ``c``.
    errors : Out(error_layout()).array(ports)
        Per-port counts of dropped malformed packets (``bad_opcode``, ``bad_length``, ``bad_dst``).
    overflow, credit_error : Out(ports)
        Sticky transport error flags, one bit per port (never set on correct links).
    """

    def __init__(self, params, credits=256, isa_depth=256, *, nvls=False, push=False):
        self.check_options(params, credits, isa_depth, nvls, push)
        n = params.ports
        pkt = packet_signature(params)
        members = {
            "link":         Out(link_end_signature(params)).array(n),
            "isa_rx":       Out(pkt).array(n, NUM_CLASSES),
            "isa_tx":       In(pkt).array(n, NUM_CLASSES),
            "errors":       Out(error_layout()).array(n),
            "overflow":     Out(n),
            "credit_error": Out(n),
        }
        if nvls:
            members.update({"nvls_rx": Out(pkt).array(n, NUM_CLASSES),
                            "nvls_tx": In(pkt).array(n, NUM_CLASSES)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n = self._params.ports
        core = m.submodules.core = SwitchCore(self._params)
        ports = []
        for p in range(n):
            port = m.submodules[f"port{p}"] = SwitchPort(self._params, self._credits,
                                                         self._isa_depth, nvls=self._nvls,
                                                         push=self._push)
            ports.append(port)
            connect(m, port.link, flipped(self.link[p]))
            for c in range(NUM_CLASSES):
                connect(m, port.isa_rx[c], flipped(self.isa_rx[p][c]))
                connect(m, flipped(self.isa_tx[p][c]), port.isa_tx[c])
                connect(m, port.core_rx[c], core.i[p][c])
                connect(m, core.o[p][c], port.core_tx[c])
                if self._nvls:
                    connect(m, port.nvls_rx[c], flipped(self.nvls_rx[p][c]))
                    connect(m, flipped(self.nvls_tx[p][c]), port.nvls_tx[c])
            m.d.comb += self.errors[p].eq(port.errors)
        m.d.comb += [
            self.overflow.eq(Cat(port.overflow for port in ports)),
            self.credit_error.eq(Cat(port.credit_error for port in ports)),
        ]
        return m
