"""Isa: the In-Switch Accelerator, wired from its blocks (paper Fig. 4, right)."""

from amaranth.hdl import Module, Signal, ResetInserter
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ..lib import Queue, sum_counters
from ..packet import MsgClass
from ..transport import packet_signature
from ..transport.signature import ParamsComponent, engine_members
from ..params import check_type
from .barrier import BarrierManager
from .copy_path import CopyPath
from .datapath import Datapath
from .descriptor import IsaParams
from .feeder import Feeder
from .instruction_buffer import InstructionBuffer, load_layout
from .interfaces import counters_layout, block_counters_layout, job_layout
from .read_issuer import ReadIssuer
from .table_manager import TableManager
from .wave_controller import WaveController
from .wave_table import WaveTable
from .writeback import WriteBack


__all__ = ["Isa", "WriteDrain"]


class WriteDrain(wiring.Component):
    """Nothing writes to the ISA: its WRITE-class receive streams are drained and each packet
    (one per header) is counted in ``bad_requests``.

    Members
    -------
    rx : In(packet_signature).array(ports)
    counters : Out(bad_requests)
    """

    def __init__(self, fabric):
        self._fabric = fabric
        super().__init__({
            "rx":       In(packet_signature(fabric)).array(fabric.ports),
            "counters": Out(block_counters_layout("bad_requests")),
        })

    def elaborate(self, platform):
        m = Module()
        heads = []
        for i, rx in enumerate(self.rx):
            in_body = Signal(name=f"write_body{i}")
            m.d.comb += rx.ready.eq(1)
            with m.If(rx.valid):
                m.d.sync += in_body.eq(~rx.payload.last)
            heads.append(rx.valid & ~in_body)
        bad = self.counters.bad_requests
        m.d.sync += bad.eq(bad + sum(heads))
        return m


class Isa(ParamsComponent):
    """The In-Switch Accelerator.

    It talks to the switch ports' ISA queues directly, per port and message class:

    ======  ==================================  =======================================
    class   received (``rx``)                   sent (``tx``)
    ======  ==================================  =======================================
    REQ     arrivals (ATOMIC_ADD at a sync      read requests for wave data and scales
            resource)
    WRITE   (none expected: dropped, counted)   result data, scales, completion flags
    RDATA   read responses -> wave tables;      (none)
            push mode: also the push WRITEs
            (the switch port steers them here)
    WRESP   write responses (tracked)           arrival acknowledgements
    ======  ==================================  =======================================

    Inside, the blocks are joined only by the signatures of :mod:`.interfaces` (see its diagram).

    Members
    -------
    rx : In(packet_signature).array(ports, NUM_CLASSES)
    tx : Out(packet_signature).array(ports, NUM_CLASSES)
    load : In(stream.Signature(load_layout))
        Descriptor loading (see :class:`InstructionBuffer` and ``docs/ISA.md``).
    counters : Out(counters_layout)
        Each the sum of the blocks' counters of that name.
    """

    def __init__(self, params=None):
        params = IsaParams() if params is None else params
        self._params = check_type("params", params, IsaParams)
        super().__init__(engine_members(params.fabric, load_layout(params), counters_layout()))

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        REQ, WRITE, RDATA, WRESP = (c.value for c in MsgClass)

        m.submodules.ibuf = ibuf = InstructionBuffer(p)
        m.submodules.barrier = barrier = BarrierManager(p)
        m.submodules.controller = ctl = WaveController(p)
        m.submodules.tables = tables = TableManager(p)
        m.submodules.wave_table = wt = WaveTable(p)
        m.submodules.issuer = issuer = ReadIssuer(p)
        m.submodules.feeder = feeder = Feeder(p)
        m.submodules.writeback = wb = WriteBack(p)
        m.submodules.write_drain = drain = WriteDrain(f)
        m.submodules.copy = copy = CopyPath(p)
        dp = Datapath(n_inputs=f.ports, flit_width=f.flit_width)
        # Jobs wait here between issue, reduction and write-back: at most one per slot.
        feed_jobs = Queue(job_layout(p), depth=max(2, p.slots))
        wb_jobs = Queue(job_layout(p), depth=max(2, p.slots))
        # An aborted collective (watchdog) leaves nothing behind in these: they hold no counter
        # and no packet half sent to the fabric, so a reset is the whole clean-up (the datapath's
        # INT8 block state included). The blocks with counters or fabric streams flush themselves.
        m.submodules.datapath = ResetInserter(ctl.run.flush)(dp)
        m.submodules.feed_jobs = ResetInserter(ctl.run.flush)(feed_jobs)
        m.submodules.wb_jobs = ResetInserter(ctl.run.flush)(wb_jobs)

        # Control: the wave controller and the blocks it drives.
        connect(m, flipped(self.load), ibuf.load)
        connect(m, ctl.program, ibuf.program)
        connect(m, ctl.barrier, barrier.query)
        connect(m, ctl.run, issuer.run, tables.run, wt.run, feeder.run, wb.run, copy.run)
        connect(m, ctl.issue, issuer.issue)
        connect(m, wt.status, ctl.reads)
        connect(m, wb.status, ctl.writes)
        connect(m, ctl.flag, wb.flag)
        if p.push_slots:
            connect(m, ctl.push, wt.push)

        # Data path: issuer -> wave tables -> feeder -> datapath (or, copying, past it) ->
        # write-back.
        connect(m, tables.alloc, issuer.alloc)
        connect(m, issuer.arm, wt.arm)
        connect(m, issuer.job, feed_jobs.i)
        connect(m, feed_jobs.o, feeder.job)
        connect(m, feeder.rd, wt.rd)
        connect(m, feeder.release, tables.release)
        connect(m, feeder.wb_job, wb_jobs.i)
        connect(m, wb_jobs.o, wb.job)
        connect(m, feeder.dp, copy.feed)
        connect(m, copy.dp_in, dp.i)
        connect(m, dp.o, copy.dp_out)
        connect(m, copy.out, wb.dp)

        # The fabric, per port and class. Nothing is ever sent in RDATA.
        for i in range(f.ports):
            rx, tx = self.rx[i], self.tx[i]
            connect(m, flipped(rx[REQ]), barrier.req[i])
            connect(m, barrier.ack[i], flipped(tx[WRESP]))
            connect(m, flipped(rx[WRITE]), drain.rx[i])
            connect(m, flipped(rx[RDATA]), wt.rdata[i])
            connect(m, flipped(rx[WRESP]), wb.wresp[i])
            connect(m, issuer.req[i], flipped(tx[REQ]))
            connect(m, wb.wr[i], flipped(tx[WRITE]))
            m.d.comb += tx[RDATA].valid.eq(0)

        # Without push mode nothing drops a push.
        sum_counters(m, self.counters, [ctl, barrier, tables, wt, issuer, feeder, wb, drain],
                     constant=() if p.push_slots else ("bad_pushes",))
        return m
