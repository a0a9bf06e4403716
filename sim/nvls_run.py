"""Running accelerator command programs on the system with the NVLS engine (docs/NVLS.md).

:func:`run_program` is the host side of ``sim/testbench/nvls_bench.py``: it builds the system of
:class:`NvlsSystem` (the ISA's system plus the NVLS engine), loads the multicast table and every
endpoint's memory, runs each endpoint's list of accelerator commands, waits for the events it was
told to expect and returns every event, the counters and the memories. The NVLS baseline runs
(``scin compare``) and the NVLS tests are built on it; Python touches the design only at the
edges (the commands are queued before they run, events are stamped in the HDL).
"""

import dataclasses
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .allreduce import write_memh, read_memh, flit_loads, _runs_dir


__all__ = ["NvlsSystem", "McGroup", "run_program", "system_params"]


@dataclass(frozen=True)
class NvlsSystem:
    """The hardware of an NVLS run: the system of ``scin allreduce`` with the NVLS engine.

    ``entries``, ``entry_bytes``, ``groups``, ``acks`` are :class:`~scin.hdl.nvls.NvlsParams`;
    the rest as in :class:`~scin.sim.allreduce.CollectiveConfig` (``capacity``/``outstanding``
    size the ISA, which the switch keeps beside the engine)."""
    endpoints:       int = 4
    flit_width:      int = 256
    one_way_latency: int = 90
    mem_latency:     int = 40
    mem_size:        int = 1 << 20
    reorder:         bool = False
    capacity:        int = 16384
    outstanding:     int = 4
    entries:         int = 64
    entry_bytes:     int = 1024
    groups:          int = 4
    acks:            int = 64


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
    from ..hdl.isa import IsaParams
    from ..hdl.nvls.params import NvlsParams
    from ..hdl.packet import FabricParams
    from ..hdl.system import SystemParams
    hw = hw if isinstance(hw, dict) else dataclasses.asdict(hw)
    fabric = FabricParams.default_for(flit_width=hw["flit_width"], ports=hw["endpoints"])
    isa = IsaParams(fabric=fabric, capacity=hw["capacity"], waves=hw["outstanding"])
    nvls = NvlsParams(fabric=fabric, entries=hw["entries"], entry_bytes=hw["entry_bytes"],
                      groups=hw["groups"], acks=hw["acks"])
    return SystemParams(isa=isa, one_way_latency=hw["one_way_latency"],
                        mem_latency=hw["mem_latency"], mem_size=hw["mem_size"],
                        reorder=hw["reorder"], nvls=nvls)


def run_program(hw, groups, commands, expect, *, loads=None, dump=(0, 0), descriptors=(),
                sim="verilator", seed=1, timeout_cycles=200_000, waves=False, log=print):
    """Run one command program; return ``{"events", "nvls_counters", "counters",
    "switch_errors", "images", "run_dir", "wall_seconds"}``.

    Parameters
    ----------
    hw : NvlsSystem
    groups : list of McGroup
        Loaded into the multicast table before any command.
    commands : dict
        ``{endpoint: [command dict]}``, fields of :func:`~scin.hdl.endpoint.accelerator.command_layout`
        (enum members or values); each endpoint's list runs in order from the first cycle.
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
    from ..hdl.system import System
    from .runner import verilog_for, run_cocotb, SimulationError

    params = system_params(hw)
    f = params.fabric
    fb = f.flit_bytes
    cl = command_layout(f)
    ml = mc_load_layout(params.nvls)
    words = [pack(ml, index=g.index, valid=1,
                  group=pack(group_layout(params.nvls), base=g.base, size=g.size, local=g.local,
                             members=g.members, dtype=McDType[g.dtype.upper()]))
             for g in groups]
    run_dir = Path(tempfile.mkdtemp(dir=_runs_dir(), prefix="nvls-"))
    plan = {"hw": dataclasses.asdict(hw), "mc_load": words, "run_dir": str(run_dir),
            "commands": {str(i): [pack(cl, c) for c in cmds] for i, cmds in commands.items()},
            "expect": {str(i): n for i, n in expect.items()}, "timeout_cycles": timeout_cycles,
            "descriptors": list(descriptors)}
    plusargs = []
    lo, nbytes = dump
    for i in range(f.ports):
        regions = (loads or {}).get(i, [])
        hex_in = run_dir / f"ep{i}.in.hex"
        window = max([a + len(b) for a, b in regions] + [fb])
        write_memh(hex_in, [(a // fb, raw) for a, raw in flit_loads(regions, window, fb)], fb)
        plusargs += [f"+scin_load_ep{i}={hex_in}", f"+scin_dump_ep{i}={run_dir / f'ep{i}.out.hex'}"]
    plusargs += [f"+scin_dump_lo={lo // fb}", f"+scin_dump_hi={-(-(lo + max(nbytes, fb)) // fb)}"]
    started = time.monotonic()
    path = verilog_for(lambda: System(params), "system", repr(params))
    try:
        run_cocotb(verilog_path=path, top="system", test_module="scin.sim.testbench.nvls_bench",
                   sim=sim, config=plan, waves=waves, test_dir=run_dir, seed=seed, quiet=True,
                   plusargs=plusargs)
    except SimulationError as exc:
        raise RuntimeError(f"the simulation did not complete: {exc}") from exc
    out = json.loads((run_dir / "events.json").read_text())
    out["images"] = {i: read_memh(run_dir / f"ep{i}.out.hex", fb).tobytes()[:nbytes]
                     for i in range(f.ports)}
    out["run_dir"] = str(run_dir)
    out["wall_seconds"] = round(time.monotonic() - started, 2)
    out["events"] = {int(i): evs for i, evs in out["events"].items()}
    return out
