"""Running one bench on the simulated system: the host side's single way into the simulator.

:func:`run_system` is what every system-level command and test uses to run the system
(``hdl/system.py``): it elaborates the hardware of a :class:`~scin.sim.system_config.SystemConfig`
(once per configuration, :func:`~scin.sim.runner.verilog_for`), loads every endpoint's memory
through the file backdoor of ``hdl/endpoint/sim_ram.v`` (no Python work per word, whatever the
size), runs one cocotb bench of ``sim/testbench/`` against it (built once per Verilog,
:func:`~scin.sim.runner.run_cocotb`), and returns a :class:`SystemResult`: the memories' dumped
bytes, the run directory where the bench wrote its own results, and the wall time. What a bench
does and what it writes (``timing.json``, ``soak.json``, ``events.json``) is the bench's contract
with its caller; this module only carries the configuration there and the memories both ways.

The bench reads its configuration with :func:`~scin.sim.testbench.env.tb_config`: the caller's
``config`` dict plus ``hw`` (:meth:`SystemConfig.to_json`) and ``run_dir`` (where to write).

Run folders do not pile up: a command removes a passing run's folder (:func:`remove_run`) unless
asked to keep it, and each new run folder prunes the others down to the newest
:data:`KEEP_RUNS` (those touched in the last :data:`PRUNE_AGE` seconds stay: another process may
still be running in them).
"""

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .toolchain import BUILD_ROOT

__all__ = ["run_system", "SystemResult", "SystemRunError", "Dump", "new_run_dir", "write_memh",
           "read_memh", "region_image", "flit_loads", "RUNS_ROOT", "KEEP_RUNS", "PRUNE_AGE",
           "prune_runs", "remove_run"]

#: Where every run folder is made.
RUNS_ROOT = BUILD_ROOT / "runs"
#: Run folders kept when a new one is made (environment ``SCIN_KEEP_RUNS``; default 20).
KEEP_RUNS = int(os.environ.get("SCIN_KEEP_RUNS", "20"))
#: Seconds since its last change under which a run folder is never pruned (it may be in use).
PRUNE_AGE = 3600.0


class SystemRunError(RuntimeError):
    """The simulation did not complete (a cocotb test failed, the bench timed out or the simulator
    crashed). ``run_dir`` is the run's directory, with the bench's log and whatever the bench
    wrote before it stopped."""

    def __init__(self, message, run_dir):
        super().__init__(message)
        self.run_dir = Path(run_dir)


@dataclass(frozen=True)
class Dump:
    """What :func:`run_system` reads back from every endpoint's memory at the end: ``nbytes``
    bytes from byte address ``addr`` (read as whole flits; the bytes outside are dropped)."""
    addr:   int = 0
    nbytes: int = 0


@dataclass(frozen=True)
class SystemResult:
    """What a :func:`run_system` run returns.

    Members
    -------
    images : list of numpy.ndarray
        Per endpoint, the ``Dump``'s bytes of its memory at the end of the run (``uint8``).
    run_dir : Path
        The run's directory: the bench's results, ``sim.log``, waveforms.
    wall_seconds : float
        Wall time of elaboration (if needed), build (if needed) and simulation.
    """
    images:       list
    run_dir:      Path
    wall_seconds: float

    def read_json(self, name):
        """The JSON file ``name`` the bench wrote into :attr:`run_dir`."""
        return json.loads((self.run_dir / name).read_text())

    @property
    def sim_cycles_per_second(self):
        """Simulated clock cycles per second of simulator wall time (the cocotb test alone: no
        build, no golden model), from cocotb's results.xml; None if it is missing."""
        import xml.etree.ElementTree as ET
        from .testbench.env import CLOCK_PERIOD_NS
        try:
            case = ET.parse(self.run_dir / "results.xml").find(".//testcase")
            props = {p.get("name"): p.get("value") for p in case.iter("property")}
            seconds = float(case.get("time"))
            return round(float(props["sim_time_duration"]) / CLOCK_PERIOD_NS / seconds)
        except (OSError, ET.ParseError, AttributeError, KeyError, TypeError, ValueError,
                ZeroDivisionError):
            return None


def new_run_dir(prefix):
    """A new, empty directory for one run under ``.build/runs/``, its name starting ``prefix``;
    the older run folders are pruned first (:func:`prune_runs`)."""
    RUNS_ROOT.mkdir(parents=True, exist_ok=True)
    prune_runs()
    return Path(tempfile.mkdtemp(dir=RUNS_ROOT, prefix=prefix))


def prune_runs(keep=KEEP_RUNS, min_age=PRUNE_AGE, root=None):
    """Remove the run folders under ``root`` (default :data:`RUNS_ROOT`) but the newest ``keep``
    and those changed less than ``min_age`` seconds ago; return the removed paths."""
    root = RUNS_ROOT if root is None else Path(root)
    if not root.is_dir():
        return []
    folders = sorted((p for p in root.iterdir() if p.is_dir()),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    now = time.time()
    removed = [p for p in folders[keep:] if now - p.stat().st_mtime >= min_age]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def remove_run(run_dir):
    """Remove one run folder (a path under :data:`RUNS_ROOT`; anything else is refused)."""
    run_dir = Path(run_dir).resolve()
    if run_dir.parent != RUNS_ROOT.resolve():
        raise ValueError(f"{run_dir} is not a run folder of {RUNS_ROOT}")
    shutil.rmtree(run_dir, ignore_errors=True)


def run_system(system, bench, *, loads=None, dump=Dump(), config=None, sim="verilator", seed=1,
               waves=False, prefix="system-", log=None):
    """Run the cocotb bench ``bench`` on the system ``system``; return a :class:`SystemResult`.

    Parameters
    ----------
    system : SystemConfig
        The hardware (elaborated and built once per configuration).
    bench : str
        The cocotb module, e.g. ``"scin.sim.testbench.allreduce_bench"``.
    loads : dict, optional
        ``{endpoint: [(byte address, bytes)]}``: every memory starts zeroed with these regions
        written over it in order. A region need not be aligned: it is widened to the flits it
        touches, whose other bytes come from the regions sharing them or stay zero.
    dump : Dump
        The region of every memory returned in :attr:`SystemResult.images`.
    config : dict, optional
        JSON-able settings of the bench; it also gets ``hw`` (``system.to_json()``) and
        ``run_dir``.
    sim, seed, waves
        The simulator (``verilator`` or ``icarus``), cocotb's random seed, whether to record
        waveforms (in the run directory).
    prefix : str
        Start of the run directory's name under ``.build/runs/``.
    log : callable, optional
        Called with each line of progress: whether the Verilog and the simulator model are
        cached or made (with an estimate and progress while a model builds), and every few
        seconds of simulation the cycle reached (:func:`~scin.sim.runner.run_cocotb`).

    Raises
    ------
    ValueError
        Bad hardware parameters (from :meth:`SystemConfig.params`) or simulator.
    SystemRunError
        The simulation did not complete.
    """
    from ..hdl.system import System
    from .runner import verilog_for, run_cocotb, SimulationError
    params = system.params()
    fb = params.fabric.flit_bytes
    run_dir = new_run_dir(prefix)
    plusargs = _memory_plusargs(run_dir, system.endpoints, loads or {}, dump, fb)
    started = time.monotonic()
    what = f"the system ({system.endpoints} endpoints, {system.flit_width}-bit flits)"
    path = verilog_for(lambda: System(params), "system", repr(params), log=log, what=what)
    plan = {**(config or {}), "hw": system.to_json(), "run_dir": str(run_dir)}
    try:
        run_cocotb(verilog_path=path, top="system", test_module=bench, sim=sim, config=plan,
                   waves=waves, test_dir=run_dir, seed=seed, quiet=True, plusargs=plusargs,
                   log=log)
    except SimulationError as exc:
        raise SystemRunError(f"the simulation did not complete: {exc}", run_dir) from exc
    skip = dump.addr % fb
    images = [read_memh(run_dir / f"ep{i}.out.hex", fb)[skip:skip + dump.nbytes]
              for i in range(system.endpoints)]
    return SystemResult(images, run_dir, round(time.monotonic() - started, 2))


def _memory_plusargs(run_dir, endpoints, loads, dump, fb):
    """Write every endpoint's load file; the plusargs that load and dump the memories."""
    plusargs = []
    for i in range(endpoints):
        regions = loads.get(i, [])
        hex_in = run_dir / f"ep{i}.in.hex"
        window = max([a + len(raw) for a, raw in regions] + [fb])
        write_memh(hex_in, [(a // fb, raw) for a, raw in flit_loads(regions, window, fb)], fb)
        plusargs += [f"+scin_load_ep{i}={hex_in}", f"+scin_dump_ep{i}={run_dir / f'ep{i}.out.hex'}"]
    lo, hi = dump.addr // fb, -(-(dump.addr + max(dump.nbytes, 1)) // fb)
    return plusargs + [f"+scin_dump_lo={lo}", f"+scin_dump_hi={hi}"]


def region_image(window, regions):
    """``window`` zero bytes with ``regions`` (``(offset, bytes)``) written over them, in order."""
    image = bytearray(window)
    for addr, raw in regions:
        image[addr:addr + len(raw)] = raw
    return bytes(image)


def flit_loads(regions, window, flit_bytes, base=0):
    """``regions`` (offsets into a window of ``window`` bytes at ``base``) as the loader takes
    them: whole flits (:func:`write_memh` is given flit addresses and pads to a flit). Each is
    widened to the flits it touches, their bytes taken from the image of all of them, so regions
    that share a flit (an in-place INT8 AllGather's scale shards, ``C / 32`` bytes each at
    ``r * C / 32``) land at their bytes and the rest of the flit stays zero."""
    image = region_image(window, regions)
    out = []
    for a, raw in regions:
        lo, hi = a // flit_bytes * flit_bytes, -(-(a + len(raw)) // flit_bytes) * flit_bytes
        out.append((base + lo, image[lo:hi]))
    return out


def write_memh(path, regions, width_bytes):
    """Write a ``$readmemh`` file: for each ``(word_address, data)``, an ``@address`` line and one
    little-endian word of ``width_bytes`` per line (hex, most significant digit first)."""
    with open(path, "w") as f:
        for word, data in regions:
            data = np.frombuffer(bytes(data) + bytes(-len(data) % width_bytes), np.uint8)
            digits = data.reshape(-1, width_bytes)[:, ::-1].tobytes().hex()
            step = 2 * width_bytes
            f.write(f"@{word:x}\n")
            f.write("\n".join(digits[k:k + step] for k in range(0, len(digits), step)))
            f.write("\n")


def read_memh(path, width_bytes):
    """The bytes of a ``$writememh`` file (one word per line; comments and ``@`` lines skipped;
    X or Z digits, which a simulator writes for unknown bits, fail loudly)."""
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        raise RuntimeError(f"the simulator wrote no memory dump {path}") from None
    words = [w.strip() for w in lines]
    words = [w for w in words if w and not w.startswith(("//", "@"))]
    text = "".join(words)
    if any(c in text for c in "xXzZ"):
        raise RuntimeError(f"{path}: the memory holds unknown (X/Z) bits")
    data = np.frombuffer(bytes.fromhex(text), np.uint8)
    return data.reshape(-1, width_bytes)[:, ::-1].reshape(-1)
