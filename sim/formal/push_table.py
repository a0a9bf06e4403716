"""Formal harness of the ISA's WaveTable in push mode: which push WRITEs are stored, where, and
what a dropped one leaves behind."""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...hdl.isa.descriptor import ReadKind, push_addr_layout, read_tag_layout
from ...hdl.isa.interfaces import COUNTER_BITS, block_counters_layout
from ...hdl.isa.wave_table import WaveTable
from ...hdl.packet import Opcode
from ...hdl.params import check_int
from ...hdl.transport import packet_signature
from .properties import check_broken, OpenBlock, Properties
from .small_isa import small_isa
from .table_spec import packet_registers, receive


__all__ = ["PushTableHarness"]


class PushTableHarness(wiring.Component):
    """:class:`~scin.hdl.isa.wave_table.WaveTable` in push mode, with its properties.

    The fabric is small: 64-bit flits, ``ports`` ports, ``max_payload``-byte packets (by
    default 64 bytes: a slot of eight data flits and one scale flit holding its two scale
    bytes), one pull slot and ``push_resources`` push resources of ``push_slots`` slots each
    (``push_slots * max_payload`` bytes of input per participant). A push WRITE's address is its
    15-bit byte offset, its kind (data or scales) and its 8-bit sync resource, so every bad place
    the block must refuse is open to the solver: a sync resource without push space, an offset
    that is not a slot's start (data: a multiple of ``max_payload`` bytes; scales: of a slot's
    scale bytes, ``max_payload / 32``) or beyond the resource's space, and a slot that no longer
    expects that port's packet of that kind. Nothing in the block looks at a data flit's bits,
    and every resource, slot, port and kind is one copy of the same loop.

    The environment sends anything on every port's ``rdata`` stream (any opcode, address, tag and
    length, any number of flits whatever the header says, any cycle), drives the controller's
    ``push`` side freely (any ``sync`` naming a push resource, any ``mask``, ``rearm`` in any
    cycle), raises ``flush`` and ``clear_error`` freely (in the cycle of a push header too, which
    must not drop the push, docs/VERIFICATION.md) and reads any existing slot through ``rd``. It
    never arms the pull slot (pull mode is the ``wave_table`` harness's subject): every packet
    that is not a ``WRITE`` is then a response nothing expects, dropped whole, and shares the
    port's framing with the pushes.

    The harness keeps the specification's push space: per push slot and port, which packets
    (data, scales) it still expects, how many data flits are in and which packets have ended;
    per resource, its error. A ``WRITE`` header *hits* when its sync resource has push space, its
    offset is a multiple of the kind's slot size (``max_payload`` data bytes, or a slot's scale
    bytes) below the resource's space, and the slot it names (``offset / size``) still expects
    that port's packet of that kind. A hit packet is stored into that slot, at most a slot's
    worth (its ``last`` flit ends it: a second one is a duplicate); any other ``WRITE`` is a bad
    push, dropped whole. ``rearm`` of a resource empties its slots, expects every packet again
    and clears its error; a packet still being stored into one of them goes on into the emptied
    slot (the controller rearms once the collective has read every participant's input, so only
    an outsider's packet can be in flight, and it then shows as used by an outsider).

    Specification:

    * ``dropped_push_writes_nothing``: a wave-table memory (data or scales, any port) is written
      only with a flit of a stored packet: no flit of a dropped push (or response) reaches it.
    * ``push_fills_only_its_slot``: the data (scale) memory of port ``p`` is written exactly with
      each data (scale) flit of a stored packet inside its slot, at the slot its header named
      and the flit's offset, with the flit's bits.
    * ``slots_move_only_from_stored_pushes``: for the slot ``rd.slot`` names, ``rd.avail[p]``
      is the number of data flits stored from port ``p`` since the slot was last emptied (a
      slot's worth once the packet has ended), ``rd.scales_done[p]`` says its scale packet has
      ended: a dropped push moves no slot's count or end.
    * ``accepts_only_good_pushes``: ``status.progress`` is high exactly when a header hits or a
      stored packet's flit is taken (outside a flush: the block reports no progress during an
      abort, though a push packet is stored through it).
    * ``bad_pushes_counted_once``: ``counters.bad_pushes`` counts exactly one per dropped push
      (at its header), plus, at a ``rearm``, one per slot, kind and port outside ``mask`` that
      pushed into the resource (an outsider's packet is stored, and counted when the controller
      learns who the participants were).
    * ``responses_counted``: ``counters.unknown_tags`` counts exactly the other packets' headers.
    * ``push_error_until_rearm``: ``push.error`` for ``push.sync`` is set from the cycle after a
      bad push naming that resource (one naming no push resource marks none), or while a port
      outside ``mask`` has pushed into it, and cleared by its ``rearm`` only (the rearm wins in
      its own cycle: a push is too early then, whatever it does).
    * ``ready_when_first_flits_in``: ``push.ready`` says that every port of ``mask`` has its
      first data flit in ``push.sync``'s first slot (or that packet has ended).

    Invariants (read inside the block): its per-port framing and stored-packet registers (kept,
    slot, kind, offset), its per-slot expectations, counts and ends (the pull slot's stay at
    reset), and its per-resource error bits equal the harness's.

    Covers: ``push_slot_filled`` (a push slot's data complete at a port), ``bad_push_dropped``
    (a dropped push with flits after its header), ``misaligned_push_dropped``,
    ``duplicate_push_dropped``, ``good_after_dropped`` (the last body flit of a stored
    packet right after a dropped push of several flits on its port), ``push_ready``,
    ``outsider_counted`` (a rearm counting an outsider's packet), ``error_cleared_by_rearm``
    (``push.error`` high after a bad push, in the cycle of a ``rearm``, and low after it).

    What it does not state: pull mode (the ``wave_table`` harness), and the bits read back from
    the block RAMs (their write ports are stated flit by flit; the memories themselves are
    Amaranth's).

    Parameters
    ----------
    ports : int
        Switch ports (2 to 4).
    push_resources : int
        Sync resources with push space (1 to 2; as many sync resources).
    max_payload : int
        Packet (slot) bytes, 32 to 128.
    push_slots : int
        Push slots per resource (2 to 4).
    invariants : bool
        State the invariants (for k-induction); broken variants leave them out.
    broken : None or str
        A deliberately broken variant (:meth:`OpenBlock.tie`): port 0's accept decision tied to
        the block's without the offset's alignment check (``"alignment_unchecked"``: a data
        offset inside a slot is stored from that slot's start) or without its range check
        (``"index_unchecked"``: an offset beyond the resource's space is stored into another
        slot). ``accepts_only_good_pushes``, ``dropped_push_writes_nothing``,
        ``push_fills_only_its_slot`` or ``bad_pushes_counted_once`` must fail.

    Members
    -------
    rdata : In(packet_signature).array(ports)
    push_sync : In(range(max(2, push_resources))), push_mask : In(ports), push_rearm : In(1)
    push_ready, push_error : Out(1)
    rd_slot : In(table_slot_bits)
    flush, clear_error : In(1)
    avail : Out(range(slot_flits + 1)).array(ports)
    scales_done : Out(ports)
    progress : Out(1)
    counters : Out(unknown_tags, bad_pushes)
    """

    BROKEN = ("alignment_unchecked", "index_unchecked")

    def __init__(self, *, ports=2, push_resources=2, push_slots=2, max_payload=64,
                 invariants=True, broken=None):
        check_int("ports", ports, 2, 4)
        check_int("max_payload", max_payload, 32, 128)
        check_int("push_resources", push_resources, 1, 2)
        check_int("push_slots", push_slots, 2, 4)
        check_broken(broken, self.BROKEN)
        self._params = small_isa(ports=ports, max_payload=max_payload, slots=1,
                                 sync_resources=push_resources, push_resources=push_resources,
                                 push_slots=push_slots)
        self._broken = broken
        self.properties = Properties(invariants=invariants)
        p = self._params
        super().__init__({
            "rdata":       In(packet_signature(p.fabric)).array(ports),
            "push_sync":   In(range(max(2, push_resources))),  # (Yosys: no 0-bit wire)
            "push_mask":   In(ports),
            "push_rearm":  In(1),
            "push_ready":  Out(1),
            "push_error":  Out(1),
            "rd_slot":     In(p.table_slot_bits),
            "flush":       In(1),
            "clear_error": In(1),
            "avail":       Out(range(p.slot_flits + 1)).array(ports),
            "scales_done": Out(ports),
            "progress":    Out(1),
            "counters":    Out(block_counters_layout("unknown_tags", "bad_pushes")),
        })

    def elaborate(self, platform):
        m = Module()
        p, params = self.properties, self._params
        f = params.fabric
        n, sf = f.ports, params.slot_flits
        per, res = params.push_slots_per_resource, params.push_resources
        sizes = {False: f.max_payload, True: params.scale_bytes_per_slot}  # by kind: is_scale

        wo = self._attach(m, platform)

        table = self._push_space()
        count, data_done, scale_done = table.count, table.data_done, table.scale_done
        expect_data, expect_scale = table.expect_data, table.expect_scale
        error = Signal(res, name="spec_push_error")
        bad, others = Signal(COUNTER_BITS), Signal(COUNTER_BITS)
        dropped_heads, other_heads, taken, heads = [], [], [], []

        for i in range(n):
            rx = self.rdata[i]
            p.assume(m, "never_backpressured", rx.ready)
            reg = packet_registers(i, range(params.push_slots), sf)
            in_body, keep = reg.in_body, reg.keep
            hdr = data.View(f.header_layout, rx.payload.data[:f.header_layout.size])
            addr = data.View(push_addr_layout(params), hdr.addr)
            is_scale = addr.kind == ReadKind.SCALE
            off = addr.offset

            # Where the header points, stated in bytes: a multiple of the kind's slot size,
            # below the resource's space.
            def of_kind(test):
                return Mux(is_scale, test(sizes[True]), test(sizes[False]))
            aligned = of_kind(lambda size: (off % size == 0) if size > 1 else Const(1))
            inside = of_kind(lambda size: off < per * size)
            index = Signal(range(per), name=f"spec_index{i}")
            m.d.comb += index.eq(of_kind(lambda size: off // size))
            j = Signal(range(params.push_slots), name=f"spec_j{i}")
            m.d.comb += j.eq(addr.sync * per + index)
            place_ok = (addr.sync < res) & aligned & inside
            is_write = hdr.opcode == Opcode.WRITE
            expected = Mux(is_scale, expect_scale[j][i], expect_data[j][i])
            head = rx.valid & ~in_body
            hit = Signal(name=f"spec_hit{i}")
            dropped = Signal(name=f"spec_dropped{i}")
            m.d.comb += [hit.eq(head & is_write & place_ok & expected),
                         dropped.eq(head & is_write & ~hit)]
            dropped_heads.append(dropped)
            other_heads.append(head & ~is_write)
            taken.append(hit | (rx.valid & in_body & keep & ~self.flush))
            heads.append((rx, head, is_write, place_ok, aligned, inside, addr, expected, hit,
                          dropped, in_body, keep))

            receive(m, i, rx, table, reg, hit, j, is_scale, sf)
            for r in range(res):
                with m.If(dropped & (addr.sync == r)):
                    m.d.sync += error[r].eq(1)

            self._port_outputs(wo, m, i, reg, table, len(j))

        # The controller's side: readiness, error, and the rearm (after the ports: it wins).
        ready, errors, outsiders = self._controller(m, table, error)
        m.d.sync += [bad.eq(bad + sum(dropped_heads) + sum(outsiders)),
                     others.eq(others + sum(other_heads))]

        p.spec(m, "accepts_only_good_pushes", self.progress == Cat(taken).any())
        p.spec(m, "bad_pushes_counted_once", self.counters.bad_pushes == bad)
        p.spec(m, "responses_counted", self.counters.unknown_tags == others)
        p.spec(m, "push_error_until_rearm", self.push_error == Array(errors)[self.push_sync])
        p.spec(m, "ready_when_first_flits_in", self.push_ready == Array(ready)[self.push_sync])
        self._slot_invariants(wo, m, count, data_done, scale_done, expect_data, expect_scale,
                              error)
        self._covers(m, heads, count, data_done, Cat(outsiders).any(), error)
        return m

    def _attach(self, m, platform):
        """The wave table (with the broken variant's tie, if any), its ports joined to the
        harness's, arming and reads off; assumed: reads of existing slots and pushes to existing
        resources. Returns the open table."""
        p, params = self.properties, self._params
        n = params.fabric.ports
        wt = WaveTable(params)
        m.submodules.table = wo = OpenBlock(wt, platform)
        self._break(wo, wt)
        for i in range(n):
            connect(m, flipped(self.rdata[i]), wt.rdata[i])
        m.d.comb += [wt.arm.valid.eq(0), wt.rd.slot.eq(self.rd_slot), wt.rd.en.eq(0),
                     wt.run.flush.eq(self.flush), wt.run.clear_error.eq(self.clear_error),
                     wt.push.sync.eq(self.push_sync), wt.push.mask.eq(self.push_mask),
                     wt.push.rearm.eq(self.push_rearm),
                     self.push_ready.eq(wt.push.ready), self.push_error.eq(wt.push.error),
                     self.scales_done.eq(Cat(wt.rd.scales_done)),
                     self.progress.eq(wt.status.progress), self.counters.eq(wt.counters)]
        m.d.comb += [self.avail[i].eq(wt.rd.avail[i]) for i in range(n)]
        p.assume(m, "reads_existing_slots", self.rd_slot < params.table_slots)
        p.assume(m, "asks_existing_resources", self.push_sync < params.push_resources)
        return wo

    def _push_space(self):
        """The specification's push space, per push slot ``j`` (table slot ``slots + j``) and
        port ``i``: ``count`` data flits in, ``data_done``/``scale_done`` packets ended,
        ``expect_data``/``expect_scale`` packets still expected."""
        params = self._params
        n, sf = params.fabric.ports, params.slot_flits

        def per_slot(name, shape, init=0):
            return Array(Array(Signal(shape, name=f"spec_{name}_j{j}_p{i}", init=init)
                               for i in range(n)) for j in range(params.push_slots))
        count, data_done, scale_done = (per_slot("count", range(sf + 1)),
                                        per_slot("data_done", 1), per_slot("scale_done", 1))
        expect_data = per_slot("expect_data", 1, init=1)
        expect_scale = per_slot("expect_scale", 1, init=1)
        return SimpleNamespace(count=count, data_done=data_done, scale_done=scale_done,
                               expect_data=expect_data, expect_scale=expect_scale)

    def _port_outputs(self, wo, m, i, reg, t, j_bits):
        """Port ``i``'s memories, written with a stored packet's flits only and inside its slot,
        and what ``rd`` shows of its push slots (``t``: :meth:`_push_space`; ``reg``: the
        port's packet registers)."""
        p, params = self.properties, self._params
        rx, first = self.rdata[i], params.slots
        sf, ssf = params.slot_flits, params.scale_flits_per_slot
        body = rx.valid & reg.in_body & reg.keep
        for mem, mine, size in (("data", ~reg.kind, sf), ("scale", reg.kind, ssf)):
            wr = wo.submodule(f"{mem}{i}").write_ports[0]
            p.spec(m, "dropped_push_writes_nothing", ~wr.en | body)
            p.spec(m, "push_fills_only_its_slot", wr.en == (body & mine & (reg.offset < size)))
            p.spec(m, "push_fills_only_its_slot",
                   ~wr.en | ((wr.addr == (first + reg.slot) * size + reg.offset)
                             & (wr.data == rx.payload.data)))
        self._packet_invariants(wo, m, i, reg.in_body, reg.keep, reg.slot, reg.kind, reg.offset)

        in_push = self.rd_slot >= first
        j_rd = (self.rd_slot - first)[:j_bits]
        p.spec(m, "slots_move_only_from_stored_pushes", self.avail[i] == Mux(
            in_push & t.data_done[j_rd][i], sf, Mux(in_push, t.count[j_rd][i], 0)))
        p.spec(m, "slots_move_only_from_stored_pushes",
               self.scales_done[i] == (in_push & t.scale_done[j_rd][i]))

    def _controller(self, m, t, error):
        """The specification of the controller's side, per resource: ``ready`` (every member's
        first data flit is in), the error (a bad push naming it, or an outsider's data in its
        slots) and the rearm that empties its slots. Returns (ready, errors, the pulses counting
        an outsider's packet at the rearm)."""
        params = self._params
        n, per = params.fabric.ports, params.push_slots_per_resource
        count, data_done, scale_done = t.count, t.data_done, t.scale_done
        ready, errors, outsiders = [], [], []
        mask = self.push_mask
        for r in range(params.push_resources):
            mine = range(r * per, (r + 1) * per)
            rearm = self.push_rearm & (self.push_sync == r)
            ready.append(Cat(~mask[i] | (count[r * per][i] != 0) | data_done[r * per][i]
                             for i in range(n)).all())
            pushed = [[(count[s][i] != 0) | data_done[s][i], scale_done[s][i]]
                      for s in mine for i in range(n)]
            outside = [~mask[k % n] for k in range(len(pushed))]
            errors.append(error[r] | Cat(o & (d | s) for o, (d, s) in zip(outside, pushed)).any())
            outsiders += [rearm & o & term for o, terms in zip(outside, pushed) for term in terms]
            with m.If(rearm):
                m.d.sync += error[r].eq(0)
                for s in mine:
                    for i in range(n):
                        m.d.sync += [count[s][i].eq(0), data_done[s][i].eq(0),
                                     scale_done[s][i].eq(0), t.expect_data[s][i].eq(1),
                                     t.expect_scale[s][i].eq(1)]
        return ready, errors, outsiders

    def _packet_invariants(self, wo, m, i, in_body, keep, slot, kind, offset):
        """Port ``i``'s framing and stored-packet registers equal the harness's (the slot, kind
        and offset only while a packet is stored)."""
        p = self.properties
        first = self._params.slots
        p.invariant(m, "packet_registers_match", in_body == wo.probe(f"in_body{i}"))
        p.invariant(m, "packet_registers_match", keep == wo.probe(f"keep{i}"))
        for name, mine in (("slot", first + slot), ("kind", kind), ("offset", offset)):
            p.invariant(m, "packet_registers_match", ~keep | (mine == wo.probe(f"{name}{i}")))

    def _slot_invariants(self, wo, m, count, data_done, scale_done, expect_data, expect_scale,
                         error):
        """Every slot's registers equal the harness's (the pull slot's stay at reset: it is
        never armed), and so do the resources' error bits."""
        p, params = self.properties, self._params
        n, first = params.fabric.ports, params.slots
        mine = dict(count=count, data_done=data_done, scale_done=scale_done,
                    expect_data=expect_data, expect_scale=expect_scale)
        for s in range(params.table_slots):
            for i in range(n):
                for name, table in mine.items():
                    spec = table[s - first][i] if s >= first else 0
                    p.invariant(m, "slot_registers_match",
                                wo.probe(f"{name}_s{s}_p{i}") == spec)
        # The block's per-resource error bits: its one unnamed register.
        p.invariant(m, "push_error_matches", wo.probe("$signal") == error)

    def _break(self, wo, wt):
        """Tie port 0's accept decision for a broken variant: the block's, one check left out."""
        if self._broken is None:
            return
        params = self._params
        f = params.fabric
        per, first = params.push_slots_per_resource, params.slots
        hdr = data.View(f.header_layout, wt.rdata[0].payload.data[:f.header_layout.size])
        tag = data.View(read_tag_layout(params), hdr.tag)
        addr = data.View(push_addr_layout(params), hdr.addr)
        h_slot, h_kind = wo.probe("h_slot0"), wo.probe("h_kind0")
        expected = Mux(h_kind,
                       Array(wo.probe(f"expect_scale_s{s}_p0")
                             for s in range(params.table_slots))[h_slot],
                       Array(wo.probe(f"expect_data_s{s}_p0")
                             for s in range(params.table_slots))[h_slot])
        response = ((hdr.opcode == Opcode.READ_RESP) & (tag.slot < first) & ~wt.run.flush
                    & (tag.seq == wo.probe("seq_s0")) & expected)
        scale = addr.kind == ReadKind.SCALE
        aligned = Mux(scale, addr.offset % params.scale_bytes_per_slot == 0,
                      addr.offset % f.max_payload == 0)
        inside = Mux(scale, addr.offset < per * params.scale_bytes_per_slot,
                     addr.offset < per * f.max_payload)
        checks = (addr.sync < params.push_resources) & expected & (
            inside if self._broken == "alignment_unchecked" else aligned)
        wo.tie("known0", Mux(hdr.opcode == Opcode.WRITE, checks, response))

    def _covers(self, m, heads, count, data_done, outsider, error):
        p, params = self.properties, self._params
        sf = params.slot_flits
        for i, (rx, head, is_write, place_ok, aligned, inside, addr, expected, hit,
                dropped, in_body, keep) in enumerate(heads):
            p.cover(m, "push_slot_filled", Cat(data_done[j][i] & (count[j][i] == sf)
                                               for j in range(params.push_slots)).any())
            p.cover(m, "bad_push_dropped", dropped & ~rx.payload.last)
            p.cover(m, "misaligned_push_dropped", dropped & (addr.sync < params.push_resources)
                    & inside & ~aligned)
            p.cover(m, "duplicate_push_dropped", dropped & place_ok & ~expected)
            # A stored packet's last flit, the packet before it on its port a dropped push of
            # several flits.
            long_drop = Signal(name=f"spec_long_drop{i}")   # the last header was a long drop
            follows_drop = Signal(name=f"spec_follows_drop{i}")
            with m.If(head):
                m.d.sync += [long_drop.eq(dropped & ~rx.payload.last),
                             follows_drop.eq(hit & long_drop)]
            last = rx.valid & rx.payload.last
            p.cover(m, "good_after_dropped", last & in_body & keep & follows_drop)
        p.cover(m, "push_ready", self.push_ready & self.push_mask.any())
        p.cover(m, "outsider_counted", outsider)
        # A bad push's error (not an outsider's), seen at the rearm that clears it.
        was_error_rearm = Signal()
        was_sync = Signal.like(self.push_sync)
        m.d.sync += [was_error_rearm.eq(self.push_error & self.push_rearm
                                        & error.bit_select(self.push_sync, 1)),
                     was_sync.eq(self.push_sync)]
        p.cover(m, "error_cleared_by_rearm", was_error_rearm & ~self.push_error
                & (self.push_sync == was_sync))
