"""Queue: a stream FIFO of one payload shape, in block RAM."""

from amaranth.hdl import Module, Shape
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..params import check_int, check_shape


__all__ = ["Queue"]


class Queue(wiring.Component):
    """Up to ``depth`` payloads of ``shape``, first in first out.

    ``o`` is valid while it holds a payload; a payload written in one cycle is readable on ``o``
    at the earliest two cycles later (the latency of :class:`~amaranth.lib.fifo.SyncFIFOBuffered`,
    whose storage is block RAM). From ``depth`` 3 up, ``i`` is ready whenever fewer than
    ``depth`` payloads are held; at ``depth`` 1 or 2 it may also refuse a write for the cycle
    after a write into the empty queue (the inner FIFO's entry is still on its way to ``o``).

    Parameters
    ----------
    shape : shape-castable
        The payload (a width, a ``Shape`` or a layout).
    depth : int
        The number of payloads held (>= 1).

    Members
    -------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))
    """

    def __init__(self, shape, depth):
        self._shape = check_shape("shape", shape)
        self._depth = check_int("depth", depth, 1)
        sig = stream.Signature(shape)
        super().__init__({"i": In(sig), "o": Out(sig)})

    @property
    def depth(self):
        return self._depth

    def elaborate(self, platform):
        m = Module()
        fifo = m.submodules.fifo = SyncFIFOBuffered(width=Shape.cast(self._shape).width,
                                                    depth=self._depth)
        m.d.comb += [
            fifo.w_en.eq(self.i.valid), fifo.w_data.eq(self.i.payload), self.i.ready.eq(fifo.w_rdy),
            self.o.valid.eq(fifo.r_rdy), self.o.payload.eq(fifo.r_data), fifo.r_en.eq(self.o.ready),
        ]
        return m
