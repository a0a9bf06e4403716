"""Progress of the long steps of a run: simulator builds and simulations.

A first run of a configuration builds a simulator model (minutes for the 4-endpoint system on
Verilator), and a large message simulates for minutes more. The CLI says which of the two it is
doing and how far it has got, on standard error, through a *log* callable (``None``: quiet):

* :func:`build_estimate` gives the median time of earlier builds of the same top on the same
  simulator (each build's ``built`` stamp records its time, sim/runner.py); :class:`Watch` with
  :func:`build_status` reports a Verilator build's compiled objects of total and the time elapsed.
* A bench writes the cycle it has reached with :func:`note_cycles` (at most every
  :data:`NOTE_EVERY_S` seconds of wall time, one small file in its run folder); :class:`Watch`
  with :func:`run_status` turns that into cycles and cycles per second.
"""

import json
import os
import statistics
import threading
import time
from pathlib import Path

__all__ = ["Watch", "build_estimate", "build_status", "run_status", "note_cycles",
           "PROGRESS_FILE", "NOTE_EVERY_S", "format_seconds"]

#: The file a bench writes its progress into, in its run folder.
PROGRESS_FILE = "cycles.json"
#: How often a bench refreshes :data:`PROGRESS_FILE` (wall-clock seconds).
NOTE_EVERY_S = 2.0

_last_note = {}


def format_seconds(seconds):
    """``seconds`` as ``"42 s"`` or ``"3 min 05 s"``."""
    seconds = int(round(seconds))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


def build_estimate(build_root, sim, top):
    """The median seconds of the earlier builds of ``top`` on ``sim`` under ``build_root``
    (from their ``built`` stamps), or None if there is none."""
    times = [t for t in map(_build_seconds, Path(build_root, sim).glob(f"{top}-*/built"))
             if t is not None]
    return statistics.median(times) if times else None


def _build_seconds(stamp):
    """The seconds the build of ``stamp`` took: recorded in it, or else from the times its
    sources and its stamp were written."""
    try:
        seconds = json.loads(stamp.read_text()).get("seconds")
        if isinstance(seconds, (int, float)):
            return seconds
        sources = [p.stat().st_mtime for p in (stamp.parent / "src").iterdir()]
        return stamp.stat().st_mtime - min(sources) if sources else None
    except (OSError, ValueError, AttributeError):
        return None


def build_status(build_dir):
    """A callable giving one line on a Verilator build in ``build_dir``: its C++ objects compiled
    of total (once Verilator has written the C++) and nothing else to read."""
    build_dir = Path(build_dir)

    def status():
        sources = [p for p in build_dir.glob("V*.cpp")]
        if not sources:
            return "verilating"
        done = sum(1 for p in sources if p.with_suffix(".o").exists())
        return f"compiled {done} of {len(sources)} C++ files"
    return status


def run_status(run_dir):
    """A callable giving one line on the simulation of ``run_dir``: the cycle its bench last
    noted (:func:`note_cycles`) and the rate since the previous line; "starting" before any."""
    path = Path(run_dir) / PROGRESS_FILE
    last = {}

    def status():
        try:
            noted = json.loads(path.read_text())
            cycles, wall = int(noted["cycles"]), float(noted["wall"])
        except (OSError, ValueError, KeyError, TypeError):
            return "starting"
        line = f"cycle {cycles:,}"
        if last and wall > last["wall"]:
            rate = (cycles - last["cycles"]) / (wall - last["wall"])
            line += f", {rate:,.0f} cycles/s"
        last.update(cycles=cycles, wall=wall)
        return line
    return status


def note_cycles(run_dir, cycles, *, force=False):
    """Record that the bench of ``run_dir`` has reached ``cycles`` (rate-limited to one write
    every :data:`NOTE_EVERY_S` seconds unless ``force``). Written atomically; never raises for a
    folder that cannot be written (progress is a courtesy, not a result)."""
    now = time.monotonic()
    key = str(run_dir)
    if not force and now - _last_note.get(key, -NOTE_EVERY_S) < NOTE_EVERY_S:
        return
    _last_note[key] = now
    path = Path(run_dir) / PROGRESS_FILE
    try:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"cycles": int(cycles), "wall": time.time()}))
        os.replace(tmp, path)
    except OSError:
        pass


class Watch:
    """While the body runs, call ``log`` every ``every`` seconds with ``"<what>: <status()>,
    <elapsed>"`` (plus ``" of about <estimate>"`` when ``estimate`` seconds are known). With
    ``log`` None it does nothing. The thread is a daemon and stops when the body ends."""

    def __init__(self, log, what, status, *, every=10.0, estimate=None):
        self.log, self.what, self.status = log, what, status
        self.every, self.estimate = every, estimate
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        if self.log is not None:
            self.started = time.monotonic()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        return False

    def _run(self):
        while not self._stop.wait(self.every):
            elapsed = format_seconds(time.monotonic() - self.started)
            if self.estimate:
                elapsed += f" of about {format_seconds(self.estimate)}"
            self.log(f"{self.what}: {self.status()}, {elapsed}")
