"""``scin compare``: SCIN, NVLS and ring All-Reduce measured on the same RTL fabric.

Every point is a simulation of the RTL system under the paper latency model (90-cycle one-way
hops, 40-cycle memory reads, 256-bit flits at 250 MHz) and every result is checked bit for bit:

* ``scin-fp16``, ``scin-int8``: the ISA's pull All-Reduce (``scin allreduce``), against the
  golden model;
* ``nvls``: NCCL's NVLS All-Reduce on the switch's NVLS engine (docs/NVLS.md: barrier,
  ``ld_reduce`` + ``st`` of each rank's shard with ``--window`` requests in flight, barrier),
  FP16, with inputs whose FP32 accumulation is exact in any order, so its result is checked
  against the same golden model;
* ``ring`` (when ``sim/ring_allreduce.py`` is present): NCCL's ring over ordinary switch traffic.

Writes ``compare.csv``, ``compare_speedup.png`` (speedup over NVLS against size, the form of the
paper's Fig. 8), ``compare_latency.png``, and the ``compare`` section of docs/COMPARISON.md.
Nothing modelled is mixed in: every figure is a measured cycle count.
"""

import csv
import statistics
import time
from pathlib import Path

from ..sim.allreduce import AllReduceConfig, CLOCK_MHZ, parse_size, run_allreduce
from ..sim.toolchain import REPO_ROOT
from .docs_section import current_commit, rewrite_section

SECTION = "compare"
SIZES = ["64B", "1KiB", "4KiB", "16KiB", "64KiB", "256KiB", "1MiB"]
LARGE_SIZES = ["4MiB", "16MiB"]
ALGORITHMS = ("scin-fp16", "scin-int8", "nvls", "ring")
CSV_FIELDS = ["algorithm", "dtype", "endpoints", "size", "cycles", "us", "speedup_vs_nvls",
              "window", "entries", "match", "wall_s", "commit"]
#: The paper's figures (its simulated 8-GPU system, BookSim2 NVLS baseline), for the table.
PAPER = {"small_fp16_8": 1.8, "large_fp16_8": 1.34, "large_int8_8": 2.58, "mid_int8_8": 2.76,
         "large_4": 2.78}


def _have_ring():
    try:
        from ..sim import ring_allreduce  # noqa: F401
    except ImportError:
        return False
    return True


def nvls_hardware(endpoints, sizes, args):
    """The system of a sweep's NVLS and ring runs: one build per endpoint count. The memory holds
    the largest message, its flag pages and the ring's staging slots (half a message at most)."""
    from ..sim.nvls_run import NvlsSystem
    need = max(sizes) + max(sizes) // 2 + 3 * 4096
    mem = 1 << (need - 1).bit_length()
    return NvlsSystem(endpoints=endpoints, mem_size=mem, entries=args.entries,
                      entry_bytes=args.entry_bytes, acks=args.entries)


def run_point(point):
    """One ``(algorithm, endpoints, size, window, entries, entry_bytes, sizes)`` point: its row."""
    algorithm, n, size, window, entries, entry_bytes, sizes = point
    if algorithm.startswith("scin"):
        dtype = algorithm.split("-")[1]
        report = run_allreduce(AllReduceConfig(endpoints=n, dtype=dtype, size=size),
                               log=lambda *_: None)
        ok = report["match"] and report["status"] == report["expected_status"]
    else:
        import argparse
        hw = nvls_hardware(n, sizes, argparse.Namespace(entries=entries, entry_bytes=entry_bytes))
        dtype = "fp16"
        if algorithm == "nvls":
            from ..sim.nvls_allreduce import NvlsAllReduce, run_nvls_allreduce
            report = run_nvls_allreduce(NvlsAllReduce(size, dtype, window), hw, log=lambda *_: None)
        else:
            from ..sim.ring_allreduce import RingAllReduce, run_ring_allreduce
            report = run_ring_allreduce(RingAllReduce(size, dtype), hw, log=lambda *_: None)
        ok = report["match"] and report["status"] == 0
    if not ok:
        raise RuntimeError(f"{algorithm} {n} endpoints {size} B: result differs from the golden "
                           f"model or has an error status (run in {report['run_dir']})")
    return {"algorithm": algorithm, "dtype": dtype, "endpoints": n, "size": size,
            "cycles": report["cycles"], "us": round(report["cycles"] / CLOCK_MHZ, 3),
            "window": window if algorithm == "nvls" else "",
            "entries": entries if algorithm == "nvls" else "",
            "match": int(ok), "wall_s": report["wall_seconds"]}


def add_speedups(rows):
    """``speedup_vs_nvls``: NVLS cycles over the row's, at the same endpoints and size."""
    nvls = {(r["endpoints"], r["size"]): r["cycles"] for r in rows if r["algorithm"] == "nvls"}
    for r in rows:
        base = nvls.get((r["endpoints"], r["size"]))
        r["speedup_vs_nvls"] = round(base / r["cycles"], 3) if base else ""
    return rows


def write_csv(rows, path):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in CSV_FIELDS})


def plot(rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = []
    for name, key, ylabel, log_y in (("compare_speedup.png", "speedup_vs_nvls", "speedup over NVLS", False),
                                     ("compare_latency.png", "us", "latency (us)", True)):
        fig, ax = plt.subplots(figsize=(7, 4))
        for alg in ALGORITHMS:
            for n in sorted({r["endpoints"] for r in rows}):
                pts = [(r["size"], r[key]) for r in rows
                       if r["algorithm"] == alg and r["endpoints"] == n and r[key] != ""]
                if pts and not (key == "speedup_vs_nvls" and alg == "nvls"):
                    xs, ys = zip(*sorted(pts))
                    ax.plot(xs, ys, marker="o", label=f"{alg}, N={n}")
        ax.set_xscale("log", base=2)
        if log_y:
            ax.set_yscale("log")
        else:
            ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"measured on the RTL fabric ({ylabel})")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        paths.append(out / name)
    return paths


def section(rows, args, elapsed, out_rel):
    commit = rows[0]["commit"] if rows else current_commit()
    lines = [f"Measured by `{args.command_line}` at commit {commit} in {elapsed:.0f} s: "
             f"paper latency model (90-cycle hops, 40-cycle memory), 256-bit flits, 250 MHz; "
             f"NVLS with {args.window} ld_reduces in flight per rank, {args.entries} reduction "
             f"entries of {args.entry_bytes} B per port. Every row is one simulation whose result "
             f"was checked bit for bit.", "",
             "| N | size (B) | " + " | ".join(f"{a} (cycles)" for a in ALGORITHMS) +
             " | scin-fp16 / nvls | scin-int8 / nvls |",
             "| --- | ---: | " + " | ".join("---:" for _ in ALGORITHMS) + " | ---: | ---: |"]
    table = {(r["algorithm"], r["endpoints"], r["size"]): r for r in rows}
    for n in sorted({r["endpoints"] for r in rows}):
        for size in sorted({r["size"] for r in rows if r["endpoints"] == n}):
            cells = [str(table[(a, n, size)]["cycles"]) if (a, n, size) in table else "-"
                     for a in ALGORITHMS]
            sp = [str(table[(a, n, size)]["speedup_vs_nvls"]) if (a, n, size) in table else "-"
                  for a in ("scin-fp16", "scin-int8")]
            lines.append(f"| {n} | {size} | " + " | ".join(cells) + " | " + " | ".join(sp) + " |")
    lines += ["", f"![speedup over NVLS]({out_rel}/compare_speedup.png)",
              f"![latency]({out_rel}/compare_latency.png)"]
    return "\n".join(lines)


def add_arguments(p):
    p.add_argument("--endpoints", default="4,8", help="endpoint counts (default: %(default)s)")
    p.add_argument("--sizes", default=",".join(SIZES), help="message sizes (default: %(default)s)")
    p.add_argument("--large", action="store_true",
                   help=f"also {', '.join(LARGE_SIZES)} (long: minutes per point)")
    p.add_argument("--algorithms", default=None,
                   help=f"what to measure, of {', '.join(ALGORITHMS)} (default: all of them that "
                        f"this tree has; ring needs sim/ring_allreduce.py)")
    p.add_argument("--window", type=int, default=8,
                   help="NVLS ld_reduces in flight per rank, 1-16 (default: %(default)s)")
    p.add_argument("--entries", type=int, default=128,
                   help="NVLS reduction-table entries (default: %(default)s, more than N x window "
                        "ever uses; the paper's 320 KiB per port would be 320)")
    p.add_argument("--entry-bytes", type=int, default=1024,
                   help="NVLS ld_reduce packet and reduction entry (default: %(default)s, the paper's)")
    p.add_argument("--out", default=str(REPO_ROOT / "docs" / "bench"),
                   help="directory of the CSV and plots (default: docs/bench)")
    p.add_argument("--doc", default=str(REPO_ROOT / "docs" / "COMPARISON.md"),
                   help="document whose 'compare' section is rewritten (default: docs/COMPARISON.md)")
    p.add_argument("--dry-run", action="store_true", help="list the points and exit")
    from . import executor
    executor.add_arguments(p, jobs_default=1, what="points")


def points(args):
    ends = [int(x) for x in args.endpoints.split(",") if x]
    for n in ends:
        if n not in (4, 8):
            raise ValueError(f"--endpoints: 4 or 8, not {n}")
    sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    if args.large:
        sizes += [parse_size(s) for s in LARGE_SIZES]
    algs = ([a for a in args.algorithms.split(",") if a] if args.algorithms else
            [a for a in ALGORITHMS if a != "ring" or _have_ring()])
    for a in algs:
        if a not in ALGORITHMS:
            raise ValueError(f"--algorithms: one of {', '.join(ALGORITHMS)}, not {a!r}")
    if "ring" in algs and not _have_ring():
        raise ValueError("--algorithms ring: the ring All-Reduce (sim/ring_allreduce.py) is not "
                         "in this tree")
    if not 1 <= args.window <= 16:
        raise ValueError(f"--window: 1 to 16, not {args.window}")
    # INT8 INQ works in blocks of 64 elements (128 B of the 16-bit form): smaller sizes are not
    # an INQ message, and their table cells stay empty.
    return [(a, n, s, args.window, args.entries, args.entry_bytes, tuple(sizes))
            for n in ends for s in sizes for a in algs if a != "scin-int8" or s % 128 == 0]


def run(args):
    import sys
    from . import executor
    executor.check_arguments(args)
    pts = points(args)
    if args.dry_run:
        for p in pts:
            print(f"{p[0]:10s} N={p[1]} {p[2]} B")
        return 0
    args.command_line = " ".join(["scin compare", *getattr(args, "argv", [])])
    commit = current_commit()
    rows, failures = [None] * len(pts), []
    started = time.monotonic()
    progress = executor.Progress(len(pts), "scin compare")

    def done(k, point, row):
        point = point[0]
        row["commit"] = commit
        rows[k] = row
        progress.log(print, f"[{k + 1}/{len(pts)}] {point[0]:9s} N={point[1]} {point[2]:>9d} B: "
                            f"{row['cycles']} cycles ({row['wall_s']:.1f} s; "
                            f"{time.monotonic() - started:.0f} s so far)")

    def failed(k, point, exc):
        point = point[0]
        failures.append(f"{point[:3]}: {exc}")
        progress.log(print, f"[{k + 1}/{len(pts)}] FAILED {point[:3]}: {type(exc).__name__}: {exc}")

    executor.run_points(run_point, [(p,) for p in pts], args, done, failed, label="compare",
                        progress=progress)
    if failures:
        print(f"{len(failures)} of {len(pts)} point(s) failed, nothing written", file=sys.stderr)
        return 1
    add_speedups(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "compare.csv")
    plot(rows, out)
    doc = Path(args.doc)
    out_rel = (out.resolve().relative_to(doc.resolve().parent)
               if out.resolve().is_relative_to(doc.resolve().parent) else out.resolve())
    rewrite_section(doc, SECTION, section(rows, args, time.monotonic() - started, out_rel))
    print(f"wrote {out / 'compare.csv'}, the plots and {doc}")
    return 0


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(prog="scin compare", description=__doc__)
    add_arguments(p)
    return run(p.parse_args(argv))
