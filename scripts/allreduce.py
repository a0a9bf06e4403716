"""``scin allreduce``: one All-Reduce on the simulated system, checked against the golden model.

The simulation itself is :func:`scin.sim.allreduce.run_allreduce`; this module is its command line:
the options, the text report and the exit status (0 pass, 1 mismatch or unexpected status).
``scin collective`` (``scripts/collective.py``) adds ``--op``, ``--root`` and ``--in-place`` to
the same options and the same report; ``scin allreduce`` is its ``--op allreduce``.
"""

import json
import sys

from ..hdl.paper import CLOCK_MHZ, CLOCK_PERIOD_NS, MEM_LATENCY, ONE_WAY_LATENCY
from ..sim.waves import VIEWER
from .options import integer, json_file, out_dir, size, wave_window
from .outputs import write_text

#: The ISA's slot: the wave table's and the push space's unit.
_SLOT = 4096


__all__ = ["add_arguments", "run"]


def add_arguments(p):
    """The options of ``scin allreduce``."""
    p.add_argument("--endpoints", type=integer(2, 8), default=4,
                   help="endpoints / switch ports, 2-8 (default: 4)")
    p.add_argument("--dtype", choices=("fp16", "bf16", "int8"), default="fp16",
                   help="element type; int8 is INQ: INT8 + one FP16 scale per 64 elements "
                        "(default: fp16)")
    p.add_argument("--size", type=size(2, even=True), default="4KiB",
                   help="message size in its 16-bit form (elements x 2 bytes) for every dtype, "
                        "e.g. 64B, 4KiB, 1MiB (default: 4KiB)")
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                   help="simulator (default: verilator)")
    p.add_argument("--seed", type=integer(0, 2**32 - 1), default=1,
                   help="random seed of the data, 0 to 2^32-1 (default: 1)")
    p.add_argument("--json", type=json_file, nargs="?", const="-", default=None, metavar="FILE",
                   help="one JSON object (match, endpoints, dtype, size_bytes, elements, "
                        "cycles, latency_us, efficiency, status, per_endpoint, counters, ...) "
                        "on standard output instead of the text, or, with FILE, into FILE")
    p.add_argument("--save", type=out_dir, metavar="DIR",
                   help="write ep{i}_in.npy, ep{i}_out.npy (+ ep{i}_in_scales.npy, "
                        "ep{i}_out_scales.npy for int8) and report.json into DIR; keeps the "
                        "run folder")
    p.add_argument("--keep", action="store_true",
                   help="keep the run folder under .build/runs/ (a passing run's is removed)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on standard error (whether the model is cached or built, "
                        "the build's progress, the simulation's cycle and rate every 5 s)")
    p.add_argument("--waves", nargs="?", const="0:", default=None, type=wave_window,
                   metavar="START:END",
                   help="record a waveform of the whole system as FST in the run folder, kept, "
                        "and print its path and the command that opens it; START:END limits it "
                        "to those cycles from time 0 (END excluded; START: to the end), which "
                        "keeps a long run's trace small. On Verilator the first recording of a "
                        "configuration builds a traced model (and without a C++ compiler or "
                        "liblz4.so.1 it records VCD, saying so)")
    p.add_argument("--trace", action="store_true",
                   help="break the latency down hop by hop against the latency model's floor "
                        "(Icarus; fp16/bf16 buffers of at most 4KiB per rank; any op)")
    timing = p.add_argument_group("latency model and ISA configuration")
    timing.add_argument("--latency", type=integer(4), default=ONE_WAY_LATENCY,
                        help="one-way endpoint-to-switch latency in cycles, at least 4 "
                             "(default: "
                             f"{ONE_WAY_LATENCY} = {ONE_WAY_LATENCY * CLOCK_PERIOD_NS} ns)")
    timing.add_argument("--mem-latency", type=integer(3, 4096), default=MEM_LATENCY,
                        help="endpoint memory read latency in cycles, 3 to 4096 (default: "
                             f"{MEM_LATENCY} = {MEM_LATENCY * CLOCK_PERIOD_NS} ns)")
    timing.add_argument("--reorder", action="store_true",
                        help="endpoint memories return reads out of order across IDs")
    timing.add_argument("--capacity", type=size(_SLOT), default="32KiB",
                        help="wave-table capacity per participant: 4KiB times a power of two "
                             "(default: 32KiB)")
    timing.add_argument("--outstanding", type=integer(1), default=8,
                        help="outstanding waves k, dividing the table's capacity/4KiB slots: the "
                             "table is regulated as k waves of capacity/k (default: 8)")
    timing.add_argument("--flag-mode", choices=("ordered", "acked"), default="ordered",
                        help="ordered: completion flag right behind the data; acked: after every "
                             "write response, as in the paper (default: ordered)")
    timing.add_argument("--replays", type=integer(1), default=1,
                        help="run the captured descriptor this many times (default: 1)")
    timing.add_argument("--mode", choices=("pull", "push", "auto"), default="pull",
                        help="pull: the ISA reads every input after the barrier (the paper's "
                             "protocol); push: every participant writes its input into the ISA's "
                             "reserved space, no read (docs/ISA.md, Push mode); auto: push up to "
                             "the ISA's threshold, pull above (default: pull)")
    timing.add_argument("--push-capacity", type=size(0), default=None,
                        help="the ISA's push space per participant (one push resource), a "
                             "multiple of 4KiB; 0: none. "
                             "Default: 32KiB with --mode push or auto, else 0 (no push logic "
                             "built)")
    timing.add_argument("--trains", type=integer(1), default=1,
                        help="wave-level requests: up to N slots per READ_WAVE (read from "
                             "consecutive free slots) and per acknowledged write (the others are "
                             "WRITE_POSTED); 1: one READ and one WRITE_RESP per slot, the paper's "
                             "protocol (docs/PROTOCOL.md; default: 1)")
    timing.add_argument("--gather-pairs", action="store_true",
                        help="build the ISA with gather_pairs: an in-place AllGather whose shard "
                             "is whole 4 KiB pages reads two ranks at once and runs N-1 phases "
                             "instead of N, every link busy in each (docs/ISA.md; "
                             "scin collective --op allgather only; default: off, the paper's "
                             "configuration)")


#: The operations' names in the report's first line.
_NAMES = {"allreduce": "All-Reduce", "reduce-scatter": "ReduceScatter", "allgather": "AllGather",
          "broadcast": "Broadcast", "reduce": "Reduce", "barrier": "Barrier"}


def _status_text(status):
    from ..hdl.isa import FlagStatus
    if status == 0:
        return "ok"
    return "|".join(flag.name.lower() for flag in FlagStatus if status & flag.value) or str(status)


def _check_combinations(args, op):
    """Refuse, naming the option, what the hardware or the operation does not allow."""
    from ..sim.allreduce import ROOTED_OPS
    slots = args.capacity // _SLOT
    if args.capacity % _SLOT or slots & (slots - 1):
        raise ValueError(f"argument --capacity: must be 4KiB times a power of two (4KiB, 8KiB, "
                         f"16KiB, ...), not {args.capacity} B")
    if slots % args.outstanding:
        divisors = ", ".join(str(d) for d in range(1, slots + 1) if slots % d == 0)
        raise ValueError(f"argument --outstanding: must divide the {slots} slots of the "
                         f"{args.capacity // 1024}KiB wave table ({divisors}), "
                         f"not {args.outstanding}")
    if args.trains > slots:
        raise ValueError(f"argument --trains: must be from 1 to the {slots} slots of the wave "
                         f"table, not {args.trains}")
    if args.push_capacity and args.push_capacity % _SLOT:
        raise ValueError(f"argument --push-capacity: must be a multiple of 4KiB, "
                         f"not {args.push_capacity} B")
    if getattr(args, "gather_pairs", False) and op != "allgather":
        raise ValueError(f"argument --gather-pairs: applies to scin collective --op allgather "
                         f"only, not to {op}")
    if getattr(args, "root", 0) and op not in ROOTED_OPS:
        raise ValueError(f"argument --root: applies to --op broadcast and reduce only, not {op}")
    if getattr(args, "root", 0) >= args.endpoints:
        raise ValueError(f"argument --root: must be a rank from 0 to {args.endpoints - 1}, "
                         f"not {args.root}")
    if getattr(args, "in_place", False) and op == "barrier":
        raise ValueError("argument --in-place: a barrier moves no data")


def config(args):
    """The :class:`~scin.sim.allreduce.CollectiveConfig` of ``args``, its hardware checked (no
    build, no simulation); an impossible combination is a ``ValueError`` naming the option."""
    from ..sim.allreduce import CollectiveConfig
    from ..sim.system_config import SystemConfig
    op = getattr(args, "op", "allreduce")
    _check_combinations(args, op)
    hw = SystemConfig(endpoints=args.endpoints, one_way_latency=args.latency,
                      mem_latency=args.mem_latency, reorder=args.reorder,
                      capacity=args.capacity, outstanding=args.outstanding,
                      push_capacity=args.push_capacity or 0, trains=args.trains,
                      gather_pairs=getattr(args, "gather_pairs", False))
    cfg = CollectiveConfig(op=op, root=getattr(args, "root", 0),
                           in_place=getattr(args, "in_place", False), dtype=args.dtype,
                           size=args.size, seed=args.seed, sim=args.sim,
                           flag_mode=args.flag_mode, replays=args.replays, trace=args.trace,
                           mode=args.mode, hw=hw)
    cfg.system().params()
    return cfg


def run(args):
    """Run the All-Reduce ``args`` describe; print the report (text or ``--json``). A passing
    run's folder is removed unless ``--keep``, ``--save`` or ``--waves``."""
    from ..sim.allreduce import run_allreduce, ROOTED_OPS
    from ..sim.system_run import remove_run
    cfg = config(args)
    op = cfg.op
    to_stdout = args.json == "-"
    log = (None if to_stdout or args.quiet
           else (lambda msg: print(msg, file=sys.stderr, flush=True)))
    report = run_allreduce(cfg, save=args.save, waves=args.waves, log=log)
    ok = report["match"] and report["status"] == report["expected_status"]
    if ok and not (args.keep or args.save or args.waves):
        remove_run(report["run_dir"])
    if args.json is not None and not to_stdout:
        write_text(args.json, json.dumps(report) + "\n")
    if to_stdout:
        print(json.dumps(report))
        return 0 if ok else 1
    where = (f", root {cfg.root}" if op in ROOTED_OPS else "") + \
        (", in place" if cfg.in_place else "")
    per_rank = "" if op == "allreduce" else " per rank"
    print(f"SCIN {_NAMES[op]}: {cfg.endpoints} endpoints, {cfg.dtype}, {cfg.size} B "
          f"({cfg.elements} elements){per_rank}{where}, {cfg.sim}, seed {cfg.seed}")
    for e in report["per_endpoint"]:
        print(f"  endpoint {e['endpoint']}: {'match   ' if e['match'] else 'MISMATCH'} "
              f"flag generation {e['flag_generation']}, status {_status_text(e['flag_status'])}, "
              f"seen {e['flag_cycle']} cycles after the last "
              f"{'first push' if report['pushed'] else 'arrival'}"
              + ("" if e["match"] else f" ({e['mismatched_bytes']} bytes differ)"))
    t = report["cycles"]
    print(f"latency     {t} cycles = {report['latency_us']:.2f} us at {CLOCK_MHZ} MHz"
          + (f" (replays: {report['replay_cycles']})" if cfg.replays > 1 else ""))
    if cfg.bound_bytes:
        bound = f"{cfg.size} B" if op == "allreduce" else f"one-link bound {cfg.bound_bytes} B"
        print(f"efficiency  {report['efficiency']:.3f} ({bound} / ({t} cycles x "
              f"{cfg.hw.flit_width // 8} B/cycle))")
    print(f"status      {_status_text(report['status'])} (golden model: "
          f"{_status_text(report['expected_status'])})")
    c = report["counters"]
    print("counters    " + ", ".join(f"{k}={v}" for k, v in c.items() if v))
    print(f"parameters  one-way latency {cfg.hw.one_way_latency} cycles, memory latency "
          f"{cfg.hw.mem_latency} cycles, wave table {cfg.hw.capacity} B in {cfg.hw.outstanding} "
          f"waves, "
          f"flags {cfg.flag_mode}{', reordered reads' if cfg.hw.reorder else ''}, mode {cfg.mode}"
          + (f" ({'pushed' if report['pushed'] else 'pulled'}; push space "
             f"{cfg.hw.push_capacity} B)" if cfg.hw.push_capacity else "")
          + (f", trains of {cfg.hw.trains} slots" if cfg.hw.trains > 1 else "")
          + (", gather pairs" if cfg.hw.gather_pairs else ""))
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
        print(f"waveform    {report['waveform']} ({args.waves.describe()}; open it with "
              f"`{VIEWER} {report['waveform']}`)")
    if args.save:
        print(f"saved       {args.save}/ep*_in.npy, ep*_out.npy, report.json")
    cps = report.get("sim_cycles_per_second")
    print(f"result      {'PASS: every endpoint bit-exact with the golden model' if ok else 'FAIL'} "
          f"({report['wall_seconds']:.1f} s wall"
          + (f"; simulation {cps:,} cycles/s" if cps else "") + ")")
    return 0 if ok else 1
