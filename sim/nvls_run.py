"""Running accelerator command programs on the system with the NVLS engine (docs/NVLS.md).

:func:`run_program` is the host side of ``sim/testbench/nvls_bench.py``: it builds the system of
:class:`NvlsSystem` (the ISA's system plus the NVLS engine), loads the multicast table and every
endpoint's memory, runs each endpoint's list of accelerator commands, waits for the events it was
told to expect and returns every event, the counters and the memories. The NVLS baseline runs
(``scin compare``) and the NVLS tests are built on it; Python touches the design only at the
edges (the commands are queued before they run, events are stamped in the HDL).
"""

from dataclasses import dataclass

from .system_config import NvlsEngine, SystemBase, SystemConfig
from .system_run import Dump, run_system


__all__ = ["NvlsSystem", "McGroup", "run_program", "system_params"]


@dataclass(frozen=True)
class NvlsSystem(SystemBase):
    """The hardware of an NVLS run: the system of ``scin allreduce`` with the NVLS engine and the
    endpoints' ring adder (the ring baseline runs on it too).

    ``entries``, ``entry_bytes``, ``groups``, ``acks`` are :class:`~scin.hdl.nvls.NvlsParams`;
    the rest as in :class:`~scin.sim.allreduce.CollectiveConfig` (``capacity``/``outstanding``
    size the ISA, which the switch keeps beside the engine)."""
    capacity:        int = 16384
    outstanding:     int = 4
    entries:         int = 64
    entry_bytes:     int = 1024
    groups:          int = 4
    acks:            int = 64

    def system(self):
        """This hardware as a :class:`~scin.sim.system_config.SystemConfig` (no push space)."""
        return SystemConfig(endpoints=self.endpoints, flit_width=self.flit_width,
                            one_way_latency=self.one_way_latency, mem_latency=self.mem_latency,
                            mem_size=self.mem_size, reorder=self.reorder,
                            capacity=self.capacity, outstanding=self.outstanding,
                            ring_adder=True,
                            nvls=NvlsEngine(entries=self.entries, entry_bytes=self.entry_bytes,
                                            groups=self.groups, acks=self.acks))


@dataclass(frozen=True)
class McGroup:
    """One multicast group (:func:`~scin.hdl.nvls.params.group_layout`)."""
    index:   int
    base:    int
    size:    int
    local:   int
    members: int
    dtype:   str = "fp16"


def system_params(hw):
    """The :class:`~scin.hdl.system.SystemParams` of an :class:`NvlsSystem` (or its dict)."""
    return (NvlsSystem(**hw) if isinstance(hw, dict) else hw).system().params()


def run_program(hw, groups, commands, expect, *, loads=None, dump=(0, 0), descriptors=(),
                sim="verilator", seed=1, timeout_cycles=200_000, waves=False, log=print):
    """Run one command program; return ``{"events", "nvls_counters", "counters",
    "switch_errors", "images", "run_dir", "wall_seconds"}``.

    Parameters
    ----------
    hw : NvlsSystem or SystemConfig
        The hardware; a SystemConfig needs ``nvls``.
    groups : list of McGroup
        Loaded into the multicast table before any command.
    commands : dict
        ``{endpoint: [command dict]}``, fields of
        :func:`~scin.hdl.endpoint.accelerator.command_layout` (enum members or values); each
        endpoint's list runs in order from the first cycle.
    expect : dict
        ``{endpoint: n}``: the run ends when every endpoint has reported ``n`` events other than
        SENT (or fails after ``timeout_cycles``).
    loads : dict
        ``{endpoint: [(byte address, bytes)]}``, the memories' contents at time 0 (else zero).
    dump : (int, int)
        Byte address and length of the region of every memory returned in ``images``.
    descriptors : list of dict
        An ISA program (descriptor dicts, :func:`~scin.hdl.isa.descriptor_layout`) loaded before
        the commands run, so SCIN collectives (ARRIVE / WAIT_FLAG commands) can run beside NVLS.

    Raises
    ------
    RuntimeError
        The simulation did not finish (a timeout is a failure of the bench, with its counters in
        the log).
    """
    from ..hdl.codec import pack
    from ..hdl.endpoint.accelerator import command_layout
    from ..hdl.nvls.params import McDType, mc_load_layout, group_layout
    system = hw if isinstance(hw, SystemConfig) else hw.system()
    params = system.params()
    cl = command_layout(params.fabric)
    ml = mc_load_layout(params.nvls)
    words = [pack(ml, index=g.index, valid=1,
                  group=pack(group_layout(params.nvls), base=g.base, size=g.size, local=g.local,
                             members=g.members, dtype=McDType[g.dtype.upper()]))
             for g in groups]
    bench = {"mc_load": words, "timeout_cycles": timeout_cycles,
             "commands": {str(i): [pack(cl, c) for c in cmds] for i, cmds in commands.items()},
             "expect": {str(i): n for i, n in expect.items()}, "descriptors": list(descriptors)}
    run = run_system(system, "scin.sim.testbench.nvls_bench", loads=loads, dump=Dump(*dump),
                     config=bench, sim=sim, seed=seed, waves=waves, prefix="nvls-")
    out = run.read_json("events.json")
    out["images"] = {i: image.tobytes() for i, image in enumerate(run.images)}
    out["run_dir"] = str(run.run_dir)
    out["wall_seconds"] = run.wall_seconds
    out["events"] = {int(i): evs for i, evs in out["events"].items()}
    return out
