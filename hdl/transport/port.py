"""TransportPort: one end of a credit link (CreditTx + CreditRx)."""

from amaranth.hdl import Module
from amaranth.lib.wiring import In, Out, connect, flipped

from ..packet import NUM_CLASSES
from .credit_rx import CreditRx
from .credit_tx import CreditTx
from .signature import (CreditedComponent, check_params, check_credits, packet_signature,
                        link_end_signature)


__all__ = ["TransportPort", "TRANSPORT_LATENCY", "CREDIT_LOOP_OVERHEAD", "credits_for_full_rate"]

#: Cycles the transport RTL adds to a one-way trip, user stream to user stream, on top of the
#: link's own latency: 1 in CreditTx (registered link output) + 2 in CreditRx (block-RAM queue
#: write, then its output register). A flit accepted on ``tx[c]`` in cycle ``t`` is offered on the
#: peer's ``rx[c]`` in cycle ``t + latency + TRANSPORT_LATENCY`` (measured by
#: tb/block/test_transport.py).
TRANSPORT_LATENCY = 3

#: Cycles a credit is away besides the two link traversals: TX output register (1) + RX queue (2)
#: + registered credit return (1) + counter update (1). A credit spent in cycle ``t`` can be spent
#: again in cycle ``t + 2 * latency + CREDIT_LOOP_OVERHEAD`` at the earliest.
CREDIT_LOOP_OVERHEAD = 5


def credits_for_full_rate(latency):
    """Credits per class a link of one-way ``latency`` cycles needs to sustain one flit per cycle in
    one class: the credit round trip, ``2 * latency + CREDIT_LOOP_OVERHEAD`` (145 for 70 cycles)."""
    return 2 * latency + CREDIT_LOOP_OVERHEAD


class TransportPort(CreditedComponent):
    """One end of a credit link: per-class packet streams on the user side, a link end on the other.

    Within a class, flits leave in the order they were accepted and arrive in the same order;
    classes interleave per flit on the link (see :class:`CreditTx`). With ``credits >=
    credits_for_full_rate(latency)`` a link sustains one flit per cycle; with fewer, a class is
    limited to ``credits / (2 * latency + CREDIT_LOOP_OVERHEAD)`` flits per cycle but stays correct.

    Parameters
    ----------
    params : FabricParams
    credits : int
        Depth of each receive queue in flits, and the credits the peer starts with. Both ends of a
        link must use the same value.

    Members
    -------
    tx : In(packet_signature).array(NUM_CLASSES)
        Per-class packets to send.
    rx : Out(packet_signature).array(NUM_CLASSES)
        Per-class packets received.
    link : Out(link_end_signature)
        The link end; connect it to a :class:`Link` end or straight to a peer's flipped link end.
    overflow : Out(1)
        Sticky receive-queue overflow (never rises on a correct link).
    credit_error : Out(1)
        Sticky: more credits came back than were spent (never rises on a correct link).
    available : Out(range(credits + 1)).array(NUM_CLASSES)
        Send credits per class.
    """

    def __init__(self, params, credits=256):
        self._params = check_params(params)
        self._credits = check_credits(credits)
        super().__init__({
            "tx":           In(packet_signature(params)).array(NUM_CLASSES),
            "rx":           Out(packet_signature(params)).array(NUM_CLASSES),
            "link":         Out(link_end_signature(params)),
            "overflow":     Out(1),
            "credit_error": Out(1),
            "available":    Out(range(credits + 1)).array(NUM_CLASSES),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.ctx = ctx = CreditTx(self._params, self._credits)
        m.submodules.crx = crx = CreditRx(self._params, self._credits)
        for c in range(NUM_CLASSES):
            connect(m, flipped(self.tx[c]), ctx.i[c])
            connect(m, crx.o[c], flipped(self.rx[c]))
            m.d.comb += self.available[c].eq(ctx.available[c])
        m.d.comb += [
            self.link.tx.valid.eq(ctx.tx.valid), self.link.tx.payload.eq(ctx.tx.payload),
            ctx.tx_credit.valid.eq(self.link.tx_credit.valid),
            ctx.tx_credit.payload.eq(self.link.tx_credit.payload),
            crx.rx.valid.eq(self.link.rx.valid), crx.rx.payload.eq(self.link.rx.payload),
            self.link.rx_credit.valid.eq(crx.rx_credit.valid),
            self.link.rx_credit.payload.eq(crx.rx_credit.payload),
            self.overflow.eq(crx.overflow),
            self.credit_error.eq(ctx.credit_error),
        ]
        return m
