"""The RTL benches' CSVs (``docs/bench/``) read back as rows: ``bench.csv`` (``scin bench``),
``push.csv`` (``scin bench-push``) and ``compare.csv`` (``scin compare``), each row a dict with
numbers as numbers and the columns a CSV written before them lacks at their default.
"""

import csv

from .closed_forms import COMPARE_ALGORITHMS
from .fabric_model import MODES

__all__ = ["read_csv", "read_bench_csv", "read_push_csv", "read_compare_csv"]


def read_csv(path, defaults, required):
    """The rows of a CSV as dicts, numbers as numbers, ``defaults`` under each row's own fields
    (columns a CSV written before them lacks); a row without one of ``required`` is an error."""
    def num(v):
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return v
    with open(path, newline="") as f:
        rows = [{**defaults, **{k: num(v) for k, v in r.items() if v != ""}}
                for r in csv.DictReader(f)]
    for k, row in enumerate(rows, 2):
        for key in required:
            if key not in row:
                raise ValueError(f"{path}: line {k} has no {key!r}")
    return rows


def read_bench_csv(path):
    """The rows of a ``bench.csv`` (``scin bench``) as dicts, numbers as numbers; rows written
    before the op axis existed are All-Reduces, and rows before the trains axis ran the paper's
    per-slot protocol (``trains`` 1) on an ISA without ``gather_pairs``."""
    return read_csv(path, {"op": "allreduce", "in_place": 0, "root": 0, "trains": 1,
                            "gather_pairs": 0},
                     ("part", "op", "dtype", "size", "endpoints", "cycles"))

def read_push_csv(path):
    """The rows of a ``push.csv`` (``scin bench-push``) as dicts, numbers as numbers."""
    rows = read_csv(path, {}, ("endpoints", "dtype", "size", "mode", "cycles"))
    for k, row in enumerate(rows, 2):
        if row["mode"] not in MODES:
            raise ValueError(f"{path}: line {k}: mode must be one of {', '.join(MODES)}, "
                             f"not {row['mode']!r}")
    return rows

def read_compare_csv(path):
    """The rows of a ``compare.csv`` (``scin compare``) as dicts, numbers as numbers; rows
    without an ``op`` column are All-Reduces."""
    rows = read_csv(path, {"op": "allreduce"}, ("algorithm", "endpoints", "size", "cycles"))
    for k, row in enumerate(rows, 2):
        if row["algorithm"] not in COMPARE_ALGORITHMS:
            raise ValueError(f"{path}: line {k}: algorithm must be one of "
                             f"{', '.join(COMPARE_ALGORITHMS)}, not {row['algorithm']!r}")
    return rows
