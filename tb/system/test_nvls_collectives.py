"""NCCL's NVLS ReduceScatter (ld_reduce only) and AllGather (st only) on the RTL fabric, as the
accelerators run them between the All-Reduce's barriers (sim/nvls_collectives.py, docs/NVLS.md).

Every run checks each endpoint's whole window (inputs unchanged, zeros, flag word, result) against
the golden model: AllGather bit for bit (a copy of random bit patterns, NaNs included);
ReduceScatter bit for bit with inputs whose FP32 accumulation is exact in any order, and per
packet against every arrival order with wide-range inputs. The hardware is tb/system/test_nvls.py's
(``HW``), so these runs share its system build.
"""

import numpy as np
import pytest

from scin.hdl.packet import FabricParams
from scin.sim.nvls_allreduce import NvlsAllReduce, golden, packets, run_nvls_allreduce
from scin.sim.nvls_collectives import (NvlsCollective, check_images, layout, make_inputs,
                                       program, run_nvls_collective, member_loads)
from scin.sim.nvls_run import NvlsSystem
from scin.tb.simulators import needs_icarus

# tb/system/test_nvls.py's hardware: the same build.
HW = NvlsSystem(endpoints=4, mem_size=1 << 16, entries=8, acks=8)
F = FabricParams.default_for(ports=4)
QUIET = dict(log=lambda *_: None)

# (op, size, dtype, window, packet, ranks). The 1056-byte shards (33 flits) are not
# 4 KiB-aligned: some packets are cut at a 4 KiB boundary of the members' memories.
CASES = {
    "rs-fp16":         ("reduce-scatter", 2048, "fp16", 4, None, None),
    "rs-bf16":         ("reduce-scatter", 1056, "bf16", 2, 512, None),
    "ag-fp16":         ("allgather", 2048, "fp16", 8, None, None),
    "ag-bf16":         ("allgather", 1056, "bf16", 8, 256, None),
    "rs-fp16-ranks13": ("reduce-scatter", 1024, "fp16", 8, 512, [1, 3]),
    "ag-bf16-ranks13": ("allgather", 1056, "bf16", 8, None, [1, 3]),
}


def _data_packets(cfg, ranks):
    """The ld_reduces (ReduceScatter) or stores (AllGather) the program issues."""
    _, commands, _ = program(cfg, HW, F.multicast_base, F.switch_port, F.flit_bytes, ranks)
    return sum(c.get("count", 0) for cmds in commands.values() for c in cmds)


# Icarus: the smallest ReduceScatter (about 20 s; the larger cases take minutes there and test
# nothing Icarus-specific).
@pytest.mark.parametrize("sim, case", [
    *[pytest.param("verilator", c, id=f"verilator-{c}") for c in CASES],
    pytest.param("icarus", "rs-small", id="icarus-rs-small", marks=needs_icarus)])
def test_nvls_collective(sim, case):
    op, size, dtype, window, packet, ranks = CASES.get(
        case, ("reduce-scatter", 256, "fp16", 2, 128, None))
    cfg = NvlsCollective(op, size, dtype, window, packet)
    rep = run_nvls_collective(cfg, HW, ranks=ranks, sim=sim, seed=7, **QUIET)
    assert rep["match"] and rep["status"] == 0, rep
    n = len(ranks or range(HW.endpoints))
    want = _data_packets(cfg, ranks)
    c = rep["nvls_counters"]
    kind = "ld_reduces" if op == "reduce-scatter" else "stores"
    other = "stores" if op == "reduce-scatter" else "ld_reduces"
    assert (c[kind], c[other], c["reds"]) == (want, 0, 2 * n), c
    assert c["refused"] == c["stale_rdata"] == c["stale_wresp"] == 0, c
    assert not any(rep["switch_errors"]), rep["switch_errors"]
    assert 0 < rep["start"] < rep["end"] and rep["cycles"] == rep["end"] - rep["start"], rep


def test_reduce_scatter_any_order_golden():
    """Wide-range FP16 inputs (the accumulation order matters): each ld_reduce packet of each
    rank's result is the golden model's for one arrival order of the members."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 4 * 1024 // 2)) * 2.0 ** rng.integers(-8, 8, (4, 4 * 1024 // 2))
    inputs = x.astype(np.float16).view(np.uint16)
    rep = run_nvls_collective(NvlsCollective("reduce-scatter", 1024, "fp16", 4, 256), HW,
                              inputs=inputs, **QUIET)
    assert rep["match"] and rep["status"] == 0, rep


def test_nvls_allreduce_packets_never_cross_4KiB():
    """A 10 KiB NVLS All-Reduce on 4 ranks: shards of 2560 bytes, so 1 KiB packets from a shard's
    start would cross 4 KiB boundaries, which the endpoint bridges answer with SLVERR; the
    program cuts them there and the result is the golden model's."""
    assert packets(2560, 1024, (2560,)) == [(0, 1024, 1), (1024, 512, 1), (1536, 1024, 1)]
    rep = run_nvls_allreduce(NvlsAllReduce(10240, "fp16", 8), HW, **QUIET)
    assert rep["match"] and rep["status"] == 0, rep


def test_packets():
    """Runs of same-sized packets, none across 4 KiB at any base; aligned buffers: whole
    packets, then the rest (the All-Reduce's packets before the cut rule)."""
    assert packets(4096 + 96, 1024) == [(0, 1024, 4), (4096, 96, 1)]
    assert packets(2080, 1024, (2080, 8192)) == [(0, 1024, 1), (1024, 992, 1), (2016, 64, 1)]
    assert packets(0, 1024) == []
    for nbytes, packet, bases in ((9000 // 32 * 32, 1024, (1568, 8192)), (3000, 96, (64,))):
        runs = packets(nbytes, packet, bases)
        assert sum(length * count for _, length, count in runs) == nbytes
        for at, length, count in runs:
            assert length <= packet
            for k in range(count):
                for b in bases:
                    s = b + at + k * length
                    assert s // 4096 == (s + length - 1) // 4096, (s, length)


def _images(cfg, ranks, inputs, loads):
    """Every endpoint's window as a correct run leaves it, built independently of
    check_images: loads, each member's golden result and its flag word at 2N."""
    n = len(ranks)
    other, flag = layout(cfg, n)
    results = golden(cfg.op, cfg.dtype, inputs)
    out = {}
    for p in range(HW.endpoints):
        m = bytearray(flag + F.flit_bytes)
        for addr, raw in loads[p]:
            m[addr:addr + len(raw)] = raw
        if p in ranks:
            res = results[ranks.index(p)].tobytes()
            at = other if cfg.op == "reduce-scatter" else 0
            m[at:at + len(res)] = res
            m[flag:flag + 4] = (2 * n).to_bytes(4, "little")
        out[p] = bytes(m)
    return out


@pytest.mark.parametrize("op", ["reduce-scatter", "allgather"])
@pytest.mark.parametrize("ranks", [[0, 1, 2, 3], [1, 3]])
def test_check_catches_every_wrong_byte(op, ranks):
    """The check is not vacuous: a correct window passes, and one flipped bit anywhere (the
    result, an input, the flag word, the zeros between, a non-member's memory) fails that port,
    both with the exact check and with ReduceScatter's per-packet any-order check."""
    cfg = NvlsCollective(op, 1056, "bf16", 4, 512)
    n = len(ranks)
    inputs = make_inputs(cfg, n, 5)
    background = np.random.default_rng(6).integers(0, 1 << 16, (4, inputs.shape[1]), np.uint16)
    loads = member_loads(cfg, ranks, HW.endpoints, inputs, background)
    images = _images(cfg, ranks, inputs, loads)
    other, flag = layout(cfg, n)
    for exact in (True, False):
        assert check_images(cfg, ranks, 4, inputs, loads, images, 512, exact) == []
    victims = [(ranks[-1], at) for at in (0, n * cfg.size - 1, other + 100, other + cfg.size - 1,
                                          flag, flag + 5, other - 1)]
    victims += [(p, other + 7) for p in range(4) if p not in ranks]
    for port, at in victims:
        bad = dict(images)
        b = bytearray(bad[port])
        b[at] ^= 0x10
        bad[port] = bytes(b)
        for exact in (True, False):
            assert check_images(cfg, ranks, 4, inputs, loads, bad, 512, exact) == [port], \
                (port, at, exact)


@pytest.mark.parametrize("kwargs, message", [
    (dict(op="allreduce"), "op must be one of reduce-scatter, allgather"),
    (dict(dtype="int8"), "dtype must be one of fp16, bf16"),
    (dict(size=0), "size must be a positive even number"),
    (dict(size=1023), "size must be a positive even number"),
    (dict(window=0), "window must be 1 to 16"),
    (dict(window=17), "window must be 1 to 16"),
    (dict(packet=-32), "packet must be a positive number of bytes"),
])
def test_bad_configuration_is_refused(kwargs, message):
    args = dict(op="reduce-scatter", size=1024, dtype="fp16", window=8, packet=None) | kwargs
    with pytest.raises(ValueError, match=message):
        NvlsCollective(**args)
    if "op" not in kwargs:
        with pytest.raises(ValueError, match=message):
            NvlsAllReduce(args["size"], args["dtype"], args["window"], args["packet"])


@pytest.mark.parametrize("op, size, packet, ranks, message", [
    ("reduce-scatter", 1040, None, None, "size must be whole 32-byte flits"),
    ("allgather", 16, None, None, "size must be whole 32-byte flits"),
    ("reduce-scatter", 1024, 2048, None, r"packet must be whole 32-byte flits, at most 1024"),
    ("reduce-scatter", 1024, 100, None, r"packet must be whole 32-byte flits"),
    ("allgather", 1024, 8192, None, r"packet must be whole 32-byte flits, at most 4096"),
    ("allgather", 16384, None, None, "size: 4 shards of 16384 bytes"),
    ("allgather", 1024, None, [1, 1], "ranks must be at least two distinct ports"),
    ("allgather", 1024, None, [2], "ranks must be at least two distinct ports"),
    ("reduce-scatter", 1024, None, [0, 4], "ranks must be at least two distinct ports"),
    ("reduce-scatter", 1024, None, [True, 2], "ranks must be at least two distinct ports"),
])
def test_bad_program_is_refused(op, size, packet, ranks, message):
    cfg = NvlsCollective(op, size, "fp16", 8, packet)
    with pytest.raises(ValueError, match=message):
        program(cfg, HW, F.multicast_base, F.switch_port, F.flit_bytes, ranks)
    with pytest.raises(ValueError, match=message):
        run_nvls_collective(cfg, HW, ranks=ranks, **QUIET)


def test_bad_inputs_are_refused():
    cfg = NvlsCollective("reduce-scatter", 1024)
    with pytest.raises(ValueError,
                       match=r"inputs must be uint16 bit patterns of shape \(4, 2048\)"):
        run_nvls_collective(cfg, HW, inputs=np.zeros((4, 512), np.uint16), **QUIET)
