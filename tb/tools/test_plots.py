"""Every plot a command writes is readable (scripts/plotting.py): a title saying measured or
modelled, both axis labels, one legend entry per series, and no two series drawn alike. The plot
functions run on small synthetic tables; each figure is checked as it is saved."""

import itertools

import matplotlib.figure
import pytest

from scin.hdl.paper import PAPER_LINK
from scin.scripts import accuracy, bench, bench_push, compare, plotting, resources


@pytest.fixture
def saved(monkeypatch):
    """Every figure saved while the test runs: ``[(path, problems, styles of each axes)]``."""
    figures = []
    real = matplotlib.figure.Figure.savefig

    def savefig(fig, path, *args, **kwargs):
        styles = [[(line.get_color(), line.get_marker(), line.get_linestyle())
                   for line in ax.lines
                   if not line.get_label().startswith("_") and len(line.get_xdata()) > 2]
                  for ax in fig.axes]
        figures.append((path, plotting.check_figure(fig), styles))
        return real(fig, path, *args, **kwargs)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    return figures


def _check(figures, expected):
    assert len(figures) == expected
    for path, problems, per_axes in figures:
        assert not problems, (path, problems)
        for styles in per_axes:
            assert len(set(styles)) == len(styles), (path, "two series drawn alike", styles)


SIZES = [64, 4096, 65536, 1 << 20]


def test_push_plot(tmp_path, saved):
    rows = [{"dtype": d, "endpoints": n, "mode": m, "size": s, "latency_us": 1 + s / 1e4}
            for d, n, m, s in itertools.product(("fp16", "int8"), (4, 8), ("pull", "push"), SIZES)]
    bench_push.plot(rows, tmp_path / "push.png")
    _check(saved, 1)
    assert (tmp_path / "push.png").stat().st_size > 1000


def test_bench_plots(tmp_path, saved):
    rows = [{"part": "size", "dtype": d, "endpoints": n, "size": s, "us": s / 1e3,
             "efficiency": 0.9, "cycles": 100 + s // 32}
            for d, n, s in itertools.product(("fp16", "int8"), (4, 8), SIZES)]
    rows += [{"part": "waves", "waves": k, "efficiency": 0.5 + k / 40, "size": 1 << 20,
              "capacity": 1 << 16} for k in (1, 2, 4, 8)]
    names = bench.plot(rows, tmp_path, PAPER_LINK)
    assert names == ["latency.png", "efficiency.png", "waves.png", "speedup.png"]
    _check(saved, 4)


def test_the_rule_can_fail():
    plt = plotting.pyplot()
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], label="a")
    ax.plot([1, 2], [3, 5], label="b")
    ax.legend(["a"])
    problems = plotting.check_figure(fig)
    assert any("title" in p for p in problems) and any("label" in p for p in problems)
    assert any("legend" in p for p in problems)
    plt.close(fig)
    with pytest.raises(ValueError, match="kind"):
        plotting.finish(None, [], "x.png", title="t", kind="guessed")


def test_accuracy_plot(tmp_path, saved):
    table = [{"mode": m, "N": n, "rel_l2_median": 1e-3 * n, "rel_l2_min": 5e-4 * n,
              "rel_l2_max": 2e-3 * n} for m in accuracy.MODES for n in (2, 4, 8, 16)]
    accuracy.plot(table, tmp_path / "accuracy.png")
    _check(saved, 1)


def test_compare_plots(tmp_path, saved):
    rows = [{"op": "allreduce", "algorithm": a, "endpoints": n, "size": s, "us": s / 1e3,
             "speedup_vs_nvls": 1.2} for a in compare.ALGORITHMS for n in (4, 8) for s in SIZES]
    paths = compare.plot(rows, tmp_path)
    assert [p.name for p in paths] == list(compare.plot_names("allreduce"))
    _check(saved, 2)


def test_resources_plot(tmp_path, saved):
    rows = [{"block": b, "ports": p, "flit_width": f, "lut": 1000 * p * f // 64 + i,
             "ff": 500 * p * f // 64 + i}
            for i, b in enumerate(("switch", "isa", "datapath"))
            for p in resources.PORTS for f in resources.FLITS]
    resources.plot_scaling(rows, tmp_path / "scaling.png")
    _check(saved, 1)


def test_study_plots(tmp_path, saved):
    """`scin study` (the modelled NVLink fabric and the LLM roofline; seconds, no RTL run)."""
    from scin.scripts.cli import main
    assert main(["study", "--out", str(tmp_path)]) == 0
    assert {p.name.split(".")[1] for p, _, _ in saved} == {"latency", "bandwidth", "llm"}
    _check(saved, 3)
