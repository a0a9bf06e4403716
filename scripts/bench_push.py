"""Push against pull (`scin bench-push`): where push mode stops paying, and the AUTO threshold.

For every endpoint count, dtype and size, runs the All-Reduce in pull mode and in push mode on the
same simulator build (one build per endpoint count: the ISA has one push resource of
``--push-capacity`` bytes per participant in both modes, so the only difference between a pair is
the descriptor's mode), checks every result bit for bit (and its status against the golden
model's), and writes:

* ``docs/bench/push.csv``: one row per run;
* ``docs/bench/push_latency.png``: latency against size, log-log, pull and push per dtype and N;
* the section between the ``bench-push`` markers of ``docs/PERFORMANCE.md``: the command, commit
  and every parameter, the pull/push table, the crossover per (dtype, N), the AUTO threshold it
  recommends (``IsaParams.push_threshold``) and the push targets.

Sizes are in the 16-bit form as everywhere (``scin allreduce --size``), so an INT8 run moves half
the bytes (plus its block scales); the AUTO threshold compares each participant's actual input
bytes (``push_mode`` in ``hdl/isa/descriptor.py``), so the recommendation is given in those.
"""

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path

from ..hdl.paper import CLOCK_MHZ, FLIT_WIDTH, MEM_LATENCY, ONE_WAY_LATENCY
from ..sim.allreduce import CollectiveConfig, parse_size, run_allreduce
from ..sim.toolchain import REPO_ROOT
from .docs_section import current_commit, rewrite_section
from .options import add_out_doc, doc_folder, doc_target, integer, size as size_type
from .outputs import replacing
from .plotting import finish, pyplot, series_style

SECTION = "bench-push"
#: The tracked document and folder ``scin bench-push --doc`` writes.
PERFORMANCE_DOC = REPO_ROOT / "docs" / "PERFORMANCE.md"
BENCH_FOLDER = REPO_ROOT / "docs" / "bench"
ENDPOINTS = "4,8"
DTYPES = "fp16,int8"
SIZES = "64B,256B,1KiB,4KiB,8KiB,16KiB,32KiB"
MODES = ("pull", "push")
#: The hardware every point shares (the paper's ISA configuration; the latency model's two figures
#: are options).
CAPACITY, OUTSTANDING, FLAG_MODE = 32768, 8, "ordered"
#: The targets for push mode: fp16 All-Reduce on 4 endpoints, size -> at most so many cycles.
TARGETS = ((64, 260), (4096, 400), (16384, 800))
CSV_FIELDS = ["endpoints", "dtype", "size", "push_bytes", "mode", "pushed", "cycles", "latency_us",
              "efficiency", "slots", "stall_data", "match", "status", "seed", "wall_s", "commit"]
_INT_FIELDS = ("endpoints", "size", "push_bytes", "pushed", "cycles", "slots", "stall_data",
               "match", "status", "seed")
_FLOAT_FIELDS = ("latency_us", "efficiency", "wall_s")


def push_bytes(dtype, size):
    """The bytes of each participant's input (what AUTO compares with its threshold): the 16-bit
    form's ``size``, halved for INT8 (its block scales are not counted, as in ``push_mode``)."""
    return size // 2 if dtype == "int8" else size


def _list(text, name):
    items = [s.strip() for s in str(text).split(",") if s.strip()]
    if not items:
        raise ValueError(f"--{name}: give at least one value")
    return items


def _checked_size(text, option, low):
    """``text`` as an even number of bytes of at least ``low``; ValueError naming ``--option``."""
    try:
        return size_type(low, even=True)(text)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"--{option}: {exc}") from None


def points(args):
    """The runs: ``(endpoints, dtype, size, mode, latency, mem_latency, push_capacity, seed)``
    tuples, pull then push for each (N, dtype, size). INT8 sizes that are not whole 64-element
    blocks (multiples of 128 B) are left out (:func:`skipped`); a size whose input does not fit
    in the push space is an error."""
    ends = []
    for x in _list(args.endpoints, "endpoints"):
        try:
            n = int(x)
        except ValueError:
            raise ValueError(f"--endpoints: integers, not {x!r}") from None
        if not 2 <= n <= 8:
            raise ValueError(f"--endpoints: 2 to 8, not {n}")
        ends.append(n)
    dtypes = _list(args.dtypes, "dtypes")
    for d in dtypes:
        if d not in ("fp16", "bf16", "int8"):
            raise ValueError(f"--dtypes: fp16, bf16 or int8, not {d!r}")
    sizes = [_checked_size(s, "sizes", 2) for s in _list(args.sizes, "sizes")]
    cap = _checked_size(args.push_capacity, "push-capacity", 0)
    for d in dtypes:
        for s in sizes:
            if push_bytes(d, s) > cap:
                raise ValueError(f"--sizes: {d} {s} B is {push_bytes(d, s)} B per participant, "
                                 f"more than the {cap} B push space (--push-capacity)")
    return [(n, d, s, m, args.latency, args.mem_latency, cap, args.seed)
            for n in ends for d in dtypes for s in sizes if not (d == "int8" and s % 128)
            for m in MODES]


def skipped(args):
    """The ``(dtype, size)`` pairs :func:`points` leaves out (INT8 below whole blocks)."""
    return [(d, s) for d in _list(args.dtypes, "dtypes")
            for s in (parse_size(x) for x in _list(args.sizes, "sizes"))
            if d == "int8" and s % 128]


def config(point):
    """The :class:`CollectiveConfig` of a point: the same hardware for pull and push."""
    n, dtype, size, mode, latency, mem_latency, cap, seed = point
    return CollectiveConfig.from_fields(
        op="allreduce", endpoints=n, dtype=dtype, size=size, seed=seed, one_way_latency=latency,
        mem_latency=mem_latency, capacity=CAPACITY, outstanding=OUTSTANDING, flag_mode=FLAG_MODE,
        flit_width=FLIT_WIDTH, mode=mode, push_capacity=cap)


def row_from_report(point, report):
    """The CSV row of one run; ``RuntimeError`` if its result is not bit-exact, its status is not
    the golden model's, or it did not run in the mode asked for."""
    n, dtype, size, mode = point[:4]
    what = f"N={n} {dtype} {size} B {mode}"
    if not report["match"]:
        raise RuntimeError(f"{what}: result differs from the golden model "
                           f"(run in {report.get('run_dir')})")
    if report["status"] != report["expected_status"]:
        raise RuntimeError(f"{what}: status {report['status']}, the golden model's is "
                           f"{report['expected_status']} (run in {report.get('run_dir')})")
    if bool(report["pushed"]) != (mode == "push"):
        raise RuntimeError(f"{what}: ran {'pushed' if report['pushed'] else 'pulled'}")
    c = report["counters"]
    return {"endpoints": n, "dtype": dtype, "size": size, "push_bytes": push_bytes(dtype, size),
            "mode": mode, "pushed": int(bool(report["pushed"])), "cycles": report["cycles"],
            "latency_us": round(report["latency_us"], 3),
            "efficiency": round(report["efficiency"], 4), "slots": c["slots"],
            "stall_data": c["stall_data"], "match": 1, "status": report["status"],
            "seed": point[7], "wall_s": report["wall_seconds"]}


def run_point(*point):
    """Run one point (module level, so a Dask worker can import it); its CSV row."""
    return row_from_report(point, run_allreduce(config(point), log=lambda *_: None))


# ---- what the rows say ------------------------------------------------------------------------

def pairs(rows):
    """``{(N, dtype, size): (pull row, push row)}`` for every point measured in both modes."""
    by = {(r["endpoints"], r["dtype"], r["size"], r["mode"]): r for r in rows}
    return {k[:3]: (by[k[:3] + ("pull",)], r) for k, r in by.items()
            if k[3] == "push" and k[:3] + ("pull",) in by}


def crossover(rows, n, dtype):
    """The smallest measured size from which pull is at least as fast as push (at it and every
    larger measured size) for ``(n, dtype)``; None when push is faster at the largest size."""
    sizes = sorted(s for (m, d, s) in pairs(rows) if (m, d) == (n, dtype))
    table = pairs(rows)
    found = None
    for s in reversed(sizes):
        pull, push = table[(n, dtype, s)]
        if pull["cycles"] <= push["cycles"]:
            found = s
        else:
            break
    return found


def threshold(rows, push_capacity):
    """The AUTO threshold the rows support, in bytes per participant (actual input bytes): the
    largest T such that push is strictly faster at every measured point whose input is at most T
    bytes; ``push_capacity`` (the default, ``push_threshold = None``) when push is faster at every
    measured point. Returns ``(T, the points that set it)``: the pull-faster points."""
    slower = [k for k, (pull, push) in pairs(rows).items() if pull["cycles"] <= push["cycles"]]
    if not slower:
        return push_capacity, []
    limit = min(push_bytes(d, s) for (_, d, s) in slower)
    below = [push_bytes(d, s) for (_, d, s) in pairs(rows) if push_bytes(d, s) < limit]
    return (max(below) if below else 0), sorted(slower)


def _size(b):
    return f"{b // 1024} KiB" if b >= 1024 and b % 1024 == 0 else f"{b} B"


def targets(rows):
    """The push targets: ``(size, limit, measured cycles or None, verdict)``."""
    push = {r["size"]: r["cycles"] for r in rows
            if (r["endpoints"], r["dtype"], r["mode"]) == (4, "fp16", "push")}
    out = []
    for size, limit in TARGETS:
        got = push.get(size)
        verdict = "not measured" if got is None else ("met" if got <= limit else "missed")
        out.append((size, limit, got, verdict))
    return out


def section(rows, meta):
    """The body of the ``bench-push`` section. ``meta``: ``command``, ``commit``, ``elapsed``,
    ``latency``, ``mem_latency``, ``push_capacity``, ``seed``, ``skipped``, ``plot``, ``csv``,
    ``jobs``."""
    table = pairs(rows)
    ns = sorted({k[0] for k in table})
    dtypes = sorted({k[1] for k in table}, key=lambda d: ("fp16", "bf16", "int8").index(d))
    cap = meta["push_capacity"]
    skipped = "".join(f" No {d} point at {_size(s)}: INT8 needs whole 64-element blocks "
                      f"(multiples of 128 B in the 16-bit form)." for d, s in meta["skipped"])
    lines = [
        "## Push against pull: the crossover and the AUTO threshold (`scin bench-push`)", "",
        f"Command: `{meta['command']}` (Verilator, commit {meta['commit']}, "
        f"{meta['elapsed']:.0f} s wall for {len(rows)} runs, {meta['jobs']}). All-Reduce, "
        f"seed {meta['seed']}; paper latency model: one-way endpoint-to-switch latency "
        f"{meta['latency']} cycles, endpoint memory read latency {meta['mem_latency']} cycles; ISA "
        f"wave table {CAPACITY // 1024} KiB per participant in {OUTSTANDING} waves, "
        f"{FLAG_MODE.upper()} completion flags, {FLIT_WIDTH}-bit flits at {CLOCK_MHZ} MHz, one "
        f"push resource of {_size(cap)} per participant. Pull and push run on the same simulator "
        f"build per endpoint count (the push space is built for both; only the descriptor's mode "
        f"differs), and every run's result was checked bit for bit against the golden model, "
        f"with its status.{skipped} Rows: `{meta['csv']}`.", "",
        "Latency ([Latency](#latency)): from the cycle the last participant's first packet of "
        "the collective leaves its endpoint (its arrival in pull mode, its first push WRITE in "
        "push mode) to the cycle the last completion flag is seen. Size is the message in its "
        "16-bit form (INT8 moves half the bytes, plus one FP16 scale per 64 elements); "
        "`input` is what each participant pushes or has read, the bytes AUTO compares with "
        "`push_threshold`.", "",
        "| size | input (B) | N | dtype | pull (cycles) | push (cycles) | push / pull | "
        "push saves (cycles) |",
        "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for n in ns:
        for d in dtypes:
            for s in sorted(s for (m, dd, s) in table if (m, dd) == (n, d)):
                pull, push = table[(n, d, s)]
                lines.append(f"| {_size(s)} | {push_bytes(d, s)} | {n} | {d} | {pull['cycles']} | "
                             f"{push['cycles']} | {push['cycles'] / pull['cycles']:.3f} | "
                             f"{pull['cycles'] - push['cycles']} |")
    lines += _crossover_rows(rows, table, ns, dtypes, cap)
    lines += _threshold_lines(rows, table, cap)
    lines += ["", "Push targets (fp16 All-Reduce, N = 4, push mode):", "",
              "| target | measured | verdict |", "| --- | --- | --- |"]
    for size, limit, got, verdict in targets(rows):
        shown = "-" if got is None else f"{got} cycles = {got / CLOCK_MHZ:.2f} us"
        lines.append(f"| {_size(size)} in at most {limit} cycles | {shown} | {verdict} |")
    lines += ["", f"![push and pull latency]({meta['plot']})"]
    return "\n".join(lines)


def _crossover_rows(rows, table, ns, dtypes, cap):
    """The crossover table of :func:`section`: per dtype and endpoint count, the smallest size
    from which pull is at least as fast as push (or why there is none), and push / pull at the
    largest size. ``table``: :func:`pairs` of ``rows``; ``cap``: the push space in bytes."""
    lines = ["", "Crossover (the smallest size from which pull is at least as fast as push):", "",
              "| dtype | N | crossover | push / pull at the largest size |",
              "| --- | ---: | --- | ---: |"]
    for d in dtypes:
        for n in ns:
            sizes = sorted(s for (m, dd, s) in table if (m, dd) == (n, d))
            if not sizes:
                continue
            x = crossover(rows, n, d)
            pull, push = table[(n, d, sizes[-1])]
            if x is not None:
                text = f"{_size(x)} (input {push_bytes(d, x)} B)"
            elif push_bytes(d, sizes[-1]) >= cap:
                text = f"none: push faster at every size up to the {_size(cap)} push space"
            else:
                text = (f"none: push faster at every measured size, up to {_size(sizes[-1])} "
                        f"(an input of {_size(push_bytes(d, sizes[-1]))}; the push space holds "
                        f"{_size(cap)})")
            lines.append(f"| {d} | {n} | {text} | {push['cycles'] / pull['cycles']:.3f} |")
    return lines


def _threshold_lines(rows, table, cap):
    """The AUTO threshold paragraph of :func:`section`, from :func:`threshold` of ``rows``."""
    t, slower = threshold(rows, cap)
    lines = [""]
    if not slower:
        saved = [pull["cycles"] - push["cycles"] for pull, push in table.values()]
        ratio = [push["cycles"] / pull["cycles"] for pull, push in table.values()]
        lines.append(
            f"Push saved {min(saved)} to {max(saved)} cycles per All-Reduce (push / pull "
            f"{min(ratio):.3f} to {max(ratio):.3f}) over the whole sweep.")
        lines.append("")
        lines.append(
            f"**AUTO threshold: {cap} B per participant, the whole push space** "
            f"(`push_threshold = None`, the default, which is `push_capacity`). Push was faster "
            f"than pull at every measured point, so AUTO should push every input that fits. "
            f"(Whether a larger push space keeps pushing ahead is beyond this sweep: an input "
            f"larger than the space cannot be pushed.)")
    else:
        worst = ", ".join(f"N={n} {d} {_size(s)}" for n, d, s in slower)
        lines.append(
            f"**AUTO threshold: {t} B per participant** (`push_threshold = {t}`): the largest "
            f"measured input below every point where pull was at least as fast as push ({worst}); "
            f"AUTO pushes inputs of at most that many bytes and pulls larger ones.")
    return lines


def write_csv(rows, path):
    with replacing(path) as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in CSV_FIELDS})


def read_csv(path):
    """The rows of a ``push.csv``, numbers as numbers."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for k in _INT_FIELDS:
            if r.get(k) not in (None, ""):
                r[k] = int(float(r[k]))
        for k in _FLOAT_FIELDS:
            if r.get(k) not in (None, ""):
                r[k] = float(r[k])
    return rows


def plot(rows, path):
    """Latency (us) against size, log-log: a style of its own per (dtype, N, mode)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = sorted({(r["dtype"], r["endpoints"], r["mode"]) for r in rows})
    for k, (d, n, mode) in enumerate(series):
        pts = sorted((r["size"], r["latency_us"]) for r in rows
                     if (r["dtype"], r["endpoints"], r["mode"]) == (d, n, mode))
        ax.plot(*zip(*pts), label=f"{d}, N={n}, {mode}", **series_style(k))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({r["size"] for r in rows})
    ax.set_xticks(sizes, [_size(s).replace(" ", "") for s in sizes])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("message size (16-bit form; int8 moves half the bytes)")
    ax.set_ylabel(f"latency (us at {CLOCK_MHZ} MHz)")
    return finish(fig, ax, Path(path), title="All-Reduce: push against pull, measured on the RTL",
                  kind="measured", legend_columns=2)


def _commit():
    """The commit, and a note when hdl/ or sim/ differ from it (the figures are then those of the
    working tree)."""
    commit = current_commit()
    try:
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "hdl", "sim"],
                               capture_output=True, text=True, cwd=REPO_ROOT).stdout.strip()
    except OSError:
        dirty = ""
    return commit + (" with uncommitted changes in hdl/ or sim/" if dirty else "")


def add_arguments(p):
    """The options of ``scin bench-push``."""
    p.add_argument("--endpoints", default=ENDPOINTS, help="endpoint counts (default: %(default)s)")
    p.add_argument("--dtypes", default=DTYPES, help="dtypes (default: %(default)s)")
    p.add_argument("--sizes", default=SIZES,
                   help="message sizes in the 16-bit form, as scin allreduce --size (default: "
                        "%(default)s; int8 sizes that are not multiples of 128 B are left out)")
    p.add_argument("--push-capacity", default="32KiB",
                   help="the ISA's push space per participant, for both modes (default: "
                        "%(default)s)")
    p.add_argument("--latency", type=integer(4), default=ONE_WAY_LATENCY,
                   help="one-way latency in cycles, at least 4 (default: %(default)s)")
    p.add_argument("--mem-latency", type=integer(3, 4096), default=MEM_LATENCY,
                   help="memory latency in cycles, 3 to 4096 (default: %(default)s)")
    p.add_argument("--seed", type=integer(0, 2**32 - 1), default=1,
                   help="data seed (default: 1)")
    add_out_doc(p, "bench-push", BENCH_FOLDER, PERFORMANCE_DOC)
    p.add_argument("--dry-run", action="store_true", help="list the points and exit")
    from . import executor
    executor.add_arguments(p, jobs_default=1, what="points")


def run(args):
    """``scin bench-push``: run every point, then write the CSV, the plot and the section."""
    from . import executor
    executor.check_arguments(args)
    pts = points(args)
    out = doc_folder(args, "bench-push", BENCH_FOLDER)
    if args.dry_run:
        for p in pts:
            print(f"N={p[0]} {p[1]:5s} {p[2]:>6d} B {p[3]}")
        return 0
    commit = _commit()
    rows, failures = [None] * len(pts), []
    started = time.monotonic()
    progress = executor.Progress(len(pts), "scin bench-push")
    err = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731

    def done(k, point, row):
        row["commit"] = commit.split()[0]
        rows[k] = row
        progress.log(err, f"[{k + 1}/{len(pts)}] N={point[0]} {point[1]} {point[2]} B "
                          f"{point[3]}: {row['cycles']} cycles ({row['wall_s']:.1f} s; "
                          f"{time.monotonic() - started:.0f} s so far)")

    def failed(k, point, exc):
        failures.append(f"N={point[0]} {point[1]} {point[2]} B {point[3]}: {exc}")
        progress.log(err, f"[{k + 1}/{len(pts)}] FAILED N={point[0]} {point[1]} {point[2]} B "
                          f"{point[3]}: {type(exc).__name__}: {exc}")

    executor.run_points(run_point, pts, args, done, failed, label="bench-push", progress=progress)
    if failures:
        err(f"{len(failures)} of {len(pts)} point(s) failed, nothing written")
        return 1
    elapsed = time.monotonic() - started
    doc = doc_target(args, "bench-push", PERFORMANCE_DOC)
    write_csv(rows, out / "push.csv")
    plot(rows, out / "push_latency.png")
    rel = lambda p: (p.resolve().relative_to(doc.resolve().parent)  # noqa: E731
                     if p.resolve().is_relative_to(doc.resolve().parent) else p.resolve())
    try:
        csv_name = (out / "push.csv").resolve().relative_to(REPO_ROOT)
    except ValueError:
        csv_name = (out / "push.csv").resolve()
    meta = dict(command=" ".join(["scin bench-push", *getattr(args, "argv", [])]), commit=commit,
                elapsed=elapsed, latency=args.latency, mem_latency=args.mem_latency,
                push_capacity=parse_size(args.push_capacity), seed=args.seed,
                skipped=skipped(args), plot=rel(out / "push_latency.png"), csv=csv_name,
                jobs=executor.describe(args))
    body = section(rows, meta)
    rewrite_section(doc, SECTION, body)
    print(body)
    print(f"wrote {out / 'push.csv'}, {out / 'push_latency.png'} and {doc}")
    return 0


def main(argv=None):
    """``python -m scin.scripts.bench_push``: the same as ``scin bench-push``."""
    from .cli import main
    return main(["bench-push", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
