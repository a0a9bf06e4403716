"""`scin bench-push` (scripts/bench_push.py): its points, checks, crossover, threshold and what it
writes, from fake reports (no simulation)."""

import pytest

from scin.scripts import bench_push
from scin.scripts.cli import command_parser, main


def _args(*argv):
    return command_parser("bench-push").parse_args(list(argv))


def _report(point, cycles=None, **over):
    """A report as run_allreduce returns it, for ``point``; pull costs 229 cycles more."""
    n, dtype, size, mode = point[:4]
    if cycles is None:
        cycles = 200 + size // 32 + (229 if mode == "pull" else 0)
    report = {"match": True, "status": 0, "expected_status": 0, "pushed": mode == "push",
              "cycles": cycles, "latency_us": cycles / 250, "efficiency": size / (cycles * 32),
              "counters": {"slots": 0 if mode == "push" else max(1, size // 4096),
                           "stall_data": 7},
              "wall_seconds": 0.1, "run_dir": "/nowhere"}
    report.update(over)
    return report


def _rows(cycles):
    """Rows from ``{(n, dtype, size): (pull cycles, push cycles)}``."""
    rows = []
    for (n, dtype, size), both in cycles.items():
        for mode, c in zip(bench_push.MODES, both):
            point = (n, dtype, size, mode, 90, 40, 32768, 1)
            rows.append(bench_push.row_from_report(point, _report(point, c)))
    return rows


def test_defaults_are_the_issues_sweep():
    args = _args()
    assert (args.endpoints, args.dtypes, args.push_capacity) == ("4,8", "fp16,int8", "32KiB")
    assert args.sizes == "64B,256B,1KiB,4KiB,8KiB,16KiB,32KiB"
    assert (args.latency, args.mem_latency, args.jobs) == (90, 40, 1)
    pts = bench_push.points(args)
    # 2 N x (7 fp16 sizes + 6 int8 sizes: no whole INT8 block at 64 B) x 2 modes
    assert len(pts) == 52
    assert bench_push.skipped(args) == [("int8", 64)]
    assert pts[:2] == [(4, "fp16", 64, "pull", 90, 40, 32768, 1),
                       (4, "fp16", 64, "push", 90, 40, 32768, 1)]


def test_pull_and_push_share_one_build_per_endpoint_count():
    """Only the descriptor's mode differs between a pair: the hardware parameters (the build
    key's input) are the same, with the push space built for pull too."""
    for n in (4, 8):
        hw = set()
        for mode in bench_push.MODES:
            for size in (64, 32768):
                cfg = bench_push.config((n, "fp16", size, mode, 90, 40, 32768, 1))
                assert (cfg.mode, cfg.hw.push_capacity, cfg.hw.capacity, cfg.hw.outstanding) == \
                    (mode, 32768, 32768, 8)
                hw.add(cfg.system())
        assert len(hw) == 1


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "64KiB"], "more than the 32768 B push space"),
    (["--endpoints", "9"], "--endpoints: 2 to 8"),
    (["--dtypes", "fp32"], "--dtypes: fp16, bf16 or int8"),
    (["--sizes", ""], "--sizes: give at least one value"),
])
def test_bad_options_are_one_line_errors(argv, message, capsys):
    assert main(["bench-push", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scin bench-push: error:") and message in err


def test_int8_input_is_half_the_size():
    """AUTO compares actual input bytes: INT8 at 64 KiB (16-bit form) still fits 32 KiB."""
    assert bench_push.push_bytes("int8", 65536) == 32768
    assert len(bench_push.points(_args("--dtypes", "int8", "--sizes", "64KiB",
                                       "--endpoints", "4"))) == 2


@pytest.mark.parametrize("over, message", [
    (dict(match=False), "differs from the golden model"),
    (dict(status=2), "status 2, the golden model's is 0"),
    (dict(pushed=False), "ran pulled"),
])
def test_a_wrong_run_is_an_error(over, message):
    point = (4, "fp16", 4096, "push", 90, 40, 32768, 1)
    with pytest.raises(RuntimeError, match=message):
        bench_push.row_from_report(point, _report(point, **over))


def test_row_has_every_csv_column():
    point = (8, "int8", 4096, "push", 90, 40, 32768, 1)
    row = bench_push.row_from_report(point, _report(point, 300))
    assert set(bench_push.CSV_FIELDS) - set(row) == {"commit"}
    assert (row["push_bytes"], row["pushed"], row["cycles"], row["slots"], row["stall_data"]) == \
        (2048, 1, 300, 0, 7)


def test_push_faster_everywhere_keeps_the_whole_space():
    rows = _rows({(4, "fp16", 64): (443, 214), (4, "fp16", 32768): (1479, 1250)})
    assert bench_push.crossover(rows, 4, "fp16") is None
    assert bench_push.threshold(rows, 32768) == (32768, [])


def test_crossover_and_threshold_where_pull_catches_up():
    rows = _rows({(4, "fp16", 1024): (470, 240), (4, "fp16", 4096): (560, 600),
                  (4, "fp16", 8192): (700, 650), (4, "fp16", 16384): (900, 900),
                  (4, "fp16", 32768): (1400, 1500),
                  (4, "int8", 8192): (700, 400), (4, "int8", 32768): (1100, 1000)})
    # 4 KiB is slower pushed, but push wins again at 8 KiB: the crossover is from 16 KiB on.
    assert bench_push.crossover(rows, 4, "fp16") == 16384
    assert bench_push.crossover(rows, 4, "int8") is None
    # The threshold stays below every pull-faster input (the 4 KiB fp16 one).
    t, slower = bench_push.threshold(rows, 32768)
    assert t == 1024
    assert slower == [(4, "fp16", 4096), (4, "fp16", 16384), (4, "fp16", 32768)]


def test_targets_verdicts():
    rows = _rows({(4, "fp16", 64): (443, 214), (4, "fp16", 4096): (569, 401)})
    assert bench_push.targets(rows) == [(64, 260, 214, "met"), (4096, 400, 401, "missed"),
                                        (16384, 800, None, "not measured")]


def test_run_writes_csv_plot_and_only_its_section(tmp_path, monkeypatch, capsys):
    doc = tmp_path / "PERF.md"
    doc.write_text("# Performance\n\nhand-written\n\n<!-- bench-push:begin -->\nold\n"
                   "<!-- bench-push:end -->\n\nafter\n")
    monkeypatch.setattr(bench_push, "run_allreduce", lambda cfg, log: _report(
        (cfg.endpoints, cfg.dtype, cfg.size, cfg.mode)))
    out = tmp_path / "bench"
    status = main(["bench-push", "--endpoints", "4", "--sizes", "64B,4KiB,16KiB,32KiB",
                   "--out", str(out), "--doc", str(doc)])
    assert status == 0
    err = capsys.readouterr().err
    assert "[1/14] N=4 fp16 64 B pull: 431 cycles" in err
    rows = bench_push.read_csv(out / "push.csv")
    assert len(rows) == 14 and all(r["match"] == 1 and r["commit"] for r in rows)
    assert (out / "push_latency.png").stat().st_size > 1000
    text = doc.read_text()
    assert text.startswith("# Performance\n\nhand-written\n\n<!-- bench-push:begin -->\n## Push")
    assert text.endswith("<!-- bench-push:end -->\n\nafter\n") and "\nold\n" not in text
    assert "Command: `scin bench-push --endpoints 4 --sizes 64B,4KiB,16KiB,32KiB" in text
    assert "| 4 KiB | 4096 | 4 | fp16 | 557 | 328 | 0.589 | 229 |" in text
    assert "| fp16 | 4 | none: push faster at every size up to the 32 KiB push space |" in text
    assert "**AUTO threshold: 32768 B per participant, the whole push space**" in text
    assert "| 16 KiB in at most 800 cycles | 712 cycles = 2.85 us | met |" in text
    assert "No int8 point at 64 B" in text
    assert "![push and pull latency](bench/push_latency.png)" in text


def test_a_mismatch_fails_the_command_and_writes_nothing(tmp_path, monkeypatch, capsys):
    def fake(cfg, log):
        return _report((cfg.endpoints, cfg.dtype, cfg.size, cfg.mode),
                       match=not (cfg.size == 4096 and cfg.mode == "push"))
    monkeypatch.setattr(bench_push, "run_allreduce", fake)
    doc = tmp_path / "PERF.md"
    status = main(["bench-push", "--endpoints", "4", "--dtypes", "fp16", "--sizes", "64B,4KiB",
                   "--out", str(tmp_path / "bench"), "--doc", str(doc)])
    assert status == 1
    err = capsys.readouterr().err
    assert "FAILED N=4 fp16 4096 B push: RuntimeError" in err
    assert "1 of 4 point(s) failed, nothing written" in err
    assert not doc.exists() and not (tmp_path / "bench").exists()
