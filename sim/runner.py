"""Elaborate an Amaranth component to Verilog and run cocotb tests on it, with caching.

Used by every testbench (under pytest) and by the CLI. Two caches make repeated runs cheap:

* Verilog is written once per (top name, configuration key, code of ``hdl/``, code of the top's own
  module when the top is a simulation top outside ``hdl/``) to ``.build/verilog/<top>-<hash>.v``,
  atomically (temporary file + ``os.replace``), so parallel test workers never read a half-written
  file. This first level is keyed by the *code* (:func:`hdl_fingerprint`: syntax trees without
  docstrings): an edit of code in ``hdl/`` re-elaborates, but that alone rebuilds nothing; an edit
  of a comment or a docstring does neither. Verification code (the formal harnesses of
  :mod:`scin.sim.formal`, the simulation tops of :mod:`scin.sim.tops`) is not in ``hdl/``: an edit
  of a proof re-elaborates nothing, an edit of a simulation top only the models built on it
  (:func:`verilog_for`'s ``top_module``).
* Each simulator build lives in ``.build/<sim>/<top>-<key>/``, where ``key`` (:func:`build_key`)
  hashes exactly what the simulator compiles: the simulation variant of the Verilog, every extra
  source, the toplevel, the simulator and its version, cocotb's version and the build flags. An
  edit that leaves the Verilog unchanged (a comment, a docstring, a refactoring) reuses every
  model. The directory holds its own copy of the sources (``src/``) and a ``built`` stamp written
  after a successful build; it is guarded by a file lock, so two workers that need the same build
  wait for one another instead of racing ``make``. Each *run* gets its own test directory, so
  results files and waveforms never collide.
"""

import ast
import functools
import hashlib
import inspect
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from .toolchain import (BUILD_ROOT, REPO_ROOT, VERILATOR_MAKE_VARS, file_lock as _locked,
                        have_icarus, setup_environment, warm_yosys)
from . import hdl_coverage, progress
from .waves import recording


__all__ = ["SIMULATORS", "SimulationError", "verilog_for", "verilog_key", "run_cocotb",
           "hdl_fingerprint", "hdl_digest", "hdl_sources", "source_digest", "code_digest",
           "atomic_write", "sim_variant", "simulation_sources", "build_flags", "build_key",
           "build_dir_for", "build_model"]

SIMULATORS = ("verilator", "icarus")

#: Verilator warnings waived on Amaranth output, with the reason for each (docs/DEVELOPING.md).
VERILATOR_WAIVERS = [
    # Amaranth emits width-extending assignments and comparisons that are correct by construction.
    "-Wno-WIDTH",
    # Style warnings (e.g. ALWNEVER on Amaranth's constant `always @*` blocks, CASEINCOMPLETE on
    # enum switches) must not stop a simulation build; `scin lint` checks them, with its own list of
    # waivers, so they are not lost.
    "-Wno-fatal",
]

#: The simulation time unit and precision of every build (part of the build key).
TIMESCALE = ("1ns", "1ps")
#: Bump when the way a build is made changes in a way the key does not capture (e.g. a new
#: step in :func:`run_cocotb`), so old builds are not reused.
BUILD_SCHEME = 1


class SimulationError(RuntimeError):
    """A simulation ran but at least one cocotb test failed, or the simulator crashed."""


def code_digest(text):
    """A hash of the Python source ``text`` that ignores what cannot change the hardware: comments,
    docstrings, blank lines and layout. It hashes the syntax tree (:func:`ast.dump`, which leaves
    out line numbers) with every docstring removed, so rewording a comment or a docstring in
    ``hdl/`` keeps the Verilog cache (:func:`verilog_for`); a change of code, a name or a string
    other than a docstring does not."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


@functools.lru_cache(maxsize=1024)
def _file_digest(path, mtime_ns, size):
    text = path.read_bytes()
    return code_digest(text) if path.suffix == ".py" else hashlib.sha256(text).hexdigest()


def source_digest(path):
    """The digest of one source file: :func:`code_digest` for Python, a hash of the text for
    anything else. Cached while the file is unchanged (parsing every file at every
    :func:`verilog_for` call would cost a tenth of a second each)."""
    path = Path(path)
    stat = path.stat()
    return _file_digest(path, stat.st_mtime_ns, stat.st_size)


_FINGERPRINT = []


def hdl_fingerprint():
    """A hash of the code under ``hdl/`` (every Python file through :func:`code_digest`, every
    Verilog file as text): the key of the Verilog cache (:func:`verilog_for`), which is stale
    when the HDL's code changes, not when a comment or docstring does. Simulator builds are keyed
    by the Verilog instead (:func:`build_key`).

    Taken once per process, right after every ``scin.hdl`` module has been imported: the key
    must describe the code this process elaborates, which is the code as imported. (Read from
    the files at each call, an edit made while a long test run was going keyed Verilog elaborated
    from the modules imported before the edit with the edited files' hash, and later runs took
    that stale Verilog for current.)"""
    if not _FINGERPRINT:
        _import_hdl()
        _FINGERPRINT.append(hdl_digest())
    return _FINGERPRINT[0]


def _import_hdl():
    import importlib
    import pkgutil
    import scin.hdl
    for info in pkgutil.walk_packages(scin.hdl.__path__, "scin.hdl."):
        importlib.import_module(info.name)


def hdl_sources(root=REPO_ROOT):
    """The files the design is elaborated from: every Python and Verilog file under
    ``<root>/hdl/`` but the catalog (a list of tops, not hardware)."""
    hdl = root / "hdl"
    return [p for p in sorted([*hdl.rglob("*.py"), *hdl.rglob("*.v")]) if p.name != "catalog.py"]


def hdl_digest(root=REPO_ROOT):
    """A hash of the code of :func:`hdl_sources` (read now: :func:`hdl_fingerprint` is the one
    a process keys its Verilog by)."""
    digest = hashlib.sha256()
    for path in hdl_sources(root):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(source_digest(path).encode())
    return digest.hexdigest()


_TOP_DIGESTS = {}


def _top_digest(module):
    """The code digest of the file ``module`` (a simulation top's module) is in, taken once per
    process for the reason :func:`hdl_fingerprint` gives."""
    if module.__name__ not in _TOP_DIGESTS:
        _TOP_DIGESTS[module.__name__] = source_digest(Path(inspect.getsourcefile(module)))
    return _TOP_DIGESTS[module.__name__]


def verilog_key(top, config_key, fingerprint, top_digest=None):
    """The first-level cache key: the top's name, its configuration, the design's code
    (``fingerprint``) and, for a simulation top outside ``hdl/``, its own module's code
    (``top_digest``, :func:`source_digest` of that file)."""
    parts = [top, config_key, fingerprint] + ([] if top_digest is None else ["top", top_digest])
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def atomic_write(path, text):
    """Write ``text`` to ``path`` (parents made) through a temporary file and ``os.replace``, so a
    concurrent reader sees the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def verilog_for(make_component, top, config_key, *, top_module=None, log=None, what=None):
    """Return the path of the Verilog for ``make_component()``, elaborating it only if needed.

    Parameters
    ----------
    make_component : callable
        Returns the :class:`wiring.Component` to convert. Called only on a cache miss.
    top : str
        Verilog module name of the top level.
    config_key : str
        Everything that distinguishes this configuration (typically ``repr`` of the parameters).
    top_module : module, optional
        The module a simulation top outside ``hdl/`` is defined in (e.g.
        :mod:`scin.sim.tops.fabric`): its code is part of the key, so an edit of it re-elaborates
        the models built on it. It must import only ``hdl/`` (what it imports from elsewhere is
        not in the key). A component of a class defined in ``scin.sim`` or ``scin.tb`` without
        it is refused (ValueError) when it is elaborated, since an edit of it would go unnoticed.
    log : callable, optional
        Told, in one line each, that ``what`` (default ``top``) is elaborated and how long it
        took; nothing when the Verilog is cached.
    """
    from scin.hdl.toplevel import convert
    setup_environment()
    fingerprint = hdl_fingerprint()
    coverage = hdl_coverage.enabled()
    if coverage:
        # Source locations in the Verilog: a moved line is another Verilog (hdl_coverage).
        fingerprint += f"\0coverage\0{hdl_coverage.source_fingerprint()}"
    key = verilog_key(top, config_key, fingerprint,
                      None if top_module is None else _top_digest(top_module))
    path = BUILD_ROOT / "verilog" / f"{top}-{key}.v"
    with _locked(path.with_suffix(".lock")):
        if not path.exists():
            started = time.monotonic()
            if log:
                log(f"elaborating {what or top} to Verilog ...")
            warm_yosys()
            component = make_component()
            _check_top_module(component, top, top_module)
            # Not verilog.convert(component): it rejects the constant ``ready`` of always_ready
            # streams (credit links); see hdl/toplevel.py.
            if coverage:
                with hdl_coverage.annotated_conversion():
                    text = convert(component, name=top, emit_src=True)
            else:
                text = convert(component, name=top, emit_src=False)
            atomic_write(path, text)
            if log:
                log(f"elaborated in {progress.format_seconds(time.monotonic() - started)}")
    return path


def _check_top_module(component, top, top_module):
    """Refuse a top defined in the project outside ``hdl/`` unless ``top_module`` is its module."""
    defined_in = type(component).__module__
    outside = defined_in.startswith(("scin.sim.", "scin.tb.", "scin.scripts."))
    if outside and (top_module is None or defined_in != top_module.__name__):
        raise ValueError(f"verilog_for({top!r}): {type(component).__name__} is defined in "
                         f"{defined_in}, outside hdl/: pass top_module={defined_in} so that "
                         f"its code is part of the cache key")


def sim_variant(text):
    """The Verilog ``text`` with Yosys's time-0 trigger made reliable, for simulation.

    Yosys makes every combinational ``always @*`` block read a dummy register initialised at time 0,
    so that each block runs once before anything changes. Icarus may start the blocks after that
    initialisation, so a block whose inputs never change (an FSM output in its reset state, say)
    keeps ``X`` forever. Setting the register again with ``#0`` happens after every process has
    reached its first wait, so every block runs once. Blocks that assign only a constant, and so
    read nothing at all, become ``initial`` assignments: neither simulator ever runs them otherwise
    (Verilator says so: ALWNEVER), which left e.g. a constant opcode field at 0. (``always_comb``
    would also run at time 0, but Icarus 11 widens its sensitivity to whole vectors, which made
    some blocks oscillate.)
    """
    text = re.sub(r"(reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;)",
                  r"\1\n  initial #0 \2 = 1;", text)
    # Blocks that only assign a constant read nothing, not even the dummy register: they
    # would never run. They mean "this is always the constant": an `initial` says it.
    return re.sub(r"always @\*\n(\s+[^\n;=]+ = \d+'[hbd][0-9a-fA-F_]+;\n)", r"initial\n\1", text)


def _lean_verilator():
    """cocotb's Verilator runner without ``--public-flat-rw``, sharing Verilator's runtime objects.

    That flag makes every internal signal of the design visible to VPI, which multiplies the C++
    Verilator generates (5x slower builds on the datapath) and blocks optimisations. Testbenches
    here only touch top-level ports, which ``--vpi`` exposes anyway; waveforms (``--trace``) still
    record every signal. Between Verilator and ``make`` the build is seeded with the runtime
    objects of an earlier build made the same way, and a successful build stores its own
    (:mod:`scin.sim.verilator_runtime`; this overrides cocotb 2.1's ``_execute_cmds``, which runs
    a build's commands in turn).
    """
    from cocotb_tools.runner import Verilator
    from . import verilator_runtime

    class LeanVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = ([arg for arg in cmds[0] if arg != "--public-flat-rw"]
                       + ["--public-depth", "1"])
            return cmds

        def _execute_cmds(self, cmds, cwd, stdout=None):
            for cmd in cmds:
                if not (cmd and cmd[0] == "make" and "Vtop.mk" in cmd):
                    super()._execute_cmds([cmd], cwd, stdout)
                    continue
                root = BUILD_ROOT / "verilator"
                key = verilator_runtime.runtime_key(self.build_dir, cmd, self.env)
                seeded = verilator_runtime.seed(self.build_dir, root, key)
                if stdout is not None:
                    how = "reused " + ", ".join(seeded) if seeded else "compiled here"
                    stdout.write(f"scin: runtime objects {key}: {how}\n")
                    stdout.flush()
                super()._execute_cmds([cmd], cwd, stdout)
                verilator_runtime.store(self.build_dir, root, key)

    return LeanVerilator()


def extra_sources(verilog_path):
    """Hand-written Verilog files a generated design instantiates (today: the simulation-only
    ``scin_sim_ram`` of :mod:`scin.hdl.endpoint.sim_ram`); add them to every tool's sources."""
    from ..hdl.endpoint.sim_ram import SIM_RAM_MODULE, SIM_RAM_VERILOG
    with open(verilog_path, "rb") as f:
        text = f.read()
    return [SIM_RAM_VERILOG] if SIM_RAM_MODULE.encode() in text else []


def simulation_sources(verilog_path, top):
    """What a simulator compiles for the design in ``verilog_path``: ``[(file name, text)]``, the
    simulation variant of the Verilog (:func:`sim_variant`) first, then every extra source.

    The variant is kept beside the Verilog (``<top>-<hash>-sim.v``): rewriting a large design
    takes seconds, and every run needs its text for the build key."""
    verilog_path = Path(verilog_path)
    variant = verilog_path.with_name(verilog_path.stem + "-sim.v")
    with _locked(variant.with_suffix(".lock")):
        if not variant.exists() or variant.stat().st_mtime < verilog_path.stat().st_mtime:
            atomic_write(variant, sim_variant(verilog_path.read_text()))
    sources = [(f"{top}.v", variant.read_text())]
    return sources + [(extra.name, extra.read_text()) for extra in extra_sources(verilog_path)]


def build_flags(sim):
    """The flags a ``sim`` build is made with (beyond cocotb's own): part of the build key."""
    if sim == "verilator":
        flags = VERILATOR_WAIVERS + ["-O3", "--x-assign", "fast", "--x-initial", "fast",
                                     "--no-timing"]
        # SCIN_COVERAGE=1: line and toggle coverage (sim/hdl_coverage.py), a model of its own.
        return flags + hdl_coverage.COVERAGE_FLAGS if hdl_coverage.enabled() else flags
    return []


@functools.cache
def simulator_version(sim):
    """The version line of ``sim`` as installed (the one on ``PATH`` after
    :func:`~scin.sim.toolchain.setup_environment`), and of cocotb, which a build links against."""
    import cocotb
    setup_environment()
    command = ["verilator", "--version"] if sim == "verilator" else ["iverilog", "-V"]
    out = subprocess.run(command, capture_output=True, text=True).stdout.strip()
    return f"{out.splitlines()[0] if out else '?'}; cocotb {cocotb.__version__}"


def build_key(sim, top, sources, flags, *, waves=False, version=None):
    """The key of a simulator build: a hash of everything that goes into it.

    Parameters
    ----------
    sim : str
        One of :data:`SIMULATORS`.
    top : str
        The toplevel module.
    sources : list of (str, str)
        ``(file name, text)`` of every source, as :func:`simulation_sources` gives them.
    flags : list of str
        The build flags (:func:`build_flags`).
    waves : bool
        Whether the build traces waveforms (Verilator compiles tracing in).
    version : str, optional
        The simulator's version line; by default :func:`simulator_version` asks the simulator.

    Returns a 16-digit hex string. Equal inputs give equal keys whatever produced the Verilog.
    """
    if version is None:
        version = simulator_version(sim)
    files = [(name, hashlib.sha256(text.encode()).hexdigest()) for name, text in sources]
    make_vars = sorted(VERILATOR_MAKE_VARS.items()) if sim == "verilator" else []
    description = [BUILD_SCHEME, sim, version, top, list(flags), make_vars, bool(waves),
                   list(TIMESCALE), files]
    return hashlib.sha256(json.dumps(description).encode()).hexdigest()[:16]


def build_dir_for(sim, top, key):
    """Where the build of ``key`` lives: ``.build/<sim>/<top>-<key>/``."""
    return BUILD_ROOT / sim / f"{top}-{key}"


def build_model(runner, sim, top, sources, flags, waves, log=None):
    """Build ``top`` from ``sources`` (``[(file name, text)]``) with ``runner`` (a cocotb runner)
    once per :func:`build_key`, and return the build directory. Under the directory's lock: copy the
    sources into ``src/``, build, then write the ``built`` stamp (with the build's time); a build
    that fails leaves no stamp, so the next run tries again. ``log`` (a callable, or None) is told
    whether the model is cached or built, with an estimate and progress while it builds."""
    key = build_key(sim, top, sources, flags, waves=waves)
    build_dir = build_dir_for(sim, top, key)
    stamp = build_dir / "built"
    say = log or (lambda line: None)
    if stamp.exists():
        say(f"{sim} model of {top}: cached ({build_dir})")
        return build_dir
    with _locked(build_dir.with_suffix(".lock")):
        if stamp.exists():          # built by another worker while we waited
            say(f"{sim} model of {top}: built by another run meanwhile ({build_dir})")
            return build_dir
        estimate = progress.build_estimate(BUILD_ROOT, sim, top)
        say(f"{sim} model of {top}: not built yet, building it in {build_dir} ("
            + (f"earlier builds took about {progress.format_seconds(estimate)})" if estimate
               else "no earlier build to estimate its time from)"))
        started = time.monotonic()
        with progress.Watch(log, f"building the {sim} model of {top}",
                            progress.build_status(build_dir), estimate=estimate):
            _build_here(runner, sim, top, sources, flags, waves, build_dir)
        seconds = round(time.monotonic() - started, 1)
        atomic_write(stamp, json.dumps({"sim": sim, "top": top, "flags": flags, "waves": waves,
                                         "version": simulator_version(sim), "seconds": seconds,
                                         "sources": [name for name, _ in sources]}, indent=1))
        say(f"{sim} model of {top}: built in {progress.format_seconds(seconds)}")
    return build_dir


def _build_here(runner, sim, top, sources, flags, waves, build_dir):
    """Copy the sources into ``build_dir/src/`` and build; a failure is a SimulationError."""
    log_file = build_dir / "build.log"
    paths = []
    for name, text in sources:
        path = build_dir / "src" / name
        if not path.exists():
            atomic_write(path, text)
        paths.append(path)
    try:
        runner.build(sources=paths, hdl_toplevel=top, build_dir=build_dir, build_args=flags,
                     timescale=TIMESCALE, waves=waves, log_file=log_file)
    except Exception as exc:
        raise SimulationError(f"{sim} could not build {top} in {build_dir}: {exc}; "
                              f"see {log_file}") from exc


def run_cocotb(*, verilog_path, top, test_module, sim, testcase=None, seed=None, config=None,
               waves=False, test_dir=None, extra_env=None, quiet=False, plusargs=(), log=None):
    """Build (once per :func:`build_key`) and run the cocotb tests in ``test_module`` against
    ``top``.

    ``config`` (JSON-serialisable) reaches the testbench as the ``SCIN_TB_CONFIG`` environment
    variable; read it with :func:`scin.sim.testbench.env.tb_config`. With ``quiet`` the
    simulator's log goes to ``sim.log`` in the test directory instead of standard output.
    ``plusargs`` go to the simulator (e.g. the file backdoor of ``scin_sim_ram``). ``waves``
    (True, or a :class:`~scin.sim.waves.Waves` window) records a waveform in the test directory
    (FST on both simulators; :mod:`scin.sim.waves`). ``log`` (a
    callable taking a line, or None) is told whether the model is cached or built, how the build
    goes, and every few seconds how far the simulation is (the cycle a bench notes with
    :func:`scin.sim.progress.note_cycles`). Returns the path of the results file.

    Raises
    ------
    ValueError
        Unknown simulator.
    SimulationError
        A test failed or the simulator crashed (checked from the results file, so this works the
        same under pytest and from the CLI).
    """
    from cocotb_tools.runner import get_runner
    from cocotb_tools.check_results import get_results

    if sim not in SIMULATORS:
        raise ValueError(f"sim must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    if sim == "icarus" and not have_icarus():
        raise RuntimeError("Icarus Verilog (iverilog, vvp) is not installed; "
                           "install it (Debian: apt-get install iverilog) or use --sim verilator")
    setup_environment()
    if test_dir is None:
        (BUILD_ROOT / "runs").mkdir(parents=True, exist_ok=True)
        test_dir = tempfile.mkdtemp(dir=BUILD_ROOT / "runs", prefix=f"{top}-{sim}-")
    test_dir = Path(test_dir)
    rec = recording(sim, top, waves, test_dir)
    runner = _lean_verilator() if sim == "verilator" else get_runner(sim)
    build_dir = build_model(runner, sim, top,
                            simulation_sources(verilog_path, top) + list(rec.sources),
                            build_flags(sim) + list(rec.flags), rec.build_waves, log)
    if rec.path is not None and log:
        log(f"recording {waves.describe() if waves is not True else 'every cycle'} "
            f"into {rec.path}")
    env = dict(extra_env or {})
    env["SCIN_TB_CONFIG"] = json.dumps(config or {})
    plusargs = list(plusargs) + list(rec.plusargs)
    coverage_data = None
    if sim == "verilator" and hdl_coverage.enabled():
        # Each run's counts in a file of its own under .build/coverage/, for `scin coverage`,
        # folded into its model's sum once the run has ended.
        plusargs.append(hdl_coverage.data_plusarg(BUILD_ROOT, top, build_dir, test_module,
                                                  testcase))
        coverage_data = plusargs[-1].removeprefix(hdl_coverage.DATA_PLUSARG)
    try:
        # The language is given: a runner whose build was skipped cannot guess it from its sources.
        watch = progress.Watch(log, f"simulating {top} on {sim}", progress.run_status(test_dir),
                               every=5.0)
        with watch, rec.context:
            results = runner.test(test_module=test_module, hdl_toplevel=top,
                                  hdl_toplevel_lang="verilog", testcase=testcase, seed=seed,
                                  extra_env=env, waves=rec.test_waves, plusargs=plusargs,
                                  test_args=list(rec.test_args), build_dir=build_dir,
                                  test_dir=test_dir, results_xml=str(test_dir / "results.xml"),
                                  timescale=TIMESCALE,
                                  log_file=test_dir / "sim.log" if quiet else None)
    finally:
        if coverage_data:
            hdl_coverage.fold(coverage_data)
    num_tests, num_failed = get_results(results)
    if num_tests == 0:
        raise SimulationError(f"no cocotb test ran from {test_module} (see {test_dir})")
    if num_failed:
        raise SimulationError(f"{num_failed} of {num_tests} cocotb test(s) failed in {test_module} "
                              f"on {sim} (logs and waves in {test_dir})")
    return results
