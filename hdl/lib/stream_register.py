"""StreamRegister: a stream stage whose output comes from flops."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_shape


__all__ = ["StreamRegister"]


class StreamRegister(wiring.Component):
    """One payload of ``shape`` held between ``i`` and ``o``.

    ``o.valid`` and ``o.payload`` come from flops, so stages can be chained without a long
    combinational path through them; ``i.ready`` is ``o.ready | ~o.valid`` (combinational from
    ``o``: the stage is not a skid buffer). A transfer on ``i`` is on ``o`` the next cycle; with
    ``o`` always ready the stage passes one payload per cycle. ``o.payload`` keeps the last
    payload taken while ``o.valid`` is low.

    Parameters
    ----------
    shape : shape-castable
        The payload (a width, a ``Shape`` or a layout).

    Members
    -------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))
    """

    def __init__(self, shape):
        check_shape("shape", shape)
        sig = stream.Signature(shape)
        super().__init__({"i": In(sig), "o": Out(sig)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(self.o.ready | ~self.o.valid)
        with m.If(self.i.ready):
            m.d.sync += self.o.valid.eq(self.i.valid)
            with m.If(self.i.valid):
                m.d.sync += self.o.payload.eq(self.i.payload)
        return m
