"""Feeder: streams each slot from every participant's wave table into the datapath."""

from amaranth.hdl import Module, Signal, Mux, Cat, Array
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from ..params import check_type
from .descriptor import IsaParams
from .dtype import DType, BLOCK_ELEMENTS
from .interfaces import (job_layout, feed_layout, block_counters_layout, RunControl, WaveTableRead,
                         SlotRelease)


__all__ = ["Feeder"]


class Feeder(wiring.Component):
    """Reads slots in order and feeds flit ``k`` of all participants to the datapath as soon as
    every participant's flit ``k`` (and, for INT8, its scale packet) has arrived: reduction cuts
    through a slot instead of waiting for the whole slot, which takes a slot's serialisation off the
    latency of small messages. The participants are the job's read set (``job.rmask``).

    Per job (``job``, from the issuer, in slot order) it emits ``ceil(bytes / flit_bytes)`` datapath
    input flits, the last one with ``last`` set. Ports outside the read set contribute zeros
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
        ``msg.dtype`` and ``flush``.
    job : In(stream.Signature(job_layout))
    wb_job : Out(stream.Signature(job_layout))
    rd : Out(WaveTableRead)
        The wave tables' read port and progress.
    dp : Out(stream.Signature(feed_layout))
        The datapath's input (``flit``), and the job's first read port's data and scale as they
        are (``one``: what a copying operation writes); with ``gather_pairs``, also its last read
        port's data (``other``: a paired phase's higher rank).
    release : Out(SlotRelease)
    counters : Out(stall_data)
        Cycles a job waits for data that has not arrived yet.
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        super().__init__({
            "run":      In(RunControl(params)),
            "job":      In(stream.Signature(job_layout(params))),
            "wb_job":   Out(stream.Signature(job_layout(params))),
            "rd":       Out(WaveTableRead(params)),
            "dp":       Out(stream.Signature(feed_layout(params))),
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
        dtype = self.run.msg.dtype

        active = Signal()
        job = Signal(job_layout(p))
        k = Signal(range(p.slot_flits + 1))
        flits = Signal(range(p.slot_flits + 1))

        mask = job.rmask                    # the ports the slot reads
        out_mask = Signal(n)                # ... of the flit on the output
        first = Signal(range(n))            # the lowest port of the read set
        out_first = Signal(range(n))        # ... of the flit on the output
        for i in reversed(range(n)):
            with m.If(mask[i]):
                m.d.comb += first.eq(i)
        if p.gather_pairs:
            top = Signal(range(n))          # the highest port of the read set
            out_top = Signal(range(n))      # ... of the flit on the output
            for i in range(n):
                with m.If(mask[i]):
                    m.d.comb += top.eq(i)
        # The slot's flit being read: a pushed shard may start inside its slot (job.flit).
        at = Signal(range(p.slot_flits + 1))
        m.d.comb += at.eq(k + job.flit if p.push_slots else k)
        have = Cat(Mux(mask[i], rd.avail[i] > at, 1) for i in range(n)).all()
        scales = Cat(Mux(mask[i], rd.scales_done[i], 1) for i in range(n)).all()
        ready_k = active & have & ((dtype != DType.INT8) | scales) & ~flush

        # Output stage: the table's read registers are the datapath's input register. While the
        # datapath stalls, rd_en stays low and the read ports hold their data.
        out_valid = Signal()
        out_last = Signal()
        lane = Signal(range(scales_per_flit))
        issue = ready_k & (~out_valid | self.dp.ready)
        block = Signal(range(p.slot_flits))
        m.d.comb += block.eq(at // block_flits)
        m.d.comb += [
            rd.slot.eq(job.slot), rd.flit.eq(at),
            rd.scale_flit.eq(block // scales_per_flit), rd.en.eq(issue),
        ]
        with m.If(issue):
            m.d.sync += [out_valid.eq(1), out_last.eq(k + 1 == flits), out_mask.eq(mask),
                         out_first.eq(first),
                         *([out_top.eq(top)] if p.gather_pairs else []),
                         lane.eq(block % scales_per_flit), k.eq(k + 1)]
            with m.If(k + 1 == flits):
                m.d.sync += active.eq(0)
                m.d.comb += [self.release.release.eq(1), self.release.end.eq(job.last)]
        with m.Elif(self.dp.ready):
            m.d.sync += out_valid.eq(0)
        with m.If(active & ~have):
            m.d.sync += self.counters.stall_data.eq(self.counters.stall_data + 1)

        # Start a job when the write-back can take it (it needs the header information first),
        # idle or in the cycle the current job's last flit is read: a copied slot has no datapath
        # between the feeder and the write-back, and a job passed on only after its predecessor's
        # last flit reaches the write-back one cycle after that flit, which costs a cycle a slot.
        last_issue = issue & (k + 1 == flits)
        with m.If((~active | last_issue) & ~flush):
            m.d.comb += [self.job.ready.eq(self.wb_job.ready),
                         self.wb_job.valid.eq(self.job.valid),
                         self.wb_job.payload.eq(self.job.payload)]
            with m.If(self.job.valid & self.wb_job.ready):
                m.d.sync += [active.eq(1), job.eq(self.job.payload), k.eq(0),
                             flits.eq((self.job.payload.bytes + fb - 1) // fb)]
        with m.If(flush):
            m.d.sync += [active.eq(0), out_valid.eq(0)]

        flit, one = self.dp.payload.flit, self.dp.payload.one
        m.d.comb += [
            self.dp.valid.eq(out_valid),
            flit.dtype.eq(dtype),
            flit.last.eq(out_last),
        ]
        # Each port's scale of the flit's block, then the copy source's: a 16-bit selection,
        # not a flit-wide one.
        lanes = [Signal(16, name=f"scale_lane{i}") for i in range(n)]
        for i in range(n):
            m.d.comb += [
                lanes[i].eq(rd.scale[i].word_select(lane, 16)),
                flit.data[i].eq(Mux(out_mask[i], rd.data[i], 0)),
                flit.scale[i].eq(Mux(out_mask[i], lanes[i], 0)),
            ]
        m.d.comb += [one.data.eq(Array(rd.data)[out_first]),
                     one.scale.eq(Array(lanes)[out_first])]
        if p.gather_pairs:
            m.d.comb += self.dp.payload.other.eq(Array(rd.data)[out_top])
        return m
