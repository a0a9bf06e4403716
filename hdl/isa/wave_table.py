"""WaveTable: every participant's wave table (block RAM) and the read responses that fill it."""

from types import SimpleNamespace

from amaranth.hdl import Module, Signal, Array, Mux, Cat, Const
from amaranth.lib import wiring, stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..codec import pack
from ..packet import Opcode, Status
from ..transport import packet_signature
from ..params import check_type
from .descriptor import IsaParams, ReadKind, read_tag_layout, push_addr_layout
from .interfaces import (arm_layout, block_counters_layout, RunControl, ReadStatus,
                         WaveTableRead, PushControl)


__all__ = ["WaveTable", "arm_layout", "read_tag"]


def read_tag(params, slot, kind, seq):
    """The tag (an integer) of the read request for ``slot``'s ``kind`` packet (:class:`ReadKind`),
    issued as the slot's issue number ``seq`` (kept modulo ``2**read_seq_bits``), packed with
    :func:`~.descriptor.read_tag_layout`."""
    return pack(read_tag_layout(params), kind=ReadKind(kind), slot=slot,
                seq=seq & ((1 << params.read_seq_bits) - 1))


class WaveTable(wiring.Component):
    """Per-participant data and scale tables, written by read responses in any order.

    The table of port ``p`` holds ``slots`` slots of ``slot_flits`` data flits and
    ``scale_flits_per_slot`` scale flits, in ``lib.memory.Memory`` (block RAM). A read response's
    tag names its place: ``slot`` and ``kind`` (:func:`read_tag`), so responses from different
    participants and slots may arrive in any order and are written straight where they belong.

    Arming a slot (``arm``, pulse) declares which ports' data (and, for INT8, scale) packets it
    expects, the issue number their tags carry (``seq``), and clears its progress; the rest of a
    packet still being stored into the slot (a response longer than a slot) is dropped. Each
    expected response is accepted once: a response whose opcode is not ``READ_RESP``, whose slot
    does not exist, whose ``seq`` is not the slot's current issue number (a late response) or whose
    (slot, kind, port) is not expected (unknown tag, or a duplicate) is dropped whole and counted in
    ``counters.unknown_tags``. A response with a non-``OK`` status is stored (its data is whatever
    came) and sets the sticky ``status.error`` (cleared by ``run.clear_error``). With read trains
    (``read_train > 1``) one scale response may fill the consecutive slots of a train, which share
    its issue number: each slot is checked as the response reaches it.

    Progress is per flit, so the feeder can start reducing a slot before it is complete
    (cut-through): for ``rd.slot``, ``rd.avail[p]`` is the number of data flits of port ``p``
    already written (``slot_flits`` once the response has ended: a short or failed response can
    never stall the feeder) and ``rd.scales_done[p]`` says port ``p``'s scale packet has ended.

    Reads are synchronous: ``rd.data[p]`` / ``rd.scale[p]`` show the flits at (``rd.slot``,
    ``rd.flit`` / ``rd.scale_flit``) of the previous cycle in which ``rd.en`` was high, and hold
    while ``rd.en`` is low.

    **Push mode** (``push_resources > 0``): after the ``slots`` of pull mode come each push
    resource's own slots (:attr:`~.descriptor.IsaParams.push_slots`), armed for every port from
    reset and again on ``push.rearm``. A push ``WRITE`` (``inc = 1``, steered into this stream by
    the switch port) whose address (:func:`~.descriptor.push_addr_layout`) names a push resource, a
    slot-aligned offset inside its space (data: a ``max_payload`` multiple; scales: a multiple of
    a slot's scale bytes) and a slot that still expects that port's packet of that kind, is stored
    like a read response; any other ``WRITE`` is dropped whole and counted in
    ``counters.bad_pushes``, and one naming a push resource marks that resource's space in error
    (``push.error``) until it is handed back. Aborts (``run.flush``) leave push slots alone.

    Members
    -------
    rdata : In(packet_signature).array(ports)
        The ISA's RDATA-class receive stream of each port (never back-pressured); in push mode
        also the push WRITEs.
    arm : In(stream.Signature(arm_layout, always_ready=True))
    rd : In(WaveTableRead)
        The feeder's read port.
    run : In(RunControl)
        ``flush`` disarms every slot (the rest of a packet being received is dropped);
        ``clear_error`` clears ``status.error``.
    status : Out(ReadStatus)
        ``error``: sticky non-``OK`` response; ``progress``: a response flit was accepted.
    push : In(PushControl)
        Push mode only.
    counters : Out(unknown_tags[, bad_pushes])
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        f = params.fabric
        pushing = params.push_slots > 0
        super().__init__({
            "rdata":    In(packet_signature(f)).array(f.ports),
            "arm":      In(stream.Signature(arm_layout(params), always_ready=True)),
            "rd":       In(WaveTableRead(params)),
            "run":      In(RunControl(params)),
            "status":   Out(ReadStatus()),
            **({"push": In(PushControl(params))} if pushing else {}),
            "counters": Out(block_counters_layout(
                "unknown_tags", *(("bad_pushes",) if pushing else ()))),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        n = p.fabric.ports
        slots, sf = p.slots, p.slot_flits

        def per_slot(name, shape, push_init=0):
            # Push slots (after the pull slots) start armed: a push may come at any time.
            return Array(Array(Signal(shape, name=f"{name}_s{s}_p{i}",
                                      init=push_init if s >= slots else 0)
                               for i in range(n))
                         for s in range(p.table_slots))
        # The slots' state, per slot and port.
        t = SimpleNamespace(
            count=per_slot("count", range(sf + 1)),
            data_done=per_slot("data_done", 1),
            scale_done=per_slot("scale_done", 1),
            expect_data=per_slot("expect_data", 1, push_init=1),
            expect_scale=per_slot("expect_scale", 1, push_init=1),
            seq=Array(Signal(p.read_seq_bits, name=f"seq_s{s}") for s in range(slots)),
            push_error=Signal(max(1, p.push_resources)),
        )
        with m.If(self.run.clear_error):
            m.d.sync += self.status.error.eq(0)

        ports = [self._port(m, i, t) for i in range(n)]
        unknown_tags = self.counters.unknown_tags
        m.d.sync += unknown_tags.eq(unknown_tags + sum(q.unknown for q in ports))
        m.d.comb += self.status.progress.eq(Cat(q.progress for q in ports).any())
        self._arm(m, t, ports)
        if p.push_slots:
            outsiders = self._push_control(m, t)
            bad = self.counters.bad_pushes
            m.d.sync += bad.eq(bad + sum(q.bad_push for q in ports) + outsiders)
        return m

    def _port(self, m, i, t):
        """Port ``i``'s tables: the feeder's reads, and the packets received into them. Returns
        what the arming and the counters need of it."""
        p = self._params
        f = p.fabric
        slots, sf, ssf = p.slots, p.slot_flits, p.scale_flits_per_slot
        rd, flush = self.rd, self.run.flush
        m.submodules[f"data{i}"] = dmem = Memory(shape=f.flit_width, depth=p.table_slots * sf,
                                                 init=[])
        m.submodules[f"scale{i}"] = smem = Memory(shape=f.flit_width, depth=p.table_slots * ssf,
                                                  init=[])
        dwr, swr = dmem.write_port(), smem.write_port()
        drd, srd = dmem.read_port(), smem.read_port()
        m.d.comb += [
            drd.addr.eq(rd.slot * sf + rd.flit), drd.en.eq(rd.en),
            srd.addr.eq(rd.slot * ssf + rd.scale_flit), srd.en.eq(rd.en),
            rd.data[i].eq(drd.data), rd.scale[i].eq(srd.data),
            rd.avail[i].eq(Mux(t.data_done[rd.slot][i], sf, t.count[rd.slot][i])),
            rd.scales_done[i].eq(t.scale_done[rd.slot][i]),
        ]

        rx = self.rdata[i]
        m.d.comb += rx.ready.eq(1)  # a wave table never pushes back: it has room by construction
        in_body = Signal(name=f"in_body{i}")
        keep = Signal(name=f"keep{i}")            # the current packet is being stored
        slot = Signal(p.table_slot_bits, name=f"slot{i}")
        kind = Signal(name=f"kind{i}")
        offset = Signal(range(sf + 1), name=f"offset{i}")

        hdr_layout = f.header_layout
        hdr = Signal(hdr_layout, name=f"hdr{i}")
        m.d.comb += hdr.eq(rx.payload.data[:hdr_layout.size])
        tag = read_tag_layout(p)(hdr.tag)
        h_slot = Signal(p.table_slot_bits, name=f"h_slot{i}")
        h_kind = Signal(name=f"h_kind{i}")
        m.d.comb += [h_slot.eq(tag.slot), h_kind.eq(tag.kind == ReadKind.SCALE)]
        slot_ok = (tag.slot < slots) if slots < (1 << p.slot_bits) else Const(1)
        h_known = Signal(name=f"known{i}")
        expected = Mux(h_kind, t.expect_scale[h_slot][i], t.expect_data[h_slot][i])
        m.d.comb += h_known.eq((hdr.opcode == Opcode.READ_RESP) & slot_ok & ~flush
                               & (tag.seq == t.seq[tag.slot[:p.slot_bits]]) & expected)
        head = rx.valid & ~in_body
        bad_push = 0
        if p.push_slots:
            bad_push = self._push_header(m, hdr, h_slot, h_kind, h_known, expected,
                                         t.push_error, head)

        def finish(s, k):
            with m.If(k):
                m.d.sync += [t.scale_done[s][i].eq(1), t.expect_scale[s][i].eq(0)]
            with m.Else():
                m.d.sync += [t.data_done[s][i].eq(1), t.expect_data[s][i].eq(0)]

        # Read trains: a scale response may cover several slots (:meth:`_next_scale_slot`);
        # ``pseq`` is its issue number, ``unknown_next`` marks a next slot that refuses it.
        trains = p.read_train > 1
        pseq = Signal(p.read_seq_bits, name=f"pseq{i}") if trains else None
        unknown_next = Signal(name=f"unknown_next{i}") if trains else Const(0, 1)
        with m.If(rx.valid):
            m.d.sync += in_body.eq(~rx.payload.last)
            with m.If(~in_body):
                m.d.sync += [keep.eq(h_known), slot.eq(h_slot), kind.eq(h_kind), offset.eq(0)]
                if trains:
                    m.d.sync += pseq.eq(tag.seq)
                with m.If(h_known):
                    # (A push WRITE's status field is zero: only a response reports errors.)
                    with m.If(hdr.status != Status.OK):
                        m.d.sync += self.status.error.eq(1)
                    with m.If(rx.payload.last):
                        finish(h_slot, h_kind)
                        if p.read_train > 1:
                            self._refused_train(m, i, t, hdr, tag, h_kind, finish)
            with m.Elif(keep):
                in_range = Mux(kind, offset < ssf, offset < sf)
                m.d.comb += [
                    dwr.addr.eq(slot * sf + offset), dwr.data.eq(rx.payload.data),
                    dwr.en.eq(in_range & ~kind),
                    swr.addr.eq(slot * ssf + offset), swr.data.eq(rx.payload.data),
                    swr.en.eq(in_range & kind),
                ]
                m.d.sync += offset.eq(offset + 1)
                with m.If(~kind & in_range):
                    m.d.sync += t.count[slot][i].eq(offset + 1)
                with m.If(rx.payload.last):
                    finish(slot, kind)
                if p.read_train > 1:
                    self._next_scale_slot(m, i, t, rx, slot, kind, offset, keep, pseq,
                                          finish, unknown_next)
        slot_now = Mux(head, h_slot, slot)     # the slot of the packet this flit belongs to
        with m.If(flush & (slot_now < slots)):
            # Abort: drop the rest of the response being received (framing goes on above);
            # a push packet is another group's and goes on, from its header on, so the slot
            # tested is this flit's own (the header's at a header), not the register's stale one
            # (the `push_table` proof checks it, docs/VERIFICATION.md).
            m.d.sync += keep.eq(0)
        is_response = (hdr.opcode != Opcode.WRITE) if p.push_slots else 1
        return SimpleNamespace(keep=keep, slot_now=slot_now,
                               unknown=(head & ~h_known & is_response) | unknown_next,
                               bad_push=bad_push,
                               progress=rx.valid & Mux(in_body, keep & ~flush, h_known))

    def _refused_train(self, m, i, t, hdr, tag, h_kind, finish):
        """Read trains: a header-only failed response (a refused ``READ_WAVE``: one ``READ_RESP``
        of ``length`` 0 for the whole train) ends the part of every slot of the train, not only
        the first's: every pull slot that expects that kind from this port under the response's
        issue number, which a train's slots share and no other live slot has. So a refused train
        ends its collective with ``ERROR``, never with a wait for data that will not come."""
        p = self._params
        with m.If(hdr.status != Status.OK):
            for s in range(p.slots):
                wants = Mux(h_kind, t.expect_scale[s][i], t.expect_data[s][i])
                with m.If(wants & (t.seq[s] == tag.seq)):
                    finish(s, h_kind)

    def _next_scale_slot(self, m, i, t, rx, slot, kind, offset, keep, pseq, finish,
                         unknown_next):
        """Read trains: the scales of a train's ``n`` slots come back in one response of
        ``n * scale_flits_per_slot`` flits (the read issuer keeps them within a page), tagged
        with the first slot. When a slot's last scale flit is stored and the packet goes on, that
        slot is done and the rest belongs to the next slot, if that slot exists, expects this
        port's scales and was armed with the packet's issue number (a train's slots share it);
        otherwise the rest is dropped and counted once in ``unknown_tags`` (``unknown_next``).
        Push slots are left as they are: a push packet never spans slots."""
        p = self._params
        ssf = p.scale_flits_per_slot
        nxt = Signal(p.table_slot_bits, name=f"next_slot{i}")
        m.d.comb += nxt.eq(slot + 1)
        ok = ((nxt < p.slots) & t.expect_scale[nxt][i] & (t.seq[nxt[:p.slot_bits]] == pseq)
              & ~self.run.flush)
        with m.If(kind & (offset == ssf - 1) & ~rx.payload.last & (slot < p.slots)):
            finish(slot, 1)
            m.d.sync += [slot.eq(nxt), offset.eq(0), keep.eq(ok)]
            m.d.comb += unknown_next.eq(~ok)

    def _arm(self, m, t, ports):
        """Arming a pull slot (``arm``), and disarming every pull slot on ``run.flush``."""
        p = self._params
        with m.If(self.arm.valid):
            s = self.arm.payload.slot
            for i, port in enumerate(ports):
                want = self.arm.payload.mask[i]
                m.d.sync += [
                    t.count[s][i].eq(0),
                    t.data_done[s][i].eq(~want),
                    t.scale_done[s][i].eq(~(want & self.arm.payload.scales)),
                    t.expect_data[s][i].eq(want),
                    t.expect_scale[s][i].eq(want & self.arm.payload.scales),
                ]
                # A fresh start: drop the rest of a response longer than a slot, whose `last`
                # would end the new use (docs/VERIFICATION.md, what the flow found).
                with m.If(port.slot_now == s):
                    m.d.sync += port.keep.eq(0)
            m.d.sync += t.seq[s].eq(self.arm.payload.seq)
        with m.If(self.run.flush):
            # After the arming above, so a flush wins (the issuer does not arm while flushing).
            for s in range(p.slots):
                for i in range(len(ports)):
                    m.d.sync += [t.expect_data[s][i].eq(0), t.expect_scale[s][i].eq(0)]

    def _push_header(self, m, hdr, h_slot, h_kind, h_known, expected, push_error, head):
        """One port's header decode of a push WRITE: where it goes (``h_slot``, ``h_kind``),
        whether it is taken (``h_known``). Returns the pulse counting a dropped push."""
        p = self._params
        f = p.fabric
        addr = push_addr_layout(p)(hdr.addr)
        off, scale = addr.offset, addr.kind == ReadKind.SCALE
        lg = exact_log2(f.max_payload)
        lg_s = exact_log2(p.scale_bytes_per_slot)
        index = Mux(scale, off >> lg_s, off >> lg)   # the slot within the resource's space
        aligned = Mux(scale, off[:lg_s] == 0, off[:lg] == 0)
        sync_ok = addr.sync < p.push_resources
        place_ok = sync_ok & aligned & (index < p.push_slots_per_resource)
        is_push = hdr.opcode == Opcode.WRITE
        with m.If(is_push):
            m.d.comb += [
                h_slot.eq(p.slots + addr.sync * p.push_slots_per_resource + index),
                h_kind.eq(scale),
                h_known.eq(place_ok & expected),
            ]
        dropped = head & is_push & ~(place_ok & expected)
        with m.If(dropped & sync_ok):
            m.d.sync += push_error.bit_select(addr.sync[:len(push_error)], 1).eq(1)
        return dropped

    def _push_control(self, m, t):
        """``push``: each push resource's readiness and error for the controller, and its
        re-arming. Returns the count of packets pushed by ports outside the group that the
        re-arming drops (one per slot, port and kind), for ``bad_pushes``."""
        p = self._params
        n = p.fabric.ports
        push = self.push
        per = p.push_slots_per_resource
        count, data_done, scale_done = t.count, t.data_done, t.scale_done
        push_error = t.push_error
        ready, error, outsiders = [], [], []
        for r in range(p.push_resources):
            first = p.slots + r * per
            slots = range(first, first + per)
            ready.append(Cat(~push.mask[i] | (count[first][i] != 0) | data_done[first][i]
                             for i in range(n)).all())
            used = Cat(Cat((count[s][i] != 0) | data_done[s][i] | scale_done[s][i]
                           for s in slots).any() for i in range(n))
            error.append(push_error[r] | (used & ~push.mask).any())
            rearm = push.rearm & (push.sync == r)
            outsiders += [rearm & ~push.mask[i] & term for s in slots for i in range(n)
                          for term in ((count[s][i] != 0) | data_done[s][i], scale_done[s][i])]
            with m.If(rearm):
                m.d.sync += push_error[r].eq(0)
                for s in slots:
                    for i in range(n):
                        m.d.sync += [count[s][i].eq(0), data_done[s][i].eq(0),
                                     scale_done[s][i].eq(0), t.expect_data[s][i].eq(1),
                                     t.expect_scale[s][i].eq(1)]
        m.d.comb += [push.ready.eq(Array(ready)[push.sync]),
                     push.error.eq(Array(error)[push.sync])]
        return sum(outsiders)
