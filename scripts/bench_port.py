"""Benchmark: sustained flits per cycle through one switch port's TX link under saturation, with ISA
and switch-core traffic mixed.

Setup (sim/tops/fabric.py ``PortBench``): a 4-port :class:`~scin.hdl.switch.Switch` with a Link and
an endpoint TransportPort on every port. Port 0's ISA TX queue is kept full of INC=1 packets, and
endpoints 1 and 2 send INC=0 packets to port 0 through the core, all at once. Endpoint 0 accepts
everything; HDL counters (no per-cycle Python) count the flits it receives by INC bit. Packets are
1 header + 128 payload flits (a 4 KB AXI burst at 32-byte flits). The flit width does not change
flits per cycle, so the run uses 64-bit flits to keep the Verilator build small.

The simulator side is ``sim/testbench/port_bench.py``. Run: ``python -m scin.scripts.bench_port``
(or ``scin bench-port``); ``--no-write`` leaves ``docs/PERFORMANCE.md`` alone.
"""

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from scin.hdl.packet import FabricParams, MsgClass
from scin.hdl.paper import AURORA_CYCLES
from scin.sim.toolchain import REPO_ROOT

from .options import add_out_doc, doc_target, integer, integer_list, json_file
from .outputs import write_text


__all__ = ["main", "add_arguments", "run", "run_bench"]

PARAMS = FabricParams(flit_width=64, addr_width=16, tag_width=8, max_payload=1024)
PAYLOAD_FLITS = 128
CORE_SOURCES = (1, 2)
SECTION = "bench-port"
PERFORMANCE_DOC = REPO_ROOT / "docs" / "PERFORMANCE.md"


def run_bench(*, credits, latency, isa_class, core_class, runs, window, warmup, sim="verilator"):
    """Build (cached) and run one configuration; returns the per-window results."""
    from scin.sim.tops import fabric
    from scin.sim.runner import verilog_for, run_cocotb
    top = "port_bench"
    make = lambda: fabric.PortBench(PARAMS, credits=credits, latency=latency, isa_depth=256,
                                    payload_flits=PAYLOAD_FLITS, core_sources=CORE_SOURCES,
                                    isa_class=isa_class, core_class=core_class)
    v = verilog_for(make, top, f"{PARAMS!r} c={credits} l={latency} {isa_class} {core_class}",
                    top_module=fabric)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "windows.json"
        run_cocotb(verilog_path=v, top=top, test_module="scin.sim.testbench.port_bench", sim=sim,
                   testcase="bench_port",
                   config=dict(runs=runs, window=window, warmup=warmup, out=str(out)))
        return json.loads(out.read_text())


def summarize(windows):
    rate = [(w["isa"] + w["core"]) / w["cycles"] for w in windows]
    isa = [w["isa"] / w["cycles"] for w in windows]
    core = [w["core"] / w["cycles"] for w in windows]
    return {"flits_per_cycle": statistics.median(rate), "isa": statistics.median(isa),
            "core": statistics.median(core), "min": min(rate), "max": max(rate), "runs": len(rate)}


def add_arguments(parser):
    """The options of ``scin bench-port``."""
    parser.add_argument("--latency", type=integer(1), default=AURORA_CYCLES,
                        help="one-way link latency (cycles, default: %(default)s)")
    parser.add_argument("--credits", type=integer_list(1), default="256,145,128,64",
                        metavar="LIST",
                        help="credit values to sweep, the first the headline (default: "
                             "%(default)s)")
    parser.add_argument("--runs", type=integer(1), default=5,
                        help="measurement windows per configuration (default: %(default)s)")
    parser.add_argument("--window", type=integer(1), default=20_000,
                        help="cycles per window (default: %(default)s)")
    parser.add_argument("--warmup", type=integer(0), default=2_000,
                        help="cycles before measuring (default: %(default)s)")
    parser.add_argument("--json", type=json_file, nargs="?", const="-", default=None,
                        metavar="FILE",
                        help="the results as JSON on standard output, or, with FILE, into FILE")
    add_out_doc(parser, "bench-port", None, PERFORMANCE_DOC)


def run(args):
    """``scin bench-port``: run every scenario, print the table and write the doc section."""
    from scin.hdl.transport import credits_for_full_rate, TRANSPORT_LATENCY
    doc = doc_target(args, "bench-port", PERFORMANCE_DOC)
    w = MsgClass.WRITE.value
    scenarios = [("same class", w, w, c) for c in args.credits]
    # ISA writes and core read responses in different classes: they share the link per flit.
    scenarios.append(("split classes", w, MsgClass.RDATA.value, args.credits[0]))
    results = []
    t0 = time.time()
    try:
        for name, isa_class, core_class, credits in scenarios:
            windows = run_bench(credits=credits, latency=args.latency, isa_class=isa_class,
                                core_class=core_class, runs=args.runs, window=args.window,
                                warmup=args.warmup)
            s = summarize(windows)
            s.update(scenario=name, credits=credits, latency=args.latency,
                     isa_class=MsgClass(isa_class).name, core_class=MsgClass(core_class).name)
            results.append(s)
            print(f"{name:14s} credits {credits:4d}: {s['flits_per_cycle']:.4f} flits/cycle "
                  f"(ISA {s['isa']:.4f}, core {s['core']:.4f}; min {s['min']:.4f}, "
                  f"max {s['max']:.4f} over {s['runs']} runs)", file=sys.stderr)
    except Exception as exc:  # a failed build or simulation: report, exit 1
        print(f"bench-port failed: {exc}", file=sys.stderr)
        return 1
    elapsed = time.time() - t0
    if args.json == "-":
        print(json.dumps(results, indent=2))
    elif args.json is not None:
        write_text(args.json, json.dumps(results, indent=2) + "\n")

    need = credits_for_full_rate(args.latency)
    lines = [
        "## Switch port TX link under saturation (`scin bench-port`)",
        "",
        f"Command: `scin bench-port --latency {args.latency} --credits "
        f"{','.join(map(str, args.credits))} --runs {args.runs} --window {args.window}` "
        f"(Verilator; {elapsed:.0f} s including builds).",
        "",
        "Setup: 4-port switch, a link of the given one-way latency and an endpoint transport port "
        "on every port. Port 0's ISA TX queue is kept full of INC=1 packets while endpoints 1 and "
        "2 send INC=0 packets to port 0 through the core; endpoint 0 counts the flits it "
        "receives, in HDL. "
        f"Packets are 1 header + {PAYLOAD_FLITS} payload flits. Figures are the median over "
        f"{args.runs} windows of {args.window} cycles after a {args.warmup}-cycle warm-up "
        "(the RTL is deterministic, so the windows agree closely). Flit width does not change "
        "flits per cycle; the run uses 64-bit flits to keep the build small.",
        "",
        "| scenario | classes (ISA / core) | credits | flits/cycle | ISA share | core share |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for s in results:
        lines.append(f"| {s['scenario']} | {s['isa_class']} / {s['core_class']} | {s['credits']} | "
                     f"{s['flits_per_cycle']:.4f} | {s['isa']:.4f} | {s['core']:.4f} |")
    lines += [
        "",
        f"Credit requirement: a class needs `2 x latency + {need - 2 * args.latency}` = {need} "
        f"credits for one flit per cycle at latency {args.latency} "
        f"(`scin.hdl.transport.credits_for_full_rate`); with fewer, one class gets "
        f"credits / {need} of the link. The round-robin arbiter shares the link between ISA and "
        "core packet by packet, so with both saturated in the same class each gets half; in "
        "different classes they share per flit, each class limited by its own credits. "
        f"Transport RTL latency: {TRANSPORT_LATENCY} cycles one way on top of the link.",
    ]
    section = "\n".join(lines)
    print(section)
    from .docs_section import rewrite_section
    rewrite_section(doc, SECTION, section)
    print(f"wrote {doc}", file=sys.stderr)
    return 0


def main(argv=None):
    """``python -m scin.scripts.bench_port``: the same as ``scin bench-port``."""
    from .cli import main
    return main(["bench-port", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
