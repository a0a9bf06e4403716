"""NVLS and ring All-Reduce on the RTL fabric, in cycles: what `scin bench` sets beside its
measured SCIN figures.

These are thin wrappers of :func:`scin.sim.nvls_model.nvls_time` and
:func:`scin.sim.ring_model.ring_time` on the fabric of a :class:`~scin.hdl.paper.LinkModel`
(default :data:`~scin.hdl.paper.PAPER_LINK`, the paper latency model): one model of each
algorithm, whose forms follow the RTL's mechanism (NCCL's NVLS kernel on the switch's NVLS engine,
NCCL's ring on the accelerator model; docs/NVLS.md) and whose few own-cycle constants are
fitted to ``scin compare``'s measurements (``docs/bench/compare.csv``, stored in
``docs/bench/calibration.json``). docs/SCALE.md shows the model against every measured point; at
the paper latency model, N = 4 and 8, 64 B to 16 MiB, they are within 2.2% of the RTL for NVLS
(0.9% but at N = 4 from 1 MiB, where 8 ``ld_reduce`` requests per rank only just cover the round
trip) and 0.6% for the ring. They stay
*models*: the NVLS and ring cycle counts of the RTL itself are ``scin compare``'s
(docs/COMPARISON.md), and ``docs/PERFORMANCE.md`` says which figures are which.

NVLS: two barriers (every rank's ``multimem.red`` an atomic add at every member), then each rank's
``1/N`` shard as 1 KiB ``ld_reduce`` + ``st`` packets, ``window`` ``ld_reduce``\\ s in flight
(``scin compare``'s 8 by default). Ring: ``2 (N - 1)`` steps of ``N`` chunks in 2 slices each,
every slice a fenced REDUCE_SEND and a flag to the next rank. Every function returns cycles of
the link's clock.
"""

from ..hdl.paper import PAPER_LINK, LinkModel
from .fabric_model import RTL_FABRIC, Fabric, load_calibration
from .nvls_model import NVLS_PACKET_BYTES, NVLS_WINDOW, nvls_time
from .ring_model import ring_time

__all__ = ["LinkModel", "PAPER_LINK", "link_fabric", "serialisation", "nvls_cycles", "ring_cycles",
           "PACKET_BYTES"]

#: SCIN's packet (the wave slot); :func:`serialisation` counts its header flits.
PACKET_BYTES = 4096


def link_fabric(link):
    """The :class:`~scin.sim.fabric_model.Fabric` of the :class:`LinkModel` ``link``: the RTL
    fabric (one plane, the accelerator endpoints, the RTL's NVLS engine) with its latencies and
    flit, at the RTL's clock (a cycle is a cycle whatever the clock)."""
    hz = RTL_FABRIC.isa_clock_hz
    return Fabric(
        f"RTL ({link.one_way_latency}-cycle hops, {link.mem_latency}-cycle memory, "
        f"{link.flit_bytes} B flits)", link_bytes_per_s=link.flit_bytes * hz,
        hop_s=link.one_way_latency / hz, mem_s=link.mem_latency / hz, isa_clock_hz=hz,
        flit_bytes=link.flit_bytes,
        packet_bytes=max(link.flit_bytes, PACKET_BYTES // link.flit_bytes * link.flit_bytes))


def serialisation(size, link):
    """Cycles to stream ``size`` bytes over one link in 4 KiB packets of 1 header + payload
    flits."""
    if size < 0:
        raise ValueError(f"size must be non-negative, not {size}")
    packets = -(-size // PACKET_BYTES)
    return -(-size // link.flit_bytes) + packets


def nvls_cycles(size, endpoints, link=PAPER_LINK, window=NVLS_WINDOW, cal=None):
    """NVLS All-Reduce of ``size`` bytes over ``endpoints`` ranks on ``link``, in cycles:
    :func:`~scin.sim.nvls_model.nvls_time` with ``window`` ``ld_reduce``\\ s in flight per rank
    (None: enough to cover the round trip) and the calibration ``cal`` (default: the committed
    one)."""
    _check(size, endpoints)
    f = link_fabric(link)
    packet = max(link.flit_bytes, NVLS_PACKET_BYTES // link.flit_bytes * link.flit_bytes)
    return f.cycles(nvls_time("allreduce", size, endpoints, f, cal or load_calibration(),
                              window=window, packet=packet))


def ring_cycles(size, endpoints, link=PAPER_LINK, cal=None):
    """NCCL's ring All-Reduce of ``size`` bytes over ``endpoints`` ranks on ``link``, in cycles:
    :func:`~scin.sim.ring_model.ring_time` with the calibration ``cal`` (default: the committed
    one)."""
    _check(size, endpoints)
    f = link_fabric(link)
    return f.cycles(ring_time("allreduce", size, endpoints, f, cal or load_calibration()))


def _check(size, endpoints):
    if not isinstance(endpoints, int) or isinstance(endpoints, bool) or endpoints < 2:
        raise ValueError(f"endpoints must be an integer of at least 2, not {endpoints!r}")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise ValueError(f"size must be a positive integer number of bytes, not {size!r}")
