"""Isa: the In-Switch Accelerator, wired from its blocks (paper Fig. 4, right)."""

from amaranth.hdl import Module, Signal, ResetInserter
from amaranth.lib import wiring, stream, fifo
from amaranth.lib.wiring import In, Out, connect, flipped

from ..packet import MsgClass, NUM_CLASSES
from ..transport import packet_signature
from .barrier import BarrierManager
from .datapath import Datapath
from .descriptor import IsaParams
from .feeder import Feeder
from .instruction_buffer import InstructionBuffer, load_layout
from .read_issuer import ReadIssuer, job_layout
from .table_manager import TableManager
from .wave_controller import WaveController, counters_layout
from .wave_table import WaveTable
from .writeback import WriteBack


__all__ = ["Isa"]


class Isa(wiring.Component):
    """The In-Switch Accelerator.

    It talks to the switch ports' ISA queues directly, per port and message class:

    ======  ==================================  =======================================
    class   received (``rx``)                   sent (``tx``)
    ======  ==================================  =======================================
    REQ     arrivals (ATOMIC_ADD at a sync      read requests for wave data and scales
            resource)
    WRITE   (none expected: dropped, counted)   result data, scales, completion flags
    RDATA   read responses -> wave tables       (none)
    WRESP   write responses (tracked)           arrival acknowledgements
    ======  ==================================  =======================================

    Members
    -------
    rx : In(packet_signature).array(ports, NUM_CLASSES)
    tx : Out(packet_signature).array(ports, NUM_CLASSES)
    load : In(stream.Signature(load_layout))
        Descriptor loading (see :class:`InstructionBuffer` and ``docs/ISA.md``).
    counters : Out(counters_layout)
    """

    def __init__(self, params=None):
        params = IsaParams() if params is None else params
        if not isinstance(params, IsaParams):
            raise TypeError(f"params must be an IsaParams, not {params!r}")
        self._params = params
        f = params.fabric
        pkt = packet_signature(f)
        super().__init__({
            "rx":       In(pkt).array(f.ports, NUM_CLASSES),
            "tx":       Out(pkt).array(f.ports, NUM_CLASSES),
            "load":     In(stream.Signature(load_layout(params))),
            "counters": Out(counters_layout()),
        })

    @property
    def params(self):
        return self._params

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        REQ, WRITE, RDATA, WRESP = (c.value for c in MsgClass)

        m.submodules.ibuf = ibuf = InstructionBuffer(p)
        m.submodules.barrier = barrier = BarrierManager(p)
        m.submodules.controller = ctl = WaveController(p)
        m.submodules.tables = tables = TableManager(p)
        m.submodules.wave_table = wt = WaveTable(p)
        m.submodules.issuer = issuer = ReadIssuer(p)
        m.submodules.feeder = feeder = Feeder(p)
        dp = Datapath(n_inputs=n, flit_width=f.flit_width)
        m.submodules.writeback = wb = WriteBack(p)
        # Jobs wait here between issue, reduction and write-back: at most one per slot.
        feed_jobs = fifo.SyncFIFOBuffered(width=job_layout(p).size, depth=max(2, p.slots))
        wb_jobs = fifo.SyncFIFOBuffered(width=job_layout(p).size, depth=max(2, p.slots))
        # An aborted collective (watchdog) leaves nothing behind in these: they hold no counter
        # and no packet half sent to the fabric, so a reset is the whole clean-up (the datapath's
        # INT8 block state included). The blocks with counters or fabric streams flush themselves.
        m.submodules.datapath = ResetInserter(ctl.flush)(dp)
        m.submodules.feed_jobs = ResetInserter(ctl.flush)(feed_jobs)
        m.submodules.wb_jobs = ResetInserter(ctl.flush)(wb_jobs)

        connect(m, flipped(self.load), ibuf.load)
        m.d.comb += [
            ibuf.load_enable.eq(ctl.load_enable), ibuf.read_addr.eq(ctl.read_addr),
            ctl.desc.eq(ibuf.desc), ctl.length.eq(ibuf.length), ctl.restart.eq(ibuf.restart),
            ctl.turn.eq(ibuf.turn), ibuf.advance.eq(ctl.advance), ctl.loading.eq(ibuf.loading),
            barrier.query_sync.eq(ctl.query_sync), barrier.query_mask.eq(ctl.query_mask),
            barrier.consume.eq(ctl.consume),
            ctl.complete.eq(barrier.complete), ctl.generation.eq(barrier.generation),
        ]

        # Data path: issuer -> wave tables -> feeder -> datapath -> write-back.
        m.d.comb += [issuer.start.eq(ctl.start), issuer.msg.eq(ctl.msg),
                     feeder.dtype.eq(ctl.msg.dtype), feeder.mask.eq(ctl.msg.mask),
                     wb.msg.eq(ctl.msg)]
        connect(m, tables.alloc, issuer.alloc)
        connect(m, issuer.arm, wt.arm)
        connect(m, issuer.job, feed_jobs.w_stream)
        connect(m, feed_jobs.r_stream, feeder.job)
        connect(m, feeder.wb_job, wb_jobs.w_stream)
        connect(m, wb_jobs.r_stream, wb.job)
        connect(m, feeder.dp, dp.i)
        connect(m, dp.o, wb.dp)
        connect(m, ctl.flag, wb.flag)
        m.d.comb += [
            wt.rd_slot.eq(feeder.rd_slot), wt.rd_flit.eq(feeder.rd_flit),
            wt.rd_scale_flit.eq(feeder.rd_scale_flit), wt.rd_en.eq(feeder.rd_en),
            tables.release.eq(feeder.release), tables.end.eq(feeder.end),
            wt.clear_error.eq(ctl.clear_error), wb.clear_error.eq(ctl.clear_error),
            ctl.read_error.eq(wt.resp_error), ctl.write_error.eq(wb.write_error),
            ctl.dp_status.eq(wb.status), ctl.wb_busy.eq(wb.busy),
            ctl.outstanding.eq(wb.outstanding),
            issuer.flush.eq(ctl.flush), feeder.flush.eq(ctl.flush), tables.flush.eq(ctl.flush),
            wt.flush.eq(ctl.flush), wb.flush.eq(ctl.flush),
            ctl.progress.eq(wt.progress | wb.progress), ctl.issuer_busy.eq(issuer.busy),
        ]
        for i in range(n):
            m.d.comb += [feeder.rd_data[i].eq(wt.rd_data[i]), feeder.rd_scale[i].eq(wt.rd_scale[i]),
                         feeder.avail[i].eq(wt.avail[i]), feeder.scales_done[i].eq(wt.scales_done[i])]

        # A slot is done when the write-back has taken its last data flit.
        slot_done = Signal()
        m.d.comb += slot_done.eq(dp.o.valid & dp.o.ready & dp.o.payload.last)
        m.d.comb += ctl.slot_done.eq(slot_done)

        # Per port and class.
        bad_writes = Signal(32)
        write_terms = []
        for i in range(n):
            connect(m, flipped(self.rx[i][REQ]), barrier.req[i])
            connect(m, barrier.ack[i], flipped(self.tx[i][WRESP]))
            connect(m, flipped(self.rx[i][RDATA]), wt.rdata[i])
            connect(m, flipped(self.rx[i][WRESP]), wb.wresp[i])
            connect(m, issuer.req[i], flipped(self.tx[i][REQ]))
            connect(m, wb.wr[i], flipped(self.tx[i][WRITE]))
            # Nothing writes to the ISA: drain and count such packets (one per header).
            rx = self.rx[i][WRITE]
            in_body = Signal(name=f"write_body{i}")
            m.d.comb += rx.ready.eq(1)
            with m.If(rx.valid):
                m.d.sync += in_body.eq(~rx.payload.last)
            write_terms.append(rx.valid & ~in_body)
            m.d.comb += self.tx[i][RDATA].valid.eq(0)
        m.d.sync += bad_writes.eq(bad_writes + sum(write_terms))

        slots_issued = Signal(32)
        with m.If(issuer.arm.valid):
            m.d.sync += slots_issued.eq(slots_issued + 1)

        c = self.counters
        m.d.comb += [
            c.busy_cycles.eq(ctl.busy_cycles), c.barrier_cycles.eq(ctl.barrier_cycles),
            c.collectives.eq(ctl.collectives), c.bad_descriptors.eq(ctl.bad_descriptors),
            c.slots.eq(slots_issued), c.waves.eq(tables.waves_done),
            c.stall_slot.eq(issuer.stall_slot), c.stall_req.eq(issuer.stall_req),
            c.stall_data.eq(feeder.stall_data), c.stall_tx.eq(wb.stall_tx),
            c.stall_wresp.eq(ctl.stall_wresp), c.unknown_tags.eq(wt.unknown_tags),
            c.bad_arrivals.eq(barrier.bad_arrivals), c.dup_arrivals.eq(barrier.dup_arrivals),
            c.bad_requests.eq(barrier.bad_requests + bad_writes),
            c.unknown_wresps.eq(wb.unknown_wresps), c.timeouts.eq(ctl.timeouts),
        ]
        return m
