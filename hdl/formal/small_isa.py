"""The small ISA configurations the formal harnesses check blocks at."""

from ..isa.descriptor import IsaParams, WRITE_TAG_BITS
from ..packet import FabricParams


__all__ = ["small_isa"]


def small_isa(*, ports, max_payload, slots=1, descriptors=1, sync_resources=1):
    """ISA parameters on a small fabric: 64-bit flits, ``ports`` ports (2-bit port numbers),
    24-bit addresses, a 9-bit tag (a write tag's 5-bit index and 4 sequence bits, the fewest the
    ISA allows), ``slots`` wave-table slots of ``max_payload``-byte packets in one wave.

    Nothing in the blocks under proof depends on the flit, address or packet size beyond the
    widths of their counters, so the solver sees every decision they make at the real size."""
    fabric = FabricParams(flit_width=64, ports=ports, port_bits=2, addr_width=24,
                          tag_width=WRITE_TAG_BITS + 4, max_payload=max_payload)
    return IsaParams(fabric=fabric, capacity=slots * max_payload, waves=1,
                     descriptors=descriptors, sync_resources=sync_resources)
