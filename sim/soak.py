"""``scin soak``: a seeded, randomised run of many collectives on one simulated system.

:func:`make_plan` draws ``count`` collectives from one seed: dtype (fp16, bf16, int8), size (64 B
to 32 KiB, log-uniform), participant group (any subset of two or more endpoints), in-place or
not, arrival stalls per participant (0 to 400 cycles), ordinary traffic between endpoints during
the collective, and a fault class:

Groups are random subsets of two or more endpoints, or (``groups="halves"``) two fixed halves
alternating in the program, as two tensor-parallel groups sharing one switch. Some ordinary
writes are followed by a second write to the same bytes from the same source, so the memory must
end with the second (order per source and class).

* ``none``: a good collective; every participant's result must be bit-exact with the golden model
  (:mod:`scin.sim.numerics`) and its flag must carry the golden model's status;
* ``decerr``: the input buffer lies beyond the end of every participant's memory, so reads answer
  AXI DECERR; every participant's flag must carry ``ERROR`` (the result is not checked: it is
  not claimed);
* ``bad_desc``: one of the descriptor errors that still has a barrier (misaligned address, length
  0, length over the maximum, an INT8 length that is not whole blocks, an unknown dtype or op);
  every flag must carry ``ERROR`` and the result buffer must be untouched.

Everything happens in one simulation (the system is built once per configuration): memory images
are loaded through the file backdoor at time 0, collectives run in batches of up to
``sync_resources`` descriptors (descriptor ``j`` of a batch on sync resource ``j``), and the
memories are dumped at the end. :func:`verify` then checks every collective, every
non-participant's untouched result and flag (isolation) and every ordinary write, and returns the
summary. ``sim/testbench/soak_bench.py`` is the simulator side.
"""

import json
import math
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from . import numerics
from .allreduce import write_memh, read_memh, plan_params, _runs_dir

__all__ = ["SoakConfig", "make_plan", "run_soak", "FAULTS"]

FAULTS = ("none", "decerr", "bad_desc")
BAD_DESC_KINDS = ("misaligned", "zero_length", "too_long", "int8_partial_block", "bad_dtype", "bad_op")
MEM_SIZE = 4 << 20
SCRATCH = 3 << 20            # ordinary writes land in the top MiB, 4 KiB per write
ALIGN = 4096                 # data and scale buffers: page-aligned, as the ISA requires


class SoakConfig:
    """Parameters of one soak. ``count`` collectives from ``seed`` on ``endpoints`` endpoints."""

    def __init__(self, count=20, seed=1, endpoints=4, sim="verilator", fault_rate=0.2,
                 traffic_rate=0.3, reorder=True, capacity=16384, waves=4, max_size=32768,
                 groups="random"):
        for name, value, lo, hi in (("count", count, 1, 10_000), ("endpoints", endpoints, 2, 8),
                                    ("max_size", max_size, 64, 256 << 10)):
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
        self.count, self.seed, self.endpoints, self.sim = count, seed, endpoints, sim
        self.fault_rate, self.traffic_rate = fault_rate, traffic_rate
        self.reorder, self.capacity, self.waves, self.max_size = reorder, capacity, waves, max_size
        self.groups = groups

    def hardware(self):
        """The plan dict :func:`plan_params` takes."""
        return {"flit_width": 256, "endpoints": self.endpoints, "capacity": self.capacity,
                "outstanding": self.waves, "one_way_latency": 90, "mem_latency": 40,
                "mem_size": MEM_SIZE, "reorder": self.reorder}


def _inputs(rng, dtype, n, elements):
    """Random typed inputs for ``n`` participants: (data array, scales or None)."""
    g = np.random.default_rng(rng.getrandbits(32))
    x = g.standard_normal((n, elements)) * 4.0
    # BF16 has the range for larger values: spread them over more exponents.
    return numerics.encode(dtype, x * 100 if dtype == "bf16" else x)


def make_plan(cfg):
    """Draw the collectives and lay them out in memory. Returns ``(plan, images, expected)``:
    the JSON plan for the simulator, ``images[i] = [(byte_addr, bytes)]`` to load into endpoint
    ``i``, and the expected outcome of every collective."""
    from ..hdl.isa import Op, FlagMode, FlagStatus, check_descriptor
    from ..hdl.isa import DType
    DATA_FLAGS = (FlagStatus.OVERFLOW | FlagStatus.INVALID).value
    params = plan_params(cfg.hardware())
    isa = params.isa
    n = cfg.endpoints
    rng = random.Random(cfg.seed)
    images = [[] for _ in range(n)]
    colls, expected = [], []
    addr = 0
    flag_base = SCRATCH - 64 * 1024
    generation = Counter()
    scratch_next = [0] * n           # next free 4 KiB scratch slot at each destination
    slots_per_dst = (MEM_SIZE - SCRATCH) // 4096
    for k in range(cfg.count):
        batch_index = k % isa.sync_resources
        sync = batch_index
        dtype = rng.choice(numerics.DTYPES)
        size = 1 << rng.randint(6, int(math.log2(cfg.max_size)))
        size = max(128, size) if dtype == "int8" else size
        # Not only powers of two: add a whole number of 128-byte steps sometimes.
        if rng.random() < 0.5:
            size = min(cfg.max_size, size + 128 * rng.randint(1, 8))
        elements = size // 2
        group = 0
        if cfg.groups == "halves":
            # Two fixed groups (the paper's two TP4 groups on an 8-port switch), alternating in
            # the program: each works through its own collectives while the other runs.
            half = (1 << n // 2) - 1
            group = half if k % 2 == 0 else half << n // 2
        while bin(group).count("1") < 2:
            group = rng.getrandbits(n)
        members = [i for i in range(n) if group >> i & 1]
        fault = "none"
        if rng.random() < cfg.fault_rate:
            fault = rng.choice(("decerr", "bad_desc"))
        in_place = fault == "none" and rng.random() < 0.25
        data_bytes = elements if dtype == "int8" else 2 * elements
        scale_bytes = 2 * (elements // 64) if dtype == "int8" else 0
        region = -(-data_bytes // ALIGN) * ALIGN
        sregion = -(-max(scale_bytes, 1) // ALIGN) * ALIGN
        src, dst = addr, addr + region
        ssrc, sdst = addr + 2 * region, addr + 2 * region + sregion
        addr += 2 * region + 2 * sregion
        if in_place:
            dst = src
        if addr > flag_base:
            raise ValueError(f"{cfg.count} collectives of up to {cfg.max_size} bytes do not fit in "
                             f"the {MEM_SIZE >> 20} MiB memories; lower --count or --max-size")
        flag = flag_base + 4 * k
        desc = dict(op=Op.ALLREDUCE.value, dtype=DType[dtype.upper()].value,
                    flag_mode=rng.choice(list(FlagMode)).value, sync=sync, participants=group,
                    elements=elements, src_addr=src, dst_addr=dst, src_scale_addr=ssrc,
                    dst_scale_addr=sdst, flag_addr=flag)
        kind = None
        if fault == "decerr":
            # The input lies beyond the end of every participant's memory: reads answer DECERR.
            desc["src_addr"] = MEM_SIZE
        elif fault == "bad_desc":
            # The kinds in turn, so that a soak with six or more bad descriptors tries each one.
            kind = BAD_DESC_KINDS[sum(e["fault"] == "bad_desc" for e in expected) % len(BAD_DESC_KINDS)]
            if kind == "misaligned":
                # Flit-aligned but not page-aligned: its packets would cross 4 KB boundaries.
                desc["dst_addr"] += 32 * rng.randint(1, 127)
            elif kind == "zero_length":
                desc["elements"] = 0
            elif kind == "too_long":
                desc["elements"] = isa.max_elements + 64
            elif kind == "int8_partial_block":
                desc.update(dtype=DType.INT8.value, elements=64 * max(1, elements // 64) + 32)
            elif kind == "bad_dtype":
                desc["dtype"] = 3
            else:
                desc["op"] = rng.choice((0, 7, 15))
            assert check_descriptor(desc, isa), (kind, desc)
        else:
            assert not check_descriptor(desc, isa), check_descriptor(desc, isa)
        generation[sync] += 1
        data, scales = _inputs(rng, dtype, len(members), elements)
        golden = numerics.allreduce(dtype, data, scales)
        want, want_scales, want_status = golden.out_bytes, golden.scale_bytes, int(golden.status)
        for j, i in enumerate(members):
            if fault != "decerr":
                images[i].append((desc["src_addr"], data[j].tobytes()))
            if scales is not None:
                images[i].append((ssrc, scales[j].tobytes()))
        # Ordinary traffic: some participants write to another endpoint while the collective runs.
        traffic = []
        if rng.random() < cfg.traffic_rate:
            for i in members:
                dst_ep = rng.choice([e for e in range(n) if e != i])
                if scratch_next[dst_ep] >= slots_per_dst:
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
        stalls = {i: rng.choice((0, 0, rng.randint(1, 400))) for i in members}
        colls.append({"k": k, "batch_index": batch_index, "desc": desc, "members": members,
                      "generation": generation[sync], "stalls": stalls, "traffic": traffic})
        expected.append({"k": k, "dtype": dtype, "size": size, "fault": fault, "bad_kind": kind,
                         "members": members, "in_place": in_place, "dst": dst, "sdst": sdst,
                         "data_bytes": data_bytes, "scale_bytes": scale_bytes, "want": want,
                         "want_scales": want_scales,
                         # Faults: the ERROR bit is required; with DECERR the data read is not
                         # the input, so other status bits are not predicted.
                         "want_status": (want_status & DATA_FLAGS) if fault == "none" else
                                        FlagStatus.ERROR.value,
                         "generation": generation[sync], "flag": flag})
    plan = {**cfg.hardware(), "collectives": colls, "sync_resources": isa.sync_resources,
            "timeout_cycles": 400_000}
    return plan, images, expected


def run_soak(cfg, log=print):
    """Run the soak; return the summary dict (see ``docs/RELIABILITY.md``).

    Raises ValueError for bad parameters and RuntimeError if the simulation does not complete (a
    hang is reported with the collective it stopped at)."""
    from ..hdl.system import System
    from .runner import verilog_for, run_cocotb, SimulationError
    plan, images, expected = make_plan(cfg)
    params = plan_params(plan)
    fb = params.fabric.flit_bytes
    n = cfg.endpoints
    run_dir = Path(tempfile.mkdtemp(dir=_runs_dir(), prefix=f"soak-{cfg.seed}-"))
    plan["run_dir"] = str(run_dir)
    plusargs = []
    for i in range(n):
        hex_in = run_dir / f"ep{i}.in.hex"
        write_memh(hex_in, [(a // fb, d) for a, d in images[i]], fb)
        plusargs += [f"+scin_load_ep{i}={hex_in}", f"+scin_dump_ep{i}={run_dir / f'ep{i}.out.hex'}"]
    plusargs += ["+scin_dump_lo=0", f"+scin_dump_hi={MEM_SIZE // fb}"]
    started = time.monotonic()
    log(f"soak: {cfg.count} collectives, seed {cfg.seed}, {n} endpoints, {cfg.sim}; "
        f"building or reusing the system ...")
    path = verilog_for(lambda: System(params), "system", repr(params))
    try:
        run_cocotb(verilog_path=path, top="system", test_module="scin.sim.testbench.soak_bench",
                   sim=cfg.sim, config=plan, test_dir=run_dir, seed=cfg.seed, quiet=True,
                   plusargs=plusargs)
    except SimulationError as exc:
        progress = run_dir / "progress.json"
        where = json.loads(progress.read_text()) if progress.exists() else {}
        raise RuntimeError(f"the soak did not complete ({exc}); last state: {where}") from exc
    wall = time.monotonic() - started
    result = json.loads((run_dir / "soak.json").read_text())
    memories = [read_memh(run_dir / f"ep{i}.out.hex", fb) for i in range(n)]
    summary = verify(expected, plan, result, memories)
    summary.update(seed=cfg.seed, count=cfg.count, endpoints=n, sim=cfg.sim,
                   wall_seconds=round(wall, 1), run_dir=str(run_dir),
                   cycles=result["cycles"], counters=result["counters"],
                   switch_errors=result["switch_errors"])
    return summary


def verify(expected, plan, result, memories):
    """Check every collective, isolation and ordinary traffic; return the summary."""
    from ..hdl.endpoint.accelerator import pattern_bytes
    from ..hdl.codec import pack, unpack
    from ..hdl.isa import FlagStatus, flag_layout
    n = len(memories)
    failures = []
    outcome = Counter()
    isolation_checks = 0     # (collective, non-participant) pairs checked: the test asserts > 0
    flags = {(int(k), int(i)): v for k, per in result["flags"].items() for i, v in per.items()}
    for e in expected:
        k = e["k"]
        label = e["fault"] if e["fault"] != "bad_desc" else f"bad_desc:{e['bad_kind']}"
        ok = True
        for i in range(n):
            mem = memories[i]
            flag_word = int.from_bytes(mem[e["flag"]:e["flag"] + 4].tobytes(), "little")
            if i in e["members"]:
                seen = flags.get((k, i))
                want_flag = pack(flag_layout(), generation=e["generation"], status=e["want_status"])
                if e["fault"] == "decerr":
                    def good(w):
                        if w is None:
                            return False
                        w = unpack(flag_layout(), w)
                        return (w["generation"] == e["generation"]
                                and w["status"] & FlagStatus.ERROR.value)
                else:
                    good = lambda w: w == want_flag
                if not (good(seen) and good(flag_word)):
                    failures.append(f"collective {k} ({label}) endpoint {i}: flag {seen!r} in the "
                                    f"event, {flag_word:#x} in memory, expected {want_flag:#x}")
                    ok = False
                got = mem[e["dst"]:e["dst"] + e["data_bytes"]].tobytes()
                if e["fault"] == "none":
                    if got != e["want"]:
                        failures.append(f"collective {k} ({e['dtype']} {e['size']} B) endpoint {i}: "
                                        f"result differs from the golden model")
                        ok = False
                    if e["want_scales"] is not None and \
                            mem[e["sdst"]:e["sdst"] + e["scale_bytes"]].tobytes() != e["want_scales"]:
                        failures.append(f"collective {k} endpoint {i}: result scales differ")
                        ok = False
                elif e["fault"] == "bad_desc" and not e["in_place"] and any(got):
                    failures.append(f"collective {k} ({label}) endpoint {i}: the result buffer was "
                                    f"written although the descriptor is bad")
                    ok = False
            else:
                # Isolation: a non-participant's flag and result buffer are never touched.
                isolation_checks += 1
                if flag_word or (not e["in_place"] and any(mem[e["dst"]:e["dst"] + e["data_bytes"]])):
                    failures.append(f"collective {k} wrote to non-participant {i}")
                    ok = False
        outcome[(label, "ok" if ok else "FAILED")] += 1
    traffic_ok = traffic_bad = 0
    for c in plan["collectives"]:
        for n_t, t in enumerate(c["traffic"]):
            later = c["traffic"][n_t + 1] if n_t + 1 < len(c["traffic"]) else None
            if later is not None and later.get("overwrites") and later["addr"] == t["addr"] \
                    and later["dst"] == t["dst"]:
                continue        # overwritten by the next write: only that one must be there
            got = memories[t["dst"]][t["addr"]:t["addr"] + t["length"]].tobytes()
            if got == pattern_bytes(t["seed"], t["length"]):
                traffic_ok += 1
            else:
                traffic_bad += 1
                failures.append(f"ordinary write {t['src']} -> {t['dst']} at {t['addr']:#x} "
                                f"({t['length']} B, collective {c['k']}) arrived corrupted")
    table = {}
    for (label, verdict), count in sorted(outcome.items()):
        table.setdefault(label, {"ok": 0, "FAILED": 0})[verdict] += count
    return {"passed": not failures, "outcomes": table, "ordinary_writes": traffic_ok + traffic_bad,
            "ordinary_writes_intact": traffic_ok, "isolation_checks": isolation_checks,
            "failures": failures[:50]}
