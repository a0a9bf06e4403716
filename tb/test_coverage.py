"""Functional coverage of the collective space (sim/coverage.py) and what the soak reports of it."""

import random

import pytest

from scin.sim.coverage import AXES, CROSSES, Coverage, bins_of, excluded, group_shape, size_class
from scin.sim.soak import BAD_DESC_KINDS, FAULT_OPS, SoakConfig, make_plan, plan_coverage


FAULTS = ("none", "decerr") + tuple(f"bad_desc:{k}" for k in BAD_DESC_KINDS)


def test_size_classes_and_group_shapes():
    assert [size_class(s, 32) for s in (32, 64, 4096, 4128)] == \
        ["one_flit", "one_page", "one_page", "pages"]
    assert group_shape([1, 3], 4) == "pair"
    assert group_shape([0, 1, 2, 3], 4) == "all"
    assert group_shape([0, 1], 2) == "all"
    assert group_shape([1, 2, 3], 4) == "contiguous"
    assert group_shape([0, 2, 3], 4) == "scattered"


def test_exclusions_name_their_reason():
    assert excluded("op", "barrier", "dtype", "int8", FAULT_OPS) == "a barrier moves no data"
    assert "not drawn with allreduce" in excluded("op", "allreduce", "fault",
                                                  "bad_desc:root_not_a_rank", FAULT_OPS)
    assert excluded("op", "broadcast", "fault", "bad_desc:root_not_a_rank", FAULT_OPS) is None
    assert "not drawn with barrier" in excluded("op", "barrier", "fault", "decerr", FAULT_OPS)
    assert excluded("op", "barrier", "fault", "bad_desc:bad_op", FAULT_OPS) is None


def test_hits_fill_bins_and_the_rest_are_holes():
    cov = Coverage(FAULTS, FAULT_OPS)
    cov.add(bins_of("reduce", "int8", "ordered", 8192, [0, 2], False, "none", None,
                    endpoints=4, flit_bytes=32))
    cov.add(bins_of("barrier", None, "acked", 0, [0, 1, 2, 3], False, "bad_desc", "bad_op",
                    endpoints=4, flit_bytes=32))
    report = cov.as_dict()
    assert report["axes"]["op"]["filled"] == 2
    assert "allreduce" in report["axes"]["op"]["holes"]
    assert report["axes"]["dtype"] == {"filled": 1, "total": 3, "holes": ["fp16", "bf16"]}
    assert report["axes"]["fault"]["filled"] == 2
    cross = report["crosses"]["op x size"]
    assert cross["total"] == 5 * 3 and cross["filled"] == 1          # no barrier x size bins
    assert "reduce x pages" not in cross["holes"]
    assert report["filled"] == sum(p["filled"] for kind in ("axes", "crosses")
                                   for p in report[kind].values())
    assert len(report["crosses"]) == len(CROSSES)
    assert cov.lines()[0] == f"functional coverage: {report['filled']} of {report['total']} bins"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_soak_counts_every_collective_it_draws_in_bins_that_can_occur(seed):
    """Every collective of a soak plan lands in one bin of each axis it has, and never in a
    bin the exclusions say cannot occur (so the exclusions match how the soak draws)."""
    cfg = SoakConfig(count=30, seed=seed, max_size=8192)
    plan, _, expected = make_plan(cfg)
    cov = plan_coverage(plan, expected, cfg.endpoints, 32)
    ops = {k[1]: v for k, v in cov.hits.items() if k[0] == "op"}
    assert sum(ops.values()) == cfg.count
    for key in cov.hits:
        if isinstance(key[0], tuple):
            (a, x), (b, y) = key
            assert excluded(a, x, b, y, FAULT_OPS) is None, key
        else:
            axis, b = key
            assert b in cov.axes[axis], key
    assert set(AXES) <= set(cov.as_dict()["axes"])


def test_a_seed_gives_the_same_coverage():
    cfg = SoakConfig(count=12, seed=random.Random(5).randrange(100))
    a = plan_coverage(*make_plan(cfg)[::2], cfg.endpoints, 32).as_dict()
    b = plan_coverage(*make_plan(cfg)[::2], cfg.endpoints, 32).as_dict()
    assert a == b
