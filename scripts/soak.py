"""``scin soak --count N --seed S``: a randomised, seeded run of many collectives on one system.

Every collective (All-Reduce, ReduceScatter, AllGather, Broadcast, Reduce, barrier; random roots,
in place and not) is checked: every participant's buffers bit-exact with the golden model's image,
or flagged ERROR when it was meant to fail; every non-participant untouched; every ordinary write
intact. Exit status 0 when all of it holds, 1 otherwise, 2 on bad options or a simulation that did
not complete (a hang is reported with the collective it stopped at). ``--nvls``: the soak on a
switch with the NVLS engine, NVLS All-Reduces beside SCIN collectives and refused multicast
accesses (``sim/nvls_soak.py``). See ``sim/soak.py`` and ``docs/RELIABILITY.md``.
"""

import argparse
import json
import sys

from .options import integer, json_file, out_file, real, size
from .outputs import emit_json, write_text

#: ``--traffic-rate``'s default (it does not apply with ``--nvls``).
TRAFFIC_RATE = 0.3


def add_arguments(p):
    """The options of ``scin soak``."""
    p.add_argument("--count", type=integer(1, 10000), default=20,
                   help="collectives, 1 to 10000 (default: 20)")
    p.add_argument("--seed", type=integer(0, 2**32 - 1), default=1,
                   help="random seed, 0 to 2^32-1 (default: 1)")
    p.add_argument("--endpoints", type=integer(2, 8), default=4, help="endpoints, 2-8 (default: 4)")
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                   help="simulator (default: verilator)")
    p.add_argument("--fault-rate", type=real(0, 1), default=0.2,
                   help="share of collectives given a fault: DECERR or a bad descriptor "
                        "(default: 0.2)")
    p.add_argument("--traffic-rate", type=real(0, 1), default=TRAFFIC_RATE,
                   help="share of collectives raced by ordinary writes (default: 0.3)")
    p.add_argument("--max-size", default=None,
                   help="largest message, 16-bit form (default: 32KiB; with --nvls 4KiB, at most "
                        "8KiB)")
    p.add_argument("--groups", choices=("random", "halves"), default="random",
                   help="random: any subset of 2+ endpoints per collective; halves: two fixed "
                        "groups (e.g. two TP4 groups on 8 endpoints) alternating (default: random)")
    p.add_argument("--trains", type=integer(1), default=2,
                   help="the ISA's read and write trains, in slots (READ_WAVE, WRITE_POSTED; 1: "
                        "one READ and one WRITE_RESP per slot, the paper's protocol; default: 2)")
    p.add_argument("--gather-pairs", action=argparse.BooleanOptionalAction, default=True,
                   help="build the ISA with gather_pairs: in-place AllGathers of whole 4 KiB "
                        "pages run in pairs of ranks (docs/ISA.md; default: on; not with "
                        "--nvls)")
    p.add_argument("--in-order", action="store_true",
                   help="memories answer reads in order (default: reordered across IDs)")
    p.add_argument("--nvls", action="store_true",
                   help="NVLS mode: the switch also carries the NVLS engine; NVLS All-Reduces of "
                        "random groups, sizes, dtypes and windows run beside SCIN collectives on "
                        "the other ports, with bad multicast accesses (outside every group, past "
                        "a group's end, bad length) that must be refused; the system of "
                        "tb/system/test_nvls.py (64 KiB memories), in rounds of one simulation "
                        "each (--fault-rate: also the share of ports given a bad access per step; "
                        "--traffic-rate does not apply)")
    p.add_argument("--json", type=json_file, nargs="?", const="-", default=None, metavar="FILE",
                   help="the summary as one JSON object on standard output instead of the text, "
                        "or, with FILE, into FILE")
    p.add_argument("--coverage-report", type=out_file, metavar="FILE",
                   help="also write the functional coverage (every bin's hits, every hole, the "
                        "excluded bins with their reasons) to FILE as Markdown")
    p.add_argument("--seeds", type=integer(1), default=1, metavar="N",
                   help="run N independent soaks, seeds SEED to SEED+N-1, as points on the "
                        "executor below; one line per soak and a combined result (default: 1)")
    from . import executor
    executor.add_arguments(p, jobs_default=1, what="soaks (with --seeds)")


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
    for name in ("sim", "fault_rate", "traffic_rate", "max_size", "groups", "trains"):
        value = getattr(args, name)
        if value != getattr(defaults, name):
            parts.append(f"--{name.replace('_', '-')} {value}")
    if args.in_order:
        parts.append("--in-order")
    if not args.gather_pairs:
        parts.append("--no-gather-pairs")
    if args.nvls:
        parts.append("--nvls")
    return " ".join(parts)


def write_coverage_report(summary, path, command):
    """Write the functional coverage of a soak ``summary`` (:func:`~scin.sim.soak.run_soak`'s) to
    ``path`` as Markdown, headed by the ``command`` that reproduces it and whether it passed."""
    from ..sim.coverage import report_markdown
    verdict = "passed" if summary["passed"] else "FAILED"
    nvls = "nvls_coverage" in summary
    text = report_markdown(summary["coverage"],
                           title=f"Functional coverage of `{command}`" +
                                 (": its SCIN collectives" if nvls else ""),
                           note=f"Every collective counted was run and checked: the soak "
                                f"{verdict} ({summary['wall_seconds']} s wall).")
    if nvls:
        text += "\n" + report_markdown(summary["nvls_coverage"],
                                       title=f"Functional coverage of `{command}`: its NVLS "
                                             f"All-Reduces",
                                       note="The axes of sim/coverage.py's NVLS_AXES; the fault "
                                            "axis: whether a refused multicast access ran right "
                                            "before it on one of its ports.")
    write_text(path, text)


def soak_point(settings):
    """One soak of :class:`~scin.sim.soak.SoakConfig` keywords ``settings``, quietly: its
    summary. A point of ``--seeds`` (module level, so a Dask worker can import it)."""
    from ..sim.soak import SoakConfig, run_soak
    return run_soak(SoakConfig(**settings), log=lambda *a: None)


def run_seeds(args, settings):
    """``--seeds N``: N soaks from seeds ``args.seed`` on, on the executor ``args`` selects; one
    line per soak as it ends, then the combined result. Exit status 0 when every soak passed, 1
    when one failed a check, 2 when one could not run (its error is printed; the others finish)."""
    import argparse
    from . import executor
    from .cli import CommandError
    seeds = list(range(args.seed, args.seed + args.seeds))
    summaries, errors = {}, []
    progress = executor.Progress(len(seeds), "scin soak")
    quiet = args.json == "-"    # standard output holds the JSON only
    out = sys.stderr if quiet else sys.stdout
    say = lambda text: progress.log(lambda t: print(t, file=out, flush=True), text)

    def done(index, point, summary):
        summaries[seeds[index]] = summary
        one = argparse.Namespace(**{**vars(args), "seed": seeds[index]})
        say(f"seed {seeds[index]}: {'PASS' if summary['passed'] else 'FAIL'}, "
            f"{summary['count']} collectives, {summary['cycles']} cycles, "
            f"{summary['wall_seconds']} s (replay: {replay_command(one)})")
        for line in summary["failures"][:5]:
            say(f"  FAIL: {line}")

    def failed(index, point, exc):
        errors.append(seeds[index])
        say(f"seed {seeds[index]}: error: {type(exc).__name__}: {exc}")

    executor.run_points(soak_point, [({**settings, "seed": s},) for s in seeds], args, done,
                        failed, label="soak", progress=progress)
    passed = all(s["passed"] for s in summaries.values())
    if args.json is not None:
        emit_json(args.json, json.dumps({"passed": passed and not errors, "seeds": seeds,
                                         "errors": errors,
                                         "runs": [summaries[s] for s in seeds
                                                  if s in summaries]}))
    print(f"result: {'PASS' if passed and not errors else 'FAIL'} ({len(summaries)} of "
          f"{len(seeds)} soaks ran, {sum(s['passed'] for s in summaries.values())} passed)",
          file=out)
    if errors:
        raise CommandError(f"{len(errors)} soak(s) could not run (seeds "
                           f"{', '.join(map(str, errors))})")
    return 0 if passed else 1


def run(args):
    """``scin soak``: run the soak ``args`` describe; print its summary (text or ``--json``)."""
    from ..sim.allreduce import parse_size
    from ..sim.coverage import report_lines
    from ..sim.soak import SoakConfig, run_soak
    from . import executor
    executor.check_arguments(args)
    if args.nvls and args.traffic_rate != TRAFFIC_RATE:
        raise ValueError("argument --traffic-rate: does not apply with --nvls (no ordinary "
                         "writes are drawn there)")
    if args.max_size is not None:
        try:
            size(2)(args.max_size)
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"argument --max-size: {exc}") from None
    settings = dict(count=args.count, seed=args.seed, endpoints=args.endpoints, sim=args.sim,
                    fault_rate=args.fault_rate, traffic_rate=args.traffic_rate,
                    reorder=not args.in_order, groups=args.groups, nvls=args.nvls,
                    max_size=None if args.max_size is None else parse_size(args.max_size),
                    trains=args.trains, gather_pairs=args.gather_pairs)
    cfg = SoakConfig(**settings)   # checks the parameters before anything runs
    if args.seeds > 1:
        if args.coverage_report:
            raise ValueError("--coverage-report takes one soak: coverage of several seeds is "
                             "not merged (run each seed with it)")
        return run_seeds(args, settings)
    quiet = args.json == "-"
    log = (lambda *a: None) if quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    summary = run_soak(cfg, log=log)
    if args.coverage_report:
        write_coverage_report(summary, args.coverage_report, replay_command(args))
    if args.json is not None:
        emit_json(args.json, json.dumps(summary))
    if quiet:
        return 0 if summary["passed"] else 1
    mode = f"NVLS soak ({summary['rounds']} rounds)" if args.nvls else "SCIN soak"
    print(f"{mode}: {summary['count']} collectives, seed {summary['seed']}, "
          f"{summary['endpoints']} endpoints, {summary['sim']}, {summary['cycles']} cycles, "
          f"{summary['wall_seconds']} s wall")
    w = max([32] + [len(label) for label in summary["outcomes"]])
    print(f"  {'class':{w}s} {'ok':>5s} {'failed':>7s}")
    for label, counts in summary["outcomes"].items():
        print(f"  {label:{w}s} {counts['ok']:5d} {counts['FAILED']:7d}")
    print(f"  {'operation':{w}s} {'ok':>5s} {'failed':>7s}")
    for op, counts in summary["ops"].items():
        print(f"  {op:{w}s} {counts['ok']:5d} {counts['FAILED']:7d}")
    if summary.get("paired"):
        print(f"  in-place AllGathers run in pairs of ranks: {summary['paired']}")
    if summary.get("modes"):
        print(f"  {'descriptor mode':{w}s} {'ok':>5s} {'failed':>7s}   "
              f"({summary['pushed']} pushed)")
        for mode, counts in summary["modes"].items():
            print(f"  {mode:{w}s} {counts['ok']:5d} {counts['FAILED']:7d}")
    if not args.nvls:
        print(f"  ordinary writes intact: {summary['ordinary_writes_intact']} of "
              f"{summary['ordinary_writes']}")
    c = summary["counters"]
    print("  ISA counters: " + ", ".join(f"{k}={v}" for k, v in c.items() if v))
    if args.nvls:
        print("  NVLS counters: " + ", ".join(f"{k}={v}" for k, v in
                                               summary["nvls_counters"].items()))
    if any(summary["switch_errors"]):
        print(f"  switch port error counters: {summary['switch_errors']}")
    reports = [("SCIN collectives: ", summary["coverage"]),
               ("NVLS All-Reduces: ", summary["nvls_coverage"])] if args.nvls else \
        [("", summary["coverage"])]
    for label, report in reports:
        first, *rest = report_lines(report)
        print(f"  {label}{first}")
        for line in rest:
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
