"""``scin collective`` and ``scin allreduce``: one collective on the simulated system, checked bit
for bit.

:func:`run_allreduce` makes seeded inputs, runs the system (``sim/testbench/allreduce_bench.py``
inside the simulator), compares every endpoint's memory with the golden model
(:func:`scin.sim.numerics.collective`, placed by :mod:`scin.sim.collective_buffers`) and returns a
JSON-able report. The whole buffer window of every endpoint is compared (the memories start
zeroed), so a byte written where the operation gives an endpoint nothing is a mismatch too.
Measurement definitions follow ``docs/PERFORMANCE.md``: latency runs from the cycle the last
participant's first packet of the collective (its arrival; pushing, its first push WRITE) leaves
its endpoint to the cycle the last participant sees its completion flag; efficiency is the operation's one-link bound over the latency,
``bound_bytes / (T * flit_bytes)``, where ``bound_bytes`` (16-bit form) is the largest buffer a
rank sends or receives: the message for All-Reduce, Reduce and Broadcast, ``N`` times it for
ReduceScatter and AllGather, ``N - 1`` times it for an AllGather in place.
"""

import dataclasses
import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import numerics
from .collective_buffers import Buffers, input_regions, result_regions
from .toolchain import BUILD_ROOT

__all__ = ["CollectiveConfig", "AllReduceConfig", "parse_size", "run_allreduce",
           "plan_params", "CLOCK_MHZ", "OPS", "ROOTED_OPS"]

CLOCK_MHZ = 250
#: Ordinary traffic (``traffic=True``): each endpoint writes this many bytes to the next one's
#: scratch area, in 4 KiB writes, while the All-Reduce runs.
TRAFFIC_BYTES = 16 * 4096
DTYPES = numerics.DTYPES
#: The operations ``scin collective --op`` runs (the golden model's names) and barrier.
OPS = numerics.OPS + ("barrier",)
#: The descriptor's modes (:class:`~scin.hdl.isa.PushMode`), as ``scin collective --mode`` names them.
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
    """One ``scin collective`` (or ``scin allreduce``) run. ``size`` is the per-rank message size
    in its 16-bit form (elements x 2 bytes) for every dtype, so fp16, bf16 and int8 runs compare
    like for like: NCCL's ``count`` (ReduceScatter: ``recvcount``, each rank's input is
    ``endpoints`` times it; AllGather: ``sendcount``, each rank's result is ``endpoints`` times it).
    ``root`` is a rank (Broadcast, Reduce); ``in_place`` puts the result over the input (NCCL's
    in-place layouts, docs/ISA.md). ``mode`` is the descriptor's :class:`~scin.hdl.isa.PushMode`
    (``pull``, ``push``, ``auto``); ``push_capacity`` the ISA's push space per participant (one
    push resource; 0 builds no push mode; push and auto need it, and get 32 KiB if it is 0).
    ``trains`` is the ISA's ``read_train`` and ``write_train`` (wave-level requests: up to that
    many slots per ``READ_WAVE`` and per acknowledged write; 1, the default: the paper's one
    READ and one WRITE_RESP per slot). ``gather_pairs`` builds the ISA with ``gather_pairs``: an
    in-place AllGather of whole 4 KiB pages runs in pairs of ranks (docs/ISA.md); off, the
    default, is the paper's configuration."""
    op:              str = "allreduce"
    endpoints:       int = 4
    dtype:           str = "fp16"
    size:            int = 4096
    seed:            int = 1
    sim:             str = "verilator"
    one_way_latency: int = 90
    mem_latency:     int = 40
    reorder:         bool = False
    capacity:        int = 32768
    outstanding:     int = 8
    flag_mode:       str = "ordered"
    replays:         int = 1
    flit_width:      int = 256
    traffic:         bool = False
    trace:           bool = False
    root:            int = 0
    in_place:        bool = False
    mode:            str = "pull"
    push_capacity:   int = 0
    trains:          int = 1
    gather_pairs:    bool = False

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode != "pull" and not self.push_capacity:
            object.__setattr__(self, "push_capacity", DEFAULT_PUSH_CAPACITY)
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
        if not isinstance(self.trains, int) or not 1 <= self.trains <= max(1, self.capacity // 4096):
            raise ValueError(f"trains must be between 1 and the {self.capacity // 4096} slots of "
                             f"the wave table (capacity / 4 KiB), not {self.trains!r}")
        if not isinstance(self.gather_pairs, bool):
            raise ValueError(f"gather_pairs must be True or False, not {self.gather_pairs!r}")
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


#: ``scin allreduce``'s configuration: a :class:`CollectiveConfig` (op ``allreduce`` by default).
AllReduceConfig = CollectiveConfig


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


def plan_params(plan):
    """The :class:`~scin.hdl.system.SystemParams` a plan describes (used on both sides)."""
    from ..hdl.isa import IsaParams
    from ..hdl.packet import FabricParams
    from ..hdl.system import SystemParams
    fabric = FabricParams.default_for(flit_width=plan["flit_width"], ports=plan["endpoints"])
    push = plan.get("push_capacity", 0)
    isa = IsaParams(fabric=fabric, capacity=plan["capacity"], waves=plan["outstanding"],
                    push_resources=1 if push else 0, push_capacity=push or 16384,
                    read_train=plan.get("trains", 1), write_train=plan.get("trains", 1),
                    gather_pairs=plan.get("gather_pairs", False))
    return SystemParams(isa=isa, one_way_latency=plan["one_way_latency"],
                        mem_latency=plan["mem_latency"], mem_size=plan["mem_size"],
                        reorder=plan["reorder"])


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


def region_image(window, regions):
    """``window`` zero bytes with ``regions`` (``(offset, bytes)``) written over them, in order."""
    image = bytearray(window)
    for addr, raw in regions:
        image[addr:addr + len(raw)] = raw
    return bytes(image)


def flit_loads(regions, window, flit_bytes, base=0):
    """``regions`` (offsets into a window of ``window`` bytes at ``base``) as the loader takes
    them: whole flits (:func:`write_memh` is given flit addresses and pads to a flit). Each is
    widened to the flits it touches, their bytes taken from the image of all of them, so regions
    that share a flit (an in-place INT8 AllGather's scale shards, ``C / 32`` bytes each at
    ``r * C / 32``) land at their bytes and the rest of the flit stays zero."""
    image = region_image(window, regions)
    out = []
    for a, raw in regions:
        lo, hi = a // flit_bytes * flit_bytes, -(-(a + len(raw)) // flit_bytes) * flit_bytes
        out.append((base + lo, image[lo:hi]))
    return out


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


def run_allreduce(cfg, save=None, waves=False, log=print):
    """Run one configuration, of any operation; return the report dict (see ``docs/CLI.md``
    for its keys).

    Raises ValueError for bad parameters, RuntimeError for tool failures (the simulation did not
    finish). A result mismatch is not an exception: it is ``match = false`` in the report.
    """
    from ..hdl.codec import unpack
    from ..hdl.isa import Op, FlagMode, PushMode, check_descriptor, flag_layout, push_mode
    from ..hdl.isa import DType
    from ..hdl.system import System
    from .runner import verilog_for, run_cocotb, SimulationError

    layout, mem_size = memory_map(cfg)
    plan = dataclasses.asdict(cfg)
    plan.update(mem_size=mem_size)
    params = plan_params(plan)  # validates the hardware parameters
    n = cfg.endpoints
    desc = dict(op=Op[cfg.op.upper().replace("-", "_")].value,
                dtype=DType[cfg.dtype.upper()].value,
                flag_mode=FlagMode[cfg.flag_mode.upper()].value, sync=0,
                participants=(1 << n) - 1, elements=cfg.elements, root=cfg.root,
                src_addr=layout["src"], dst_addr=layout["dst"],
                src_scale_addr=layout["src_scales"], dst_scale_addr=layout["dst_scales"],
                flag_addr=layout["flag"], mode=PushMode[cfg.mode.upper()].value)
    problems = check_descriptor(desc, params.isa)
    if problems:
        raise ValueError("; ".join(problems))
    pushed = push_mode(desc, params.isa) == PushMode.PUSH

    data, scales = make_inputs(cfg)
    bufs = Buffers(layout["src"], layout["dst"], layout["src_scales"], layout["dst_scales"])
    window = layout["flag"]       # every buffer lies below the flag
    loads, images, want_status = expected_images(cfg, bufs, window, data, scales)

    run_dir = Path(tempfile.mkdtemp(dir=_runs_dir(), prefix=f"{cfg.op}-{cfg.dtype}-{cfg.size}-"))
    dump_regions = [{"name": "buffers", "addr": 0, "bytes": window}]
    fb = params.fabric.flit_bytes
    # Generous: a slow link moves a flit per cycle; allow 20x the data movement plus fixed costs.
    moved = max(cfg.shards_in, cfg.shards_out) * (cfg.data_bytes + cfg.scale_bytes)
    timeout = 20 * (3 * moved // fb) + 200 * cfg.one_way_latency + 100_000
    if cfg.traffic:
        dump_regions.append({"name": "scratch", "addr": layout["scratch"], "bytes": TRAFFIC_BYTES})
    plan.update(run_dir=str(run_dir), descriptor=desc, pushed=pushed,
                scratch_addr=layout["scratch"], traffic_bytes=TRAFFIC_BYTES,
                timeout_cycles=timeout)
    # The memories are loaded and read back through files (the file backdoor of
    # hdl/endpoint/sim_ram.v): no Python work per word, whatever the message size.
    plusargs = []
    for i in range(n):
        hex_in = run_dir / f"ep{i}.in.hex"
        write_memh(hex_in, [(addr // fb, raw) for addr, raw in flit_loads(loads[i], window, fb)], fb)
        plusargs += [f"+scin_load_ep{i}={hex_in}", f"+scin_dump_ep{i}={run_dir / f'ep{i}.out.hex'}"]
    dump_lo = min(r["addr"] for r in dump_regions) // fb
    dump_hi = -(-max(r["addr"] + r["bytes"] for r in dump_regions) // fb)
    plusargs += [f"+scin_dump_lo={dump_lo}", f"+scin_dump_hi={dump_hi}"]

    started = time.monotonic()
    log(f"elaborating the system ({n} endpoints, {params.fabric.flit_width}-bit flits) ...")
    path = verilog_for(lambda: System(params), "system", repr(params))
    log(f"simulating on {cfg.sim} (first run of a configuration also builds it) ...")
    try:
        run_cocotb(verilog_path=path, top="system",
                   test_module="scin.sim.testbench.allreduce_bench", sim=cfg.sim, config=plan,
                   waves=waves, test_dir=run_dir, seed=cfg.seed, quiet=True, plusargs=plusargs)
    except SimulationError as exc:
        raise RuntimeError(f"the simulation did not complete: {exc}") from exc
    wall = time.monotonic() - started

    timing = json.loads((run_dir / "timing.json").read_text())
    sim_cps = _sim_cycles_per_second(run_dir)
    got = {}
    for i in range(n):
        image = read_memh(run_dir / f"ep{i}.out.hex", fb)
        for r in dump_regions:
            start = r["addr"] - dump_lo * fb
            got[f"ep{i}_{r['name']}"] = image[start:start + r["bytes"]]
    per_endpoint = []
    all_match = True
    traffic_ok = True
    if cfg.traffic:
        from ..hdl.endpoint.accelerator import pattern_bytes
        for i in range(n):
            sender = (i - 1) % n
            expect = b"".join(pattern_bytes(traffic_seed(sender, k), 4096)
                              for k in range(TRAFFIC_BYTES // 4096))
            traffic_ok &= got[f"ep{i}_scratch"].tobytes() == expect
    for i in range(n):
        image = got[f"ep{i}_buffers"].tobytes()
        match = image == images[i]
        all_match &= match
        mismatches = 0
        if not match:
            a = np.frombuffer(image, np.uint8)
            b = np.frombuffer(images[i], np.uint8)
            mismatches = int(np.count_nonzero(a != b))
        flag = unpack(flag_layout(), timing["replays"][-1]["flags"][str(i)])
        per_endpoint.append({"endpoint": i, "match": bool(match), "mismatched_bytes": mismatches,
                             "flag_status": flag["status"], "flag_generation": flag["generation"],
                             "flag_cycle": timing["replays"][-1]["flag_cycles"][str(i)]})
    cycles = [r["cycles"] for r in timing["replays"]]
    t = cycles[-1]
    status = max(e["flag_status"] for e in per_endpoint)
    report = {
        "match": bool(all_match and traffic_ok), "op": cfg.op, "root": cfg.root,
        "in_place": cfg.in_place, "mode": cfg.mode, "pushed": pushed, "endpoints": n, "dtype": cfg.dtype, "size_bytes": cfg.size,
        "elements": cfg.elements, "cycles": t, "latency_us": t / CLOCK_MHZ,
        "bound_cycles": cfg.bound_bytes / fb, "efficiency": cfg.bound_bytes / (t * fb),
        "status": status, "expected_status": want_status & 3,
        "replay_cycles": cycles, "per_endpoint": per_endpoint, "counters": timing["counters"],
        "switch_errors": timing["switch_errors"], "seed": cfg.seed, "sim": cfg.sim,
        "traffic_intact": bool(traffic_ok) if cfg.traffic else None,
        "params": {k: plan[k] for k in ("one_way_latency", "mem_latency", "reorder", "capacity",
                                        "outstanding", "flag_mode", "flit_width", "mem_size",
                                        "push_capacity", "trains", "gather_pairs")},
        "wall_seconds": round(wall, 2), "sim_cycles_per_second": sim_cps, "run_dir": str(run_dir),
    }
    if cfg.trace:
        from .trace import hops
        r = timing["replays"][-1]
        report["hops"] = hops([tuple(x) for x in timing["trace"]], sorted(int(k) for k in r["flags"]),
                              r["start"], r["end"], cfg.one_way_latency, cfg.mem_latency,
                              -(-cfg.data_bytes // fb), barrier=cfg.op == "barrier")
    if waves:
        found = sorted(run_dir.glob("*.vcd")) + sorted(run_dir.glob("*.fst"))
        report["waveform"] = str(found[0]) if found else None
    if save:
        _save(cfg, Path(save), bufs, data, scales, got, report)
    return report


def _sim_cycles_per_second(run_dir):
    """Simulated clock cycles per second of simulator wall time (the cocotb test alone: no build,
    no golden model), from cocotb's results.xml; None if it is missing."""
    import xml.etree.ElementTree as ET
    from .testbench.env import CLOCK_PERIOD_NS
    try:
        case = ET.parse(Path(run_dir) / "results.xml").find(".//testcase")
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        seconds = float(case.get("time"))
        return round(float(props["sim_time_duration"]) / CLOCK_PERIOD_NS / seconds)
    except (OSError, ET.ParseError, AttributeError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def write_memh(path, regions, width_bytes):
    """Write a ``$readmemh`` file: for each ``(word_address, data)``, an ``@address`` line and one
    little-endian word of ``width_bytes`` per line (hex, most significant digit first)."""
    with open(path, "w") as f:
        for word, data in regions:
            data = np.frombuffer(bytes(data) + bytes(-len(data) % width_bytes), np.uint8)
            digits = data.reshape(-1, width_bytes)[:, ::-1].tobytes().hex()
            step = 2 * width_bytes
            f.write(f"@{word:x}\n")
            f.write("\n".join(digits[k:k + step] for k in range(0, len(digits), step)))
            f.write("\n")


def read_memh(path, width_bytes):
    """The bytes of a ``$writememh`` file (one word per line; comments and ``@`` lines skipped;
    X or Z digits, which a simulator writes for unknown bits, fail loudly)."""
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        raise RuntimeError(f"the simulator wrote no memory dump {path}") from None
    words = [w.strip() for w in lines]
    words = [w for w in words if w and not w.startswith(("//", "@"))]
    text = "".join(words)
    if any(c in text for c in "xXzZ"):
        raise RuntimeError(f"{path}: the memory holds unknown (X/Z) bits")
    data = np.frombuffer(bytes.fromhex(text), np.uint8)
    return data.reshape(-1, width_bytes)[:, ::-1].reshape(-1)


def traffic_seed(sender, k):
    """Pattern seed of ordinary write ``k`` from endpoint ``sender`` (see ``pattern_bytes``)."""
    return (sender << 8 | k) & 0xFFFF


def _runs_dir():
    path = BUILD_ROOT / "runs"
    path.mkdir(parents=True, exist_ok=True)
    return path


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
