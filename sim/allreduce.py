"""``scin collective`` and ``scin allreduce``: one collective on the simulated system, checked bit
for bit.

:func:`run_allreduce` makes seeded inputs, runs the system (``sim/testbench/allreduce_bench.py``
inside the simulator), compares every endpoint's memory with the golden model
(:func:`scin.sim.numerics.collective`, placed by :mod:`scin.sim.collective_buffers`) and returns a
JSON-able report. The whole buffer window of every endpoint is compared (the memories start
zeroed), so a byte written where the operation gives an endpoint nothing is a mismatch too.
Measurement definitions follow ``docs/PERFORMANCE.md``: latency runs from the cycle the last
participant's first packet of the collective (its arrival; pushing, its first push WRITE) leaves
its endpoint to the cycle the last participant sees its completion flag; efficiency is the
operation's one-link bound over the latency,
``bound_bytes / (T * flit_bytes)``, where ``bound_bytes`` (16-bit form) is the largest buffer a
rank sends or receives: the message for All-Reduce, Reduce and Broadcast, ``N`` times it for
ReduceScatter and AllGather, ``N - 1`` times it for an AllGather in place.
"""

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import numerics
from ..hdl.paper import CLOCK_MHZ
from .collective_buffers import Buffers, input_regions, result_regions
from .system_config import SystemConfig
from .system_run import Dump, region_image, run_system

__all__ = ["CollectiveConfig", "parse_size", "run_allreduce",
           "collective_descriptor", "CLOCK_MHZ", "OPS", "ROOTED_OPS"]

#: Ordinary traffic (``traffic=True``): each endpoint writes this many bytes to the next one's
#: scratch area, in 4 KiB writes, while the All-Reduce runs.
TRAFFIC_BYTES = 16 * 4096
DTYPES = numerics.DTYPES
#: The operations ``scin collective --op`` runs (the golden model's names) and barrier.
OPS = numerics.OPS + ("barrier",)
#: The descriptor's modes (:class:`~scin.hdl.isa.PushMode`), as ``scin collective --mode`` names
#: them.
MODES = ("pull", "push", "auto")
#: The push space per participant a push or auto run gets when it names none.
DEFAULT_PUSH_CAPACITY = 32768
#: The operations with a root (``CollectiveConfig.root``).
ROOTED_OPS = ("broadcast", "reduce")
_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GIB": 1 << 30}


def parse_size(text):
    """``"4KiB"`` -> 4096. Accepts B, K/KB/KiB, M/MB/MiB (binary multiples)."""
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", str(text))
    if not match or match.group(2).upper() not in _UNITS:
        raise ValueError(f"size must be a number of bytes with an optional unit (B, KiB, MiB), "
                         f"e.g. 4KiB, not {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


@dataclass(frozen=True)
class CollectiveConfig:
    """One ``scin collective`` (or ``scin allreduce``) run: the collective and how it is run; the
    hardware it runs on is ``hw``, a :class:`~scin.sim.system_config.SystemConfig` (the ranks are
    its ``endpoints``; its ``mem_size`` is replaced by the one :func:`memory_map` needs,
    :meth:`system`). :meth:`from_fields` takes the fields of both by name, as the command line
    and the sweeps give them.

    ``size`` is the per-rank message size in its 16-bit form (elements x 2 bytes) for every
    dtype, so fp16, bf16 and int8 runs compare like for like: NCCL's ``count`` (ReduceScatter:
    ``recvcount``, each rank's input is ``endpoints`` times it; AllGather: ``sendcount``, each
    rank's result is ``endpoints`` times it). ``root`` is a rank (Broadcast, Reduce);
    ``in_place`` puts the result over the input (NCCL's in-place layouts, docs/ISA.md). ``mode``
    is the descriptor's :class:`~scin.hdl.isa.PushMode` (``pull``, ``push``, ``auto``); push and
    auto need push space in ``hw`` and get :data:`DEFAULT_PUSH_CAPACITY` if it has none.
    ``flag_mode`` is the completion flags' (``ordered``, ``acked``); ``replays`` runs the same
    descriptor again; ``traffic`` races ordinary writes; ``trace`` records the hop table
    (Icarus)."""
    op:              str = "allreduce"
    dtype:           str = "fp16"
    size:            int = 4096
    seed:            int = 1
    sim:             str = "verilator"
    flag_mode:       str = "ordered"
    replays:         int = 1
    traffic:         bool = False
    trace:           bool = False
    root:            int = 0
    in_place:        bool = False
    mode:            str = "pull"
    hw:              SystemConfig = SystemConfig()

    @classmethod
    def from_fields(cls, **fields):
        """The run of ``fields``: this class's names, and :class:`SystemConfig`'s (except
        ``mem_size`` and ``nvls``) for its hardware."""
        hw_names = {f.name for f in dataclasses.fields(SystemConfig)} - {"mem_size", "nvls"}
        hw = {k: fields.pop(k) for k in list(fields) if k in hw_names}
        return cls(**fields, hw=SystemConfig(**hw))

    @property
    def endpoints(self):
        """The ranks: every endpoint of the hardware takes part."""
        return self.hw.endpoints

    def __post_init__(self):
        if not isinstance(self.hw, SystemConfig):
            raise ValueError(f"hw must be a SystemConfig, not {self.hw!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode != "pull" and not self.hw.push_capacity:
            object.__setattr__(self, "hw", self.hw.replace(push_capacity=DEFAULT_PUSH_CAPACITY))
        if self.op not in OPS:
            raise ValueError(f"op must be one of {', '.join(OPS)}, not {self.op!r}")
        if self.op in ROOTED_OPS:
            if not 0 <= self.root < self.endpoints:
                raise ValueError(f"root must be a rank between 0 and {self.endpoints - 1}, "
                                 f"not {self.root}")
        elif self.root:
            raise ValueError(f"root is for broadcast and reduce, not {self.op}")
        if self.op == "barrier" and (self.in_place or self.traffic):
            raise ValueError("a barrier moves no data: in_place and traffic do not apply")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if not 2 <= self.endpoints <= 8:
            raise ValueError(f"endpoints must be between 2 and 8, not {self.endpoints}")
        if self.size <= 0 or self.size % 2:
            raise ValueError(f"size must be a positive even number of bytes (elements x 2), "
                             f"not {self.size}")
        if self.dtype == "int8" and self.elements % 64:
            raise ValueError(f"int8 needs whole 64-element blocks: size must be a multiple of 128 "
                             f"bytes, not {self.size}")
        if self.size > 64 << 20:
            raise ValueError(f"size must be at most 64 MiB, not {self.size}")
        if self.flag_mode not in ("acked", "ordered"):
            raise ValueError(f"flag_mode must be 'acked' or 'ordered', not {self.flag_mode!r}")
        trains, slots = self.hw.trains, self.hw.capacity // 4096
        if not isinstance(trains, int) or not 1 <= trains <= max(1, slots):
            raise ValueError(f"trains must be between 1 and the {slots} slots of the wave table "
                             f"(capacity / 4 KiB), not {trains!r}")
        if not isinstance(self.hw.gather_pairs, bool):
            raise ValueError(f"gather_pairs must be True or False, not {self.hw.gather_pairs!r}")
        if self.replays < 1:
            raise ValueError(f"replays must be at least 1, not {self.replays}")
        if self.trace:
            # The trace reads signals inside the hierarchy (Verilator builds do not expose them)
            # and runs Python every cycle; the hop table matches each READ with its response by
            # count, which INT8's scale reads would confuse.
            if self.sim != "icarus":
                raise ValueError("trace needs the icarus simulator (--sim icarus)")
            if max(self.shards_in, self.shards_out) * self.data_bytes > 4096 \
                    or self.dtype == "int8" or self.replays != 1 or self.traffic:
                raise ValueError("trace is for one fp16 or bf16 collective whose buffers are at "
                                 "most 4 KiB per rank, without replays or ordinary traffic")

    @property
    def elements(self):
        return self.size // 2

    @property
    def data_bytes(self):
        return self.elements * (1 if self.dtype == "int8" else 2)

    @property
    def scale_bytes(self):
        return 2 * (self.elements // 64) if self.dtype == "int8" else 0

    @property
    def shards_in(self):
        """Shards of the message in each rank's input (ReduceScatter: one per rank)."""
        return self.endpoints if self.op == "reduce-scatter" else 1

    @property
    def shards_out(self):
        """Shards of the message in each rank's result (AllGather: one per rank)."""
        return self.endpoints if self.op == "allgather" else 1

    @property
    def bound_bytes(self):
        """The largest buffer a rank sends or receives over its link, in the 16-bit form: the
        operation's lower bound is ``bound_bytes / flit_bytes`` cycles (docs/PERFORMANCE.md)."""
        if self.op == "barrier":
            return 0
        if self.op == "allgather" and self.in_place:
            return (self.endpoints - 1) * self.size
        return max(self.shards_in, self.shards_out) * self.size

    def system(self):
        """The hardware this run builds: ``hw`` with the memory size of :func:`memory_map` (one
        size for every message up to 1 MiB)."""
        return self.hw.replace(mem_size=memory_map(self)[1])


def _round_up(x, to):
    return -(-x // to) * to


def memory_map(cfg):
    """Byte addresses of the buffers, identical in every endpoint (symmetric allocation)."""
    shards = max(cfg.shards_in, cfg.shards_out)
    region = _round_up(max(shards * cfg.data_bytes, 1), 4096)
    sregion = _round_up(max(shards * cfg.scale_bytes, 1), 4096)
    layout = {"src": 0, "dst": region, "src_scales": 2 * region, "dst_scales": 2 * region + sregion,
              "flag": 2 * region + 2 * sregion}
    if cfg.in_place:
        layout.update(dst=layout["src"], dst_scales=layout["src_scales"])
    layout["scratch"] = layout["flag"] + 4096
    total = layout["scratch"] + TRAFFIC_BYTES
    # One memory size for every message up to 1 MiB, so they all share one simulator build.
    mem_size = max(4 << 20, 1 << (total - 1).bit_length())
    return layout, mem_size


def make_inputs(cfg):
    """Seeded inputs, typed as the golden model takes them: ``(data, scales)``, one row per rank
    (``shards_in * elements`` columns; ``scales`` None but for int8)."""
    rng = np.random.default_rng(cfg.seed)
    n, e = cfg.endpoints, cfg.elements * cfg.shards_in
    # Activation-like values: Gaussian with a few heavy channels.
    x = rng.standard_normal((n, e)) * 4.0
    heavy = rng.choice(e, size=max(1, e // 512), replace=False)
    x[:, heavy] *= 40.0
    return numerics.encode(cfg.dtype, x)


def expected_images(cfg, bufs, window, data, scales):
    """Per rank: the regions its memory is loaded with, and the image of ``window`` bytes from
    address 0 the collective must leave (zeroed memory, the inputs, the results), and the
    status the flags must carry."""
    loads, images, status = [], [], 0
    results = ([None] * cfg.endpoints if cfg.op == "barrier" else
               numerics.collective(cfg.op, cfg.dtype, data, scales, cfg.root))
    for r in range(cfg.endpoints):
        regions = [] if cfg.op == "barrier" else input_regions(
            cfg.op, r, data[r], None if scales is None else scales[r], bufs)
        loads.append(regions)
        images.append(region_image(window, regions + result_regions(cfg.op, r, results[r], bufs,
                                                                    root=cfg.root)))
        status |= 0 if results[r] is None else int(results[r].status)
    return loads, images, status


def _typed_view(cfg, raw, scales=False):
    if scales:
        return np.frombuffer(raw, np.float16)
    return np.frombuffer(raw, {"fp16": np.float16, "bf16": np.uint16, "int8": np.int8}[cfg.dtype])


def collective_descriptor(cfg, layout, isa):
    """The descriptor dict of ``cfg``'s collective at ``layout`` (:func:`memory_map`) and whether
    the ISA ``isa`` pushes it; raises ValueError naming every problem the ISA would refuse."""
    from ..hdl.isa import Op, FlagMode, PushMode, DType, check_descriptor, push_mode
    desc = dict(op=Op[cfg.op.upper().replace("-", "_")].value,
                dtype=DType[cfg.dtype.upper()].value,
                flag_mode=FlagMode[cfg.flag_mode.upper()].value, sync=0,
                participants=(1 << cfg.endpoints) - 1, elements=cfg.elements, root=cfg.root,
                src_addr=layout["src"], dst_addr=layout["dst"],
                src_scale_addr=layout["src_scales"], dst_scale_addr=layout["dst_scales"],
                flag_addr=layout["flag"], mode=PushMode[cfg.mode.upper()].value)
    problems = check_descriptor(desc, isa)
    if problems:
        raise ValueError("; ".join(problems))
    return desc, push_mode(desc, isa) == PushMode.PUSH


def run_allreduce(cfg, save=None, waves=False, log=print):
    """Run one configuration, of any operation; return the report dict (see ``docs/CLI.md``
    for its keys).

    Raises ValueError for bad parameters, RuntimeError for tool failures (the simulation did not
    finish: :class:`~scin.sim.system_run.SystemRunError`). A result mismatch is not an
    exception: it is ``match = false`` in the report.
    """
    layout, _ = memory_map(cfg)
    system = cfg.system()
    fb = system.flit_width // 8
    desc, pushed = collective_descriptor(cfg, layout, system.params().isa)
    data, scales = make_inputs(cfg)
    bufs = Buffers(layout["src"], layout["dst"], layout["src_scales"], layout["dst_scales"])
    window = layout["flag"]       # every buffer lies below the flag
    loads, images, want_status = expected_images(cfg, bufs, window, data, scales)
    # Generous: a slow link moves a flit per cycle; allow 20x the data movement plus fixed costs.
    moved = max(cfg.shards_in, cfg.shards_out) * (cfg.data_bytes + cfg.scale_bytes)
    timeout = 20 * (3 * moved // fb) + 200 * system.one_way_latency + 100_000
    bench = dict(descriptor=desc, pushed=pushed, replays=cfg.replays, traffic=cfg.traffic,
                 trace=cfg.trace, scratch_addr=layout["scratch"], traffic_bytes=TRAFFIC_BYTES,
                 timeout_cycles=timeout)
    dump = Dump(0, layout["scratch"] + TRAFFIC_BYTES if cfg.traffic else window)
    run = run_system(system, "scin.sim.testbench.allreduce_bench", loads=dict(enumerate(loads)),
                     dump=dump, config=bench, sim=cfg.sim, seed=cfg.seed, waves=waves,
                     prefix=f"{cfg.op}-{cfg.dtype}-{cfg.size}-", log=log)
    timing = run.read_json("timing.json")
    got = {f"ep{i}_buffers": image[:window] for i, image in enumerate(run.images)}
    traffic_ok = not cfg.traffic or _traffic_intact(cfg, run.images, layout["scratch"])
    report = _report(cfg, system, run, timing, images, pushed)
    report.update(match=bool(report["match"] and traffic_ok),
                  expected_status=want_status & 3,
                  traffic_intact=bool(traffic_ok) if cfg.traffic else None)
    if cfg.trace:
        from .trace import hops
        r = timing["replays"][-1]
        report["hops"] = hops([tuple(x) for x in timing["trace"]],
                              sorted(int(k) for k in r["flags"]), r["start"], r["end"],
                              system.one_way_latency, system.mem_latency, -(-cfg.data_bytes // fb),
                              barrier=cfg.op == "barrier")
    if waves:
        found = sorted(run.run_dir.glob("*.vcd")) + sorted(run.run_dir.glob("*.fst"))
        report["waveform"] = str(found[0]) if found else None
    if save:
        _save(cfg, Path(save), bufs, data, scales, got, report)
    return report


def _traffic_intact(cfg, memories, scratch):
    """Whether every endpoint's scratch area holds the ordinary writes of the previous one."""
    from ..hdl.endpoint.accelerator import pattern_bytes
    n = cfg.endpoints
    for i in range(n):
        expect = b"".join(pattern_bytes(traffic_seed((i - 1) % n, k), 4096)
                          for k in range(TRAFFIC_BYTES // 4096))
        if memories[i][scratch:scratch + TRAFFIC_BYTES].tobytes() != expect:
            return False
    return True


def _per_endpoint(i, image, want, replay):
    """Endpoint ``i``'s entry of the report: its buffers ``image`` against ``want``, its flag."""
    from ..hdl.codec import unpack
    from ..hdl.isa import flag_layout
    match = image == want
    mismatches = 0 if match else int(np.count_nonzero(
        np.frombuffer(image, np.uint8) != np.frombuffer(want, np.uint8)))
    flag = unpack(flag_layout(), replay["flags"][str(i)])
    return {"endpoint": i, "match": bool(match), "mismatched_bytes": mismatches,
            "flag_status": flag["status"], "flag_generation": flag["generation"],
            "flag_cycle": replay["flag_cycles"][str(i)]}


def _report(cfg, system, run, timing, images, pushed):
    """The report of a finished run (the data checks only: the caller adds the traffic's)."""
    fb = system.flit_width // 8
    window = len(images[0])
    per_endpoint = [_per_endpoint(i, run.images[i][:window].tobytes(), images[i],
                                  timing["replays"][-1]) for i in range(cfg.endpoints)]
    cycles = [r["cycles"] for r in timing["replays"]]
    t = cycles[-1]
    hardware = system.to_json()
    return {
        "match": all(e["match"] for e in per_endpoint), "op": cfg.op, "root": cfg.root,
        "in_place": cfg.in_place, "mode": cfg.mode, "pushed": pushed, "endpoints": cfg.endpoints,
        "dtype": cfg.dtype, "size_bytes": cfg.size,
        "elements": cfg.elements, "cycles": t, "latency_us": t / CLOCK_MHZ,
        "bound_cycles": cfg.bound_bytes / fb, "efficiency": cfg.bound_bytes / (t * fb),
        "status": max(e["flag_status"] for e in per_endpoint), "expected_status": None,
        "replay_cycles": cycles, "per_endpoint": per_endpoint, "counters": timing["counters"],
        "switch_errors": timing["switch_errors"], "seed": cfg.seed, "sim": cfg.sim,
        "traffic_intact": None,
        "params": {k: cfg.flag_mode if k == "flag_mode" else hardware[k]
                   for k in ("one_way_latency", "mem_latency", "reorder", "capacity",
                             "outstanding", "flag_mode", "flit_width", "mem_size",
                             "push_capacity", "trains", "gather_pairs")},
        "wall_seconds": run.wall_seconds, "sim_cycles_per_second": run.sim_cycles_per_second,
        "run_dir": str(run.run_dir),
    }


def traffic_seed(sender, k):
    """Pattern seed of ordinary write ``k`` from endpoint ``sender`` (see ``pattern_bytes``)."""
    return (sender << 8 | k) & 0xFFFF


def _save(cfg, out, bufs, data, scales, got, report):
    """``ep{i}_in.npy`` / ``ep{i}_out.npy`` (+ scales for int8), typed as documented in docs/CLI.md:
    each rank's input, and its result buffer (at ``dst``, ``shards_out`` messages long; an
    in-place ReduceScatter's at the rank's shard)."""
    out.mkdir(parents=True, exist_ok=True)
    nbytes, sbytes = cfg.data_bytes * cfg.shards_out, cfg.scale_bytes * cfg.shards_out
    for i in range(cfg.endpoints):
        image = got[f"ep{i}_buffers"].tobytes()
        at = i * cfg.data_bytes if cfg.op == "reduce-scatter" and cfg.in_place else 0
        np.save(out / f"ep{i}_in.npy", np.asarray(data[i]))
        result = image[bufs.dst + at:bufs.dst + at + nbytes]
        np.save(out / f"ep{i}_out.npy", _typed_view(cfg, result))
        if cfg.dtype == "int8":
            s_at = at // 32
            np.save(out / f"ep{i}_in_scales.npy", np.asarray(scales[i]))
            np.save(out / f"ep{i}_out_scales.npy", _typed_view(
                cfg, image[bufs.dst_scale + s_at:bufs.dst_scale + s_at + sbytes], True))
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
