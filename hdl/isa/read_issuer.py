"""ReadIssuer: turns a message into per-slot read requests to every participant."""

from amaranth.hdl import Module, Signal, Mux, Cat
from amaranth.lib import wiring, stream, data, fifo
from amaranth.lib.wiring import In, Out

from ..packet import MsgClass, Opcode
from ..transport import packet_signature
from ..params import check_type
from .descriptor import IsaParams, ReadKind, read_tag_layout
from .dtype import DType, BLOCK_ELEMENTS
from .interfaces import (message_layout, job_layout, arm_layout, block_counters_layout,
                         RunControl, IssueControl)


__all__ = ["ReadIssuer", "message_layout", "job_layout"]


class ReadIssuer(wiring.Component):
    """Issues the reads of a message, one slot at a time, as slots become free.

    On ``issue.start`` (pulse; ``run.msg`` must hold for the whole message) the issuer walks the
    message in slots of ``max_payload`` bytes. For each slot it takes a free slot from the table
    manager (``alloc``), arms the wave table, hands the job to the feeder (``job``) and sends a
    ``READ`` (``inc = 1``, tag ``{kind: DATA, slot, seq: issue number}``,
    :func:`~.descriptor.read_tag_layout`) to every participant; for INT8 a second ``READ`` fetches
    the slot's block scales (same tag, kind ``SCALE``). The issue number counts armed slots and is
    never reset, so a late response to an earlier use of a slot (a duplicate, or one of an aborted
    collective) does not match the slot's current tag. Requests to all participants go out in
    lockstep through small per-port queues (``req``, the ISA's REQ-class send streams); each
    request is one flit, so no packet is ever left half sent. ``issue.busy`` stays high until
    every request has been queued.

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
        f = p.fabric
        n = f.ports
        hdr_layout = f.header_layout
        msg, flush, busy, c = self.run.msg, self.run.flush, self.issue.busy, self.counters

        queues = []
        for i in range(n):
            q = fifo.SyncFIFOBuffered(width=f.flit_layout.size, depth=4)
            m.submodules[f"req_queue{i}"] = q
            wiring.connect(m, q.r_stream, wiring.flipped(self.req[i]))
            queues.append(q)
        room = Cat(Mux(msg.mask[i], q.w_rdy, 1) for i, q in enumerate(queues)).all()

        seq = Signal.like(self.job.payload.seq)
        done_bytes = Signal.like(msg.bytes)   # bytes of the message already issued
        slot = Signal(p.slot_bits)     # the slot of the pending scale read
        issue = Signal(p.read_seq_bits)  # issue number of the next slot armed (never reset)
        slot_issue = Signal(p.read_seq_bits)  # ... and of the pending scale read's slot
        scale_len = Signal(range(p.scale_bytes_per_slot + 1))
        left = Signal.like(msg.bytes)
        m.d.comb += left.eq(msg.bytes - done_bytes)
        chunk = Signal(range(f.max_payload + 1))
        m.d.comb += chunk.eq(Mux(left > f.max_payload, f.max_payload, left))
        is_last = left <= f.max_payload
        int8 = msg.dtype == DType.INT8

        # The per-packet header fields; the constant ones are set on each queue's copy below.
        hdr = Signal(data.StructLayout({"length": hdr_layout["length"].shape,
                                        "tag": read_tag_layout(p),
                                        "addr": hdr_layout["addr"].shape}))
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
                with m.If(self.issue.start):
                    m.d.sync += [seq.eq(0), done_bytes.eq(0)]
                    m.next = "SLOT"
            with m.State("SLOT"):
                m.d.comb += busy.eq(1)
                go = self.alloc.valid & self.job.ready & room & ~flush
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
                    hdr.tag.kind.eq(ReadKind.DATA), hdr.tag.slot.eq(self.alloc.payload),
                    hdr.tag.seq.eq(issue),
                ]
                with m.If(~self.alloc.valid):
                    m.d.sync += c.stall_slot.eq(c.stall_slot + 1)
                with m.Elif(~room):
                    m.d.sync += c.stall_req.eq(c.stall_req + 1)
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
                with m.If(flush):
                    m.next = "IDLE"
            with m.State("SCALE"):
                m.d.comb += [
                    busy.eq(1),
                    push.eq(room & ~flush),
                    hdr.addr.eq(msg.src_scale_addr + (seq - 1) * p.scale_bytes_per_slot),
                    hdr.length.eq(scale_len),
                    hdr.tag.kind.eq(ReadKind.SCALE), hdr.tag.slot.eq(slot),
                    hdr.tag.seq.eq(slot_issue),
                ]
                with m.If(~room):
                    m.d.sync += c.stall_req.eq(c.stall_req + 1)
                with m.Else():
                    with m.If(done_bytes == msg.bytes):
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "SLOT"
                with m.If(flush):
                    m.next = "IDLE"

        # The ISA's `slots` counter: every slot armed.
        with m.If(self.arm.valid):
            m.d.sync += c.slots.eq(c.slots + 1)
        return m
