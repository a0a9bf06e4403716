"""``scin clean``: remove the run folders and the command outputs, keep the built models.

Removes :data:`~scin.sim.system_run.RUNS_ROOT` (``.build/runs/``, one folder per simulation run)
and :data:`~scin.scripts.options.OUT_ROOT` (``out/``, the reports commands write by default).
Everything else under ``.build/`` (Verilog, Verilator and Icarus models, synthesis, timing and
proof caches) stays: those take minutes to rebuild and are keyed by content, never stale.
"""

import shutil

from ..sim.system_run import RUNS_ROOT
from .options import OUT_ROOT


__all__ = ["add_arguments", "run", "TARGETS"]

#: What ``scin clean`` removes.
TARGETS = (RUNS_ROOT, OUT_ROOT)


def add_arguments(p):
    """The options of ``scin clean``."""
    p.add_argument("--dry-run", action="store_true", help="list what would be removed and exit")


def _size(path):
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def run(args):
    """Remove :data:`TARGETS` (or, with ``--dry-run``, list them); print one line per folder."""
    for path in TARGETS:
        if not path.exists():
            print(f"{path}: absent")
            continue
        size = _size(path) / 2**20
        if args.dry_run:
            print(f"{path}: would remove {size:.1f} MiB")
            continue
        shutil.rmtree(path)
        print(f"{path}: removed {size:.1f} MiB")
    return 0
