"""CreditTx: per-class credit counters and the flit-level class multiplexer onto a link."""

from amaranth.hdl import Module, Signal
from amaranth.lib.wiring import In, Out

from ..packet import NUM_CLASSES
from .round_robin import round_robin
from .signature import (CreditedComponent, check_params, check_credits, packet_signature,
                        link_flit_signature, credit_signature)


__all__ = ["CreditTx"]


class CreditTx(CreditedComponent):
    """Sends per-class packet streams over one credit link, one flit per cycle at most.

    Each class ``c`` has a credit counter that starts at ``credits`` (the depth, in flits, of the
    receiver's class-``c`` queue), goes down by one for every flit sent in class ``c`` and up by one
    for every credit returned on ``tx_credit``. A flit is never sent without a credit, so the
    receiver can never overflow.

    Classes interleave at *flit* granularity on the link (per-flit round robin among the classes
    that have a flit and a credit), like virtual channels: a class that runs out of credits in the
    middle of a packet never blocks another class. Packet-level arbitration (which packet goes next
    within a class) is therefore done per class upstream, never here.

    Latency: a flit accepted on ``i[c]`` in cycle ``t`` is on ``tx`` in cycle ``t + 1`` (registered
    output). A credit on ``tx_credit`` in cycle ``t`` can be spent in cycle ``t + 1``.

    Parameters
    ----------
    params : FabricParams
    credits : int
        Initial credits per class (>= 2).

    Members
    -------
    i : In(packet_signature).array(NUM_CLASSES)
        Per-class packet streams to send.
    tx : Out(link_flit_signature)
        Flits onto the link (valid only).
    tx_credit : In(credit_signature)
        Credit returns from the receiver.
    available : Out(range(credits + 1)).array(NUM_CLASSES)
        Current credits per class (for tests and debug): back at ``credits`` once the link is idle.
    credit_error : Out(1)
        Sticky: a credit came back while the counter was already full (a protocol violation by the
        receiver). Stays 0 on a correct link.
    """

    def __init__(self, params, credits=256):
        self._params = check_params(params)
        self._credits = check_credits(credits)
        super().__init__({
            "i":            In(packet_signature(params)).array(NUM_CLASSES),
            "tx":           Out(link_flit_signature(params)),
            "tx_credit":    In(credit_signature()),
            "available":    Out(range(credits + 1)).array(NUM_CLASSES),
            "credit_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()

        counts = [Signal(range(self._credits + 1), init=self._credits, name=f"count{c}")
                  for c in range(NUM_CLASSES)]
        requests = [self.i[c].valid & (counts[c] != 0) for c in range(NUM_CLASSES)]
        last = Signal(range(NUM_CLASSES))
        grant, any_ = round_robin(m, requests, last)

        for c in range(NUM_CLASSES):
            m.d.comb += [
                self.i[c].ready.eq(any_ & (grant == c)),
                self.available[c].eq(counts[c]),
            ]
            spend = self.i[c].valid & self.i[c].ready
            ret = self.tx_credit.valid & self.tx_credit.payload[c]
            with m.If(ret & ~spend):
                m.d.sync += counts[c].eq(counts[c] + 1)
                with m.If(counts[c] == self._credits):
                    m.d.sync += self.credit_error.eq(1)
            with m.Elif(spend & ~ret):
                m.d.sync += counts[c].eq(counts[c] - 1)

        # Registered output: the link sees at most one flit per cycle, and the long wires to the
        # SerDes start from a flop.
        m.d.sync += self.tx.valid.eq(any_)
        with m.If(any_):
            m.d.sync += last.eq(grant)
        with m.Switch(grant):
            for c in range(NUM_CLASSES):
                with m.Case(c):
                    m.d.sync += [
                        self.tx.payload.flit.eq(self.i[c].payload),
                        self.tx.payload.msg_class.eq(c),
                    ]
        return m
