"""Formal harness of the ISA's WaveTable: which read responses are taken, and what they fill."""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...hdl.isa.descriptor import ReadKind, read_tag_layout
from ...hdl.isa.interfaces import COUNTER_BITS, block_counters_layout
from ...hdl.isa.wave_table import WaveTable, arm_layout
from ...hdl.packet import Opcode, Status
from ...hdl.params import check_int
from ...hdl.transport import packet_signature
from .properties import check_broken, OpenBlock, Properties
from .small_isa import small_isa
from .table_spec import packet_registers, receive


__all__ = ["WaveTableHarness"]


class WaveTableHarness(wiring.Component):
    """:class:`~scin.hdl.isa.wave_table.WaveTable` with its properties.

    The fabric is small: 64-bit flits, ``ports`` ports, 32-byte packets (a slot of four data
    flits and one scale flit) and two slots; a read tag is its kind, its 1-bit slot and 7
    sequence bits. Nothing in the block looks at a data flit's bits, and every slot, port and
    kind is one copy of the same loop, so the small table restricts none of its decisions.

    The environment sends anything on every port's ``rdata`` stream (any opcode, tag, status and
    length, any number of flits whatever the header says, any cycle: the stream is never
    back-pressured), arms any slot with any mask, ``scales`` and ``seq`` in any cycle without
    ``flush`` (the read issuer does not arm while flushing), raises ``flush`` and ``clear_error``
    freely, and reads any slot through ``rd``.

    The harness keeps the specification's table: per slot its issue number, and per slot and
    port which packets (data, scales) are still expected, how many data flits are in and which
    packets have ended. A header *hits* when its opcode is ``READ_RESP``, its tag names an
    existing slot, the slot's current issue number and a (kind, port) the slot still expects,
    and ``flush`` is low. A hit packet is stored: its flits go to its slot, at most a slot's
    worth, and its ``last`` flit ends it (its kind is then no longer expected: a second response
    is a duplicate). Arming a slot starts it afresh: the rest of a packet being stored into it
    (a response longer than a slot, whose slot the feeder has already taken as complete) is
    dropped, so it can neither end nor fill the new use of the slot. Everything else is a late
    (another issue number), duplicate, unknown or otherwise bad response, dropped whole.

    Specification:

    * ``accepts_only_expected``: ``status.progress`` is high exactly when some port's header hits
      or some port takes a flit of a stored packet (outside a flush): a late, duplicate or
      unknown response is never taken.
    * ``rest_counted``: ``counters.unknown_tags`` counts exactly the headers that do not hit
      (modulo 2**32).
    * ``fills_only_from_hits``: for the slot ``rd.slot`` names, ``rd.avail[p]`` is the number of
      data flits stored from port ``p`` since the slot was armed (a slot's worth once the packet
      has ended), and ``rd.scales_done[p]`` says its scale packet has ended (or was not
      expected): a dropped response moves no slot's progress.
    * ``error_on_bad_status``: ``status.error`` is set by a hit whose status is not ``OK`` (also
      in the cycle of a ``run.clear_error``) and cleared by ``run.clear_error``, and by nothing
      else.

    Invariants (read inside the block): its per-port framing and stored-packet registers (kept,
    slot, kind, offset), and its per-slot issue numbers, expectations, counts and ends, equal
    the harness's.

    Covers: ``current_response_stored`` (a hit packet's last flit), ``late_response_dropped`` (a
    ``READ_RESP`` for a slot and kind still expected, with another issue number, counted),
    ``duplicate_dropped`` (a second response to a packet that has ended), ``slot_filled`` (a
    slot's data complete at a port through a hit), ``cut_through`` (a slot partly filled, as the
    feeder sees it), ``error_set``, ``overlong_tail_dropped`` (a slot re-armed while a response
    longer than a slot is still coming in).

    What it does not state: the data bits written to the block RAMs (the memories' write ports
    are enabled only for a stored packet's flits inside its slot, which ``fills_only_from_hits``
    and the ``keep`` invariant cover together; the bits themselves are checked bit for bit by
    the simulation tests).

    Parameters
    ----------
    ports : int
        Switch ports (2 to 4).
    invariants : bool
        State the invariants (for k-induction); broken variants leave them out.
    broken : None or str
        A deliberately broken variant (:meth:`OpenBlock.tie`): ``"seq_unchecked"``, port 0's
        accept decision tied to "a ``READ_RESP`` the slot expects, no flush" (the issue number
        not compared: a late response is stored); ``"framing_lost"``, port 0's in-packet
        register tied to 0, so every flit is taken for a header (a payload flit is then counted
        as a bad response, or taken for a response it is not).
        ``accepts_only_expected``, ``rest_counted`` or ``fills_only_from_hits`` must fail.

    Members
    -------
    rdata : In(packet_signature).array(ports)
    arm : In(arm_layout), arm_valid : In(1)
    rd_slot : In(slot_bits)
    flush, clear_error : In(1)
    avail : Out(range(slot_flits + 1)).array(ports)
    scales_done : Out(ports)
    error, progress : Out(1)
    counters : Out(unknown_tags)
    """

    BROKEN = ("seq_unchecked", "framing_lost")

    def __init__(self, *, ports=2, invariants=True, broken=None):
        check_int("ports", ports, 2, 4)
        check_broken(broken, self.BROKEN)
        self._params = small_isa(ports=ports, max_payload=32, slots=2)
        fabric = self._params.fabric
        self._broken = broken
        self.properties = Properties(invariants=invariants)
        p = self._params
        super().__init__({
            "rdata":       In(packet_signature(fabric)).array(ports),
            "arm":         In(arm_layout(p)),
            "arm_valid":   In(1),
            "rd_slot":     In(p.slot_bits),
            "flush":       In(1),
            "clear_error": In(1),
            "avail":       Out(range(p.slot_flits + 1)).array(ports),
            "scales_done": Out(ports),
            "error":       Out(1),
            "progress":    Out(1),
            "counters":    Out(block_counters_layout("unknown_tags")),
        })

    def elaborate(self, platform):
        m = Module()
        p, params = self.properties, self._params
        f = params.fabric
        n, slots, sf = f.ports, params.slots, params.slot_flits
        hdr_layout, tag_layout = f.header_layout, read_tag_layout(params)

        wt = WaveTable(params)
        m.submodules.table = wo = OpenBlock(wt, platform)
        self._break(wo, wt, tag_layout)
        for i in range(n):
            connect(m, flipped(self.rdata[i]), wt.rdata[i])
        m.d.comb += [wt.arm.valid.eq(self.arm_valid), wt.arm.payload.eq(self.arm),
                     wt.rd.slot.eq(self.rd_slot), wt.run.flush.eq(self.flush),
                     wt.run.clear_error.eq(self.clear_error),
                     self.scales_done.eq(Cat(wt.rd.scales_done)), self.error.eq(wt.status.error),
                     self.progress.eq(wt.status.progress), self.counters.eq(wt.counters)]
        m.d.comb += [self.avail[i].eq(wt.rd.avail[i]) for i in range(n)]
        p.assume(m, "no_arm_while_flushing", ~(self.arm_valid & self.flush))

        table = self._spec_table()
        count, data_done, scale_done = table.count, table.data_done, table.scale_done
        expect_data, expect_scale = table.expect_data, table.expect_scale
        seq = Array(Signal(params.read_seq_bits, name=f"spec_seq_s{s}") for s in range(slots))
        unknown, error = Signal(COUNTER_BITS), Signal()
        misses, taken, heads = [], [], []
        # Before the ports' sets below, which win: a failed response in the cycle of a clear
        # still counts (WriteTags lets the clear win; either is safe, as the clear comes at a
        # collective's start, before any read of it is answered).
        with m.If(self.clear_error):
            m.d.sync += error.eq(0)

        for i in range(n):
            rx = self.rdata[i]
            p.assume(m, "never_backpressured", rx.ready)
            reg = packet_registers(i, params.slot_bits, sf)
            in_body, keep, slot, kind, offset = (reg.in_body, reg.keep, reg.slot, reg.kind,
                                                 reg.offset)
            hdr = data.View(hdr_layout, rx.payload.data[:hdr_layout.size])
            tag = data.View(tag_layout, hdr.tag)
            is_scale = tag.kind == ReadKind.SCALE
            head = rx.valid & ~in_body
            hit = Signal(name=f"spec_hit{i}")
            m.d.comb += hit.eq(head & (hdr.opcode == Opcode.READ_RESP) & ~self.flush
                               & (tag.slot < slots) & (tag.seq == seq[tag.slot])
                               & Mux(is_scale, expect_scale[tag.slot][i],
                                     expect_data[tag.slot][i]))
            misses.append(head & ~hit)
            taken.append(hit | (rx.valid & in_body & keep & ~self.flush))
            heads.append((head, hdr, tag, is_scale, hit))

            receive(m, i, rx, table, reg, hit, tag.slot, is_scale, sf)
            with m.If(hit & (hdr.status != Status.OK)):
                m.d.sync += error.eq(1)
            with m.If(self.flush | (self.arm_valid
                                    & (Mux(head, tag.slot, slot) == self.arm.slot))):
                # An arm starts its slot afresh: the rest of a packet being stored into it (only
                # a response longer than a slot can still be coming in) fills and ends nothing.
                m.d.sync += keep.eq(0)
            p.cover(m, "overlong_tail_dropped", rx.valid & in_body & keep & (offset >= sf)
                    & self.arm_valid & (slot == self.arm.slot))
            self._packet_invariants(wo, m, i, in_body, keep, slot, kind, offset)
            p.spec(m, "fills_only_from_hits", self.avail[i] == Mux(
                data_done[self.rd_slot][i], sf, count[self.rd_slot][i]))
            p.spec(m, "fills_only_from_hits", self.scales_done[i] == scale_done[self.rd_slot][i])

        self._arm_and_flush(m, table, seq)
        m.d.sync += unknown.eq(unknown + sum(misses))
        self._register_invariants(wo, m, table, seq)

        p.spec(m, "accepts_only_expected", self.progress == Cat(taken).any())
        p.spec(m, "rest_counted", self.counters.unknown_tags == unknown)
        p.spec(m, "error_on_bad_status", self.error == error)
        self._covers(m, heads, seq, expect_data, expect_scale, data_done, count)
        return m

    def _spec_table(self):
        """The specification's table, per slot ``s`` and port ``i``: ``count`` data flits in,
        ``data_done``/``scale_done`` packets ended, ``expect_data``/``expect_scale`` packets
        still expected."""
        params = self._params
        n, slots, sf = params.fabric.ports, params.slots, params.slot_flits

        def per_slot(name, shape):
            return Array(Array(Signal(shape, name=f"spec_{name}_s{s}_p{i}") for i in range(n))
                         for s in range(slots))
        count, data_done, scale_done = (per_slot("count", range(sf + 1)),
                                        per_slot("data_done", 1), per_slot("scale_done", 1))
        expect_data, expect_scale = per_slot("expect_data", 1), per_slot("expect_scale", 1)
        return SimpleNamespace(count=count, data_done=data_done, scale_done=scale_done,
                               expect_data=expect_data, expect_scale=expect_scale)

    def _arm_and_flush(self, m, t, seq):
        """An arm empties its slot and expects the masked ports' packets (and scales) under its
        sequence number; a flush expects nothing. After the ports' updates, so these win."""
        n, slots = self._params.fabric.ports, self._params.slots
        with m.If(self.arm_valid):
            s = self.arm.slot
            for i in range(n):
                want = self.arm.mask[i]
                m.d.sync += [t.count[s][i].eq(0), t.data_done[s][i].eq(~want),
                             t.scale_done[s][i].eq(~(want & self.arm.scales)),
                             t.expect_data[s][i].eq(want),
                             t.expect_scale[s][i].eq(want & self.arm.scales)]
            m.d.sync += seq[s].eq(self.arm.seq)
        with m.If(self.flush):
            for s in range(slots):
                for i in range(n):
                    m.d.sync += [t.expect_data[s][i].eq(0), t.expect_scale[s][i].eq(0)]

    def _register_invariants(self, wo, m, t, seq):
        """Every register of the block's table equals the specification's."""
        p, n = self.properties, self._params.fabric.ports
        for s in range(self._params.slots):
            p.invariant(m, "slot_registers_match", wo.probe(f"seq_s{s}") == seq[s])
            for i in range(n):
                for name in ("count", "data_done", "scale_done", "expect_data", "expect_scale"):
                    p.invariant(m, "slot_registers_match",
                                wo.probe(f"{name}_s{s}_p{i}") == getattr(t, name)[s][i])

    def _packet_invariants(self, wo, m, i, in_body, keep, slot, kind, offset):
        """Port ``i``'s framing and stored-packet registers equal the harness's (the slot, kind
        and offset only while a packet is stored)."""
        p = self.properties
        p.invariant(m, "packet_registers_match", in_body == wo.probe(f"in_body{i}"))
        p.invariant(m, "packet_registers_match", keep == wo.probe(f"keep{i}"))
        for name, mine in (("slot", slot), ("kind", kind), ("offset", offset)):
            p.invariant(m, "packet_registers_match", ~keep | (mine == wo.probe(f"{name}{i}")))

    def _break(self, wo, wt, tag_layout):
        """Tie one register or decision of the block for a broken variant."""
        if self._broken == "seq_unchecked":
            f = self._params.fabric
            hdr = data.View(f.header_layout, wt.rdata[0].payload.data[:f.header_layout.size])
            tag = data.View(tag_layout, hdr.tag)
            # The block's decision without the issue-number comparison (the slot check is
            # constant with two slots).
            wo.tie("known0", (hdr.opcode == Opcode.READ_RESP) & ~wt.run.flush & Mux(
                tag.kind == ReadKind.SCALE,
                wo.probe("expect_scale_s0_p0") & (tag.slot == 0)
                | wo.probe("expect_scale_s1_p0") & (tag.slot == 1),
                wo.probe("expect_data_s0_p0") & (tag.slot == 0)
                | wo.probe("expect_data_s1_p0") & (tag.slot == 1)))
        elif self._broken == "framing_lost":
            wo.tie("in_body0", 0)

    def _covers(self, m, heads, seq, expect_data, expect_scale, data_done, count):
        p = self.properties
        sf = self._params.slot_flits
        for i, (head, hdr, tag, is_scale, hit) in enumerate(heads):
            resp = head & (hdr.opcode == Opcode.READ_RESP) & ~self.flush
            expected = Mux(is_scale, expect_scale[tag.slot][i], expect_data[tag.slot][i])
            p.cover(m, "current_response_stored", hit & self.rdata[i].payload.last)
            p.cover(m, "late_response_dropped",
                    resp & expected & (tag.seq != seq[tag.slot]) & ~self.progress)
            p.cover(m, "duplicate_dropped",
                    resp & ~is_scale & data_done[tag.slot][i] & ~expected
                    & (tag.seq == seq[tag.slot]) & ~self.progress)
            p.cover(m, "slot_filled", data_done[self.rd_slot][i] & (count[self.rd_slot][i] == sf))
            p.cover(m, "cut_through", (self.avail[i] > 0) & (self.avail[i] < sf))
        p.cover(m, "error_set", self.error)
