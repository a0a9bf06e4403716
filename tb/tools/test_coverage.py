"""Functional coverage of the collective space (sim/coverage.py) and what the soak reports of it.

No simulation: the binning of hand-made collectives, the exclusions, the holes and the reports,
and the bins of soak plans drawn by ``make_plan`` from fixed seeds (the collectives a soak of that
seed runs and checks).
"""

import json
import random
from collections import Counter

import pytest

from scin.sim.coverage import (AXES, CROSSES, Coverage, bins_of, excluded, group_shape,
                               group_shapes, report_lines, report_markdown, size_class)
from scin.sim.soak import BAD_DESC_KINDS, FAULT_OPS, SoakConfig, make_plan, plan_coverage


FAULTS = ("none", "decerr") + tuple(f"bad_desc:{k}" for k in BAD_DESC_KINDS)
GEOMETRY = dict(flit_bytes=32, capacity=16384)        # the soak's: 32-byte flits, 16 KiB table


def bins(op="allreduce", dtype="fp16", mode="ordered", size=1024, members=(0, 1), in_place=False,
         fault="none", kind=None, endpoints=4):
    return bins_of(op, dtype, mode, size, list(members), in_place, fault, kind,
                   endpoints=endpoints, **GEOMETRY)


@pytest.mark.parametrize("op, dtype, size, ranks, want", [
    ("allreduce", "fp16", 32, 4, "one_flit"),
    ("allreduce", "fp16", 64, 4, "one_page"),
    ("allreduce", "int8", 64, 4, "one_flit"),         # INT8: half the bytes of the 16-bit form
    ("allreduce", "fp16", 4096, 4, "one_page"),
    ("allreduce", "int8", 8192, 4, "one_page"),
    ("allreduce", "bf16", 4128, 4, "pages"),
    ("allreduce", "fp16", 16384, 4, "pages"),         # four slots: the whole table, no reuse
    ("allreduce", "fp16", 16416, 4, "wraps"),         # five slots
    ("reduce-scatter", "fp16", 4096, 4, "one_page"),  # four phases of one slot
    ("allgather", "fp16", 4096, 5, "wraps"),          # five phases of one slot
    ("allgather", "bf16", 32, 4, "one_flit"),
    ("allgather", "bf16", 32, 8, "wraps"),            # eight phases of one slot: reuse first
    ("broadcast", "fp16", 32768, 2, "wraps"),
])
def test_size_classes(op, dtype, size, ranks, want):
    assert size_class(op, dtype, size, ranks, **GEOMETRY) == want


def test_size_class_names_a_bad_capacity():
    with pytest.raises(ValueError, match="capacity"):
        size_class("allreduce", "fp16", 64, 2, flit_bytes=32, capacity=1000)


def test_group_shapes():
    assert group_shape([1, 3], 4) == "pair"
    assert group_shape([0, 1, 2, 3], 4) == "all"
    assert group_shape([0, 1], 2) == "all"
    assert group_shape([1, 2, 3], 4) == "contiguous"
    assert group_shape([0, 2, 3], 4) == "scattered"
    for bad in ([1], [0, 4]):
        with pytest.raises(ValueError, match="members"):
            group_shape(bad, 4)
    assert group_shapes(2) == ("all",)
    assert group_shapes(3) == ("pair", "all")
    assert group_shapes(4) == group_shapes(8) == AXES["group"]
    with pytest.raises(ValueError, match="endpoints"):
        group_shapes(1)


def test_groups_that_cannot_form_are_excluded():
    """On 3 endpoints there is no subset of three or more ports that is not all of them."""
    cov = Coverage(FAULTS, FAULT_OPS, endpoints=3)
    cov.add(bins(members=(0, 2), endpoints=3))
    report = cov.as_dict()
    group = report["axes"]["group"]
    assert (group["filled"], group["total"], group["holes"]) == (1, 2, ["all"])
    assert set(group["excluded"]) == {"contiguous", "scattered"}
    assert report["crosses"]["op x group"]["total"] == 6 * 2
    assert "3 endpoints form no scattered group" in report_markdown(report)
    with pytest.raises(ValueError, match="contiguous"):
        cov.add({"op": "allreduce", "group": "contiguous"})


def test_a_barrier_and_a_rejected_descriptor_have_no_data_bins():
    assert bins(op="barrier") == {"op": "barrier", "flag_mode": "ordered", "group": "pair",
                                  "fault": "none"}
    rejected = bins(op="reduce", fault="bad_desc", kind="zero_length", members=(0, 2, 3))
    assert rejected == {"op": "reduce", "flag_mode": "ordered", "group": "scattered",
                        "fault": "bad_desc:zero_length"}
    good = bins(op="reduce", dtype="int8", size=8192, in_place=True, mode="acked")
    assert good == {"op": "reduce", "flag_mode": "acked", "group": "pair", "fault": "none",
                    "dtype": "int8", "size": "one_page", "place": "in_place"}
    assert bins(fault="decerr")["size"] == "one_page"    # DECERR still reads: data bins count
    with pytest.raises(ValueError, match="op"):
        bins(op="alltoall")


def test_exclusions_name_their_reason():
    assert excluded("op", "barrier", "dtype", "int8", FAULT_OPS) == "a barrier moves no data"
    assert excluded("op", "barrier", "size", "wraps", FAULT_OPS) == "a barrier moves no data"
    assert "not drawn with allreduce" in excluded("op", "allreduce", "fault",
                                                  "bad_desc:root_not_a_rank", FAULT_OPS)
    assert excluded("op", "broadcast", "fault", "bad_desc:root_not_a_rank", FAULT_OPS) is None
    assert "not drawn with barrier" in excluded("op", "barrier", "fault", "decerr", FAULT_OPS)
    assert excluded("op", "barrier", "fault", "bad_desc:bad_op", FAULT_OPS) is None
    assert excluded("op", "barrier", "flag_mode", "acked", FAULT_OPS) is None


def test_hits_fill_bins_and_the_rest_are_holes():
    cov = Coverage(FAULTS, FAULT_OPS)
    cov.add(bins(op="reduce", dtype="int8", size=16384, members=(0, 2)))
    cov.add(bins(op="barrier", mode="acked", members=(0, 1, 2, 3), fault="bad_desc",
                 kind="bad_op"))
    report = cov.as_dict()
    assert report["collectives"] == 2
    assert report["axes"]["op"]["filled"] == 2
    op_hits = report["axes"]["op"]["hits"]
    assert op_hits["reduce"] == 1 and op_hits["allgather"] == 0
    assert "allreduce" in report["axes"]["op"]["holes"]
    assert report["axes"]["dtype"] == {"filled": 1, "total": 3, "holes": ["fp16", "bf16"],
                                       "hits": {"fp16": 0, "bf16": 0, "int8": 1},
                                       "excluded": {}}
    assert report["axes"]["fault"]["filled"] == 2
    cross = report["crosses"]["op x size"]
    assert cross["total"] == 5 * 4 and cross["filled"] == 1          # no barrier x size bins
    assert "reduce x pages" not in cross["holes"] and "reduce x wraps" in cross["holes"]
    assert cross["excluded"]["barrier x one_flit"] == "a barrier moves no data"
    assert report["filled"] == sum(p["filled"] for kind in ("axes", "crosses")
                                   for p in report[kind].values())
    assert report["holes"] == report["total"] - report["filled"]
    assert len(report["crosses"]) == len(CROSSES)
    assert cov.lines()[0].startswith(f"functional coverage: {report['filled']} of "
                                     f"{report['total']} bins")
    json.dumps(report)                                   # the --json summary carries it as is


def test_a_bin_outside_the_axes_is_refused():
    cov = Coverage(FAULTS, FAULT_OPS)
    with pytest.raises(ValueError, match="bins"):
        cov.add({"op": "allreduce", "fault": "timeout"})
    assert cov.collectives == 0 and not cov.hits


def test_the_reports_list_every_hole_and_exclusion():
    cov = Coverage(FAULTS, FAULT_OPS)
    cov.add(bins(op="allgather", dtype="bf16", size=32, members=(0, 1, 2, 3)))
    report = cov.as_dict()
    lines = report_lines(report)
    assert len(lines) == 1 + len(report["axes"]) + len(CROSSES)
    assert any(line.split()[:2] == ["op", "x"] and "(+" in line for line in lines)
    md = report_markdown(report, title="T", note="N.")
    assert md.startswith("## T\n\nN.\n\n")
    for part in report["crosses"].values():
        for hole in part["holes"]:
            assert hole in md
        for b in part["excluded"]:
            assert b in md
    assert "**allreduce 0**" in md and "allgather 1" in md


def test_the_soak_cli_writes_the_markdown_report(tmp_path):
    from scin.scripts.soak import build_parser, write_coverage_report
    args = build_parser().parse_args(["--count", "5", "--coverage-report", str(tmp_path / "c.md")])
    cfg = SoakConfig(count=args.count, seed=args.seed)
    plan, _, expected = make_plan(cfg)
    summary = {"coverage": plan_coverage(plan, expected).as_dict(), "passed": True,
               "wall_seconds": 1.5}
    write_coverage_report(summary, args.coverage_report, "scin soak --count 5")
    text = (tmp_path / "c.md").read_text()
    assert text.startswith("## Functional coverage of `scin soak --count 5`")
    assert "passed (1.5 s wall)" in text and "by 5 collectives" in text


@pytest.mark.parametrize("seed, endpoints, groups", [
    (1, 4, "random"), (2, 4, "random"), (3, 2, "random"), (4, 3, "random"), (5, 8, "halves")])
def test_the_soak_counts_every_collective_it_draws_in_bins_that_can_occur(seed, endpoints, groups):
    """Every collective of a soak plan lands in one bin of each axis it has, and never in a
    bin the exclusions say cannot occur (so the exclusions match how the soak draws; Coverage.add
    refuses an excluded group shape)."""
    cfg = SoakConfig(count=30, seed=seed, max_size=8192, fault_rate=0.5, endpoints=endpoints,
                     groups=groups)
    plan, _, expected = make_plan(cfg)
    cov = plan_coverage(plan, expected)
    ops = {k[1]: v for k, v in cov.hits.items() if k[0] == "op"}
    assert sum(ops.values()) == cov.collectives == cfg.count
    for key in cov.hits:
        if isinstance(key[0], tuple):
            (a, x), (b, y) = key
            assert excluded(a, x, b, y, cov.fault_ops) is None, key
        else:
            axis, b = key
            assert b in cov.axes[axis], key
    assert set(AXES) <= set(cov.as_dict()["axes"])


def test_the_report_counts_exactly_the_bins_the_plan_draws():
    """Recount a plan's collectives by hand from ``make_plan``'s output: the report's hits per
    axis are those counts, and its filled cross bins those pairs."""
    cfg = SoakConfig(count=40, seed=7, fault_rate=0.3)
    plan, _, expected = make_plan(cfg)
    report = plan_coverage(plan, expected).as_dict()
    want = {axis: Counter() for axis in report["axes"]}
    pairs = set()
    for coll, e in zip(plan["collectives"], expected):
        mode = "acked" if coll["desc"]["flag_mode"] == 0 else "ordered"
        b = bins(e["op"], e["dtype"], mode, e["size"], e["members"], e["in_place"], e["fault"],
                 e["bad_kind"], endpoints=cfg.endpoints)
        for axis, value in b.items():
            want[axis][value] += 1
        pairs |= {f"{x} x {y}" for x, y in [(b["op"], b[c]) for a, c in CROSSES if c in b]}
    for axis, part in report["axes"].items():
        assert {k: v for k, v in part["hits"].items() if v} == dict(want[axis]), axis
    filled = {b for part in report["crosses"].values() for b, n in part["hits"].items() if n}
    assert filled == pairs
    assert sum(report["axes"]["op"]["hits"].values()) == cfg.count
    assert sum(report["axes"]["fault"]["hits"].values()) == cfg.count
    data = sum(e["op"] != "barrier" and e["fault"] != "bad_desc" for e in expected)
    assert sum(report["axes"]["size"]["hits"].values()) == data


def test_a_seed_gives_the_same_coverage():
    cfg = SoakConfig(count=12, seed=random.Random(5).randrange(100))
    a = plan_coverage(*make_plan(cfg)[::2]).as_dict()
    b = plan_coverage(*make_plan(cfg)[::2]).as_dict()
    assert a == b
