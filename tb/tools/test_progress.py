"""Progress of builds and runs (sim/progress.py, and its use in sim/runner.py): a model is said to
be cached or built, a build's estimate comes from earlier builds, a run's cycles and rate from its
bench's notes. No simulator runs here: the builds are a stand-in runner."""

import json
import os
import time

import pytest

from scin.sim import progress, runner


def test_format_seconds():
    assert progress.format_seconds(42.4) == "42 s"
    assert progress.format_seconds(185) == "3 min 05 s"


def _stamp(root, name, **fields):
    folder = root / "verilator" / name
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "top.v").write_text("module top; endmodule\n")
    (folder / "built").write_text(json.dumps(fields))
    return folder


def test_build_estimate_is_the_median_of_earlier_builds(tmp_path):
    assert progress.build_estimate(tmp_path, "verilator", "system") is None
    for i, seconds in enumerate((100, 300, 200)):
        _stamp(tmp_path, f"system-{i}", seconds=seconds)
    _stamp(tmp_path, "other-0", seconds=5)
    assert progress.build_estimate(tmp_path, "verilator", "system") == 200


def test_build_estimate_falls_back_on_file_times(tmp_path):
    """A stamp written before builds recorded their time: the time from sources to stamp."""
    folder = _stamp(tmp_path, "system-0")
    now = time.time()
    os.utime(folder / "src" / "top.v", (now - 90, now - 90))
    os.utime(folder / "built", (now, now))
    assert progress.build_estimate(tmp_path, "verilator", "system") == pytest.approx(90, abs=1)


def test_run_status_reports_cycles_and_rate(tmp_path):
    status = progress.run_status(tmp_path)
    assert status() == "starting"
    (tmp_path / progress.PROGRESS_FILE).write_text(json.dumps({"cycles": 1000, "wall": 10.0}))
    assert status() == "cycle 1,000"
    (tmp_path / progress.PROGRESS_FILE).write_text(json.dumps({"cycles": 21000, "wall": 12.0}))
    assert status() == "cycle 21,000, 10,000 cycles/s"


def test_note_cycles_is_rate_limited(tmp_path):
    progress.note_cycles(tmp_path, 5, force=True)
    progress.note_cycles(tmp_path, 6)          # within NOTE_EVERY_S of the last: not written
    assert json.loads((tmp_path / progress.PROGRESS_FILE).read_text())["cycles"] == 5
    progress.note_cycles(tmp_path, 7, force=True)
    assert json.loads((tmp_path / progress.PROGRESS_FILE).read_text())["cycles"] == 7
    progress.note_cycles(tmp_path / "missing", 1, force=True)     # never raises


def test_watch_logs_while_the_body_runs():
    lines = []
    with progress.Watch(lines.append, "building x", lambda: "step", every=0.05, estimate=600):
        time.sleep(0.3)
    assert lines and lines[0].startswith("building x: step, 0 s of about 10 min 00 s")
    count = len(lines)
    time.sleep(0.1)
    assert len(lines) == count                 # stopped with the body
    with progress.Watch(None, "quiet", lambda: 1 / 0, every=0.01):
        time.sleep(0.05)                       # no log: status is never asked


class _StandInRunner:
    """Writes the C++ files a Verilator build would and their objects, slowly."""

    def build(self, *, build_dir, **_):
        for i in range(3):
            (build_dir / f"Vtop_{i}.cpp").write_text("")
        for i in range(3):
            time.sleep(0.05)
            (build_dir / f"Vtop_{i}.o").write_text("")


def test_build_announces_building_then_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path)
    monkeypatch.setattr(runner, "simulator_version", lambda sim: "stand-in")
    monkeypatch.setattr(progress.Watch, "__init__", _fast_watch(progress.Watch.__init__))
    _stamp(tmp_path, "top-earlier", seconds=120)
    sources = [("top.v", "module top; endmodule\n")]
    lines = []
    build_dir = runner.build_model(_StandInRunner(), "verilator", "top", sources, [], False,
                              lines.append)
    assert "not built yet" in lines[0] and "about 2 min 00 s" in lines[0]
    assert any("compiled" in line and "of 3 C++ files" in line for line in lines[1:-1])
    assert lines[-1].startswith("verilator model of top: built in")
    assert isinstance(json.loads((build_dir / "built").read_text())["seconds"], float)
    lines.clear()
    assert runner.build_model(_StandInRunner(), "verilator", "top", sources, [], False,
                              lines.append) == build_dir
    assert lines == [f"verilator model of top: cached ({build_dir})"]


def _fast_watch(init):
    def fast(self, *args, **kwargs):
        init(self, *args, **{**kwargs, "every": 0.02})
    return fast
