"""The fabric and the calibration the closed forms of SCIN, NVLS and the ring run on.

Types: a :class:`Fabric` (one switch plane per link of an endpoint, times in seconds) and a
:class:`Calibration` (the RTL's own cycles, fitted by :mod:`scin.sim.calibration` and stored in
``docs/bench/calibration.json``), with the two fabrics of the studies, the RTL at the paper's
configuration (:data:`RTL_FABRIC`, :func:`rtl_fabric`) and NVLink-class planes
(:func:`nvlink_fabric`). Below them, the link arithmetic every form shares: packets and their
flits, the control flits per packet, the adder-tree levels and the checks of a collective's
arguments.

Fabric and planes
-----------------
One *plane* is one switch with one link per endpoint. A fabric of ``planes`` planes splits every
message evenly over them (``ceil(size / planes)`` bytes each, one ISA per plane) and each plane's
link runs at ``link_bytes_per_s / planes``; all planes finish together, so a collective takes one
plane's time on its share. The RTL fabric's endpoints are the accelerator model and its NVLS
engine serves one request at a time; NVLink-class fabrics (:func:`nvlink_fabric`) have GPUs and
an engine per port (``Fabric.gpu_endpoints``, ``Fabric.nvls_per_port``): those are limits of the
RTL, not of the algorithms.
"""

import json
import math
from dataclasses import dataclass, field, asdict, replace
from pathlib import Path

from ..hdl.paper import CLOCK_HZ, CLOCK_MHZ, FLIT_BYTES, MEM_LATENCY, ONE_WAY_LATENCY

__all__ = ["Fabric", "RTL_FABRIC", "Calibration", "OPS", "MODES", "HOP_OWN", "CALIBRATION_PATH",
           "COMPARE_PATH", "PUSH_PATH", "load_calibration", "rtl_fabric", "nvlink_fabric",
           "NVLINK_HOP_S", "NVLINK_MEM_S", "NVLINK_ISA_HZ", "NVLINK_ATOMIC_S", "packets",
           "packet_flits", "bus_bandwidth", "check_positive", "check_collective",
           "control_flits_of", "int8_slot_flits_of", "extra_levels", "busiest_link_shards",
           "atomic_seconds"]

#: The collectives the model knows (NCCL names; ``size`` is NCCL's per-rank count in bytes).
OPS = ("allreduce", "reduce-scatter", "allgather", "broadcast", "reduce", "barrier")
#: SCIN's modes: ``pull`` (the ISA reads the operands) and ``push`` (each participant WRITEs
#: its operand into the ISA's push space); both are in the RTL and calibrated.
MODES = ("pull", "push")
#: Where ``scin study --calibrate`` and the RTL benches keep the fitted constants.
CALIBRATION_PATH = Path(__file__).resolve().parents[1] / "docs" / "bench" / "calibration.json"
#: ``scin compare``'s measurements of SCIN, NVLS and the ring on the RTL fabric, which the NVLS
#: and ring constants are fitted to.
COMPARE_PATH = CALIBRATION_PATH.with_name("compare.csv")
#: ``scin bench-push``'s measurements of push against pull, which the push constants are fitted
#: to.
PUSH_PATH = CALIBRATION_PATH.with_name("push.csv")

#: The RTL's own cycles per hop over the hop floor, from the hop table of docs/PERFORMANCE.md
#: (``scin bench-allreduce --hops`` and its op-hops table). The CSV has totals only; these split
#: the total between hops. Their sum (39) is the fitted own time of the pull All-Reduce plus the
#: one cycle of the flag's floor. Push is fitted on its own (``fit_push``), not from these.
HOP_OWN = {"arrival": 6, "barrier_issue": 4, "read_request": 3, "bridge_read": 1,
           "memory_read": 1, "read_response": 3, "reduce": 13, "result_write": 3, "flag": 3,
           "commit_poll": 2}


def check_positive(name, value, kind=(int, float)):
    """Raise ValueError naming ``name`` unless ``value`` is a positive ``kind`` (not a bool)."""
    if not isinstance(value, kind) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive number, not {value!r}")


@dataclass(frozen=True)
class Fabric:
    """A switched fabric: ``planes`` switch planes, each with one link per endpoint.

    Members
    -------
    name : str
        A label for tables.
    link_bytes_per_s : float
        An endpoint's bandwidth in *one direction*, summed over all planes (raw: headers and
        control flits ride in it).
    hop_s : float
        One-way endpoint-to-switch latency (transport, link and PHY), seconds.
    mem_s : float
        Endpoint memory read latency, seconds.
    isa_clock_hz : float
        The clock at which the RTL's own cycles (``Calibration``) are spent.
    flit_bytes : int
        Bytes per flit; a packet is one header flit + payload flits (+ control flits).
    packet_bytes : int
        Largest payload of one packet (the wave slot).
    planes : int
        Parallel planes, each carrying ``1 / planes`` of every message.
    control_flits : int or None
        Control flits per data packet on the busiest link (per-slot READ and WRITE_RESP); None
        takes the calibrated value (1 for the RTL's per-slot protocol; 0 for requests and
        acknowledgements per wave).
    atomic_s : float or None
        Seconds an endpoint's memory spends on each atomic add (NVLS's ``multimem.red``, the
        ring's flags); atomics on one memory are served one at a time. None: the RTL's AXI
        bridge, a read-modify-write of ``mem_s`` plus the calibrated ``atomic_own`` cycles.
    gpu_endpoints : bool
        False (the RTL): the endpoints are the accelerator model, which reads its memory through
        one port (a ring step's addition makes one flit every two flit times) and writes its
        own memory only through the switch (its link carries those writes both ways). True:
        GPUs, which add at the link's rate and store their own results locally.
    nvls_per_port : bool
        False (the RTL): the NVLS engine takes one request at a time for the whole switch (one
        request unit, one reduction sequencer), which bounds NVLS's packet rate. True: an
        NVSwitch-class engine with one of each per port, so that only the links bound it.
    """
    name: str
    link_bytes_per_s: float
    hop_s: float
    mem_s: float
    isa_clock_hz: float
    flit_bytes: int = FLIT_BYTES
    packet_bytes: int = 4096
    planes: int = 1
    control_flits: int | None = None
    atomic_s: float | None = None
    gpu_endpoints: bool = False
    nvls_per_port: bool = False

    def __post_init__(self):
        for name in ("link_bytes_per_s", "hop_s", "mem_s", "isa_clock_hz"):
            check_positive(name, getattr(self, name))
        for name in ("flit_bytes", "packet_bytes", "planes"):
            check_positive(name, getattr(self, name), int)
        if self.packet_bytes % self.flit_bytes:
            raise ValueError(f"packet_bytes must be a multiple of flit_bytes ({self.flit_bytes}), "
                             f"not {self.packet_bytes}")
        if self.control_flits is not None and (not isinstance(self.control_flits, int)
                                               or self.control_flits < 0):
            raise ValueError(f"control_flits must be a non-negative integer or None, "
                             f"not {self.control_flits!r}")
        if self.atomic_s is not None:
            check_positive("atomic_s", self.atomic_s)
        for name in ("gpu_endpoints", "nvls_per_port"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, not {getattr(self, name)!r}")

    @property
    def flit_s(self):
        """Seconds one flit takes on one plane's link."""
        return self.flit_bytes * self.planes / self.link_bytes_per_s

    @property
    def isa_cycle_s(self):
        return 1.0 / self.isa_clock_hz

    def cycles(self, seconds):
        """``seconds`` in ISA clock cycles (the RTL's unit), rounded to the nearest cycle."""
        return round(seconds * self.isa_clock_hz)


#: The simulated RTL system at the paper's configuration (:mod:`scin.hdl.paper`): 256-bit flits at
#: 250 MHz (8 GB/s each way), the paper latency model (90-cycle one-way hops, 40-cycle memory
#: reads; docs/PERFORMANCE.md).
RTL_FABRIC = Fabric(f"RTL (4 KiB packets, {FLIT_BYTES} B flits, {CLOCK_MHZ} MHz)",
                    link_bytes_per_s=FLIT_BYTES * CLOCK_HZ, hop_s=ONE_WAY_LATENCY / CLOCK_HZ,
                    mem_s=MEM_LATENCY / CLOCK_HZ, isa_clock_hz=CLOCK_HZ)


@dataclass(frozen=True)
class Calibration:
    """The RTL constants the closed forms need, in ISA cycles.

    Members
    -------
    control_flits : int
        Control flits per fp16 data packet on the busiest link (fitted slot cost - payload - 1).
    int8_slot_flits : int
        Link flits per INT8 slot of ``packet_bytes`` of INT8 data (data and scale packets, their
        headers and control flits).
    own : dict
        The RTL's own cycles of each operation at 4 endpoints (``fixed - 4 hops - memory`` for
        the data operations, ``fixed - 2 hops`` for the barrier), at ``own_commit``.
    int8_own : float
        The INT8 All-Reduce's fixed cycles less 4 hops and the memory read (its last slot is
        costed store-and-forward on top, see :func:`scin_time`).
    int8_single_slot_cycles : float
        What a one-slot INT8 All-Reduce takes over that form (the next slot's streaming hides
        it in longer ones).
    level_cycles : float
        Cycles each further level of the ISA's adder tree adds (and one more port in each round
        robin): 8 endpoints against 4 at the same commit.
    wave_gap_own : float
        A wave's re-issue gap less a read round trip (2 hops + memory), fitted from the
        one-wave run.
    hop_own : dict
        :data:`HOP_OWN`: the own cycles per hop (hop table of docs/PERFORMANCE.md).
    groups : list of dict
        Every fitted fixed term (commit, op, in_place, dtype, endpoints, fixed cycles, points).
    source, commits, one_way_latency, mem_latency, flit_bytes, clock_mhz, packet_bytes
        Where it was fitted from and the link the rows were measured on.
    atomic_own : float
        An atomic add at an endpoint's memory beyond its read (the AXI bridge's read-modify-
        write, which serves atomics one at a time): NVLS's barrier ``red``s and the ring's
        flags.
    nvls_own : float
        The RTL's own cycles of an NVLS collective beyond its hops, memory read, atomics,
        reducer, packets and the documented command gaps (:data:`NVLS_BARRIER_OWN`,
        :data:`NVLS_ISSUE_CYCLES`): both barriers and the data phase together.
    ring_slice_own : float
        A ring slice's own cycles beyond its four hops (WRITEs out, acknowledgements back) and
        its serialization: the fence's and the accelerator's commands'.
    ring_signal_own : float
        A ring flag's own cycles beyond its two hops and the atomic add at the receiver.
    compare_source, compare_commits, compare_points
        Where the four constants above were fitted from (``scin compare``'s CSV; empty: the
        nominal values of the event trace, docs/SCALE.md).
    push_own : float
        The fp16 push All-Reduce's own cycles at 4 endpoints beyond its 2 hops and its link
        flits (:func:`fit_push`).
    push_int8_own : float
        The same for the INT8 push All-Reduce (beyond 2 hops and :func:`push_link_flits`).
    push_level_cycles : float
        Cycles each further adder-tree level adds to a push (8 against 4 endpoints): the
        pull's ``level_cycles`` include the READ issue's round robin over one more port, which
        push does not have.
    push_source, push_commits, push_points
        Where the three push constants were fitted from (``scin bench-push``'s CSV; empty: the
        defaults, a fit of that CSV).
    """
    control_flits: int
    int8_slot_flits: int
    own: dict
    int8_own: float
    level_cycles: float
    wave_gap_own: float
    int8_single_slot_cycles: float = 0.0
    own_commit: str = ""
    hop_own: dict = field(default_factory=lambda: dict(HOP_OWN))
    groups: list = field(default_factory=list)
    source: str = ""
    commits: list = field(default_factory=list)
    one_way_latency: int = ONE_WAY_LATENCY
    mem_latency: int = MEM_LATENCY
    flit_bytes: int = FLIT_BYTES
    clock_mhz: int = CLOCK_MHZ
    packet_bytes: int = 4096
    atomic_own: float = 7.0
    nvls_own: float = 80.0
    ring_slice_own: float = 10.0
    ring_signal_own: float = 3.0
    compare_source: str = ""
    compare_commits: list = field(default_factory=list)
    compare_points: int = 0
    push_own: float = 30.0
    push_int8_own: float = 51.0
    push_level_cycles: float = 1.0
    push_source: str = ""
    push_commits: list = field(default_factory=list)
    push_points: int = 0

    def to_json(self):
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text):
        data = json.loads(text)
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"calibration has unknown key(s) {', '.join(unknown)}")
        return cls(**data)



def load_calibration(path=CALIBRATION_PATH):
    """The :class:`Calibration` stored at ``path`` (default: docs/bench/calibration.json)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no calibration at {path}: run `scin study --calibrate` (it fits "
                         f"docs/bench/bench.csv)")
    return Calibration.from_json(path.read_text())


def rtl_fabric(cal):
    """The RTL fabric of the calibration's link (the paper latency model by default)."""
    hz = cal.clock_mhz * 1e6
    return replace(RTL_FABRIC, link_bytes_per_s=cal.flit_bytes * hz,
                   hop_s=cal.one_way_latency / hz, mem_s=cal.mem_latency / hz, isa_clock_hz=hz,
                   flit_bytes=cal.flit_bytes, packet_bytes=cal.packet_bytes)


#: One-way GPU-to-switch latency of the scale study: the SCIN paper's measured endpoint-to-switch
#: latency of its prototype (360 ns: 20 transport + 70 Aurora cycles at 250 MHz, section V);
#: NVIDIA publishes no per-hop NVLink figure. docs/SCALE.md shows the results at other values.
NVLINK_HOP_S = ONE_WAY_LATENCY / CLOCK_HZ
#: GPU memory read latency behind the switch (HBM through the GPU's memory system): an
#: assumption of the order of HBM load latencies, not a published NVLink figure.
NVLINK_MEM_S = 500e-9
#: The clock of an ASIC ISA (its own cycles): an assumption.
NVLINK_ISA_HZ = 1e9
#: A GPU's memory serving one atomic add to a word (NVLS's barrier ``red``s, the ring's flags),
#: the adds to one word one after another: an assumption of the order of a same-address atomic
#: at a GPU's L2 (the RTL's AXI bridge takes a 160 ns read-modify-write for each).
NVLINK_ATOMIC_S = 2e-9


def nvlink_fabric(generation, planes, name=None, hop_s=NVLINK_HOP_S, mem_s=NVLINK_MEM_S,
                  isa_clock_hz=NVLINK_ISA_HZ, control_flits=None, atomic_s=NVLINK_ATOMIC_S):
    """An NVLink-class fabric of ``planes`` planes, each one NVLink per GPU.

    ``generation`` 4: NVLink 4 (H100/H200), 25 GB/s per link and direction, 18 links per GPU
    (900 GB/s bidirectional per GPU; NVIDIA H100/H200 datasheets); 5: NVLink 5 (Blackwell),
    50 GB/s per link and direction, 18 links per GPU (1.8 TB/s per GPU; NVIDIA GB200 NVL72,
    whose 18 NVLink Switch chips of 72 ports each give one link from every GPU to every chip).
    The endpoints are GPUs (``gpu_endpoints``) and the NVLS engine serves every port at once
    (``nvls_per_port``): the RTL's accelerator model and one-request-at-a-time engine are
    limits of this RTL, not of NVLink (docs/SCALE.md).
    """
    per_link = {4: 25e9, 5: 50e9}.get(generation)
    if per_link is None:
        raise ValueError(f"generation must be 4 or 5, not {generation!r}")
    check_positive("planes", planes, int)
    return Fabric(name or f"NVLink {generation}, {planes} plane(s)", per_link * planes, hop_s,
                  mem_s, isa_clock_hz, planes=planes, control_flits=control_flits,
                  atomic_s=atomic_s, gpu_endpoints=True, nvls_per_port=True)


# --- the link ----------------------------------------------------------------------------------

def packets(size, fabric):
    """Packets of at most ``fabric.packet_bytes`` that carry ``size`` bytes (at least one)."""
    return max(1, -(-size // fabric.packet_bytes))


def packet_flits(size, fabric, control):
    """Link flits that carry ``size`` bytes: each packet's payload flits, one header flit and
    ``control`` control flits."""
    if size < 0:
        raise ValueError(f"size must be non-negative, not {size}")
    full, rest = divmod(size, fabric.packet_bytes)
    flits = full * (fabric.packet_bytes // fabric.flit_bytes + 1 + control)
    if rest or not full:
        flits += -(-rest // fabric.flit_bytes) + 1 + control if rest else 1 + control
    return flits


def bus_bandwidth(op, size, endpoints, seconds):
    """NCCL's bus bandwidth (bytes/s) of a collective of per-rank ``size`` bytes that took
    ``seconds``: All-Reduce ``2 (N-1)/N S / t``; ReduceScatter and AllGather ``(N-1) S / t``
    (NCCL's ``recvcount``/``sendcount`` convention); Broadcast and Reduce ``S / t``."""
    n = endpoints
    factor = {"allreduce": 2 * (n - 1) / n, "reduce-scatter": n - 1, "allgather": n - 1,
              "broadcast": 1.0, "reduce": 1.0}.get(op)
    if factor is None:
        raise ValueError(f"op must be one of {', '.join(OPS[:-1])}, not {op!r}")
    return factor * size / seconds


def control_flits_of(fabric, cal):
    """Control flits per data packet on ``fabric``: its own ``control_flits``, else the
    calibrated one."""
    return cal.control_flits if fabric.control_flits is None else fabric.control_flits


def int8_slot_flits_of(fabric, cal):
    """Link flits of one INT8 slot of ``fabric.packet_bytes`` elements: the calibrated count on
    the calibration's own packet and flit, else a data packet and a scale packet (2 B per 64
    elements) with their headers and control flits."""
    data = fabric.packet_bytes // fabric.flit_bytes
    scales = -(-(fabric.packet_bytes // 32) // fabric.flit_bytes)
    if fabric.control_flits is None and fabric.packet_bytes == cal.packet_bytes \
            and fabric.flit_bytes == cal.flit_bytes:
        return cal.int8_slot_flits
    return data + scales + 2 * (1 + control_flits_of(fabric, cal))


def extra_levels(endpoints):
    """Adder-tree levels the ISA's reduction needs for ``endpoints`` inputs, less the 2 of the
    calibrated 4-endpoint system (one more level and one more round-robin port per doubling)."""
    return math.ceil(math.log2(endpoints)) - 2


def check_collective(op, size, endpoints):
    """Raise ValueError naming the argument unless ``op`` is one of :data:`OPS`, ``endpoints``
    an integer of at least 2 and ``size`` a positive integer number of bytes."""
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, not {op!r}")
    if not isinstance(endpoints, int) or isinstance(endpoints, bool) or endpoints < 2:
        raise ValueError(f"endpoints must be an integer of at least 2, not {endpoints!r}")
    if not isinstance(size, int) or size <= 0:
        raise ValueError(f"size must be a positive integer number of bytes, not {size!r}")


def busiest_link_shards(op, endpoints):
    """How many ``size``-byte buffers cross the busiest link: ReduceScatter reads N shards of
    ``recvcount`` up each link, AllGather writes N down each; the others one."""
    return endpoints if op in ("reduce-scatter", "allgather") else 1


def atomic_seconds(f, cal):
    """Seconds an endpoint's memory spends on one atomic add (they queue one behind another):
    ``f.atomic_s``, else the RTL's read-modify-write, a memory read and ``cal.atomic_own``."""
    return f.atomic_s if f.atomic_s is not None else f.mem_s + cal.atomic_own * f.isa_cycle_s
