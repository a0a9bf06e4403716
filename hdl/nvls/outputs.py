"""NvlsOutputs: the NVLS engine's per-port, per-class output queues ahead of the switch ports."""

from amaranth.hdl import Module, Signal, Cat, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ..lib import Queue
from ..packet import MsgClass, NUM_CLASSES
from ..params import check_type
from ..transport.signature import packet_signature
from .params import NvlsParams, fan_layout, out_layout


__all__ = ["NvlsOutputs", "OUT_DEPTH"]

#: Flits of each per-port, per-class output queue, ahead of the switch port's own NVLS queue.
OUT_DEPTH = 4


class NvlsOutputs(wiring.Component):
    """A :class:`~scin.hdl.lib.Queue` of ``OUT_DEPTH`` flits per port and class, to ``tx``.

    * ``fan``: a flit of the request fan-out, written at once to the REQ (``write`` = 0) or WRITE
      (``write`` = 1) queue of every port in its ``mask``, once every one of them has room; a
      header flit (``header``) has its ``dst`` set to each queue's port.
    * ``rdata``, ``wresp``: one flit for the RDATA (``ld_reduce`` answers) or WRESP (``st`` and
      ``red`` answers) queue of its ``port``, taken while that queue has room.

    Members
    -------
    fan : In(stream.Signature(fan_layout))
    rdata, wresp : In(stream.Signature(out_layout))
    tx : Out(packet_signature).array(ports, NUM_CLASSES)
    """

    def __init__(self, params):
        self._params = check_type("params", params, NvlsParams)
        f = params.fabric
        super().__init__({
            "fan":   In(stream.Signature(fan_layout(params))),
            "rdata": In(stream.Signature(out_layout(params))),
            "wresp": In(stream.Signature(out_layout(params))),
            "tx":    Out(packet_signature(f)).array(f.ports, NUM_CLASSES),
        })

    def elaborate(self, platform):
        m = Module()
        f = self._params.fabric
        n = f.ports
        queues = {}
        for q in range(n):
            for c in MsgClass:
                queue = m.submodules[f"out{q}_{c.name.lower()}"] = Queue(f.flit_layout, OUT_DEPTH)
                queues[q, c] = queue.i
                connect(m, queue.o, flipped(self.tx[q][c.value]))
        self._fan_out(m, queues)
        for src, c in ((self.rdata, MsgClass.RDATA), (self.wresp, MsgClass.WRESP)):
            ready = Signal(name=f"ready_{c.name.lower()}")
            for q in range(n):
                queue = queues[q, c]
                with m.If(src.payload.port == q):
                    m.d.comb += ready.eq(queue.ready)
                m.d.comb += [queue.valid.eq(src.valid & (src.payload.port == q)),
                             queue.payload.eq(src.payload.flit)]
            m.d.comb += src.ready.eq(ready)
        return m

    def _fan_out(self, m, queues):
        """``fan`` into the REQ or WRITE queues of the ports in its mask, all in one cycle."""
        f = self._params.fabric
        n = f.ports
        fan = self.fan.payload
        room_req = Cat(~fan.mask[q] | queues[q, MsgClass.REQ].ready for q in range(n))
        room_wr = Cat(~fan.mask[q] | queues[q, MsgClass.WRITE].ready for q in range(n))
        m.d.comb += self.fan.ready.eq(Mux(fan.write, room_wr.all(), room_req.all()))
        fire = self.fan.valid & self.fan.ready
        for q in range(n):
            flit = Signal(f.flit_layout, name=f"fan_flit{q}")
            m.d.comb += flit.eq(fan.flit)
            with m.If(fan.header):
                hdr = f.header_layout(flit.data[:f.header_layout.size])
                m.d.comb += hdr.dst.eq(q)
            for c, is_write in ((MsgClass.REQ, 0), (MsgClass.WRITE, 1)):
                m.d.comb += [queues[q, c].valid.eq(fire & fan.mask[q] & (fan.write == is_write)),
                             queues[q, c].payload.eq(flit)]
