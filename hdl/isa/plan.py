"""What each collective reads and writes: the ISA's plan of an operation, and its software twin.

Every operation is run as one or more **phases**, each a stream of *segments* that the read issuer
turns into wave-table slots. A phase reads the same byte range (``src_base + x``) from its read
set, reduces it (or copies it, when one participant is read), and writes it at ``dst_base + x`` to
its write set. Which sets and bases a phase has follows from a few flags per operation
(:class:`OpPlan`, from :func:`op_plan`), so one read issuer, one wave table, one datapath and one
write-back serve every operation:

::

    op              phases  read set  write set                     src_base       dst_base
    ALLREDUCE       1       all       all                           0              0
    REDUCE          1       all       the root                      0              0
    BROADCAST       1       the root  all (in place: but the root)  0              0
    REDUCE_SCATTER  N       all       rank j                        j*C            0 (in place j*C)
    ALLGATHER       N       rank j    all (in place: but rank j)    0 (in place j*C)  j*C

With ``IsaParams.gather_pairs``, an in-place AllGather that :func:`paired` admits runs ``N - 1``
phases instead: phase ``j`` reads ranks ``j`` and ``j + 1`` at once (rank ``j + 1`` at ``C``
further on), writes rank ``j``'s flit to the ranks above ``j`` at ``dst_base`` and rank ``j +
1``'s to ranks ``0`` to ``j`` at ``dst_base + C``: every port receives a shard in every phase.

``C`` is the per-rank byte count (``run.msg.bytes``: NCCL's ``count``, ``recvcount`` or
``sendcount`` in bytes), ``j`` the phase, and rank ``j`` the ``j``-th participant in ascending port
order. **In place** (NCCL's ``sendbuff == recvbuff + rank * count`` for AllGather,
``recvbuff == sendbuff + rank * count`` for ReduceScatter, ``sendbuff == recvbuff`` otherwise) is
written, with symmetric buffers, as ``src_addr == dst_addr``.

A segment never crosses a ``max_payload`` boundary of its source or its destination offset (the
buffers are ``max_payload``-aligned, so no packet crosses a 4 KB page), and, for INT8, never a
``32 * flit_bytes`` boundary of either once one of them is off it: the segment's block scales
(``bytes / 32``) then lie in one flit at both ends, which the endpoints' bridges serve
(docs/PROTOCOL.md), whatever the shard offset. :func:`segments` is the software twin of the read
issuer's walk, used by the tests.
"""

from typing import NamedTuple

from .descriptor import Op
from .dtype import BLOCK_ELEMENTS


__all__ = ["OpPlan", "op_plan", "paired", "Segment", "segments", "ranks", "SCALE_DIVISOR"]

#: Data bytes per INT8 scale byte: one 2-byte FP16 scale per 64-byte block.
SCALE_DIVISOR = BLOCK_ELEMENTS // 2


class OpPlan(NamedTuple):
    """The flags that select an operation's phases (see the module's table).

    ``phased``: one phase per participant (else one phase); ``read_sel``/``write_sel``: the
    phase reads from / writes to its selected participant only (rank ``j``, or the root when not
    phased), else every participant; ``skip_self``: the selected participant is left out of the
    writes; ``src_step``/``dst_step``: the phase's source / destination base is ``j * C``;
    ``copy``: the one participant read is copied, not reduced (the datapath is bypassed).
    """
    phased:    bool
    read_sel:  bool
    write_sel: bool
    skip_self: bool
    src_step:  bool
    dst_step:  bool
    copy:      bool


def op_plan(op, in_place, pushed=False):
    """The :class:`OpPlan` of a data-moving ``op`` (not BARRIER), in place or not. ``pushed``
    (push mode): an AllGather's source base is 0 even in place, as each rank pushes its shard
    from the start of its push space (docs/ISA.md, Push mode)."""
    op = Op(op)
    if op == Op.ALLREDUCE:
        return OpPlan(False, False, False, False, False, False, False)
    if op == Op.REDUCE:
        return OpPlan(False, False, True, False, False, False, False)
    if op == Op.BROADCAST:
        return OpPlan(False, True, False, in_place, False, False, True)
    if op == Op.REDUCE_SCATTER:
        return OpPlan(True, False, True, False, True, in_place, False)
    if op == Op.ALLGATHER:
        return OpPlan(True, True, False, in_place, in_place and not pushed, True, True)
    raise ValueError(f"op {op.name} moves no data")


def paired(op, mask, nbytes, *, fabric, int8=False, in_place=False, pushed=False):
    """Whether an ISA built with ``gather_pairs`` runs this collective in pairs of ranks (the
    module's table): a pulled, in-place, FP16 or BF16 AllGather of at least two participants whose
    per-rank ``nbytes`` is a whole number of ``max_payload`` pages (so rank ``j``'s and rank ``j +
    1``'s segments, ``C`` apart, are cut alike and share one length). The twin of the wave
    controller's ``msg.pair``."""
    return (Op(op) == Op.ALLGATHER and in_place and not pushed and not int8
            and bin(mask).count("1") >= 2 and nbytes % fabric.max_payload == 0)


def ranks(mask):
    """The ports of a participant mask in rank order (ascending port number)."""
    return [port for port in range(mask.bit_length()) if mask >> port & 1]


class Segment(NamedTuple):
    """One wave-table slot's worth of an operation: read ``bytes`` at ``src_off`` of the ports
    of ``rmask``, write the result at ``dst_off`` to the ports of ``wmask``; ``last`` on the
    operation's final segment."""
    rmask:   int
    wmask:   int
    src_off: int
    dst_off: int
    bytes:   int
    last:    bool


def _chunk(left, src, dst, page, scale_page):
    """Bytes of the next segment: at most ``left``, up to the next ``page`` boundary of both
    offsets, and (``scale_page``, INT8) up to its next boundary of both while either is off it."""
    n = min(left, page - src % page, page - dst % page)
    if scale_page and (src % scale_page or dst % scale_page):
        n = min(n, scale_page - src % scale_page, scale_page - dst % scale_page)
    return n


def segments(op, mask, nbytes, *, fabric, int8=False, root=0, in_place=False, pushed=False,
             gather_pairs=False):
    """The segments the read issuer walks for ``op`` over the participants ``mask``, ``nbytes``
    per rank, in order (the twin of :class:`~.read_issuer.ReadIssuer`); ``pushed``: in push
    mode, where a segment's source offset is its place in the push space; ``gather_pairs``: the
    ISA's parameter (a paired phase's segment reads two ranks and writes every participant; its
    offsets are the lower rank's)."""
    plan = op_plan(op, in_place, pushed)
    order = ranks(mask)
    if gather_pairs and paired(op, mask, nbytes, fabric=fabric, int8=int8, in_place=in_place,
                               pushed=pushed):
        return _walk([(1 << lo | 1 << hi, mask) for lo, hi in zip(order, order[1:])], plan,
                     nbytes, fabric, int8)
    sels = order if plan.phased else [order[root]]
    phases = []
    for sel in sels:
        bit = 1 << sel
        phases.append((bit if plan.read_sel else mask,
                       (bit if plan.write_sel else mask) & ~(bit if plan.skip_self else 0)))
    return _walk(phases, plan, nbytes, fabric, int8)


def _walk(phases, plan, nbytes, fabric, int8):
    """The segments of ``phases`` (``(rmask, wmask)`` each, the ``j``-th at ``j * C`` where the
    plan steps its base), in order, the last marked."""
    page = fabric.max_payload
    scale_page = SCALE_DIVISOR * fabric.flit_bytes if int8 else 0
    out = []
    for j, (rmask, wmask) in enumerate(phases):
        src_base = j * nbytes if plan.src_step else 0
        dst_base = j * nbytes if plan.dst_step else 0
        x = 0
        while x < nbytes:
            n = _chunk(nbytes - x, src_base + x, dst_base + x, page, scale_page)
            out.append(Segment(rmask, wmask, src_base + x, dst_base + x, n, False))
            x += n
    out[-1] = out[-1]._replace(last=True)
    return out
