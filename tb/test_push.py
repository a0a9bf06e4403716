"""Push mode of the ISA (docs/ISA.md, Push mode) on its own, against the Python endpoint models:
groups pushing beside a pulled collective, a pushed Reduce, and every push fault (beyond the
reserved space, to a resource without one, from a port outside the group, a PUSH descriptor that
cannot push), each ending as documented with the next collective clean.

The bit-for-bit push cases of every dtype are ``push_*`` and ``auto_*`` in tb/test_isa.py; this
file shares that ISA build (``isa_params``): two push resources of 8 KiB per participant. Random
pauses on every stream on Verilator; Icarus runs the same scenario without pauses on 128-byte
messages (a 4 KiB collective takes minutes there).
"""

import cocotb
import pytest
from cocotb.triggers import RisingEdge

from scin.hdl.isa import Isa, Op, DType, FlagMode, FlagStatus, PushMode
from scin.sim import numerics
from scin.sim.runner import verilog_for, run_cocotb
from scin.sim.testbench.env import tb_config, cocotb_module
from scin.sim.testbench.isa_program import load_program

from scin.tb.isa_setup import SRC, DST, FLAG, isa_params, make_inputs, flag_word, counters, start_isa

ERROR = FlagStatus.ERROR.value


async def run(dut, eps, rng, desc, generation, *, faults=(), status=0, ports=None):
    """One generation of ``desc``: fresh inputs, each participant pushes (PUSH) or arrives
    (PULL) after the ``faults`` (callables, sent first); waits for the flags and checks them and,
    for a good one, the results bit for bit (Reduce: the root only)."""
    parts = [i for i in range(4) if desc["participants"] >> i & 1]
    data, _ = make_inputs(rng, "fp16", len(parts), desc["elements"])
    for j, i in enumerate(parts):
        eps[i].mem[desc["src_addr"]:desc["src_addr"] + data[j].nbytes] = data[j].tobytes()
        eps[i].mem[desc["dst_addr"]:desc["dst_addr"] + data[j].nbytes] = bytes(data[j].nbytes)
    for fault in faults:
        fault()
    for j, i in enumerate(parts):
        if desc["mode"] == PushMode.PUSH:
            eps[i].push(isa_params({}), desc["sync"], data[j].tobytes())
        else:
            eps[i].arrive(desc["sync"])
    for cycle in range(20_000):
        if all(eps[i].flag(desc["flag_addr"]) & 0xFFFF == generation for i in parts):
            break
        await RisingEdge(dut.clk)
    else:
        raise AssertionError(f"flags {[hex(eps[i].flag(desc['flag_addr'])) for i in parts]}, "
                             f"want generation {generation}; {counters(dut)}")
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
    load_program(loader, params, [a, b, x, r])
    await loader.wait_idle()
    for cycle in range(2000):
        if all(eps[i].flag(FLAG + 128) == flag_word(0, ERROR) for i in range(ports)):
            break
        await RisingEdge(dut.clk)
    else:
        raise AssertionError(f"PUSH without push space: flags "
                             f"{[hex(ep.flag(FLAG + 128)) for ep in eps]}; {counters(dut)}")

    # Group A pushes while group B pulls: both bit for bit, nothing dropped.
    ta = cocotb.start_soon(run(dut, eps, rng, a, 1))
    tb_ = cocotb.start_soon(run(dut, eps, rng, b, 1))
    await ta
    await tb_
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
    # A push from a port outside the group: ERROR; the next generation clean.
    await run(dut, eps, rng, a, 4, faults=[outsider], status=ERROR)
    await run(dut, eps, rng, a, 5)
    # A push to a resource without push space: dropped and counted, no collective is touched.
    await run(dut, eps, rng, a, 6, faults=[nowhere])
    assert counters(dut)["bad_pushes"] == 2, counters(dut)
    # A pushed Reduce: the root alone gets the result, the others nothing.
    await run(dut, eps, rng, r, 1)
    await run(dut, eps, rng, r, 2)
    for _ in range(1000):
        c = counters(dut)
        if c["collectives"] == 1 + 1 + 6 + 2:
            break
        await RisingEdge(dut.clk)
    assert c["collectives"] == 10 and c["bad_descriptors"] == 1, c
    assert c["bad_pushes"] == 2 and c["unknown_tags"] == 0 and c["timeouts"] == 0, c
    # Only group B's pulled collective read anything.
    assert not any(eps[i].reads_seen for i in (0, 1)), "a pushed collective sent a READ"


#: Message size: 4 KiB on Verilator, 128 bytes on Icarus (the module docstring).
ELEMENTS = {"verilator": 2048, "icarus": 64}


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_push_scenario(sim):
    params = isa_params({})
    path = verilog_for(lambda: Isa(params), "isa", repr(params))
    run_cocotb(verilog_path=path, top="isa", test_module=cocotb_module(__file__), sim=sim,
               config={"stalls": sim == "verilator", "elements": ELEMENTS[sim]},
               testcase="push_beside_pull_faults_and_reduce")
