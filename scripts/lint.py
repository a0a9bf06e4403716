"""Lint the generated Verilog of every block with the project's Verilator (``-Wall``).

Every waiver is listed in :data:`LINT_WAIVERS` with its reason, and documented in
``docs/DEVELOPING.md``. Anything else Verilator reports fails the lint.
"""

import subprocess

from ..sim.runner import extra_sources, verilog_for
from ..sim.toolchain import setup_environment
from .export import select_blocks


__all__ = ["LINT_WAIVERS", "lint_verilog", "lint_blocks"]

#: (flag, reason). Kept short on purpose: each entry is a class of warning that Amaranth's Verilog
#: output produces by construction and that does not indicate a design problem.
LINT_WAIVERS = [
    ("-Wno-WIDTH", "Amaranth's backend emits width-extending operands (e.g. 1-bit compares "
                   "widened to the target); widths are checked by Amaranth's own type system."),
    ("-Wno-UNUSEDSIGNAL", "Amaranth keeps every named signal of a struct payload even when a block "
                          "only reads some of its fields (e.g. a header's address in a router)."),
    ("-Wno-DECLFILENAME", "All modules of one elaboration share one file, named after the top."),
    ("-Wno-UNUSEDPARAM", "Yosys leaves unused localparams in generated memories."),
    ("-Wno-PROCASSINIT", "Amaranth declares each register with its reset value as the declaration's "
                         "initialiser (`reg x = 8'h00;`) and assigns it in an always block: the "
                         "initialiser is the power-on value, on purpose."),
    ("-Wno-CASEINCOMPLETE", "Amaranth's `casez` for m.Switch/m.FSM has no default arm: every signal "
                            "it assigns already has a default assignment above the case, so an "
                            "unmatched value keeps that default (no latch; Verilator's LATCH check "
                            "stays on)."),
]


def lint_verilog(path, top):
    """Run ``verilator --lint-only -Wall`` with the waivers; return ``(ok, output)``."""
    setup_environment()
    cmd = ["verilator", "--lint-only", "-Wall", *(flag for flag, _ in LINT_WAIVERS),
           "--top-module", top, str(path), *map(str, extra_sources(path))]
    result = subprocess.run(cmd, capture_output=True, text=True)
    output = (result.stdout + result.stderr).strip()
    return result.returncode == 0 and "%Warning" not in output, output


def lint_blocks(params, names=None, log=print):
    """Lint every selected block; print one line per block and return True if all are clean."""
    all_ok = True
    for name, (factory, _) in select_blocks(names).items():
        path = verilog_for(lambda: factory(params), name, repr(params))
        ok, output = lint_verilog(path, name)
        log(f"{name:20s} {'clean' if ok else 'FAILED'}")
        if not ok:
            log(output)
        all_ok &= ok
    return all_ok
