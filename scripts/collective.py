"""``scin collective``: any collective of the set on the simulated system, checked bit for bit.

The options of ``scin allreduce`` plus the operation, its root and in place; the report (text or
``--json``, the same keys plus ``op``, ``root``, ``in_place`` and ``bound_cycles``) and the exit
status are ``scin allreduce``'s (``scripts/allreduce.py``).
"""

from . import allreduce
from .options import integer


__all__ = ["add_arguments", "run"]


def add_arguments(p):
    """The options of ``scin collective``: ``--op``, ``--root``, ``--in-place`` and every option of
    ``scin allreduce``."""
    from ..sim.allreduce import OPS
    p.add_argument("--op", choices=OPS, default="allreduce",
                   help="the collective, with NCCL's semantics (default: allreduce)")
    p.add_argument("--root", type=integer(0), default=0,
                   help="broadcast, reduce: the root rank, 0 to endpoints-1 (default: 0)")
    p.add_argument("--in-place", action="store_true",
                   help="the result over the input (NCCL's in-place layouts: src_addr == dst_addr)")
    allreduce.add_arguments(p)


def run(args):
    """Run the collective ``args`` describe; print its report."""
    return allreduce.run(args)
