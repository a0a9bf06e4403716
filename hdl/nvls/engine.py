"""NvlsEngine: the switch side of NVLink SHARP (the baseline), beside the ISA (docs/NVLS.md)."""

from amaranth.hdl import Module, Signal, Cat, Mux
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import connect, flipped

from ..packet import MsgClass
from ..params import check_type
from ..transport.signature import ParamsComponent, engine_members
from .acks import AckTable
from .params import NvlsParams, mc_load_layout, nvls_counters_layout
from .requests import RequestUnit
from .responses import ResponseBuffer
from .sequencer import ReduceSequencer


__all__ = ["NvlsEngine", "OUT_DEPTH"]

#: Flits of each per-port, per-class output buffer, ahead of the switch port's own NVLS queue.
OUT_DEPTH = 4


class NvlsEngine(ParamsComponent):
    """Multimem requests from the GPUs, answered as NVLS's switch answers them.

    ``rx[p][c]``/``tx[p][c]`` are the NVLS streams of switch port ``p`` in class ``c``: what the
    port's filter steers here (INC=0 READ, WRITE and ATOMIC_ADD to multicast addresses; READ_RESP
    and WRITE_RESP addressed to the switch's own port) and what the engine sends on the port's
    link. Blocks: :class:`RequestUnit` (multicast table, request fan-out), :class:`ResponseBuffer`
    and :class:`ReduceSequencer` (the reduction table, ``ld_reduce`` answers), :class:`AckTable`
    (``st`` and ``red`` answers). The RDATA and WRESP streams are never back-pressured, so the
    members' responses always drain; requests wait while their table is full.

    Members
    -------
    rx : In(packet_signature).array(ports, NUM_CLASSES)
    tx : Out(packet_signature).array(ports, NUM_CLASSES)
    load : In(stream.Signature(mc_load_layout))
    counters : Out(nvls_counters_layout)
    """

    def __init__(self, params):
        self._params = check_type("params", params, NvlsParams)
        super().__init__(engine_members(params.fabric, mc_load_layout(params),
                                        nvls_counters_layout()))

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        req = m.submodules.requests = RequestUnit(p)
        acks = m.submodules.acks = AckTable(p)
        buf = m.submodules.responses = ResponseBuffer(p)
        seq = m.submodules.sequencer = ReduceSequencer(p)
        connect(m, flipped(self.load), req.load)
        connect(m, seq.view, buf.view)
        connect(m, req.ack_alloc, acks.alloc)
        m.d.comb += [req.ack_free.eq(acks.free), req.ack_entry.eq(acks.entry),
                     req.reduce_free.eq(buf.free), req.reduce_entry.eq(buf.entry)]
        # An ld_reduce's entry is armed in the buffer and queued for the sequencer together.
        m.d.comb += [seq.alloc.valid.eq(req.reduce_alloc.valid),
                     seq.alloc.payload.eq(req.reduce_alloc.payload),
                     req.reduce_alloc.ready.eq(seq.alloc.ready),
                     buf.arm.valid.eq(req.reduce_alloc.valid & seq.alloc.ready),
                     buf.arm.payload.eq(req.reduce_alloc.payload)]
        for q in range(n):
            connect(m, flipped(self.rx[q][MsgClass.REQ.value]), req.req[q])
            connect(m, flipped(self.rx[q][MsgClass.WRITE.value]), req.wr[q])
            connect(m, flipped(self.rx[q][MsgClass.RDATA.value]), buf.rdata[q])
            connect(m, flipped(self.rx[q][MsgClass.WRESP.value]), acks.wresp[q])
        self._outputs(m, req, seq, acks)
        self._count(m, req, buf, acks)
        return m

    def _outputs(self, m, req, seq, acks):
        """Per port and class, a small FIFO to ``tx``: the request fan-out (REQ, WRITE: every
        member in the mask at once, each header's ``dst`` set to the member), the ``ld_reduce``
        answers (RDATA) and the ``st``/``red`` answers (WRESP)."""
        f = self._params.fabric
        n = f.ports
        width = f.flit_layout.size
        fifos = {}
        for q in range(n):
            for c in MsgClass:
                fifo = m.submodules[f"out{q}_{c.name.lower()}"] = SyncFIFOBuffered(
                    width=width, depth=OUT_DEPTH)
                fifos[q, c] = fifo
                tx = self.tx[q][c.value]
                m.d.comb += [tx.valid.eq(fifo.r_rdy), tx.payload.eq(fifo.r_data),
                             fifo.r_en.eq(tx.ready)]
        fan = req.fan.payload
        room_req = Cat(~fan.mask[q] | fifos[q, MsgClass.REQ].w_rdy for q in range(n))
        room_wr = Cat(~fan.mask[q] | fifos[q, MsgClass.WRITE].w_rdy for q in range(n))
        m.d.comb += req.fan.ready.eq(Mux(fan.write, room_wr.all(), room_req.all()))
        fire = req.fan.valid & req.fan.ready
        for q in range(n):
            flit = Signal(f.flit_layout, name=f"fan_flit{q}")
            m.d.comb += flit.eq(fan.flit)
            with m.If(fan.header):
                hdr = f.header_layout(flit.data[:f.header_layout.size])
                m.d.comb += hdr.dst.eq(q)
            for c, is_write in ((MsgClass.REQ, 0), (MsgClass.WRITE, 1)):
                m.d.comb += [fifos[q, c].w_en.eq(fire & fan.mask[q] & (fan.write == is_write)),
                             fifos[q, c].w_data.eq(flit)]
        for src, c in ((seq.out, MsgClass.RDATA), (acks.out, MsgClass.WRESP)):
            ready = Signal(name=f"ready_{c.name.lower()}")
            for q in range(n):
                fifo = fifos[q, c]
                with m.If(src.payload.port == q):
                    m.d.comb += ready.eq(fifo.w_rdy)
                m.d.comb += [fifo.w_en.eq(src.valid & (src.payload.port == q)),
                             fifo.w_data.eq(src.payload.flit)]
            m.d.comb += src.ready.eq(ready)

    def _count(self, m, req, buf, acks):
        c = self.counters
        m.d.sync += [c.ld_reduces.eq(c.ld_reduces + req.ld_reduce),
                     c.stores.eq(c.stores + req.store), c.reds.eq(c.reds + req.red),
                     c.refused.eq(c.refused + req.refused),
                     c.stale_rdata.eq(c.stale_rdata + sum(buf.stale)),
                     c.stale_wresp.eq(c.stale_wresp + sum(acks.stale))]
