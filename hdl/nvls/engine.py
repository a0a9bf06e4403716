"""NvlsEngine: the switch side of NVLink SHARP (the baseline), beside the ISA (docs/NVLS.md)."""

from amaranth.hdl import Module
from amaranth.lib.wiring import connect, flipped

from ..lib import sum_counters
from ..packet import MsgClass
from ..params import check_type
from ..transport.signature import ParamsComponent, engine_members
from .acks import AckTable
from .outputs import NvlsOutputs
from .params import NvlsParams, mc_load_layout, nvls_counters_layout
from .requests import RequestUnit
from .responses import ResponseBuffer
from .sequencer import ReduceSequencer


__all__ = ["NvlsEngine"]


class NvlsEngine(ParamsComponent):
    """Multimem requests from the GPUs, answered as NVLS's switch answers them.

    ``rx[p][c]``/``tx[p][c]`` are the NVLS streams of switch port ``p`` in class ``c``: what the
    port's filter steers here (INC=0 READ, WRITE and ATOMIC_ADD to multicast addresses; READ_RESP
    and WRITE_RESP addressed to the switch's own port) and what the engine sends on the port's
    link. Blocks: :class:`RequestUnit` (multicast table, request fan-out), :class:`ResponseBuffer`
    and :class:`ReduceSequencer` (the reduction table, ``ld_reduce`` answers), :class:`AckTable`
    (``st`` and ``red`` answers), :class:`NvlsOutputs` (the queues to ``tx``), joined only by the
    signatures of :mod:`.interfaces` (see its diagram). The RDATA and WRESP streams are never
    back-pressured, so the members' responses always drain; requests wait while their table is
    full.

    Members
    -------
    rx : In(packet_signature).array(ports, NUM_CLASSES)
    tx : Out(packet_signature).array(ports, NUM_CLASSES)
    load : In(stream.Signature(mc_load_layout))
    counters : Out(nvls_counters_layout)
        Each the sum of the blocks' counters of that name.
    """

    def __init__(self, params):
        self._params = check_type("params", params, NvlsParams)
        super().__init__(engine_members(params.fabric, mc_load_layout(params),
                                        nvls_counters_layout()))

    def elaborate(self, platform):
        m = Module()
        p = self._params
        REQ, WRITE, RDATA, WRESP = (c.value for c in MsgClass)
        req = m.submodules.requests = RequestUnit(p)
        acks = m.submodules.acks = AckTable(p)
        buf = m.submodules.responses = ResponseBuffer(p)
        seq = m.submodules.sequencer = ReduceSequencer(p)
        out = m.submodules.outputs = NvlsOutputs(p)
        connect(m, flipped(self.load), req.load)
        # An ld_reduce's entry is armed in the buffer and queued for the sequencer together.
        connect(m, req.reduce, buf.alloc)
        connect(m, buf.order, seq.alloc)
        connect(m, seq.view, buf.view)
        connect(m, req.ack, acks.alloc)
        connect(m, req.fan, out.fan)
        connect(m, seq.out, out.rdata)
        connect(m, acks.out, out.wresp)
        for q in range(p.fabric.ports):
            rx, tx = self.rx[q], self.tx[q]
            connect(m, flipped(rx[REQ]), req.req[q])
            connect(m, flipped(rx[WRITE]), req.wr[q])
            connect(m, flipped(rx[RDATA]), buf.rdata[q])
            connect(m, flipped(rx[WRESP]), acks.wresp[q])
            for c in MsgClass:
                connect(m, out.tx[q][c.value], flipped(tx[c.value]))
        sum_counters(m, self.counters, [req, buf, acks])
        return m
