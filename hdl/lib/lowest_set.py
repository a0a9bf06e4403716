"""LowestSet: the lowest set bit of a vector (a table's lowest free or ready entry)."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int


__all__ = ["LowestSet"]


class LowestSet(wiring.Component):
    """Combinationally, ``any`` when some bit of ``bits`` is set, and ``index`` the lowest such
    bit's index (0 while none is). A table offers its lowest free entry with ``bits`` = its
    entries' free bits.

    Parameters
    ----------
    width : int
        The bits (>= 1).

    Members
    -------
    bits : In(width)
    any : Out(1)
    index : Out(range(width))
    """

    def __init__(self, width):
        self._width = check_int("width", width, 1)
        super().__init__({"bits": In(width), "any": Out(1), "index": Out(range(width))})

    def elaborate(self, platform):
        m = Module()
        # Highest index first, so the lowest set bit's assignments come last and win.
        for e in reversed(range(self._width)):
            with m.If(self.bits[e]):
                m.d.comb += [self.any.eq(1), self.index.eq(e)]
        return m
