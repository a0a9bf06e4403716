"""CreditRx: per-class receive queues in block RAM that return a credit for every flit they pop."""

from amaranth.hdl import Module, Signal
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..packet import NUM_CLASSES
from .signature import (CreditedComponent, check_params, check_credits, packet_signature,
                        link_flit_signature, credit_signature)


__all__ = ["CreditRx"]


class CreditRx(CreditedComponent):
    """Receives flits from a credit link into one queue per message class.

    Each class has a :class:`~amaranth.lib.fifo.SyncFIFOBuffered` of ``credits`` flits (a block RAM
    plus an output register; 3 flits for ``credits = 2``, see ``elaborate``). When a flit leaves a
    queue (a transfer on ``o[c]``), one class-``c`` credit goes back on ``rx_credit`` in the next
    cycle. The sender starts with ``credits`` credits, so a queue can never overflow; if it ever
    would (a sender that ignores credits), the flit is lost and the sticky ``overflow`` flag rises,
    which every testbench checks stays 0.

    Latency: a flit on ``rx`` in cycle ``t`` is valid on ``o[c]`` in cycle ``t + 2`` at the earliest
    (block-RAM write, then read into the output register).

    Parameters
    ----------
    params : FabricParams
    credits : int
        Queue depth per class, in flits (>= 2); equal to the sender's initial credits.

    Members
    -------
    rx : In(link_flit_signature)
        Flits from the link.
    rx_credit : Out(credit_signature)
        Credits back to the sender.
    o : Out(packet_signature).array(NUM_CLASSES)
        Per-class packet streams, in arrival order within each class.
    overflow : Out(1)
        Sticky: a flit arrived for a full queue. Never rises on a correct link.
    """

    def __init__(self, params, credits=256):
        self._params = check_params(params)
        self._credits = check_credits(credits)
        super().__init__({
            "rx":        In(link_flit_signature(params)),
            "rx_credit": Out(credit_signature()),
            "o":         Out(packet_signature(params)).array(NUM_CLASSES),
            "overflow":  Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        width = self._params.flit_layout.size
        popped = Signal(NUM_CLASSES)
        # A SyncFIFOBuffered of depth 2 refuses a write in the cycle after a write into it while
        # empty (its w_rdy is that of its one-entry inner FIFO, whose entry is still on its way to
        # the output register), so two back-to-back flits of a class overflowed a 2-credit queue;
        # from depth 3 up it takes a write whenever its level is below its depth (property set
        # credit_link_c2 of `scin prove` checks it, docs/VERIFICATION.md).
        depth = max(self._credits, 3)
        for c in range(NUM_CLASSES):
            fifo = m.submodules[f"queue{c}"] = SyncFIFOBuffered(width=width, depth=depth)
            w_en = self.rx.valid & (self.rx.payload.msg_class.as_value() == c)
            m.d.comb += [
                fifo.w_en.eq(w_en),
                fifo.w_data.eq(self.rx.payload.flit),
                self.o[c].valid.eq(fifo.r_rdy),
                self.o[c].payload.eq(fifo.r_data),
                fifo.r_en.eq(self.o[c].ready),
                popped[c].eq(fifo.r_rdy & fifo.r_en),
            ]
            with m.If(w_en & ~fifo.w_rdy):
                m.d.sync += self.overflow.eq(1)
        # Registered, so the credit path to the link starts from a flop.
        m.d.sync += [
            self.rx_credit.valid.eq(popped.any()),
            self.rx_credit.payload.eq(popped),
        ]
        return m
