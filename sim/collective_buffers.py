"""Where a collective's inputs and results lie in each rank's memory (NCCL's buffer layouts).

The golden model (:func:`scin.sim.numerics.collective`) computes *what* each rank receives; this
module says *where*: the byte regions a rank's input occupies before a collective and the regions
its result overwrites, for every operation, in place or not (docs/ISA.md, Operations). A check of
a run fills each rank's memory with a background pattern, writes :func:`input_regions`, runs the
collective, and compares the whole memory with the same background plus :func:`result_regions`:
so a byte written where the operation gives the rank nothing is caught too.
"""

from typing import NamedTuple

import numpy as np

from .numerics import BLOCK, op_key


__all__ = ["Buffers", "input_regions", "result_regions", "in_place_buffers", "SCALE_DIVISOR"]

#: Data bytes per INT8 scale byte (a 2-byte scale per 64-byte block): a scale lies at its data's
#: offset divided by this.
SCALE_DIVISOR = BLOCK // 2


class Buffers(NamedTuple):
    """A descriptor's four buffer addresses (symmetric: the same in every rank's memory)."""
    src: int
    dst: int
    src_scale: int
    dst_scale: int


def in_place_buffers(bufs):
    """The same buffers in place: the result over the input (``dst = src``, scales too)."""
    return bufs._replace(dst=bufs.src, dst_scale=bufs.src_scale)


def _is_in_place(bufs):
    return bufs.src == bufs.dst


def _regions(base, scale_base, offset, data, scales):
    """``data`` (bytes) at ``base + offset`` and, if given, ``scales`` at the scale offset."""
    out = [(base + offset, bytes(data))]
    if scales is not None:
        out.append((scale_base + offset // SCALE_DIVISOR, bytes(scales)))
    return out


def _bytes(a):
    return None if a is None else np.ascontiguousarray(a).tobytes()


def input_regions(op, rank, data, scales, bufs):
    """The regions rank ``rank``'s input occupies: ``data`` (its row of the golden model's input)
    and, for INT8, ``scales``. An in-place AllGather's shard lies at its place in the result."""
    key = op_key(op)
    nbytes = np.asarray(data).nbytes
    if key == "allgather" and _is_in_place(bufs):
        return _regions(bufs.dst, bufs.dst_scale, rank * nbytes, _bytes(data), _bytes(scales))
    return _regions(bufs.src, bufs.src_scale, 0, _bytes(data), _bytes(scales))


def result_regions(op, rank, result, bufs, *, root=0):
    """The regions rank ``rank``'s result overwrites: ``result`` is its entry of
    :func:`~scin.sim.numerics.collective` (None: it receives nothing). In place, a ReduceScatter
    result lies at the rank's shard of the input, and an AllGather or a Broadcast writes nothing
    over the rank's own input (it is already in place)."""
    if result is None:
        return []
    key = op_key(op)
    out, scales = result.out_bytes, result.scale_bytes
    if key == "reduce-scatter" and _is_in_place(bufs):
        return _regions(bufs.dst, bufs.dst_scale, rank * len(out), out, scales)
    if key == "broadcast" and _is_in_place(bufs) and rank == root:
        return []
    return _regions(bufs.dst, bufs.dst_scale, 0, out, scales)
