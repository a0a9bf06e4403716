"""One look for every plot the commands write, so that no series hides another.

Curves of this project often coincide (fp16 and int8 at one size, N = 4 and N = 8 of a bound that
does not depend on N), so each series of a figure gets its own colour, marker *and* line style
(:func:`series_style`), markers hollow and of decreasing size, so a curve drawn over another still
shows the one beneath. :func:`finish` gives every axes its labels, a grid, plain tick labels on
log axes and one legend, and every figure a title that says whether its figures are measured on
the RTL or modelled; :func:`check_figure` is the same rule as a check (tb/tools/test_plots.py).
"""

import math

from .outputs import save_figure

__all__ = ["pyplot", "series_style", "finish", "check_figure", "KINDS"]

#: What a figure's title must say its figures are.
KINDS = ("measured", "modelled")

_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">")
_LINES = ("-", "--", "-.", ":")
_COLOURS = ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9")


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def series_style(k):
    """``ax.plot`` keyword arguments of the ``k``-th series of a figure: a colour, a marker and a
    line style of its own, the marker hollow and smaller for later series (a series drawn over
    an earlier one leaves the earlier one's marker visible around its own)."""
    return {"color": _COLOURS[k % len(_COLOURS)], "marker": _MARKERS[k % len(_MARKERS)],
            "linestyle": _LINES[k % len(_LINES)], "markersize": max(3.0, 7.0 - 0.5 * k),
            "markerfacecolor": "none", "linewidth": 1.2}


def finish(fig, axes, path, *, title, kind, dpi=110, legend_columns=1):
    """Label, title and save ``fig`` to ``path`` (whole or not at all), then close it.

    ``axes`` is one axes or a list; each must already have its x and y labels. ``kind`` is
    ``"measured"`` or ``"modelled"`` and is put in the title unless the title says it. Log axes
    whose ticks are not labelled already get plain number tick labels. Raises ValueError for an
    unknown kind or a missing label."""
    import matplotlib.ticker as ticker
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if not any(word in title for word in KINDS):
        title = f"{title} ({kind})"
    for ax in axes if isinstance(axes, (list, tuple)) else list(getattr(axes, "flat", [axes])):
        if not ax.get_xlabel() or not ax.get_ylabel():
            raise ValueError(f"every axes of {path} needs an x and a y label")
        for axis, scale, (lo, hi) in ((ax.xaxis, ax.get_xscale(), ax.get_xlim()),
                                      (ax.yaxis, ax.get_yscale(), ax.get_ylim())):
            if scale == "log" and isinstance(axis.get_major_formatter(), ticker.LogFormatter):
                axis.set_major_formatter(ticker.FuncFormatter(_plain))
                # Under two decades a log axis has one or two major ticks: label the minor ones.
                axis.set_minor_formatter(ticker.FuncFormatter(_plain) if hi < 100 * lo
                                         else ticker.NullFormatter())
        ax.grid(True, which="major", alpha=0.3)
        if ax.get_legend_handles_labels()[1]:
            ax.legend(fontsize=7, ncol=legend_columns)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=dpi)
    pyplot().close(fig)
    return path


def _plain(value, _pos):
    """A tick label: plain below 10,000 (1024 -> "1024", 0.5 -> "0.5"), a power of ten above
    (1e6 -> "10^6" in mathtext)."""
    if value < 1e4:
        return f"{value:g}"
    exponent = math.log10(value)
    return f"$10^{{{round(exponent)}}}$" if exponent == round(exponent) else f"{value:.3g}"


def check_figure(fig):
    """The rule :func:`finish` applies, as a list of what ``fig`` breaks (empty: none): a title
    saying measured or modelled, x and y labels on every axes with data, and one legend entry
    per labelled series."""
    problems = []
    titles = [fig.get_suptitle()] + [ax.get_title() for ax in fig.axes]
    if not any(word in t for t in titles for word in KINDS):
        problems.append(f"no title saying {' or '.join(KINDS)}: {titles}")
    for i, ax in enumerate(fig.axes):
        if not ax.lines and not ax.collections:
            continue
        if not ax.get_xlabel() or not ax.get_ylabel():
            problems.append(f"axes {i}: missing an axis label")
        labelled = ax.get_legend_handles_labels()[1]
        legend = ax.get_legend()
        shown = [t.get_text() for t in legend.get_texts()] if legend else []
        if sorted(shown) != sorted(labelled):
            problems.append(f"axes {i}: legend {shown} is not the series {labelled}")
    return problems
