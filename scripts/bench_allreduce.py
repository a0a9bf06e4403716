"""All-Reduce latency and efficiency on the simulated system (`scin bench-allreduce`).

Runs `scin allreduce` configurations on Verilator under the paper latency model and writes a table
between the ``bench-allreduce`` markers of ``docs/PERFORMANCE.md``. The design is deterministic, so
each configuration is run over a few seeds only to show that the data does not change the timing;
the table gives the median.
"""

import argparse
import statistics
import subprocess
import sys
import time

from ..sim.allreduce import AllReduceConfig, parse_size, run_allreduce, CLOCK_MHZ
from ..sim.toolchain import REPO_ROOT

BEGIN, END = "<!-- bench-allreduce:begin -->", "<!-- bench-allreduce:end -->"
DEFAULT_CASES = ["fp16:64B", "fp16:1KiB", "fp16:4KiB", "fp16:64KiB", "fp16:1MiB", "bf16:1MiB",
                 "int8:4KiB", "int8:1MiB"]


def hop_floor(latency, mem_latency, size, flit_bytes=32):
    """Cycles the hops alone cost with ORDERED flags: arrival, read request, read response, write
    (the flag rides behind it) = 4 one-way trips, one memory read, and the serialisation of one
    maximum-size packet (the first slot must stream in, the last must stream out, and these overlap
    when reduction cuts through)."""
    flits = -(-min(size, 4096) // flit_bytes)
    return 4 * latency + mem_latency + (flits + 1)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="scin bench-allreduce", description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=DEFAULT_CASES,
                        help="dtype:size pairs (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per case (default: 2)")
    parser.add_argument("--latency", type=int, default=90, help="one-way latency (default: 90)")
    parser.add_argument("--mem-latency", type=int, default=40, help="memory latency (default: 40)")
    parser.add_argument("--doc", default=str(REPO_ROOT / "docs" / "PERFORMANCE.md"),
                        help="document to update (default: docs/PERFORMANCE.md)")
    args = parser.parse_args(argv)

    rows = []
    started = time.monotonic()
    for k, case in enumerate(args.cases):
        dtype, _, size = case.partition(":")
        size = parse_size(size)
        reports = []
        for seed in range(1, args.seeds + 1):
            cfg = AllReduceConfig(dtype=dtype, size=size, seed=seed, one_way_latency=args.latency,
                                  mem_latency=args.mem_latency)
            print(f"[{k + 1}/{len(args.cases)}] {dtype} {size} B seed {seed} ...", file=sys.stderr, flush=True)
            report = run_allreduce(cfg, log=lambda *_: None)
            if not report["match"]:
                print(f"MISMATCH in {case} seed {seed}: {report['run_dir']}", file=sys.stderr)
                return 1
            reports.append(report)
        cycles = statistics.median(r["cycles"] for r in reports)
        rows.append({"dtype": dtype, "size": size, "cycles": cycles,
                     "us": cycles / CLOCK_MHZ, "eff": size / (cycles * 32),
                     "floor": hop_floor(args.latency, args.mem_latency, size),
                     "counters": reports[0]["counters"], "params": reports[0]["params"],
                     "wall": statistics.median(r["wall_seconds"] for r in reports)})
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO_ROOT).stdout.strip() or "unknown"
    prm = rows[0]["params"]
    lines = [BEGIN, "## All-Reduce on the 4-endpoint system (`scin bench-allreduce`)", "",
             f"Command: `scin bench-allreduce --seeds {args.seeds}` (Verilator, commit {commit}, "
             f"{time.monotonic() - started:.0f} s). Paper latency model: one-way endpoint-to-switch "
             f"latency {args.latency} cycles, endpoint memory read latency {args.mem_latency} cycles; "
             f"ISA wave table {prm['capacity'] // 1024} KiB per participant regulated as "
             f"{prm['outstanding']} waves; {prm['flag_mode'].upper()} completion flags; "
             f"{prm['flit_width']}-bit flits at {CLOCK_MHZ:.0f} MHz. Latency: last arrival write leaving its endpoint to "
             "last completion flag seen; efficiency = size / (cycles x 32 B), size in its 16-bit form "
             "(INT8: the FP16-equivalent size). Median over seeds (the timing does not depend on "
             "the data).", "",
             "| dtype | size | cycles | us | efficiency | hop floor (cycles) | stall_data | stall_slot | stall_tx | sim wall (s) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        c = r["counters"]
        lines.append(f"| {r['dtype']} | {r['size']} | {r['cycles']:.0f} | {r['us']:.2f} | "
                     f"{r['eff']:.3f} | {r['floor']} | {c['stall_data']} | {c['stall_slot']} | "
                     f"{c['stall_tx']} | {r['wall']:.1f} |")
    lines += ["", "Hop floor: 4 one-way trips (arrival, read request, read response, write with "
              "the flag right behind it) + one memory read + one packet's serialisation.", END]
    text = "\n".join(lines)
    print(text)
    doc = REPO_ROOT / args.doc if not args.doc.startswith("/") else args.doc
    _update(doc, text)
    return 0


def _update(path, section):
    from pathlib import Path
    path = Path(path)
    old = path.read_text() if path.exists() else "# Performance\n"
    if BEGIN in old and END in old:
        new = old[:old.index(BEGIN)] + section + old[old.index(END) + len(END):]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(new)


if __name__ == "__main__":
    sys.exit(main())
