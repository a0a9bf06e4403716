"""NvlsParams and the layouts the NVLS engine's blocks share (docs/NVLS.md)."""

from dataclasses import dataclass, field

from amaranth.lib import data, enum
from amaranth.utils import ceil_log2, exact_log2

from ..lib.counters import counters_layout
from ..packet import FabricParams
from ..params import check_int, check_type, check_power_of_two


__all__ = ["NvlsParams", "McDType", "group_layout", "mc_load_layout", "reduce_alloc_layout",
           "ack_alloc_layout", "fan_layout", "out_layout", "nvls_counters_layout",
           "NVLS_COUNTERS"]


class McDType(enum.Enum, shape=1):
    """Element type of a multicast group's ``ld_reduce`` (NVLS reduces FP16 and BF16, no INT8)."""
    FP16 = 0
    BF16 = 1


@dataclass(frozen=True)
class NvlsParams:
    """Parameters of the NVLS engine: the switch side of NVLink SHARP, the baseline.

    Parameters
    ----------
    fabric : FabricParams
        Must leave ``fabric.switch_port`` (``2**port_bits - 1``) unused by endpoints.
    entries : int
        Reduction-table entries: ``ld_reduce`` requests in flight in the whole switch. Each entry
        holds ``entry_bytes`` of every member's response, at that member's port, so a port's share
        of the table is ``entries * entry_bytes`` bytes. The paper's baseline: 320 entries of
        1 KiB per port (320 KiB).
    entry_bytes : int
        Largest ``ld_reduce`` (bytes, a power of two, a multiple of the flit, at most
        ``fabric.max_payload``).
    groups : int
        Multicast-table entries (multicast address ranges).
    acks : int
        ``st`` and ``red`` requests in flight in the whole switch (each waits for every member's
        WRITE_RESP before the requester gets its own).
    """
    fabric:      FabricParams = field(default_factory=FabricParams)
    entries:     int = 64
    entry_bytes: int = 1024
    groups:      int = 4
    acks:        int = 64

    def __post_init__(self):
        f = check_type("fabric", self.fabric, FabricParams)
        if f.ports >= 1 << f.port_bits:
            raise ValueError(f"NVLS mode needs fabric.ports below 2**port_bits = "
                             f"{1 << f.port_bits} (port {f.switch_port} is the switch's own "
                             f"address), not {f.ports}")
        check_int("entries", self.entries, 1, 4096)
        check_power_of_two("entry_bytes", self.entry_bytes, f.flit_bytes, f.max_payload)
        check_int("groups", self.groups, 1, 64)
        check_int("acks", self.acks, 1, 1 << min(f.tag_width, 12))
        if self.entries > 1 << f.tag_width:
            raise ValueError(f"entries must fit the {f.tag_width}-bit tag, not {self.entries}")

    @property
    def entry_flits(self):
        return self.entry_bytes // self.fabric.flit_bytes

    @property
    def entry_bits(self):
        return max(1, ceil_log2(self.entries))

    @property
    def ack_bits(self):
        return max(1, ceil_log2(self.acks))

    @property
    def group_bits(self):
        return max(1, ceil_log2(self.groups))

    @property
    def flit_shift(self):
        return exact_log2(self.fabric.flit_bytes)


def group_layout(params):
    """One multicast group: multicast addresses ``[base, base + size)`` map to
    ``[local, local + size)`` in the memory of every port in ``members``; its ``ld_reduce``
    reduces ``dtype``."""
    a = params.fabric.addr_width
    return data.StructLayout({"base": a, "size": a, "local": a,
                              "members": params.fabric.ports, "dtype": McDType})


def mc_load_layout(params):
    """One multicast-table write: group ``index`` becomes ``group`` (``valid`` = 1) or is
    removed (``valid`` = 0)."""
    return data.StructLayout({"index": params.group_bits, "valid": 1,
                              "group": group_layout(params)})


def reduce_alloc_layout(params):
    """A reduction-table entry allocated to one ``ld_reduce``: the requester's port and tag, the
    payload flits (0 for a refused request: a header-only error response), the members read,
    the dtype and the status decided at the request (``OK`` or ``DECERR``)."""
    f = params.fabric
    return data.StructLayout({"entry": params.entry_bits, "requester": f.port_bits,
                              "tag": f.tag_width, "flits": ceil_log2(params.entry_flits + 1),
                              "mask": f.ports, "dtype": McDType, "error": 1})


def ack_alloc_layout(params):
    """An ack-table entry allocated to one ``st`` or ``red``: the requester's port and tag, the
    members whose WRITE_RESP it waits for (none for a refused request), and a refusal."""
    f = params.fabric
    return data.StructLayout({"entry": params.ack_bits, "requester": f.port_bits,
                              "tag": f.tag_width, "mask": f.ports, "error": 1})


def fan_layout(params):
    """One flit the request unit multicasts to the members in ``mask``: ``write`` picks the
    class (0: REQ, 1: WRITE); ``header`` asks the engine to set the header's ``dst`` to each
    member's port."""
    f = params.fabric
    return data.StructLayout({"flit": f.flit_layout, "mask": f.ports, "write": 1, "header": 1})


def out_layout(params):
    """One flit for one port (responses to requesters): the flit and the port."""
    f = params.fabric
    return data.StructLayout({"flit": f.flit_layout, "port": f.port_bits})


#: The engine's counters (``COUNTER_BITS`` each, wrapping): requests taken by kind; requests
#: refused (address outside every multicast group, crossing a group's end, or a bad length);
#: member responses dropped (stale, duplicate or unknown tag).
NVLS_COUNTERS = ("ld_reduces", "stores", "reds", "refused", "stale_rdata", "stale_wresp")


def nvls_counters_layout(*names):
    """The engine's counters (all of :data:`NVLS_COUNTERS`), or one block's: the ``names`` of
    them it counts (:mod:`scin.hdl.lib.counters`)."""
    return counters_layout(names or NVLS_COUNTERS, known=NVLS_COUNTERS)
