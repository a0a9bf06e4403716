"""The ISA on its own, against Python endpoint models (sim/testbench/endpoint_model.py) and the
golden model.

Each port's endpoint model answers reads after a random latency and out of order, with random
backpressure and idle cycles on every stream; results are compared bit for bit with
``scin.sim.numerics``, flags and counters are checked.

Every test shares one ISA build per simulator (one configuration, ``isa_params``). Verilator runs
every case and scenario in full. Icarus, many times slower on the ISA (a 4 KiB collective takes
minutes), runs a short form of some cases (``ICARUS_FORM``) and of every scenario
(``SCENARIO_ELEMENTS``): small messages, no random pauses (so no stream driver wakes every cycle;
``fp16_64B`` keeps them), two replays instead of three, with every check bit for bit.
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge

from scin.hdl.isa import Op, FlagMode, FlagStatus, PushMode, push_mode
from scin.hdl.isa import DType
from scin.hdl.packet import MsgClass, Opcode
from scin.sim import numerics
from scin.sim.testbench.env import tb_config
from scin.sim.testbench.isa_program import load_program

from scin.tb.simulators import sim_params
from scin.tb.isa_setup import (SRC, DST, SSRC, SDST, FLAG, DATA_FLAGS, isa_params,
                               make_inputs, flag_word, counters, start_isa)
from scin.tb.cocotb_run import run_isa


async def wait_flags(dut, eps, generation, timeout=20_000):
    for cycle in range(timeout):
        if all(ep.flag(FLAG) & 0xFFFF == generation for ep in eps):
            return cycle
        if cycle % 2000 == 1999:
            dut._log.info("cycle %d: waiting for flags; counters %s", cycle, counters(dut))
        await RisingEdge(dut.clk)
    raise AssertionError(f"flags not all at generation {generation} after {timeout} cycles: "
                         f"{[hex(ep.flag(FLAG)) for ep in eps]}; counters {counters(dut)}")


@cocotb.test()
async def allreduce_matches_golden_model(dut):
    cfg = tb_config()
    params, ports, rng, eps, loader = await start_isa(dut)
    dtype, elements = cfg["dtype"], cfg["elements"]
    mask = cfg.get("mask", (1 << ports) - 1)
    parts = [i for i in range(ports) if mask >> i & 1]
    flag_mode = FlagMode[cfg.get("flag_mode", "ACKED")]
    desc = dict(op=Op.ALLREDUCE, dtype=DType[dtype.upper()], flag_mode=flag_mode,
                sync=cfg.get("sync", 0), participants=mask, elements=elements, src_addr=SRC,
                dst_addr=DST, src_scale_addr=SSRC, dst_scale_addr=SDST, flag_addr=FLAG,
                mode=PushMode[cfg.get("mode", "PULL")])
    # What the participants do: push their inputs, or arrive (AUTO resolved as the ISA does).
    pushing = push_mode({k: getattr(v, "value", v) for k, v in desc.items()}, params) \
        == PushMode.PUSH
    assert pushing == cfg.get("pushes", cfg.get("mode") == "PUSH"), \
        "the case's mode is not what it says"
    load_program(loader, params, [desc])
    await loader.wait_idle()

    for generation in range(1, cfg.get("replays", 1) + 1):
        data, scales = make_inputs(rng, dtype, len(parts), elements)
        for j, i in enumerate(parts):
            raw = data[j].tobytes()
            eps[i].mem[SRC:SRC + len(raw)] = raw
            if scales is not None:
                sraw = scales[j].tobytes()
                eps[i].mem[SSRC:SSRC + len(sraw)] = sraw
        for j, i in enumerate(parts):
            if pushing:
                eps[i].push(params, desc["sync"], data[j].tobytes(),
                            b"" if scales is None else scales[j].tobytes())
            else:
                eps[i].arrive(desc["sync"])
        cycles = await wait_flags(dut, [eps[i] for i in parts], generation)
        dut._log.info("generation %d: flags after %d cycles; counters %s", generation, cycles,
                      counters(dut))

        golden = numerics.allreduce(dtype, data, scales)
        want_bytes, want_scales = golden.out_bytes, golden.scale_bytes
        for i in parts:
            got = bytes(eps[i].mem[DST:DST + len(want_bytes)])
            if got != want_bytes:
                a = np.frombuffer(got, np.uint8)
                b = np.frombuffer(want_bytes, np.uint8)
                bad = np.flatnonzero(a != b)
                raise AssertionError(f"port {i}: {len(bad)} result bytes differ, "
                                     f"first at byte {bad[0]}: "
                                     f"got {a[bad[:8]]}, want {b[bad[:8]]}")
            if want_scales is not None:
                gots = bytes(eps[i].mem[SDST:SDST + len(want_scales)])
                assert gots == want_scales, f"port {i}: output scales differ"
            flag = eps[i].flag(FLAG)
            want_flag = flag_word(generation, golden.status & DATA_FLAGS)
            assert flag == want_flag, f"port {i}: flag {flag:#x}, want {want_flag:#x}"
        for i in range(ports):
            if not mask >> i & 1:
                assert eps[i].writes == 0, f"port {i} is not a participant but was written"
        # The descriptor completes once the flag writes are acknowledged too.
        for _ in range(1000):
            if counters(dut)["collectives"] == generation:
                break
            await RisingEdge(dut.clk)
    c = counters(dut)
    assert c["collectives"] == cfg.get("replays", 1), c
    assert c["unknown_tags"] == 0 and c["bad_descriptors"] == 0, c
    assert c["unknown_wresps"] == 0 and c["timeouts"] == 0, c
    assert c["bad_pushes"] == 0, c
    if pushing:
        # No READ at all: the inputs were pushed.
        assert c["slots"] == 0 and not any(ep.reads_seen for ep in eps), c
    else:
        # Trains (isa_params: 2 slots): a message of three or more full slots from page-aligned
        # buffers is read with READ_WAVEs (a second piece has train index 1; the first slot's
        # READ goes out alone; INT8 scales follow in one piece per train) and one of two or more
        # slots written with WRITE_POSTEDs.
        nbytes = cfg["elements"] * (1 if cfg["dtype"] == "int8" else 2)
        int8 = cfg["dtype"] == "int8"
        trains = any(r.get("train") for ep in eps for r in ep.reads_seen)
        posted = any(w["opcode"] == Opcode.WRITE_POSTED.value for ep in eps for w in ep.writes_seen)
        assert trains == (nbytes >= 3 * 4096), (nbytes, trains)
        scale_trains = any("train" in r and SSRC <= r["addr"] < SDST  # a READ_WAVE's piece
                           for ep in eps for r in ep.reads_seen)
        assert scale_trains == (int8 and trains), (nbytes, scale_trains)
        assert posted == (int8 or nbytes > 4096), (nbytes, posted)


CASES = {
    "fp16_64B":     dict(dtype="fp16", elements=32),
    "fp16_4KB":     dict(dtype="fp16", elements=2048),
    "fp16_4KB+64B": dict(dtype="fp16", elements=2080),
    "fp16_odd":     dict(dtype="fp16", elements=37, flag_mode="ORDERED"),
    "bf16_4KB":     dict(dtype="bf16", elements=2048),
    "int8_8KB":     dict(dtype="int8", elements=8192),
    "int8_16KB":    dict(dtype="int8", elements=16384),
    "int8_64":      dict(dtype="int8", elements=64),
    "fp16_subset":  dict(dtype="fp16", elements=3000, mask=0b1011),
    "fp16_replay":  dict(dtype="fp16", elements=4096, replays=3),
    "fp16_5slots":  dict(dtype="fp16", elements=10240 + 32),
    # Push mode (two resources of 8 KiB each per participant): the whole reserved space, a
    # short message, every dtype, a subset on the second resource, replays reusing the space,
    # and AUTO both ways (its threshold is the reserved space by default).
    "push_fp16_64B":  dict(dtype="fp16", elements=32, mode="PUSH", flag_mode="ORDERED"),
    "push_fp16_8KB":  dict(dtype="fp16", elements=4096, mode="PUSH", replays=3),
    "push_bf16_odd":  dict(dtype="bf16", elements=1037, mode="PUSH", flag_mode="ORDERED"),
    "push_int8_8KB":  dict(dtype="int8", elements=8192, mode="PUSH", replays=2),
    "push_subset":    dict(dtype="fp16", elements=3000, mode="PUSH", mask=0b1011, sync=1),
    "auto_push":      dict(dtype="fp16", elements=2048, mode="AUTO", pushes=True),
    "auto_pull":      dict(dtype="fp16", elements=4097, mode="AUTO", pushes=False),
}

#: The cases Icarus runs too, and what changes in their short form there (the module docstring):
#: small messages only. The rest are too long for Icarus: on the 2-core CI machine a 4 KiB case
#: took 2-7 min on Icarus (3-5 s on Verilator), so Icarus covers each dtype, both flag modes, a
#: subset of participants, a replay and a message that is not a whole number of flits, and
#: Verilator runs every case in full. ``stalls`` is off on Icarus unless given here.
ICARUS_FORM = {
    "fp16_64B":    dict(stalls=True),
    "fp16_odd":    dict(),
    "int8_64":     dict(),
    "bf16_4KB":    dict(elements=96),
    "fp16_subset": dict(elements=100),
    "fp16_replay": dict(elements=64, replays=2),
    "push_fp16_64B": dict(stalls=True),
    "push_int8_8KB": dict(elements=128),
    "push_subset":   dict(elements=100, replays=2),
}


@pytest.mark.parametrize("sim, case", sim_params(CASES, ICARUS_FORM))
def test_isa_allreduce(sim, case):
    """Each case in full on Verilator; on Icarus the cases of ``ICARUS_FORM`` in their short
    form (small messages, no random pauses but in ``fp16_64B``, two replays instead of three),
    bit for bit on both."""
    cfg = dict(CASES[case])
    if sim == "icarus":
        cfg.update({"stalls": False, **ICARUS_FORM[case]})
    params = isa_params(cfg)
    run_isa(__file__, sim, params, config=cfg, testcase="allreduce_matches_golden_model")


#: The message size of the scenarios below: 4 KiB (two slots) on Verilator, one 128-byte slot on
#: Icarus, where a 4 KiB collective takes minutes (``ICARUS_FORM``).
SCENARIO_ELEMENTS = {"verilator": 2048, "icarus": 64}


def run_case(sim, testcase):
    """Run one of this file's cocotb tests on the shared ISA build: with random pauses and 4 KiB
    messages on Verilator, without pauses and with 128-byte messages on Icarus (module
    docstring)."""
    params = isa_params({})
    run_isa(__file__, sim, params,
            config={"stalls": sim == "verilator", "elements": SCENARIO_ELEMENTS[sim]},
            testcase=testcase)


@cocotb.test()
async def bad_input_then_good(dut):
    """Bad descriptors (unknown op, zero length, a participant outside the switch, a misaligned
    address, a sync resource out of range, an oversized length) end with ERROR flags and the ISA
    goes on; good descriptors on different sync resources run in between and after; a response
    with an unknown tag is dropped and counted."""
    params, ports, rng, eps, loader = await start_isa(dut)
    everyone = (1 << ports) - 1
    good = dict(op=Op.ALLREDUCE, dtype=DType.FP16, flag_mode=FlagMode.ACKED, participants=everyone,
                elements=tb_config()["elements"], src_addr=SRC, dst_addr=DST)
    flag = lambda k: FLAG + 64 * k
    # (descriptor, sync resource arrived at or None, expected generation, expected status)
    program = [
        (dict(good, op=0, sync=0, flag_addr=flag(0)), 0, 1, FlagStatus.ERROR),
        (dict(good, sync=1, flag_addr=flag(1)), 1, 1, 0),
        (dict(good, sync=0, elements=0, flag_addr=flag(2)), 0, 2, FlagStatus.ERROR),
        # Ports 4 and 5 do not exist: the descriptor is bad, but port 0 can still arrive, so the
        # barrier is kept (its arrival must not leak into the next generation of resource 2).
        (dict(good, sync=2, participants=0b110001, flag_addr=flag(3)), 2, 1, FlagStatus.ERROR),
        (dict(good, sync=3, src_addr=SRC + 4, flag_addr=flag(4)), 3, 1, FlagStatus.ERROR),
        (dict(good, sync=9, flag_addr=flag(5)), None, 0, FlagStatus.ERROR),
        (dict(good, sync=2, dtype=DType.BF16, flag_addr=flag(6)), 2, 2, 0),
        (dict(good, sync=0, elements=params.max_elements + 1, flag_addr=flag(7)), 0, 3,
         FlagStatus.ERROR),
        (dict(good, sync=1, flag_addr=flag(8)), 1, 2, 0),
    ]
    load_program(loader, params, [p[0] for p in program])
    await loader.wait_idle()

    # A read response nobody asked for.
    stray = eps[0]._data_packet(Opcode.READ_RESP, {"tag": 0x7FF}, bytes(64))
    eps[0].to_isa[MsgClass.RDATA].send(*stray)

    for k, (desc, sync, generation, status) in enumerate(program):
        status = getattr(status, "value", status)
        parts = [i for i in range(ports) if desc["participants"] >> i & 1]
        data = None
        if status == 0:
            data, _ = make_inputs(rng, desc["dtype"].name.lower(), len(parts), desc["elements"])
            for j, i in enumerate(parts):
                eps[i].mem[SRC:SRC + data[j].nbytes] = data[j].tobytes()
        if sync is not None:
            for i in parts:
                eps[i].arrive(sync)
        flagged = [eps[i] for i in parts]
        for cycle in range(20_000):
            if all(ep.flag(desc["flag_addr"]) == flag_word(generation, status) for ep in flagged):
                break
            await RisingEdge(dut.clk)
        else:
            flags = [hex(ep.flag(desc['flag_addr'])) for ep in flagged]
            raise AssertionError(f"descriptor {k}: flags {flags}, "
                                 f"want generation {generation} status {int(status)}; "
                                 f"{counters(dut)}")
        if data is not None:
            want = numerics.allreduce(desc["dtype"], data).out_bytes
            for i in parts:
                assert bytes(eps[i].mem[DST:DST + len(want)]) == want, f"descriptor {k} port {i}"
        dut._log.info("descriptor %d: flags %s as expected", k, hex(flag_word(generation, status)))
    for _ in range(1000):
        if counters(dut)["collectives"] == len(program):
            break
        await RisingEdge(dut.clk)
    c = counters(dut)
    assert c["collectives"] == len(program), c
    assert c["bad_descriptors"] == 6, c
    assert c["unknown_tags"] == 1, c


@cocotb.test()
async def groups_do_not_wait_for_each_other(dut):
    """Two groups on different sync resources share the ISA: group B (ports 2, 3) completes while
    group A (ports 0, 1) has not arrived (no head-of-line blocking by program order), and A's two
    descriptors on one resource still run in program order."""
    params, ports, rng, eps, loader = await start_isa(dut)
    base = dict(op=Op.ALLREDUCE, dtype=DType.FP16, flag_mode=FlagMode.ORDERED,
                elements=tb_config()["elements"])
    a1 = dict(base, participants=0b0011, sync=0, src_addr=SRC, dst_addr=DST, flag_addr=FLAG)
    b = dict(base, participants=0b1100, sync=1, src_addr=SRC, dst_addr=DST, flag_addr=FLAG + 64)
    a2 = dict(base, participants=0b0011, sync=0, src_addr=SRC + 0x4000, dst_addr=DST + 0x4000,
              flag_addr=FLAG + 128)
    load_program(loader, params, [a1, b, a2])
    await loader.wait_idle()

    def fill(desc):
        parts = [i for i in range(ports) if desc["participants"] >> i & 1]
        data, _ = make_inputs(rng, "fp16", len(parts), desc["elements"])
        for j, i in enumerate(parts):
            eps[i].mem[desc["src_addr"]:desc["src_addr"] + data[j].nbytes] = data[j].tobytes()
        return parts, numerics.allreduce("fp16", data).out_bytes

    async def run(desc, generation):
        parts, want = fill(desc)
        for i in parts:
            eps[i].arrive(desc["sync"])
        for cycle in range(20_000):
            if all(eps[i].flag(desc["flag_addr"]) == flag_word(generation) for i in parts):
                break
            await RisingEdge(dut.clk)
        else:
            flags = [hex(eps[i].flag(desc['flag_addr'])) for i in parts]
            raise AssertionError(f"flags {flags} at {desc['flag_addr']:#x}, "
                                 f"want generation {generation}; {counters(dut)}")
        for i in parts:
            got = bytes(eps[i].mem[desc["dst_addr"]:desc["dst_addr"] + len(want)])
            assert got == want, f"port {i}: result at {desc['dst_addr']:#x} differs"
        return cycle

    # B first, while A is away: in program order B would wait behind A1 for ever.
    cycles = await run(b, 1)
    dut._log.info("group B done in %d cycles with group A absent", cycles)
    assert all(eps[i].flag(FLAG) == 0 for i in (0, 1)), "A1 ran without its group"
    await run(a1, 1)
    assert all(eps[i].flag(FLAG + 128) == 0 for i in (0, 1)), "A2 ran before its turn"
    await run(a2, 2)
    await run(b, 2)      # the program loops: B's second generation
    c = counters(dut)
    assert c["bad_descriptors"] == 0 and c["unknown_tags"] == 0, c


@cocotb.test()
async def bad_arrivals_and_requests(dut):
    """An arrival at a sync resource that does not exist is answered DECERR and counted; a
    duplicate arrival neither completes the barrier early nor is lost from the count; a READ sent
    to the ISA (which serves none) is dropped and counted; a good All-Reduce then runs bit-exact."""
    from scin.sim.testbench.traffic import make_packet
    from scin.hdl.packet import Status
    params, ports, rng, eps, loader = await start_isa(dut)
    desc = dict(op=Op.ALLREDUCE, dtype=DType.FP16, flag_mode=FlagMode.ACKED, sync=0,
                participants=(1 << ports) - 1, elements=tb_config()["elements"], src_addr=SRC,
                dst_addr=DST, flag_addr=FLAG)
    load_program(loader, params, [desc])
    await loader.wait_idle()
    data, _ = make_inputs(rng, "fp16", ports, desc["elements"])
    for i in range(ports):
        eps[i].mem[SRC:SRC + data[i].nbytes] = data[i].tobytes()

    eps[0].arrive(params.sync_resources + 1, tag=7)           # no such resource
    eps[1].arrive(0, tag=1)
    eps[1].arrive(0, tag=2)                                    # twice in one generation
    read = make_packet(params.fabric, opcode=Opcode.READ, inc=1, src=2, dst=2, addr=SRC,
                       length=64, tag=3)
    eps[2].to_isa[MsgClass.REQ].send(*read)
    for _ in range(600):
        await RisingEdge(dut.clk)
    c = counters(dut)
    assert (c["bad_arrivals"], c["dup_arrivals"], c["bad_requests"]) == (1, 1, 1), c
    bad_ack = [a for a in eps[0].acks if a["tag"] == 7]
    assert len(bad_ack) == 1 and bad_ack[0]["status"] == Status.DECERR.value, eps[0].acks
    assert all(a["status"] == Status.OK.value for a in eps[1].acks) and len(eps[1].acks) == 2, \
        eps[1].acks
    # Only port 1 has arrived (twice): the barrier must still be open.
    assert all(ep.flag(FLAG) == 0 for ep in eps) and c["collectives"] == 0, c
    for i in (0, 2, 3):
        eps[i].arrive(0)
    await wait_flags(dut, eps, 1)
    want = numerics.allreduce("fp16", data).out_bytes
    for i in range(ports):
        assert bytes(eps[i].mem[DST:DST + len(want)]) == want, f"port {i}"
        assert eps[i].flag(FLAG) == flag_word(1), hex(eps[i].flag(FLAG))


def test_isa_bad_arrivals_and_requests(sim):
    """Random pauses on Verilator, none on Icarus; the same checks on both."""
    run_case(sim, "bad_arrivals_and_requests")


def test_isa_groups(sim):
    """Random pauses on Verilator, none on Icarus; the same checks on both."""
    run_case(sim, "groups_do_not_wait_for_each_other")


def test_isa_bad_input(sim):
    """Random pauses on Verilator, none on Icarus; the same checks on both."""
    run_case(sim, "bad_input_then_good")
