"""Formal harness of the ISA write-back's WriteTags: the outstanding-write table, the tag check."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import connect, flipped

from ...hdl.isa.descriptor import WRITE_TAG_BITS, write_tag_layout
from ...hdl.isa.interfaces import COUNTER_BITS
from ...hdl.isa.writeback import WriteTags
from ...hdl.packet import Opcode, Status
from ...hdl.params import check_int
from .properties import check_broken, OpenBlock, Properties
from .small_isa import small_isa


__all__ = ["WriteTagsHarness"]


class WriteTagsHarness(wiring.Component):
    """:class:`~scin.hdl.isa.writeback.WriteTags` with its properties.

    The fabric is the smallest the ISA accepts: 64-bit flits, ``ports`` ports and a 9-bit tag,
    so a write tag is its 5-bit table index and 4 sequence bits (the fewest the ISA allows,
    ``MIN_TAG_SEQ_BITS``): the sequence wraps after 16 rounds of the table.

    The environment sends anything on every port's ``wresp`` stream (any opcode, tag and status,
    packets of any length, any cycle: the stream is never back-pressured), and drives the
    write-back's side as :class:`~scin.hdl.isa.writeback.WriteBack` does: ``start`` only when
    ``free`` and never with ``flush``; ``mask``, ``flush`` and ``clear_error`` freely.

    The harness keeps the specification's table: per port ``p`` and entry ``e``, whether a write
    is outstanding there and the ``seq`` of the write it holds (set by a ``start`` whose ``mask``
    has ``p``, at the start's tag, which the harness counts itself). A response *hits* when it is
    a header (framed by ``last``), its opcode is ``WRITE_RESP``, its port has entry ``tag.index``
    outstanding, its ``tag.seq`` is that write's and ``flush`` is low. Everything else is a
    stale (an earlier round's write at that entry), duplicate (an entry already answered),
    unknown (never sent to that port) or otherwise bad response.

    Specification:

    * ``accepts_only_current``: ``progress`` is high exactly when some port's header hits: a
      stale, duplicate or unknown tag is never accepted.
    * ``rest_counted``: ``counters.unknown_wresps`` counts exactly the headers that do not hit
      (modulo 2**32).
    * ``entries_match``: ``free`` is high exactly when entry ``tag.index`` is free at every port
      (whatever ``mask``: a port outside it may still owe the entry's previous write), and
      ``outstanding`` exactly when some entry is outstanding somewhere: an accepted response frees
      its own entry and a rejected one frees none.
    * ``tag_counts_starts``: ``tag`` is the number of ``start`` pulses, modulo 2**tag_width.
    * ``error_on_bad_status``: ``error`` is set by a hit whose status is not ``OK`` and cleared
      by ``clear_error`` (which wins), and by nothing else.

    Invariants (read inside the block): its per-port pending bits and its per-port framing equal
    the harness's, and every outstanding entry holds the ``seq`` the block's rule derives from
    the tag (the current round below ``tag.index``, the round before from it on).

    Covers: ``current_tag_accepted``, ``stale_tag_rejected`` (a WRITE_RESP naming an outstanding
    entry with another round's ``seq``, as a late response to the entry's previous write does,
    counted), ``duplicate_rejected`` (a second response to a write already answered on that
    port, counted), ``error_set``. (A response in the table's second round needs 33 starts
    first: k-induction covers every round, but a cover of it would need a 35-cycle search.)

    Parameters
    ----------
    ports : int
        Switch ports (2 to 4).
    invariants : bool
        State the invariants (for k-induction); broken variants leave them out.
    broken : None or str
        A deliberately broken variant (:meth:`OpenBlock.tie`): ``"tag_unchecked"``, each port's
        accept decision tied to "a ``WRITE_RESP`` header and no flush" (the whole tag check
        removed); ``"seq_unchecked"``, the round the block expects tied to the response's own
        ``seq`` (only the index is checked, so a stale response is accepted).
        ``accepts_only_current`` or ``rest_counted`` must fail. (An entry freed while a port
        outside ``mask`` still owes it needs 33 writes from reset to show, too deep for a
        bounded check: ``tb/unit/test_isa_blocks.py`` drives that case.)

    Members
    -------
    Those of :class:`~scin.hdl.isa.writeback.WriteTags` (``wresp``, ``mask``, ``start``,
    ``flush``, ``clear_error``, ``tag``, ``free``, ``error``, ``outstanding``, ``progress``,
    ``counters``), with the same directions: the environment drives the inputs.
    """

    BROKEN = ("tag_unchecked", "seq_unchecked")

    def __init__(self, *, ports=2, invariants=True, broken=None):
        check_int("ports", ports, 2, 4)
        check_broken(broken, self.BROKEN)
        self._params = small_isa(ports=ports, max_payload=4096)
        self._broken = broken
        self.properties = Properties(invariants=invariants)
        # The block's own ports, driven by the environment and read by the properties.
        super().__init__(WriteTags(self._params).signature)

    def elaborate(self, platform):
        m = Module()
        p, params = self.properties, self._params
        f = params.fabric
        n, hdr_layout = f.ports, f.header_layout
        tag_layout = write_tag_layout(params)
        ntags, seq_bits = 1 << WRITE_TAG_BITS, params.write_seq_bits

        wo = self._attach(m, platform)

        # The specification's table and tag counter.
        count = Signal(f.tag_width)                      # starts so far
        widx, wseq = count[:WRITE_TAG_BITS], count[WRITE_TAG_BITS:]
        pend = [Signal(ntags, name=f"spec_pending{i}") for i in range(n)]
        held = [[Signal(seq_bits, name=f"spec_seq{i}_{e}") for e in range(ntags)] for i in range(n)]
        p.assume(m, "start_only_when_free", ~self.start | (self.free & ~self.flush))
        with m.If(self.start):
            m.d.sync += count.eq(count + 1)
        p.spec(m, "tag_counts_starts", self.tag.as_value() == count)

        hits, heads = [], []
        unknown = Signal(COUNTER_BITS)
        error = Signal()
        for i in range(n):
            rx = self.wresp[i]
            p.assume(m, "never_backpressured", rx.ready)
            in_body = Signal(name=f"spec_body{i}")
            with m.If(rx.valid):
                m.d.sync += in_body.eq(~rx.payload.last)
            p.invariant(m, "framing_matches", wo.probe(f"wresp_body{i}") == in_body)
            rhdr = data.View(hdr_layout, rx.payload.data[:hdr_layout.size])
            rtag = data.View(tag_layout, rhdr.tag)
            head = rx.valid & ~in_body
            hit = Signal(name=f"spec_hit{i}")
            m.d.comb += hit.eq(head & (rhdr.opcode == Opcode.WRITE_RESP) & ~self.flush
                               & pend[i].bit_select(rtag.index, 1)
                               & (rtag.seq == Array(held[i])[rtag.index]))
            hits.append(hit)
            heads.append((head, rhdr, rtag))
            with m.If(hit & (rhdr.status != Status.OK)):
                m.d.sync += error.eq(1)
            set_bit = Mux(self.start & self.mask[i], Const(1, ntags) << widx, 0)
            clr_bit = Mux(hit, Const(1, ntags) << rtag.index, 0)
            with m.If(self.flush):
                m.d.sync += pend[i].eq(0)
            with m.Else():
                m.d.sync += pend[i].eq((pend[i] | set_bit) & ~clr_bit)
            with m.If(self.start & self.mask[i]):
                m.d.sync += Array(held[i])[widx].eq(wseq)
            p.invariant(m, "pending_matches", wo.probe(f"pending{i}") == pend[i])
            for e in range(ntags):
                # The block's rule: an entry below the next index holds this round's write, the
                # others the round before's.
                want = Signal(seq_bits, name=f"spec_want{i}_{e}")
                m.d.comb += want.eq(wseq - (e >= widx))
                p.invariant(m, "held_seq_is_derivable", ~pend[i][e] | (held[i][e] == want))
        with m.If(self.clear_error):
            m.d.sync += error.eq(0)
        misses = sum(head & ~hit for hit, (head, _, _) in zip(hits, heads))
        m.d.sync += unknown.eq(unknown + misses)

        p.spec(m, "accepts_only_current", self.progress == Cat(hits).any())
        p.spec(m, "rest_counted", self.counters.unknown_wresps == unknown)
        p.spec(m, "entries_match", self.free == Cat(
            ~pend[i].bit_select(widx, 1) for i in range(n)).all())
        p.spec(m, "entries_match", self.outstanding == Cat(pend).any())
        p.spec(m, "error_on_bad_status", self.error == error)

        self._covers(m, hits, heads, pend, held, widx)
        return m

    def _attach(self, m, platform):
        """The block (with the broken variant's tie, if any), its ports joined to the
        harness's. Returns the open block."""
        params = self._params
        hdr_layout = params.fabric.header_layout
        tag_layout = write_tag_layout(params)
        wt = WriteTags(params)
        m.submodules.tags = wo = OpenBlock(wt, platform)
        for i in range(params.fabric.ports):
            rx = wt.wresp[i].payload.data[:hdr_layout.size]
            rhdr = data.View(hdr_layout, rx)
            if self._broken == "tag_unchecked":
                wo.tie(f"wresp_ok{i}", wt.wresp[i].valid & ~wo.probe(f"wresp_body{i}")
                       & (rhdr.opcode == Opcode.WRITE_RESP) & ~wt.flush)
            elif self._broken == "seq_unchecked":
                wo.tie(f"wresp_seq{i}", tag_layout(rhdr.tag).seq)
            connect(m, flipped(self.wresp[i]), wt.wresp[i])
        m.d.comb += [wt.mask.eq(self.mask), wt.start.eq(self.start), wt.flush.eq(self.flush),
                     wt.clear_error.eq(self.clear_error), self.tag.eq(wt.tag),
                     self.free.eq(wt.free), self.error.eq(wt.error),
                     self.outstanding.eq(wt.outstanding), self.progress.eq(wt.progress),
                     self.counters.eq(wt.counters)]
        return wo

    def _covers(self, m, hits, heads, pend, held, widx):
        """The covers: a current tag accepted, a stale one and a duplicate rejected, the error
        set (``pend``, ``held``: the specification's table; ``widx``: the next entry)."""
        p, ntags = self.properties, 1 << WRITE_TAG_BITS
        answered = [Signal(ntags, name=f"spec_answered{i}") for i in range(len(hits))]
        for i, (hit, (head, rhdr, rtag)) in enumerate(zip(hits, heads)):
            is_resp = head & (rhdr.opcode == Opcode.WRITE_RESP) & ~self.flush
            p.cover(m, "current_tag_accepted", hit & self.progress)
            p.cover(m, "stale_tag_rejected",
                    is_resp & pend[i].bit_select(rtag.index, 1)
                    & (rtag.seq != Array(held[i])[rtag.index]) & ~self.progress)
            # A write already answered at this port, its entry not reused since.
            with m.If(hit):
                m.d.sync += answered[i].bit_select(rtag.index, 1).eq(1)
            with m.If(self.start):
                m.d.sync += answered[i].bit_select(widx, 1).eq(0)
            p.cover(m, "duplicate_rejected",
                    is_resp & answered[i].bit_select(rtag.index, 1)
                    & (rtag.seq == Array(held[i])[rtag.index]) & ~self.progress)
        p.cover(m, "error_set", self.error)
