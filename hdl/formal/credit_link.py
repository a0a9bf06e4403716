"""Formal harness of the credit transport: CreditTx -> Link -> CreditRx, one direction."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ..packet import FabricParams, NUM_CLASSES
from ..params import check_choice, check_int
from ..transport import CreditRx, CreditTx, Link, packet_signature, check_credits
from .properties import OpenBlock, Properties, stream_contract


__all__ = ["CreditLinkHarness", "FORMAL_FABRIC"]

#: The smallest fabric: 64-bit flits. Nothing in the transport looks at a flit's bits (only at
#: ``valid``, ``ready`` and the class), so the flit width changes no property, only solver time.
FORMAL_FABRIC = FabricParams.default_for(64, ports=2)


class CreditLinkHarness(wiring.Component):
    """A sender, a link and a receiver, with the credit protocol's properties.

    ``CreditTx(credits)`` sends on ``Link(latency)`` into ``CreditRx(credits)``; the link's other
    direction is idle. The environment (the solver) offers packets on every class of ``tx``,
    keeping the stream contract, and takes them from ``rx`` with any ``ready`` pattern. ``C`` is
    ``credits``, ``L`` the link latency; everything below holds for every class ``c``.

    Specification (asserted in every cycle):

    * ``no_send_without_credit``: the sender accepts a class-``c`` flit only while it holds a
      class-``c`` credit.
    * ``credits_within_free_space``: the sender's credits never exceed the receiver's free
      space less the flits already on their way to it:
      ``available + flits in flight + queued <= C``.
    * ``no_overflow``: the receiver's queue never overflows (its sticky ``overflow`` stays 0).
    * ``no_credit_error``: no credit comes back that was not spent (``credit_error`` stays 0).
    * ``link_delivers_only_what_was_sent`` (flits and credits): nothing arrives at either end of
      the link that was not sent into it.
    * ``rx_contract``: every receive stream keeps the stream contract.
    * (with ``track_order``) ``in_order``: within a class, flits leave the receiver in the order
      they entered the sender, none lost and none duplicated. The environment numbers each class's
      flits in the low 8 data bits (1, 2, 3, ...; the transport never reads a data bit, so the
      numbering restricts no behaviour of it) and the harness checks the numbers coming out.

    Invariants (the induction's strengthening): ``credit_conservation``, every credit is in
    exactly one place, ``available + flits in flight + queued + credits in flight == C``
    (flits in flight: CreditTx's output register and the link; queued: the receive queue's level,
    read inside CreditRx; credits in flight: CreditRx's credit register and the link). The
    harness counts what is in the link from its two ends: what enters it leaves it exactly ``L``
    cycles later, so a count that disagrees with the link's contents shows within ``L`` cycles,
    which a k-induction of depth ``k > L`` sees.

    Covers: ``window_exhausted`` (the sender wants to send but all ``C`` credits are out),
    ``queue_full`` (all ``C`` flits queued at the receiver: the whole window at once),
    ``credit_reused`` (a class has sent more than ``C`` flits: a credit came home and was spent
    again), ``classes_interleaved`` (flits of two classes on the link in consecutive cycles), and
    with ``track_order`` ``reused_credit_delivered`` (flit ``C + 1`` delivered: the bounded
    check's depth must reach it). With ``track_order`` the environment also keeps every data bit
    above the number at 0 and two classes idle, which restricts nothing the transport does (it
    reads no data bit, and its classes are copies of one another) and keeps the check to minutes.

    Parameters
    ----------
    credits : int
        Credits per class and depth of each receive queue (>= 2).
    latency : int
        One-way link latency in cycles (>= 1).
    invariants : bool
        State the invariants (for k-induction); broken variants leave them out.
    track_order : bool
        Number the flits and check their order (``in_order``). The numbers sit in the receive
        queues' block RAM, which no invariant reaches, so this is for bounded checks.
    broken : None or str
        A deliberately broken variant, which the flow must show failing
        ``credits_within_free_space`` and ``no_overflow``:

        * ``"ignores_credits"``: the sender's credit counters are tied to ``credits``
          (:meth:`OpenBlock.tie`), so it sends whenever it has a flit, as if it had no credit
          check;
        * ``"excess_credits"``: the sender starts with ``credits + 1`` credits against a queue of
          ``credits`` (a mis-sized peer).

    Members
    -------
    tx : In(packet_signature).array(NUM_CLASSES)
        What the environment sends.
    rx : Out(packet_signature).array(NUM_CLASSES)
        What the receiver delivers.

    """

    BROKEN = ("ignores_credits", "excess_credits")

    def __init__(self, *, credits=3, latency=1, invariants=True, track_order=False, broken=None):
        self._credits = check_credits(credits)
        self._latency = check_int("latency", latency, 1)
        self._invariants = bool(invariants)
        self._track_order = bool(track_order)
        if broken is not None:
            check_choice("broken", broken, self.BROKEN)
        self._broken = broken
        self.properties = Properties(invariants=self._invariants)
        sig = packet_signature(FORMAL_FABRIC)
        super().__init__({
            "tx": In(sig).array(NUM_CLASSES),
            "rx": Out(sig).array(NUM_CLASSES),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.properties
        params, C, L = FORMAL_FABRIC, self._credits, self._latency
        sender_credits = C + 1 if self._broken == "excess_credits" else C

        ctx = CreditTx(params, sender_credits)
        m.submodules.ctx = ctx_open = OpenBlock(ctx, platform)
        if self._broken == "ignores_credits":
            for c in range(NUM_CLASSES):
                ctx_open.tie(f"count{c}", C)
        m.submodules.link = link = Link(params, L)
        crx = CreditRx(params, C)
        m.submodules.crx = crx_open = OpenBlock(crx, platform)
        for c in range(NUM_CLASSES):
            connect(m, flipped(self.tx[c]), ctx.i[c])
            connect(m, crx.o[c], flipped(self.rx[c]))
        m.d.comb += [
            link.a.tx.valid.eq(ctx.tx.valid), link.a.tx.payload.eq(ctx.tx.payload),
            ctx.tx_credit.valid.eq(link.a.tx_credit.valid),
            ctx.tx_credit.payload.eq(link.a.tx_credit.payload),
            crx.rx.valid.eq(link.b.rx.valid), crx.rx.payload.eq(link.b.rx.payload),
            link.b.rx_credit.valid.eq(crx.rx_credit.valid),
            link.b.rx_credit.payload.eq(crx.rx_credit.payload),
        ]

        p.spec(m, "no_overflow", ~crx.overflow)
        p.spec(m, "no_credit_error", ~ctx.credit_error)
        # A flit counter wide enough for two windows: the covers count past C.
        width = (4 * C + 2 * L + 8).bit_length()
        for c in range(NUM_CLASSES):
            self._class_properties(m, c, ctx, link, crx, crx_open, width)
        self._cover_interleave(m, ctx)
        return m

    def _class_properties(self, m, c, ctx, link, crx, crx_open, width):
        p, C, L = self.properties, self._credits, self._latency
        stream_contract(m, p, self.tx[c], f"tx{c}", drives="environment")
        stream_contract(m, p, self.rx[c], f"rx{c}", drives="block")

        available = ctx.available[c]
        queued = crx_open.probe(f"queue{c}.level")
        # The queue's level is its inner FIFO's level plus its output register; an inner level
        # above the inner depth (a 2-bit register can hold 3 for a depth of 2) wraps the sum.
        depth = crx_open.submodule(f"queue{c}").depth
        p.invariant(m, "queue_level_in_range",
                    crx_open.probe(f"queue{c}.inner_level") <= depth - 1)
        sent = ctx.i[c].valid & ctx.i[c].ready
        p.spec(m, "no_send_without_credit", ~sent | (available != 0))

        # What is in the link: the harness keeps its own L-stage copy of the valid bits and
        # classes that entered it, and the link must deliver the copy's last stage.
        link_in = ctx.tx.valid & (ctx.tx.payload.msg_class.as_value() == c)
        credit_in = crx.rx_credit.valid & crx.rx_credit.payload[c]
        flit_stages = _shadow_delay(m, link_in, L, f"flit_stage{c}")
        credit_stages = _shadow_delay(m, credit_in, L, f"credit_stage{c}")
        link_out = link.b.rx.valid & (link.b.rx.payload.msg_class.as_value() == c)
        credit_out = link.a.tx_credit.valid & link.a.tx_credit.payload[c]
        p.spec(m, "link_delivers_what_was_sent", link_out == flit_stages[-1])
        p.spec(m, "link_delivers_what_was_sent", credit_out == credit_stages[-1])
        flits_in_link = sum(flit_stages)
        credits_in_link = sum(credit_stages)

        total = Signal(range(4 * C + 2 * L + 4), name=f"credit_total{c}")
        flits = available + link_in + flits_in_link + queued
        m.d.comb += total.eq(flits + credit_in + credits_in_link)
        p.spec(m, "credits_within_free_space", flits <= C)
        p.invariant(m, "credit_conservation", total == C)

        sent_count = Signal(width, name=f"sent_count{c}")
        with m.If(sent & (sent_count != (1 << width) - 1)):
            m.d.sync += sent_count.eq(sent_count + 1)
        p.cover(m, "window_exhausted", self.tx[c].valid & (available == 0))
        p.cover(m, "queue_full", queued == C)
        p.cover(m, "credit_reused", sent_count > C)

        if self._track_order:
            # Every other data bit is 0: the transport never reads a data bit, so this restricts
            # none of its behaviour, and the solver does not carry 56 free bits through every
            # queue entry. Two classes carry traffic, the others are idle: the classes' queues
            # are copies of one another, and two are enough to interleave on the link.
            data = self.tx[c].payload.data
            p.assume(m, "tx_data_is_the_number", ~self.tx[c].valid | (data[8:] == 0))
            if c >= 2:
                p.assume(m, "two_classes_only", ~self.tx[c].valid)
            # The environment numbers the flits it sends (1, 2, ...: 0 never appears, so an
            # empty register read out by mistake shows); the receiver must deliver the same.
            seq_in = Signal(8, init=1, name=f"seq_in{c}")
            seq_out = Signal(8, init=1, name=f"seq_out{c}")
            with m.If(sent):
                m.d.sync += seq_in.eq(seq_in + 1)
            with m.If(self.rx[c].valid & self.rx[c].ready):
                m.d.sync += seq_out.eq(seq_out + 1)
            p.assume(m, "tx_numbered", ~self.tx[c].valid | (self.tx[c].payload.data[:8] == seq_in))
            p.spec(m, "in_order", ~self.rx[c].valid | (self.rx[c].payload.data[:8] == seq_out))
            # The first flit sent on a credit that came home: the bounded check's depth must
            # reach the cycle it is delivered (docs/VERIFICATION.md).
            p.cover(m, "reused_credit_delivered",
                    self.rx[c].valid & (self.rx[c].payload.data[:8] == C + 1))

    def _cover_interleave(self, m, ctx):
        p = self.properties
        was_class = Signal(2)
        was_valid = Signal()
        m.d.sync += [was_valid.eq(ctx.tx.valid), was_class.eq(ctx.tx.payload.msg_class.as_value())]
        p.cover(m, "classes_interleaved", was_valid & ctx.tx.valid & ~ctx.tx.payload.flit.last
                & (ctx.tx.payload.msg_class.as_value() != was_class))


def _shadow_delay(m, value, latency, name):
    """``latency`` registers in a row, the first loaded with ``value``: the harness's copy of what
    a :class:`DelayLine` of that latency holds. Stage ``k`` holds ``value`` of ``k + 1`` cycles
    ago; the last one what the line delivers now."""
    stages = [Signal(name=f"{name}_{k}") for k in range(latency)]
    m.d.sync += stages[0].eq(value)
    m.d.sync += [stages[k].eq(stages[k - 1]) for k in range(1, latency)]
    return stages
