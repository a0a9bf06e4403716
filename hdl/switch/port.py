"""SwitchPort: one port of the switch (transport, INC demux, ISA queues, ISA/core arbitration)."""

from amaranth.hdl import Module
from amaranth.lib.wiring import In, Out, connect, flipped

from ..lib import Queue
from ..packet import MsgClass, NUM_CLASSES
from ..params import check_type
from ..transport import TransportPort
from ..transport.signature import (CreditedComponent, check_params, check_credits, packet_signature,
                                   link_end_signature)
from .arbiter import PacketArbiter
from .filter import PacketFilter, error_layout, ERROR_KINDS


__all__ = ["SwitchPort", "SwitchOptions", "check_queue_depth"]


def check_queue_depth(depth, name="isa_depth"):
    """Validate an ISA queue depth, in flits (the rule of :func:`check_credits`)."""
    return check_credits(depth, name)


class SwitchOptions(CreditedComponent):
    """What :class:`SwitchPort` and the switch built from them are configured by, validated by
    :meth:`check_options` before ``super().__init__``."""

    def check_options(self, params, credits, isa_depth, nvls, push):
        """Validate and keep the transport ``params``, ``credits``, ``isa_depth``, ``nvls`` and
        ``push``, each error naming its parameter."""
        self._params = check_params(params)
        self._credits = check_credits(credits)
        self._isa_depth = check_queue_depth(isa_depth)
        self._nvls = check_type("nvls", nvls, bool)
        self._push = check_type("push", push, bool)


class SwitchPort(SwitchOptions):
    """One switch port: the switch side of a credit link, split between the ISA and the core.

    RX, per class: :class:`TransportPort` receive queue (the *switch RX queue*) ->
    :class:`PacketFilter` (malformed packets dropped whole and counted; INC=1 to the ISA, INC=0 to
    the core) -> ISA RX queue (``isa_depth`` flits) -> ``isa_rx[c]``, or -> ``core_rx[c]``.

    TX, per class: ``isa_tx[c]`` -> ISA TX queue (``isa_depth`` flits) and ``core_tx[c]`` ->
    :class:`PacketArbiter` (round robin, grant changes only between packets, so regular traffic
    keeps flowing during a collective and neither side starves) -> :class:`TransportPort` class mux
    (per flit across classes) -> link.

    Latency through the port, on top of the transport's: RX 1 cycle (filter register) plus 2 into
    ``isa_rx`` (ISA queue); TX 1 cycle (arbiter register) plus 2 from ``isa_tx`` (ISA queue).

    Parameters
    ----------
    params : FabricParams
    credits : int
        Receive-queue depth per class and the link's initial credits (>= 2).
    isa_depth : int
        Depth in flits of each ISA RX and TX queue (>= 2), and of each NVLS queue.
    nvls : bool
        Add the NVLS engine's streams (docs/NVLS.md): ``nvls_rx``/``nvls_tx``, with queues of
        their own, a third input of each class's arbiter.
    push : bool
        The ISA has push mode (docs/ISA.md): INC=1 WRITE-class packets (push WRITEs) go into the
        ISA's RDATA queue, merged a packet at a time with the read responses (a
        :class:`PacketArbiter`), because the ISA stores both in its wave tables through one write
        port per participant; ``isa_rx`` of class WRITE then carries nothing. The ISA never
        back-pressures that queue, so a push can never hold up a read response (or the reverse)
        for more than a packet.

    Members
    -------
    link : Out(link_end_signature)
        To the endpoint (through a link).
    isa_rx : Out(packet_signature).array(NUM_CLASSES)
        INC=1 packets received, to the ISA.
    isa_tx : In(packet_signature).array(NUM_CLASSES)
        Packets from the ISA to send on this port's link.
    core_rx : Out(packet_signature).array(NUM_CLASSES)
        INC=0 packets received, to the switch core.
    core_tx : In(packet_signature).array(NUM_CLASSES)
        Packets from the switch core to send on this port's link.
    errors : Out(error_layout())
        Counts of dropped malformed packets, by kind (32 bits each, wrapping).
    overflow, credit_error : Out(1)
        Sticky transport errors (never set on a correct link).
    """

    def __init__(self, params, credits=256, isa_depth=256, *, nvls=False, push=False):
        self.check_options(params, credits, isa_depth, nvls, push)
        pkt = packet_signature(params)
        members = {
            "link":         Out(link_end_signature(params)),
            "isa_rx":       Out(pkt).array(NUM_CLASSES),
            "isa_tx":       In(pkt).array(NUM_CLASSES),
            "core_rx":      Out(pkt).array(NUM_CLASSES),
            "core_tx":      In(pkt).array(NUM_CLASSES),
            "errors":       Out(error_layout()),
            "overflow":     Out(1),
            "credit_error": Out(1),
        }
        if nvls:
            members.update({"nvls_rx": Out(pkt).array(NUM_CLASSES),
                            "nvls_tx": In(pkt).array(NUM_CLASSES)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        tp = m.submodules.transport = TransportPort(self._params, self._credits)
        connect(m, tp.link, flipped(self.link))
        m.d.comb += [self.overflow.eq(tp.overflow), self.credit_error.eq(tp.credit_error)]

        pulses = {kind: [] for kind in ERROR_KINDS}
        flits = self._params.flit_layout
        for c in range(NUM_CLASSES):
            cls = MsgClass(c).name.lower()
            flt = m.submodules[f"filter_{cls}"] = PacketFilter(self._params, c, nvls=self._nvls)
            isa_txq = m.submodules[f"isa_txq_{cls}"] = Queue(flits, self._isa_depth)
            arb = m.submodules[f"arbiter_{cls}"] = PacketArbiter(self._params,
                                                                 3 if self._nvls else 2)
            connect(m, tp.rx[c], flt.i)
            if self._push and c == MsgClass.WRITE.value:
                push_writes = flt.isa            # joined to the RDATA queue below; no queue here
                m.d.comb += self.isa_rx[c].valid.eq(0)
            else:
                isa_rxq = m.submodules[f"isa_rxq_{cls}"] = Queue(flits, self._isa_depth)
                if self._push and c == MsgClass.RDATA.value:
                    merge = m.submodules.isa_rx_merge = PacketArbiter(self._params, 2)
                    connect(m, flt.isa, merge.i[0])
                    connect(m, merge.o, isa_rxq.i)
                else:
                    connect(m, flt.isa, isa_rxq.i)
                connect(m, isa_rxq.o, flipped(self.isa_rx[c]))
            connect(m, flt.core, flipped(self.core_rx[c]))
            connect(m, flipped(self.isa_tx[c]), isa_txq.i)
            connect(m, isa_txq.o, arb.i[0])
            connect(m, flipped(self.core_tx[c]), arb.i[1])
            connect(m, arb.o, tp.tx[c])
            if self._nvls:
                # The NVLS engine's own queues: its traffic never waits behind the ISA's.
                nvls_rxq = m.submodules[f"nvls_rxq_{cls}"] = Queue(flits, self._isa_depth)
                nvls_txq = m.submodules[f"nvls_txq_{cls}"] = Queue(flits, self._isa_depth)
                connect(m, flt.nvls, nvls_rxq.i)
                connect(m, nvls_rxq.o, flipped(self.nvls_rx[c]))
                connect(m, flipped(self.nvls_tx[c]), nvls_txq.i)
                connect(m, nvls_txq.o, arb.i[2])
            for kind in ERROR_KINDS:
                pulses[kind].append(getattr(flt.error, kind))

        if self._push:
            connect(m, push_writes, merge.i[1])
        for kind in ERROR_KINDS:
            counter = getattr(self.errors, kind)
            m.d.sync += counter.eq(counter + sum(pulses[kind]))
        return m
