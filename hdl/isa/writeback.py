"""WriteBack: multicasts results and completion flags to every participant; tracks write responses."""

from amaranth.hdl import Module, Signal, Mux, Cat, Const, ResetInserter
from amaranth.lib import wiring, stream, data, fifo
from amaranth.lib.wiring import In, Out

from ..packet import MsgClass, Opcode, Status
from ..transport import packet_signature
from .datapath.common import output_layout
from .descriptor import IsaParams, flag_layout, WRITE_TAG_BITS
from .dtype import DType, BLOCK_ELEMENTS
from .read_issuer import job_layout, message_layout


__all__ = ["WriteBack", "flag_request_layout", "write_tag"]


def write_tag(params, seq):
    """The tag of the ISA's ``seq``-th WRITE (counted from reset, results, scales and flags alike):
    ``seq`` modulo ``2**tag_width``. Its low ``WRITE_TAG_BITS`` index the outstanding-write table,
    the bits above tell a late response from the one that index waits for now."""
    return seq & ((1 << params.fabric.tag_width) - 1)


def flag_request_layout(params):
    return data.StructLayout({"mask": params.fabric.ports, "addr": 48, "word": flag_layout()})


class WriteBack(wiring.Component):
    """Result write-back and completion flags, in lockstep to all participants.

    For each job (``job``, in slot order) it sends every participant in ``msg.mask`` a ``WRITE``
    (``inc = 1``) of the slot's result at ``dst_addr + seq * max_payload``: the header, then the
    datapath's output flits as they come. For INT8 the slot's output block scales (one FP16 per
    64-element block, taken from the datapath's output) follow in a second ``WRITE`` at
    ``dst_scale_addr + seq * scale_bytes_per_slot``. The ISA multicasts through per-port queues of its
    own (``wr``, the ISA's WRITE-class send streams), not through the switch core.

    ``flag`` writes one 4-byte completion flag word to every port of its mask, behind whatever
    result data is already queued (same class, same order).

    Write tags: every ``WRITE`` (result, scales or flag) takes the next number of a write sequence
    counter as its tag (:func:`write_tag`). Its low ``WRITE_TAG_BITS`` bits index a table of
    outstanding writes per port; a packet goes out only when that entry is free at every port of
    its mask (so at most 32 writes per port are unacknowledged), and marks it outstanding. A
    ``WRITE_RESP`` (``wresp``) is accepted when its port has that entry outstanding and its upper
    tag bits are those of the entry's current write; it then frees the entry, pulses ``progress``
    and, with a non-``OK`` status, sets ``write_error`` (sticky, cleared by ``clear_error``).
    Anything else (another opcode, an unknown tag, a duplicate, a late response to a write whose
    entry was freed by an abort) is dropped and counted in ``unknown_wresps``. ``outstanding`` is
    high while any entry is outstanding. ``status`` ORs the datapath's flags since
    ``clear_error``. ``stall_tx`` counts cycles the output waits for queue room or a free entry.

    ``flush`` (held by the wave controller while it aborts a collective) frees every entry and
    ends the packet being sent without truncating it: a result or scale packet whose header has
    gone out is completed with zero flits (its ``last`` flit where its length says), one whose
    header has not gone out is never started, a flag packet is completed. No job or flag is
    taken while ``flush`` is high; ``busy`` falls once the output is at a packet boundary.
    """

    def __init__(self, params):
        if not isinstance(params, IsaParams):
            raise TypeError(f"params must be an IsaParams, not {params!r}")
        self._params = params
        f = params.fabric
        pkt = packet_signature(f)
        super().__init__({
            "msg":         In(message_layout(params)),
            "job":         In(stream.Signature(job_layout(params))),
            "dp":          In(stream.Signature(output_layout(f.flit_width))),
            "flag":        In(stream.Signature(flag_request_layout(params))),
            "wr":          Out(pkt).array(f.ports),
            "wresp":       In(pkt).array(f.ports),
            "busy":        Out(1),
            "outstanding": Out(1),
            "write_error": Out(1),
            "status":      Out(2),
            "clear_error": In(1),
            "flush":       In(1),
            "progress":    Out(1),
            "unknown_wresps": Out(32),
            "stall_tx":    Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        fb = f.flit_bytes
        hdr_layout = f.header_layout
        msg = self.msg
        int8 = msg.dtype == DType.INT8
        block_flits = BLOCK_ELEMENTS * 8 // f.flit_width
        scales_per_flit = f.flit_width // 16

        # Per-port output queues; a flit is pushed to every port of `mask` at once.
        queues = []
        mask = Signal(n)
        for i in range(n):
            q = fifo.SyncFIFOBuffered(width=f.flit_layout.size, depth=4)
            m.submodules[f"wr_queue{i}"] = q
            wiring.connect(m, q.r_stream, wiring.flipped(self.wr[i]))
            queues.append(q)
        room = Cat(Mux(mask[i], q.w_rdy, 1) for i, q in enumerate(queues)).all()
        push = Signal()
        is_header = Signal()
        # The per-packet header fields; the constant ones are set on each queue's copy below.
        hdr = Signal(data.StructLayout({name: hdr_layout[name].shape
                                        for name in ("length", "tag", "addr")}))
        body = Signal(f.flit_width)
        body_last = Signal()

        # Outstanding-write table: one bit per (port, tag index).
        ntags = 1 << WRITE_TAG_BITS
        wseq = Signal(f.tag_width)               # the next write's tag
        widx = wseq[:WRITE_TAG_BITS]
        pending = [Signal(ntags, name=f"pending{i}") for i in range(n)]
        tag_free = Cat(Mux(mask[i], ~pending[i].bit_select(widx, 1), 1) for i in range(n)).all()
        can_start = room & tag_free
        start_pkt = Signal()                     # a header goes out this cycle
        with m.If(start_pkt):
            m.d.sync += wseq.eq(wseq + 1)
        for i, q in enumerate(queues):
            word = Signal(hdr_layout, name=f"hdr{i}")
            # The constant fields are set in the same process as the copied ones, so none becomes
            # a constant-only `always @*` block (which no simulator runs; Verilator ALWNEVER).
            m.d.comb += [word.length.eq(hdr.length), word.tag.eq(hdr.tag), word.addr.eq(hdr.addr),
                         word.opcode.eq(Opcode.WRITE), word.msg_class.eq(MsgClass.WRITE),
                         word.inc.eq(1), word.status.eq(0), word.src.eq(i), word.dst.eq(i)]
            m.d.comb += [
                q.w_data.eq(Mux(is_header, f.header_flit(word, last=0), Cat(body, body_last))),
                q.w_en.eq(push & mask[i]),
            ]

        # Write responses.
        accepted, unknown = [], []
        for i in range(n):
            rx = self.wresp[i]
            rhdr = Signal(hdr_layout, name=f"wresp_hdr{i}")
            in_body = Signal(name=f"wresp_body{i}")
            m.d.comb += [rx.ready.eq(1), rhdr.eq(rx.payload.data[:hdr_layout.size])]
            with m.If(rx.valid):
                m.d.sync += in_body.eq(~rx.payload.last)
            r_idx = rhdr.tag[:WRITE_TAG_BITS]
            r_hi = rhdr.tag[WRITE_TAG_BITS:]
            # The upper tag bits of the write an entry holds: entries below the next index were
            # last used in the current round of the sequence, the others in the round before.
            want_hi = Signal(f.tag_width - WRITE_TAG_BITS, name=f"wresp_hi{i}")
            m.d.comb += want_hi.eq(wseq[WRITE_TAG_BITS:] - (r_idx >= widx))
            head = rx.valid & ~in_body
            ok = Signal(name=f"wresp_ok{i}")
            m.d.comb += ok.eq(head & (rhdr.opcode == Opcode.WRITE_RESP)
                              & pending[i].bit_select(r_idx, 1) & (r_hi == want_hi) & ~self.flush)
            accepted.append(ok)
            unknown.append(head & ~ok)
            with m.If(ok & (rhdr.status != Status.OK)):
                m.d.sync += self.write_error.eq(1)
            # Set the entry of a write going out, clear the entry of an accepted response (never
            # the same entry: one is free, the other outstanding).
            set_bit = Mux(start_pkt & mask[i], Const(1, ntags) << widx, 0)
            clr_bit = Mux(ok, Const(1, ntags) << r_idx, 0)
            with m.If(self.flush):
                m.d.sync += pending[i].eq(0)
            with m.Else():
                m.d.sync += pending[i].eq((pending[i] | set_bit) & ~clr_bit)
        m.d.comb += [self.outstanding.eq(Cat(pending).any()),
                     self.progress.eq(Cat(accepted).any())]
        m.d.sync += self.unknown_wresps.eq(self.unknown_wresps + sum(unknown))

        with m.If(self.clear_error):
            m.d.sync += [self.write_error.eq(0), self.status.eq(0)]
        with m.If(self.dp.valid & self.dp.ready):
            m.d.sync += self.status.eq(self.status | self.dp.payload.status)

        # INT8 output scales: collected a flit at a time while the data goes out, sent after it.
        squeue = fifo.SyncFIFOBuffered(width=f.flit_width, depth=max(2, p.scale_flits_per_slot))
        # Internal, so an abort may simply empty it.
        m.submodules.scale_queue = ResetInserter(self.flush)(squeue)
        acc = Signal(f.flit_width)
        pos = Signal(range(scales_per_flit))
        bflit = Signal(range(block_flits))
        blocks_left = Signal(range(p.slot_flits + 1))

        job = Signal(job_layout(p))
        left = Signal(range(p.slot_flits + 1))
        scale_flits = Signal(range(p.scale_flits_per_slot + 1))
        flag = Signal(flag_request_layout(p))

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.job.valid & ~self.flush):
                    m.d.comb += self.job.ready.eq(1)
                    m.d.sync += [
                        job.eq(self.job.payload), mask.eq(msg.mask),
                        left.eq((self.job.payload.bytes + fb - 1) // fb),
                        blocks_left.eq(self.job.payload.bytes // BLOCK_ELEMENTS),
                        bflit.eq(0), pos.eq(0), acc.eq(0),
                    ]
                    m.next = "HEADER"
                with m.Elif(self.flag.valid & ~self.flush):
                    m.d.comb += self.flag.ready.eq(1)
                    m.d.sync += [flag.eq(self.flag.payload), mask.eq(self.flag.payload.mask)]
                    m.next = "FLAG_HEADER"
            with m.State("HEADER"):
                m.d.comb += [
                    self.busy.eq(1), is_header.eq(1), push.eq(can_start & ~self.flush),
                    start_pkt.eq(can_start & ~self.flush),
                    hdr.addr.eq(msg.dst_addr + job.seq * f.max_payload), hdr.length.eq(job.bytes),
                    # Set here with the other fields, not in a process of its own: a lone
                    # `always @*` reading a register that has not changed yet never runs on Icarus.
                    hdr.tag.eq(wseq),
                ]
                with m.If(self.flush):
                    m.next = "IDLE"            # not started: never sent
                with m.Elif(can_start):
                    m.next = "DATA"
                with m.Else():
                    m.d.sync += self.stall_tx.eq(self.stall_tx + 1)
            with m.State("DATA"):
                with m.If(self.flush):
                    # Complete the packet with zero flits: its header is out, and a packet is
                    # never truncated.
                    m.d.comb += [self.busy.eq(1), push.eq(room), body.eq(0), body_last.eq(left == 1)]
                    with m.If(room):
                        m.d.sync += left.eq(left - 1)
                        with m.If(left == 1):
                            m.next = "IDLE"
                with m.Else():
                    m.d.comb += [
                        self.busy.eq(1), self.dp.ready.eq(room), push.eq(self.dp.valid & room),
                        body.eq(self.dp.payload.data), body_last.eq(left == 1),
                    ]
                    with m.If(self.dp.valid & ~room):
                        m.d.sync += self.stall_tx.eq(self.stall_tx + 1)
                    with m.If(self.dp.valid & room):
                        m.d.sync += left.eq(left - 1)
                        # Take each block's scale on its first flit.
                        with m.If(int8 & (bflit == 0)):
                            new_acc = Signal(f.flit_width)
                            m.d.comb += new_acc.eq(acc)
                            m.d.comb += new_acc.word_select(pos, 16).eq(self.dp.payload.scale)
                            flush = (pos == scales_per_flit - 1) | (blocks_left == 1)
                            m.d.comb += [squeue.w_data.eq(new_acc), squeue.w_en.eq(flush)]
                            m.d.sync += [acc.eq(Mux(flush, 0, new_acc)), pos.eq(Mux(flush, 0, pos + 1)),
                                         blocks_left.eq(blocks_left - 1)]
                        m.d.sync += bflit.eq(Mux(bflit == block_flits - 1, 0, bflit + 1))
                        with m.If(left == 1):
                            with m.If(int8):
                                m.d.sync += scale_flits.eq(
                                    (job.bytes // BLOCK_ELEMENTS * 2 + fb - 1) // fb)
                                m.next = "SCALE_HEADER"
                            with m.Else():
                                m.next = "IDLE"
            with m.State("SCALE_HEADER"):
                m.d.comb += [
                    self.busy.eq(1), is_header.eq(1), push.eq(can_start & ~self.flush),
                    start_pkt.eq(can_start & ~self.flush),
                    hdr.addr.eq(msg.dst_scale_addr + job.seq * p.scale_bytes_per_slot),
                    hdr.length.eq(job.bytes // BLOCK_ELEMENTS * 2), hdr.tag.eq(wseq),
                ]
                with m.If(self.flush):
                    m.next = "IDLE"
                with m.Elif(can_start):
                    m.next = "SCALE_DATA"
                with m.Else():
                    m.d.sync += self.stall_tx.eq(self.stall_tx + 1)
            with m.State("SCALE_DATA"):
                # On an abort the scales may never have been collected: zero flits instead.
                go = Mux(self.flush, room, squeue.r_rdy & room)
                m.d.comb += [
                    self.busy.eq(1), push.eq(go), squeue.r_en.eq(go & ~self.flush),
                    body.eq(Mux(self.flush, 0, squeue.r_data)), body_last.eq(scale_flits == 1),
                ]
                with m.If(go):
                    m.d.sync += scale_flits.eq(scale_flits - 1)
                    with m.If(scale_flits == 1):
                        m.next = "IDLE"
            with m.State("FLAG_HEADER"):
                m.d.comb += [
                    self.busy.eq(1), is_header.eq(1), push.eq(can_start & ~self.flush),
                    start_pkt.eq(can_start & ~self.flush),
                    hdr.addr.eq(flag.addr), hdr.length.eq(4), hdr.tag.eq(wseq),
                ]
                with m.If(self.flush):
                    m.next = "IDLE"
                with m.Elif(can_start):
                    m.next = "FLAG_DATA"
                with m.Else():
                    m.d.sync += self.stall_tx.eq(self.stall_tx + 1)
            with m.State("FLAG_DATA"):
                m.d.comb += [
                    self.busy.eq(1), push.eq(room),
                    body.eq(flag.word.as_value()), body_last.eq(1),
                ]
                with m.If(room):
                    m.next = "IDLE"
        return m
