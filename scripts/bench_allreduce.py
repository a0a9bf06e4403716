"""All-Reduce latency and efficiency on the simulated system (`scin bench-allreduce`).

Runs `scin allreduce` configurations on Verilator under the paper latency model and writes a table
between the ``bench-allreduce`` markers of ``docs/PERFORMANCE.md`` (``--doc``; without it, of a
copy in ``out/bench-allreduce/``). The design is deterministic, so
each configuration is run over a few seeds only to show that the data does not change the timing;
the table gives the median.
"""

import statistics
import sys
import time

from ..hdl.paper import CLOCK_MHZ, MEM_LATENCY, ONE_WAY_LATENCY
from ..sim.allreduce import CollectiveConfig, parse_size, run_allreduce
from ..sim.toolchain import REPO_ROOT
from .bench import efficiency, flit_bytes
from .docs_section import current_commit, rewrite_section, section_block
from .options import add_out_doc, doc_target, integer

SECTION, HOPS_SECTION = "bench-allreduce", "hops"
PERFORMANCE_DOC = REPO_ROOT / "docs" / "PERFORMANCE.md"
HOP_SIZES = ["64B", "256B", "1KiB", "4KiB"]
DEFAULT_CASES = ["fp16:64B", "fp16:1KiB", "fp16:4KiB", "fp16:64KiB", "fp16:1MiB", "bf16:1MiB",
                 "int8:4KiB", "int8:1MiB"]


def hop_floor(latency, mem_latency, size, flit_bytes):
    """Cycles the hops alone cost with ORDERED flags: arrival, read request, read response, write
    (the flag rides behind it) = 4 one-way trips, one memory read, and the serialisation of one
    maximum-size packet (the first slot must stream in, the last must stream out, and these overlap
    when reduction cuts through)."""
    flits = -(-min(size, 4096) // flit_bytes)
    return 4 * latency + mem_latency + (flits + 1)


def add_arguments(parser):
    """The options of ``scin bench-allreduce``."""
    parser.add_argument("cases", nargs="*", default=DEFAULT_CASES,
                        help="dtype:size pairs (default: %(default)s)")
    parser.add_argument("--seeds", type=integer(1), default=2, help="seeds per case (default: 2)")
    parser.add_argument("--latency", type=integer(4), default=ONE_WAY_LATENCY,
                        help="one-way latency in cycles, at least 4 (default: %(default)s)")
    parser.add_argument("--mem-latency", type=integer(3, 4096), default=MEM_LATENCY,
                        help="memory latency in cycles, 3 to 4096 (default: %(default)s)")
    add_out_doc(parser, "bench-allreduce", None, PERFORMANCE_DOC)
    parser.add_argument("--hops", action="store_true",
                        help="instead: trace fp16 64 B, 256 B, 1 KiB and 4 KiB hop by hop "
                             "(Icarus) and write the hop table (between the hops markers)")


def _cases(cases):
    """``[(dtype, size in bytes)]`` of the ``dtype:size`` cases, each checked."""
    parsed = []
    for case in cases:
        dtype, _, size = case.partition(":")
        try:
            parsed.append((dtype, parse_size(size)))
            CollectiveConfig.from_fields(dtype=dtype, size=parsed[-1][1])
        except ValueError as exc:
            raise ValueError(f"argument cases: {case!r} is not a dtype:size case of "
                             f"fp16, bf16 or int8 ({exc})") from None
    return parsed


def run(args):
    """``scin bench-allreduce``: run the cases (or ``--hops``), print and write the table."""
    _cases(args.cases)              # every case checked before the first run
    args.doc_path = doc_target(args, "bench-allreduce", PERFORMANCE_DOC)
    if args.hops:
        return hops_table(args)

    rows = []
    started = time.monotonic()
    for k, case in enumerate(args.cases):
        dtype, _, size = case.partition(":")
        size = parse_size(size)
        reports = []
        for seed in range(1, args.seeds + 1):
            cfg = CollectiveConfig.from_fields(
                dtype=dtype, size=size, seed=seed, one_way_latency=args.latency,
                mem_latency=args.mem_latency)
            print(f"[{k + 1}/{len(args.cases)}] {dtype} {size} B seed {seed} ...",
                  file=sys.stderr, flush=True)
            report = run_allreduce(cfg, log=lambda *_: None)
            if not report["match"]:
                print(f"MISMATCH in {case} seed {seed}: {report['run_dir']}", file=sys.stderr)
                return 1
            reports.append(report)
        cycles = statistics.median(r["cycles"] for r in reports)
        rows.append({"dtype": dtype, "size": size, "cycles": cycles,
                     "us": cycles / CLOCK_MHZ, "eff": efficiency(cfg, cycles),
                     "flit_bytes": flit_bytes(cfg),
                     "floor": hop_floor(args.latency, args.mem_latency, size, flit_bytes(cfg)),
                     "counters": reports[0]["counters"], "params": reports[0]["params"],
                     "wall": statistics.median(r["wall_seconds"] for r in reports)})
    commit = current_commit()
    prm = rows[0]["params"]
    lines = ["## All-Reduce on the 4-endpoint system (`scin bench-allreduce`)", "",
             f"Command: `scin bench-allreduce --seeds {args.seeds}` (Verilator, commit {commit}, "
             f"{time.monotonic() - started:.0f} s). Paper latency model: one-way "
             f"endpoint-to-switch latency {args.latency} cycles, endpoint memory read latency "
             f"{args.mem_latency} cycles; "
             f"ISA wave table {prm['capacity'] // 1024} KiB per participant regulated as "
             f"{prm['outstanding']} waves; {prm['flag_mode'].upper()} completion flags; "
             f"{prm['flit_width']}-bit flits at {CLOCK_MHZ:.0f} MHz. "
             "Latency (docs/PERFORMANCE.md, Latency): the last participant's first packet "
             "(its arrival) leaving its endpoint to "
             f"last completion flag seen; efficiency = size / "
             f"(cycles x {rows[0]['flit_bytes']} B), size in its 16-bit form "
             "(INT8: the FP16-equivalent size). Median over seeds (the timing does not depend on "
             "the data).", "",
             "| dtype | size | cycles | us | efficiency | hop floor (cycles) | stall_data "
             "| stall_slot | stall_tx | sim wall (s) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        c = r["counters"]
        lines.append(f"| {r['dtype']} | {r['size']} | {r['cycles']:.0f} | {r['us']:.2f} | "
                     f"{r['eff']:.3f} | {r['floor']} | {c['stall_data']} | {c['stall_slot']} | "
                     f"{c['stall_tx']} | {r['wall']:.1f} |")
    lines += ["", "Hop floor: 4 one-way trips (arrival, read request, read response, write with "
              "the flag right behind it) + one memory read + one packet's serialisation."]
    doc = args.doc_path
    body = "\n".join(lines)
    print(section_block(SECTION, body))
    rewrite_section(doc, SECTION, body)
    return 0


def hops_table(args):
    """Trace the smallest messages hop by hop and write the table between the hops markers."""
    from ..sim.trace import HOP_NAMES
    started = time.monotonic()
    reports = []
    for k, size in enumerate(HOP_SIZES):
        print(f"[{k + 1}/{len(HOP_SIZES)}] tracing fp16 {size} on icarus ...",
              file=sys.stderr, flush=True)
        cfg = CollectiveConfig.from_fields(
            dtype="fp16", size=parse_size(size), sim="icarus", trace=True,
            one_way_latency=args.latency, mem_latency=args.mem_latency)
        report = run_allreduce(cfg, log=lambda *_: None)
        if not report["match"]:
            print(f"MISMATCH at {size}: {report['run_dir']}", file=sys.stderr)
            return 1
        reports.append(report)
    commit = current_commit()
    lines = ["## Small messages hop by hop (`scin bench-allreduce --hops`)", "",
             f"Command: `scin bench-allreduce --hops` (Icarus, commit {commit}, "
             f"{time.monotonic() - started:.0f} s; the same cycles as Verilator: the design is "
             f"deterministic). fp16, 4 endpoints, one-way latency {args.latency} cycles, memory "
             f"latency {args.mem_latency} cycles, ORDERED flags. Each cell: measured cycles "
             "(floor). Every packet header and tail crossing an endpoint's or the ISA's boundary "
             "is stamped with the accelerators' cycle counter (`sim/trace.py`); the path follows "
             "the last arrival, then the participant whose data reached the ISA last, then the "
             "last flag. The floor of a hop is what the latency model makes unavoidable (one-way "
             "latency per crossing, the memory's latency, the read response's payload behind its "
             "header, one cycle for the flag behind the data); "
             "a hop with floor 0 is the RTL's own.", "",
             "| hop | " + " | ".join(r["size_bytes"] and f"{r['size_bytes']} B" for r in reports)
             + " | covers |",
             "| --- | " + " | ".join("---:" for _ in reports) + " | --- |"]
    for j, (name, covers) in enumerate(HOP_NAMES):
        lines.append(f"| {name} | "
                     + " | ".join(f"{r['hops'][j]['cycles']} ({r['hops'][j]['floor']})"
                                  for r in reports)
                     + f" | {covers} |")
    total = lambda r, key: sum(h[key] for h in r["hops"])
    lines.append("| **total** | " + " | ".join(f"**{total(r, 'cycles')}** ({total(r, 'floor')})"
                                               for r in reports) + " | latency of the All-Reduce |")
    lines.append("| over the floor | " + " | ".join(f"{total(r, 'cycles') - total(r, 'floor')}"
                                                    for r in reports) + " | the RTL's own cycles |")
    doc = args.doc_path
    body = "\n".join(lines)
    print(section_block(HOPS_SECTION, body))
    rewrite_section(doc, HOPS_SECTION, body)
    return 0


def main(argv=None):
    """``python -m scin.scripts.bench_allreduce``: the same as ``scin bench-allreduce``."""
    from .cli import main
    return main(["bench-allreduce", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
