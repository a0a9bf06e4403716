"""Simulation speed (`scin bench-sim`): cycles per second of the 4-endpoint system, and the share
of it the Python side costs.

Each point is one All-Reduce of ``scin allreduce`` (4 endpoints, the paper's latency model), run
twice on the same build: as ``scin allreduce`` runs it (the bench looks at the event streams every
32 cycles), and *bare* (``SCIN_BARE_CYCLES``: the bench sleeps through the collective's cycles on
one timer, so the simulator runs the model with no Python at all until the flags are in). Both
runs are checked bit for bit against the golden model. The Python overhead is the bench run's
wall time over the bare run's for the same cycles, less one.

Pull points run at ``--sizes``; push points at ``--push-sizes`` on the system built with a push
space of ``--push-capacity`` per participant (a push input must fit in it). Icarus points run at
``--icarus-size``. Cycles per second come from cocotb's results file (the cocotb test's wall time:
no build, no golden model). Writes ``bench_sim.md`` (the table) and ``bench_sim.json`` (every run)
into ``out/bench-sim/`` (``--out``); with ``--doc``, the table also goes between the ``bench-sim``
markers of ``docs/PERFORMANCE.md``.
"""

import json
import os
import statistics
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from ..hdl.paper import CLOCK_PERIOD_NS
from ..sim.allreduce import CollectiveConfig, run_allreduce
from ..sim.toolchain import REPO_ROOT, have_icarus
from .docs_section import current_commit, rewrite_section
from .options import add_out_doc, doc_folder, doc_target, integer, size, size_list

__all__ = ["add_arguments", "run", "points", "table", "section", "speed_of_run"]

SECTION = "bench-sim"
COMMAND = "bench-sim"
DOC = REPO_ROOT / "docs" / "PERFORMANCE.md"
ENDPOINTS = 4
DTYPES = ("fp16", "int8")
MODES = ("pull", "push")
SIMS = ("verilator", "icarus")
#: The environment variable the All-Reduce bench sleeps through (sim/testbench/allreduce_bench.py).
BARE_VARIABLE = "SCIN_BARE_CYCLES"


def _choices(allowed, option):
    def parse(text):
        items = [x.strip() for x in str(text).split(",")]
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            import argparse
            raise argparse.ArgumentTypeError(f"must be a comma list of {', '.join(allowed)}, "
                                             f"not {text!r}")
        return items
    parse.__name__ = option
    return parse


def add_arguments(p):
    """The options of ``scin bench-sim``."""
    p.add_argument("--sizes", type=size_list(128), default=[1 << 20],
                   help="pull message sizes on Verilator, 16-bit form (default: 1MiB; 16MiB "
                        "takes about a minute per point)")
    p.add_argument("--push-sizes", type=size_list(128), default=[32 << 10],
                   help="push message sizes, at most --push-capacity (default: 32KiB)")
    p.add_argument("--push-capacity", type=size(4096), default=32 << 10,
                   help="the ISA's push space per participant of the push build (default: 32KiB)")
    p.add_argument("--icarus-size", type=size(0), default=16 << 10,
                   help="the Icarus points' size, pull, fp16 and int8; 0: no Icarus point "
                        "(default: 16KiB)")
    p.add_argument("--dtypes", type=_choices(DTYPES, "dtypes"), default=list(DTYPES),
                   help="element types (default: fp16,int8)")
    p.add_argument("--modes", type=_choices(MODES, "modes"), default=list(MODES),
                   help="pull, push or both (default: pull,push)")
    p.add_argument("--repeat", type=integer(1, 20), default=2,
                   help="runs of each point (bench and bare each, in alternating order); the "
                        "table gives medians (default: 2)")
    p.add_argument("--seed", type=integer(0), default=1, help="data seed (default: 1)")
    add_out_doc(p, COMMAND, None, DOC)


def points(args):
    """The points: ``(sim, dtype, mode, size)``; ValueError naming the option for a push size
    over the push space, or Icarus points without Icarus installed."""
    if args.push_capacity % 4096:
        raise ValueError(f"--push-capacity: a multiple of 4KiB, not {args.push_capacity} B")
    for s in args.push_sizes if "push" in args.modes else []:
        if s > args.push_capacity:
            raise ValueError(f"--push-sizes: {s} B does not fit in the {args.push_capacity} B "
                             f"push space (--push-capacity)")
    if args.icarus_size and not have_icarus():
        raise ValueError("--icarus-size: Icarus Verilog is not installed (give 0 to skip it)")
    out = []
    for d in args.dtypes:
        for m in args.modes:
            for s in args.sizes if m == "pull" else args.push_sizes:
                out.append(("verilator", d, m, s))
        if args.icarus_size:
            out.append(("icarus", d, "pull", args.icarus_size))
    return out


def config(point, args):
    """The :class:`CollectiveConfig` of a point."""
    sim, dtype, mode, nbytes = point
    push = args.push_capacity if mode == "push" else 0
    return CollectiveConfig.from_fields(
        endpoints=ENDPOINTS, dtype=dtype, size=nbytes, sim=sim, seed=args.seed, mode=mode,
        push_capacity=push)


def speed_of_run(run_dir):
    """``(simulated cycles, wall seconds)`` of the cocotb test of a run, from its results.xml."""
    case = ET.parse(Path(run_dir) / "results.xml").find(".//testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    return round(float(props["sim_time_duration"]) / CLOCK_PERIOD_NS), float(case.get("time"))


def _one(point, args, bare):
    """One checked run; ``{"cycles", "seconds", "collective_cycles"}``."""
    if bare:
        os.environ[BARE_VARIABLE] = str(bare)
    try:
        report = run_allreduce(config(point, args), log=lambda *_: None)
    finally:
        os.environ.pop(BARE_VARIABLE, None)
    if not report["match"] or report["status"] != report["expected_status"]:
        raise RuntimeError(f"{point}: the result differs from the golden model "
                           f"(run in {report['run_dir']})")
    cycles, seconds = speed_of_run(report["run_dir"])
    return {"cycles": cycles, "seconds": seconds, "collective_cycles": report["cycles"]}


def measure(point, args, say):
    """The row of a point: ``--repeat`` bench runs and as many bare runs, medians. The order
    alternates (bench then bare, then bare then bench, ...): on a busy machine the first run of a
    point is often the slower, which with a fixed order would be read as overhead."""
    bench, bare = [], []
    length = None
    for k in range(args.repeat):
        for is_bare in ((False, True) if k % 2 == 0 else (True, False)):
            if is_bare:
                bare.append(_one(point, args, length))
            else:
                bench.append(_one(point, args, 0))
                length = length or bench[-1]["collective_cycles"]
    cps = lambda runs: statistics.median(r["cycles"] / r["seconds"] for r in runs)
    row = {"sim": point[0], "dtype": point[1], "mode": point[2], "size": point[3],
           "collective_cycles": bench[0]["collective_cycles"],
           "sim_cycles": bench[0]["cycles"], "bench_cps": round(cps(bench)),
           "bare_cps": round(cps(bare)), "runs": {"bench": bench, "bare": bare}}
    row["overhead"] = round(row["bare_cps"] / row["bench_cps"] - 1, 4)
    say(f"{point[0]} {point[1]} {point[2]} {_size(point[3])}: {row['bench_cps']} cycles/s, "
        f"bare {row['bare_cps']} cycles/s, Python overhead {100 * row['overhead']:.1f} %")
    return row


def _size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 and not b % (1 << 20) else (
        f"{b >> 10} KiB" if b >= 1024 and not b % 1024 else f"{b} B")


def table(rows):
    """The Markdown table of ``rows`` (each with ``sim``, ``dtype``, ``mode``, ``size``,
    ``sim_cycles``, ``bench_cps``, ``bare_cps``, ``overhead``)."""
    lines = ["| simulator | dtype | mode | size | simulated cycles | cycles/s | bare cycles/s | "
             "Python overhead |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['sim']} | {r['dtype']} | {r['mode']} | {_size(r['size'])} | "
                     f"{r['sim_cycles']:,} | {r['bench_cps']:,} | {r['bare_cps']:,} | "
                     f"{100 * r['overhead']:.1f} % |")
    return "\n".join(lines)


def section(rows, meta):
    """The generated part of the ``bench-sim`` section: parameters, then :func:`table`.
    ``meta``: ``command``, ``commit``, ``load_before``, ``load_after``, ``repeat``, ``seed``,
    ``push_capacity``, ``elapsed``."""
    load = lambda xs: " / ".join(f"{x:.2f}" for x in xs)
    return "\n".join([
        f"Generated by `{meta['command']}` at commit {meta['commit']} in {meta['elapsed']:.0f} s; "
        f"load average (1/5/15 min) {load(meta['load_before'])} before, "
        f"{load(meta['load_after'])} after. All-Reduce on {ENDPOINTS} endpoints, the paper's "
        f"latency model, seed {meta['seed']}"
        + ("; push points on the build with a "
           f"{_size(meta['push_capacity'])} push space per participant"
           if any(r["mode"] == "push" for r in rows) else "")
        + f". Each figure is the median "
        f"of {meta['repeat']} run(s); every run was checked bit for bit against the golden "
        f"model.", "", table(rows)])


def run(args):
    """``scin bench-sim``: measure every point, write the table and the runs."""
    todo = points(args)
    folder = doc_folder(args, COMMAND, None)
    say = lambda text: print(f"scin bench-sim: {text}", file=sys.stderr, flush=True)
    started, load_before = time.monotonic(), os.getloadavg()
    say(f"{len(todo)} points, {args.repeat} run(s) each, bench and bare")
    rows = [measure(p, args, say) for p in todo]
    meta = {"command": "scin bench-sim " + " ".join(getattr(args, "argv", []) or []),
            "commit": current_commit(), "load_before": load_before,
            "load_after": os.getloadavg(), "repeat": args.repeat, "seed": args.seed,
            "push_capacity": args.push_capacity, "elapsed": time.monotonic() - started}
    body = section(rows, meta)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench_sim.md").write_text(body + "\n")
    (folder / "bench_sim.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    target = doc_target(args, COMMAND, DOC)
    rewrite_section(target, SECTION, body)
    print(table(rows))
    say(f"wrote {folder / 'bench_sim.md'}, {folder / 'bench_sim.json'} and the {SECTION} "
        f"section of {target}")
    return 0
