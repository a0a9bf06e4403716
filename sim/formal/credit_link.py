"""Formal harness of the credit transport: CreditTx -> Link -> CreditRx, one direction."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...hdl.packet import FabricParams, NUM_CLASSES
from ...hdl.params import check_int
from ...hdl.transport import CreditRx, CreditTx, Link, packet_signature, check_credits
from .properties import check_broken, OpenBlock, Properties, stream_contract


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

    With ``track_order`` the harness states one property instead, ``in_order`` (the others are
    proved unbounded without it): within a class, flits leave the receiver in the order they
    entered the sender, none lost, duplicated or made up, checked on one symbolic tracked flit of
    class 0 (:meth:`_track`).

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
    with ``track_order`` ``reused_credit_delivered`` (the tracked flit, sent on a credit that
    came home, delivered: the bounded check's depth must reach it).

    Parameters
    ----------
    credits : int
        Credits per class and depth of each receive queue (>= 2).
    latency : int
        One-way link latency in cycles (>= 1).
    invariants : bool
        State the invariants (for k-induction); broken variants leave them out.
    track_order : bool
        Check the order of delivery (``in_order``) alone. The tracked flit sits in the receive
        queues' memory, which no invariant reaches, so this is for bounded checks.
    broken : None or str
        A deliberately broken variant, which the flow must show failing one of its target
        properties (``PROPERTY_SETS`` in :mod:`.prover`):

        * ``"ignores_credits"``: the sender's credit counters are tied to ``credits``
          (:meth:`OpenBlock.tie`), so it sends whenever it has a flit, as if it had no credit
          check;
        * ``"excess_credits"``: the sender starts with ``credits + 1`` credits against a queue of
          ``credits`` (a mis-sized peer);
        * ``"stuck_read_pointer"`` (for ``track_order``, which must show ``in_order`` failing):
          the class-0 receive queue's read pointer is tied to 0, so it reads its first entry
          again and again (a FIFO that forgets to advance).

    Members
    -------
    tx : In(packet_signature).array(NUM_CLASSES)
        What the environment sends.
    rx : Out(packet_signature).array(NUM_CLASSES)
        What the receiver delivers.

    """

    BROKEN = ("ignores_credits", "excess_credits", "stuck_read_pointer")

    def __init__(self, *, credits=3, latency=1, invariants=True, track_order=False, broken=None):
        self._credits = check_credits(credits)
        self._latency = check_int("latency", latency, 1)
        self._invariants = bool(invariants)
        self._track_order = bool(track_order)
        check_broken(broken, self.BROKEN)
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
        if self._broken == "stuck_read_pointer":
            crx_open.tie("queue0.consume", 0)
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

        if self._track_order:
            # The in-order check states in_order alone: every other property is proved
            # unbounded, for the same credits and latency, by the set credit_link.
            for c in range(NUM_CLASSES):
                stream_contract(m, p, self.tx[c], f"tx{c}", drives="environment")
                self._track(m, c, self._cover_window(m, c, ctx, crx_open))
        else:
            p.spec(m, "no_overflow", ~crx.overflow)
            p.spec(m, "no_credit_error", ~ctx.credit_error)
            for c in range(NUM_CLASSES):
                self._class_properties(m, c, ctx, link, crx, crx_open)
        self._cover_interleave(m, ctx)
        return m

    def _class_properties(self, m, c, ctx, link, crx, crx_open):
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

        self._cover_window(m, c, ctx, crx_open)

    def _cover_window(self, m, c, ctx, crx_open):
        """The covers of a class's credit window; returns ``(sent, sent_count)``: the class's
        flit accepted by the sender in this cycle, and the number accepted before it."""
        p, C, L = self.properties, self._credits, self._latency
        sent = ctx.i[c].valid & ctx.i[c].ready
        # A flit counter wide enough for two windows: the covers count past C.
        width = (4 * C + 2 * L + 8).bit_length()
        sent_count = Signal(width, name=f"sent_count{c}")
        with m.If(sent & (sent_count != (1 << width) - 1)):
            m.d.sync += sent_count.eq(sent_count + 1)
        p.cover(m, "window_exhausted", self.tx[c].valid & (ctx.available[c] == 0))
        p.cover(m, "queue_full", crx_open.probe(f"queue{c}.level") == C)
        p.cover(m, "credit_reused", sent_count > C)
        return sent, sent_count

    def _track(self, m, c, counted):
        """``in_order`` on class 0 with one symbolic tracked flit; the other classes' data at 0.

        The environment may mark one class-0 flit (data bit 0; the solver chooses which, so the
        bounded check covers every choice). The harness counts the flits sent before it that
        have not yet left the receiver (``ahead``): the marked flit must leave when ``ahead`` is
        0 (after every earlier flit, none lost), exactly once, and no unmarked flit may leave
        when ``ahead`` is 0 before it (none made up, duplicated, or overtaking it). A flit lost,
        duplicated or reordered at any position fails for the mark put at that position, in the
        cycle a check that numbers every flit would fail, with one data bit through the queues
        instead of a number."""
        p, C = self.properties, self._credits
        sent, sent_count = counted
        tx, rx = self.tx[c], self.rx[c]
        data = tx.payload.data
        if c != 0:
            # Class 1 carries traffic to interleave with class 0 on the link; classes 2 and 3
            # are idle. The classes' queues and counters are copies of one another (one loop in
            # CreditTx and CreditRx), and the transport never reads a data bit, so these
            # assumptions restrict nothing it does; they keep the solver's state small.
            p.assume(m, "tx_data_zero", ~tx.valid | (data == 0))
            if c >= 2:
                p.assume(m, "two_classes_only", ~tx.valid)
            return
        p.assume(m, "tx_data_is_the_mark", ~tx.valid | (data[1:] == 0))
        marked_in, marked_out = data[0], rx.payload.data[0]
        mark_sent = Signal(name="mark_sent")
        mark_delivered = Signal(name="mark_delivered")
        mark_after_window = Signal(name="mark_after_window")
        ahead = Signal(range(4 * C + 8), name="ahead")
        p.assume(m, "one_mark", ~tx.valid | ~marked_in | ~mark_sent)
        delivered = rx.valid & rx.ready
        with m.If(sent & marked_in):
            m.d.sync += [mark_sent.eq(1), mark_after_window.eq(sent_count >= C)]
        with m.If(delivered & marked_out):
            m.d.sync += mark_delivered.eq(1)
        count_in = sent & ~marked_in & ~mark_sent
        count_out = delivered & ~marked_out & ~mark_delivered & (ahead != 0)
        m.d.sync += ahead.eq(ahead + count_in - count_out)
        p.spec(m, "in_order", ~delivered | ~marked_out
               | (mark_sent & ~mark_delivered & (ahead == 0)))
        p.spec(m, "in_order", ~delivered | marked_out | mark_delivered | (ahead != 0))
        # The mark on a flit sent on a credit that came home (flit C + 1 or later), delivered:
        # the bounded check's depth must reach it (docs/VERIFICATION.md).
        p.cover(m, "reused_credit_delivered", delivered & marked_out & mark_after_window)

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
