"""A closed-form system model of SCIN, NVLS and ring collectives, calibrated from the RTL.

Every function here is a closed form, exact for the RTL at the points ``scin bench`` measures
(docs/SCALE.md shows each point against the model). The measured system is deterministic and
its time is an affine function of the packets on the busiest link (docs/PERFORMANCE.md): a
fixed part (the one-way hops, the memory read and the RTL's own cycles) plus, per 4 KiB packet,
its payload flits, one header flit and one control flit (the per-slot ``READ`` in and
``WRITE_RESP`` out sharing the data links). An event-driven simulation would add nothing that
this form does not already reproduce to the cycle, so none is used.

Units: a :class:`Fabric` states its link in bytes per second and seconds; every time this module
returns is in **seconds**. ``Fabric.cycles`` converts to the ISA's clock for the RTL fabric.

What is calibrated and what is modelled
----------------------------------------
* **Calibrated** (``fit_calibration``, from ``docs/bench/bench.csv``): the per-packet control
  flits (fp16 and int8 slots), the RTL's own cycles of every operation at 4 endpoints, the cycles
  each added level of the adder tree costs, the wave-regulation gap, the barrier and the INT8
  store-and-forward constant. SCIN pull (fp16/bf16, INT8 INQ), ReduceScatter, AllGather,
  Broadcast, Reduce and the barrier are these calibrated forms.
* **Modelled only**: SCIN *push* (no RTL yet: issue 18), NVLS and ring (measured on the RTL by ``scin compare``, docs/COMPARISON.md, but not yet fitted to it: issue 17).
  They use the same link, the same per-hop RTL overheads (the hop table of docs/PERFORMANCE.md,
  stored in the calibration as ``hop_own``) and the same packet protocol, so that a speedup
  compares like with like.

Fabric, planes and the protocol ceiling
---------------------------------------
One *plane* is one switch with one link per endpoint. A fabric of ``planes`` planes splits every
message evenly over them (``ceil(size / planes)`` bytes each, one ISA per plane) and each plane's
link runs at ``link_bytes_per_s / planes``; all planes finish together, so a collective takes one
plane's time on its share. The large-message efficiency of SCIN tends to the *protocol ceiling*
``P / (P + 1 + control)`` (``P`` payload flits per packet); NVLS's to ``N / (N + 1)`` of it.
"""

import csv
import json
import math
import statistics
from dataclasses import dataclass, field, asdict, replace
from pathlib import Path

__all__ = ["Fabric", "RTL_FABRIC", "Calibration", "OPS", "MODES",
           "packets", "packet_flits", "scin_time", "nvls_time", "ring_time", "collective_time",
           "protocol_ceiling", "bus_bandwidth", "fit_calibration", "write_calibration",
           "load_calibration", "validate", "read_bench_csv", "CALIBRATION_PATH",
           "nvlink_fabric", "NVLINK_HOP_S", "NVLINK_MEM_S", "NVLINK_ISA_HZ", "HOP_OWN"]

#: The collectives the model knows (NCCL names; ``size`` is NCCL's per-rank count in bytes).
OPS = ("allreduce", "reduce-scatter", "allgather", "broadcast", "reduce", "barrier")
#: SCIN's modes: ``pull`` is the RTL's; ``push`` (operands written to the ISA, issue 18) is
#: modelled only.
MODES = ("pull", "push")
#: Where ``scin study --calibrate`` and the RTL benches keep the fitted constants.
CALIBRATION_PATH = Path(__file__).resolve().parents[1] / "docs" / "bench" / "calibration.json"

#: The RTL's own cycles per hop over the hop floor, from the hop table of docs/PERFORMANCE.md
#: (``scin bench-allreduce --hops``, commit e5a3b24, and the op-hops table at 57865a9). The
#: CSV has totals only; these split the total between hops so that push and NVLS, which use
#: other hop sequences, can be costed from the same RTL. Their sum (39) is the fitted own time
#: of the pull All-Reduce plus the one cycle of the flag's floor.
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
    """
    name: str
    link_bytes_per_s: float
    hop_s: float
    mem_s: float
    isa_clock_hz: float
    flit_bytes: int = 32
    packet_bytes: int = 4096
    planes: int = 1
    control_flits: int | None = None

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


#: The simulated RTL system: 256-bit flits at 250 MHz (8 GB/s each way), the paper latency model
#: (90-cycle one-way hops, 40-cycle memory reads; docs/PERFORMANCE.md).
RTL_FABRIC = Fabric("RTL (4 KiB packets, 32 B flits, 250 MHz)", link_bytes_per_s=32 * 250e6,
                    hop_s=90 / 250e6, mem_s=40 / 250e6, isa_clock_hz=250e6)


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
        :data:`HOP_OWN`: the own cycles per hop (hop table), for the modelled sequences.
    groups : list of dict
        Every fitted fixed term (commit, op, in_place, dtype, endpoints, fixed cycles, points).
    source, commits, one_way_latency, mem_latency, flit_bytes, clock_mhz, packet_bytes
        Where it was fitted from and the link the rows were measured on.
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
    one_way_latency: int = 90
    mem_latency: int = 40
    flit_bytes: int = 32
    clock_mhz: int = 250
    packet_bytes: int = 4096

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
        ``pull`` (calibrated) or ``push`` (modelled: each endpoint writes its operand to the ISA
        with its arrival behind it; no read request and no memory read at the ISA's initiative,
        the endpoint's own DMA read instead).
    capacity, waves : int or None
        Wave table per participant (bytes) and outstanding waves; ``capacity=None`` assumes a
        table that covers the bandwidth-delay product (no wave gap).

    Pull All-Reduce (exact for the RTL)::

        T = 4 hop + mem + own(op, N) + sum over the busiest link's packets of
            (payload flits + 1 + control) + wave gaps
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
        return _scin_int8(share, endpoints, f, cal, level, mode)
    control = _control(f, cal)
    shards = _busiest_link_shards(op, endpoints)
    link = shards * packet_flits(share, f, control) * f.flit_s
    own = (cal.own[op] + level) * c
    if mode == "pull":
        fixed = 4 * L + M + own
    else:
        # Push: data up (one hop, arrival behind it) after the endpoint's own DMA read of its
        # operand, reduce, result down with the flag behind it. It drops the pull's barrier
        # issue and read request hops (their own cycles too) and the arrival's extra cycles
        # over a data packet's.
        h = cal.hop_own
        saved = h["barrier_issue"] + h["read_request"] + h["arrival"] - h["read_response"]
        fixed = 2 * L + M + own - saved * c
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
    fixed = 4 * f.hop_s + f.mem_s + own
    if mode == "push":
        h = cal.hop_own
        saved = h["barrier_issue"] + h["read_request"] + h["arrival"] - h["read_response"]
        fixed = 2 * f.hop_s + f.mem_s + own - saved * f.isa_cycle_s
    return fixed + link


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


# --- the alternatives (modelled) -----------------------------------------------------------------

def _hop(f, cal):
    """One switch traversal with the RTL's own cycles in its ports and queues."""
    return f.hop_s + cal.hop_own["result_write"] * f.isa_cycle_s


def nvls_time(op, size, endpoints, fabric=RTL_FABRIC, cal=None):
    """Seconds NVLS takes (modelled, after the paper's Fig. 2 and Klenk et al. 2020).

    All-Reduce: pre-barrier through the switch (2 hops), ``multimem.ld_reduce`` of each GPU's
    1/N shard (request to the switch, to every memory, the responses reduced in the switch, the
    result back to the GPU: 4 hops and a memory read), ``multimem.st`` of the reduced shard to
    every GPU (2 hops), post-barrier (2 hops). The GPU's link carries its shard in and out again,
    so the streaming term is ``(N + 1) / N`` of the message (efficiency ``N / (N + 1)`` of the
    protocol ceiling). ReduceScatter is the pull phase alone (each memory answers N shards),
    AllGather and Broadcast the push phase alone, Reduce the root's pull; each between two
    barriers. Same link, packet protocol and per-hop RTL overheads as SCIN; the GPU's own issue
    cost (its SMs) is not modelled.
    """
    cal = cal or load_calibration()
    _check(op, size, endpoints)
    f = fabric
    hop, c = _hop(f, cal), f.isa_cycle_s
    barrier = 2 * hop + cal.hop_own["commit_poll"] * c
    if op == "barrier":
        return barrier
    share = -(-size // f.planes)
    control = _control(f, cal)
    # The switch's reduction: the ISA's datapath cycles, one adder level more per doubling.
    reduce = (cal.hop_own["reduce"] + cal.level_cycles * _levels(endpoints)) * c
    mem = f.mem_s + (cal.hop_own["bridge_read"] + cal.hop_own["memory_read"]) * c
    pull = 4 * hop + mem + reduce
    push = 2 * hop
    n = endpoints
    if op == "allreduce":
        shard = -(-share // n)
        stream = packet_flits(share, f, control) * (n + 1) / n
        first = packet_flits(min(shard, f.packet_bytes), f, control)
        return 2 * barrier + pull + push + (stream + first) * f.flit_s
    if op == "reduce-scatter":
        return 2 * barrier + pull + n * packet_flits(share, f, control) * f.flit_s
    if op == "allgather":
        return 2 * barrier + push + n * packet_flits(share, f, control) * f.flit_s
    if op == "broadcast":
        return 2 * barrier + push + packet_flits(share, f, control) * f.flit_s
    return 2 * barrier + pull + packet_flits(share, f, control) * f.flit_s   # reduce


def ring_time(op, size, endpoints, fabric=RTL_FABRIC, cal=None):
    """Seconds a ring takes through the switch (modelled): ``2 (N - 1)`` dependent steps for
    All-Reduce, ``N - 1`` for ReduceScatter and AllGather; each step moves one chunk to the
    neighbour (2 hops), reads it from memory once and signals with a flag behind the data.
    Broadcast and Reduce: a pipelined chain of ``N - 1`` steps of the whole buffer."""
    cal = cal or load_calibration()
    _check(op, size, endpoints)
    if op == "barrier":
        raise ValueError("a ring has no barrier of its own; use op='allreduce' of one element")
    f = fabric
    share = -(-size // f.planes)
    n = endpoints
    control = _control(f, cal)
    hop = _hop(f, cal)
    mem = f.mem_s + (cal.hop_own["bridge_read"] + cal.hop_own["memory_read"]) * f.isa_cycle_s

    def step(chunk):
        return 2 * hop + mem + packet_flits(chunk, f, control) * f.flit_s

    if op == "allreduce":
        return 2 * (n - 1) * step(-(-share // n))
    if op in ("reduce-scatter", "allgather"):
        return (n - 1) * step(share)
    # A chain pipelined packet by packet: N - 1 steps of the first packet, then the rest.
    first = min(share, f.packet_bytes)
    return (n - 1) * step(first) + (packet_flits(share, f, control)
                                    - packet_flits(first, f, control)) * f.flit_s


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

def read_bench_csv(path):
    """The rows of a ``bench.csv`` (``scin bench``) as dicts, numbers as numbers; rows written
    before the op axis existed are All-Reduces."""
    def num(v):
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return v
    with open(path, newline="") as f:
        rows = [{"op": "allreduce", "in_place": 0, "root": 0,
                 **{k: num(v) for k, v in r.items() if v != ""}} for r in csv.DictReader(f)]
    for k, row in enumerate(rows, 2):
        for key in ("part", "op", "dtype", "size", "endpoints", "cycles"):
            if key not in row:
                raise ValueError(f"{path}: line {k} has no {key!r}")
    return rows


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


def fit_calibration(rows, source="", one_way_latency=90, mem_latency=40, flit_bytes=32,
                    clock_mhz=250, packet_bytes=4096):
    """Fit a :class:`Calibration` to measured ``rows`` (``read_bench_csv``) taken on a link of
    the given latencies (cycles), flit and packet size.

    The per-packet link cost is the slope of cycles against packets of the fp16 (and int8)
    All-Reduce rows of 4 KiB and more, rounded to whole flits (a link moves whole flits). Then,
    for each (commit, op, in_place, dtype, endpoints), the fixed part is the median of cycles
    less the size-dependent part. The per-level cost is the difference of 8 and 4 endpoints at
    one commit; the wave gap comes from the one-wave rows.
    """
    f = Fabric("fit", link_bytes_per_s=flit_bytes * clock_mhz * 1e6,
               hop_s=one_way_latency / (clock_mhz * 1e6), mem_s=mem_latency / (clock_mhz * 1e6),
               isa_clock_hz=clock_mhz * 1e6, flit_bytes=flit_bytes, packet_bytes=packet_bytes)
    payload = packet_bytes // flit_bytes
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
    return Calibration(
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


def write_calibration(bench_csv, out=CALIBRATION_PATH):
    """Fit the calibration to ``bench_csv`` and write it as JSON to ``out``; return it. The RTL
    benches call this after writing their CSV (``scin study --calibrate`` does the same)."""
    bench_csv = Path(bench_csv)
    try:
        # Relative to the tree that holds docs/bench/ (the calibration's usual place).
        source = bench_csv.resolve().relative_to(Path(out).resolve().parents[2]).as_posix()
    except (ValueError, IndexError):
        source = bench_csv.as_posix()
    cal = fit_calibration(read_bench_csv(bench_csv), source=source)
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
    """Model against RTL for every row: a list of dicts with the row's keys, ``model`` (cycles,
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
    for r in rows:
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


# --- NVLink-class fabrics (the scale study's parameters; docs/SCALE.md states them) ------------

#: One-way GPU-to-switch latency of the scale study: the SCIN paper's measured endpoint-to-switch
#: latency of its prototype (360 ns: 20 transport + 70 Aurora cycles at 250 MHz, section V);
#: NVIDIA publishes no per-hop NVLink figure. docs/SCALE.md shows the results at other values.
NVLINK_HOP_S = 360e-9
#: GPU memory read latency behind the switch (HBM through the GPU's memory system): an
#: assumption of the order of HBM load latencies, not a published NVLink figure.
NVLINK_MEM_S = 500e-9
#: The clock of an ASIC ISA (its own cycles): an assumption.
NVLINK_ISA_HZ = 1e9


def nvlink_fabric(generation, planes, name=None, hop_s=NVLINK_HOP_S, mem_s=NVLINK_MEM_S,
                  isa_clock_hz=NVLINK_ISA_HZ, control_flits=None):
    """An NVLink-class fabric of ``planes`` planes, each one NVLink per GPU.

    ``generation`` 4: NVLink 4 (H100/H200), 25 GB/s per link and direction, 18 links per GPU
    (900 GB/s bidirectional per GPU; NVIDIA H100/H200 datasheets); 5: NVLink 5 (Blackwell),
    50 GB/s per link and direction, 18 links per GPU (1.8 TB/s per GPU; NVIDIA GB200 NVL72,
    whose 18 NVLink Switch chips of 72 ports each give one link from every GPU to every chip).
    """
    per_link = {4: 25e9, 5: 50e9}.get(generation)
    if per_link is None:
        raise ValueError(f"generation must be 4 or 5, not {generation!r}")
    _check_positive("planes", planes, int)
    return Fabric(name or f"NVLink {generation}, {planes} plane(s)", per_link * planes, hop_s,
                  mem_s, isa_clock_hz, planes=planes, control_flits=control_flits)
