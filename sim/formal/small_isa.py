"""The small ISA configurations the formal harnesses check blocks at."""

from ...hdl.isa.descriptor import IsaParams, WRITE_TAG_BITS
from ...hdl.packet import FabricParams


__all__ = ["small_isa"]


def small_isa(*, ports, max_payload, slots=1, descriptors=1, sync_resources=1, push_resources=0,
              push_slots=1):
    """ISA parameters on a small fabric: 64-bit flits, ``ports`` ports (2-bit port numbers),
    24-bit addresses, a 9-bit tag (a write tag's 5-bit index and 4 sequence bits, the fewest the
    ISA allows), ``slots`` wave-table slots of ``max_payload``-byte packets in one wave.

    ``push_resources`` (at most ``sync_resources``) of the sync resources have push space
    reserved (push mode), ``push_slots`` slots (``push_slots * max_payload`` bytes) per
    participant each; the default, 0, builds no push logic.

    Nothing in the blocks under proof depends on the flit, address or packet size beyond the
    widths of their counters, so the solver sees every decision they make at the real size."""
    fabric = FabricParams(flit_width=64, ports=ports, port_bits=2, addr_width=24,
                          tag_width=WRITE_TAG_BITS + 4, max_payload=max_payload)
    return IsaParams(fabric=fabric, capacity=slots * max_payload, waves=1,
                     descriptors=descriptors, sync_resources=sync_resources,
                     **(dict(push_resources=push_resources, push_capacity=push_slots * max_payload)
                        if push_resources else {}))
