"""ReadIssuer: turns a message into per-slot read requests to every participant."""

from amaranth.hdl import Module, Signal, Mux, Cat, Const
from amaranth.lib import wiring, stream, data, fifo
from amaranth.lib.wiring import In, Out

from ..packet import MsgClass, Opcode
from ..transport import packet_signature
from .descriptor import IsaParams
from .dtype import DType, BLOCK_ELEMENTS
from .wave_table import arm_layout, TAG_DATA, TAG_SCALE


__all__ = ["ReadIssuer", "message_layout", "job_layout"]


def message_layout(params):
    """What the issuer, feeder and write-back need to know of the running collective."""
    return data.StructLayout({
        "dtype":      DType,
        "mask":       params.fabric.ports,
        "bytes":      34,            # data bytes per participant (elements * 2, or * 1 for INT8)
        "src_addr":   48, "src_scale_addr": 48,
        "dst_addr":   48, "dst_scale_addr": 48,
    })


def job_layout(params):
    """One slot's worth of a message: its wave-table ``slot``, its index ``seq`` in the message,
    its data ``bytes`` (the last slot may be short) and whether it is the message's ``last``."""
    return data.StructLayout({"slot": params.slot_bits, "seq": 26,
                              "bytes": range(params.fabric.max_payload + 1), "last": 1})


class ReadIssuer(wiring.Component):
    """Issues the reads of a message, one slot at a time, as slots become free.

    On ``start`` (pulse; ``msg`` must hold for the whole message) the issuer walks the message in
    slots of ``max_payload`` bytes. For each slot it takes a free slot from the table manager
    (``alloc``), arms the wave table, hands the job to the feeder (``job``) and sends a ``READ``
    (``inc = 1``, tag = (issue number, slot, data), :func:`~.wave_table.read_tag`) to every
    participant; for INT8 a second ``READ`` fetches the slot's block scales (same tag, kind scale).
    The issue number counts armed slots and is never reset, so a late response to an earlier use
    of a slot (a duplicate, or one of an aborted collective) does not match the slot's current
    tag. Requests to all participants go out in lockstep through small per-port queues (``req``,
    the ISA's REQ-class send streams); each request is one flit, so no packet is ever left half
    sent. ``busy`` stays high until every request has been queued.

    ``flush`` (the wave controller aborting a collective) stops the issuer at once: nothing more
    is armed or queued, and requests already queued still go out whole.

    Stall counters: ``stall_slot`` counts cycles waiting for a free slot (wave regulation),
    ``stall_req`` cycles waiting for room in a request queue.
    """

    def __init__(self, params):
        if not isinstance(params, IsaParams):
            raise TypeError(f"params must be an IsaParams, not {params!r}")
        self._params = params
        f = params.fabric
        super().__init__({
            "start":      In(1),
            "flush":      In(1),
            "msg":        In(message_layout(params)),
            "busy":       Out(1),
            "alloc":      In(stream.Signature(params.slot_bits)),
            "arm":        Out(stream.Signature(arm_layout(params), always_ready=True)),
            "job":        Out(stream.Signature(job_layout(params))),
            "req":        Out(packet_signature(f)).array(f.ports),
            "stall_slot": Out(32),
            "stall_req":  Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        hdr_layout = f.header_layout
        msg = self.msg

        queues = []
        for i in range(n):
            q = fifo.SyncFIFOBuffered(width=f.flit_layout.size, depth=4)
            m.submodules[f"req_queue{i}"] = q
            wiring.connect(m, q.r_stream, wiring.flipped(self.req[i]))
            queues.append(q)
        room = Cat(Mux(msg.mask[i], q.w_rdy, 1) for i, q in enumerate(queues)).all()

        seq = Signal(26)
        done_bytes = Signal(34)        # bytes of the message already issued
        slot = Signal(p.slot_bits)     # the slot of the pending scale read
        issue = Signal(p.read_seq_bits)  # issue number of the next slot armed (never reset)
        slot_issue = Signal(p.read_seq_bits)  # ... and of the pending scale read's slot
        scale_len = Signal(range(p.scale_bytes_per_slot + 1))
        left = Signal(34)
        m.d.comb += left.eq(msg.bytes - done_bytes)
        chunk = Signal(range(f.max_payload + 1))
        m.d.comb += chunk.eq(Mux(left > f.max_payload, f.max_payload, left))
        is_last = left <= f.max_payload
        int8 = msg.dtype == DType.INT8

        # The per-packet header fields; the constant ones are set on each queue's copy below.
        hdr = Signal(data.StructLayout({name: hdr_layout[name].shape
                                        for name in ("length", "tag", "addr")}))
        push = Signal()
        for i, q in enumerate(queues):
            word = Signal(hdr_layout, name=f"hdr{i}")
            # The constant fields are set in the same process as the copied ones, so none becomes
            # a constant-only `always @*` block (which no simulator runs; Verilator ALWNEVER).
            m.d.comb += [word.length.eq(hdr.length), word.tag.eq(hdr.tag), word.addr.eq(hdr.addr),
                         word.opcode.eq(Opcode.READ), word.msg_class.eq(MsgClass.REQ),
                         word.inc.eq(1), word.status.eq(0), word.src.eq(i), word.dst.eq(i)]
            m.d.comb += [
                q.w_data.eq(f.header_flit(word, last=1)),
                q.w_en.eq(push & msg.mask[i]),
            ]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [seq.eq(0), done_bytes.eq(0)]
                    m.next = "SLOT"
            with m.State("SLOT"):
                m.d.comb += self.busy.eq(1)
                go = self.alloc.valid & self.job.ready & room & ~self.flush
                m.d.comb += [
                    self.alloc.ready.eq(go),
                    self.arm.valid.eq(go),
                    self.arm.payload.slot.eq(self.alloc.payload),
                    self.arm.payload.mask.eq(msg.mask),
                    self.arm.payload.scales.eq(int8),
                    self.arm.payload.seq.eq(issue),
                    self.job.valid.eq(go),
                    self.job.payload.slot.eq(self.alloc.payload),
                    self.job.payload.seq.eq(seq),
                    self.job.payload.bytes.eq(chunk),
                    self.job.payload.last.eq(is_last),
                    push.eq(go),
                    hdr.addr.eq(msg.src_addr + done_bytes),
                    hdr.length.eq(chunk),
                    hdr.tag.eq(Cat(Const(TAG_DATA, 1), self.alloc.payload, issue)),
                ]
                with m.If(~self.alloc.valid):
                    m.d.sync += self.stall_slot.eq(self.stall_slot + 1)
                with m.Elif(~room):
                    m.d.sync += self.stall_req.eq(self.stall_req + 1)
                with m.If(go):
                    m.d.sync += [slot.eq(self.alloc.payload), seq.eq(seq + 1),
                                 done_bytes.eq(done_bytes + chunk), issue.eq(issue + 1),
                                 slot_issue.eq(issue)]
                    with m.If(int8):
                        # Scales of this slot: 2 bytes per 64-element block.
                        m.d.sync += scale_len.eq(chunk // (BLOCK_ELEMENTS // 2))
                        m.next = "SCALE"
                    with m.Elif(is_last):
                        m.next = "IDLE"
                with m.If(self.flush):
                    m.next = "IDLE"
            with m.State("SCALE"):
                m.d.comb += [
                    self.busy.eq(1),
                    push.eq(room & ~self.flush),
                    hdr.addr.eq(msg.src_scale_addr + (seq - 1) * p.scale_bytes_per_slot),
                    hdr.length.eq(scale_len),
                    hdr.tag.eq(Cat(Const(TAG_SCALE, 1), slot, slot_issue)),
                ]
                with m.If(~room):
                    m.d.sync += self.stall_req.eq(self.stall_req + 1)
                with m.Else():
                    with m.If(done_bytes == msg.bytes):
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "SLOT"
                with m.If(self.flush):
                    m.next = "IDLE"
        return m
