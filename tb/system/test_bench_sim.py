"""`scin bench-sim` (scripts/bench_sim.py): its options, points, measurement and what it writes,
from fake runs (no simulation)."""

import os

import pytest

from scin.scripts import bench_sim
from scin.scripts.cli import command_parser, main


def _args(*argv):
    return command_parser("bench-sim").parse_args(list(argv))


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "1XB"], "argument --sizes: must be a number of bytes"),
    (["--sizes", "64B"], "argument --sizes:"),
    (["--dtypes", "fp32"], "argument --dtypes: must be a comma list of fp16, int8"),
    (["--modes", "pull,pushed"], "argument --modes: must be a comma list of pull, push"),
    (["--repeat", "0"], "argument --repeat: must be an integer from 1 to 20"),
    (["--push-sizes", "64KiB"], "--push-sizes: 65536 B does not fit in the 32768 B push space"),
    (["--push-capacity", "6KiB"], "--push-capacity: a multiple of 4KiB"),
    (["--seed", "x"], "argument --seed: must be an integer"),
])
def test_bad_options_are_one_line_errors_and_write_nothing(argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    try:
        status = main(["bench-sim", "--out", str(out), *argv])
    except SystemExit as exc:        # argparse's errors exit from the parser
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scin bench-sim: error:") and message in err
    assert not out.exists()


def test_points_cover_dtypes_modes_and_icarus(monkeypatch):
    monkeypatch.setattr(bench_sim, "have_icarus", lambda: True)
    assert bench_sim.points(_args()) == [
        ("verilator", "fp16", "pull", 1 << 20), ("verilator", "fp16", "push", 32768),
        ("icarus", "fp16", "pull", 16384),
        ("verilator", "int8", "pull", 1 << 20), ("verilator", "int8", "push", 32768),
        ("icarus", "int8", "pull", 16384)]
    args = _args("--sizes", "1MiB,16MiB", "--modes", "pull", "--dtypes", "fp16",
                 "--icarus-size", "0")
    assert bench_sim.points(args) == [("verilator", "fp16", "pull", 1 << 20),
                                      ("verilator", "fp16", "pull", 16 << 20)]
    monkeypatch.setattr(bench_sim, "have_icarus", lambda: False)
    with pytest.raises(ValueError, match="--icarus-size: Icarus Verilog is not installed"):
        bench_sim.points(_args())


def test_push_points_get_the_push_build():
    args = _args("--push-capacity", "64KiB")
    pull = bench_sim.config(("verilator", "int8", "pull", 1 << 20), args)
    push = bench_sim.config(("verilator", "int8", "push", 65536), args)
    assert (pull.mode, pull.hw.push_capacity, pull.endpoints, pull.sim) == \
        ("pull", 0, 4, "verilator")
    assert (push.mode, push.hw.push_capacity, push.size, push.dtype) == \
        ("push", 65536, 65536, "int8")


def _fake_runs(monkeypatch, seconds):
    """run_allreduce and speed_of_run faked: 1000 simulated cycles in ``seconds[bare]``; the
    environment each run saw is recorded."""
    seen = []

    def run_allreduce(cfg, log):
        bare = os.environ.get(bench_sim.BARE_VARIABLE)
        seen.append((cfg.dtype, cfg.mode, cfg.size, bare))
        return {"match": True, "status": 0, "expected_status": 0, "cycles": 700,
                "run_dir": f"/nowhere/{bare}"}
    monkeypatch.setattr(bench_sim, "run_allreduce", run_allreduce)
    monkeypatch.setattr(bench_sim, "speed_of_run",
                        lambda run_dir: (1000, seconds[run_dir.endswith("700")]))
    return seen


def test_measure_runs_bench_then_bare_and_takes_medians(monkeypatch):
    seen = _fake_runs(monkeypatch, {False: 0.5, True: 0.4})
    row = bench_sim.measure(("verilator", "fp16", "pull", 1 << 20), _args("--repeat", "3"),
                            lambda text: None)
    bench, bare = ("fp16", "pull", 1 << 20, None), ("fp16", "pull", 1 << 20, "700")
    assert seen == [bench, bare, bare, bench, bench, bare]
    assert bench_sim.BARE_VARIABLE not in os.environ
    assert (row["bench_cps"], row["bare_cps"], row["overhead"]) == (2000, 2500, 0.25)
    assert (row["sim_cycles"], row["collective_cycles"]) == (1000, 700)


def test_a_mismatch_is_an_error(monkeypatch):
    _fake_runs(monkeypatch, {False: 1, True: 1})
    monkeypatch.setattr(bench_sim, "run_allreduce", lambda cfg, log: {
        "match": False, "status": 0, "expected_status": 0, "cycles": 1, "run_dir": "/x"})
    with pytest.raises(RuntimeError, match="differs from the golden model"):
        bench_sim.measure(("verilator", "fp16", "pull", 4096), _args(), lambda text: None)


def test_table_of_synthetic_rows():
    rows = [{"sim": "verilator", "dtype": "fp16", "mode": "pull", "size": 1 << 20,
             "sim_cycles": 34012, "bench_cps": 15000, "bare_cps": 18000, "overhead": 0.2},
            {"sim": "icarus", "dtype": "int8", "mode": "push", "size": 32768,
             "sim_cycles": 999, "bench_cps": 300, "bare_cps": 330, "overhead": 0.1}]
    assert bench_sim.table(rows).splitlines() == [
        "| simulator | dtype | mode | size | simulated cycles | cycles/s | bare cycles/s | "
        "Python overhead |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
        "| verilator | fp16 | pull | 1 MiB | 34,012 | 15,000 | 18,000 | 20.0 % |",
        "| icarus | int8 | push | 32 KiB | 999 | 300 | 330 | 10.0 % |"]


def test_run_writes_the_table_the_runs_and_only_its_section(tmp_path, monkeypatch, capsys):
    _fake_runs(monkeypatch, {False: 0.5, True: 0.25})
    monkeypatch.setattr(bench_sim, "current_commit", lambda: "abc1234")
    doc = tmp_path / "PERF.md"
    doc.write_text("# Performance\n\nprose\n\n<!-- bench-sim:begin -->\nold\n"
                   "<!-- bench-sim:end -->\n\nafter\n")
    out = tmp_path / "o"
    argv = ["--modes", "pull", "--dtypes", "fp16", "--icarus-size", "0"]
    assert main(["bench-sim", *argv, "--out", str(out), "--doc", str(doc)]) == 0
    assert "verilator fp16 pull 1 MiB: 2000 cycles/s, bare 4000 cycles/s" in \
        capsys.readouterr().err
    text = doc.read_text()
    assert text.startswith("# Performance\n\nprose\n\n<!-- bench-sim:begin -->\nGenerated by "
                           "`scin bench-sim --modes pull --dtypes fp16 --icarus-size 0 --out")
    assert text.endswith("<!-- bench-sim:end -->\n\nafter\n") and "\nold\n" not in text
    assert "at commit abc1234" in text and "load average (1/5/15 min)" in text
    assert "| verilator | fp16 | pull | 1 MiB | 1,000 | 2,000 | 4,000 | 100.0 % |" in text
    assert (out / "bench_sim.md").read_text().strip() in text
    assert '"bare_cps": 4000' in (out / "bench_sim.json").read_text()
