"""NVLS's closed form: NCCL's NVLS kernels on the RTL's NVLS engine (docs/NVLS.md), as ``scin
compare`` measures them, and on NVLink-class fabrics. The form is the RTL's mechanism (hops, the
memory read, atomics served one at a time, packets and their headers on each link, the engine's
request unit and sequencer, the ``ld_reduce`` window); its one own-cycle constant
(``Calibration.nvls_own``) and the atomic's are fitted by :func:`scin.sim.compare_fit.fit_compare`.
Times are in seconds.
"""

from .fabric_model import RTL_FABRIC, atomic_seconds, check_collective, load_calibration

__all__ = ["nvls_time", "nvls_ceiling", "NVLS_PACKET_BYTES", "NVLS_WINDOW",
           "NVLS_REQUEST_CYCLES", "NVLS_SEQUENCER_CYCLES", "NVLS_BARRIER_OWN",
           "NVLS_ISSUE_CYCLES"]

#: NVLS's ``ld_reduce`` and ``st`` packet: the reduction-table entry of the RTL's engine
#: (``NvlsParams.entry_bytes``), the paper's 1 KiB.
NVLS_PACKET_BYTES = 1024
#: ``ld_reduce``s a rank keeps in flight in ``scin compare`` (its ``--window``). NCCL's kernel
#: keeps as many as its warps issue: the scale study leaves the window open (``window=None``).
NVLS_WINDOW = 8
#: The RTL's NVLS engine (hdl/nvls/): the request unit spends 3 cycles on a request (IDLE,
#: DECODE, HEADER) and one more per payload flit it multicasts; the reduction sequencer 4 per
#: entry (IDLE, WAIT, HEADER, FREE) and one per result flit.
NVLS_REQUEST_CYCLES = 3
NVLS_SEQUENCER_CYCLES = 4
#: One NVLS barrier's own cycles beyond its 2 hops and the N atomic adds at every member, and
#: the accelerator's cycles from an event (a flag seen, a kernel's last acknowledgement) to the
#: next command's first packet: from the event trace of the ``scin compare`` runs (every rank
#: sees the first barrier complete 2 x 90 + 10 + 47 N cycles after the first ``red`` leaves, at
#: N = 4 and 8; every command leaves 5 cycles after the event before it). The rest of NVLS's
#: own cycles is fitted (``Calibration.nvls_own``).
NVLS_BARRIER_OWN = 10
NVLS_ISSUE_CYCLES = 5
#: NCCL's ring as sim/ring_allreduce.py runs it: slices per chunk (``ALLREDUCE_CHUNKSTEPS /

def _flit_shards(size, n, flit):
    """Every rank's share of ``size`` bytes in whole flits, the first ranks one flit more when it
    does not divide (sim/nvls_allreduce.py's ``shards``): bytes per rank, some perhaps 0."""
    base, extra = divmod(-(-size // flit), n)
    return [(base + (r < extra)) * flit for r in range(n)]


def _nvls_check(window, packet, f):
    """Raise ValueError naming ``window`` or ``packet`` unless both are valid on ``f``."""
    if window is not None and (not isinstance(window, int) or isinstance(window, bool)
                               or window < 1):
        raise ValueError(f"window must be a positive number of ld_reduces or None, "
                         f"not {window!r}")
    if not isinstance(packet, int) or isinstance(packet, bool) or packet <= 0 \
            or packet % f.flit_bytes:
        raise ValueError(f"packet must be a positive multiple of the {f.flit_bytes}-byte flit, "
                         f"not {packet!r}")


def nvls_time(op, size, endpoints, fabric=RTL_FABRIC, cal=None, window=None,
              packet=NVLS_PACKET_BYTES):
    """Seconds NVLS takes, as the RTL's NVLS engine and NCCL's NVLS kernels run it
    (docs/NVLS.md; calibrated against ``scin compare``): from the last rank's first barrier
    ``red`` to the last rank seeing the second barrier complete.

    Parameters
    ----------
    op, size, endpoints, fabric, cal
        As :func:`scin_time`. Broadcast (the root's ``st`` of the buffer) and Reduce (the root's
        ``ld_reduce`` of it) have no NVLS program in the RTL; they are its AllGather and
        ReduceScatter with one rank.
    window : int or None
        ``ld_reduce``\\ s in flight per rank (``scin compare --window``, 8 by default; None: as
        many as it takes to cover the round trip).
    packet : int
        Bytes per ``ld_reduce`` and ``st`` (the reduction entry, 1 KiB).

    The form (``L`` hop, ``M`` memory read, ``a`` an atomic add at a memory, ``c`` ISA cycle,
    ``t`` flit time, ``f`` payload flits of a packet)::

        T = (2L + b + N a) + i + D + i + (2L + b + a + (R - 1) max(0, a - d))

    Two barriers: every rank's ``red`` is an atomic add at every member, served one at a time
    (``N a``); the second one's adds arrive as the ``R`` ranks with data finish, ``d`` apart.
    ``D`` is the data phase of the last rank: its first packet's chain (All-Reduce: the
    ``ld_reduce``, 4 hops and a read, then its ``st`` and the acknowledgement, 4 hops; the
    engine's reducer 2 + 4 (N - 1) cycles) and then, packet after packet of all ranks, the
    largest of

    * the links: per 1 KiB of All-Reduce, a member's link carries the ``st`` to every member
      (f + 1 flits) and the read request (1) and, for its own 1/N of the packets, the result
      and the acknowledgement: ``(f + 2)(N + 1)/N`` flits (0.81 of the link at N = 4);
    * the engine (``nvls_per_port=False``): its one request unit (a ``ld_reduce`` 3 cycles, an
      ``st`` 3 + f) and one sequencer (4 + f per result);
    * the window: ``W`` ``ld_reduce``\\ s per rank in flight over their round trip.

    With one packet per rank the packets follow one another at the engine's spacing ``d`` (the
    sequencer's 4 + f) instead. Ranks without data (a message under N flits) go straight to the
    second barrier, and their ``red``\\ s hold every member's memory ahead of the reads (all but
    one of them, ``a`` each).
    """
    cal = cal or load_calibration()
    check_collective(op, size, endpoints)
    f = fabric
    _nvls_check(window, packet, f)
    n = endpoints
    c = f.isa_cycle_s
    a = atomic_seconds(f, cal)
    barrier = 2 * f.hop_s + NVLS_BARRIER_OWN * c
    if op == "barrier":
        return barrier + n * a
    ranks = [d for d in _nvls_data(op, -(-size // f.planes), n, f.flit_bytes) if d]
    empty = n - len(ranks)
    flits = min(max(ranks), packet) // f.flit_bytes
    count = sum(-(-d // packet) for d in ranks)
    rounds = max(-(-d // packet) for d in ranks)
    loads = op in ("allreduce", "reduce-scatter", "reduce")
    first, rtt = _nvls_first_packet(loads, n, flits, f, cal)
    link, engine, spacing = _nvls_rates(op, n, flits, f)
    if rounds == 1:
        step = spacing
    else:
        step = max(link, engine, rtt / (len(ranks) * window) if window and loads else 0.0)
    held = max(0, empty - 1) * a
    data_phase = first + held + (count - 1) * step
    last = barrier + a + (len(ranks) - 1) * max(0.0, a - spacing)
    return (barrier + n * a) + 2 * NVLS_ISSUE_CYCLES * c + data_phase + last


def _nvls_data(op, share, n, flit):
    """Bytes of data each of the ``n`` ranks loads or stores for ``op`` on its ``share``: the
    All-Reduce's flit shards, ReduceScatter's and AllGather's whole buffer at every rank,
    Broadcast's and Reduce's at the root only (0 at the others)."""
    whole = -(-share // flit) * flit
    if op == "allreduce":
        return _flit_shards(share, n, flit)
    if op in ("reduce-scatter", "allgather"):
        return [whole] * n
    return [whole] + [0] * (n - 1)


def _nvls_first_packet(loads, n, flits, f, cal):
    """``(first, rtt)``: seconds of the first packet's chain and of an ``ld_reduce``'s round
    trip (0 for the stores of AllGather and Broadcast, ``loads`` False)."""
    L, M, c, t = f.hop_s, f.mem_s, f.isa_cycle_s, f.flit_s
    own = cal.nvls_own - 2 * (NVLS_BARRIER_OWN + NVLS_ISSUE_CYCLES)
    reducer = (2 + 4 * (n - 1)) * c
    if loads:
        first = 8 * L + M + own * c + reducer + flits * t
        # The ld_reduce's round trip, half of the chain's hops and own cycles.
        rtt = 4 * L + M + own / 2 * c + reducer + flits * t
    else:
        first = 4 * L + own / 2 * c + flits * t
        rtt = 0.0
    return first, rtt


def _nvls_rates(op, n, flits, f):
    """``(link, engine, spacing)``: seconds per packet that a member's link, the engine and,
    within one round, the engine's spacing of consecutive packets allow."""
    c, t = f.isa_cycle_s, f.flit_s
    # The accelerator writes a ReduceScatter's or Reduce's result to its own memory through the
    # switch (its link carries it up and down); a GPU stores it locally.
    via = 0 if f.gpu_endpoints else 1
    if op == "allreduce":
        link = (flits + 2) * (n + 1) / n * t
        engine = max(2 * NVLS_REQUEST_CYCLES * c, NVLS_SEQUENCER_CYCLES * c) + flits * t
        spacing = NVLS_SEQUENCER_CYCLES * c + flits * t
    elif op == "reduce-scatter":
        link = (flits + 1 + (via * (flits + 1) + 1) / n) * t
        engine = max(NVLS_REQUEST_CYCLES * c, NVLS_SEQUENCER_CYCLES * c + flits * t)
        spacing = NVLS_SEQUENCER_CYCLES * c + flits * t
    elif op == "reduce":
        link = (flits + 2 + via * (flits + 2)) * t
        engine = max(NVLS_REQUEST_CYCLES * c, NVLS_SEQUENCER_CYCLES * c + flits * t)
        spacing = NVLS_SEQUENCER_CYCLES * c + flits * t
    elif op == "allgather":
        link = (flits + 1 + 1 / n) * t
        engine = spacing = NVLS_REQUEST_CYCLES * c + flits * t
    else:   # broadcast
        link = (flits + 2) * t
        engine = spacing = NVLS_REQUEST_CYCLES * c + flits * t
    if f.nvls_per_port:
        engine = spacing = 0.0
    # Within one round the packets only have to follow one another through the links' first
    # packet; the serial engine spaces them further.
    return link, engine, max(spacing, (flits + 1) * t)


def nvls_ceiling(fabric, endpoints, packet=NVLS_PACKET_BYTES):
    """NVLS All-Reduce's large-message efficiency bound on ``fabric``'s links: per packet of
    ``f`` payload flits a member's link carries ``(f + 2)(N + 1)/N`` flits (its header and read
    request or acknowledgement, and the detour of its own results), ``f / ((f + 2)(N + 1)/N)``
    of the link: 0.753 at N = 4 and 0.837 at N = 8 for 1 KiB packets of 32 B flits."""
    flits = packet // fabric.flit_bytes
    return flits / ((flits + 2) * (endpoints + 1) / endpoints)


