"""Analytic models of the alternatives SCIN is compared with: NVLS and a ring All-Reduce.

These are *models*, not simulations: they use the same link parameters as the simulated SCIN
system (flit width, one-way latency, memory latency, 4 KiB packets with one header flit each) so
that speedups computed from a *measured* SCIN time and a *modelled* alternative compare like for
like. ``docs/PERFORMANCE.md`` says which figures are which. Every function returns cycles.

NVLS (after the SCIN paper's description of NVLink SHARP): a barrier across the switch (two
hops), then each GPU pulls its 1/N shard through ``multimem.ld_reduce`` (request to the switch,
switch to every GPU's memory and back, reduced shard back to the GPU: four hops and one memory
read), then pushes the reduced shard with ``multimem.st`` (two hops to every GPU), then a second
barrier (two hops). Its links carry the reduced shard back to the GPU and then out again, so the
bandwidth term runs at efficiency ``N / (N + 1)``.

Ring: ``2 (N - 1)`` steps (reduce-scatter then all-gather); each step moves a ``1/N`` chunk to the
neighbour through the switch (two hops), reads it from memory once, and signals the neighbour
with a flag that follows the data on the same path.
"""

from dataclasses import dataclass

__all__ = ["LinkModel", "serialisation", "nvls_cycles", "ring_cycles"]

PACKET_BYTES = 4096


@dataclass(frozen=True)
class LinkModel:
    """The link parameters shared by the measured system and the models."""
    one_way_latency: int = 90
    mem_latency:     int = 40
    flit_bytes:      int = 32

    def __post_init__(self):
        for name in ("one_way_latency", "mem_latency", "flit_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")


def serialisation(size, link):
    """Cycles to stream ``size`` bytes over one link in 4 KiB packets of 1 header + payload flits."""
    if size < 0:
        raise ValueError(f"size must be non-negative, not {size}")
    packets = -(-size // PACKET_BYTES)
    return -(-size // link.flit_bytes) + packets


def nvls_cycles(size, endpoints, link=LinkModel()):
    """Modelled NVLS All-Reduce time for a ``size``-byte message over ``endpoints`` GPUs."""
    _check(size, endpoints)
    L, M = link.one_way_latency, link.mem_latency
    shard = -(-size // endpoints)
    barrier = 2 * L
    pull = 4 * L + M                    # ld_reduce: GPU -> switch -> memories -> switch -> GPU
    push = 2 * L                        # st: GPU -> switch -> every GPU
    # The GPU's link carries its reduced shard in, then out again for every other GPU's copy:
    # (N + 1) / N of the message per link, as the paper's N/(N+1) efficiency says.
    data = serialisation(size, link) * (endpoints + 1) / endpoints
    first_packet = serialisation(min(shard, PACKET_BYTES), link)
    return 2 * barrier + pull + push + data + first_packet


def ring_cycles(size, endpoints, link=LinkModel()):
    """Modelled ring All-Reduce time: ``2 (N - 1)`` dependent steps of a ``1/N`` chunk each."""
    _check(size, endpoints)
    L, M = link.one_way_latency, link.mem_latency
    chunk = -(-size // endpoints)
    step = 2 * L + M + serialisation(chunk, link)
    return 2 * (endpoints - 1) * step


def _check(size, endpoints):
    if not isinstance(endpoints, int) or endpoints < 2:
        raise ValueError(f"endpoints must be an integer of at least 2, not {endpoints!r}")
    if size <= 0:
        raise ValueError(f"size must be positive, not {size}")
