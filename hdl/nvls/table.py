"""MulticastTable: multicast address ranges and their member ports (NVLS multicast objects)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_type
from .params import NvlsParams, group_layout, mc_load_layout


__all__ = ["MulticastTable"]


class MulticastTable(wiring.Component):
    """``groups`` multicast groups in registers, written through ``load`` and looked up by
    address.

    ``load`` is always ready; a write takes effect in the next cycle. The lookup is
    combinational: ``hit`` when some valid group ``g`` has ``base <= addr`` and
    ``addr + length <= base + size`` (the whole access inside the group; the lowest such ``g``
    wins), with ``group`` its fields and ``local`` = ``local + (addr - base)``, the address of
    the access in every member's memory. An access that starts in a group but runs past its end
    is a miss: NVLS has no access that spans two multicast objects.

    Members
    -------
    load : In(stream.Signature(mc_load_layout))
    addr : In(addr_width)
    length : In(length_width)
    hit : Out(1)
    group : Out(group_layout)
    local : Out(addr_width)
    """

    def __init__(self, params):
        self._params = check_type("params", params, NvlsParams)
        f = params.fabric
        super().__init__({
            "load":   In(stream.Signature(mc_load_layout(params))),
            "addr":   In(f.addr_width),
            "length": In(f.length_width),
            "hit":    Out(1),
            "group":  Out(group_layout(params)),
            "local":  Out(f.addr_width),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        a = p.fabric.addr_width
        layout = group_layout(p)
        valid = Signal(p.groups)
        groups = [Signal(layout, name=f"group{g}") for g in range(p.groups)]
        m.d.comb += self.load.ready.eq(1)
        with m.If(self.load.valid):
            with m.Switch(self.load.payload.index):
                for g in range(p.groups):
                    with m.Case(g):
                        m.d.sync += [valid[g].eq(self.load.payload.valid),
                                     groups[g].eq(self.load.payload.group)]

        end = Signal(a + 1)
        m.d.comb += end.eq(self.addr + self.length)
        # Highest index first, so the lowest matching group's assignments come last and win.
        for g in reversed(range(p.groups)):
            grp = groups[g]
            match = valid[g] & (self.addr >= grp.base) & (end <= grp.base + grp.size)
            with m.If(match):
                m.d.comb += [self.hit.eq(1), self.group.eq(grp),
                             self.local.eq(grp.local + (self.addr - grp.base))]
        return m
