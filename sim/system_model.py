"""A closed-form system model of SCIN, NVLS and ring collectives, calibrated from the RTL.

Every function here is a closed form (the ring's a max-plus recurrence over its ranks'
commands), calibrated against the RTL's measurements (docs/SCALE.md shows each point against
the model). The measured SCIN system is deterministic and its time is an affine function of the
packets on the busiest link (docs/PERFORMANCE.md): a fixed part (the one-way hops, the memory
read and the RTL's own cycles) plus, per 4 KiB packet, its payload flits, one header flit and
one control flit (the per-slot ``READ`` in and ``WRITE_RESP`` out sharing the data links). An
event-driven simulation would add nothing that this form does not already reproduce to the
cycle, so none is used.

Units: a :class:`Fabric` states its link in bytes per second and seconds; every time this module
returns is in **seconds**. ``Fabric.cycles`` converts to the ISA's clock for the RTL fabric.

What is calibrated and what is modelled
----------------------------------------
* **Calibrated from ``scin bench``** (``fit_calibration``, ``docs/bench/bench.csv``): the
  per-packet control flits (fp16 and int8 slots), the RTL's own cycles of every operation at 4
  endpoints, the cycles each added level of the adder tree costs, the wave-regulation gap, the
  barrier and the INT8 store-and-forward constant. SCIN pull (fp16/bf16, INT8 INQ),
  ReduceScatter, AllGather, Broadcast, Reduce and the barrier are these calibrated forms.
* **Calibrated from ``scin compare``** (``fit_compare``, ``docs/bench/compare.csv``): NVLS
  (NCCL's NVLS kernel on the switch's NVLS engine) and the ring (NCCL's simple protocol on the
  accelerator model), both measured cycle for cycle on the same RTL fabric. Their forms are the
  RTL's mechanism (hops, the memory read, atomics served one at a time, packets and their
  headers on each link, the engine's request unit and sequencer, the ``ld_reduce`` window, the
  ring's fenced slices, flags and staging slots) and only four own-cycle constants are fitted
  (:data:`COMPARE_CONSTANTS`); :func:`nvls_time` and :func:`ring_time` say how close they come.
  ReduceScatter, AllGather, Broadcast and Reduce of NVLS and the ring are the same mechanism
  with their own packets (modelled, not measured here).
* **Calibrated from ``scin bench-push``** (``fit_push``, ``docs/bench/push.csv``): SCIN *push*
  (issue 18: each participant WRITEs its operand into the ISA's push space). Its form is the
  RTL's mechanism: the operand's one hop up, the reduction, the result's hop down with the flag
  behind it; no READ, no READ_RESP and no memory read inside the measured interval (the
  endpoint reads its operand before its first push WRITE leaves, where ``scin bench-push``
  starts the clock), no wave regulation. Three own-cycle constants are fitted (``push_own``,
  ``push_int8_own``, ``push_level_cycles``); the form meets every push row to the cycle.
  Push of the other collectives (not measured) is the All-Reduce's saving applied to their own
  calibrated pull cycles.

Fabric, planes and the protocol ceiling
---------------------------------------
One *plane* is one switch with one link per endpoint. A fabric of ``planes`` planes splits every
message evenly over them (``ceil(size / planes)`` bytes each, one ISA per plane) and each plane's
link runs at ``link_bytes_per_s / planes``; all planes finish together, so a collective takes one
plane's time on its share. The large-message efficiency of SCIN tends to the *protocol ceiling*
``P / (P + 1 + control)`` (``P`` payload flits per packet); NVLS's to :func:`nvls_ceiling`,
``f / ((f + 2)(N + 1)/N)`` for its ``f``-flit packets. The RTL fabric's endpoints are the
accelerator model and its NVLS engine serves one request at a time; NVLink-class fabrics
(:func:`nvlink_fabric`) have GPUs and an engine per port (``Fabric.gpu_endpoints``,
``Fabric.nvls_per_port``): those are limits of the RTL, not of the algorithms.
"""

import csv
import json
import math
import statistics
from dataclasses import dataclass, field, asdict, replace
from pathlib import Path

from ..hdl.paper import CLOCK_HZ, CLOCK_MHZ, FLIT_BYTES, MEM_LATENCY, ONE_WAY_LATENCY

__all__ = ["Fabric", "RTL_FABRIC", "Calibration", "OPS", "MODES",
           "packets", "packet_flits", "scin_time", "nvls_time", "ring_time", "collective_time",
           "protocol_ceiling", "bus_bandwidth", "fit_calibration", "write_calibration",
           "load_calibration", "validate", "read_bench_csv", "CALIBRATION_PATH",
           "nvlink_fabric", "NVLINK_HOP_S", "NVLINK_MEM_S", "NVLINK_ISA_HZ", "NVLINK_ATOMIC_S",
           "HOP_OWN", "nvls_ceiling", "read_compare_csv", "compare_model", "fit_compare",
           "validate_compare", "compare_modelled", "COMPARE_CONSTANTS", "COMPARE_PATH",
           "NVLS_PACKET_BYTES",
           "PUSH_PATH", "read_push_csv", "fit_push", "push_link_flits",
           "NVLS_WINDOW", "RING_SLICES", "rtl_fabric"]

#: The collectives the model knows (NCCL names; ``size`` is NCCL's per-rank count in bytes).
OPS = ("allreduce", "reduce-scatter", "allgather", "broadcast", "reduce", "barrier")
#: SCIN's modes: ``pull`` (the ISA reads the operands) and ``push`` (operands written to the
#: ISA, issue 18); both are in the RTL and calibrated.
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
#: (``scin bench-allreduce --hops``, commit e5a3b24, and the op-hops table at 57865a9). The
#: CSV has totals only; these split the total between hops. Their sum (39) is the fitted own time
#: of the pull All-Reduce plus the one cycle of the flag's floor. (Push used to be costed from
#: them; it is now fitted to ``scin bench-push``: :func:`fit_push`.)
HOP_OWN = {"arrival": 6, "barrier_issue": 4, "read_request": 3, "bridge_read": 1,
           "memory_read": 1, "read_response": 3, "reduce": 13, "result_write": 3, "flag": 3,
           "commit_poll": 2}


def _check_positive(name, value, kind=(int, float)):
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
        takes the calibrated value (1 for the RTL's protocol; 0 is issue 18's wave-level
        requests and acknowledgements).
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
            _check_positive(name, getattr(self, name))
        for name in ("flit_bytes", "packet_bytes", "planes"):
            _check_positive(name, getattr(self, name), int)
        if self.packet_bytes % self.flit_bytes:
            raise ValueError(f"packet_bytes must be a multiple of flit_bytes ({self.flit_bytes}), "
                             f"not {self.packet_bytes}")
        if self.control_flits is not None and (not isinstance(self.control_flits, int)
                                               or self.control_flits < 0):
            raise ValueError(f"control_flits must be a non-negative integer or None, "
                             f"not {self.control_flits!r}")
        if self.atomic_s is not None:
            _check_positive("atomic_s", self.atomic_s)
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
        defaults, which are that CSV's fit at commit 25eeebe).
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


def protocol_ceiling(fabric, cal, dtype="fp16"):
    """The highest large-message efficiency SCIN's packet protocol allows on ``fabric``:
    payload flits over link flits per slot (int8: the FP16-equivalent payload, 2x)."""
    payload = fabric.packet_bytes // fabric.flit_bytes
    if dtype == "int8":
        return 2 * payload / _int8_slot_flits(fabric, cal)
    return payload / (payload + 1 + _control(fabric, cal))


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


def _control(fabric, cal):
    return cal.control_flits if fabric.control_flits is None else fabric.control_flits


def _int8_slot_flits(fabric, cal):
    # A slot of packet_bytes INT8 elements: data packet + scale packet (2 B per 64 elements).
    data = fabric.packet_bytes // fabric.flit_bytes
    scales = -(-(fabric.packet_bytes // 32) // fabric.flit_bytes)
    if fabric.control_flits is None and fabric.packet_bytes == cal.packet_bytes \
            and fabric.flit_bytes == cal.flit_bytes:
        return cal.int8_slot_flits
    return data + scales + 2 * (1 + _control(fabric, cal))


def _levels(endpoints):
    """Adder-tree levels the ISA's reduction needs for ``endpoints`` inputs, less the 2 of the
    calibrated 4-endpoint system (one more level and one more round-robin port per doubling)."""
    return math.ceil(math.log2(endpoints)) - 2


def _check(op, size, endpoints):
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, not {op!r}")
    if not isinstance(endpoints, int) or isinstance(endpoints, bool) or endpoints < 2:
        raise ValueError(f"endpoints must be an integer of at least 2, not {endpoints!r}")
    if not isinstance(size, int) or size <= 0:
        raise ValueError(f"size must be a positive integer number of bytes, not {size!r}")


def _busiest_link_shards(op, endpoints):
    """How many ``size``-byte buffers cross the busiest link: ReduceScatter reads N shards of
    ``recvcount`` up each link, AllGather writes N down each; the others one."""
    return endpoints if op in ("reduce-scatter", "allgather") else 1


# --- SCIN ---------------------------------------------------------------------------------------

def scin_time(op, size, endpoints, fabric=RTL_FABRIC, cal=None, dtype="fp16", mode="pull",
              capacity=None, waves=8):
    """Seconds SCIN takes for one collective: last arrival leaving its endpoint to last
    completion flag seen (docs/PERFORMANCE.md's definition).

    Parameters
    ----------
    op : str
        One of :data:`OPS`.
    size : int
        Per-rank count in bytes, 16-bit form (NCCL's count; ReduceScatter ``recvcount``,
        AllGather ``sendcount``); INT8 moves half of it plus one FP16 scale per 64 elements.
    endpoints : int
        Participants (one per port of each plane).
    fabric : Fabric
    cal : Calibration
        Default: :func:`load_calibration`.
    dtype : str
        ``fp16``/``bf16`` or ``int8`` (INQ; All-Reduce only, as in the RTL).
    mode : str
        ``pull`` or ``push`` (each endpoint WRITEs its operand into the ISA's push space; no
        READ, READ_RESP or memory read in the interval, no wave regulation; calibrated from
        ``scin bench-push``).
    capacity, waves : int or None
        Wave table per participant (bytes) and outstanding waves; ``capacity=None`` assumes a
        table that covers the bandwidth-delay product (no wave gap).

    Pull All-Reduce (exact for the RTL)::

        T = 4 hop + mem + own(op, N) + sum over the busiest link's packets of
            (payload flits + 1 + control) + wave gaps

    Push All-Reduce (exact for every row of ``scin bench-push``)::

        T = 2 hop + (push_own + push_level x (ceil(log2 N) - 2)) c + the same packets' flits
    """
    cal = cal or load_calibration()
    _check(op, size, endpoints)
    if dtype not in ("fp16", "bf16", "int8"):
        raise ValueError(f"dtype must be fp16, bf16 or int8, not {dtype!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if dtype == "int8" and op != "allreduce":
        raise ValueError(f"int8 (INQ) is an All-Reduce mode, not one of {op!r}")
    if size % 2:
        raise ValueError(f"size must be an even number of bytes (elements x 2), not {size}")
    f, c = fabric, fabric.isa_cycle_s
    L, M = f.hop_s, f.mem_s
    if op == "barrier":
        return 2 * L + cal.own["barrier"] * c
    # Measured for the All-Reduce only (4 against 8 endpoints); applied to every data
    # operation, since all of them pass the round robins and the copies the datapath's FIFO.
    level = cal.level_cycles * _levels(endpoints)
    share = -(-size // f.planes)
    share += share % 2
    if dtype == "int8":
        if mode == "push":
            own = cal.push_int8_own + cal.push_level_cycles * _levels(endpoints)
            return 2 * L + own * c + push_link_flits(share, f, cal) * f.flit_s
        return _scin_int8(share, endpoints, f, cal, level, mode)
    control = _control(f, cal)
    shards = _busiest_link_shards(op, endpoints)
    link = shards * packet_flits(share, f, control) * f.flit_s
    if mode == "push":
        # Push: the operand's WRITEs up (one hop; the endpoint read its operand before the
        # first one left, where the interval starts), the reduction, the result down with the
        # flag behind it (one hop). No READ, READ_RESP or memory read, and no wave table to
        # regulate. Other collectives than the All-Reduce (not measured pushed) save what the
        # All-Reduce saves of its own cycles.
        own = cal.own[op] - (cal.own["allreduce"] - cal.push_own) \
            + cal.push_level_cycles * _levels(endpoints)
        return 2 * L + own * c + link
    own = (cal.own[op] + level) * c
    fixed = 4 * L + M + own
    return fixed + link + _wave_gaps(share * shards, f, cal, capacity, waves, control)


def _scin_int8(share, endpoints, f, cal, level, mode):
    # INQ: a slot is packet_bytes of INT8 data (packet_bytes fp16-equivalent x 2) and its
    # scales. Slots before the last stream at int8_slot_flits each; the last crosses the ISA
    # store-and-forward (its data and scales in, then out), because the quantizer needs a
    # block's scale before the block leaves and the scales travel after the data.
    data = share // 2
    slot = f.packet_bytes
    n = max(1, -(-data // slot))
    last = data - (n - 1) * slot
    last_flits = -(-last // f.flit_bytes) + -(-(last // 32) // f.flit_bytes)
    link = ((n - 1) * _int8_slot_flits(f, cal) + 2 * last_flits) * f.flit_s
    own = (cal.int8_own + level + (cal.int8_single_slot_cycles if n == 1 else 0)) \
        * f.isa_cycle_s
    return 4 * f.hop_s + f.mem_s + own + link


def push_link_flits(share, f, cal):
    """Link flits of an INT8 push All-Reduce of ``share`` bytes (16-bit form) beyond its fixed
    part: every slot's ``d`` data flits and twice its ``s`` scale flits (the block scales are not
    streamed under the data: ``scin bench-push`` adds 2 cycles per scale flit), and, for every
    slot but the last, its two packets' headers and control flits (the last slot's are in
    ``push_int8_own``). 140 flits per full 4 KiB INT8 slot."""
    data = share // 2
    slot = f.packet_bytes
    n = max(1, -(-data // slot))
    flits = 0
    for k in range(n):
        piece = min(slot, data - k * slot)
        flits += -(-piece // f.flit_bytes) + 2 * -(-(piece // 32) // f.flit_bytes)
    return flits + (n - 1) * 2 * (1 + _control(f, cal))


def _wave_gaps(moved, f, cal, capacity, waves, control):
    """Extra seconds of wave regulation: ``waves`` outstanding waves of ``capacity / waves``
    each; a wave's slots are re-issued a read round trip (``2 hop + mem + wave_gap_own``)
    after release, so each wave boundary costs ``max(0, (gap + w slot) / k - w slot)``."""
    if capacity is None:
        return 0.0
    _check_positive("capacity", capacity, int)
    _check_positive("waves", waves, int)
    per_wave = capacity // waves // f.packet_bytes
    if per_wave < 1:
        raise ValueError(f"capacity / waves must hold at least one {f.packet_bytes}-byte slot, "
                         f"not {capacity} / {waves}")
    slot = (f.packet_bytes // f.flit_bytes + 1 + control) * f.flit_s
    gap = 2 * f.hop_s + f.mem_s + cal.wave_gap_own * f.isa_cycle_s
    count = -(-packets(moved, f) // per_wave)
    excess = max(0.0, (gap + per_wave * slot) / waves - per_wave * slot)
    return (count - 1) * excess


# --- the alternatives: NVLS and the ring as the RTL runs them (scin compare) --------------------

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
#: ALLREDUCE_SLICESTEPS``) and staging slots per rank (``NCCL_STEPS / ALLREDUCE_SLICESTEPS``).
RING_SLICES = 2
RING_SLOTS = 4
#: The accelerator's command processor: cycles from one event of a rank's program to the next
#: (``done``: a REDUCE_SEND's last acknowledgement; ``flag``: a WAIT_FLAG satisfied; ``red``: a
#: posted flag sent) when nothing else waits, from the event trace of the ring runs (SENT,
#: FLAG and KERNEL_DONE cycles). REDUCE_SEND's adder is a two-member NvlsReducer: 2 + 4 cycles
#: before its first sum.
RING_GAPS = {("done", "red"): 5, ("done", "send"): 5, ("done", "wait"): 2,
             ("flag", "red"): 3, ("flag", "send"): 5, ("flag", "wait"): 3,
             ("red", "red"): 3, ("red", "send"): 4, ("red", "wait"): 2,
             ("start", "red"): 0, ("start", "send"): 0, ("start", "wait"): 2}
RING_ADDER_CYCLES = 6


def _atomic_s(f, cal):
    """Seconds an endpoint's memory spends on one atomic add (they queue one behind another)."""
    return f.atomic_s if f.atomic_s is not None else f.mem_s + cal.atomic_own * f.isa_cycle_s


def _flit_shards(size, n, flit):
    """Every rank's share of ``size`` bytes in whole flits, the first ranks one flit more when it
    does not divide (sim/nvls_allreduce.py's ``shards``): bytes per rank, some perhaps 0."""
    base, extra = divmod(-(-size // flit), n)
    return [(base + (r < extra)) * flit for r in range(n)]


def _nvls_check(window, packet, f):
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
    _check(op, size, endpoints)
    f = fabric
    _nvls_check(window, packet, f)
    n = endpoints
    L, M, c, t = f.hop_s, f.mem_s, f.isa_cycle_s, f.flit_s
    a = _atomic_s(f, cal)
    barrier = 2 * L + NVLS_BARRIER_OWN * c
    if op == "barrier":
        return barrier + n * a
    share = -(-size // f.planes)
    whole = -(-share // f.flit_bytes) * f.flit_bytes
    if op == "allreduce":
        data = _flit_shards(share, n, f.flit_bytes)
    elif op in ("reduce-scatter", "allgather"):
        data = [whole] * n
    else:
        data = [whole] + [0] * (n - 1)
    ranks = [d for d in data if d]
    empty = n - len(ranks)
    flits = min(max(ranks), packet) // f.flit_bytes
    count = sum(-(-d // packet) for d in ranks)
    rounds = max(-(-d // packet) for d in ranks)
    own = cal.nvls_own - 2 * (NVLS_BARRIER_OWN + NVLS_ISSUE_CYCLES)
    reducer = (2 + 4 * (n - 1)) * c
    loads = op in ("allreduce", "reduce-scatter", "reduce")
    # The accelerator writes a ReduceScatter's or Reduce's result to its own memory through the
    # switch (its link carries it up and down); a GPU stores it locally.
    via = 0 if f.gpu_endpoints else 1
    if loads:
        first = 8 * L + M + own * c + reducer + flits * t
        # The ld_reduce's round trip, half of the chain's hops and own cycles.
        rtt = 4 * L + M + own / 2 * c + reducer + flits * t
    else:
        first = 4 * L + own / 2 * c + flits * t
        rtt = 0.0
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
    spacing = max(spacing, (flits + 1) * t)
    if rounds == 1:
        step = spacing
    else:
        step = max(link, engine, rtt / (len(ranks) * window) if window and loads else 0.0)
    held = max(0, empty - 1) * a
    data_phase = first + held + (count - 1) * step
    last = barrier + a + (len(ranks) - 1) * max(0.0, a - spacing)
    return (barrier + n * a) + 2 * NVLS_ISSUE_CYCLES * c + data_phase + last


def nvls_ceiling(fabric, endpoints, packet=NVLS_PACKET_BYTES):
    """NVLS All-Reduce's large-message efficiency bound on ``fabric``'s links: per packet of
    ``f`` payload flits a member's link carries ``(f + 2)(N + 1)/N`` flits (its header and read
    request or acknowledgement, and the detour of its own results), ``f / ((f + 2)(N + 1)/N)``
    of the link: 0.753 at N = 4 and 0.837 at N = 8 for 1 KiB packets of 32 B flits."""
    flits = packet // fabric.flit_bytes
    return flits / ((flits + 2) * (endpoints + 1) / endpoints)


# -- the ring -----------------------------------------------------------------------------------

def _ring_program(op, share, n, flit, slices=RING_SLICES, slots=RING_SLOTS):
    """Every rank's commands, as sim/ring_allreduce.py issues them for the All-Reduce and NCCL's
    ring runs the other collectives (rank ``r`` sends to ``r + 1`` and receives from ``r - 1``):

    * ``("wait", stream, k)``: until the ``k``-th flag of ``stream`` (``"tail"``: a slice
      received; ``"head"``: a staging slot returned) has been added to this rank's memory;
    * ``("send", kind, bytes)``: a REDUCE_SEND, fenced: ``copy``, ``reduce`` (plus the slice
      received), ``reduce+local`` (and the sum over its own data too), ``copy+local``,
      ``local-reduce`` (the sum to its own memory only);
    * ``("red", stream)``: a flag to the next rank (``tail``) or a slot back to the previous
      one (``head``), posted.
    """
    def split(nbytes, pieces):
        """``nbytes`` in ``pieces`` runs of whole flits, the first ones a flit longer."""
        base, extra = divmod(-(-nbytes // flit), pieces)
        out, at = [], 0
        for k in range(pieces):
            end = min(at + (base + (k < extra)) * flit, nbytes)
            out.append(end - at)
            at = end
        return out

    def parts(size):
        return split(size, n)

    def cut(nbytes):
        return split(nbytes, slices) if nbytes else [0] * slices

    programs = []
    if op == "allreduce":
        chunk = [cut(b) for b in parts(share)]
        staged = (n - 1) * slices
        for r in range(n):
            cmds, got, sent, used = [], 0, 0, 0
            for step in range(2 * n - 1):
                if step < n:
                    c = (r - 1 - step) % n
                else:
                    c = (r - (step - n + 1)) % n if step < 2 * n - 2 else (r + 1) % n
                for nbytes in chunk[c]:
                    if step:
                        got += 1
                        cmds.append(("wait", "tail", got))
                    if step == 2 * n - 2:
                        continue
                    if step < n - 1:
                        if sent >= slots:
                            cmds.append(("wait", "head", sent - slots + 1))
                        sent += 1
                    if nbytes:
                        kind = ("copy" if step == 0 or step >= n else
                                "reduce+local" if step == n - 1 else "reduce")
                        cmds.append(("send", kind, nbytes))
                    cmds.append(("red", "tail"))
                    if 1 <= step <= n - 1:
                        if used + slots < staged:
                            cmds.append(("red", "head"))
                        used += 1
            programs.append(cmds)
        return programs
    if op in ("reduce-scatter", "allgather"):
        # Chunks of ``share`` bytes (NCCL's recvcount / sendcount), N - 1 steps each way.
        pieces = cut(share)
        staged = (n - 1) * slices
        for r in range(n):
            cmds, got, sent, used = [], 0, 0, 0
            for step in range(n):
                for nbytes in pieces:
                    if step:
                        got += 1
                        cmds.append(("wait", "tail", got))
                    if op == "allgather":
                        if step == n - 1:
                            continue
                        if nbytes:
                            cmds.append(("send", "copy+local" if step == 0 else "copy", nbytes))
                        cmds.append(("red", "tail"))
                        continue
                    if step < n - 1:
                        if sent >= slots:
                            cmds.append(("wait", "head", sent - slots + 1))
                        sent += 1
                        if nbytes:
                            cmds.append(("send", "copy" if step == 0 else "reduce", nbytes))
                        cmds.append(("red", "tail"))
                    elif nbytes:
                        cmds.append(("send", "local-reduce", nbytes))
                    if step >= 1:
                        if used + slots < staged:
                            cmds.append(("red", "head"))
                        used += 1
            programs.append(cmds)
        return programs
    # Broadcast from rank 0 along 0 -> 1 -> ... -> N-1, Reduce to rank 0 along 1 -> ... -> 0:
    # the buffer in N chunks of slices (the All-Reduce's granularity), pipelined down the chain.
    pieces = [p for b in parts(share) for p in cut(b)]
    order = list(range(n)) if op == "broadcast" else [(k + 1) % n for k in range(n)]
    position = {rank: k for k, rank in enumerate(order)}
    staged = len(pieces)
    for r in range(n):
        k = position[r]
        cmds, got, sent, used = [], 0, 0, 0
        for nbytes in pieces:
            if k:
                got += 1
                cmds.append(("wait", "tail", got))
            if k == n - 1:
                if op == "reduce" and nbytes:
                    cmds.append(("send", "local-reduce", nbytes))
            else:
                if op == "reduce":
                    if sent >= slots:
                        cmds.append(("wait", "head", sent - slots + 1))
                    sent += 1
                if nbytes:
                    cmds.append(("send", "copy" if op == "broadcast" or not k else "reduce",
                                 nbytes))
                cmds.append(("red", "tail"))
            if op == "reduce" and k:
                if used + slots < staged:
                    cmds.append(("red", "head"))
                used += 1
        programs.append(cmds)
    return programs


def _ring_send(kind, nbytes, f, cal):
    """``(seconds, link flits)`` of one REDUCE_SEND's packets before its fence, and whether it
    crosses the link (a local-only one does not on a GPU)."""
    t, c = f.flit_s, f.isa_cycle_s
    full, rest = divmod(nbytes, f.packet_bytes)
    data = -(-nbytes // f.flit_bytes)
    link = data + full + (1 if rest else 0)           # payload and a header per packet
    adder = RING_ADDER_CYCLES * c
    if f.gpu_endpoints:
        # A GPU adds at the link's rate and stores its own copy locally.
        return (data * t if kind == "local-reduce" else link * t), link
    if kind == "copy":
        return link * t, link
    if kind == "copy+local":
        return 2 * link * t, link
    if kind in ("reduce", "local-reduce"):
        # One local read port: two reads per result flit; the header rides in the gap.
        return 2 * data * t + adder, link
    # reduce+local: each packet's sums to the next rank, then sent again to itself.
    return 3 * data * t + adder, link


def ring_time(op, size, endpoints, fabric=RTL_FABRIC, cal=None):
    """Seconds NCCL's ring takes through the switch (simple protocol), as sim/ring_allreduce.py
    runs the All-Reduce on the RTL fabric (calibrated against ``scin compare``): from the first
    packet to the last rank seeing its last slice's flag.

    The message (All-Reduce) is cut in ``N`` chunks of ``RING_SLICES`` slices; ``2 (N - 1)``
    steps (ReduceScatter and AllGather ``N - 1``; Broadcast and Reduce a chain of ``N - 1``
    ranks, pipelined slice by slice). A slice is one REDUCE_SEND, fenced (every WRITE
    acknowledged), then a flag (an atomic add) on the next rank's memory::

        slice = 4L + s + max(body, hold + link flits)   (hold: only behind a flag to that memory)
        flag seen = sent + 2L + a + g

    ``body`` is the slice's packets: a copy one flit per flit time plus a header per 4 KiB; the
    accelerator's addition two flit times per result flit (one local read port), and the final
    reduction of the All-Reduce sends its result again to its own memory, through the switch
    (GPUs, ``gpu_endpoints``: all at the link's rate, local copies local). A WRITE right behind a
    flag to the same memory waits for the atomic's read (the bridge holds writes meanwhile). A
    rank waits for the previous rank's flag of a slice and, reusing a staging slot, for the
    next rank to have returned it; the rest is the accelerator's command cycles
    (:data:`RING_GAPS`). ``s``, ``g`` and the atomic are calibrated. The ranks' programs are
    followed event by event (a max-plus recurrence over at most ``N x 4N`` commands), so
    empty and unequal slices of small messages cost what they cost in the RTL.
    """
    cal = cal or load_calibration()
    _check(op, size, endpoints)
    if op == "barrier":
        raise ValueError("a ring has no barrier of its own; use op='allreduce' of one element")
    f = fabric
    n = endpoints
    share = -(-size // f.planes)
    L, c = f.hop_s, f.isa_cycle_s
    a = _atomic_s(f, cal)
    hold = max(0.0, a - cal.atomic_own * c)
    signal = 2 * L + a + cal.ring_signal_own * c - a   # to the atomic's start at the receiver
    programs = _ring_program(op, share, n, f.flit_bytes)
    # Gaps by (previous event, next command), in seconds; events: 0 start, 1 done, 2 flag, 3 red.
    events = ("start", "done", "flag", "red")
    gap = [[RING_GAPS[(e, k)] * c for k in ("wait", "send", "red")] for e in events]
    sends = {}
    t = f.flit_s
    base = cal.ring_slice_own * c
    tail = [[] for _ in range(n)]                      # when each flag became visible at rank r
    head = [[] for _ in range(n)]
    now = [0.0] * n
    last = [0] * n
    last_flag = [-math.inf] * n                        # when rank r last flagged rank r + 1
    pc = [0] * n
    moved = True
    while moved:
        moved = False
        for r in range(n):
            cmds, k, clock, prev = programs[r], pc[r], now[r], last[r]
            while k < len(cmds):
                cmd = cmds[k]
                what = cmd[0]
                if what == "wait":
                    flags = tail[r] if cmd[1] == "tail" else head[r]
                    if len(flags) < cmd[2]:
                        break
                    clock = max(clock + gap[prev][0], flags[cmd[2] - 1])
                    prev = 2
                elif what == "send":
                    key = (cmd[1], cmd[2])
                    if key not in sends:
                        body, link = _ring_send(cmd[1], cmd[2], f, cal)
                        local = cmd[1] == "local-reduce"
                        hops = 0.0 if local and f.gpu_endpoints else 4 * L
                        sends[key] = (body, link * t, hops + base, local)
                    body, link, fixed, local = sends[key]
                    start = clock + gap[prev][1]
                    if not local and start - last_flag[r] < a:
                        # Right behind its flag to the same memory: the WRITEs wait for the
                        # atomic's read there, then drain at the link's rate.
                        body = max(body, hold + link)
                    clock = start + fixed + body
                    prev = 1
                else:
                    clock += gap[prev][2]
                    prev = 3
                    if cmd[1] == "tail":
                        last_flag[r] = clock
                        flags = tail[(r + 1) % n]
                    else:
                        flags = head[(r - 1) % n]
                    # Flags from one sender reach a memory in order; each waits for the one
                    # before it (the bridge serves atomics one at a time).
                    flags.append(max(clock + signal, flags[-1] if flags else 0.0) + a)
                k += 1
            if k != pc[r]:
                pc[r], now[r], last[r] = k, clock, prev
                moved = True
    if any(pc[r] < len(programs[r]) for r in range(n)):
        raise RuntimeError("ring schedule deadlocked (a staging slot never returned)")
    return max(now)


def collective_time(system, op, size, endpoints, fabric=RTL_FABRIC, cal=None, dtype="fp16"):
    """One entry point for tables: ``system`` is ``scin`` (pull), ``scin-push``, ``scin-inq``
    (pull, INT8), ``scin-inq-push``, ``nvls`` or ``ring``."""
    cal = cal or load_calibration()
    if system in ("scin", "scin-push"):
        return scin_time(op, size, endpoints, fabric, cal, dtype,
                         "push" if system == "scin-push" else "pull")
    if system in ("scin-inq", "scin-inq-push"):
        return scin_time(op, size, endpoints, fabric, cal, "int8",
                         "push" if system.endswith("push") else "pull")
    if system == "nvls":
        return nvls_time(op, size, endpoints, fabric, cal)
    if system == "ring":
        return ring_time(op, size, endpoints, fabric, cal)
    raise ValueError(f"system must be scin, scin-push, scin-inq, scin-inq-push, nvls or ring, "
                     f"not {system!r}")


# --- calibration from the bench CSV ------------------------------------------------------------

def _read_csv(path, defaults, required):
    """The rows of a CSV as dicts, numbers as numbers, ``defaults`` under each row's own fields
    (columns a CSV written before them lacks); a row without one of ``required`` is an error."""
    def num(v):
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return v
    with open(path, newline="") as f:
        rows = [{**defaults, **{k: num(v) for k, v in r.items() if v != ""}}
                for r in csv.DictReader(f)]
    for k, row in enumerate(rows, 2):
        for key in required:
            if key not in row:
                raise ValueError(f"{path}: line {k} has no {key!r}")
    return rows


def read_bench_csv(path):
    """The rows of a ``bench.csv`` (``scin bench``) as dicts, numbers as numbers; rows written
    before the op axis existed are All-Reduces, and rows before the trains axis ran the paper's
    per-slot protocol (``trains`` 1) on an ISA without ``gather_pairs``."""
    return _read_csv(path, {"op": "allreduce", "in_place": 0, "root": 0, "trains": 1,
                            "gather_pairs": 0},
                     ("part", "op", "dtype", "size", "endpoints", "cycles"))


def _per_slot_protocol(rows):
    """The rows the model is fitted to and checked against: the sweeps of the paper's per-slot
    protocol, not ``scin bench --parts trains`` (a study of the wave-level requests, whose
    per-slot rows repeat the size sweep's points at another commit), nor the op sweep's
    AllGathers in pairs of ranks (``gather_pairs``, not the paper's configuration)."""
    return [r for r in rows if r["part"] != "trains" and not r.get("gather_pairs")]


def _variable_cycles(row, f, control, int8_slot):
    """The size-dependent cycles of a measured row under the calibrated form (RTL fabric)."""
    op, size, n = row["op"], int(row["size"]), int(row["endpoints"])
    if op == "barrier":
        return 0
    if row["dtype"] == "int8":
        data = size // 2
        slots = max(1, -(-data // f.packet_bytes))
        last = data - (slots - 1) * f.packet_bytes
        last_flits = -(-last // f.flit_bytes) + -(-(last // 32) // f.flit_bytes)
        return (slots - 1) * int8_slot + 2 * last_flits
    return _busiest_link_shards(op, n) * packet_flits(size, f, control)


def _wave_count_excess(row, f, control, gap_cycles):
    """Wave-boundary cycles of a measured row given the gap (cycles), as in _wave_gaps."""
    if row["dtype"] == "int8" or row["op"] == "barrier":
        return 0.0
    k, cap = int(row.get("waves", 8)), int(row.get("capacity", 32768))
    per_wave = cap // k // f.packet_bytes
    slot = f.packet_bytes // f.flit_bytes + 1 + control
    moved = _busiest_link_shards(row["op"], int(row["endpoints"])) * int(row["size"])
    count = -(-packets(moved, f) // per_wave)
    return (count - 1) * max(0.0, (gap_cycles + per_wave * slot) / k - per_wave * slot)


def _slope(points):
    """Least-squares slope of (x, y) points."""
    xs, ys = zip(*points)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    if not den:
        raise ValueError("calibration needs at least two message sizes of one configuration")
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den


def fit_calibration(rows, source="", one_way_latency=ONE_WAY_LATENCY, mem_latency=MEM_LATENCY,
                    flit_bytes=FLIT_BYTES, clock_mhz=CLOCK_MHZ, packet_bytes=4096, compare=None,
                    compare_source="", push=None, push_source=""):
    """Fit a :class:`Calibration` to measured ``rows`` (``read_bench_csv``) taken on a link of
    the given latencies (cycles), flit, clock and packet size (default: the paper's,
    :mod:`scin.hdl.paper`), and its NVLS and ring constants to the
    ``scin compare`` rows ``compare`` (:func:`read_compare_csv`; None: the nominal values).

    The per-packet link cost is the slope of cycles against packets of the fp16 (and int8)
    All-Reduce rows of 4 KiB and more, rounded to whole flits (a link moves whole flits). Then,
    for each (commit, op, in_place, dtype, endpoints), the fixed part is the median of cycles
    less the size-dependent part. The per-level cost is the difference of 8 and 4 endpoints at
    one commit; the wave gap comes from the one-wave rows. NVLS and ring: :func:`fit_compare`.
    """
    f = Fabric("fit", link_bytes_per_s=flit_bytes * clock_mhz * 1e6,
               hop_s=one_way_latency / (clock_mhz * 1e6), mem_s=mem_latency / (clock_mhz * 1e6),
               isa_clock_hz=clock_mhz * 1e6, flit_bytes=flit_bytes, packet_bytes=packet_bytes)
    payload = packet_bytes // flit_bytes
    rows = _per_slot_protocol(rows)
    steady = [r for r in rows if r["op"] == "allreduce" and r.get("waves", 8) >= 2]

    def slot_cost(dtype, per_slot_bytes):
        pts = [(int(r["size"]) // per_slot_bytes, r["cycles"]) for r in steady
               if r["dtype"] == dtype and int(r["size"]) >= per_slot_bytes
               and int(r["size"]) % per_slot_bytes == 0 and r["part"] == "size"]
        return _slope(pts) if len({p[0] for p in pts}) >= 2 else None

    fp16_slot = slot_cost("fp16", packet_bytes)
    if fp16_slot is None:
        raise ValueError("calibration needs fp16 All-Reduce rows of at least two sizes that are "
                         "multiples of the packet size (part 'size')")
    control = round(fp16_slot) - payload - 1
    int8_slot_raw = slot_cost("int8", 2 * packet_bytes)
    int8_slot = round(int8_slot_raw) if int8_slot_raw is not None else \
        payload + -(-(packet_bytes // 32) // flit_bytes) + 2 * (1 + control)

    hops4 = 4 * one_way_latency + mem_latency

    def fixed_of(row, gap_cycles):
        return row["cycles"] - _variable_cycles(row, f, control, int8_slot) \
            - _wave_count_excess(row, f, control, gap_cycles)

    def group_key(r):
        return (str(r.get("commit", "")), r["op"], int(r.get("in_place", 0)), r["dtype"],
                int(r["endpoints"]))

    # First pass without the wave gap, on rows whose waves overlap (>= 2), then the gap from
    # the one-wave rows against their own commit's fixed part.
    groups, singles = {}, {}
    for r in rows:
        if r["dtype"] == "int8" and int(r["size"]) // 2 <= packet_bytes:
            singles.setdefault(group_key(r), []).append(fixed_of(r, 0.0))
        elif r.get("waves", 8) >= 2:
            groups.setdefault(group_key(r), []).append(fixed_of(r, 0.0))
    fixed = {k: statistics.median(v) for k, v in groups.items()}
    gaps = []
    for r in rows:
        if r.get("waves", 8) == 1 and group_key(r) in fixed:
            per_wave = int(r["capacity"]) // f.packet_bytes
            count = -(-packets(int(r["size"]), f) // per_wave)
            if count > 1:
                gaps.append((fixed_of(r, 0.0) - fixed[group_key(r)]) / (count - 1))
    gap = statistics.median(gaps) if gaps else 2 * one_way_latency + mem_latency
    wave_gap_own = gap - 2 * one_way_latency - mem_latency

    # The level cost: 8 endpoints against 4 at the same commit, op and dtype.
    levels = []
    for (commit, op, ip, dtype, n), v in fixed.items():
        other = fixed.get((commit, op, ip, dtype, 4))
        if n > 4 and other is not None:
            levels.append((v - other) / (math.ceil(math.log2(n)) - 2))
    level_cycles = statistics.median(levels) if levels else 0.0

    # Own cycles at 4 endpoints: each op from its newest measurement, i.e. the op sweep's
    # commit where the op has rows there, else the last commit the CSV lists for it.
    newest = {}
    for r in rows:
        if int(r["endpoints"]) == 4 and not int(r.get("in_place", 0)) \
                and r["dtype"] in ("fp16", "bf16") and r.get("waves", 8) >= 2:
            if r["part"] == "op" or newest.get(r["op"], ("", False))[1] is False:
                newest[r["op"]] = (str(r.get("commit", "")), r["part"] == "op")
    own = {}
    for op, (commit, _) in newest.items():
        base = 2 * one_way_latency if op == "barrier" else hops4
        own[op] = fixed[(commit, op, 0, "fp16", 4)] - base
    own_commit = newest.get("allreduce", ("", False))[0]
    missing = [op for op in OPS if op not in own]
    if missing:
        raise ValueError(f"calibration needs 4-endpoint fp16 rows of {', '.join(missing)}")
    int8 = [v for (c, op, ip, d, n), v in fixed.items() if d == "int8" and n == 4]
    if not int8:
        raise ValueError("calibration needs 4-endpoint int8 All-Reduce rows")
    # The INT8 rows are of an older commit than the op sweep; carry the fp16 All-Reduce's
    # change between the two commits over to them (the datapath's latency moved both).
    int8_commit = next(c for (c, op, ip, d, n) in fixed if d == "int8")
    drift = own["allreduce"] - (fixed.get((int8_commit, "allreduce", 0, "fp16", 4), own["allreduce"]
                                          + hops4) - hops4)
    int8_own = statistics.median(int8) - hops4 + drift
    single = [statistics.median(v) - fixed[k] for k, v in singles.items() if k in fixed]
    int8_single = statistics.median(single) if single else 0.0
    commits = list(dict.fromkeys(str(r.get("commit", "")) for r in rows))
    cal = Calibration(
        control_flits=control, int8_slot_flits=int8_slot,
        own={k: round(v, 3) for k, v in sorted(own.items())}, int8_own=round(int8_own, 3),
        level_cycles=round(level_cycles, 3), wave_gap_own=round(wave_gap_own, 3),
        int8_single_slot_cycles=round(int8_single, 3), own_commit=own_commit,
        groups=[{"commit": k[0], "op": k[1], "in_place": k[2], "dtype": k[3], "endpoints": k[4],
                 "fixed_cycles": round(v, 3), "points": len(groups[k])}
                for k, v in sorted(fixed.items())],
        source=source, commits=commits, one_way_latency=one_way_latency,
        mem_latency=mem_latency, flit_bytes=flit_bytes, clock_mhz=clock_mhz,
        packet_bytes=packet_bytes)
    cal = fit_compare(compare, cal, compare_source) if compare else cal
    return fit_push(push, cal, push_source) if push else cal


def _source_name(path, out):
    """``path`` relative to the tree that holds ``out``'s docs/bench/ (the calibration's usual
    place), else as given."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path(out).resolve().parents[2]).as_posix()
    except (ValueError, IndexError):
        return path.as_posix()


def write_calibration(bench_csv, out=CALIBRATION_PATH, compare_csv=None, push_csv=None):
    """Fit the calibration to ``bench_csv``, ``compare_csv`` and ``push_csv`` (None: the
    ``compare.csv`` / ``push.csv`` beside ``bench_csv``, if there is one) and write it as JSON
    to ``out``; return it. The RTL benches call this after writing their CSV (``scin study
    --calibrate`` does the same)."""
    bench_csv = Path(bench_csv)
    if compare_csv is None:
        compare_csv = bench_csv.with_name("compare.csv")
        compare_csv = compare_csv if compare_csv.exists() else None
    if push_csv is None:
        push_csv = bench_csv.with_name("push.csv")
        push_csv = push_csv if push_csv.exists() else None
    compare = read_compare_csv(compare_csv) if compare_csv is not None else None
    push = read_push_csv(push_csv) if push_csv is not None else None
    cal = fit_calibration(read_bench_csv(bench_csv), source=_source_name(bench_csv, out),
                          compare=compare,
                          compare_source=_source_name(compare_csv, out) if compare else "",
                          push=push, push_source=_source_name(push_csv, out) if push else "")
    Path(out).write_text(cal.to_json())
    return cal


def load_calibration(path=CALIBRATION_PATH):
    """The :class:`Calibration` stored at ``path`` (default: docs/bench/calibration.json)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no calibration at {path}: run `scin study --calibrate` (it fits "
                         f"docs/bench/bench.csv)")
    return Calibration.from_json(path.read_text())


def validate(rows, cal):
    """Model against RTL for every row of the per-slot protocol's sweeps (not ``scin bench
    --parts trains``): a list of dicts with the row's keys, ``model`` (cycles,
    from its own commit's fixed part), ``model_current`` (from the scale model's constants:
    :func:`scin_time` on :data:`RTL_FABRIC`) and their errors in percent.

    Raises
    ------
    ValueError
        A row whose (commit, op, dtype, endpoints) the calibration was not fitted to.
    """
    f = replace(RTL_FABRIC, link_bytes_per_s=cal.flit_bytes * cal.clock_mhz * 1e6,
                hop_s=cal.one_way_latency / (cal.clock_mhz * 1e6),
                mem_s=cal.mem_latency / (cal.clock_mhz * 1e6), isa_clock_hz=cal.clock_mhz * 1e6,
                flit_bytes=cal.flit_bytes, packet_bytes=cal.packet_bytes)
    gap = 2 * cal.one_way_latency + cal.mem_latency + cal.wave_gap_own
    fixed = {(g["commit"], g["op"], g["in_place"], g["dtype"], g["endpoints"]): g["fixed_cycles"]
             for g in cal.groups}
    out = []
    for r in _per_slot_protocol(rows):
        key = (str(r.get("commit", "")), r["op"], int(r.get("in_place", 0)), r["dtype"],
               int(r["endpoints"]))
        if key not in fixed:
            raise ValueError(f"the calibration has no fixed part for {r['op']} {r['dtype']} at "
                             f"{r['endpoints']} endpoints, commit {key[0]}: run `scin study "
                             f"--calibrate` after `scin bench`")
        single = r["dtype"] == "int8" and int(r["size"]) // 2 <= cal.packet_bytes
        model = fixed[key] + _variable_cycles(r, f, cal.control_flits, cal.int8_slot_flits) \
            + _wave_count_excess(r, f, cal.control_flits, gap) \
            + (cal.int8_single_slot_cycles if single else 0)
        current = f.cycles(scin_time(r["op"], int(r["size"]), int(r["endpoints"]), f, cal,
                                     r["dtype"], capacity=int(r.get("capacity", 32768)),
                                     waves=int(r.get("waves", 8))))
        out.append({**r, "model": model, "model_current": current,
                    "error_pct": 100 * (model - r["cycles"]) / r["cycles"],
                    "error_current_pct": 100 * (current - r["cycles"]) / r["cycles"]})
    return out


# --- calibration of push from scin bench-push ---------------------------------------------------

def read_push_csv(path):
    """The rows of a ``push.csv`` (``scin bench-push``) as dicts, numbers as numbers."""
    rows = _read_csv(path, {}, ("endpoints", "dtype", "size", "mode", "cycles"))
    for k, row in enumerate(rows, 2):
        if row["mode"] not in MODES:
            raise ValueError(f"{path}: line {k}: mode must be one of {', '.join(MODES)}, "
                             f"not {row['mode']!r}")
    return rows


def fit_push(rows, cal, source=""):
    """``cal`` with the push constants fitted to the push rows of ``scin bench-push``
    (:func:`read_push_csv`): ``push_own`` and ``push_int8_own`` are the medians over the
    4-endpoint rows of the measured cycles less 2 hops and the link flits (fp16: the packets'
    :func:`packet_flits`; int8: :func:`push_link_flits`), ``push_level_cycles`` the median of
    8 against 4 endpoints per added level. Constants without rows keep their value.

    Raises
    ------
    ValueError
        No push row to fit.
    """
    pushed = [r for r in rows if r["mode"] == "push"]
    if not pushed:
        raise ValueError("the push rows have no push-mode point to fit")
    f = rtl_fabric(cal)
    hops = 2 * cal.one_way_latency

    def link(r):
        share = int(r["size"])
        if r["dtype"] == "int8":
            return push_link_flits(share, f, cal)
        return packet_flits(share, f, _control(f, cal))

    own = {"fp16": [], "int8": []}
    at4 = {}
    for r in pushed:
        dtype = "int8" if r["dtype"] == "int8" else "fp16"
        if int(r["endpoints"]) == 4:
            own[dtype].append(r["cycles"] - hops - link(r))
            at4[(dtype, int(r["size"]))] = r["cycles"]
    levels = [(r["cycles"] - at4[(d, int(r["size"]))]) / _levels(int(r["endpoints"]))
              for r in pushed
              for d in ["int8" if r["dtype"] == "int8" else "fp16"]
              if int(r["endpoints"]) > 4 and (d, int(r["size"])) in at4]
    update = {}
    if own["fp16"]:
        update["push_own"] = round(statistics.median(own["fp16"]), 3)
    if own["int8"]:
        update["push_int8_own"] = round(statistics.median(own["int8"]), 3)
    if levels:
        update["push_level_cycles"] = round(statistics.median(levels), 3)
    commits = list(dict.fromkeys(str(r.get("commit", "")) for r in pushed if r.get("commit")))
    return replace(cal, **update, push_source=source, push_commits=commits,
                   push_points=len(pushed))


# --- calibration of NVLS and the ring from scin compare ---------------------------------------

#: The constants :func:`fit_compare` fits, with the nominal values of the event trace.
COMPARE_CONSTANTS = ("atomic_own", "nvls_own", "ring_slice_own", "ring_signal_own")
#: ``scin compare``'s algorithms: what each is in this model.
COMPARE_ALGORITHMS = ("scin-fp16", "scin-int8", "nvls", "ring")


def read_compare_csv(path):
    """The rows of a ``compare.csv`` (``scin compare``) as dicts, numbers as numbers; rows
    without an ``op`` column are All-Reduces."""
    rows = _read_csv(path, {"op": "allreduce"}, ("algorithm", "endpoints", "size", "cycles"))
    for k, row in enumerate(rows, 2):
        if row["algorithm"] not in COMPARE_ALGORITHMS:
            raise ValueError(f"{path}: line {k}: algorithm must be one of "
                             f"{', '.join(COMPARE_ALGORITHMS)}, not {row['algorithm']!r}")
    return rows


def rtl_fabric(cal):
    """The RTL fabric of the calibration's link (the paper latency model by default)."""
    hz = cal.clock_mhz * 1e6
    return replace(RTL_FABRIC, link_bytes_per_s=cal.flit_bytes * hz,
                   hop_s=cal.one_way_latency / hz, mem_s=cal.mem_latency / hz, isa_clock_hz=hz,
                   flit_bytes=cal.flit_bytes, packet_bytes=cal.packet_bytes)


def compare_model(row, cal):
    """The modelled cycles of one ``scin compare`` row on the RTL fabric of ``cal``: SCIN rows
    from :func:`scin_time` (the calibrated form), NVLS from :func:`nvls_time` with the row's
    window, ring from :func:`ring_time`."""
    f = rtl_fabric(cal)
    op, size, n = row.get("op", "allreduce"), int(row["size"]), int(row["endpoints"])
    algorithm = row["algorithm"]
    if algorithm == "nvls":
        window = row.get("window")
        t = nvls_time(op, size, n, f, cal, window=int(window) if window else NVLS_WINDOW)
    elif algorithm == "ring":
        t = ring_time(op, size, n, f, cal)
    elif algorithm in ("scin-fp16", "scin-int8"):
        t = scin_time(op, size, n, f, cal, algorithm.split("-")[1])
    else:
        raise ValueError(f"algorithm must be one of {', '.join(COMPARE_ALGORITHMS)}, "
                         f"not {algorithm!r}")
    return t * f.isa_clock_hz


def fit_compare(rows, cal, source=""):
    """``cal`` with :data:`COMPARE_CONSTANTS` fitted to the NVLS and ring rows of ``scin
    compare`` (:func:`read_compare_csv`): least squares of the relative differences, by
    Gauss-Newton (the model is piecewise linear in the four). The rest of each form is the
    RTL's mechanism (hops, memory, packets, the engine's and the accelerator's cycles); nothing
    is fitted per point. Constants with no rows to fit them keep their value.

    Raises
    ------
    ValueError
        No NVLS or ring row to fit.
    """
    fitted = [r for r in rows if r["algorithm"] in ("nvls", "ring")]
    if not fitted:
        raise ValueError("the compare rows have no nvls or ring point to fit")
    used = {"atomic_own": True,
            "nvls_own": any(r["algorithm"] == "nvls" for r in fitted),
            "ring_slice_own": any(r["algorithm"] == "ring" for r in fitted),
            "ring_signal_own": any(r["algorithm"] == "ring" for r in fitted)}
    names = [k for k in COMPARE_CONSTANTS if used[k]]
    p = [float(getattr(cal, k)) for k in names]

    def residuals(values):
        c = replace(cal, **dict(zip(names, values)))
        return [(compare_model(r, c) - r["cycles"]) / r["cycles"] for r in fitted]

    for _ in range(20):
        r0 = residuals(p)
        # Forward differences of one cycle: the constants are cycles of the RTL.
        jac = []
        for k in range(len(p)):
            q = list(p)
            q[k] += 1.0
            jac.append([b - a for a, b in zip(r0, residuals(q))])
        normal = [[sum(x * y for x, y in zip(jac[i], jac[j])) for j in range(len(p))]
                  for i in range(len(p))]
        rhs = [-sum(x * y for x, y in zip(jac[i], r0)) for i in range(len(p))]
        step = _solve(normal, rhs)
        p = [a + b for a, b in zip(p, step)]
        if max(abs(x) for x in step) < 1e-3:
            break
    commits = list(dict.fromkeys(str(r.get("commit", "")) for r in rows if r.get("commit")))
    return replace(cal, **{k: round(v, 2) for k, v in zip(names, p)}, compare_source=source,
                   compare_commits=commits, compare_points=len(fitted))


def _solve(a, b):
    """``x`` with ``a x = b`` (a small symmetric system; a singular direction is left at 0)."""
    n = len(b)
    m = [row[:] + [v] for row, v in zip(a, b)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda i: abs(m[i][col]))
        if abs(m[pivot][col]) < 1e-18:
            continue
        m[col], m[pivot] = m[pivot], m[col]
        for i in range(n):
            if i != col:
                k = m[i][col] / m[col][col]
                m[i] = [x - k * y for x, y in zip(m[i], m[col])]
    return [m[i][n] / m[i][i] if abs(m[i][i]) >= 1e-18 else 0.0 for i in range(n)]


def compare_modelled(row):
    """Whether the model has a form for a ``scin compare`` row (not for SCIN INQ of another
    collective than the All-Reduce)."""
    return not (row["algorithm"] == "scin-int8" and row.get("op", "allreduce") != "allreduce")


def validate_compare(rows, cal):
    """Model against RTL for every ``scin compare`` row: the row's keys plus ``model`` (cycles)
    and ``error_pct`` (model against measured, percent); both None for a row the model has no
    form for (SCIN INQ of another collective than the All-Reduce)."""
    out = []
    for r in rows:
        if not compare_modelled(r):
            out.append({**r, "model": None, "error_pct": None})
            continue
        model = compare_model(r, cal)
        out.append({**r, "model": model, "error_pct": 100 * (model - r["cycles"]) / r["cycles"]})
    return out


# --- NVLink-class fabrics (the scale study's parameters; docs/SCALE.md states them) ------------

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
    _check_positive("planes", planes, int)
    return Fabric(name or f"NVLink {generation}, {planes} plane(s)", per_link * planes, hop_s,
                  mem_s, isa_clock_hz, planes=planes, control_flits=control_flits,
                  atomic_s=atomic_s, gpu_endpoints=True, nvls_per_port=True)
