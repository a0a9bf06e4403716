"""``scin compare``'s plumbing (no simulation): points, refusals, speedups, the doc section.
The measured runs themselves are tb/test_nvls.py's (NVLS) and tb/test_system.py's (SCIN)."""

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
    pts = compare.points(_args(endpoints="4", sizes="64B,4KiB", algorithms="scin-fp16,scin-int8,nvls"))
    got = {(p[0], p[1], p[2]) for p in pts}
    assert got == {("scin-fp16", 4, 64), ("nvls", 4, 64), ("scin-fp16", 4, 4096),
                   ("scin-int8", 4, 4096), ("nvls", 4, 4096)}


@pytest.mark.parametrize("argv, message", [
    (["--endpoints", "5"], "--endpoints: 4 or 8"),
    (["--algorithms", "nccl"], "--algorithms: one of"),
    (["--window", "17"], "--window: 1 to 16"),
])
def test_bad_options_are_refused_with_the_option_named(argv, message, capsys):
    assert main(["compare", "--dry-run", *argv]) == 2
    assert message in capsys.readouterr().err


def test_speedups_and_section():
    rows = [dict(algorithm="nvls", dtype="fp16", endpoints=4, size=4096, cycles=1000, commit="c"),
            dict(algorithm="scin-fp16", dtype="fp16", endpoints=4, size=4096, cycles=500, commit="c"),
            dict(algorithm="scin-int8", dtype="int8", endpoints=4, size=4096, cycles=400, commit="c")]
    compare.add_speedups(rows)
    assert [r["speedup_vs_nvls"] for r in rows] == [1.0, 2.0, 2.5]
    text = compare.section(rows, _args(command_line="scin compare"), 1.0, "bench")
    assert "| 4 | 4096 | 500 | 400 | 1000 |" in text and "| 2.0 | 2.5 |" in text
