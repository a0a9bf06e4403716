"""The NVLS engine in the system (docs/NVLS.md): multimem ld_reduce, st and red through the
switch, their answers checked against the golden model (sim/nvls.py), refused accesses counted.

These tests drive the engine with the accelerator's plain READ_REMOTE / WRITE_REMOTE commands
to multicast addresses, so they check the switch side alone. An ld_reduce's READ_DONE carries
the XOR of the result's words; the accumulation order is the members' arrival order, which the
test does not see, so the result must equal the golden model's for one of the orders (every
order is tried).
"""

import itertools
from pathlib import Path

import numpy as np
import pytest

from scin.hdl.endpoint.accelerator import AccOp, EventKind, pattern_bytes, xor_fold
from scin.hdl.packet import FabricParams, Status
from scin.sim.nvls import nvls_reduce
from scin.sim.nvls_run import NvlsSystem, McGroup, run_program
from scin.tb.simulators import needs_icarus

HW = NvlsSystem(endpoints=4, mem_size=1 << 16, entries=8, acks=8)
F = FabricParams.default_for(ports=4)
MC = F.multicast_base
SW = F.switch_port


def _memories(seed, n, nbytes):
    """Random FP16 values of mixed magnitudes (so the order of accumulation matters)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, nbytes // 2)) * 2.0 ** rng.integers(-8, 8, (n, nbytes // 2))
    return x.astype(np.float16).view(np.uint16)


def _possible(mem, members, offset, length, dtype):
    """The XOR folds of every order's result of an ld_reduce of ``members`` at ``offset``."""
    cols = slice(offset // 2, (offset + length) // 2)
    rows = [mem[m, cols] for m in members]
    return {xor_fold(nvls_reduce(rows, list(order), dtype).astype("<u2").tobytes())
            for order in itertools.permutations(range(len(rows)))}


def _basic(sim):
    mem = _memories(11, 4, 16384)
    groups = [McGroup(0, MC, 16384, 0, 0b1111, "fp16"),
              McGroup(1, MC + 0x10000, 16384, 0, 0b0101, "bf16")]
    read = dict(op=AccOp.READ_REMOTE, dst=SW)
    commands = {
        0: [dict(read, addr=MC, length=1024, tag=1), dict(read, addr=MC + 1024, length=512, tag=2)],
        1: [dict(read, addr=MC + 0x10000 + 2048, length=1024, tag=3)],
        2: [dict(op=AccOp.WRITE_REMOTE, dst=SW, addr=MC + 8192, length=1024, seed=0x77, tag=4)],
        # Outside every group, and a length that is not whole flits: refused, DECERR.
        3: [dict(read, addr=MC + 0x100000, length=1024, tag=5),
            dict(read, addr=MC, length=100, tag=6)],
    }
    loads = {i: [(0, mem[i].tobytes())] for i in range(4)}
    out = run_program(HW, groups, commands, {0: 2, 1: 1, 2: 1, 3: 2}, loads=loads,
                      dump=(8192, 1024), sim=sim, log=lambda *_: None)
    return mem, out


@pytest.mark.parametrize("sim", ["verilator", pytest.param("icarus", marks=needs_icarus)])
def test_ld_reduce_st_and_refusals(sim):
    mem, out = _basic(sim)
    ev = {i: {e["tag"]: e for e in evs if e["kind"] != EventKind.SENT.value}
          for i, evs in out["events"].items()}
    want = {1: ([0, 1, 2, 3], 0, 1024, "fp16"), 2: ([0, 1, 2, 3], 1024, 512, "fp16"),
            3: ([0, 2], 2048, 1024, "bf16")}
    for tag, (members, offset, length, dtype) in want.items():
        e = ev[0 if tag < 3 else 1][tag]
        assert e["kind"] == EventKind.READ_DONE.value and e["status"] == Status.OK.value, e
        assert e["length"] == length and e["src"] == SW, e
        assert e["value"] in _possible(mem, members, offset, length, dtype), (tag, e)
    # st: the pattern in every member's memory.
    assert ev[2][4]["kind"] == EventKind.WRITE_DONE.value and ev[2][4]["status"] == Status.OK.value
    for i in range(4):
        assert out["images"][i] == pattern_bytes(0x77, 1024), f"endpoint {i}"
    for tag in (5, 6):
        e = ev[3][tag]
        assert e["status"] == Status.DECERR.value and e["length"] == 0, e
    c = out["nvls_counters"]
    assert (c["ld_reduces"], c["stores"], c["refused"]) == (3, 1, 2), c
    assert c["stale_rdata"] == c["stale_wresp"] == 0, c
    assert not any(out["switch_errors"]), out["switch_errors"]


# The NVLS All-Reduce as NCCL runs it (barrier, ld_reduce + st of each rank's shard, barrier),
# with the accelerators' kernel. Small sizes run on both simulators.
ALLREDUCE = {"fp16_64B": (64, "fp16", 2), "fp16_4KiB": (4096, "fp16", 8),
             "bf16_3KiB+32": (3 * 1024 + 32, "bf16", 1)}


@pytest.mark.parametrize("sim, case", [
    *[pytest.param("verilator", c, id=f"verilator-{c}") for c in ALLREDUCE],
    pytest.param("icarus", "fp16_64B", id="icarus-fp16_64B", marks=needs_icarus)])
def test_nvls_allreduce_exact_inputs(sim, case):
    from scin.sim.nvls_allreduce import NvlsAllReduce, run_nvls_allreduce
    size, dtype, window = ALLREDUCE[case]
    rep = run_nvls_allreduce(NvlsAllReduce(size, dtype, window), HW, sim=sim, seed=5,
                             log=lambda *_: None)
    assert rep["match"] and rep["status"] == 0, rep
    c = rep["nvls_counters"]
    assert c["refused"] == c["stale_rdata"] == c["stale_wresp"] == 0, c
    assert c["reds"] == 2 * HW.endpoints, c


def test_nvls_allreduce_any_order_golden():
    """Wide-range inputs: each packet is the golden model's reduction in one arrival order."""
    from scin.sim.nvls_allreduce import NvlsAllReduce, run_nvls_allreduce
    inputs = _memories(3, 4, 8192)
    rep = run_nvls_allreduce(NvlsAllReduce(8192, "fp16", 4), HW, inputs=inputs, sim="verilator",
                             log=lambda *_: None)
    assert rep["match"] and rep["status"] == 0, rep


def _cancelling(seed, n, nbytes):
    """FP16 inputs whose FP32 sum depends on the order: members 0 and 1 cancel (+-2**14 to
    2**15), members 2 and 3 are small (2**-12 to 2**-8, below half an FP32 ulp of the large
    ones): adding a small one to a large one first loses it."""
    rng = np.random.default_rng(seed)
    e = nbytes // 2
    big = rng.uniform(2 ** 14, 2 ** 15, e) * rng.choice([-1, 1], e)
    small = rng.uniform(2 ** -12, 2 ** -8, (2, e)) * rng.choice([-1, 1], (2, e))
    x = np.stack([big, -big, small[0], small[1]])[:n]
    return x.astype(np.float16).view(np.uint16)


HW_REORDER = NvlsSystem(endpoints=4, mem_size=1 << 16, entries=8, acks=8, reorder=True)


def test_reordered_responses_change_nvls_bits_not_scins():
    """The same inputs, with the memories answering in order and out of order: NVLS's result
    bits differ (the arrival order is the FP32 accumulation order), each run is the golden model
    of some order for every packet; SCIN's result is the golden model's both ways."""
    from scin.sim.allreduce import CollectiveConfig, run_allreduce
    from scin.sim.nvls_allreduce import NvlsAllReduce, run_nvls_allreduce
    inputs = _cancelling(9, 4, 8192)
    cfg = NvlsAllReduce(8192, "fp16", 8)
    runs = [run_nvls_allreduce(cfg, hw, inputs=inputs, log=lambda *_: None)
            for hw in (HW, HW_REORDER)]
    for rep in runs:
        assert rep["match"] and rep["status"] == 0, rep
    images = [np.frombuffer((Path(r["run_dir"]) / "ep0.out.hex").read_bytes(), np.uint8)
              for r in runs]
    assert not np.array_equal(*images), "reordering the responses did not change NVLS's bits"
    # SCIN on the hardware of tb/system/test_system.py's small cases and on the soak's, which
    # reorders (its reordering cases and tb/system/test_soak.py run on it), so both runs share
    # those builds: the same SystemConfig, checked.
    from scin.sim.soak import SoakConfig
    soak = SoakConfig().system()
    for hw in (CollectiveConfig().hw, soak):
        run = CollectiveConfig(size=8192, seed=9, hw=hw)
        assert run.system() in (CollectiveConfig().system(), soak), run.system()
        rep = run_allreduce(run, log=lambda *_: None)
        assert rep["match"], rep


def test_nvls_and_scin_share_the_switch():
    """A SCIN All-Reduce of ports 0 and 1 through the ISA and an NVLS All-Reduce of ports 2 and
    3 through the NVLS engine, at the same time on one switch: both bit for bit."""
    from scin.hdl.endpoint.accelerator import AccOp
    from scin.hdl.isa import DType, FlagMode, Op
    from scin.sim import numerics
    from scin.sim.nvls_allreduce import NvlsAllReduce, exact_inputs, program
    from scin.sim.nvls_run import run_program
    size = 4096
    cfg = NvlsAllReduce(size, "fp16", 4)
    groups, commands, expect = program(cfg, HW, MC, SW, F.flit_bytes, ranks=[2, 3])
    x = exact_inputs(4, 4, size, "fp16")
    src, dst, flag = 0, 0x4000, 0x8000
    desc = dict(op=Op.ALLREDUCE.value, dtype=DType.FP16.value, flag_mode=FlagMode.ORDERED.value,
                sync=0, participants=0b0011, elements=size // 2, root=0, src_addr=src,
                dst_addr=dst, src_scale_addr=0, dst_scale_addr=0, flag_addr=flag)
    for r in (0, 1):
        commands[r] = [dict(op=AccOp.ARRIVE, addr=0, length=1, tag=1),
                       dict(op=AccOp.WAIT_FLAG, addr=flag, generation=1, tag=2)]
        expect[r] = 1
    loads = {r: [(0, x[r].tobytes())] for r in range(4)}
    out = run_program(HW, groups, commands, expect, loads=loads, dump=(0, 0x4000 + size),
                      descriptors=[desc], log=lambda *_: None)
    scin = np.asarray(numerics.collective("allreduce", "fp16", x[:2].view(np.float16))[0].out)
    nvls = np.asarray(numerics.collective("allreduce", "fp16", x[2:].view(np.float16))[0].out)
    for r in (0, 1):
        got = np.frombuffer(out["images"][r][dst:dst + size], np.uint16)
        assert np.array_equal(got, scin.view(np.uint16)), f"SCIN rank {r}"
    for r in (2, 3):
        got = np.frombuffer(out["images"][r][:size], np.uint16)
        assert np.array_equal(got, nvls.view(np.uint16)), f"NVLS rank {r}"
    flags = [e for r in (0, 1) for e in out["events"][r] if e["kind"] == EventKind.FLAG.value]
    assert all(e["status"] == 0 for e in flags) and len(flags) == 2, flags
    assert out["counters"]["unknown_tags"] == 0 and out["nvls_counters"]["refused"] == 0
