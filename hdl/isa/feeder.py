"""Feeder: streams each slot from every participant's wave table into the datapath."""

from amaranth.hdl import Module, Signal, Mux, Cat
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from .datapath.common import input_layout
from ..params import check_type
from .descriptor import IsaParams
from .dtype import DType, BLOCK_ELEMENTS
from .interfaces import job_layout, block_counters_layout, RunControl, WaveTableRead, SlotRelease


__all__ = ["Feeder"]


class Feeder(wiring.Component):
    """Reads slots in order and feeds flit ``k`` of all participants to the datapath as soon as every
    participant's flit ``k`` (and, for INT8, its scale packet) has arrived: reduction cuts through
    a slot instead of waiting for the whole slot, which takes a slot's serialisation off the
    latency of small messages.

    Per job (``job``, from the issuer, in slot order) it emits ``ceil(bytes / flit_bytes)`` datapath
    input flits, the last one with ``last`` set. Ports outside ``run.msg.mask`` contribute zeros
    (data and scale), which leave every exact sum unchanged, so one datapath serves any participant
    set. When the last flit of a slot has been read it pulses ``release.release`` (with
    ``release.end`` on a message's last slot) to the table manager and passes the job on to the
    write-back (``wb_job``). A job is taken only together with ``wb_job``'s transfer: the
    write-back needs the slot's header information before its first flit.

    ``run.flush`` (the wave controller aborting a collective) drops the current job and the flit
    on the output, and takes no new job while it is high.

    Members
    -------
    run : In(RunControl)
        ``msg.dtype`` and ``msg.mask``, and ``flush``.
    job : In(stream.Signature(job_layout))
    wb_job : Out(stream.Signature(job_layout))
    rd : Out(WaveTableRead)
        The wave tables' read port and progress.
    dp : Out(stream.Signature(input_layout))
        The datapath's input.
    release : Out(SlotRelease)
    counters : Out(stall_data)
        Cycles a job waits for data that has not arrived yet.
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        f = params.fabric
        super().__init__({
            "run":      In(RunControl(params)),
            "job":      In(stream.Signature(job_layout(params))),
            "wb_job":   Out(stream.Signature(job_layout(params))),
            "rd":       Out(WaveTableRead(params)),
            "dp":       Out(stream.Signature(input_layout(f.ports, f.flit_width))),
            "release":  Out(SlotRelease()),
            "counters": Out(block_counters_layout("stall_data")),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        fb = f.flit_bytes
        block_flits = BLOCK_ELEMENTS * 8 // f.flit_width   # flits per INT8 block
        scales_per_flit = f.flit_width // 16
        rd, flush = self.rd, self.run.flush
        dtype, mask = self.run.msg.dtype, self.run.msg.mask

        active = Signal()
        job = Signal(job_layout(p))
        k = Signal(range(p.slot_flits + 1))
        flits = Signal(range(p.slot_flits + 1))

        # Start a job when the write-back can take it: it needs the header information first.
        with m.If(~active & ~flush):
            m.d.comb += [self.job.ready.eq(self.wb_job.ready),
                         self.wb_job.valid.eq(self.job.valid),
                         self.wb_job.payload.eq(self.job.payload)]
            with m.If(self.job.valid & self.wb_job.ready):
                m.d.sync += [active.eq(1), job.eq(self.job.payload), k.eq(0),
                             flits.eq((self.job.payload.bytes + fb - 1) // fb)]

        have = Cat(Mux(mask[i], rd.avail[i] > k, 1) for i in range(n)).all()
        scales = Cat(Mux(mask[i], rd.scales_done[i], 1) for i in range(n)).all()
        ready_k = active & have & ((dtype != DType.INT8) | scales) & ~flush

        # Output stage: the table's read registers are the datapath's input register. While the
        # datapath stalls, rd_en stays low and the read ports hold their data.
        out_valid = Signal()
        out_last = Signal()
        lane = Signal(range(scales_per_flit))
        issue = ready_k & (~out_valid | self.dp.ready)
        block = Signal(range(p.slot_flits))
        m.d.comb += block.eq(k // block_flits)
        m.d.comb += [
            rd.slot.eq(job.slot), rd.flit.eq(k),
            rd.scale_flit.eq(block // scales_per_flit), rd.en.eq(issue),
        ]
        with m.If(issue):
            m.d.sync += [out_valid.eq(1), out_last.eq(k + 1 == flits),
                         lane.eq(block % scales_per_flit), k.eq(k + 1)]
            with m.If(k + 1 == flits):
                m.d.sync += active.eq(0)
                m.d.comb += [self.release.release.eq(1), self.release.end.eq(job.last)]
        with m.Elif(self.dp.ready):
            m.d.sync += out_valid.eq(0)
        with m.If(active & ~have):
            m.d.sync += self.counters.stall_data.eq(self.counters.stall_data + 1)
        with m.If(flush):
            m.d.sync += [active.eq(0), out_valid.eq(0)]

        m.d.comb += [
            self.dp.valid.eq(out_valid),
            self.dp.payload.dtype.eq(dtype),
            self.dp.payload.last.eq(out_last),
        ]
        for i in range(n):
            m.d.comb += [
                self.dp.payload.data[i].eq(Mux(mask[i], rd.data[i], 0)),
                self.dp.payload.scale[i].eq(Mux(mask[i], rd.scale[i].word_select(lane, 16), 0)),
            ]
        return m
