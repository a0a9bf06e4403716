"""``scin soak``: a seeded, randomised run of many collectives on one simulated system.

:func:`make_plan` draws ``count`` collectives from one seed: the operation (All-Reduce,
ReduceScatter, AllGather, Broadcast, Reduce, each about as often, and now and then a barrier),
dtype (fp16, bf16, int8), size (the per-rank count in its 16-bit form, 64 B to ``max_size``
log-uniform; a ReduceScatter's input or an AllGather's result, ``N`` times it, stays within
``max_size`` and its shards are whole flits), a root (a random rank: Broadcast, Reduce),
participant group (any subset of two or more endpoints), in place or not (NCCL's in-place
layouts, :mod:`scin.sim.collective_buffers`), flag mode, arrival stalls per participant (0 to 400
cycles), ordinary traffic between endpoints during the collective, and a fault class:

* ``none``: a good collective. Every participant's whole window of the collective (its data and
  scale buffers, ``src`` to the end of the scale buffers) must equal zeros plus its inputs plus
  its result where the operation puts one (the golden model, :mod:`scin.sim.numerics`), bit for
  bit: a byte written where the operation gives a rank nothing (a Reduce's other ranks, a
  ReduceScatter's buffer past the rank's shard) fails too. Its flag must carry the golden model's
  status (OR over the ranks' results); a barrier's buffers stay zero and its flag carries OK;
* ``decerr``: a data operation whose input buffer lies beyond the end of every participant's
  memory, so reads answer AXI DECERR; every participant's flag must carry ``ERROR`` (the result is
  not checked: it is not claimed);
* ``bad_desc``: one of the descriptor errors that still has a barrier (:data:`BAD_DESC_KINDS`,
  in turn; each drawn with an operation it applies to, barriers too); every flag must carry
  ``ERROR`` and the window must hold the inputs only (no result written). Or one of the PUSH
  descriptors that cannot push (:data:`PUSH_BAD_KINDS`): no usable barrier, so the ISA writes
  ``ERROR`` flags of generation 0 at once; its participants neither arrive nor push, and the
  flag word in memory must be that one.

With push space (``SoakConfig.push_capacity``, one push resource: sync resource 0, as
:meth:`~scin.sim.system_config.SystemConfig.params` builds it, so the soak shares its build with
``scin allreduce --mode push`` on the same hardware), each collective also gets the descriptor's
``mode`` (docs/ISA.md, Push mode), drawn from a stream of its own (:func:`_draw_mode`; the rest of
a seed's draw is what it was before push mode): an operation that can be pushed (``PUSH_OPS``)
with an input that fits the space is drawn PULL, PUSH or AUTO, and a pushed one (PUSH, or AUTO
resolved by :func:`~scin.hdl.isa.push_mode`) goes on resource 0, whose participants push their
inputs (:func:`~scin.sim.push_program.push_commands`) instead of arriving; the others PULL or
AUTO (which then pulls: no space, an operation that is not pushed, or an input over the
threshold), and a faulty one never pushes. Several pushed collectives share resource 0 in one
batch only when each one's participants took part in every earlier one there (so each has seen
the earlier flag, and the space is free again, before it pushes).

Groups are random subsets of two or more endpoints, or (``groups="halves"``) two fixed halves
alternating in the program, as two tensor-parallel groups sharing one switch; then the two
collectives of a pair (``k`` even on the first half, ``k + 1`` on the second) are different
operations. A barrier's descriptor names buffers too (drawn as a data operation's, nothing
loaded): the ISA must leave them zero. Some ordinary writes are followed by a second write to the
same bytes from the same source, so the memory must end with the second (order per source and
class).

Everything happens in one simulation (the system is built once per configuration): memory images
are loaded through the file backdoor at time 0, collectives run in batches of up to
``sync_resources`` descriptors (descriptor ``j`` of a batch on sync resource ``j``), and the
memories are dumped at the end. :func:`verify` then checks every collective, every
non-participant's untouched window and flag (isolation) and every ordinary write, and returns the
summary, whose ``coverage`` (:func:`plan_coverage`, :mod:`.coverage`) puts every collective run
and checked in its bins of the collective space and lists the holes. ``sim/testbench/soak_bench.py``
is the simulator side.

``SoakConfig(nvls=True)`` (``scin soak --nvls``) is the soak on the switch with the NVLS engine:
NVLS All-Reduces beside SCIN collectives drawn and checked as here, and refused multicast
accesses (:mod:`.nvls_soak`; :func:`run_soak` hands it over).
"""

import json
import math
import random
from collections import Counter

import numpy as np

from . import numerics
from .allreduce import CollectiveConfig, memory_map, expected_images, ROOTED_OPS
from .system_config import SystemConfig
from .system_run import Dump, SystemRunError, flit_loads, region_image, run_system
from .collective_buffers import Buffers
from .collective_check import check_collective, expected_window, mode_label, outcome_table
from .coverage import SHARDED, Coverage, bins_of
from ..hdl.isa import Op, PUSH_OPS
from ..hdl.isa.plan import paired

__all__ = ["SoakConfig", "make_plan", "run_soak", "verify", "expected_window", "FAULTS", "OPS",
           "BAD_DESC_KINDS", "PUSH_BAD_KINDS", "PUSHABLE", "MODES", "plan_coverage",
           "collectives_coverage", "collective_entry", "draw_collective"]

FAULTS = ("none", "decerr", "bad_desc")
#: The operations the soak draws: the golden model's data operations, and barrier.
OPS = numerics.OPS + ("barrier",)
#: Share of barriers among the collectives an operation is drawn for (the rest: the five data
#: operations, uniformly). A barrier moves no data: it checks generations and flags only.
BARRIER_SHARE = 1 / 12
#: The descriptor errors a ``bad_desc`` collective carries, in turn; each keeps the barrier (the
#: participant set and the sync resource are good), so every participant's flag must say ERROR.
BAD_DESC_KINDS = ("misaligned", "root_not_a_rank", "zero_length", "shard_not_whole_flits",
                  "bad_op", "too_long", "absent_port", "int8_partial_block", "bad_dtype")
#: The operations each fault (or bad-descriptor kind) is drawn with: the length, dtype and buffer
#: errors need a data operation; a root only Broadcast and Reduce have; whole-flit shards only
#: ReduceScatter and AllGather need; an unknown op or a port the switch lacks spoils any
#: descriptor, a barrier's too. DECERR needs reads.
#: The operations the ISA pushes (``PUSH_OPS`` of :mod:`scin.hdl.isa`), by their names here.
PUSHABLE = tuple(op for op in numerics.OPS if Op[op.upper().replace("-", "_")] in PUSH_OPS)
#: The PUSH descriptors that cannot push (docs/ISA.md, Push mode): each is bad and has no usable
#: barrier, so its ERROR flags (generation 0) are written at once, once per program load.
#: Drawn, in turn, for a share :data:`PUSH_FAULT_SHARE` of ``fault_rate`` of the collectives
#: drawn good: PUSH on a resource without push space (an operation that can be pushed), PUSH of
#: an operation that cannot be pushed (barriers too), PUSH of an input larger than the space.
PUSH_BAD_KINDS = ("push_no_space", "push_not_pushable", "push_too_large")
PUSH_FAULT_SHARE = 0.25
#: The descriptor modes (:class:`~scin.hdl.isa.PushMode`), as the summary names them.
MODES = ("pull", "push", "auto")
FAULT_OPS = {"none": OPS, "decerr": numerics.OPS, "bad_desc": numerics.OPS,
             "bad_op": OPS, "absent_port": OPS, "root_not_a_rank": ROOTED_OPS,
             "shard_not_whole_flits": SHARDED, "push_no_space": PUSHABLE,
             "push_not_pushable": tuple(op for op in OPS if op not in PUSHABLE),
             "push_too_large": PUSHABLE}
IN_PLACE_SHARE = 0.3
MEM_SIZE = 4 << 20
SCRATCH = 3 << 20            # ordinary writes land in the top MiB, 4 KiB per write
FLAG_BASE = SCRATCH - 64 * 1024   # flag k at FLAG_BASE + 4 k; the buffers lie below
SLOTS_PER_DST = (MEM_SIZE - SCRATCH) // 4096
#: The ISA's push space per participant (one push resource, sync resource 0).
PUSH_CAPACITY = 16384
#: The soak's read and write trains: READ_WAVE and WRITE_POSTED under every drawn collective (a
#: train forms wherever two full pages are read back to back: at a message's start, the whole
#: table is free).
TRAINS = 2

class SoakConfig:
    """Parameters of one soak. ``count`` collectives from ``seed`` on ``endpoints`` endpoints."""

    def __init__(self, count=20, seed=1, endpoints=4, sim="verilator", fault_rate=0.2,
                 traffic_rate=0.3, reorder=True, capacity=16384, waves=4, max_size=None,
                 groups="random", nvls=False, push_capacity=PUSH_CAPACITY, trains=TRAINS,
                 gather_pairs=True):
        # nvls: the NVLS soak (:mod:`.nvls_soak`) on the 64 KiB memories of the NVLS system.
        # push_capacity: the push space per participant of sync resource 0 (0: no push mode;
        # the NVLS soak's switch has none). trains: the ISA's read and write trains (1: the
        # per-slot protocol; docs/ISA.md, Wave-level requests). gather_pairs: the ISA runs
        # in-place AllGathers of whole pages in pairs of ranks (docs/ISA.md; the NVLS soak's
        # system has no such ISA option, so it is off there).
        if max_size is None:
            max_size = 4096 if nvls else 32768
        top = 8 << 10 if nvls else 256 << 10
        for name, value, lo, hi in (("count", count, 1, 10_000), ("endpoints", endpoints, 2, 8),
                                    ("max_size", max_size, 64, top)):
            if not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an integer between {lo} and {hi}, not {value!r}")
        for name, value in (("fault_rate", fault_rate), ("traffic_rate", traffic_rate)):
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be between 0 and 1, not {value!r}")
        if groups not in ("random", "halves"):
            raise ValueError(f"groups must be 'random' or 'halves', not {groups!r}")
        if groups == "halves" and endpoints % 2:
            raise ValueError(f"groups 'halves' needs an even number of endpoints, not {endpoints}")
        if sim not in ("verilator", "icarus"):
            raise ValueError(f"sim must be 'verilator' or 'icarus', not {sim!r}")
        if nvls and groups != "random":
            raise ValueError("the NVLS soak draws its own groups: groups must be 'random' "
                             "with nvls")
        self.count, self.seed, self.endpoints, self.sim = count, seed, endpoints, sim
        self.fault_rate, self.traffic_rate = fault_rate, traffic_rate
        self.reorder, self.capacity, self.waves, self.max_size = reorder, capacity, waves, max_size
        if not isinstance(push_capacity, int) or push_capacity < 0 or push_capacity % 4096:
            raise ValueError(f"push_capacity must be a whole number of 4 KiB slots, "
                             f"not {push_capacity!r}")
        self.groups, self.nvls = groups, nvls
        self.push_capacity = 0 if nvls else push_capacity
        if not isinstance(trains, int) or not 1 <= trains <= capacity // 4096:
            raise ValueError(f"trains must be an integer between 1 and the {capacity // 4096} "
                             f"slots of the wave table, not {trains!r}")
        self.trains = trains
        if not isinstance(gather_pairs, bool):
            raise ValueError(f"gather_pairs must be True or False, not {gather_pairs!r}")
        self.gather_pairs = gather_pairs and not nvls

    def system(self):
        """The :class:`~scin.sim.system_config.SystemConfig` the soak runs on (the NVLS soak's is
        :func:`.nvls_soak.hardware`), on the paper's link model: with push space, one push
        resource of ``push_capacity`` bytes per participant (as ``scin allreduce --mode push``
        builds it, so tb/system/test_system.py's cases on this hardware share the soak's simulator
        build)."""
        return SystemConfig(endpoints=self.endpoints, capacity=self.capacity,
                            outstanding=self.waves, mem_size=MEM_SIZE, reorder=self.reorder,
                            push_capacity=self.push_capacity, trains=self.trains,
                            gather_pairs=self.gather_pairs)


def _inputs(rng, dtype, n, elements):
    """Random typed inputs for ``n`` participants: (data array, scales or None)."""
    g = np.random.default_rng(rng.getrandbits(32))
    x = g.standard_normal((n, elements)) * 4.0
    # BF16 has the range for larger values: spread them over more exponents.
    return numerics.encode(dtype, x * 100 if dtype == "bf16" else x)


def _draw_members(cfg, rng, k):
    """Collective ``k``'s participants (ascending ports: rank r is the r-th)."""
    n = cfg.endpoints
    group = 0
    if cfg.groups == "halves":
        # Two fixed groups (the paper's two TP4 groups on an 8-port switch), alternating in
        # the program: each works through its own collectives while the other runs.
        half = (1 << n // 2) - 1
        group = half if k % 2 == 0 else half << n // 2
    while bin(group).count("1") < 2:
        group = rng.getrandbits(n)
    return [i for i in range(n) if group >> i & 1]


def _draw_fault(cfg, rng, bad_so_far):
    """``(fault, bad-descriptor kind or None)``; the kinds in turn, so that a soak with
    ``len(BAD_DESC_KINDS)`` or more bad descriptors tries each one."""
    if rng.random() >= cfg.fault_rate:
        return "none", None
    fault = rng.choice(("decerr", "bad_desc"))
    if fault == "decerr":
        return fault, None
    return fault, BAD_DESC_KINDS[bad_so_far % len(BAD_DESC_KINDS)]


def _draw_op(rng, fault, kind, avoid=None):
    """An operation the fault (or kind) applies to, other than ``avoid`` (the concurrent
    collective's, in ``groups="halves"``): barrier with :data:`BARRIER_SHARE`, else a data
    operation uniformly."""
    allowed = [op for op in FAULT_OPS.get(kind, FAULT_OPS[fault]) if op != avoid]
    data_ops = [op for op in allowed if op != "barrier"]
    if "barrier" in allowed and (not data_ops or rng.random() < BARRIER_SHARE):
        return "barrier"
    return rng.choice(data_ops)


def _draw_size(cfg, rng, op, dtype, n, flit_bytes):
    """The per-rank count in its 16-bit form (elements x 2 bytes, NCCL's count): log-uniform up to
    ``max_size``, for ReduceScatter and AllGather divided by the ``n`` shards so their buffers stay
    within it; INT8 whole 64-element blocks, a sharded op's shard whole flits (the ISA's rules),
    at least one of those units."""
    size = 1 << rng.randint(6, int(math.log2(cfg.max_size)))
    # Not only powers of two: add a whole number of 128-byte steps sometimes.
    if rng.random() < 0.5:
        size = min(cfg.max_size, size + 128 * rng.randint(1, 8))
    shards = n if op in SHARDED else 1
    unit = 128 if dtype == "int8" else flit_bytes if shards > 1 else 2
    return max(unit, size // shards // unit * unit)


def _break(desc, kind, rng, isa, n_members):
    """Spoil ``desc`` in place with the bad-descriptor ``kind``."""
    from ..hdl.isa import DType, MAX_PORTS
    if kind == "misaligned":
        # Flit-aligned but not page-aligned: its packets would cross 4 KB boundaries.
        desc["dst_addr"] += 32 * rng.randint(1, 127)
    elif kind == "zero_length":
        desc["elements"] = 0
    elif kind == "too_long":
        desc["elements"] = isa.max_elements + 64
    elif kind == "int8_partial_block":
        desc.update(dtype=DType.INT8.value, elements=64 * max(1, desc["elements"] // 64) + 32)
    elif kind == "bad_dtype":
        desc["dtype"] = 3
    elif kind == "bad_op":
        desc["op"] = rng.choice((0, 7, 15))
    elif kind == "root_not_a_rank":
        desc["root"] = rng.randint(n_members, MAX_PORTS - 1)
    elif kind == "shard_not_whole_flits":
        # Half a flit over whole flits (FP16 or BF16: an INT8 shard of whole blocks is whole flits).
        if desc["dtype"] == DType.INT8.value:
            desc["dtype"] = DType.FP16.value
        desc["elements"] = 16 * max(1, desc["elements"] // 16) + 8
    elif kind == "push_too_large":
        # One block more than the push space holds (a whole number of INT8 blocks and flits, so
        # the space is the only reason); the window stays the drawn one: nothing moves.
        unit = 1 if desc["dtype"] == DType.INT8.value else 2
        shards = bin(desc["participants"]).count("1") if desc["op"] == Op.REDUCE_SCATTER.value \
            else 1
        desc["elements"] = (isa.push_capacity // shards // unit // 64 + 1) * 64
    elif kind in ("push_no_space", "push_not_pushable"):
        pass    # its mode (PUSH) with the resource or operation drawn spoils it
    else:
        # A port the switch lacks next to the real ones: the barrier of the real ones still runs.
        desc["participants"] |= 1 << rng.randint(isa.fabric.ports, MAX_PORTS - 1)


def _draw_traffic(cfg, rng, members, scratch_next):
    """Ordinary writes from some participants to other endpoints while the collective runs, each
    to a fresh 4 KiB scratch slot of its destination (``scratch_next`` counts them)."""
    traffic = []
    if rng.random() >= cfg.traffic_rate:
        return traffic
    for i in members:
        dst_ep = rng.choice([e for e in range(cfg.endpoints) if e != i])
        if scratch_next[dst_ep] >= SLOTS_PER_DST:
            continue
        length = 32 * rng.randint(1, 128)
        slot = SCRATCH + 4096 * scratch_next[dst_ep]
        traffic.append({"src": i, "dst": dst_ep, "addr": slot, "length": length,
                        "seed": rng.getrandbits(16)})
        if rng.random() < 0.3:
            # A second write to the same bytes right behind the first: the memory must end
            # with the second (order per source and class).
            traffic.append({"src": i, "dst": dst_ep, "addr": slot, "length": length,
                            "seed": rng.getrandbits(16), "overwrites": True})
        scratch_next[dst_ep] += 1
    return traffic


def _outcome(shape, layout, fault, data, scales):
    """Per rank of ``shape`` (a :class:`CollectiveConfig` laid out at address 0 as ``layout``):
    the regions to load and the image of its window (``layout["flag"]`` bytes: its buffers) the
    collective must leave (None: not checked), and the flag status (before masking). The image:
    zeros, the inputs, and for a good collective the results
    (:func:`~scin.sim.allreduce.expected_images`); a bad descriptor writes nothing."""
    window = layout["flag"]
    bufs = Buffers(layout["src"], layout["dst"], layout["src_scales"], layout["dst_scales"])
    loads, images, status = expected_images(shape, bufs, window, data, scales)
    if fault == "decerr":
        images = [None] * len(images)
    elif fault == "bad_desc":
        images = [region_image(window, regions) for regions in loads]
    return loads, images, status


def _descriptor(shape, layout, base, **fields):
    """The descriptor of ``shape`` with its buffers (``layout``) at ``base``; ``fields``: the
    rest (flag, sync resource, participants, flag mode)."""
    from ..hdl.isa import Op, DType
    return dict(op=Op[shape.op.upper().replace("-", "_")].value,
                dtype=DType[shape.dtype.upper()].value, elements=shape.elements, root=shape.root,
                src_addr=base + layout["src"], dst_addr=base + layout["dst"],
                src_scale_addr=base + layout["src_scales"],
                dst_scale_addr=base + layout["dst_scales"], **fields)


def draw_collective(cfg, rng, k, isa, bad_so_far, avoid, members=None):
    """Draw collective ``k``'s shape: ``(members, fault, kind, CollectiveConfig)``; ``members``
    given (the NVLS soak's, :mod:`.nvls_soak`) are taken as they are instead of drawn."""
    members = _draw_members(cfg, rng, k) if members is None else list(members)
    fault, kind = _draw_fault(cfg, rng, bad_so_far)
    op = _draw_op(rng, fault, kind, avoid)
    dtype = rng.choice(numerics.DTYPES)
    size = _draw_size(cfg, rng, op, dtype, len(members), isa.fabric.flit_bytes)
    root = rng.randrange(len(members)) if op in ROOTED_OPS else 0
    # DECERR moves the input beyond memory, so it cannot be in place.
    in_place = op != "barrier" and fault != "decerr" and rng.random() < IN_PLACE_SHARE
    shape = CollectiveConfig.from_fields(
        op=op, endpoints=len(members), dtype=dtype, size=size, root=root, in_place=in_place)
    return members, fault, kind, shape


def collective_entry(rng, k, isa, members, fault, kind, shape, layout, addr, *, flag, sync,
                     generation, mode="pull"):
    """Collective ``k`` of ``shape`` (drawn by :func:`draw_collective`) with its buffers
    (``layout``, :func:`~scin.sim.allreduce.memory_map`'s keys, ``layout["flag"]`` the window's
    bytes) at ``addr``: draws its flag mode, spoils the descriptor with its fault, draws the
    inputs. ``mode`` is the descriptor's :class:`~scin.hdl.isa.PushMode` name; a faulty
    descriptor that still has a barrier is never pushed (its AUTO, were it to push, becomes
    PULL). Returns ``(descriptor, expected entry, loads)``: the entry :func:`verify` (and
    :func:`~.collective_check.check_collective`) takes, and each member's regions to load, as
    offsets into the window. The NVLS soak (:mod:`.nvls_soak`) places its SCIN collectives
    with it too."""
    from ..hdl.isa import FlagMode, FlagStatus, PushMode, check_descriptor, push_mode
    data_flags = (FlagStatus.OVERFLOW | FlagStatus.INVALID).value
    window = layout["flag"]
    desc = _descriptor(shape, layout, addr, flag_mode=rng.choice(list(FlagMode)).value,
                       sync=sync, participants=sum(1 << i for i in members), flag_addr=flag,
                       mode=PushMode[mode.upper()].value)
    if fault == "decerr":
        # The input lies beyond the end of every participant's memory: reads answer DECERR.
        desc["src_addr"] = MEM_SIZE
    elif fault == "bad_desc":
        _break(desc, kind, rng, isa, len(members))
    no_barrier = kind in PUSH_BAD_KINDS
    if fault != "none" and not no_barrier and push_mode(desc, isa) == PushMode.PUSH:
        # Its participants arrive (the input of a DECERR fault is not in memory to push).
        desc["mode"], mode = PushMode.PULL.value, "pull"
    push = push_mode(desc, isa) == PushMode.PUSH
    pushed = fault == "none" and push
    reasons = check_descriptor(desc, isa)
    # The ISA runs it in pairs of ranks (docs/ISA.md, Paired AllGather).
    in_pairs = (isa.gather_pairs and not reasons
                and paired(desc["op"], desc["participants"], shape.data_bytes,
                           fabric=isa.fabric, int8=shape.dtype == "int8",
                           in_place=desc["src_addr"] == desc["dst_addr"], pushed=push))
    assert bool(reasons) == (fault == "bad_desc"), (k, fault, kind, desc, reasons)
    assert not no_barrier or desc["mode"] == PushMode.PUSH.value and reasons[-1:] and \
        "push" in reasons[-1], (k, kind, desc, reasons)
    data, scales = (None, None) if shape.op == "barrier" else \
        _inputs(rng, shape.dtype, len(members), shape.shards_in * shape.elements)
    loads, want, status = _outcome(shape, layout, fault, data, scales)
    entry = {"k": k, "op": shape.op, "dtype": shape.dtype, "size": shape.size,
             "root": shape.root, "in_place": shape.in_place, "fault": fault,
             "bad_kind": kind, "members": members, "window": (addr, addr + window),
             "buffers": {name: addr + layout[name] for name in
                         ("src", "dst", "src_scales", "dst_scales")},
             "inputs": dict(zip(members, loads)), "images": dict(zip(members, want)),
             # Faults: the ERROR bit is required; with DECERR the data read is not the input, so
             # other status bits are not predicted.
             "want_status": (status & data_flags) if fault == "none" else FlagStatus.ERROR.value,
             # A PUSH that cannot push has no barrier: its ERROR flags carry generation 0.
             "generation": 0 if no_barrier else generation, "flag": flag,
             "mode": mode, "pushed": pushed, "no_barrier": no_barrier, "paired": in_pairs}
    return desc, entry, loads


class _Batch:
    """The sync resources the collectives of one batch (``sync_resources`` of them, loaded as one
    program) have taken so far: ``used``; ``zero``, the member sets of the pushed collectives on
    resource 0 (the push resource) in program order; ``zero_closed`` once something else took
    resource 0 (no further collective may push there in this batch)."""

    def __init__(self):
        self.used, self.zero, self.zero_closed = set(), [], False

    def take(self, sync, members=None):
        """Take ``sync`` for a collective; ``members``: it pushes (on resource 0)."""
        self.used.add(sync)
        if sync == 0:
            if members is None:
                self.zero_closed = True
            else:
                self.zero.append(set(members))
        return sync


def _draw_mode(cfg, rng, isa, members, fault, kind, shape, layout, batch, push_bad_so_far):
    """The descriptor mode and sync resource of a collective drawn as ``members``, ``fault``,
    ``kind``, ``shape`` (:func:`draw_collective`), in ``batch`` (:class:`_Batch`), from ``rng``
    (the modes' own stream). Returns ``(mode, sync, fault, kind)``: a collective drawn good may
    become a PUSH that cannot push (:data:`PUSH_BAD_KINDS`, in turn from ``push_bad_so_far``,
    with the share :data:`PUSH_FAULT_SHARE` of ``fault_rate``).

    Only resource 0 has push space. A pushed collective takes it when every earlier collective
    of the batch there was pushed by a superset of its members (each of its members then waits
    for that flag before it pushes: the space is free again); anything else goes to a free
    resource without push space, or to resource 0 when no other is left (closing it)."""
    from ..hdl.isa import PushMode, check_descriptor, push_mode
    others = [r for r in range(isa.sync_resources) if r and r not in batch.used]

    def elsewhere():
        return batch.take(rng.choice(others)) if others else batch.take(0)

    def probe(mode):
        return _descriptor(shape, layout, 0, flag_mode=0, sync=0, flag_addr=0,
                           participants=sum(1 << i for i in members),
                           mode=PushMode[mode.upper()].value)
    # It can be pushed on resource 0 (its operation, its size), and may join the pushes there.
    pushable = fault == "none" and not check_descriptor(probe("push"), isa)
    joinable = not batch.zero_closed and all(set(members) <= m for m in batch.zero)
    if fault == "none" and rng.random() < cfg.fault_rate * PUSH_FAULT_SHARE:
        can = {"push_no_space": shape.op in PUSHABLE and others,
               "push_not_pushable": shape.op not in PUSHABLE,
               "push_too_large": shape.op in PUSHABLE and joinable}
        for j in range(len(PUSH_BAD_KINDS)):
            kind = PUSH_BAD_KINDS[(push_bad_so_far + j) % len(PUSH_BAD_KINDS)]
            if can[kind]:
                sync = batch.take(0) if kind == "push_too_large" else \
                    batch.take(rng.choice(others)) if kind == "push_no_space" else elsewhere()
                return "push", sync, "bad_desc", kind
        kind = None
    if pushable and joinable:
        mode = rng.choice(MODES)
        if mode == "pull":
            return mode, elsewhere(), fault, kind
        pushed = push_mode(probe(mode), isa) == PushMode.PUSH
        return mode, batch.take(0, members if pushed else None), fault, kind
    # Pulled: PULL, or AUTO, which pulls here (no push space, an operation or a size that is
    # not pushed; a faulty descriptor's AUTO is made PULL if it would push: collective_entry).
    return rng.choice(("pull", "auto")), elsewhere(), fault, kind


def make_plan(cfg):
    """Draw the collectives and lay them out in memory. Returns ``(plan, images, expected)``:
    the JSON plan for the simulator, ``images[i] = [(byte_addr, bytes)]`` (whole flits) to load
    into endpoint ``i``, and the expected outcome of every collective (:func:`verify` reads it;
    its ``window`` is the collective's buffers, ``inputs`` each member's regions loaded into it,
    as offsets into the window, and ``images`` each member's expected bytes of it). The NVLS
    soak's plan is :func:`.nvls_soak.make_nvls_plan`'s."""
    if cfg.nvls:
        raise ValueError("an NVLS soak's plan is make_nvls_plan's (scin.sim.nvls_soak)")
    isa = cfg.system().params().isa
    rng = random.Random(cfg.seed)
    images = [[] for _ in range(cfg.endpoints)]
    colls, expected = [], []
    addr = 0
    generation = Counter()
    scratch_next = [0] * cfg.endpoints   # next free 4 KiB scratch slot at each destination
    # The modes have a stream of their own: the rest of a seed's draw is what it was before.
    mode_rng = random.Random(f"push mode {cfg.seed}")
    for k in range(cfg.count):
        if k % isa.sync_resources == 0:
            batch = _Batch()
        # halves: collective k + 1 runs on the other group next to k, with another operation.
        avoid = expected[-1]["op"] if cfg.groups == "halves" and k % 2 else None
        bad_so_far = sum(e["bad_kind"] in BAD_DESC_KINDS for e in expected)
        members, fault, kind, shape = draw_collective(cfg, rng, k, isa, bad_so_far, avoid)
        layout = memory_map(shape)[0]
        window = layout["flag"]          # the buffers, from src to the end of the scales
        if addr + window > FLAG_BASE:
            raise ValueError(f"{cfg.count} collectives of up to {cfg.max_size} bytes do not fit in "
                             f"the {MEM_SIZE >> 20} MiB memories; lower --count or --max-size")
        if isa.push_resources:
            mode, sync, fault, kind = _draw_mode(
                cfg, mode_rng, isa, members, fault, kind, shape, layout, batch,
                sum(e["bad_kind"] in PUSH_BAD_KINDS for e in expected))
        else:
            mode, sync = "pull", k % isa.sync_resources
        # A PUSH that cannot push has no barrier: it does not advance its resource's generation.
        generation[sync] += kind not in PUSH_BAD_KINDS
        desc, entry, loads = collective_entry(rng, k, isa, members, fault, kind, shape, layout,
                                              addr, flag=FLAG_BASE + 4 * k, sync=sync,
                                              generation=generation[sync], mode=mode)
        for j, i in enumerate(members):
            images[i] += flit_loads(loads[j], window, isa.fabric.flit_bytes, base=addr)
        traffic = _draw_traffic(cfg, rng, members, scratch_next)
        stalls = {i: rng.choice((0, 0, rng.randint(1, 400))) for i in members}
        colls.append({"k": k, "batch_index": sync, "op": shape.op, "desc": desc,
                      "members": members, "generation": entry["generation"], "stalls": stalls,
                      "traffic": traffic, "pushed": entry["pushed"],
                      "no_barrier": entry["no_barrier"]})
        expected.append(entry)
        addr += window
    plan = {"hw": cfg.system().to_json(), "collectives": colls,
            "sync_resources": isa.sync_resources,
            "timeout_cycles": 400_000}
    return plan, images, expected


def plan_coverage(plan, expected):
    """The functional coverage (:mod:`.coverage`) of the collectives of a plan (:func:`make_plan`'s
    ``plan`` and ``expected``, the collectives the soak runs and :func:`verify` checks): one hit
    per collective in the bin of each axis and cross; sizes are classed against the plan's flit
    and wave-table capacity."""
    hw = plan["hw"]
    return collectives_coverage([(c["desc"], e) for c, e in
                                 zip(plan["collectives"], expected, strict=True)],
                                endpoints=hw["endpoints"], flit_bytes=hw["flit_width"] // 8,
                                capacity=hw["capacity"], push=bool(hw["push_capacity"]))


def collectives_coverage(pairs, *, endpoints, flit_bytes, capacity, push=False):
    """The functional coverage of the collectives ``pairs`` (``(descriptor, expected entry)``,
    as :func:`collective_entry` gives them) on ``endpoints`` ports; ``push``: the ISA has push
    space, so the PUSH descriptors that cannot push (:data:`PUSH_BAD_KINDS`) are fault bins."""
    from ..hdl.isa import FlagMode
    # A write error is a fault class of the space the soak does not draw (its DECERR is on the
    # reads; tb/block/test_faults.py injects write errors, directed): a hole by construction, listed
    # so that the report says so.
    kinds = BAD_DESC_KINDS + (PUSH_BAD_KINDS if push else ())
    faults = ("none", "decerr", "decerr_write") + tuple(f"bad_desc:{k}" for k in kinds)
    cov = Coverage(faults, {**FAULT_OPS, "decerr_write": numerics.OPS}, endpoints)
    for desc, e in pairs:
        mode = FlagMode(desc["flag_mode"]).name.lower()
        cov.add(bins_of(e["op"], e["dtype"], mode, e["size"], e["members"], e["in_place"],
                        e["fault"], e["bad_kind"], endpoints=endpoints, flit_bytes=flit_bytes,
                        capacity=capacity))
    return cov


def run_soak(cfg, log=print):
    """Run the soak; return the summary dict (see ``docs/RELIABILITY.md``).

    Raises ValueError for bad parameters and RuntimeError if the simulation does not complete (a
    hang is reported with the collective it stopped at). ``cfg.nvls``: the NVLS soak
    (:func:`.nvls_soak.run_nvls_soak`)."""
    if cfg.nvls:
        from .nvls_soak import run_nvls_soak
        return run_nvls_soak(cfg, log=log)
    plan, images, expected = make_plan(cfg)
    n = cfg.endpoints
    log(f"soak: {cfg.count} collectives, seed {cfg.seed}, {n} endpoints, {cfg.sim}; "
        f"building or reusing the system ...")
    try:
        run = run_system(cfg.system(), "scin.sim.testbench.soak_bench",
                         loads=dict(enumerate(images)), dump=Dump(0, MEM_SIZE), config=plan,
                         sim=cfg.sim, seed=cfg.seed, prefix=f"soak-{cfg.seed}-")
    except SystemRunError as exc:
        progress = exc.run_dir / "progress.json"
        where = json.loads(progress.read_text()) if progress.exists() else {}
        raise RuntimeError(f"the soak did not complete ({exc.__cause__}); "
                           f"last state: {where}") from exc
    wall, run_dir = run.wall_seconds, run.run_dir
    result = run.read_json("soak.json")
    memories = run.images
    summary = verify(expected, plan, result, memories)
    summary.update(seed=cfg.seed, count=cfg.count, endpoints=n, sim=cfg.sim,
                   wall_seconds=round(wall, 1), run_dir=str(run_dir),
                   cycles=result["cycles"], counters=result["counters"],
                   switch_errors=result["switch_errors"],
                   coverage=plan_coverage(plan, expected).as_dict())
    return summary


def _check_traffic(plan, memories):
    """``(intact, corrupted, failures)`` of the ordinary writes."""
    from ..hdl.endpoint.accelerator import pattern_bytes
    ok = bad = 0
    failures = []
    for c in plan["collectives"]:
        for n_t, t in enumerate(c["traffic"]):
            later = c["traffic"][n_t + 1] if n_t + 1 < len(c["traffic"]) else None
            if later is not None and later.get("overwrites") and later["addr"] == t["addr"] \
                    and later["dst"] == t["dst"]:
                continue        # overwritten by the next write: only that one must be there
            got = memories[t["dst"]][t["addr"]:t["addr"] + t["length"]].tobytes()
            if got == pattern_bytes(t["seed"], t["length"]):
                ok += 1
            else:
                bad += 1
                failures.append(f"ordinary write {t['src']} -> {t['dst']} at {t['addr']:#x} "
                                f"({t['length']} B, collective {c['k']}) arrived corrupted")
    return ok, bad, failures


def _check_counters(expected, counters):
    """The failures of the ISA's counters at the end of a soak of ``expected``: every descriptor
    completed once (``collectives``), each bad one counted once (``bad_descriptors``; one without
    a barrier once per program load, and each batch is loaded once), no timeout, no push WRITE
    dropped (the soak pushes only where and when the ISA takes it), no arrival at a resource that
    does not exist or twice in one generation."""
    want = {"collectives": len(expected),
            "bad_descriptors": sum(e["fault"] == "bad_desc" for e in expected),
            "timeouts": 0, "bad_pushes": 0, "bad_arrivals": 0, "dup_arrivals": 0}
    return [f"ISA counter {name} is {counters[name]}, expected {value}"
            for name, value in want.items() if name in counters and counters[name] != value]


def verify(expected, plan, result, memories):
    """Check every collective, isolation, ordinary traffic and (where ``result`` has them) the
    ISA's counters; return the summary: ``passed``, ``outcomes`` (per fault class), ``ops`` (per
    operation), ``modes`` (per descriptor mode), the ordinary writes, the isolation checks and
    the first 50 failures (docs/CLI.md)."""
    n = len(memories)
    failures = []
    by_class, by_op, by_mode = Counter(), Counter(), Counter()
    isolation_checks = 0     # (collective, non-participant) pairs checked: the test asserts > 0
    flags = {(int(k), int(i)): v for k, per in result["flags"].items() for i, v in per.items()}
    for e in expected:
        label = e["fault"] if e["fault"] != "bad_desc" else f"bad_desc:{e['bad_kind']}"
        found = check_collective(e, flags, memories)
        failures += found
        isolation_checks += n - len(e["members"])
        verdict = "FAILED" if found else "ok"
        by_class[(label, verdict)] += 1
        by_op[(e["op"], verdict)] += 1
        by_mode[(mode_label(e), verdict)] += 1
    traffic_ok, traffic_bad, traffic_failures = _check_traffic(plan, memories)
    failures += traffic_failures
    if "counters" in result:
        failures += _check_counters(expected, result["counters"])
    ops, modes = outcome_table(by_op), outcome_table(by_mode)
    return {"passed": not failures, "outcomes": dict(sorted(outcome_table(by_class).items())),
            "ops": {op: ops[op] for op in OPS if op in ops},
            "modes": {m: modes[m] for m in ("pull", "push", "auto:push", "auto:pull")
                      if m in modes},
            "pushed": sum(bool(e.get("pushed")) for e in expected),
            "paired": sum(bool(e.get("paired")) for e in expected),
            "ordinary_writes": traffic_ok + traffic_bad, "ordinary_writes_intact": traffic_ok,
            "isolation_checks": isolation_checks, "failures": failures[:50]}
