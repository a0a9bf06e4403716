"""Accuracy study of the All-Reduce modes against the exact sum.

Compares, for N participants holding synthetic activation-like FP16 tensors:

* ``inq``  -- in-network quantization: every participant quantizes its input
  once (``quantize_int8``), the switch reduces and requantizes once
  (``allreduce_int8``), everyone dequantizes.
* ``rq``   -- ring-quantized All-Reduce: a ring reduce-scatter of N chunks in
  which every hop dequantizes the incoming partial sum, adds the local
  contribution exactly and requantizes with the same block quantizer (N
  quantizations per chunk, N - 1 hops), then an all-gather of the final
  quantized chunks (no further error).
* ``fp16`` -- ``allreduce_fp16`` (one rounding of the exact sum).
* ``bf16`` -- ``allreduce_bf16`` on the inputs rounded to BF16; its reference
  is the exact sum of those BF16 inputs, so it measures the reduction alone.

The reference for inq, rq and fp16 is the exact sum of the FP16 inputs,
computed in float64 (exact: at most 16 multiples of 2**-24 below 2**16 need
fewer than 45 significant bits). Metrics: relative L2 error
``||y - exact|| / ||exact||`` and ``max|y - exact| / max|exact|``; the median
over seeds is reported.

Run ``scin accuracy --help``; writes ``accuracy.csv`` and ``accuracy.png`` into
``out/accuracy/`` (``--out``; with ``--doc`` the tracked ``docs/``) and prints a
Markdown table.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from scin.sim.fp import bf16_bits_to_float32, float_to_bf16_bits, fp16_to_fixed
from scin.sim.numerics import (
    BLOCK, allreduce, dequantize_int8, dequantize_int8_fixed, quantize_int8, quantize_int8_fixed,
)

from .options import default_out, integer, integer_list, out_dir, real
from .outputs import replacing
from .plotting import finish, pyplot, series_style

MODES = ("inq", "rq", "fp16", "bf16")

DOCS = Path(__file__).resolve().parents[1] / "docs"


def activations(rng: np.random.Generator, n_part: int, tokens: int, hidden: int, outliers: int,
                gain: float) -> np.ndarray:
    """Per-participant partial activations, float16 of shape (N, tokens * hidden).

    Each participant holds an independent standard Gaussian tensor (as the
    partial outputs of a row-parallel linear layer), with the same few hidden
    channels amplified by ``gain`` on every participant (the outlier channels
    of LLM activations).
    """
    channel_gain = np.ones(hidden)
    channel_gain[rng.choice(hidden, size=outliers, replace=False)] = gain
    x = rng.standard_normal((n_part, tokens, hidden)) * channel_gain
    return x.astype(np.float16).reshape(n_part, tokens * hidden)


def inq(x: np.ndarray) -> np.ndarray:
    """In-network quantization: quantize once per participant, reduce, requantize once."""
    q, s = quantize_int8(x)
    reduced = allreduce("int8", q, s)
    return dequantize_int8(reduced.out, reduced.scales)


def rq(x: np.ndarray) -> np.ndarray:
    """Ring-quantized All-Reduce (reduce-scatter with requantization at every hop, then
    all-gather)."""
    n_part, n = x.shape
    fixed = np.stack([fp16_to_fixed(row.view(np.uint16)) for row in x])
    n_blocks = -(-n // BLOCK)
    cuts = [min(n, BLOCK * (n_blocks * c // n_part)) for c in range(n_part + 1)]
    out = np.empty(n, dtype=np.float64)
    for c in range(n_part):
        sl = slice(cuts[c], cuts[c + 1])
        q, s = quantize_int8(x[c, sl])  # chunk c starts its trip at participant c
        for hop in range(1, n_part):
            p = (c + hop) % n_part
            partial = dequantize_int8_fixed(q, s) + fixed[p, sl]
            q, s, _ = quantize_int8_fixed(partial)
        out[sl] = dequantize_int8(q, s)  # all-gather forwards the final chunk unchanged
    return out


def errors(y: np.ndarray, exact: np.ndarray) -> tuple[float, float]:
    d = y - exact
    return (float(np.linalg.norm(d) / np.linalg.norm(exact)),
            float(np.abs(d).max() / np.abs(exact).max()))


def study(participants, seeds, tokens, hidden, outliers, gain):
    """Return rows (mode, N, seed, rel_l2, rel_max)."""
    rows = []
    for n_part in participants:
        for seed in range(seeds):
            rng = np.random.default_rng([seed, n_part])
            x = activations(rng, n_part, tokens, hidden, outliers, gain)
            exact = x.astype(np.float64).sum(axis=0)
            results = {
                "inq": inq(x),
                "rq": rq(x),
                "fp16": allreduce("fp16", x).out.astype(np.float64),
            }
            b = float_to_bf16_bits(x.astype(np.float32))
            # exact: span < 53 bits here
            exact_b = bf16_bits_to_float32(b).astype(np.float64).sum(axis=0)
            for mode in ("inq", "rq", "fp16"):
                rows.append((mode, n_part, seed, *errors(results[mode], exact)))
            bf16 = bf16_bits_to_float32(allreduce("bf16", b).out)
            rows.append(("bf16", n_part, seed, *errors(bf16, exact_b)))
    return rows


def summarise(rows):
    """Median (and range) over seeds per (mode, N)."""
    table = []
    for mode in MODES:
        for n_part in sorted({r[1] for r in rows}):
            sel = [r for r in rows if r[0] == mode and r[1] == n_part]
            if not sel:
                continue
            l2 = np.array([r[3] for r in sel])
            mx = np.array([r[4] for r in sel])
            table.append({"mode": mode, "N": n_part, "seeds": len(sel),
                          "rel_l2_median": float(np.median(l2)),
                          "rel_l2_min": float(l2.min()), "rel_l2_max": float(l2.max()),
                          "rel_max_median": float(np.median(mx))})
    return table


def markdown(table) -> str:
    ns = sorted({t["N"] for t in table})
    lines = ["| mode | metric | " + " | ".join(f"N={n}" for n in ns) + " |",
             "| --- | --- | " + " | ".join("---" for _ in ns) + " |"]
    for mode in MODES:
        for key, label in (("rel_l2_median", "rel. L2"),
                           ("rel_max_median", "max abs err / max abs exact")):
            vals = {t["N"]: t[key] for t in table if t["mode"] == mode}
            if vals:
                lines.append(f"| {mode} | {label} | "
                             + " | ".join(f"{vals[n]:.3e}" for n in ns) + " |")
    return "\n".join(lines)


def plot(table, path: Path) -> None:
    """Relative error against N, one style per mode, whiskers from the best to the worst seed."""
    fig, ax = pyplot().subplots(figsize=(6, 4))
    for k, mode in enumerate(MODES):
        sel = [t for t in table if t["mode"] == mode]
        ax.errorbar([t["N"] for t in sel], [t["rel_l2_median"] for t in sel],
                    yerr=[[t["rel_l2_median"] - t["rel_l2_min"] for t in sel],
                          [t["rel_l2_max"] - t["rel_l2_median"] for t in sel]],
                    capsize=3, label=mode, **series_style(k))
    ns = sorted({t["N"] for t in table})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("participants N")
    ax.set_ylabel("relative L2 error vs exact sum (median over seeds)")
    finish(fig, ax, path, dpi=120, kind="measured",
           title="All-Reduce accuracy (INT8 block 64 / FP16 / BF16), measured on the "
                 "bit-exact golden model")


def add_arguments(ap) -> None:
    """The options of ``scin accuracy``."""
    ap.add_argument("--endpoints", type=integer_list(1, 16), default="2,4,8,16", metavar="LIST",
                    help="participant counts, each 1 to 16 (default: %(default)s)")
    ap.add_argument("--seeds", type=integer(1), default=5,
                    help="number of seeds (0..seeds-1), at least 1; default %(default)s")
    ap.add_argument("--tokens", type=integer(1), default=64,
                    help="rows of activations, at least 1; default %(default)s")
    ap.add_argument("--hidden", type=integer(64), default=4096,
                    help="hidden size, a multiple of 64 (the INT8 block); default %(default)s")
    ap.add_argument("--outliers", type=integer(0), default=8,
                    help="outlier channels, at most --hidden; default %(default)s")
    ap.add_argument("--gain", type=real(0), default=50.0,
                    help="outlier channel gain; default %(default)s")
    ap.add_argument("--out", type=out_dir, default=None, metavar="DIR",
                    help="where accuracy.csv/png go (default: out/accuracy/; with --doc: docs/)")
    ap.add_argument("--doc", action="store_true",
                    help="write into the tracked docs/ (docs/accuracy.csv, docs/accuracy.png)")
    ap.add_argument("--no-plot", action="store_true", help="skip accuracy.png")


def run(args) -> int:
    """``scin accuracy``: run the study, write the CSV (and plot), print the table."""
    if args.hidden % 64:
        raise ValueError(f"argument --hidden: must be a multiple of 64, not {args.hidden}")
    if args.outliers > args.hidden:
        raise ValueError(f"argument --outliers: must be at most --hidden ({args.hidden}), "
                         f"not {args.outliers}")
    out = args.out if args.out is not None else DOCS if args.doc else default_out("accuracy")
    rows = study(args.endpoints, args.seeds, args.tokens, args.hidden, args.outliers, args.gain)
    table = summarise(rows)
    with replacing(out / "accuracy.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        for t in table:
            w.writerow({k: (f"{v:.6e}" if isinstance(v, float) else v) for k, v in t.items()})
    if not args.no_plot:
        plot(table, out / "accuracy.png")
    print(f"# data: {args.tokens} x {args.hidden} per participant, "
          f"{args.outliers} outlier channels x{args.gain:g}, "
          f"seeds 0..{args.seeds - 1}; median over seeds")
    print(markdown(table))
    print(f"wrote {out / 'accuracy.csv'}" + ("" if args.no_plot else " and accuracy.png"),
          file=sys.stderr)
    return 0


def main(argv=None) -> int:
    """``python -m scin.scripts.accuracy``: the same as ``scin accuracy``."""
    from .cli import main
    return main(["accuracy", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
