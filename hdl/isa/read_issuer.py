"""ReadIssuer: turns a message into per-slot read requests to the participants it reads."""

from types import SimpleNamespace

from amaranth.hdl import Module, Signal, Mux, Cat, Const
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..lib import Queue
from ..packet import MsgClass, Opcode
from ..transport import packet_signature
from ..params import check_type
from .descriptor import IsaParams, ReadKind, read_tag_layout
from .dtype import DType
from .plan import SCALE_DIVISOR
from .interfaces import (message_layout, job_layout, arm_layout, block_counters_layout,
                         RunControl, IssueControl)


__all__ = ["ReadIssuer", "message_layout", "job_layout"]


class ReadIssuer(wiring.Component):
    """Issues the reads of a message, one slot at a time, as slots become free.

    On ``issue.start`` (pulse; ``run.msg`` must hold for the whole message) the issuer walks the
    message's phases and segments (:mod:`.plan`; :func:`~.plan.segments` is its software twin):
    one phase, or one per participant in rank order for a sharded operation, each cut into
    segments of at most ``max_payload`` bytes that cross no ``max_payload`` boundary of their
    source or destination offset (INT8: nor a scale flit's worth, ``32 * flit_bytes``, once off
    one). For each segment it takes a free slot from the table manager (``alloc``), arms the wave
    table for the segment's read set, hands the job (read set, write set, destination offset,
    bytes) to the feeder (``job``) and sends a ``READ`` (``inc = 1``, tag ``{kind: DATA, slot, seq:
    issue number}``, :func:`~.descriptor.read_tag_layout`) of ``src_addr + src_off`` to every port
    of the read set; for INT8 a second ``READ`` fetches the segment's block scales at
    ``src_scale_addr + src_off / 32`` (same tag, kind ``SCALE``). The issue number counts armed
    slots and is never reset, so a late response to an earlier use of a slot (a duplicate, or one
    of an aborted collective) does not match the slot's current tag. Requests go out in lockstep
    through small per-port queues (``req``, the ISA's REQ-class send streams); each request is one
    flit, so no packet is ever left half sent. ``issue.busy`` stays high until every request has
    been queued. With ``gather_pairs``, a paired AllGather (``run.msg.pair``) walks ``N - 1``
    phases, each reading rank ``j`` and rank ``j + 1`` (the latter's requests ``C`` further on)
    and writing every participant (:mod:`.plan`).

    ``run.flush`` (the wave controller aborting a collective) stops the issuer at once: nothing
    more is armed or queued, and requests already queued still go out whole.

    Members
    -------
    issue : In(IssueControl)
    run : In(RunControl)
        ``msg`` and ``flush`` (``clear_error`` is not used).
    alloc : In(stream.Signature(slot_bits))
        Free slots from the table manager.
    arm : Out(stream.Signature(arm_layout, always_ready=True))
    job : Out(stream.Signature(job_layout))
    req : Out(packet_signature).array(ports)
        The ISA's REQ-class send stream of each port.
    counters : Out(slots, stall_slot, stall_req)
        Slots armed; cycles waiting for a free slot (wave regulation); cycles waiting for room in
        a request queue.
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        f = params.fabric
        super().__init__({
            "issue":    In(IssueControl()),
            "run":      In(RunControl(params)),
            "alloc":    In(stream.Signature(params.slot_bits)),
            "arm":      Out(stream.Signature(arm_layout(params), always_ready=True)),
            "job":      Out(stream.Signature(job_layout(params))),
            "req":      Out(packet_signature(f)).array(f.ports),
            "counters": Out(block_counters_layout("slots", "stall_slot", "stall_req")),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        msg, flush, busy, c = self.run.msg, self.run.flush, self.issue.busy, self.counters
        int8 = msg.dtype == DType.INT8

        # The per-packet header fields (``wave``: a READ_WAVE), and the ports it goes to.
        fields = {"length": p.fabric.header_layout["length"].shape, "tag": read_tag_layout(p),
                  "addr": p.fabric.header_layout["addr"].shape}
        hdr = Signal(data.StructLayout(fields | ({"wave": 1} if p.read_train > 1 else {})))
        push, to = Signal(), Signal(p.fabric.ports)
        out = Signal.like(hdr)      # the request queued: ``hdr``, or (read trains) before it ...
        room = self._request_queues(m, out, push, to)
        w = self._walk(m)

        # Push mode: the inputs are already in the resource's push slots; no slot, no read.
        pushed = msg.push if p.push_slots else Const(0, 1)
        issue = Signal(p.read_seq_bits)  # issue number of the next slot armed (never reset)
        # Without read trains, the slot just armed (its scale READ follows in SCALE): its slot,
        # issue number, scale bytes and scale offset.
        one = (SimpleNamespace(slot=Signal(p.slot_bits), seq=Signal(p.read_seq_bits),
                               len=Signal(range(p.scale_bytes_per_slot + 1)),
                               off=Signal(p.offset_bits)) if p.read_train == 1 else None)
        tr = self._train_regs() if p.read_train > 1 else None   # the pending read train
        # ... its INT8 scale READ (read trains: the data request waits in `sc` for a cycle).
        sc = (SimpleNamespace(pend=Signal(name="data_pend"), hdr=Signal.like(hdr, name="data_hdr"),
                              to=Signal.like(to, name="data_to")) if p.read_train > 1 else None)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.issue.start):
                    m.d.comb += w.begin.eq(1)
                    if p.read_train > 1:
                        m.d.sync += tr.first.eq(1)
                    m.next = "SLOT"
            with m.State("SLOT"):
                m.d.comb += busy.eq(1)
                can = self.alloc.valid & self.job.ready & ~flush & ~pushed
                if p.read_train > 1:
                    can &= ~sc.pend        # its request queues are taken this cycle
                # One READ per slot, sent as the slot is armed; or (read trains) the train's.
                seq, go, merge = issue, can & room, Const(0, 1)
                new = SimpleNamespace(addr=msg.src_addr + w.src_off, slot=self.alloc.payload,
                                      seq=issue, count=1, bytes=w.chunk, to=w.rmask)
                if p.read_train > 1:
                    seq, go, merge = self._train_slot(m, tr, hdr, push, to, room & ~sc.pend,
                                                      can, new, w, int8)
                else:
                    m.d.comb += [push.eq(go), to.eq(w.rmask)]
                    self._header(m, hdr, new)
                m.d.comb += [
                    self.alloc.ready.eq(go),
                    self.arm.valid.eq(go),
                    self.arm.payload.slot.eq(self.alloc.payload),
                    self.arm.payload.mask.eq(w.rmask),
                    self.arm.payload.scales.eq(int8),
                    self.arm.payload.seq.eq(seq),
                    self.job.valid.eq(go),
                    self.job.payload.slot.eq(self.alloc.payload),
                    self.job.payload.rmask.eq(w.rmask), self.job.payload.wmask.eq(w.wmask),
                    self.job.payload.dst_off.eq(w.dst_off),
                    self.job.payload.bytes.eq(w.chunk),
                    self.job.payload.last.eq(w.last),
                ]
                with m.If(~self.alloc.valid):
                    m.d.sync += c.stall_slot.eq(c.stall_slot + 1)
                with m.Elif(~room):
                    m.d.sync += c.stall_req.eq(c.stall_req + 1)
                with m.If(go):
                    m.d.comb += w.step.eq(1)
                    with m.If(~merge):
                        m.d.sync += issue.eq(issue + 1)
                    if p.read_train > 1:
                        with m.If(w.last):
                            m.next = "DRAIN"
                    else:
                        m.d.sync += [one.slot.eq(self.alloc.payload), one.seq.eq(issue),
                                     one.off.eq(w.src_off // SCALE_DIVISOR),
                                     one.len.eq(w.chunk // SCALE_DIVISOR)]
                        with m.If(int8):
                            m.next = "SCALE"
                        with m.Elif(w.last):
                            m.next = "IDLE"
                if p.push_slots:
                    with m.If(pushed):
                        self._push_jobs(m, w)
                with m.If(flush):
                    m.next = "IDLE"
            if p.read_train == 1:
                with m.State("SCALE"):
                    m.d.comb += busy.eq(1)
                    self._scale_state(m, one, hdr, push, to, room, w)
            else:
                with m.State("DRAIN"):
                    # The message's last train, if it is still pending, then done.
                    m.d.comb += busy.eq(1)
                    self._train_drain(m, tr, sc, hdr, push, to, room, int8)

        if p.read_train > 1:
            self._scales_first(m, sc, hdr, out, push, to, room, int8)   # after: it overrides
        else:
            m.d.comb += out.eq(hdr)
        # The ISA's `slots` counter: every slot armed.
        with m.If(self.arm.valid):
            m.d.sync += c.slots.eq(c.slots + 1)
        return m

    def _scale_state(self, m, one, hdr, push, to, room, w):
        """SCALE (without read trains): the READ of the block scales of the segment just armed
        (``one``: its slot, issue number, scale offset and bytes; 2 bytes per 64 elements)."""
        msg, flush, c = self.run.msg, self.run.flush, self.counters
        m.d.comb += [
            push.eq(room & ~flush), to.eq(w.prev_rmask),
            hdr.addr.eq(msg.src_scale_addr + one.off),
            hdr.length.eq(one.len),
            hdr.tag.kind.eq(ReadKind.SCALE), hdr.tag.slot.eq(one.slot),
            hdr.tag.seq.eq(one.seq),
        ]
        with m.If(~room):
            m.d.sync += c.stall_req.eq(c.stall_req + 1)
        with m.Else():
            with m.If(w.done):
                m.next = "IDLE"
            with m.Else():
                m.next = "SLOT"
        with m.If(flush):
            m.next = "IDLE"

    def _header(self, m, hdr, r, count=None):
        """Drive the request header ``hdr`` from ``r`` (addr, slot, seq, count, bytes): a READ of
        ``bytes``, or with read trains and ``count`` above 1 a READ_WAVE of ``count`` slots."""
        p = self._params
        count = r.count if count is None else count
        m.d.comb += [hdr.addr.eq(r.addr), hdr.tag.kind.eq(ReadKind.DATA), hdr.tag.slot.eq(r.slot),
                     hdr.tag.seq.eq(r.seq), hdr.length.eq(r.bytes)]
        if p.read_train > 1:
            wave = count != 1
            m.d.comb += hdr.wave.eq(wave)
            with m.If(wave):
                m.d.comb += hdr.length.eq(count * p.slot_flits)

    def _train_regs(self):
        """The pending train (read trains only): ``pend`` (one is pending), its first ``addr``,
        ``slot``, issue number ``seq``, slots ``count``, first segment's ``bytes``, ports ``to``,
        ``open`` (more slots may join: its segments are full and page-aligned), ``end`` (the
        source address the next joining segment must start at) and ``first`` (no segment of the
        message has been taken yet)."""
        p = self._params
        f = p.fabric
        return SimpleNamespace(
            pend=Signal(name="train_pend"), open=Signal(name="train_open"),
            first=Signal(name="train_first"),
            addr=Signal(f.addr_width, name="train_addr"),
            end=Signal(f.addr_width, name="train_end"),
            slot=Signal(p.slot_bits, name="train_slot"),
            seq=Signal(p.read_seq_bits, name="train_seq"),
            count=Signal(range(p.read_train + 1), name="train_count"),
            bytes=Signal(range(f.max_payload + 1), name="train_bytes"),
            to=Signal(f.ports, name="train_to"))

    def _train_slot(self, m, tr, hdr, push, to, room, can, new, w, int8):
        """Read trains, in SLOT: a segment ``new`` that may be taken (``can``) joins the pending
        train, or the pending train goes out (it can grow no more) and ``new`` becomes pending, or
        with nothing pending ``new`` is held (it may start a train) or goes out at once (it cannot,
        or it is the message's last). A train goes out when it is full, when the next segment
        cannot join or when no segment can be taken this cycle (reads are never held waiting for
        a slot). Returns (the issue number to arm the slot with, whether it is taken, whether it
        joined the pending train)."""
        p = self._params
        page = p.fabric.max_payload
        lg = exact_log2(page)
        full = w.chunk == page
        nxt = Signal(p.slot_bits)
        m.d.comb += nxt.eq(tr.slot + tr.count)
        # INT8: the train's scales (read before it, :meth:`_scales_first`) must not cross a page,
        # or the scale train would come back in pieces whose tags name the wrong slots.
        scale_addr = self.run.msg.src_scale_addr + (w.src_off >> exact_log2(SCALE_DIVISOR))
        scale_page = int8 & (scale_addr[:lg] == 0)
        # Joins: same ports, the next source page, the next slot (a train never wraps round).
        merge = (tr.pend & tr.open & full & (w.rmask == tr.to) & (new.addr == tr.end)
                 & (new.slot == nxt) & (nxt != 0) & ~scale_page & can)
        closing = w.last | (tr.count + 1 == p.read_train)
        # May start a train: held. Not a message's first segment, whose READ goes out at once
        # (holding it would delay the first data by the train; the link has room then).
        starts = full & (new.addr[:lg] == 0) & ~w.last & ~tr.first
        go = Signal()
        with m.If(merge):
            m.d.comb += [go.eq(can & (~closing | room)), to.eq(tr.to),
                         push.eq(go & closing)]
            self._header(m, hdr, tr, count=tr.count + 1)
            with m.If(go):
                m.d.sync += [tr.count.eq(tr.count + 1), tr.end.eq(tr.end + page)]
                with m.If(closing):
                    m.d.sync += tr.pend.eq(0)
        with m.Elif(tr.pend):
            # The pending train goes out; the segment taken with it (if any) is held.
            m.d.comb += [go.eq(can & room), to.eq(tr.to), push.eq(room)]
            self._header(m, hdr, tr)
            with m.If(room):
                m.d.sync += tr.pend.eq(0)
            with m.If(go):
                self._hold(m, tr, new, starts)
        with m.Else():
            m.d.comb += [go.eq(can & room), to.eq(new.to), push.eq(go & ~starts)]
            self._header(m, hdr, new)
            with m.If(go & starts):
                self._hold(m, tr, new, 1)
        with m.If(go):
            m.d.sync += tr.first.eq(0)
        with m.If(self.run.flush):
            m.d.sync += tr.pend.eq(0)
        return Mux(merge, tr.seq, new.seq), go, merge

    def _hold(self, m, tr, new, open_):
        """Make the segment ``new`` the pending train (of one slot); ``open_``: more may join."""
        page = self._params.fabric.max_payload
        m.d.sync += [tr.pend.eq(1), tr.open.eq(open_), tr.addr.eq(new.addr),
                     tr.end.eq(new.addr + page), tr.slot.eq(new.slot), tr.seq.eq(new.seq),
                     tr.count.eq(1), tr.bytes.eq(new.bytes), tr.to.eq(new.to)]

    def _train_drain(self, m, tr, sc, hdr, push, to, room, int8):
        """DRAIN: send the pending train, if any (INT8: its scale READ, then it), then go idle
        (an abort drops them)."""
        flush = self.run.flush
        with m.If(~sc.pend):
            m.d.comb += [to.eq(tr.to), push.eq(tr.pend & room & ~flush)]
            self._header(m, hdr, tr)
            with m.If(tr.pend & room):
                m.d.sync += tr.pend.eq(0)
            with m.If(~tr.pend | (room & ~int8)):
                m.next = "IDLE"
        with m.If(flush):
            m.d.sync += tr.pend.eq(0)
            m.next = "IDLE"

    def _scales_first(self, m, sc, hdr, out, push, to, room, int8):
        """Read trains, INT8: every data request ``hdr`` (a READ, or a READ_WAVE of ``n`` slots)
        is queued (``out``) as the READ of its segments' block scales, and the data request itself
        waits in ``sc`` (``pend``, ``hdr``, ``to``) for the next cycle the queues have room; while
        it waits it overrides every other request (the caller takes no slot then). The scale
        request is ``length / 32`` of the data request (bytes of a READ, flits of a READ_WAVE,
        whose ``n`` slots' scales are ``n * scale_flits_per_slot`` flits: one piece, as a train's
        scales never cross a page, :meth:`_train_slot`) at ``src_scale_addr + src_off / 32``, tag
        kind ``SCALE``. Scales first: the small scale response comes back ahead of the train's
        data, so each slot is reduced as its own data comes in (behind the data, the train's
        first slot would wait for the whole train). An abort drops a data request still waiting:
        its scale response comes back stale, as a scale request's did without trains."""
        f = self._params.fabric
        msg, flush = self.run.msg, self.run.flush
        ls = exact_log2(SCALE_DIVISOR)
        scale = Signal.like(hdr, name="scale_hdr")
        m.d.comb += [scale.eq(hdr),
                     scale.addr.eq(msg.src_scale_addr
                                   + ((hdr.addr - msg.src_addr)[:f.addr_width] >> ls)),
                     scale.length.eq(hdr.length >> ls), scale.tag.kind.eq(ReadKind.SCALE)]
        with m.If(sc.pend):
            m.d.comb += [push.eq(room & ~flush), to.eq(sc.to), out.eq(sc.hdr)]
        with m.Else():
            m.d.comb += out.eq(Mux(int8, scale, hdr))
        # (Apart from the above: `to` and `out` must not depend on `push`, which depends on them.)
        with m.If(sc.pend):
            with m.If(room):
                m.d.sync += sc.pend.eq(0)
        with m.Elif(push & int8):
            m.d.sync += [sc.pend.eq(1), sc.to.eq(to), sc.hdr.eq(hdr)]
        with m.If(flush):
            m.d.sync += sc.pend.eq(0)

    def _push_jobs(self, m, w):
        """Push mode, in SLOT: hand the feeder one job a segment, in the push slot its source
        offset names (the participants pushed their inputs at their source offsets), with no
        slot to allocate, nothing to arm and no request to send."""
        p = self._params
        msg = self.run.msg
        go = self.job.ready & ~self.run.flush
        f = p.fabric
        lg = exact_log2(f.max_payload)
        m.d.comb += [
            self.job.valid.eq(go),
            self.job.payload.slot.eq(msg.push_slot + w.src_off[lg:]),
            self.job.payload.flit.eq(w.src_off[exact_log2(f.flit_bytes):lg]),
            self.job.payload.rmask.eq(w.rmask), self.job.payload.wmask.eq(w.wmask),
            self.job.payload.dst_off.eq(w.dst_off),
            self.job.payload.bytes.eq(w.chunk),
            self.job.payload.last.eq(w.last),
        ]
        with m.If(go):
            m.d.comb += w.step.eq(1)
            with m.If(w.last):
                m.next = "IDLE"

    def _request_queues(self, m, hdr, push, to):
        """One small request queue per port; ``push`` queues the request ``hdr`` at the ports of
        ``to``. Returns whether every queue of ``to`` has room."""
        p = self._params
        f = p.fabric
        hdr_layout = f.header_layout
        rooms = []
        if p.gather_pairs:
            # A paired phase reads its higher rank's shard ``C`` (the per-rank bytes) further on.
            msg = self.run.msg
            further = Signal.like(hdr.addr, name="pair_addr")
            m.d.comb += further.eq(hdr.addr + msg.bytes)
        for i in range(f.ports):
            q = m.submodules[f"req_queue{i}"] = Queue(f.flit_layout, 4)
            addr = hdr.addr
            if p.gather_pairs and i:
                # Port i is a pair's higher rank when a lower port is read too.
                addr = Mux(msg.pair & (to[:i] != 0), further, hdr.addr)
            wiring.connect(m, q.o, wiring.flipped(self.req[i]))
            word = Signal(hdr_layout, name=f"hdr{i}")
            # The constant fields are set in the same process as the copied ones, so none becomes
            # a constant-only `always @*` block (which no simulator runs; Verilator ALWNEVER).
            opcode = (Mux(hdr.wave, Opcode.READ_WAVE, Opcode.READ) if self._params.read_train > 1
                      else Opcode.READ)
            m.d.comb += [word.length.eq(hdr.length), word.tag.eq(hdr.tag), word.addr.eq(addr),
                         word.opcode.eq(opcode), word.msg_class.eq(MsgClass.REQ),
                         word.inc.eq(1), word.status.eq(0), word.src.eq(i), word.dst.eq(i)]
            m.d.comb += [
                q.i.payload.eq(f.header_flit(word, last=1)),
                q.i.valid.eq(push & to[i]),
            ]
            rooms.append(Mux(to[i], q.i.ready, 1))
        return Cat(rooms).all()

    def _walk(self, m):
        """The walk over phases and segments (:func:`~.plan.segments`). Controls: ``begin`` starts
        the message, ``step`` takes the current segment. Shows the current segment (``rmask``,
        ``wmask``, ``src_off``, ``dst_off``, ``chunk``, ``last``), the read set of the segment
        just taken (``prev_rmask``) and ``done`` once the last segment has been taken."""
        p = self._params
        f = p.fabric
        msg = self.run.msg
        mask = msg.mask
        w = SimpleNamespace(begin=Signal(), step=Signal(), done=Signal(),
                            rmask=Signal(f.ports), wmask=Signal(f.ports),
                            prev_rmask=Signal(f.ports),
                            src_off=Signal(p.offset_bits), dst_off=Signal(p.offset_bits),
                            chunk=Signal(range(f.max_payload + 1)), last=Signal())
        sel = Signal(f.ports)               # the phase's selected port (one-hot)
        x = Signal(p.byte_bits)             # bytes of the phase already taken
        first = mask & -mask                # the lowest port of the set: rank 0
        later = mask & ~(sel | (sel - 1))   # the ports above the selected one
        nxt = later & -later
        left = Signal.like(x)               # bytes of the phase still to take
        m.d.comb += [
            left.eq(msg.bytes - x),
            w.rmask.eq(Mux(msg.read_sel, sel, mask)),
            w.wmask.eq(Mux(msg.write_sel, sel, mask) & ~Mux(msg.skip_self, sel, 0)),
            w.chunk.eq(_segment_bytes(p, left, w.src_off, w.dst_off, msg.dtype == DType.INT8)),
        ]
        final = later == 0                  # the last phase: no rank above the selected one
        if p.gather_pairs:
            # In pairs: the selected rank and the next are read, every participant written, and
            # the last phase is the one whose next rank is the highest.
            with m.If(msg.pair):
                m.d.comb += [w.rmask.eq(sel | nxt), w.wmask.eq(mask)]
            final = Mux(msg.pair, (later & ~nxt) == 0, final)
        phase_end = w.chunk == left
        m.d.comb += w.last.eq(phase_end & (~msg.phased | final))
        with m.If(w.begin):
            m.d.sync += [sel.eq(Mux(msg.phased, first, msg.root)), x.eq(0), w.src_off.eq(0),
                         w.dst_off.eq(0), w.done.eq(0)]
        with m.If(w.step):
            m.d.sync += [x.eq(x + w.chunk), w.src_off.eq(w.src_off + w.chunk),
                         w.dst_off.eq(w.dst_off + w.chunk),
                         w.prev_rmask.eq(w.rmask), w.done.eq(w.last)]
            with m.If(phase_end & ~w.last):
                # The next rank's phase: a stepped base goes on from where this phase ended
                # (j * C + C), an unstepped one starts again at 0.
                m.d.sync += [sel.eq(nxt), x.eq(0)]
                with m.If(~msg.src_step):
                    m.d.sync += w.src_off.eq(0)
                with m.If(~msg.dst_step):
                    m.d.sync += w.dst_off.eq(0)
        return w


def _segment_bytes(p, left, src, dst, int8):
    """Bytes of the next segment (the twin of :func:`~.plan._chunk`): at most ``left`` and
    ``max_payload``, up to the next ``max_payload`` boundary of both offsets, and for INT8 up to
    the next scale-flit boundary (``32 * flit_bytes``) of both while either is off one."""
    f = p.fabric
    page = f.max_payload
    lg = exact_log2(page)
    n = _min(_min(left, page - src[:lg]), page - dst[:lg])
    scale_page = SCALE_DIVISOR * f.flit_bytes
    if scale_page < page:
        ls = exact_log2(scale_page)
        off = (src[:ls] != 0) | (dst[:ls] != 0)
        n = Mux(int8 & off, _min(_min(n, scale_page - src[:ls]), scale_page - dst[:ls]), n)
    return n


def _min(a, b):
    return Mux(a < b, a, b)
