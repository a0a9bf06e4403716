"""ScinSwitch: the paper's switch (Fig. 4) as one component: switch ports, switch core and ISA.

This is what the switch FPGA holds and what :class:`~scin.hdl.system.System` places between its
links: the N-port :class:`~scin.hdl.switch.Switch` with the :class:`~scin.hdl.isa.isa.Isa` on its
``isa_*`` streams. The boards (``scin.boards``) and the simulation top instantiate this one
component, so the ISA is wired to the switch in one place.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out, connect, flipped

from .isa import IsaParams
from .isa.instruction_buffer import load_layout
from .isa.isa import Isa
from .isa.wave_controller import counters_layout
from .nvls.engine import NvlsEngine
from .nvls.params import NvlsParams, mc_load_layout, nvls_counters_layout
from .packet import NUM_CLASSES
from .params import check_type
from .switch import Switch
from .switch.filter import error_layout
from .switch.port import check_queue_depth
from .transport.signature import check_credits, link_end_signature


__all__ = ["ScinSwitch"]


class ScinSwitch(wiring.Component):
    """The switch: N switch ports, the switch core and the ISA (paper Fig. 4).

    Packets with INC=0 cross the core by destination; packets with INC=1 go to the ISA, which
    answers on the same ports (see :class:`~scin.hdl.switch.Switch` and
    :class:`~scin.hdl.isa.isa.Isa` for the latencies).

    Parameters
    ----------
    isa : IsaParams
        The ISA; ``isa.fabric`` sets the flit width and the port count (default ``IsaParams()``).
    credits : int
        Per-class receive-queue depth of every switch port (the peers must start with as many
        credits).
    isa_depth : int
        Depth of every ISA RX and TX queue, in flits.
    nvls : NvlsParams or None
        Add the NVLS engine, the baseline (docs/NVLS.md), beside the ISA; ``nvls.fabric`` must
        be ``isa.fabric``. ``None`` (the default): no NVLS engine, the switch as the paper has it.

    Raises
    ------
    TypeError, ValueError
        At construction, naming the parameter (``isa``, ``credits``, ``isa_depth``).

    Members (``N = isa.fabric.ports``)
    -------
    link : Out(link_end_signature).array(N)
        Port ``p``'s link end, towards endpoint ``p``.
    load : In(stream.Signature(load_layout))
        Descriptor loading into the ISA's instruction buffer.
    counters : Out(counters_layout)
        The ISA's performance and error counters.
    errors : Out(error_layout).array(N)
        Each switch port's dropped-packet counters.
    overflow, credit_error : Out(N)
        Sticky transport error flags, one bit per port (never set on correct links).
    mc_load : In(stream.Signature(mc_load_layout))
        Only with ``nvls``: the multicast table's write port.
    nvls_counters : Out(nvls_counters_layout)
        Only with ``nvls``: the NVLS engine's counters.
    """

    def __init__(self, isa=None, *, credits=256, isa_depth=256, nvls=None):
        self._isa_params = check_type("isa", IsaParams() if isa is None else isa, IsaParams)
        self._credits = check_credits(credits)
        self._isa_depth = check_queue_depth(isa_depth)
        f = self._isa_params.fabric
        if nvls is not None:
            check_type("nvls", nvls, NvlsParams)
            if nvls.fabric != f:
                raise ValueError(f"nvls.fabric must be isa.fabric ({f}), not {nvls.fabric}")
        self._nvls = nvls
        n = f.ports
        members = {
            "link":         Out(link_end_signature(f)).array(n),
            "load":         In(stream.Signature(load_layout(self._isa_params))),
            "counters":     Out(counters_layout()),
            "errors":       Out(error_layout()).array(n),
            "overflow":     Out(n),
            "credit_error": Out(n),
        }
        if nvls is not None:
            members.update({"mc_load":       In(stream.Signature(mc_load_layout(nvls))),
                            "nvls_counters": Out(nvls_counters_layout())})
        super().__init__(members)

    @property
    def isa_params(self):
        return self._isa_params

    @property
    def fabric(self):
        return self._isa_params.fabric

    @property
    def credits(self):
        return self._credits

    @property
    def isa_depth(self):
        return self._isa_depth

    def elaborate(self, platform):
        m = Module()
        f = self.fabric
        nvls = self._nvls is not None
        m.submodules.switch = switch = Switch(f, credits=self._credits, isa_depth=self._isa_depth,
                                              nvls=nvls, push=self._isa_params.push_slots > 0)
        if nvls:
            m.submodules.nvls = engine = NvlsEngine(self._nvls)
            connect(m, flipped(self.mc_load), engine.load)
            m.d.comb += self.nvls_counters.eq(engine.counters)
        m.submodules.isa = isa = Isa(self._isa_params)
        connect(m, flipped(self.load), isa.load)
        m.d.comb += [
            self.counters.eq(isa.counters),
            self.overflow.eq(switch.overflow),
            self.credit_error.eq(switch.credit_error),
        ]
        for p in range(f.ports):
            for c in range(NUM_CLASSES):
                connect(m, switch.isa_rx[p][c], isa.rx[p][c])
                connect(m, isa.tx[p][c], switch.isa_tx[p][c])
                if nvls:
                    connect(m, switch.nvls_rx[p][c], engine.rx[p][c])
                    connect(m, engine.tx[p][c], switch.nvls_tx[p][c])
            connect(m, switch.link[p], flipped(self.link[p]))
            m.d.comb += self.errors[p].eq(switch.errors[p])
        return m
