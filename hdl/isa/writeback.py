"""WriteBack: multicasts results and completion flags to every participant; tracks write
responses."""

from types import SimpleNamespace

from amaranth.hdl import Module, Signal, Mux, Cat, Const, ResetInserter
from amaranth.lib import wiring, stream, data, fifo
from amaranth.lib.wiring import In, Out

from ..codec import pack
from ..lib import Queue
from ..packet import MsgClass, Opcode, Status
from ..transport import packet_signature
from ..params import check_type
from .descriptor import IsaParams, write_tag_layout
from .dtype import DType, BLOCK_ELEMENTS
from .plan import SCALE_DIVISOR
from .interfaces import (job_layout, flag_request_layout, block_counters_layout, result_layout,
                         RunControl, WriteStatus)


__all__ = ["WriteBack", "WriteTags", "flag_request_layout", "write_tag"]


def write_tag(params, seq):
    """The tag (an integer) of the ISA's ``seq``-th WRITE (counted from reset, results, scales and
    flags alike), packed with :func:`~.descriptor.write_tag_layout`: ``index`` is ``seq``'s low
    ``WRITE_TAG_BITS``, ``seq`` the bits above them (modulo ``2**write_seq_bits``)."""
    layout = write_tag_layout(params)
    index_bits = layout["index"].width
    return pack(layout, index=seq & ((1 << index_bits) - 1),
                seq=(seq >> index_bits) & ((1 << params.write_seq_bits) - 1))


class WriteTags(wiring.Component):
    """The write-back's outstanding-write table and its write-response check.

    ``tag`` is the next write's tag (:func:`~.descriptor.write_tag_layout`: the write sequence
    number). Its entry ``tag.index`` has one bit per port; ``free`` says that entry is free at
    every port (not only those of ``mask``: a port outside it may still owe the entry's previous
    write). A ``start`` pulse (a header goes out to the ports of ``mask``) marks
    the entry outstanding at those ports and advances ``tag``.

    A ``WRITE_RESP`` on ``wresp[p]`` is accepted when port ``p`` has entry ``index`` outstanding
    and the tag's ``seq`` is that of the write the entry holds now; it frees the entry, pulses
    ``progress`` and, with a non-``OK`` status, sets the sticky ``error`` (cleared by
    ``clear_error``, which wins over a set in the same cycle). Anything else (another opcode, an
    unknown tag, a duplicate, a late response to a write whose entry was freed by an abort) is
    dropped and counted in ``counters.unknown_wresps``. ``flush`` frees every entry and accepts
    nothing.

    Members
    -------
    wresp : In(packet_signature).array(ports)
        The ISA's WRESP-class receive stream of each port (never back-pressured).
    mask : In(ports)
    start : In(1)
    tag : Out(write_tag_layout)
    free : Out(1)
    flush : In(1)
    clear_error : In(1)
    error : Out(1)
    outstanding : Out(1)
        Some entry is outstanding at some port.
    progress : Out(1)
    counters : Out(unknown_wresps)
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        f = params.fabric
        super().__init__({
            "wresp":       In(packet_signature(f)).array(f.ports),
            "mask":        In(f.ports),
            "start":       In(1),
            "tag":         Out(write_tag_layout(params)),
            "free":        Out(1),
            "flush":       In(1),
            "clear_error": In(1),
            "error":       Out(1),
            "outstanding": Out(1),
            "progress":    Out(1),
            "counters":    Out(block_counters_layout("unknown_wresps")),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        hdr_layout = f.header_layout
        tag_layout = write_tag_layout(p)

        # One bit per (port, tag index).
        ntags = 1 << tag_layout["index"].width
        widx = self.tag.index
        pending = [Signal(ntags, name=f"pending{i}") for i in range(n)]
        # Free at every port, not only at the next write's: a port outside the mask may still owe
        # the entry's previous write, and reusing the entry would move its `seq` on and drop that
        # port's correct response as stale (a hang until the watchdog).
        m.d.comb += self.free.eq(~Cat(pending[i].bit_select(widx, 1) for i in range(n)).any())
        with m.If(self.start):
            m.d.sync += self.tag.eq(self.tag.as_value() + 1)

        accepted, unknown = [], []
        for i in range(n):
            rx = self.wresp[i]
            rhdr = Signal(hdr_layout, name=f"wresp_hdr{i}")
            in_body = Signal(name=f"wresp_body{i}")
            m.d.comb += [rx.ready.eq(1), rhdr.eq(rx.payload.data[:hdr_layout.size])]
            with m.If(rx.valid):
                m.d.sync += in_body.eq(~rx.payload.last)
            rtag = tag_layout(rhdr.tag)
            # The `seq` of the write an entry holds: entries below the next index were last used
            # in the current round of the sequence, the others in the round before.
            want_seq = Signal.like(self.tag.seq, name=f"wresp_seq{i}")
            m.d.comb += want_seq.eq(self.tag.seq - (rtag.index >= widx))
            head = rx.valid & ~in_body
            ok = Signal(name=f"wresp_ok{i}")
            m.d.comb += ok.eq(head & (rhdr.opcode == Opcode.WRITE_RESP)
                              & pending[i].bit_select(rtag.index, 1) & (rtag.seq == want_seq)
                              & ~self.flush)
            accepted.append(ok)
            unknown.append(head & ~ok)
            with m.If(ok & (rhdr.status != Status.OK)):
                m.d.sync += self.error.eq(1)
            # Set the entry of a write going out, clear the entry of an accepted response (never
            # the same entry: one is free, the other outstanding).
            set_bit = Mux(self.start & self.mask[i], Const(1, ntags) << widx, 0)
            clr_bit = Mux(ok, Const(1, ntags) << rtag.index, 0)
            with m.If(self.flush):
                m.d.sync += pending[i].eq(0)
            with m.Else():
                m.d.sync += pending[i].eq((pending[i] | set_bit) & ~clr_bit)
        with m.If(self.clear_error):
            m.d.sync += self.error.eq(0)
        m.d.comb += [self.outstanding.eq(Cat(pending).any()),
                     self.progress.eq(Cat(accepted).any())]
        c = self.counters
        m.d.sync += c.unknown_wresps.eq(c.unknown_wresps + sum(unknown))
        return m


class WriteBack(wiring.Component):
    """Result write-back and completion flags, in lockstep to the participants of each packet.

    For each job (``job``, in slot order) it sends every port of the job's write set (``wmask``) a
    ``WRITE`` (``inc = 1``) of the slot's result at ``dst_addr + dst_off``: the header, then the
    datapath's output flits as they come. For INT8 the slot's output block scales (one FP16 per
    64-element block, taken from the datapath's output) follow in a second ``WRITE`` at
    ``dst_scale_addr + dst_off / 32``. A job with an empty write set (an in-place AllGather of
    one participant) sends nothing but still takes its flits. With ``gather_pairs``, a paired
    AllGather's job (``run.msg.pair``) writes the ``other`` flit of its input, at ``C`` further
    on, to the ports up to the lowest of its read set, and the ``data`` flit to the others
    (:mod:`.plan`). The ISA multicasts through
    per-port queues of its own (``wr``, the ISA's WRITE-class send streams), not through the
    switch core.

    ``flag`` writes one 4-byte completion flag word to every port of its mask, behind whatever
    result data is already queued (same class, same order).

    Write tags (:class:`WriteTags`): every ``WRITE`` (result, scales or flag) takes the next number
    of a write sequence counter as its tag (:func:`write_tag`). Its ``index`` names an entry of a
    table of outstanding writes per port; a packet goes out only when that entry is free at every
    port of its mask (so at most ``2**WRITE_TAG_BITS`` = 32 writes per port are unacknowledged),
    and marks it outstanding; an accepted ``WRITE_RESP`` (``wresp``) frees it.
    ``counters.stall_tx`` counts cycles the output waits for queue room or a free entry.

    ``run.flush`` (held by the wave controller while it aborts a collective) frees every entry and
    ends the packet being sent without truncating it: a result or scale packet whose header has
    gone out is completed with zero flits (its ``last`` flit where its length says), one whose
    header has not gone out is never started, a flag packet is completed. No job or flag is
    taken while ``flush`` is high; ``status.busy`` falls once the output is at a packet boundary.

    Members
    -------
    run : In(RunControl)
        ``msg``, ``flush``, and ``clear_error`` (clears ``status.error`` and ``status.status``).
    job : In(stream.Signature(job_layout))
    dp : In(stream.Signature(result_layout))
        The datapath's output (with ``gather_pairs``, also a paired job's ``other`` flit).
    flag : In(stream.Signature(flag_request_layout))
    wr : Out(packet_signature).array(ports)
        The ISA's WRITE-class send stream of each port.
    wresp : In(packet_signature).array(ports)
        The ISA's WRESP-class receive stream of each port.
    status : Out(WriteStatus)
        ``error`` (a non-``OK`` write response), ``status`` (OR of the datapath's flags),
        ``busy``, ``outstanding``, ``progress`` (a response accepted), ``slot_done`` (the last data
        flit of a slot taken from the datapath), ``msg_done`` (... of the message's last slot).
    counters : Out(stall_tx, unknown_wresps)
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        f = params.fabric
        pkt = packet_signature(f)
        super().__init__({
            "run":      In(RunControl(params)),
            "job":      In(stream.Signature(job_layout(params))),
            "dp":       In(stream.Signature(result_layout(params))),
            "flag":     In(stream.Signature(flag_request_layout(params))),
            "wr":       Out(pkt).array(f.ports),
            "wresp":    In(pkt).array(f.ports),
            "status":   Out(WriteStatus()),
            "counters": Out(block_counters_layout("stall_tx", "unknown_wresps")),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        fb = f.flit_bytes
        msg, flush, st = self.run.msg, self.run.flush, self.status

        mask = Signal(f.ports)    # the participants of the packet being sent
        job = Signal(job_layout(p))
        m.submodules.tags = tags = WriteTags(p)
        for i in range(f.ports):
            wiring.connect(m, wiring.flipped(self.wresp[i]), tags.wresp[i])
        m.d.comb += [
            tags.mask.eq(mask), tags.flush.eq(flush), tags.clear_error.eq(self.run.clear_error),
            st.error.eq(tags.error), st.outstanding.eq(tags.outstanding),
            st.progress.eq(tags.progress),
            self.counters.unknown_wresps.eq(tags.counters.unknown_wresps),
            st.slot_done.eq(self.dp.valid & self.dp.ready & self.dp.payload.last),
            st.msg_done.eq(st.slot_done & job.last),
        ]
        with m.If(self.run.clear_error):
            m.d.sync += st.status.eq(0)
        with m.If(self.dp.valid & self.dp.ready):
            m.d.sync += st.status.eq(st.status | self.dp.payload.status)

        out = self._output_queues(m, tags, job)
        scales = self._scale_collector(m, flush)

        left = Signal(range(p.slot_flits + 1))
        scale_flits = Signal(range(p.scale_flits_per_slot + 1))
        flag = Signal(flag_request_layout(p))

        # Write trains: whether the slot's last packet is acknowledged (else every one is posted).
        acked = Signal(init=1, name="train_acked") if p.write_train > 1 else Const(1, 1)
        since = Signal(range(p.write_train), name="train_since")   # slots since the last acked
        if p.write_train > 1:
            with m.If(flush):               # an abort ends the train: the next slot starts one
                m.d.sync += since.eq(0)
        int8 = msg.dtype == DType.INT8
        with m.FSM() as fsm:
            def take_job():
                """Take the next job (its header goes out next cycle)."""
                m.d.comb += self.job.ready.eq(1)
                m.d.sync += [
                    job.eq(self.job.payload), mask.eq(self.job.payload.wmask),
                    left.eq((self.job.payload.bytes + fb - 1) // fb),
                    *scales.restart(self.job.payload.bytes),
                ]
                if p.write_train > 1:
                    self._count_train(m, acked, since, self.job.payload.last)
                m.next = "HEADER"

            with m.State("IDLE"):
                with m.If(self.job.valid & ~flush):
                    take_job()
                with m.Elif(self.flag.valid & ~flush):
                    m.d.comb += self.flag.ready.eq(1)
                    m.d.sync += [flag.eq(self.flag.payload), mask.eq(self.flag.payload.mask)]
                    m.next = "FLAG_HEADER"
            self._header_state(m, "HEADER", out, tags, "DATA",
                               addr=msg.dst_addr + job.dst_off, length=job.bytes,
                               posted=~acked | int8)
            with m.State("DATA"):
                self._data_state(m, out, scales, left, job, scale_flits, take_job)
            self._header_state(m, "SCALE_HEADER", out, tags, "SCALE_DATA",
                               addr=msg.dst_scale_addr + job.dst_off // SCALE_DIVISOR,
                               length=job.bytes // BLOCK_ELEMENTS * 2, posted=~acked)
            with m.State("SCALE_DATA"):
                # On an abort the scales may never have been collected: zero flits instead.
                squeue = scales.queue
                go = Mux(flush, out.room, squeue.r_rdy & out.room)
                m.d.comb += [
                    st.busy.eq(1), out.push.eq(go), squeue.r_en.eq(go & ~flush),
                    out.body.eq(Mux(flush, 0, squeue.r_data)), out.body_last.eq(scale_flits == 1),
                ]
                with m.If(go):
                    m.d.sync += scale_flits.eq(scale_flits - 1)
                    with m.If(scale_flits == 1):
                        m.next = "IDLE"
                        with m.If(self.job.valid & ~flush):
                            take_job()
            self._header_state(m, "FLAG_HEADER", out, tags, "FLAG_DATA",
                               addr=flag.addr, length=4)
            with m.State("FLAG_DATA"):
                m.d.comb += [
                    st.busy.eq(1), out.push.eq(out.room),
                    out.body.eq(flag.word.as_value()), out.body_last.eq(1),
                ]
                with m.If(out.room):
                    m.next = "IDLE"
        if p.gather_pairs:
            m.d.comb += out.pair.eq(msg.pair & (fsm.ongoing("HEADER") | fsm.ongoing("DATA")))
        return m

    def _count_train(self, m, acked, since, last):
        """Write trains, as a job is taken: its slot is acknowledged (``acked``) when it is the
        ``write_train``-th since the last acknowledged one (``since`` counts them) or the
        message's ``last``."""
        done = last | (since == self._params.write_train - 1)
        m.d.sync += [acked.eq(done), since.eq(Mux(done, 0, since + 1))]

    def _output_queues(self, m, tags, job):
        """Per-port output queues; a flit is pushed to every port of ``tags.mask`` at once.
        Returns the controls: ``push``, ``is_header``, the header fields ``hdr`` (length, tag,
        addr), ``body``/``body_last`` and ``room`` (every queue of the mask has room); with
        ``gather_pairs``, ``pair`` (a paired phase's result packet: the ports up to the lowest
        of ``job``'s read set take ``other`` at ``C`` further on, see :mod:`.plan`)."""
        p = self._params
        f = p.fabric
        hdr_layout = f.header_layout
        mask = tags.mask
        posted = self._params.write_train > 1
        out = SimpleNamespace(
            push=Signal(), is_header=Signal(), body=Signal(f.flit_width), body_last=Signal(),
            # The per-packet header fields; the constant ones are set on each queue's copy below.
            hdr=Signal(data.StructLayout({"length": hdr_layout["length"].shape,
                                          "tag": write_tag_layout(self._params),
                                          "addr": hdr_layout["addr"].shape}
                                         | ({"posted": 1} if posted else {}))))
        rooms = []
        if p.gather_pairs:
            out.pair, out.other = Signal(), Signal(f.flit_width)
            out.further = Signal.like(out.hdr.addr)
            lowest = Signal(f.ports)            # the lowest port of the job's read set, one-hot
            m.d.comb += [out.further.eq(out.hdr.addr + self.run.msg.bytes),
                         lowest.eq(job.rmask & -job.rmask)]
        for i in range(f.ports):
            q = m.submodules[f"wr_queue{i}"] = Queue(f.flit_layout, 4)
            wiring.connect(m, q.o, wiring.flipped(self.wr[i]))
            rooms.append(Mux(mask[i], q.i.ready, 1))
            word = Signal(hdr_layout, name=f"hdr{i}")
            addr, body = out.hdr.addr, out.body
            if p.gather_pairs and i < f.ports - 1:
                # Ports 0 to the lower rank's take the higher rank's flit, C further on (never the
                # last port: a pair's lower rank has a port above it).
                other = Signal(name=f"other{i}")
                m.d.comb += other.eq(out.pair & (lowest[i:] != 0))
                addr, body = Mux(other, out.further, addr), Mux(other, out.other, body)
            # The constant fields are set in the same process as the copied ones, so none becomes
            # a constant-only `always @*` block (which no simulator runs; Verilator ALWNEVER).
            m.d.comb += [word.length.eq(out.hdr.length), word.tag.eq(out.hdr.tag),
                         word.addr.eq(addr),
                         word.opcode.eq(Mux(out.hdr.posted, Opcode.WRITE_POSTED, Opcode.WRITE)
                                        if posted else Opcode.WRITE),
                         word.msg_class.eq(MsgClass.WRITE),
                         word.inc.eq(1), word.status.eq(0), word.src.eq(i), word.dst.eq(i)]
            m.d.comb += [
                q.i.payload.eq(Mux(out.is_header, f.header_flit(word, last=0),
                                Cat(body, out.body_last))),
                q.i.valid.eq(out.push & mask[i]),
            ]
        out.room = Cat(rooms).all()
        out.can_start = out.room & tags.free
        return out

    def _scale_collector(self, m, flush):
        """INT8 output scales: collected a flit at a time while the data goes out (see
        :meth:`_data_state`), queued for the scale packet that follows."""
        p = self._params
        f = p.fabric
        squeue = fifo.SyncFIFOBuffered(width=f.flit_width, depth=max(2, p.scale_flits_per_slot))
        # Internal, so an abort may simply empty it.
        m.submodules.scale_queue = ResetInserter(flush)(squeue)
        return _Scales(queue=squeue, acc=Signal(f.flit_width),
                       pos=Signal(range(f.flit_width // 16)),
                       bflit=Signal(range(BLOCK_ELEMENTS * 8 // f.flit_width)),
                       blocks_left=Signal(range(p.slot_flits + 1)))

    def _header_state(self, m, name, out, tags, next_state, *, addr, length, posted=0):
        """A header state: send a ``WRITE`` header of ``addr``, ``length`` to every port of the
        mask once each has room and the write tag's entry is free; under ``flush`` send nothing
        (the packet is never started). With write trains, a ``posted`` packet is a
        ``WRITE_POSTED``: it needs only room, and takes no tag entry."""
        flush = self.run.flush
        c = self.counters
        if self._params.write_train == 1:
            posted = Const(0, 1)
        can = Mux(posted, out.room, out.can_start)
        with m.State(name):
            if self._params.write_train > 1:
                m.d.comb += out.hdr.posted.eq(posted)
            m.d.comb += [
                self.status.busy.eq(1), out.is_header.eq(1),
                out.push.eq(can & ~flush), tags.start.eq(out.can_start & ~flush & ~posted),
                out.hdr.addr.eq(addr), out.hdr.length.eq(length),
                # Set here with the other fields, not in a process of its own: a lone
                # `always @*` reading a register that has not changed yet never runs on Icarus.
                out.hdr.tag.eq(tags.tag),
            ]
            with m.If(flush):
                m.next = "IDLE"            # not started: never sent
            with m.Elif(can):
                m.next = next_state
            with m.Else():
                m.d.sync += c.stall_tx.eq(c.stall_tx + 1)

    def _data_state(self, m, out, sc, left, job, scale_flits, take_job):
        """The result flits of a slot, as the datapath gives them; under ``flush`` zero flits up
        to the packet's length (its header is out, and a packet is never truncated). With the
        last flit of a slot without scales, the next job is taken at once if one waits
        (``take_job``), so back-to-back slots cost their header and data flits and nothing more."""
        f = self._params.fabric
        fb = f.flit_bytes
        flush, st, c, dp = self.run.flush, self.status, self.counters, self.dp
        int8 = self.run.msg.dtype == DType.INT8
        scales_per_flit = f.flit_width // 16
        block_flits = BLOCK_ELEMENTS * 8 // f.flit_width
        with m.If(flush):
            m.d.comb += [st.busy.eq(1), out.push.eq(out.room), out.body.eq(0),
                         out.body_last.eq(left == 1)]
            with m.If(out.room):
                m.d.sync += left.eq(left - 1)
                with m.If(left == 1):
                    m.next = "IDLE"
        with m.Else():
            m.d.comb += [
                st.busy.eq(1), dp.ready.eq(out.room), out.push.eq(dp.valid & out.room),
                out.body.eq(dp.payload.data), out.body_last.eq(left == 1),
            ]
            if self._params.gather_pairs:
                m.d.comb += out.other.eq(dp.payload.other)
            with m.If(dp.valid & ~out.room):
                m.d.sync += c.stall_tx.eq(c.stall_tx + 1)
            with m.If(dp.valid & out.room):
                m.d.sync += left.eq(left - 1)
                # Take each block's scale on its first flit.
                with m.If(int8 & (sc.bflit == 0)):
                    new_acc = Signal(f.flit_width)
                    m.d.comb += new_acc.eq(sc.acc)
                    m.d.comb += new_acc.word_select(sc.pos, 16).eq(dp.payload.scale)
                    full = (sc.pos == scales_per_flit - 1) | (sc.blocks_left == 1)
                    m.d.comb += [sc.queue.w_data.eq(new_acc), sc.queue.w_en.eq(full)]
                    m.d.sync += [sc.acc.eq(Mux(full, 0, new_acc)),
                                 sc.pos.eq(Mux(full, 0, sc.pos + 1)),
                                 sc.blocks_left.eq(sc.blocks_left - 1)]
                m.d.sync += sc.bflit.eq(Mux(sc.bflit == block_flits - 1, 0, sc.bflit + 1))
                with m.If(left == 1):
                    with m.If(int8):
                        m.d.sync += scale_flits.eq(
                            (job.bytes // BLOCK_ELEMENTS * 2 + fb - 1) // fb)
                        m.next = "SCALE_HEADER"
                    with m.Else():
                        m.next = "IDLE"
                        with m.If(self.job.valid):
                            take_job()


class _Scales(SimpleNamespace):
    """The scale collector's state: ``acc`` (the scale flit being filled), ``pos`` (its next
    lane), ``bflit`` (the data flit's place in its block), ``blocks_left`` (in the slot), and the
    ``queue`` of full scale flits."""

    def restart(self, nbytes):
        """The statements that start collecting the scales of a slot of ``nbytes`` data bytes."""
        return [self.blocks_left.eq(nbytes // BLOCK_ELEMENTS), self.bflit.eq(0), self.pos.eq(0),
                self.acc.eq(0)]
