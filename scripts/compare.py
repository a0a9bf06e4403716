"""``scin compare``: SCIN, NVLS and ring collectives measured on the same RTL fabric.

Every point is a simulation of the RTL system under the paper latency model (:mod:`scin.hdl.paper`:
90-cycle one-way hops, 40-cycle memory reads, 256-bit flits at 250 MHz) and every result is
checked bit for bit.
``--op`` picks the collective (NCCL's semantics; ``size`` is NCCL's count in bytes, as
``scin collective`` takes it):

* ``scin-fp16``, ``scin-int8``: the ISA (``scin collective --op OP``), against the golden model;
* ``nvls``: NCCL's NVLS algorithm on the switch's NVLS engine (docs/NVLS.md), FP16, between two
  barriers: All-Reduce, ``ld_reduce`` + ``st`` of each rank's shard with ``--window`` requests in
  flight, with inputs whose FP32 accumulation is exact in any order, so its result is checked
  against the same golden model; ReduceScatter, ``ld_reduce`` of the rank's shard (the same
  inputs and check); AllGather, ``st`` of the rank's shard to the multicast buffer (a copy);
* ``ring`` (All-Reduce only, when ``sim/ring_allreduce.py`` is present): NCCL's ring over
  ordinary switch traffic.

Writes ``compare.csv`` (every operation's rows: a run replaces those of its ``--op`` and keeps
the others; rows from before the ``op`` column are All-Reduce rows), the speedup over NVLS
against size (the form of the paper's Fig. 8) and the latency plots, and a section of
docs/COMPARISON.md: for the All-Reduce ``compare_speedup.png``, ``compare_latency.png`` and the
``compare`` section, for another operation ``compare_<op>_speedup.png``,
``compare_<op>_latency.png`` and the ``compare-<op>`` section. Nothing modelled is mixed in:
every figure is a measured cycle count.
"""

import csv
import time

from ..hdl.paper import CLOCK_MHZ, FLIT_WIDTH, MEM_LATENCY, ONE_WAY_LATENCY
from ..sim.allreduce import CollectiveConfig, parse_size, run_allreduce
from ..sim.toolchain import REPO_ROOT
from .docs_section import current_commit, rewrite_section
from .options import add_out_doc, checked, doc_folder, doc_target, integer, integer_list, size_list
from .outputs import replacing
from .plotting import finish, pyplot, series_style

SECTION = "compare"
#: The tracked document and folder ``scin compare --doc`` writes.
COMPARISON_DOC = REPO_ROOT / "docs" / "COMPARISON.md"
BENCH_FOLDER = REPO_ROOT / "docs" / "bench"
SIZES = ["64B", "1KiB", "4KiB", "16KiB", "64KiB", "256KiB", "1MiB"]
LARGE_SIZES = ["4MiB", "16MiB"]
ALGORITHMS = ("scin-fp16", "scin-int8", "nvls", "ring")
#: The collectives measured (``--op``), by ``scin collective``'s names.
OPS = ("allreduce", "reduce-scatter", "allgather")
#: What NVLS does in each, for the section's first line.
NVLS_WORK = {"allreduce": "ld_reduce + st of each rank's shard",
             "reduce-scatter": "ld_reduce of each rank's shard, written to its output",
             "allgather": "st of each rank's shard to every member"}
CSV_FIELDS = ["op", "algorithm", "dtype", "endpoints", "size", "cycles", "us", "speedup_vs_nvls",
              "window", "entries", "match", "wall_s", "commit"]
#: CSV columns read back as integers and as floats (:func:`read_csv`).
_INT_FIELDS = ("endpoints", "size", "cycles", "window", "entries", "match")
_FLOAT_FIELDS = ("us", "speedup_vs_nvls", "wall_s")
#: The paper's figures (its simulated 8-GPU system, BookSim2 NVLS baseline), for the table.
PAPER = {"small_fp16_8": 1.8, "large_fp16_8": 1.34, "large_int8_8": 2.58, "mid_int8_8": 2.76,
         "large_4": 2.78}


def _have_ring():
    try:
        from ..sim import ring_allreduce  # noqa: F401
    except ImportError:
        return False
    return True


def nvls_hardware(endpoints, sizes, args, op="allreduce"):
    """The system of a sweep's NVLS and ring runs: one build per endpoint count (and, apart from
    the All-Reduce's, one shared by ReduceScatter and AllGather). The memory holds the largest
    message, its flag pages and the ring's staging slots (half a message at most); ReduceScatter
    and AllGather: the ``endpoints`` shards of the multicast buffer, the rank's other buffer and
    the flag page (sim/nvls_collectives.py)."""
    from ..sim.nvls_allreduce import page_up
    from ..sim.nvls_run import NvlsSystem
    if op == "allreduce":
        need = max(sizes) + max(sizes) // 2 + 3 * 4096
    else:
        need = page_up(endpoints * max(sizes)) + page_up(max(sizes)) + 4096
    mem = 1 << (need - 1).bit_length()
    return NvlsSystem(endpoints=endpoints, mem_size=mem, entries=args.entries,
                      entry_bytes=args.entry_bytes, acks=args.entries)


def run_point(point):
    """One ``(algorithm, endpoints, size, window, entries, entry_bytes, sizes, op)`` point (``op``
    may be left off: ``allreduce``): its row."""
    algorithm, n, size, window, entries, entry_bytes, sizes, *rest = point
    op = rest[0] if rest else "allreduce"
    if algorithm.startswith("scin"):
        dtype = algorithm.split("-")[1]
        report = run_allreduce(CollectiveConfig.from_fields(
            op=op, endpoints=n, dtype=dtype, size=size),
                               log=lambda *_: None)
        ok = report["match"] and report["status"] == report["expected_status"]
    else:
        import argparse
        hw = nvls_hardware(n, sizes, argparse.Namespace(entries=entries, entry_bytes=entry_bytes),
                           op)
        dtype = "fp16"
        if algorithm == "nvls" and op != "allreduce":
            from ..sim.nvls_collectives import NvlsCollective, run_nvls_collective
            report = run_nvls_collective(NvlsCollective(op, size, dtype, window), hw,
                                         log=lambda *_: None)
        elif algorithm == "nvls":
            from ..sim.nvls_allreduce import NvlsAllReduce, run_nvls_allreduce
            report = run_nvls_allreduce(NvlsAllReduce(size, dtype, window), hw, log=lambda *_: None)
        else:
            from ..sim.ring_allreduce import RingAllReduce, run_ring_allreduce
            report = run_ring_allreduce(RingAllReduce(size, dtype), hw, log=lambda *_: None)
        ok = report["match"] and report["status"] == 0
    if not ok:
        raise RuntimeError(f"{op} {algorithm} {n} endpoints {size} B: result differs from the "
                           f"golden model or has an error status (run in {report['run_dir']})")
    return {"op": op, "algorithm": algorithm, "dtype": dtype, "endpoints": n, "size": size,
            "cycles": report["cycles"], "us": round(report["cycles"] / CLOCK_MHZ, 3),
            "window": window if algorithm == "nvls" and op != "allgather" else "",
            "entries": entries if algorithm == "nvls" else "",
            "match": int(ok), "wall_s": report["wall_seconds"]}


def _op(row):
    return row.get("op") or "allreduce"


def add_speedups(rows):
    """``speedup_vs_nvls``: NVLS cycles over the row's, at the same operation, endpoints and
    size."""
    nvls = {(_op(r), r["endpoints"], r["size"]): r["cycles"] for r in rows
            if r["algorithm"] == "nvls"}
    for r in rows:
        base = nvls.get((_op(r), r["endpoints"], r["size"]))
        r["speedup_vs_nvls"] = round(base / r["cycles"], 3) if base else ""
    return rows


def read_csv(path):
    """The rows of an existing ``compare.csv``, numbers as numbers (empty cells stay ``""``);
    a row without an ``op`` (from before that column) is an All-Reduce row."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["op"] = _op(r)
        for k, kind in [(k, int) for k in _INT_FIELDS] + [(k, float) for k in _FLOAT_FIELDS]:
            if r.get(k) not in (None, ""):
                r[k] = kind(float(r[k])) if kind is int else kind(r[k])
    return rows


def merge_rows(old, new):
    """The rows of ``compare.csv`` after a run: ``old`` rows of the operations ``new`` does not
    measure, then ``new`` (a run redoes its operation's table whole, as it rewrites its section)."""
    redone = {_op(r) for r in new}
    return [r for r in old if _op(r) not in redone] + new


def write_csv(rows, path):
    with replacing(path) as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in CSV_FIELDS})


def plot_names(op):
    """The speedup and latency plots of ``op``: the All-Reduce keeps the names it always had."""
    stem = "compare" if op == "allreduce" else f"compare_{op.replace('-', '_')}"
    return f"{stem}_speedup.png", f"{stem}_latency.png"


def section_name(op):
    """The section of docs/COMPARISON.md that ``op``'s run rewrites."""
    return SECTION if op == "allreduce" else f"{SECTION}-{op}"


def plot(rows, out, op="allreduce"):
    """The speedup-over-NVLS and latency plots of ``op``; returns their paths."""
    rows = [r for r in rows if _op(r) == op]
    speedup_png, latency_png = plot_names(op)
    paths = []
    for name, key, ylabel, log_y in ((speedup_png, "speedup_vs_nvls", "speedup over NVLS", False),
                                     (latency_png, "us", "latency (us)", True)):
        fig, ax = pyplot().subplots(figsize=(7, 4))
        series = [(alg, n) for alg in ALGORITHMS for n in sorted({r["endpoints"] for r in rows})
                  if not (key == "speedup_vs_nvls" and alg == "nvls")]
        for k, (alg, n) in enumerate(series):
            pts = [(r["size"], r[key]) for r in rows
                   if r["algorithm"] == alg and r["endpoints"] == n and r[key] != ""]
            if pts:
                ax.plot(*zip(*sorted(pts)), label=f"{alg}, N={n}", **series_style(k))
        ax.set_xscale("log", base=2)
        if log_y:
            ax.set_yscale("log")
        else:
            ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        paths.append(finish(fig, ax, out / name, kind="measured",
                            title=f"{op}, measured on the RTL fabric ({ylabel})"))
    return paths


def section(rows, args, elapsed, out_rel):
    op = getattr(args, "op", "allreduce")
    rows = [r for r in rows if _op(r) == op]
    commit = rows[0]["commit"] if rows else current_commit()
    if op == "allgather":
        nvls = (f"NVLS AllGather: {NVLS_WORK[op]} (posted st: at most {args.entries} in flight in "
                f"the switch's ack table)")
    else:
        nvls = (f"NVLS with {args.window} ld_reduces in flight per rank, {args.entries} "
                f"reduction entries of {args.entry_bytes} B per port")
        if op != "allreduce":
            nvls = f"NVLS ReduceScatter ({NVLS_WORK[op]}) with {nvls[len('NVLS with '):]}"
    first = (f"Measured by `{args.command_line}` at commit {commit} in {elapsed:.0f} s: "
             f"paper latency model ({ONE_WAY_LATENCY}-cycle hops, {MEM_LATENCY}-cycle memory), "
             f"{FLIT_WIDTH}-bit flits, {CLOCK_MHZ} MHz; "
             f"{nvls}.")
    if op != "allreduce":
        first += (f" Operation {op}, NCCL's semantics; size is NCCL's count in bytes (16-bit "
                  f"form).")
    # The ring column only where the ring runs (the All-Reduce).
    algs = [a for a in ALGORITHMS if op == "allreduce" or a != "ring"]
    lines = [first + " Every row is one simulation whose result was checked bit for bit.", "",
             "| N | size (B) | " + " | ".join(f"{a} (cycles)" for a in algs) +
             " | scin-fp16 / nvls | scin-int8 / nvls |",
             "| --- | ---: | " + " | ".join("---:" for _ in algs) + " | ---: | ---: |"]
    table = {(r["algorithm"], r["endpoints"], r["size"]): r for r in rows}
    for n in sorted({r["endpoints"] for r in rows}):
        for size in sorted({r["size"] for r in rows if r["endpoints"] == n}):
            cells = [str(table[(a, n, size)]["cycles"]) if (a, n, size) in table else "-"
                     for a in algs]
            sp = [str(table[(a, n, size)]["speedup_vs_nvls"]) if (a, n, size) in table else "-"
                  for a in ("scin-fp16", "scin-int8")]
            lines.append(f"| {n} | {size} | " + " | ".join(cells) + " | " + " | ".join(sp) + " |")
    speedup_png, latency_png = plot_names(op)
    lines += ["", f"![speedup over NVLS]({out_rel}/{speedup_png})",
              f"![latency]({out_rel}/{latency_png})"]
    return "\n".join(lines)


def add_arguments(p):
    p.add_argument("--op", choices=OPS, default="allreduce",
                   help="the collective measured, with NCCL's semantics (default: %(default)s; "
                        "ring runs the All-Reduce only)")
    p.add_argument("--endpoints", type=checked(integer_list(2, 8)), default="4,8", metavar="LIST",
                   help="endpoint counts, 4 or 8 (default: %(default)s)")
    p.add_argument("--sizes", type=checked(size_list(2, even=True)), default=",".join(SIZES),
                   help="message sizes (default: %(default)s)")
    p.add_argument("--large", action="store_true",
                   help=f"also {', '.join(LARGE_SIZES)} (long: minutes per point)")
    p.add_argument("--algorithms", default=None,
                   help=f"what to measure, of {', '.join(ALGORITHMS)} (default: all of them that "
                        f"this tree has for --op; ring needs sim/ring_allreduce.py and "
                        f"--op allreduce)")
    p.add_argument("--window", type=integer(1, 16), default=8,
                   help="NVLS ld_reduces in flight per rank, 1-16 (default: %(default)s)")
    p.add_argument("--entries", type=integer(1), default=128,
                   help="NVLS reduction-table entries (default: %(default)s, more than N x window "
                        "ever uses; the paper's 320 KiB per port would be 320)")
    p.add_argument("--entry-bytes", type=integer(32), default=1024,
                   help="NVLS ld_reduce packet and reduction entry "
                        "(default: %(default)s, the paper's)")
    add_out_doc(p, "compare", BENCH_FOLDER, COMPARISON_DOC)
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
    op = getattr(args, "op", "allreduce")
    if op not in OPS:
        raise ValueError(f"--op: one of {', '.join(OPS)}, not {op!r}")
    algs = ([a for a in args.algorithms.split(",") if a] if args.algorithms else
            [a for a in ALGORITHMS if a != "ring" or (_have_ring() and op == "allreduce")])
    for a in algs:
        if a not in ALGORITHMS:
            raise ValueError(f"--algorithms: one of {', '.join(ALGORITHMS)}, not {a!r}")
    if "ring" in algs and op != "allreduce":
        raise ValueError(f"--algorithms ring: the ring runs the All-Reduce only "
                         f"(sim/ring_allreduce.py), not --op {op}")
    if "ring" in algs and not _have_ring():
        raise ValueError("--algorithms ring: the ring All-Reduce (sim/ring_allreduce.py) is not "
                         "in this tree")
    # INT8 INQ works in blocks of 64 elements (128 B of the 16-bit form): smaller sizes are not
    # an INQ message, and their table cells stay empty.
    # NVLS ReduceScatter and AllGather move whole flits (sim/nvls_collectives.py).
    if op != "allreduce" and "nvls" in algs:
        for s in sizes:
            if s % 32:
                raise ValueError(f"--sizes: NVLS {op} needs whole 32-byte flits, not {s} B")
    return [(a, n, s, args.window, args.entries, args.entry_bytes, tuple(sizes), op)
            for n in ends for s in sizes for a in algs if a != "scin-int8" or s % 128 == 0]


def run(args):
    import sys
    from . import executor
    executor.check_arguments(args)
    pts = points(args)
    if args.dry_run:
        for p in pts:
            print(f"{p[7]:14s} {p[0]:10s} N={p[1]} {p[2]} B")
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
    out = doc_folder(args, "compare", BENCH_FOLDER)
    doc = doc_target(args, "compare", COMPARISON_DOC)
    out.mkdir(parents=True, exist_ok=True)
    old = read_csv(out / "compare.csv") if (out / "compare.csv").exists() else []
    write_csv(merge_rows(old, rows), out / "compare.csv")
    plot(rows, out, args.op)
    out_rel = (out.resolve().relative_to(doc.resolve().parent)
               if out.resolve().is_relative_to(doc.resolve().parent) else out.resolve())
    rewrite_section(doc, section_name(args.op),
                    section(rows, args, time.monotonic() - started, out_rel))
    print(f"wrote {out / 'compare.csv'}, the plots and {doc}")
    return 0


def main(argv=None):
    """``python -m scin.scripts.compare``: the same as ``scin compare``."""
    import sys
    from .cli import main
    return main(["compare", *(sys.argv[1:] if argv is None else argv)])
