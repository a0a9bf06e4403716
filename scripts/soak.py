"""``scin soak --count N --seed S``: a randomised, seeded run of many collectives on one system.

Every collective (All-Reduce, ReduceScatter, AllGather, Broadcast, Reduce, barrier; random roots,
in place and not) is checked: every participant's buffers bit-exact with the golden model's image,
or flagged ERROR when it was meant to fail; every non-participant untouched; every ordinary write
intact. Exit status 0 when all of it holds, 1 otherwise, 2 on bad options or a simulation that did
not complete (a hang is reported with the collective it stopped at). See ``sim/soak.py`` and
``docs/RELIABILITY.md``.
"""

import json
import sys


def add_arguments(p):
    """The options of ``scin soak``."""
    p.add_argument("--count", type=int, default=20, help="collectives (default: 20)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    p.add_argument("--endpoints", type=int, default=4, help="endpoints, 2-8 (default: 4)")
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                   help="simulator (default: verilator)")
    p.add_argument("--fault-rate", type=float, default=0.2,
                   help="share of collectives given a fault: DECERR or a bad descriptor (default: 0.2)")
    p.add_argument("--traffic-rate", type=float, default=0.3,
                   help="share of collectives raced by ordinary writes (default: 0.3)")
    p.add_argument("--max-size", default="32KiB", help="largest message, 16-bit form (default: 32KiB)")
    p.add_argument("--groups", choices=("random", "halves"), default="random",
                   help="random: any subset of 2+ endpoints per collective; halves: two fixed "
                        "groups (e.g. two TP4 groups on 8 endpoints) alternating (default: random)")
    p.add_argument("--in-order", action="store_true",
                   help="memories answer reads in order (default: reordered across IDs)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def build_parser():
    """The stand-alone parser of ``scin soak`` (``prog="scin soak"``)."""
    from .cli import command_parser
    return command_parser("soak")


def replay_command(args):
    """The ``scin soak`` command line that draws the same collectives as ``args``: the seed, the
    count and every option that changes what is drawn or how the system answers, where it is not
    the default."""
    defaults = build_parser().parse_args([])
    parts = ["scin soak", f"--count {args.count}", f"--seed {args.seed}",
             f"--endpoints {args.endpoints}"]
    for name in ("sim", "fault_rate", "traffic_rate", "max_size", "groups"):
        value = getattr(args, name)
        if value != getattr(defaults, name):
            parts.append(f"--{name.replace('_', '-')} {value}")
    if args.in_order:
        parts.append("--in-order")
    return " ".join(parts)


def run(args):
    """``scin soak``: run the soak ``args`` describe; print its summary (text or ``--json``)."""
    from ..sim.allreduce import parse_size
    from ..sim.coverage import report_lines
    from ..sim.soak import SoakConfig, run_soak
    cfg = SoakConfig(count=args.count, seed=args.seed, endpoints=args.endpoints, sim=args.sim,
                     fault_rate=args.fault_rate, traffic_rate=args.traffic_rate,
                     reorder=not args.in_order, max_size=parse_size(args.max_size),
                     groups=args.groups)
    log = (lambda *a: None) if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    summary = run_soak(cfg, log=log)
    if args.json:
        print(json.dumps(summary))
        return 0 if summary["passed"] else 1
    print(f"SCIN soak: {summary['count']} collectives, seed {summary['seed']}, "
          f"{summary['endpoints']} endpoints, {summary['sim']}, {summary['cycles']} cycles, "
          f"{summary['wall_seconds']} s wall")
    print(f"  {'class':32s} {'ok':>5s} {'failed':>7s}")
    for label, counts in summary["outcomes"].items():
        print(f"  {label:32s} {counts['ok']:5d} {counts['FAILED']:7d}")
    print(f"  {'operation':32s} {'ok':>5s} {'failed':>7s}")
    for op, counts in summary["ops"].items():
        print(f"  {op:32s} {counts['ok']:5d} {counts['FAILED']:7d}")
    print(f"  ordinary writes intact: {summary['ordinary_writes_intact']} of "
          f"{summary['ordinary_writes']}")
    c = summary["counters"]
    print("  ISA counters: " + ", ".join(f"{k}={v}" for k, v in c.items() if v))
    if any(summary["switch_errors"]):
        print(f"  switch port error counters: {summary['switch_errors']}")
    for line in report_lines(summary["coverage"]):
        print(f"  {line}")
    for line in summary["failures"]:
        print(f"  FAIL: {line}")
    print(f"result: {'PASS' if summary['passed'] else 'FAIL'} (replay: {replay_command(args)}; "
          f"run directory {summary['run_dir']})")
    return 0 if summary["passed"] else 1


def main(argv=None):
    """``python -m scin.scripts.soak``: the same as ``scin soak``."""
    from .cli import main
    return main(["soak", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
