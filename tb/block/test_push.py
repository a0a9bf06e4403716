"""Push mode of the ISA (docs/ISA.md, Push mode) on its own, against the Python endpoint models:
groups pushing beside a pulled collective, a pushed Reduce, and every push fault (beyond the
reserved space, to a resource without one, from a port outside the group, a PUSH descriptor that
cannot push), each ending as documented with the next collective clean.

The bit-for-bit push cases of every dtype are ``push_*`` and ``auto_*`` in tb/block/test_isa.py;
this file shares that ISA build (``isa_params``): two push resources of 8 KiB per participant.
Random pauses on every stream on Verilator; Icarus runs the same scenario without pauses on 128-byte
messages (a 4 KiB collective takes minutes there).
"""

import cocotb
import pytest
from cocotb.triggers import RisingEdge

from scin.hdl.isa import Op, DType, FlagMode, FlagStatus, PushMode, push_mode
from scin.sim import numerics
from scin.sim.testbench.env import tb_config
from scin.sim.testbench.isa_program import load_program

from scin.tb.isa_setup import (SRC, DST, SSRC, SDST, FLAG, DATA_FLAGS, isa_params, make_inputs,
                               flag_word, counters, start_isa)
from scin.tb.cocotb_run import run_isa

ERROR = FlagStatus.ERROR.value


async def wait_generation(dut, eps, flag_addr, generation):
    """Wait (at most 20,000 cycles) until the flag word at ``flag_addr`` of every endpoint model
    of ``eps`` carries ``generation``; return the cycles waited."""
    for cycle in range(20_000):
        if all(ep.flag(flag_addr) & 0xFFFF == generation for ep in eps):
            return cycle
        await RisingEdge(dut.clk)
    raise AssertionError(f"flags {[hex(ep.flag(flag_addr)) for ep in eps]}, want generation "
                         f"{generation}; {counters(dut)}")


async def run(dut, eps, rng, desc, generation, *, faults=(), status=0, ports=None):
    """One generation of ``desc``: fresh inputs, each participant pushes or arrives as
    :func:`push_mode` says, after the ``faults`` (callables, sent first); waits for the flags and
    checks them and, for a good one, the results bit for bit (Reduce: the root only)."""
    parts = [i for i in range(4) if desc["participants"] >> i & 1]
    data, _ = make_inputs(rng, "fp16", len(parts), desc["elements"])
    for j, i in enumerate(parts):
        eps[i].mem[desc["src_addr"]:desc["src_addr"] + data[j].nbytes] = data[j].tobytes()
        eps[i].mem[desc["dst_addr"]:desc["dst_addr"] + data[j].nbytes] = bytes(data[j].nbytes)
    for fault in faults:
        fault()
    for j, i in enumerate(parts):
        if push_mode({k: getattr(v, "value", v) for k, v in desc.items()},
                     isa_params({})) == PushMode.PUSH:
            eps[i].push(isa_params({}), desc["sync"], data[j].tobytes())
        else:
            eps[i].arrive(desc["sync"])
    cycle = await wait_generation(dut, [eps[i] for i in parts], desc["flag_addr"], generation)
    for i in parts:
        got = eps[i].flag_fields(desc["flag_addr"])["status"]
        assert got & ERROR == status, f"port {i}: flag status {got:#x}, want ERROR {status}"
    if status == 0:
        want = numerics.allreduce("fp16", data).out_bytes
        root = parts[desc.get("root", 0)]
        for i in parts:
            got = bytes(eps[i].mem[desc["dst_addr"]:desc["dst_addr"] + len(want)])
            if desc["op"] == Op.REDUCE and i != root:
                want_i = bytes(len(want))
            else:
                want_i = want
            assert got == want_i, f"port {i}: result of {desc['op'].name} gen {generation} differs"
    return cycle


@cocotb.test()
async def push_beside_pull_faults_and_reduce(dut):
    params, ports, rng, eps, loader = await start_isa(dut)
    elements = tb_config()["elements"]
    base = dict(op=Op.ALLREDUCE, dtype=DType.FP16, flag_mode=FlagMode.ORDERED, elements=elements,
                src_addr=SRC, dst_addr=DST)
    a = dict(base, participants=0b0011, sync=0, flag_addr=FLAG, mode=PushMode.PUSH)
    b = dict(base, participants=0b1100, sync=2, flag_addr=FLAG + 64, mode=PushMode.PULL,
             src_addr=SRC + 0x4000, dst_addr=DST + 0x4000)
    # Sync resource 3 has no push space: a PUSH descriptor there fails at once (once a load).
    x = dict(base, participants=0b1111, sync=3, flag_addr=FLAG + 128, mode=PushMode.PUSH)
    r = dict(base, op=Op.REDUCE, root=2, participants=0b1111, sync=1, flag_addr=FLAG + 192,
             mode=PushMode.PUSH, src_addr=SRC + 0x8000, dst_addr=DST + 0x8000)
    # A second pushing group, on the other push resource, sharing ports 2 and 3 with B.
    d2 = dict(base, participants=0b1100, sync=1, flag_addr=FLAG + 256, mode=PushMode.PUSH,
              src_addr=SRC + 0xC000, dst_addr=DST + 0xC000)
    load_program(loader, params, [a, b, x, d2, r])
    await loader.wait_idle()
    for cycle in range(2000):
        if all(eps[i].flag(FLAG + 128) == flag_word(0, ERROR) for i in range(ports)):
            break
        await RisingEdge(dut.clk)
    else:
        raise AssertionError(f"PUSH without push space: flags "
                             f"{[hex(ep.flag(FLAG + 128)) for ep in eps]}; {counters(dut)}")

    # Groups A and D push while group B pulls (B and D on the same ports): all bit for bit,
    # nothing dropped.
    tasks = [cocotb.start_soon(run(dut, eps, rng, desc, 1)) for desc in (a, b, d2)]
    for task in tasks:
        await task
    c = counters(dut)
    assert c["bad_pushes"] == 0 and c["unknown_tags"] == 0, c

    cap = params.push_capacity
    beyond = lambda: eps[0].push(params, 0, bytes(64), offset=cap)
    outsider = lambda: eps[2].push(params, 0, bytes(64))
    nowhere = lambda: eps[3].push(params, params.push_resources, bytes(64))
    # A push beyond the reserved space: dropped, counted, ERROR; the next generation clean.
    await run(dut, eps, rng, a, 2, faults=[beyond], status=ERROR)
    assert counters(dut)["bad_pushes"] == 1, counters(dut)
    await run(dut, eps, rng, a, 3)
    # A push from a port outside the group: never used, counted, ERROR; the next generation clean.
    await run(dut, eps, rng, a, 4, faults=[outsider], status=ERROR)
    assert counters(dut)["bad_pushes"] == 2, counters(dut)
    await run(dut, eps, rng, a, 5)
    # A push to a resource without push space: dropped and counted, no collective is touched.
    await run(dut, eps, rng, a, 6, faults=[nowhere])
    assert counters(dut)["bad_pushes"] == 3, counters(dut)
    # A pushed Reduce: the root alone gets the result, the others nothing; resource 1's
    # descriptors run in program order (D, R, D, R), the generation counting the resource's.
    await run(dut, eps, rng, r, 2)
    await run(dut, eps, rng, d2, 3)
    await run(dut, eps, rng, r, 4)
    for _ in range(1000):
        c = counters(dut)
        if c["collectives"] == 1 + 1 + 6 + 2 + 2:
            break
        await RisingEdge(dut.clk)
    assert c["collectives"] == 12 and c["bad_descriptors"] == 1, c
    assert c["bad_pushes"] == 3 and c["unknown_tags"] == 0 and c["timeouts"] == 0, c
    # Only group B's pulled collective read anything: one slot per 4 KiB.
    assert not any(eps[i].reads_seen for i in (0, 1)), "a pushed collective sent a READ"
    assert c["slots"] == -(-elements * 2 // params.fabric.max_payload), c


@cocotb.test()
async def bad_push_descriptor_then_good(dut):
    """A bad descriptor in PUSH mode (a misaligned buffer; or of zero length) never runs pushed:
    its participants arrive (push_mode says PULL), it ends with ERROR at its barrier and the push
    space is untouched, so the good pushed collective after it, on the same resource, is bit for
    bit; twice round the program."""
    params, ports, rng, eps, loader = await start_isa(dut)
    good = dict(op=Op.ALLREDUCE, dtype=DType.FP16, flag_mode=FlagMode.ORDERED, sync=0,
                participants=0b1111, elements=tb_config()["elements"], src_addr=SRC, dst_addr=DST,
                flag_addr=FLAG, mode=PushMode.PUSH)
    bad = dict(good, src_addr=SRC + 4)
    empty = dict(good, elements=0, mode=PushMode.AUTO)
    load_program(loader, params, [bad, good, empty, good])
    await loader.wait_idle()
    for k in range(2):
        await run(dut, eps, rng, bad, 4 * k + 1, status=ERROR)
        await run(dut, eps, rng, good, 4 * k + 2)
        await run(dut, eps, rng, empty, 4 * k + 3, status=ERROR)
        await run(dut, eps, rng, good, 4 * k + 4)
    c = counters(dut)
    assert c["bad_descriptors"] == 4 and c["bad_pushes"] == 0 and c["slots"] == 0, c


@cocotb.test()
async def pushed_reduce_scatter(dut):
    """A pushed ReduceScatter: each participant pushes its N shards, the ISA reads shard r of
    every participant in phase r from the push slots (a shard that is not a whole number of slots
    starts inside one) and writes it to rank r only; bit for bit, twice (the space reused)."""
    cfg = tb_config()
    params, ports, rng, eps, loader = await start_isa(dut)
    dtype, c = cfg["dtype"], cfg["elements"]
    desc = dict(op=Op.REDUCE_SCATTER, dtype=DType[dtype.upper()], flag_mode=FlagMode.ORDERED,
                sync=1, participants=0b1111, elements=c, src_addr=SRC, dst_addr=DST,
                src_scale_addr=SSRC, dst_scale_addr=SDST, flag_addr=FLAG, mode=PushMode.PUSH)
    load_program(loader, params, [desc])
    await loader.wait_idle()
    for generation in (1, 2):
        data, scales = make_inputs(rng, dtype, ports, ports * c)
        for i in range(ports):
            eps[i].push(params, 1, data[i].tobytes(),
                        b"" if scales is None else scales[i].tobytes())
        cycle = await wait_generation(dut, eps, FLAG, generation)
        golden = numerics.reduce_scatter(dtype, data, scales)
        for r, ep in enumerate(eps):
            want = golden[r].out_bytes
            assert bytes(ep.mem[DST:DST + len(want)]) == want, f"rank {r}: shard differs"
            if golden[r].scale_bytes is not None:
                ws = golden[r].scale_bytes
                assert bytes(ep.mem[SDST:SDST + len(ws)]) == ws, f"rank {r}: scales differ"
            assert ep.flag_fields(FLAG)["status"] & ~DATA_FLAGS == 0, ep.flag_fields(FLAG)
        dut._log.info("generation %d: %d cycles after the pushes", generation, cycle)
    c_ = counters(dut)
    assert c_["slots"] == 0 and c_["bad_pushes"] == 0 and c_["unknown_tags"] == 0, c_


@cocotb.test()
async def pushed_gather_and_broadcast(dut):
    """Pushed AllGather and Broadcast (config ``op``, ``in_place``): each AllGather rank pushes its
    shard (in place: its slice of the result buffer) from the start of its push space and the
    ISA copies shard r from rank r's push slots in phase r; a Broadcast's root alone pushes, the
    others neither push nor arrive. Bit for bit (in place: every rank's whole buffer, its own
    shard kept and never written back), twice (the space reused), no READ at all."""
    cfg = tb_config()
    params, ports, rng, eps, loader = await start_isa(dut)
    dtype, c, op, root = cfg["dtype"], cfg["elements"], Op[cfg["op"]], cfg.get("root", 0)
    in_place = cfg.get("in_place", False)
    dst = SRC if in_place else DST
    sdst = SSRC if in_place else SDST
    desc = dict(op=op, dtype=DType[dtype.upper()], flag_mode=FlagMode.ORDERED, sync=0, root=root,
                participants=0b1111, elements=c, src_addr=SRC, dst_addr=dst,
                src_scale_addr=SSRC, dst_scale_addr=sdst, flag_addr=FLAG, mode=PushMode.PUSH)
    load_program(loader, params, [desc])
    await loader.wait_idle()
    esize = 1 if dtype == "int8" else 2
    n = c * esize                                   # bytes a rank pushes
    for generation in (1, 2):
        data, scales = make_inputs(rng, dtype, ports, c)
        raw = [data[r].tobytes() for r in range(ports)]
        sraw = [b"" if scales is None else scales[r].tobytes() for r in range(ports)]
        gathered = op == Op.ALLGATHER
        whole = n * ports if gathered else n
        for r, ep in enumerate(eps):
            at = r * n if gathered and in_place else 0    # where the rank's input lies
            ep.mem[dst:dst + whole] = bytes(whole)
            ep.mem[SRC + at:SRC + at + n] = raw[r]
            if scales is not None:
                ep.mem[sdst:sdst + whole // 32] = bytes(whole // 32)
                ep.mem[SSRC + at // 32:SSRC + (at + n) // 32] = sraw[r]
            if gathered or r == root:
                ep.push(params, 0, raw[r], sraw[r])
        cycle = await wait_generation(dut, eps, FLAG, generation)
        golden = (numerics.allgather(dtype, data, scales) if gathered
                  else numerics.broadcast(dtype, data, scales, root=root))
        for r, ep in enumerate(eps):
            assert bytes(ep.mem[dst:dst + whole]) == golden.out_bytes, f"rank {r}: data differs"
            if golden.scale_bytes is not None:
                ws = golden.scale_bytes
                assert bytes(ep.mem[sdst:sdst + len(ws)]) == ws, f"rank {r}: scales differ"
            assert ep.flag_fields(FLAG)["status"] & ~DATA_FLAGS == 0, ep.flag_fields(FLAG)
        dut._log.info("generation %d: %d cycles after the pushes", generation, cycle)
    c_ = counters(dut)
    assert c_["slots"] == 0 and c_["bad_pushes"] == 0 and c_["unknown_tags"] == 0, c_
    assert not any(ep.reads_seen for ep in eps), "a pushed collective read"


#: AllGather and Broadcast cases: in place with shards that do not fill a slot (fp16 1056 B:
#: rank r's shard starts inside a page of the buffer, yet at 0 in its push space), out of place,
#: INT8 in place with its scales, and a Broadcast from rank 2, in place and not.
GB_CASES = {
    "allgather_fp16_1056B_in_place": dict(op="ALLGATHER", dtype="fp16", elements=528,
                                          in_place=True),
    "allgather_bf16_2KiB":  dict(op="ALLGATHER", dtype="bf16", elements=1024),
    "allgather_int8_1KiB_in_place": dict(op="ALLGATHER", dtype="int8", elements=1024,
                                         in_place=True),
    "broadcast_fp16_6KiB": dict(op="BROADCAST", dtype="fp16", elements=3072, root=2),
    "broadcast_int8_4KiB_in_place": dict(op="BROADCAST", dtype="int8", elements=4096, root=1,
                                         in_place=True),
}
GB_ICARUS = {"allgather_fp16_1056B_in_place": dict(elements=48),
             "broadcast_fp16_6KiB": dict(elements=64)}


@pytest.mark.parametrize("sim, case", [("verilator", k) for k in GB_CASES]
                         + [("icarus", k) for k in GB_ICARUS])
def test_pushed_gather_and_broadcast(sim, case):
    params = isa_params({})
    cfg = dict(GB_CASES[case], stalls=sim == "verilator",
               **GB_ICARUS.get(case, {}) if sim == "icarus" else {})
    run_isa(__file__, sim, params, config=cfg, testcase="pushed_gather_and_broadcast")


#: ReduceScatter cases: per-rank counts whose shards start inside a slot (fp16: 1056 B x 4),
#: the whole push space (bf16: 2 KiB x 4 = 8 KiB), INT8 with its scales.
RS_CASES = {
    "fp16_1056B": dict(dtype="fp16", elements=528),
    "bf16_2KiB":  dict(dtype="bf16", elements=1024),
    "int8_1KiB":  dict(dtype="int8", elements=1024),
}
RS_ICARUS = {"fp16_1056B": dict(elements=48), "int8_1KiB": dict(elements=64)}


@pytest.mark.parametrize("sim, case", [("verilator", k) for k in RS_CASES]
                         + [("icarus", k) for k in RS_ICARUS])
def test_pushed_reduce_scatter(sim, case):
    params = isa_params({})
    icarus = RS_ICARUS.get(case, {}) if sim == "icarus" else {}
    cfg = dict(RS_CASES[case], stalls=sim == "verilator", **icarus)
    run_isa(__file__, sim, params, config=cfg, testcase="pushed_reduce_scatter")


#: Message size: 4 KiB on Verilator, 128 bytes on Icarus (the module docstring).
ELEMENTS = {"verilator": 2048, "icarus": 64}


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
@pytest.mark.parametrize("testcase", ["push_beside_pull_faults_and_reduce",
                                      "bad_push_descriptor_then_good"])
def test_push_scenario(sim, testcase):
    params = isa_params({})
    run_isa(__file__, sim, params, config={"stalls": sim == "verilator", "elements": ELEMENTS[sim]},
            testcase=testcase)
