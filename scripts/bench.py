"""Sweep the simulated system: size, dtype, outstanding waves, wave-table capacity, endpoints.

``scin bench`` runs ``scin allreduce`` configurations on Verilator under the paper latency model,
one progress line per run, and writes:

* ``bench.csv``: one row per run (every parameter and every counter);
* ``latency.png`` (latency against size, log-log), ``efficiency.png`` (efficiency against size,
  with the link limit (128/129 at 256-bit flits) and the paper's 92.4% drawn in), ``waves.png``
  (efficiency against outstanding waves, the paper's wave-regulation experiment) and
  ``speedup.png`` (measured SCIN against modelled NVLS and ring All-Reduce,
  :mod:`scin.sim.models`);
* a section of ``docs/PERFORMANCE.md`` between the ``bench`` markers: the table, the plots, the
  commit and every parameter.

Each distinct hardware configuration (endpoints, capacity, waves) is one Verilator build, cached
after its first use; the first sweep therefore spends much of its time compiling.
"""

import csv
import dataclasses
import statistics
import sys
import time

from ..hdl.paper import CLOCK_MHZ, LinkModel
from ..sim.allreduce import CollectiveConfig, parse_size, run_allreduce, ROOTED_OPS
from ..sim.models import PACKET_BYTES, nvls_cycles, ring_cycles
from ..sim.toolchain import REPO_ROOT
from .docs_section import current_commit, rewrite_section
from .options import (add_out_doc, checked, choice_list, doc_folder, doc_target, integer,
                      integer_list, size, size_list)
from .outputs import replacing
from .plotting import finish, pyplot, series_style

SECTION, HOPS_SECTION = "bench", "op-hops"
#: The tracked document and folder ``scin bench --doc`` writes.
PERFORMANCE_DOC = REPO_ROOT / "docs" / "PERFORMANCE.md"
BENCH_FOLDER = REPO_ROOT / "docs" / "bench"
SIZES = ["64B", "256B", "1KiB", "4KiB", "16KiB", "64KiB", "256KiB", "1MiB"]
LARGE_SIZES = ["4MiB", "16MiB"]
PAPER_EFFICIENCY = 0.924
PARTS = ("size", "waves", "capacity", "endpoints", "op", "trains")
#: The option that sets the configurations of each part (named in a refusal).
PART_OPTIONS = {"size": "--sizes", "waves": "--waves", "capacity": "--capacities",
                "endpoints": "--endpoints", "op": "--ops", "trains": "--train-configs"}
#: The op sweep's cases: an operation, ``:in-place`` for NCCL's in-place layout.
OP_CASES = ["allreduce", "reduce-scatter", "reduce-scatter:in-place", "allgather",
            "allgather:in-place", "allgather:in-place:pairs", "broadcast", "reduce", "barrier"]
OP_SIZES = ["64B", "4KiB", "64KiB", "1MiB"]
#: The trains sweep's hardware: wave table per participant / outstanding waves / slots per
#: READ_WAVE and per acknowledged write (1: the paper's per-slot protocol), and its points.
TRAIN_CONFIGS = ["32KiB/8/1", "32KiB/2/4", "64KiB/2/8"]
TRAIN_POINTS = ["fp16:1MiB", "fp16:16MiB", "int8:16MiB"]
CSV_FIELDS = ["part", "op", "in_place", "root", "dtype", "size", "endpoints", "capacity", "waves",
              "trains", "gather_pairs", "seed", "cycles", "us", "bound_cycles", "efficiency",
              "wall_s", "sim_cps", "commit"]
ROW_KEY = ("part", "op", "in_place", "dtype", "size", "endpoints", "capacity", "waves", "trains",
           "gather_pairs")


def _sizes(text):
    return [parse_size(s) for s in text.split(",") if s]


def _ints(text):
    try:
        return [int(s) for s in text.split(",") if s]
    except ValueError:
        raise ValueError(f"expected comma-separated integers, not {text!r}") from None


def plan(args):
    """The list of runs: dicts of CollectiveConfig fields plus the sweep ``part`` they belong to."""
    runs = []
    sizes = _sizes(args.sizes) + (_sizes(",".join(LARGE_SIZES)) if args.large else [])
    base = dict(capacity=parse_size(args.capacity), outstanding=args.default_waves)
    if "size" in args.parts:
        for dtype in args.dtypes.split(","):
            for size in sizes:
                if dtype == "int8" and size % 128:
                    continue  # int8 needs whole 64-element blocks
                runs.append(dict(part="size", dtype=dtype, size=size, endpoints=4, **base))
    if "waves" in args.parts:
        for waves in _ints(args.waves):
            runs.append(dict(part="waves", dtype="fp16", size=parse_size(args.waves_size),
                             endpoints=4, capacity=parse_size(args.waves_capacity),
                             outstanding=waves))
    if "capacity" in args.parts:
        for cap in _sizes(args.capacities):
            slots = cap // 4096
            runs.append(dict(part="capacity", dtype="fp16", size=parse_size(args.waves_size),
                             endpoints=4, capacity=cap, outstanding=min(args.default_waves, slots)))
    if "endpoints" in args.parts:
        for n in _ints(args.endpoints):
            for size in sizes:
                runs.append(dict(part="endpoints", dtype="fp16", size=size, endpoints=n, **base))
    if "op" in args.parts:
        for op, in_place, pairs in op_cases(args.ops):
            root = _root(args, op)
            for size in (_sizes(args.op_sizes)[:1] if op == "barrier" else _sizes(args.op_sizes)):
                runs.append(dict(part="op", op=op, in_place=in_place, root=root, dtype="fp16",
                                 size=size, endpoints=4, gather_pairs=pairs, **base))
    if "trains" in args.parts:
        for capacity, waves, trains in train_configs(args.train_configs):
            for dtype, size in train_points(args.train_points):
                runs.append(dict(part="trains", dtype=dtype, size=size, endpoints=4,
                                 capacity=capacity, outstanding=waves, trains=trains))
    return runs


def train_configs(text):
    """``"32KiB/2/4,..."`` -> ``[(32768, 2, 4), ...]``: table capacity, waves, trains."""
    out = []
    for item in (s for s in text.split(",") if s):
        parts = item.split("/")
        try:
            if len(parts) != 3:
                raise ValueError
            out.append((parse_size(parts[0]), int(parts[1]), int(parts[2])))
        except ValueError:
            raise ValueError(f"--train-configs: {item!r} is not CAPACITY/WAVES/TRAINS "
                             f"(such as 32KiB/2/4)") from None
    return out


def train_points(text):
    """``"fp16:1MiB,int8:16MiB"`` -> ``[("fp16", 1048576), ("int8", 16777216)]``."""
    out = []
    for item in (s for s in text.split(",") if s):
        dtype, _, size = item.partition(":")
        if dtype not in ("fp16", "bf16", "int8") or not size:
            raise ValueError(f"--train-points: {item!r} is not DTYPE:SIZE with DTYPE fp16, bf16 "
                             f"or int8 (such as int8:16MiB)")
        out.append((dtype, parse_size(size)))
    return out


def _root(args, op):
    """The root of an op sweep case: ``--root`` where the operation has one."""
    return args.root if op in ROOTED_OPS else 0


def op_cases(text):
    """``"allgather:in-place:pairs,reduce"`` -> ``[("allgather", True, True), ("reduce", False,
    False)]``: the operation, in place, and the ISA built with ``gather_pairs`` (``:pairs``, for
    an in-place AllGather only)."""
    from ..sim.allreduce import OPS
    cases = []
    for item in (s for s in text.split(",") if s):
        op, _, variant = item.partition(":")
        if (op not in OPS or variant not in ("", "in-place", "in-place:pairs")
                or (op == "barrier" and variant)
                or (variant == "in-place:pairs" and op != "allgather")):
            raise ValueError(f"--ops: {item!r} is not an operation ({', '.join(OPS)}) with an "
                             f"optional ':in-place' (allgather: or ':in-place:pairs')")
        cases.append((op, variant != "", variant == "in-place:pairs"))
    return cases


def flit_bytes(cfg):
    """Bytes per flit of the fabric a :class:`CollectiveConfig` configures."""
    from ..hdl.packet import FabricParams
    return FabricParams.default_for(flit_width=cfg.hw.flit_width, ports=cfg.endpoints).flit_bytes


def efficiency(cfg, cycles):
    """The efficiency of a collective of ``cfg`` that took ``cycles``: its one-link bound
    (``cfg.bound_bytes``, 16-bit form: an All-Reduce's size) over what the link moves in that
    time, one flit of the configured width per cycle; None for a barrier (it moves no data)."""
    return cfg.bound_bytes / (cycles * flit_bytes(cfg)) if cfg.bound_bytes else None


def link_model(cfg):
    """The :class:`LinkModel` of the modelled NVLS and ring figures for runs like ``cfg``: the
    same latencies and flit width as the measured system."""
    return LinkModel(one_way_latency=cfg.hw.one_way_latency, mem_latency=cfg.hw.mem_latency,
                     flit_bytes=flit_bytes(cfg))


def link_limit(link):
    """The highest efficiency a link can reach: of every 4 KiB packet's 1 header + P payload flits,
    P carry data (P = 128 at 32-byte flits). Returns ``(P, P / (P + 1))``."""
    payload = PACKET_BYTES // link.flit_bytes
    return payload, payload / (payload + 1)


def read_csv(path):
    """The rows of an existing ``bench.csv``, with numbers as numbers (rows from before the op
    axis are All-Reduces): :func:`scin.sim.bench_csv.read_bench_csv`, which the calibration
    reads them with too."""
    from ..sim.bench_csv import read_bench_csv
    return read_bench_csv(path)


def merge_rows(old, new):
    """``old`` rows that ``new`` does not redo (same part, dtype, size, endpoints, table, waves),
    then ``new``; in the order of the parts."""
    redone = {tuple(r[k] for k in ROW_KEY) for r in new}
    kept = [r for r in old if tuple(r.get(k) for k in ROW_KEY) not in redone]
    return sorted(kept + new, key=lambda r: PARTS.index(r["part"]))


def run_point(run, seeds, commit):
    """One configuration of the sweep over ``seeds`` seeds: its CSV row (medians). Runs on any
    executor (scripts/executor.py); raises ``RuntimeError`` on a wrong result."""
    part = run["part"]
    fields = {key: value for key, value in run.items() if key != "part"}
    cfg = CollectiveConfig.from_fields(**fields)
    reports = []
    for seed in range(1, seeds + 1):
        report = run_allreduce(dataclasses.replace(cfg, seed=seed), log=lambda *_: None)
        if not report["match"] or report["status"] != report["expected_status"]:
            raise RuntimeError(f"{fields} seed {seed}: result differs from the golden model or "
                               f"has an unexpected status (run in {report['run_dir']})")
        reports.append(report)
    cycles = statistics.median(r["cycles"] for r in reports)
    eff = efficiency(cfg, cycles)
    row = {"part": part, "op": cfg.op, "in_place": int(cfg.in_place), "root": cfg.root,
           "dtype": run["dtype"], "size": run["size"], "endpoints": run["endpoints"],
           "capacity": run["capacity"], "waves": run["outstanding"], "trains": cfg.hw.trains,
           "gather_pairs": int(cfg.hw.gather_pairs),
           "seed": seeds,
           "cycles": cycles, "us": round(cycles / CLOCK_MHZ, 3),
           "bound_cycles": cfg.bound_bytes / flit_bytes(cfg),
           "efficiency": None if eff is None else round(eff, 4),
           "wall_s": round(statistics.median(r["wall_seconds"] for r in reports), 1),
           "sim_cps": reports[0].get("sim_cycles_per_second"),
           "commit": commit}
    row.update({f"c_{name}": value for name, value in reports[0]["counters"].items()})
    return row


def run_all(runs, seeds, log=print, where=None):
    """Run every configuration over ``seeds`` seeds on the executor ``where`` (the options of
    :func:`scin.scripts.executor.add_arguments`; default: one after the other, here); return one
    row per configuration (medians), in the order of ``runs`` whatever finished first.

    A configuration that fails is reported at once and the others still run; then
    ``RuntimeError`` names every failed one."""
    import argparse
    from . import executor
    where = where or argparse.Namespace(jobs=1, scheduler=None, cluster=None, cluster_option=[])
    rows, failures = [None] * len(runs), []
    commit = current_commit()
    started = time.monotonic()
    progress = executor.Progress(len(runs), "scin bench")

    def done(k, point, row):
        run = point[0]
        rows[k] = row
        part, cycles, eff = run["part"], row["cycles"], row["efficiency"]
        what = (f" {case_name(row)}" if part == "op"
                else f" trains of {row['trains']}" if part == "trains" else "")
        progress.log(log, f"[{k + 1}/{len(runs)}] {part:9s}{what} {run['dtype']} "
                     f"{run['size']:>9d} B, {run['endpoints']} endpoints, {run['outstanding']} "
                     f"waves / {run['capacity'] // 1024} KiB: {cycles:.0f} cycles, efficiency "
                     f"{'-' if eff is None else format(eff, '.3f')} ({row['wall_s']:.1f} s; "
                     f"{time.monotonic() - started:.0f} s so far)")

    def failed(k, point, exc):
        failures.append(f"[{k + 1}/{len(runs)}] {type(exc).__name__}: {exc}")
        progress.log(log, f"[{k + 1}/{len(runs)}] FAILED {point[0]}: {type(exc).__name__}: {exc}")

    executor.run_points(run_point, [(run, seeds, commit) for run in runs], where, done, failed,
                        label="bench", progress=progress)
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(runs)} point(s) failed, nothing written: "
                           + "; ".join(failures))
    return rows


def case_name(row):
    """An op row's case as ``--ops`` spells it (``allgather:in-place``), with its root."""
    name = (row["op"] + (":in-place" if row.get("in_place") else "")
            + (":pairs" if row.get("gather_pairs") else ""))
    return name + (f" (root {row['root']})" if row["op"] in ROOTED_OPS else "")


def write_csv(rows, path):
    fields = CSV_FIELDS + sorted({k for r in rows for k in r} - set(CSV_FIELDS))
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows, out, link):
    """Write the PNG plots; return their file names."""
    payload, limit = link_limit(link)
    limits = [(limit, {"color": "k", "ls": "--"}, f"link limit {payload}/{payload + 1}")]
    size_rows = [r for r in rows if r["part"] in ("size", "endpoints")]
    written = []

    def figure(name, ylabel, series, title, ylog=False, hlines=(), xlabel="message size (bytes)"):
        """One plot of ``series`` (``[(label, xs, ys)]``) with ``hlines`` beside them."""
        fig, ax = pyplot().subplots(figsize=(6.4, 4.2))
        for k, (label, xs, ys) in enumerate(series):
            ax.plot(xs, ys, label=label, **series_style(k))
        for y, style, label in hlines:
            ax.axhline(y, lw=0.8, label=label, **style)
        ax.set_xscale("log", base=2)
        if ylog:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        finish(fig, ax, out / name, title=title, kind="measured")
        written.append(name)

    by_size = _series_by_size(size_rows)
    if size_rows:
        figure("latency.png", f"latency (us at {CLOCK_MHZ} MHz)", by_size("us"),
               "SCIN All-Reduce latency, measured on the RTL", ylog=True,
               xlabel="message size (bytes, 16-bit form)")
        figure("efficiency.png", "efficiency (16-bit size / time x link)",
               by_size("efficiency"), "SCIN All-Reduce efficiency, measured on the RTL",
               xlabel="message size (bytes, 16-bit form)",
               hlines=limits + [(PAPER_EFFICIENCY, {"color": "r", "ls": ":"},
                                 "paper prototype 92.4%")])
    wave_rows = sorted((r for r in rows if r["part"] == "waves"), key=lambda r: r["waves"])
    if wave_rows:
        label = (f"fp16 {wave_rows[0]['size'] // 1024} KiB, "
                 f"table {wave_rows[0]['capacity'] // 1024} KiB")
        figure("waves.png", "efficiency", [(label, [r["waves"] for r in wave_rows],
                                            [r["efficiency"] for r in wave_rows])],
               "SCIN efficiency against outstanding waves, measured on the RTL", hlines=limits,
               xlabel="outstanding waves k")
    speedups = _speedup_series([r for r in size_rows if r["dtype"] == "fp16"], link)
    if speedups:
        figure("speedup.png", "speedup of measured SCIN fp16", speedups,
               "Speedup of SCIN (measured on the RTL) over NVLS and ring (modelled)",
               hlines=[(1, {"color": "k"}, None)])
    return written


def _series_by_size(size_rows):
    """A function of a column giving ``[(label, sizes, values)]``, one per (dtype, N)."""
    series = sorted({(r["dtype"], r["endpoints"]) for r in size_rows})

    def by_size(key):
        out = []
        for dtype, n in series:
            pts = sorted((r["size"], r[key]) for r in size_rows
                         if r["dtype"] == dtype and r["endpoints"] == n)
            out.append((f"SCIN {dtype}, {n} endpoints", [p[0] for p in pts], [p[1] for p in pts]))
        return out
    return by_size


def _speedup_series(fp16, link):
    """Measured fp16 cycles against the NVLS and ring models: ``[(label, sizes, speedups)]``."""
    out = []
    for n in sorted({r["endpoints"] for r in fp16}):
        pts = sorted((r["size"], r["cycles"]) for r in fp16 if r["endpoints"] == n)
        xs = [p[0] for p in pts]
        out.append((f"over NVLS (modelled), N={n}", xs,
                    [nvls_cycles(s, n, link) / c for s, c in pts]))
        out.append((f"over ring (modelled), N={n}", xs,
                    [ring_cycles(s, n, link) / c for s, c in pts]))
    return out


def section(rows, plots, args, elapsed, link, out_rel):
    commits = sorted({str(r.get("commit", "unknown")) for r in rows})
    merged = (" Rows of earlier runs were kept (`--merge`); each row's commit is in bench.csv."
              if args.merge else "")
    lines = ["## Sweep (`scin bench`)", "",
             f"Command: `scin bench {' '.join(args.argv)}` (Verilator, "
             f"commit(s) {', '.join(commits)}, "
             f"{elapsed:.0f} s for this run, {args.seeds} seed(s) per point, median).{merged} "
             f"One-way latency "
             f"{link.one_way_latency} cycles, memory read latency {link.mem_latency} cycles, "
             f"{8 * link.flit_bytes}-bit flits at {CLOCK_MHZ} MHz, ORDERED flags. "
             f"Efficiency = size / "
             f"(cycles x {link.flit_bytes} B), size in its 16-bit form. "
             f"NVLS and ring figures are **modelled** "
             "(`scin.sim.models`, same link parameters); SCIN figures are **measured**.", "",
             "| part | dtype | size | endpoints | table | waves | cycles | us | efficiency | "
             "NVLS model (cycles) | ring model (cycles) | stall_slot | stall_data |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: "
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in (r for r in rows if r["part"] not in ("op", "trains")):
        lines.append(
            f"| {r['part']} | {r['dtype']} | {r['size']} | {r['endpoints']} "
            f"| {r['capacity'] // 1024} KiB "
            f"| {r['waves']} | {r['cycles']:.0f} | {r['us']:.2f} | {r['efficiency']:.3f} | "
            f"{nvls_cycles(r['size'], r['endpoints'], link):.0f} | "
            f"{ring_cycles(r['size'], r['endpoints'], link):.0f} | {r.get('c_stall_slot', '')} | "
            f"{r.get('c_stall_data', '')} |")
    lines.append("")
    lines += op_table(rows)
    lines += train_table(rows, link)
    lines += [f"![{p}]({out_rel}/{p})" for p in plots]
    return "\n".join(lines)


def op_table(rows):
    """The op sweep's rows (``--parts op``) as a table of their own: each against its bound."""
    rows = [r for r in rows if r["part"] == "op"]
    if not rows:
        return []
    lines = ["### The collective set (`--parts op`)", "",
             "fp16, 4 endpoints; `size` is the per-rank count (NCCL's `count`, `recvcount`, "
             "`sendcount`) in bytes. The bound is the operation's one-link lower bound, the "
             "largest buffer a rank sends or receives over its link / 32 B per cycle "
             "(docs/PERFORMANCE.md); efficiency = bound / cycles.", "",
             "| op | size | cycles | us | bound (cycles) | efficiency | stall_slot | stall_data "
             "| commit |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        eff = r.get("efficiency")
        lines.append(f"| {case_name(r)} | {r['size']} | {r['cycles']:.0f} | {r['us']:.2f} | "
                     f"{r['bound_cycles']:.0f} | "
                     f"{'-' if eff in (None, '') else format(eff, '.3f')} | "
                     f"{r.get('c_stall_slot', '')} | {r.get('c_stall_data', '')} | {r['commit']} |")
    return lines + [""]


def train_table(rows, link):
    """The trains sweep's rows (``--parts trains``): each point's cycles per slot, the protocol's
    limits and the fixed cycles, so the table says where the cycles go."""
    rows = [r for r in rows if r["part"] == "trains"]
    if not rows:
        return []
    payload, limit = link_limit(link)
    int8_flits = slot_link_cycles("int8", 1, link) - 2    # the slot's packets, no READs
    lines = ["### Wave-level requests (`--parts trains`)", "",
             "4 endpoints, All-Reduce. `trains` is `--trains`: slots per `READ_WAVE` and per "
             "acknowledged write (1: the paper's per-slot protocol). Efficiency = 16-bit size / "
             f"(cycles x {link.flit_bytes} B) (INT8: its 16-bit form, so up to twice fp16's); the "
             f"payload format's limit is {payload}/{payload + 1} = {limit:.4f} (INT8: "
             f"2 x {payload}/{int8_flits} = {2 * payload / int8_flits:.4f}: a slot's scales are "
             f"a {int8_flits - payload - 1}-flit packet). `model` is what the busiest link "
             "carries per 4 KiB slot "
             "(:func:`slot_link_cycles`), `fixed` = cycles - slots x model: the same few hundred "
             "cycles everywhere when the model accounts for every cycle.", "",
             "| table | waves | trains | dtype | size | cycles | efficiency | slots | model "
             "| fixed | stall_slot | commit |",
             "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        trains = int(r.get("trains") or 1)
        model = slot_link_cycles(r["dtype"], trains, link)
        slots = r.get("c_slots")
        fixed = "" if slots in (None, "") else f"{r['cycles'] - int(slots) * model:.0f}"
        lines.append(f"| {r['capacity'] // 1024} KiB | {r['waves']} | {trains} | "
                     f"{r['dtype']} | {r['size']} | {r['cycles']:.0f} | {r['efficiency']:.4f} | "
                     f"{slots} | {model:g} | {fixed} | {r.get('c_stall_slot', '')} | "
                     f"{r['commit']} |")
    return lines + [""]


def slot_link_cycles(dtype, trains, link):
    """Cycles a ``PACKET_BYTES`` slot costs the link into an endpoint: its result WRITE (a header
    and the payload flits of :func:`link_limit`) and, INT8, its scale WRITE (a header and the
    slot's scales, one FP16 per 64 bytes), plus the slot's READ (and INT8 scale READ), one flit
    each per slot without trains, one per train of ``trains`` slots with them (the link out of
    it carries as much or less: the READ_RESPs and one WRITE_RESP)."""
    payload, _ = link_limit(link)
    int8 = dtype == "int8"
    scales = 1 + -(-(PACKET_BYTES // 32) // link.flit_bytes) if int8 else 0
    reads = 2 if int8 else 1
    return 1 + payload + scales + (reads if trains == 1 else reads / trains)


def hop_runs(args):
    """The op sweep's hop traces: every case of ``--ops`` at ``--hop-size``, on Icarus (but the
    ``:pairs`` cases: pairs need whole 4 KiB pages, and ``--hop-size`` is less)."""
    size = parse_size(args.hop_size)
    return [CollectiveConfig.from_fields(
        op=op, in_place=in_place, size=size, sim="icarus", trace=True, root=_root(args, op))
            for op, in_place, pairs in op_cases(args.ops) if not pairs]


def hop_section(cfgs, log=print):
    """Trace each of ``cfgs`` hop by hop; return the ``op-hops`` section's text."""
    from ..sim.trace import HOP_NAMES
    started = time.monotonic()
    data, barrier = [], []
    for k, cfg in enumerate(cfgs, 1):
        log(f"[hops {k}/{len(cfgs)}] tracing {case_name(vars(cfg))} {cfg.size} B on icarus ...")
        report = run_allreduce(cfg, log=lambda *_: None)
        if not report["match"]:
            raise RuntimeError(f"{cfg.op} {cfg.size} B: result differs from the golden model "
                               f"(run in {report['run_dir']})")
        (barrier if cfg.op == "barrier" else data).append((cfg, report))
    fb = flit_bytes(cfgs[0])
    lines = [f"## Every operation hop by hop (`scin bench --parts op`, {cfgs[0].size} B per rank)",
             "", f"Icarus (the same cycles as Verilator: the design is deterministic), "
             f"commit {current_commit()}, {time.monotonic() - started:.0f} s. "
             "fp16, 4 endpoints, the latency "
             "model of the tables above; each cell: measured cycles (floor), "
             "as in the All-Reduce's "
             "hop table. The path follows the last arrival, the last result data to reach an "
             "endpoint back to the read response that gated it and that response's READ, then "
             "the last flag. A hop's floor is that of one packet; with several packets on a link "
             "(ReduceScatter's N shards up each link, AllGather's N shards down it) the others' "
             "serialisation is the row below, spread over the hops' cycles, so the total floor is "
             "4 one-way trips + the memory read + the bound's flits + 1.", "",
             "| hop | " + " | ".join(case_name(vars(c)) for c, _ in data) + " |",
             "| --- | " + " | ".join("---:" for _ in data) + " |"]
    for j, (name, _) in enumerate(HOP_NAMES):
        lines.append(f"| {name} | " + " | ".join(
            f"{r['hops'][j]['cycles']} ({r['hops'][j]['floor']})" for _, r in data) + " |")
    extra = [round(r["bound_cycles"]) - -(-c.data_bytes // fb) for c, r in data]
    lines.append("| other packets on the busiest link | "
                 + " | ".join(f"- ({e})" for e in extra) + " |")
    totals = [(r["cycles"], sum(h["floor"] for h in r["hops"]) + e)
              for (_, r), e in zip(data, extra)]
    lines.append("| **total** | " + " | ".join(f"**{t}** ({fl})" for t, fl in totals) + " |")
    lines.append("| over the floor | " + " | ".join(f"{t - fl}" for t, fl in totals) + " |")
    for cfg, r in barrier:
        floor = sum(h["floor"] for h in r["hops"])
        lines += ["", f"Barrier: **{r['cycles']}** cycles "
                      f"(floor {floor}, {r['cycles'] - floor} over): "
                  + ", ".join(f"{h['hop']} {h['cycles']} ({h['floor']})" for h in r["hops"]) + "."]
    return "\n".join(lines)


def add_arguments(p):
    """The options of ``scin bench``."""
    p.add_argument("--parts", default=",".join(PARTS),
                   help="which sweeps to run, comma-separated from %(default)s")
    p.add_argument("--sizes", type=checked(size_list(2, even=True)), default=",".join(SIZES),
                   help="message sizes (default: %(default)s)")
    p.add_argument("--large", action="store_true",
                   help=f"also run {', '.join(LARGE_SIZES)} (long: minutes per run)")
    p.add_argument("--dtypes", type=checked(choice_list(("fp16", "bf16", "int8"))),
                   default="fp16,int8",
                   help="dtypes of the size sweep (default: %(default)s)")
    p.add_argument("--capacity", type=checked(size(4096)), default="32KiB",
                   help="wave-table capacity per participant for the size sweeps "
                        "(default: %(default)s)")
    p.add_argument("--default-waves", type=integer(1), default=8,
                   help="outstanding waves for the size sweeps (default: %(default)s)")
    p.add_argument("--waves", type=checked(integer_list(1)), default="1,2,4,8,16",
                   help="outstanding waves to sweep (default: %(default)s)")
    p.add_argument("--waves-size", type=checked(size(2, even=True)), default="1MiB",
                   help="message size of the waves and capacity sweeps (default: %(default)s)")
    p.add_argument("--waves-capacity", type=checked(size(4096)), default="64KiB",
                   help="table capacity of the waves sweep (default: %(default)s)")
    p.add_argument("--capacities", type=checked(size_list(4096)),
                   default="16KiB,32KiB,64KiB,128KiB",
                   help="capacities to sweep (default: %(default)s)")
    p.add_argument("--endpoints", type=checked(integer_list(2, 8)), default="8", metavar="LIST",
                   help="endpoint counts of the endpoints sweep, fp16 (default: %(default)s; "
                        "4 endpoints are in the size sweep)")
    p.add_argument("--ops", default=",".join(OP_CASES),
                   help="the op sweep's cases, each an operation with an optional ':in-place' "
                        "(allgather:in-place:pairs: on an ISA built with gather_pairs; default: "
                        "%(default)s)")
    p.add_argument("--op-sizes", type=checked(size_list(2, even=True)), default=",".join(OP_SIZES),
                   help="per-rank sizes of the op sweep (default: %(default)s)")
    p.add_argument("--root", type=integer(0, 7), default=1,
                   help="the root rank of the op sweep's broadcast and reduce "
                        "(default: %(default)s)")
    p.add_argument("--hop-size", type=checked(size(2)), default="64B",
                   help="the op sweep also traces every case hop by hop at this size on Icarus "
                        "(slow: about 2 minutes a case) and writes the op-hops section "
                        "(default: %(default)s)")
    p.add_argument("--no-hops", action="store_true", help="the op sweep without the hop traces")
    p.add_argument("--train-configs", default=",".join(TRAIN_CONFIGS),
                   help="the trains sweep's hardware, each CAPACITY/WAVES/TRAINS: wave table per "
                        "participant, outstanding waves, slots per READ_WAVE and per acknowledged "
                        "write (default: %(default)s)")
    p.add_argument("--train-points", default=",".join(TRAIN_POINTS),
                   help="the trains sweep's points, each DTYPE:SIZE (default: %(default)s; "
                        "16 MiB takes a few minutes a run)")
    p.add_argument("--seeds", type=integer(1), default=1,
                   help="seeds per point (default: %(default)s)")
    add_out_doc(p, "bench", BENCH_FOLDER, PERFORMANCE_DOC)
    p.add_argument("--merge", action="store_true",
                   help="keep the rows of the existing bench.csv that this run does not redo, so "
                        "parts can be run one at a time")
    p.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    from . import executor
    executor.add_arguments(p, jobs_default=1, what="configurations")


def run(args):
    """``scin bench``: run the sweep, write the CSV, the plots and the doc section."""
    from .cli import CommandError
    args.parts = [s for s in args.parts.split(",") if s]
    bad = sorted(set(args.parts) - set(PARTS))
    if bad:
        raise ValueError(f"--parts: unknown part(s) {', '.join(bad)}; choose from "
                         f"{', '.join(PARTS)}")
    from . import executor
    executor.check_arguments(args)
    runs = plan(args)
    for spec in runs:  # validate every configuration before spending an hour on the first
        try:
            CollectiveConfig.from_fields(
                **{k: v for k, v in spec.items() if k != "part"}).system().params()
        except ValueError as exc:
            raise ValueError(f"{PART_OPTIONS[spec['part']]}: {exc}") from None
    hop_cfgs = hop_runs(args) if "op" in args.parts and not args.no_hops else []
    if args.dry_run:
        for k, spec in enumerate(runs, 1):
            print(f"[{k}/{len(runs)}] {spec}")
        for k, cfg in enumerate(hop_cfgs, 1):
            print(f"[hops {k}/{len(hop_cfgs)}] {case_name(vars(cfg))} {cfg.size} B, icarus, traced")
        return 0
    out = doc_folder(args, "bench", BENCH_FOLDER)
    doc = doc_target(args, "bench", PERFORMANCE_DOC)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        rows = run_all(runs, args.seeds, log=lambda line: print(line, flush=True), where=args)
    except RuntimeError as exc:
        raise CommandError(str(exc), status=1) from None   # a wrong result, not a bad option
    # Every run of a sweep has the same link (only the sizes, groups and tables vary).
    link = link_model(CollectiveConfig())
    if args.merge and (out / "bench.csv").exists():
        rows = merge_rows(read_csv(out / "bench.csv"), rows)
    write_csv(rows, out / "bench.csv")
    # The system model's calibration (docs/SCALE.md, `scin study`) is fitted to what was just
    # measured; a sweep without the points it needs keeps the old one and says why.
    from ..sim.calibration import write_calibration
    try:
        write_calibration(out / "bench.csv", out / "calibration.json")
        print(f"wrote {out / 'calibration.json'} (scin study: the system model)")
    except ValueError as exc:
        print(f"kept {out / 'calibration.json'}: {exc}")
    plots = plot(rows, out, link)
    try:
        out_rel = out.resolve().relative_to(doc.resolve().parent).as_posix()
    except ValueError:
        out_rel = out.resolve().as_posix()
    text = section(rows, plots, args, time.monotonic() - started, link, out_rel)
    rewrite_section(doc, SECTION, text)
    print(f"wrote {out / 'bench.csv'}, {', '.join(plots)} and the bench section of {doc}")
    if hop_cfgs:
        try:
            rewrite_section(doc, HOPS_SECTION, hop_section(
                hop_cfgs, log=lambda line: print(line, flush=True)))
        except RuntimeError as exc:
            raise CommandError(str(exc), status=1) from None
        print(f"wrote the {HOPS_SECTION} section of {doc}")
    return 0


def main(argv=None):
    """``python -m scin.scripts.bench``: the same as ``scin bench``."""
    from .cli import main
    return main(["bench", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
