"""The hardware of a simulated system, as one typed and serialisable value.

:class:`SystemConfig` is what every system-level run (``scin collective``, ``scin soak`` with and
without NVLS, the ring, ``scin compare``, the benches) builds: the endpoints, the flit width, the
link model, the endpoint memories, the ISA's size and options, and the NVLS engine if the switch
has one. :meth:`SystemConfig.params` turns it into the
:class:`~scin.hdl.system.SystemParams` the design is elaborated from; :meth:`SystemConfig.to_json`
and :meth:`SystemConfig.from_json` carry it to the cocotb bench and back unchanged
(``from_json(to_json(c)) == c``). Two equal configurations elaborate the same Verilog and so share
one simulator build.
"""

import dataclasses
from dataclasses import dataclass

from ..hdl.paper import FLIT_WIDTH, MEM_LATENCY, ONE_WAY_LATENCY, PORTS

__all__ = ["SystemConfig", "SystemBase", "NvlsEngine"]


@dataclass(frozen=True)
class NvlsEngine:
    """The NVLS engine beside the ISA (:class:`~scin.hdl.nvls.params.NvlsParams`, docs/NVLS.md):
    ``entries`` reduction-table entries of ``entry_bytes`` each, ``groups`` multicast groups,
    ``acks`` outstanding multicast-store acknowledgements."""
    entries:     int = 64
    entry_bytes: int = 1024
    groups:      int = 4
    acks:        int = 64


@dataclass(frozen=True)
class SystemBase:
    """The fields every description of a simulated system starts with: the endpoints, the flit
    width, the link model and the endpoint memories (as in :class:`SystemConfig`)."""
    endpoints:       int = PORTS
    flit_width:      int = FLIT_WIDTH
    one_way_latency: int = ONE_WAY_LATENCY
    mem_latency:     int = MEM_LATENCY
    mem_size:        int = 1 << 20
    reorder:         bool = False


@dataclass(frozen=True)
class SystemConfig(SystemBase):
    """The hardware of one simulated system (``hdl/system.py``).

    ``one_way_latency`` and ``mem_latency`` are the link model (cycles;
    :class:`~scin.hdl.system.SystemParams`; the defaults are the paper's, :mod:`scin.hdl.paper`,
    as is the flit width); ``mem_size`` the bytes of every endpoint's memory;
    ``reorder``: the memories answer reads out of order across IDs. ``capacity`` and
    ``outstanding`` size the ISA's wave table (bytes, waves); ``push_capacity`` is the push space
    per participant of one push resource (0: no push mode); ``trains`` the ISA's read and write
    trains (1: the paper's per-slot protocol); ``gather_pairs`` the ISA's paired in-place
    AllGather (docs/ISA.md). ``nvls`` is the NVLS engine, or None for the switch without it.
    ``ring_adder``: the endpoints can run the ring baseline's reduction step (only the ring needs
    it; :class:`~scin.hdl.system.SystemParams`).

    The parameters are validated where the hardware is described, by :meth:`params`; a field
    that is not an int where one is needed, or an unknown key in :meth:`from_json`, raises
    ValueError naming it."""
    capacity:        int = 32768
    outstanding:     int = 8
    push_capacity:   int = 0
    trains:          int = 1
    gather_pairs:    bool = False
    nvls:            NvlsEngine = None
    ring_adder:      bool = False

    def __post_init__(self):
        if self.nvls is not None and not isinstance(self.nvls, NvlsEngine):
            raise ValueError(f"nvls must be an NvlsEngine or None, not {self.nvls!r}")

    def params(self):
        """The :class:`~scin.hdl.system.SystemParams` of this hardware (validated there)."""
        from ..hdl.isa import IsaParams
        from ..hdl.nvls.params import NvlsParams
        from ..hdl.packet import FabricParams
        from ..hdl.system import SystemParams
        fabric = FabricParams.default_for(flit_width=self.flit_width, ports=self.endpoints)
        push = self.push_capacity
        isa = IsaParams(fabric=fabric, capacity=self.capacity, waves=self.outstanding,
                        push_resources=1 if push else 0, push_capacity=push or 16384,
                        read_train=self.trains, write_train=self.trains,
                        gather_pairs=self.gather_pairs)
        nvls = None if self.nvls is None else NvlsParams(
            fabric=fabric, entries=self.nvls.entries, entry_bytes=self.nvls.entry_bytes,
            groups=self.nvls.groups, acks=self.nvls.acks)
        return SystemParams(isa=isa, one_way_latency=self.one_way_latency,
                            mem_latency=self.mem_latency, mem_size=self.mem_size,
                            reorder=self.reorder, nvls=nvls, ring_adder=self.ring_adder)

    def replace(self, **changes):
        """This configuration with ``changes`` (field names) applied."""
        return dataclasses.replace(self, **changes)

    def to_json(self):
        """A JSON-able dict of every field (``nvls``: a dict, or None)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data):
        """The configuration :meth:`to_json` gave ``data``; missing fields take their defaults."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown SystemConfig field(s): {', '.join(unknown)}")
        data = dict(data)
        if data.get("nvls") is not None:
            data["nvls"] = NvlsEngine(**data["nvls"])
        return cls(**data)
