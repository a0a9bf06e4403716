"""``scin compare``'s plumbing (no simulation): points, refusals, speedups, the doc section.
The measured runs themselves are tb/system/test_nvls.py's (NVLS) and tb/system/test_system.py's
(SCIN)."""

import argparse

import pytest

from scin.scripts import compare
from scin.scripts.cli import main


def _args(**kw):
    p = argparse.ArgumentParser()
    compare.add_arguments(p)
    args = p.parse_args([])
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def test_points_skip_int8_below_a_block_and_cover_every_algorithm():
    pts = compare.points(_args(endpoints="4", sizes="64B,4KiB",
                               algorithms="scin-fp16,scin-int8,nvls"))
    got = {(p[0], p[1], p[2]) for p in pts}
    assert got == {("scin-fp16", 4, 64), ("nvls", 4, 64), ("scin-fp16", 4, 4096),
                   ("scin-int8", 4, 4096), ("nvls", 4, 4096)}


@pytest.mark.parametrize("argv, message", [
    (["--endpoints", "5"], "--endpoints: 4 or 8"),
    (["--algorithms", "nccl"], "--algorithms: one of"),
    (["--window", "17"], "argument --window: must be an integer from 1 to 16"),
])
def test_bad_options_are_refused_with_the_option_named(argv, message, capsys):
    try:
        status = main(["compare", "--dry-run", *argv])
    except SystemExit as exc:       # refused by the option's type
        status = exc.code
    assert status == 2
    assert message in capsys.readouterr().err


def test_speedups_and_section():
    rows = [dict(algorithm="nvls", dtype="fp16", endpoints=4, size=4096, cycles=1000,
                 commit="c"),
            dict(algorithm="scin-fp16", dtype="fp16", endpoints=4, size=4096, cycles=500,
                 commit="c"),
            dict(algorithm="scin-int8", dtype="int8", endpoints=4, size=4096, cycles=400,
                 commit="c")]
    compare.add_speedups(rows)
    assert [r["speedup_vs_nvls"] for r in rows] == [1.0, 2.0, 2.5]
    text = compare.section(rows, _args(command_line="scin compare"), 1.0, "bench")
    assert "| 4 | 4096 | 500 | 400 | 1000 |" in text and "| 2.0 | 2.5 |" in text


def test_op_points_drop_the_ring_and_carry_the_op():
    pts = compare.points(_args(op="reduce-scatter", endpoints="4", sizes="64B,4KiB"))
    assert {p[0] for p in pts} == {"scin-fp16", "scin-int8", "nvls"}
    assert {p[7] for p in pts} == {"reduce-scatter"}
    assert {p[7] for p in compare.points(_args(endpoints="4", sizes="64B"))} == {"allreduce"}


@pytest.mark.parametrize("argv, message", [
    (["--op", "allgather", "--algorithms", "ring"], "--algorithms ring: the ring runs the "
                                                    "All-Reduce only"),
    (["--op", "reduce-scatter", "--sizes", "48B"], "--sizes: NVLS reduce-scatter needs whole "
                                                   "32-byte flits, not 48 B"),
])
def test_bad_op_options_are_refused(argv, message, capsys):
    assert main(["compare", "--dry-run", *argv]) == 2
    assert message in capsys.readouterr().err


def test_unknown_op_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--dry-run", "--op", "broadcast"])
    assert exc.value.code == 2
    assert "argument --op: invalid choice: 'broadcast'" in capsys.readouterr().err


def test_csv_keeps_other_ops_and_reads_old_rows_as_allreduce(tmp_path):
    """A CSV from before the op column reads as All-Reduce rows; a ReduceScatter run keeps them
    and an All-Reduce run replaces them (and keeps the ReduceScatter rows)."""
    path = tmp_path / "compare.csv"
    path.write_text("algorithm,dtype,endpoints,size,cycles,us,speedup_vs_nvls,window,entries,"
                    "match,wall_s,commit\n"
                    "nvls,fp16,4,64,1540,6.16,1.0,8,128,1,485.42,62942ad\n"
                    "ring,fp16,4,64,3775,15.1,0.408,,,1,3.08,62942ad\n")
    old = compare.read_csv(path)
    assert [(r["op"], r["algorithm"], r["cycles"], r["window"]) for r in old] == \
        [("allreduce", "nvls", 1540, 8), ("allreduce", "ring", 3775, "")]
    rs = [dict(op="reduce-scatter", algorithm="nvls", dtype="fp16", endpoints=4, size=64,
               cycles=1600, commit="c"),
          dict(op="reduce-scatter", algorithm="scin-fp16", dtype="fp16", endpoints=4, size=64,
               cycles=400, commit="c")]
    compare.add_speedups(rs)
    assert [r["speedup_vs_nvls"] for r in rs] == [1.0, 4.0]
    rows = compare.merge_rows(old, rs)
    compare.write_csv(rows, path)
    again = compare.read_csv(path)
    assert [(r["op"], r["algorithm"]) for r in again] == [
        ("allreduce", "nvls"), ("allreduce", "ring"), ("reduce-scatter", "nvls"),
        ("reduce-scatter", "scin-fp16")]
    ar = [dict(op="allreduce", algorithm="nvls", dtype="fp16", endpoints=4, size=64, cycles=1500)]
    assert [(r["op"], r["cycles"]) for r in compare.merge_rows(again, ar)] == [
        ("reduce-scatter", 1600), ("reduce-scatter", 400), ("allreduce", 1500)]
    # Speedups never mix operations: an All-Reduce row has no ReduceScatter NVLS baseline.
    mixed = compare.add_speedups([dict(r) for r in again if r["algorithm"] != "nvls"
                                  or r["op"] == "reduce-scatter"])
    assert [r["speedup_vs_nvls"] for r in mixed] == ["", 1.0, 4.0]


def test_op_section_and_plot_names():
    rows = [dict(op="allgather", algorithm="nvls", dtype="fp16", endpoints=4, size=4096,
                 cycles=1000, commit="c"),
            dict(op="allgather", algorithm="scin-fp16", dtype="fp16", endpoints=4, size=4096,
                 cycles=500, commit="c"),
            dict(op="allreduce", algorithm="ring", dtype="fp16", endpoints=4, size=4096,
                 cycles=9999, commit="c")]
    compare.add_speedups(rows)
    text = compare.section(rows, _args(op="allgather", command_line="scin compare --op allgather"),
                           1.0, "bench")
    assert "ring" not in text and "9999" not in text
    assert "| 4 | 4096 | 500 | - | 1000 | 2.0 | - |" in text, text
    assert "st of each rank's shard" in text and "count in bytes" in text
    assert "bench/compare_allgather_speedup.png" in text
    assert compare.section_name("allgather") == "compare-allgather"
    assert compare.section_name("allreduce") == "compare"
    assert compare.plot_names("allreduce") == ("compare_speedup.png", "compare_latency.png")
    assert compare.plot_names("reduce-scatter") == ("compare_reduce_scatter_speedup.png",
                                                    "compare_reduce_scatter_latency.png")
