"""Faults at endpoints: AXI errors, the response watchdog, duplicate and unknown
responses. Every outcome named here is a row of docs/RELIABILITY.md.

ISA-level tests drive the ISA alone against the Python endpoint models of
``sim/testbench/endpoint_model.py`` (random latency, out-of-order responses, idle cycles and
backpressure on every stream), which inject the faults per request. They share the ISA build of
``tb/block/test_isa.py`` (``tb/isa_setup.py``: a watchdog of ``TEST_TIMEOUT`` cycles). Each test
runs a program of descriptors, one step per descriptor, each on its own sync resource and flag word;
a step ends when the ISA's ``collectives`` counter says the descriptor is complete (flags written
and acknowledged, rewrites included), and its flags and results are then checked: bit for bit
against ``scin.sim.numerics`` for every good step. Counters are checked exactly at the end.

The system-level test runs the whole switch + ISA + endpoints, where one endpoint's memory is half
the size of the others': a symmetric buffer that fits the others runs off its end, and its
``AxiMemory`` answers ``DECERR``, which reaches the ISA through the real AXI bridge.

The scenarios run on Verilator, in full: every step, with random idle cycles and backpressure on
every stream. They are too long for Icarus: on the 2-core CI machine each took 8 to 15 minutes
there even in a short form of half the steps and no pauses (against seconds on Verilator).
Icarus runs ``small_faults`` instead: one-slot collectives with an AXI error on a read and on a
write, a duplicate response and stray responses, each checked as above; Verilator runs it too.
The system-level test has a short form for Icarus (its docstring).
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import ClockCycles

from scin.hdl.codec import pack, unpack
from scin.hdl.isa import IsaParams, Op, FlagMode, FlagStatus, flag_layout
from scin.hdl.isa import DType
from scin.hdl.isa import ReadKind, read_tag
from scin.hdl.packet import FabricParams, MsgClass, Opcode, Status
from scin.sim import numerics
from scin.sim.testbench.backdoor import MemoryBackdoor
from scin.sim.testbench.endpoint_model import EndpointModel
from scin.sim.testbench.env import tb_config, tb_rng, start, read_int
from scin.sim.testbench.isa_program import load_program
from scin.sim.testbench.streams import StreamSource, StreamSink, random_pauses
from scin.sim.testbench.traffic import is_last

from scin.tb.simulators import sim_params
from scin.tb.isa_setup import (SRC, DST, SSRC, SDST, FLAG, MEM, TEST_TIMEOUT, DATA_FLAGS,
                               isa_params, make_inputs, flag_word, counters)
from scin.tb.cocotb_run import run_block, run_isa

ERROR, TIMEOUT = FlagStatus.ERROR.value, FlagStatus.TIMEOUT.value
SLOT = 4096


def flag_addr(k):
    return FLAG + 64 * k


async def run_steps(dut, steps):
    """Run ``steps`` on the ISA, one descriptor each, and check every flag and good result.

    Step ``k`` uses sync resource ``k % 8`` (so its flag's generation is ``k // 8 + 1``).
    A step is a dict: ``dtype``, ``elements``, ``flag_mode``; ``faults(eps)`` injects faults before
    the arrivals, ``during(eps)`` (optional, a coroutine function) runs while the step does;
    ``want`` is ``"ok"`` (bit-exact result, golden status), ``"error"`` or ``"timeout"`` (that
    status bit in every flag, no other but data flags). With config ``pauses`` false (Icarus)
    the streams have no random pauses. Returns the endpoint models."""
    params = isa_params(tb_config())
    ports = params.fabric.ports
    rng = tb_rng(dut)
    pauses = (lambda: random_pauses(rng, 0.2)) if tb_config().get("pauses", True) else None
    eps = [EndpointModel(dut, params.fabric, i, MEM, rng, pauses=pauses) for i in range(ports)]
    loader = StreamSource(dut, "load")
    await start(dut)
    everyone = (1 << ports) - 1
    descs = []
    for k, st in enumerate(steps):
        descs.append(dict(op=Op.ALLREDUCE, dtype=DType[st["dtype"].upper()],
                          flag_mode=FlagMode[st["flag_mode"]], sync=k % params.sync_resources,
                          participants=everyone,
                          elements=st["elements"], src_addr=SRC, dst_addr=DST,
                          src_scale_addr=SSRC, dst_scale_addr=SDST, flag_addr=flag_addr(k)))
    load_program(loader, params, descs)
    await loader.wait_idle()

    for k, st in enumerate(steps):
        data, scales = make_inputs(rng, st["dtype"], ports, st["elements"])
        for i in range(ports):
            eps[i].mem[SRC:SRC + data[i].nbytes] = data[i].tobytes()
            if scales is not None:
                eps[i].mem[SSRC:SSRC + scales[i].nbytes] = scales[i].tobytes()
            # Stale results must not pass for new ones.
            eps[i].mem[DST:DST + 2 * st["elements"]] = bytes([0xA5]) * (2 * st["elements"])
        st.get("faults", lambda eps: None)(eps)
        for ep in eps:
            ep.arrive(k % params.sync_resources)
        if "during" in st:
            cocotb.start_soon(st["during"](eps))
        # Bounded: a collective that hangs fails here instead of stalling the run.
        budget = 3 * TEST_TIMEOUT + 20_000
        for cycle in range(0, budget, 4):
            if counters(dut)["collectives"] == k + 1:
                break
            await ClockCycles(dut.clk, 4)
        else:
            raise AssertionError(f"step {k} ({st['want']}) did not complete in {budget} cycles: "
                                 f"flags {[hex(ep.flag(flag_addr(k))) for ep in eps]}; "
                                 f"{counters(dut)}")
        flags = [ep.flag(flag_addr(k)) for ep in eps]
        generation = k // params.sync_resources + 1
        assert all(ep.flag_fields(flag_addr(k))["generation"] == generation for ep in eps), \
            f"step {k}: flags {list(map(hex, flags))}"
        status = [ep.flag_fields(flag_addr(k))["status"] for ep in eps]
        if st["want"] == "ok":
            golden = numerics.allreduce(st["dtype"], data, scales)
            want, want_scales = golden.out_bytes, golden.scale_bytes
            for i, ep in enumerate(eps):
                got = bytes(ep.mem[DST:DST + len(want)])
                if got != want:
                    a, b = np.frombuffer(got, np.uint8), np.frombuffer(want, np.uint8)
                    bad = np.flatnonzero(a != b)
                    raise AssertionError(f"step {k} port {i}: {len(bad)} result bytes differ, "
                                         f"first at byte {bad[0]}")
                if want_scales is not None:
                    assert bytes(ep.mem[SDST:SDST + len(want_scales)]) == want_scales, \
                        f"step {k} port {i}: output scales differ"
            assert flags == [flag_word(generation, golden.status & DATA_FLAGS)] * ports, \
                f"step {k}: flags {list(map(hex, flags))}"
        else:
            bit = {"error": ERROR, "timeout": TIMEOUT}[st["want"]]
            assert all(s & ~DATA_FLAGS == bit for s in status), \
                f"step {k}: statuses {list(map(hex, status))}, want {bit:#x} in every flag"
        dut._log.info("step %d (%s, %s %s): %d cycles, flags %s; counters %s", k, st["want"],
                      st["flag_mode"], st["dtype"], cycle, list(map(hex, flags)), counters(dut))
    # Nothing was truncated: every stream the models received ends on a complete packet (and
    # every WRITE's payload matched its length: the model asserts it on receipt).
    await ClockCycles(dut.clk, 200)
    streams = [(ep, cls, sink) for ep in eps for cls, sink in ep.from_isa.items() if sink.items]
    # Every model received reads and writes (else the check below would look at nothing).
    assert len(streams) >= 2 * len(eps), [(ep.port, cls.name) for ep, cls, _ in streams]
    for ep, cls, sink in streams:
        assert is_last(params.fabric, sink.items[-1]), \
            f"port {ep.port}: {cls.name} stream ends inside a packet"
    for ep in eps:
        assert not ep.read_rules and not ep.write_rules, \
            f"port {ep.port}: a fault was never injected"
    return eps


def at(addr):
    return lambda h: h["addr"] == addr


@cocotb.test()
async def axi_error_flags(dut):
    """An AXI error status on a read (header-only SLVERR as the bridge refuses, or DECERR with
    zero data as a memory answers, on data or on INT8 scales) or on a write (result data or the
    ORDERED flag rewrite case) ends the collective with ERROR in every flag; the next collective
    is bit-exact. Both flag modes."""
    steps = [
        dict(want="error", dtype="fp16", elements=4096, flag_mode="ACKED",
             faults=lambda eps: eps[2].on_read(at(SRC + SLOT), status=Status.SLVERR,
                                               payload=False)),
        dict(want="ok", dtype="fp16", elements=4096, flag_mode="ACKED"),
        dict(want="error", dtype="fp16", elements=4096, flag_mode="ACKED",
             faults=lambda eps: eps[1].on_write(at(DST), status=Status.DECERR)),
        dict(want="ok", dtype="bf16", elements=4096, flag_mode="ACKED"),
        dict(want="error", dtype="int8", elements=4096, flag_mode="ORDERED",
             faults=lambda eps: eps[3].on_read(at(SSRC), status=Status.DECERR)),
        dict(want="ok", dtype="int8", elements=4096, flag_mode="ORDERED"),
        # ORDERED: the flag leaves right behind the data, before the write error is known, and
        # is rewritten with ERROR once the response comes.
        dict(want="error", dtype="fp16", elements=4096, flag_mode="ORDERED",
             faults=lambda eps: eps[0].on_write(at(DST + SLOT), status=Status.SLVERR)),
        dict(want="ok", dtype="fp16", elements=4096, flag_mode="ORDERED"),
    ]
    await run_steps(dut, steps)
    c = counters(dut)
    assert c["collectives"] == len(steps) and c["timeouts"] == 0, c
    assert c["unknown_tags"] == 0 and c["unknown_wresps"] == 0 and c["bad_descriptors"] == 0, c


def _late(port, addr_of_trigger, kind):
    """A ``faults`` hook for the step after a timeout: when the new collective's request at
    ``addr_of_trigger`` reaches ``port``, the held (late) response of the aborted collective goes
    out first, and the genuine response waits 100 more cycles, so the stale response reaches an
    entry the new collective has armed for that very port and slot."""
    def faults(eps):
        rule = eps[port].on_read if kind == "read" else eps[port].on_write
        rule(at(addr_of_trigger), release=True, delay=100)
    return faults


@cocotb.test()
async def watchdog(dut):
    """A read or write response that never comes: the watchdog ends the collective with TIMEOUT
    in every flag (ACKED and ORDERED, in the middle of a wave-regulated message, and when the
    missing response is a flag's); the next collective is bit-exact even though the missing
    response then arrives, late, exactly where the new collective expects its own."""
    steps = [
        dict(want="timeout", dtype="fp16", elements=4096, flag_mode="ACKED",
             faults=lambda eps: eps[1].on_read(at(SRC + SLOT), hold=True)),
        dict(want="ok", dtype="fp16", elements=4096, flag_mode="ACKED",
             faults=_late(1, SRC + SLOT, "read")),
        dict(want="timeout", dtype="fp16", elements=4096, flag_mode="ACKED",
             faults=lambda eps: eps[2].on_write(at(DST + SLOT), hold=True)),
        dict(want="ok", dtype="fp16", elements=4096, flag_mode="ACKED",
             faults=_late(2, DST + SLOT, "write")),
        dict(want="timeout", dtype="fp16", elements=2048, flag_mode="ORDERED",
             faults=lambda eps: eps[3].on_write(at(flag_addr(4)), hold=True)),
        dict(want="ok", dtype="fp16", elements=2048, flag_mode="ORDERED",
             faults=lambda eps: eps[3].on_write(at(DST), release=True)),
        # Five slots through a table of four in two waves: the missing response is the fourth
        # slot's, with slots of the next wave already re-armed.
        dict(want="timeout", dtype="fp16", elements=5 * 2048, flag_mode="ORDERED",
             faults=lambda eps: eps[0].on_read(at(SRC + 3 * SLOT), hold=True)),
        dict(want="ok", dtype="fp16", elements=5 * 2048, flag_mode="ORDERED",
             faults=_late(0, SRC + 3 * SLOT, "read")),
        # INT8: the second slot's block scales never come from port 2 (the slot's result packet
        # has started); the next INT8 collective must start with a clean datapath.
        dict(want="timeout", dtype="int8", elements=2 * 4096, flag_mode="ACKED",
             faults=lambda eps: eps[2].on_read(at(SSRC + 128), hold=True)),
        dict(want="ok", dtype="int8", elements=2 * 4096, flag_mode="ACKED",
             faults=_late(2, SSRC + 128, "read")),
    ]
    await run_steps(dut, steps)
    c = counters(dut)
    assert c["collectives"] == len(steps), c
    assert c["timeouts"] == len(steps) // 2, c
    # Each late response is dropped and counted: the held reads (steps 0, 6 and 8), and for writes
    # the two held responses (steps 2 and 4) plus those of the result packets completed
    # (zero-padded) by the aborts of the read timeouts, one per port each: their tags were freed
    # with the rest.
    # With write trains (isa_params) the INT8 step's completed packet is its slot's result, a
    # WRITE_POSTED (its scales follow it), which no response answers.
    read_timeouts = len([k for k in (0, 6, 8) if k < len(steps)])
    posted = 1 if isa_params({}).write_train > 1 and len(steps) > 8 else 0
    assert c["unknown_tags"] == read_timeouts, c
    assert c["unknown_wresps"] == 2 + (read_timeouts - posted) * 4, c


@cocotb.test()
async def duplicates_and_unknown_tags(dut):
    """Duplicate read and write responses, and responses with tags nobody issued, are dropped and
    counted (exact counts) and the results are bit-exact; one duplicate read response arrives
    after its slot has been re-armed by a later slot of the same message, where only its issue
    number tells it apart."""
    params = isa_params({})

    def stray(eps):
        # A read response for slot 1 (data) whose issue number is one nobody used yet, and a
        # write response whose tag is far from any write sent.
        eps[3].send_stray(MsgClass.RDATA, read_tag(params, slot=1, kind=ReadKind.DATA,
                                                   seq=(1 << params.read_seq_bits) - 1))
        eps[0].send_stray(MsgClass.WRESP, (1 << params.fabric.tag_width) - 1)

    def step0(eps):
        eps[1].on_read(at(SRC), dup=True)
        eps[2].on_write(at(DST + SLOT), dup=True)
        stray(eps)

    def step1(eps):
        # Slot 0's response is duplicated; the copy is sent when the fifth slot (which re-arms
        # slot 0) is requested, and the fifth slot's own response is 100 cycles late.
        eps[2].on_read(at(SRC), dup="hold")
        eps[2].on_read(at(SRC + 4 * SLOT), release=True, delay=100)

    steps = [
        dict(want="ok", dtype="fp16", elements=4096, flag_mode="ACKED", faults=step0),
        dict(want="ok", dtype="fp16", elements=5 * 2048, flag_mode="ORDERED", faults=step1),
        dict(want="ok", dtype="int8", elements=4096, flag_mode="ORDERED",
             faults=lambda eps: (eps[3].on_write(at(flag_addr(2)), dup=True),
                                 eps[1].on_read(at(SSRC), dup=True))),
    ]
    await run_steps(dut, steps)
    c = counters(dut)
    assert c["collectives"] == len(steps) and c["timeouts"] == 0, c
    assert c["unknown_tags"] == 4, c      # 3 duplicates + 1 unknown
    assert c["unknown_wresps"] == 3, c    # 2 duplicates + 1 unknown


@cocotb.test()
async def small_faults(dut):
    """The faults of the scenarios above on one-slot (128-byte) collectives, short enough for
    Icarus: a read refused with a header-only SLVERR and a write answered SLVERR (the ORDERED
    flag rewrite case) end with ERROR in every flag; a duplicate read response and a duplicate
    write response, a read response with an issue number nobody used and a write response with
    a tag nobody issued are dropped and counted; every good collective between is bit-exact."""
    params = isa_params({})

    def dups_and_strays(eps):
        eps[1].on_read(at(SRC), dup=True)
        eps[2].on_write(at(DST), dup=True)
        eps[3].send_stray(MsgClass.RDATA, read_tag(params, slot=1, kind=ReadKind.DATA,
                                                   seq=(1 << params.read_seq_bits) - 1))
        eps[0].send_stray(MsgClass.WRESP, (1 << params.fabric.tag_width) - 1)

    steps = [
        dict(want="error", dtype="fp16", elements=64, flag_mode="ACKED",
             faults=lambda eps: eps[2].on_read(at(SRC), status=Status.SLVERR, payload=False)),
        dict(want="ok", dtype="fp16", elements=64, flag_mode="ACKED", faults=dups_and_strays),
        dict(want="error", dtype="int8", elements=64, flag_mode="ORDERED",
             faults=lambda eps: eps[0].on_write(at(DST), status=Status.SLVERR)),
        dict(want="ok", dtype="bf16", elements=64, flag_mode="ORDERED"),
    ]
    await run_steps(dut, steps)
    c = counters(dut)
    assert c["collectives"] == len(steps) and c["timeouts"] == 0, c
    assert c["unknown_tags"] == 2, c      # 1 duplicate + 1 unknown
    assert c["unknown_wresps"] == 2, c    # 1 duplicate + 1 unknown


@cocotb.test()
async def train_faults(dut):
    """Read and write trains (isa_params: 2 slots):

    * a posted result write (slot 0's WRITE_POSTED) fails at port 1, and the collective is
      aborted by the watchdog (slot 1's read from port 1 never comes) before any acknowledged
      result write could report it: ``TIMEOUT``. The abort's flags, always acknowledged WRITEs,
      carry and clear the sticky error at port 1: the next collective, whose acknowledged
      writes go to the same port, is bit-exact with clean flags;
    * the first INT8 scale READ_WAVE port 2 gets (two slots' scales; 8 slots through the table
      of 4, so trains form whatever the random pauses) refused with one header-only SLVERR, as a
      bridge refuses a request: both slots end, ``ERROR`` in every flag (not a wait for the
      second slot's scales, which would end with ``TIMEOUT``); the next collective is
      bit-exact."""
    # A READ_WAVE's piece (the model marks them with `train`) in the scale buffer.
    scale_train = lambda h: "train" in h and SSRC <= h["addr"] < SDST
    steps = [
        dict(want="timeout", dtype="fp16", elements=2 * 2048, flag_mode="ACKED",
             faults=lambda eps: (eps[1].on_write(at(DST), status=Status.SLVERR),
                                 eps[1].on_read(at(SRC + SLOT), hold=True))),
        dict(want="ok", dtype="fp16", elements=2 * 2048, flag_mode="ACKED",
             faults=_late(1, SRC + SLOT, "read")),
        dict(want="error", dtype="int8", elements=8 * 4096, flag_mode="ACKED",
             faults=lambda eps: eps[2].on_read(scale_train, status=Status.SLVERR,
                                               payload=False)),
        dict(want="ok", dtype="int8", elements=8 * 4096, flag_mode="ORDERED"),
    ]
    eps = await run_steps(dut, steps)
    failed = [w for w in eps[1].writes_seen if w["addr"] == DST]
    assert failed and failed[0]["opcode"] == Opcode.WRITE_POSTED.value, failed[:1]
    refused = [r for r in eps[2].reads_seen if scale_train(r)]
    assert refused and refused[0]["length"] == 2 * 128, refused[:1]    # a train of 2 slots
    c = counters(dut)
    assert c["collectives"] == len(steps) and c["timeouts"] == 1, c
    assert c["unknown_tags"] == 1, c       # the held read, released late


#: The ISA scenarios, and the simulators each runs on (the module docstring says why).
ISA_TESTS = ["axi_error_flags", "watchdog", "duplicates_and_unknown_tags", "small_faults",
             "train_faults"]


@pytest.mark.parametrize("sim, testcase", sim_params(ISA_TESTS, {"small_faults"}))
def test_isa_faults(sim, testcase):
    """One ISA build shared by every test here and in tb/block/test_isa.py; random pauses on every
    stream on Verilator, none on Icarus."""
    params = isa_params({})
    run_isa(__file__, sim, params, config={"pauses": sim == "verilator"}, testcase=testcase)


# --- System level --------------------------------------------------------------------------------

SYS_MEM, SMALL_MEM, SMALL_EP = 64 << 10, 32 << 10, 3
#: Byte addresses (symmetric): flags at the bottom; good buffers; a buffer that straddles the end
#: of the small memory (its first slot fits, its second lies past the end).
S_FLAG, S_SRC, S_DST, S_EDGE = 0x0000, 0x1000, 0x3000, SMALL_MEM - SLOT
S_ELEMENTS = 4096   # 8 KiB of fp16: two slots
#: The short form (Icarus): 128-byte messages (one slot), and an edge buffer wholly past the end
#: of the small memory (but inside the others'), as buffers must be page-aligned.
S_SHORT_ELEMENTS, S_SHORT_EDGE = 64, SMALL_MEM


def system_params():
    from scin.hdl.system import SystemParams
    sizes = tuple(SMALL_MEM if i == SMALL_EP else SYS_MEM for i in range(4))
    return SystemParams(isa=IsaParams(fabric=FabricParams(ports=4), capacity=16384, waves=2),
                        mem_size=SYS_MEM, mem_sizes=sizes)


@cocotb.test()
async def system_decerr_flags(dut):
    """Through switch, links, AXI bridges and memories: a read (input buffer) or a write (result
    buffer) that runs off the end of endpoint 3's smaller memory is answered DECERR by its
    AxiMemory; every participant's flag carries ERROR, in ACKED and ORDERED mode, and the good
    All-Reduce that follows each is bit-exact at every endpoint. Full form (Verilator): both
    modes, two-slot messages whose second slot runs off the end, random pauses on the backdoor
    and event streams. Short form (Icarus, config ``short``): ORDERED only, one-slot messages
    wholly past the end, no random pauses."""
    from scin.hdl.endpoint.accelerator import AccOp, command_layout
    sp = system_params()
    f = sp.fabric
    n = f.ports
    fb = f.flit_bytes
    rng = tb_rng(dut)
    for i in range(n):
        getattr(dut, f"load__{i}__valid").value = 0
    short = tb_config().get("short", False)
    elements, edge = (S_SHORT_ELEMENTS, S_SHORT_EDGE) if short else (S_ELEMENTS, S_EDGE)
    pauses = None if short else (lambda: random_pauses(rng, 0.2))
    doors = [MemoryBackdoor(dut, f"__{i}", data_bytes=fb, pauses=pauses) for i in range(n)]
    cmds = [StreamSource(dut, f"cmd__{i}") for i in range(n)]
    for i in range(n):              # drained (and their stream contract checked), not compared
        StreamSink(dut, f"events__{i}", None if short else random_pauses(rng, 0.2))
    isa_load = StreamSource(dut, "isa_load")
    await start(dut)

    steps = []
    for mode in ("ORDERED",) if short else ("ACKED", "ORDERED"):
        steps += [("error", mode, edge, S_DST), ("ok", mode, S_SRC, S_DST),
                  ("error", mode, S_SRC, edge), ("ok", mode, S_SRC, S_DST)]
    descs = [dict(op=Op.ALLREDUCE, dtype=DType.FP16, flag_mode=FlagMode[mode], sync=k,
                  participants=(1 << n) - 1, elements=elements, src_addr=src, dst_addr=dst,
                  flag_addr=S_FLAG + 64 * k)
                 for k, (_, mode, src, dst) in enumerate(steps)]
    load_program(isa_load, sp.isa, descs)
    await isa_load.wait_idle()
    cl = command_layout(f)

    for k, (want, mode, src, dst) in enumerate(steps):
        data, _ = make_inputs(rng, "fp16", n, elements)
        for i in range(n):
            await doors[i].write(src, data[i].tobytes()[:max(0, sp.endpoint_mem_size(i) - src)])
        for i in range(n):
            cmds[i].send(pack(cl, op=AccOp.ARRIVE, addr=k, length=1, tag=k))
        for cycle in range(0, 200_000, 16):
            if counters(dut)["collectives"] == k + 1:
                break
            await ClockCycles(dut.clk, 16)
        else:
            raise AssertionError(f"step {k} did not complete; counters {counters(dut)}")
        flags = [int.from_bytes(await doors[i].read(S_FLAG + 64 * k, 4), "little")
                 for i in range(n)]
        fields = [unpack(flag_layout(), fl) for fl in flags]
        assert all(f["generation"] == 1 for f in fields), f"step {k}: flags {list(map(hex, flags))}"
        status = [f["status"] for f in fields]
        if want == "ok":
            golden = numerics.allreduce("fp16", data)
            for i in range(n):
                got = await doors[i].read(dst, len(golden.out_bytes))
                assert got == golden.out_bytes, f"step {k}: endpoint {i}'s result differs"
            assert flags == [flag_word(1, golden.status & DATA_FLAGS)] * n, \
                f"step {k}: flags {list(map(hex, flags))}"
        else:
            assert all(s & ~DATA_FLAGS == ERROR for s in status), f"step {k}: statuses {status}"
        dut._log.info("step %d (%s %s): flags %s after %d cycles", k, want, mode,
                      list(map(hex, flags)), cycle)
    c = counters(dut)
    assert c["timeouts"] == 0 and c["unknown_tags"] == 0 and c["unknown_wresps"] == 0, c
    # The errors were the memory's DECERR carried by the bridge, not requests it refused.
    assert all(read_int(getattr(dut, f"rejected__{i}")) == 0 for i in range(n))
    assert all(read_int(getattr(dut, f"errors__{i}")) == 0 for i in range(n))


def test_system_faults(sim):
    """The full form on Verilator; the short form on Icarus, where the ORDERED half of the full
    form alone took over 9 minutes on the 2-core CI machine."""
    from scin.hdl.system import System
    sp = system_params()
    run_block(__file__, sim, "system", lambda: System(sp), repr(sp),
              config={"short": sim == "icarus"}, testcase="system_decerr_flags")


def test_system_memory_sizes_are_checked():
    from scin.hdl.system import SystemParams
    sp = system_params()
    assert [sp.endpoint_mem_size(i) for i in range(4)] == [SYS_MEM, SYS_MEM, SYS_MEM, SMALL_MEM]
    assert SystemParams(mem_size=8192).endpoint_mem_size(2) == 8192
    with pytest.raises(ValueError, match=r"mem_sizes must be empty or a tuple of 4 sizes"):
        SystemParams(mem_sizes=(4096, 4096, 4096))
    with pytest.raises(ValueError, match=r"^mem_sizes\[3\] must be a power of two, not 5000$"):
        SystemParams(mem_sizes=(4096, 4096, 4096, 5000))
