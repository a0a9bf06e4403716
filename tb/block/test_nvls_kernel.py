"""NVLS kernels of the accelerator (hdl/endpoint/kernel.py): LDRED_ST (All-Reduce of a shard),
LDRED_COPY (ReduceScatter) and RED + WAIT_FLAG (NCCL's NVLS barrier), against a Python model of
the switch's NVLS engine.

Top: the ``Endpoint`` in tb/block/test_endpoint.py's latency-40 configuration (same Verilog, so one
build serves both files). The model (:class:`NvlsSwitch`) takes the endpoint's REQ and WRITE
packets, answers multicast READs (ld_reduce) with deterministic data after random delays, in
random order, acknowledges WRITEs (st, copy) after random delays, and carries a RED to the
endpoint's own memory (it is a member of its multicast group) before acknowledging it. Every
stream has idle cycles or backpressure; randomness is seeded and logged (``SCIN_SEED`` replays).

What is checked, from handshake monitors stamped with the DUT's cycle counter: the READs (address
sequence, header fields, kernel tags); the number of unanswered READs never above ``window`` and
reaching it; every st/copy WRITE carrying exactly its READ_RESP's payload at the right address and
port; KERNEL_DONE's packets, worst status and cycle (that of the last WRITE_RESP); the SENT of the
first READ; no READ_DONE/WRITE_DONE for kernel packets while ordinary responses still make them;
the fence (the next command leaves only after KERNEL_DONE); errors and malformed responses.
"""

import pytest

import cocotb
from cocotb.triggers import ClockCycles

from scin.hdl.codec import unpack
from scin.hdl.packet import FabricParams, MsgClass, Opcode, Status
from scin.hdl.endpoint.accelerator import (AccOp, EventKind, command_tag_mask,
                                           pattern_bytes, xor_fold)
from scin.hdl.endpoint.kernel import KERNEL_SLOTS, kernel_slots, kernel_tag
from scin.tb.nvls_setup import (EVT, FB, KBIT, LATENCY, MC, MEM_SIZE, PARAMS, PORT, SW,
                                nflits, packet, setup)
from scin.tb.cocotb_run import run_block


def check_kernel(bench, mark, *, op, tag, addr, length, count, window, dest=0, dst=SW,
                 sent, done, expect_status=Status.OK):
    """Every check of one LDRED_ST/LDRED_COPY that ran between ``mark`` and now, against the
    switch model's answers. ``sent``/``done``: its SENT and KERNEL_DONE events."""
    sw = bench.switch
    reads = [p for p in bench.mon["tx__0"].packets(mark["tx__0"]) if p["tag"] & KBIT]
    resps = [p for p in bench.mon["rx__2"].packets(mark["rx__2"]) if p["tag"] & KBIT]
    writes = [p for p in bench.mon["tx__1"].packets(mark["tx__1"]) if p["tag"] & KBIT]
    acks = [p for p in bench.mon["rx__3"].packets(mark["rx__3"]) if p["tag"] & KBIT]

    # The READs: in order, one per packet, every header field as the protocol says.
    assert [r["addr"] for r in reads] == [addr + i * length for i in range(count)], reads
    for r in reads:
        assert (r["opcode"], r["msg_class"], r["inc"], r["status"], r["src"], r["dst"],
                r["length"], r["flits"]) == (Opcode.READ.value, MsgClass.REQ.value, 0, 0, PORT,
                                             SW, length, 1), r
        assert r["tag"] & ~KBIT < kernel_slots(PARAMS), r
    # The window: unanswered READs (header sent, READ_RESP header not yet taken) never above it;
    # a READ counts before a response of the same cycle, the stricter order.
    steps = sorted([(r["first"], 0, +1) for r in reads] + [(p["first"], 1, -1) for p in resps])
    level, peak = 0, 0
    for _, _, d in steps:
        level += d
        peak = max(peak, level)
    bound = min(window or KERNEL_SLOTS, KERNEL_SLOTS)
    assert peak <= bound, f"{peak} READs unanswered, window {window}"
    assert peak == min(bound, count), f"the window ({bound}) was never filled: peak {peak}"
    # Each READ_RESP answers the latest READ sent before it with its tag (slots are reused).
    answered = [max(i for i, r in enumerate(reads)
                    if r["tag"] == p["tag"] and r["first"] < p["first"]) for p in resps]
    assert sorted(answered) == list(range(count)), answered
    resp_of = {i: p for i, p in zip(answered, resps)}
    if bound > 1 and count > 4:
        assert answered != sorted(answered), "the model never reordered responses"

    # The WRITEs: one per usable READ_RESP, its payload exactly, at the right place.
    expected = {}
    for i, r in enumerate(reads):
        fault, padded = sw.answers[r["addr"]]
        if fault in ("slverr", "decerr", "badlen"):
            continue
        if fault == "short":
            body = padded + bytes(FB)
        elif fault == "long":
            body = padded[:-FB]
        else:
            body = padded
        where = r["addr"] if op == AccOp.LDRED_ST else dest + i * length
        expected[where] = (body, r["tag"], i)
    assert sorted(w["addr"] for w in writes) == sorted(expected), \
        f"written {[hex(w['addr']) for w in writes]}, expected {[hex(a) for a in expected]}"
    for w in writes:
        body, rtag, i = expected[w["addr"]]
        assert (w["opcode"], w["msg_class"], w["inc"], w["status"], w["src"], w["dst"],
                w["length"], w["tag"]) == (Opcode.WRITE.value, MsgClass.WRITE.value, 0, 0, PORT,
                                           SW if op == AccOp.LDRED_ST else dst, length, rtag), w
        assert w["flits"] == 1 + nflits(length), w
        assert w["body"] == body, f"WRITE at {w['addr']:#x}: payload differs from its READ_RESP"
        assert w["first"] > resp_of[i]["first"], "WRITE before its READ_RESP"

    # SENT: the cycle the first READ header left; KERNEL_DONE: after the last response.
    assert sent["kind"] == EventKind.SENT and sent["tag"] == tag and sent["inc"] == 0
    assert sent["cycle"] == reads[0]["first"], (sent, reads[0]["first"])
    assert done["kind"] == EventKind.KERNEL_DONE and done["tag"] == tag, done
    assert done["value"] == len(writes) == len(acks), (done, len(writes), len(acks))
    assert done["status"] == expect_status.value, done
    assert done["src"] == PORT and done["length"] == length
    last_response = max([a["first"] for a in acks] + [p["first"] for p in resps])
    assert done["cycle"] == last_response, (done["cycle"], last_response)
    ev_cycle = [c for c, e in bench.mon["events"].log
                if unpack(EVT, e)["kind"] == EventKind.KERNEL_DONE.value
                and unpack(EVT, e)["tag"] == tag][-1]
    assert ev_cycle > last_response


@cocotb.test()
async def nvls_all_reduce(dut):
    """LDRED_ST then LDRED_COPY with the configured window, ordinary remote requests around them
    (their responses arrive while the kernels run and are still reported), a command queued
    behind each kernel (it must wait for KERNEL_DONE)."""
    cfg, rng, bench = await setup(dut, "nvls_all_reduce")
    window = cfg["window"]
    for op in (AccOp.LDRED_ST, AccOp.LDRED_COPY):
        length = rng.choice([FB * 8, 100, FB, 1000, 4096 if window > 1 else 2 * FB + 5])
        count = rng.randint(12, 20)
        addr = MC | rng.randrange(0, 1 << 30, 4096)
        dest = rng.randrange(0, 1 << 20, 4096)
        tag = 0x40 + op.value
        dut._log.info("%s: %d x %d B from %#x, window %d", op.name, count, length, addr, window)
        mark = bench.mark()
        # Ordinary requests with command tags, answered (slowly) during the kernel.
        bench.send(AccOp.READ_REMOTE, dst=SW, tag=0x11, length=64, addr=MC | 0x7000)
        bench.send(AccOp.WRITE_REMOTE, dst=SW, tag=0x12, length=40, addr=MC | 0x7100, seed=0x77)
        bench.send(op, tag=tag, addr=addr, length=length, count=count, window=window,
                   dest=dest, dst=PORT)
        bench.send(AccOp.RED, dst=SW, tag=0x13, length=1, addr=MC | 0x3000)   # behind the fence
        events = await bench.events_until(EventKind.KERNEL_DONE, tag)
        more = await bench.events_until(EventKind.WRITE_DONE, 0x13)
        events += more
        by = lambda kind, t: [e for e in events if e["kind"] == kind and e["tag"] == t]
        (sent,), (done,) = by(EventKind.SENT, tag), by(EventKind.KERNEL_DONE, tag)
        check_kernel(bench, mark, op=op, tag=tag, addr=addr, length=length, count=count,
                     window=window, dest=dest, dst=PORT, sent=sent, done=done)
        # Kernel responses made no events; ordinary ones did.
        kinds = sorted((e["kind"].name, e["tag"]) for e in events)
        assert kinds == sorted([("SENT", 0x11), ("SENT", 0x12), ("SENT", tag), ("SENT", 0x13),
                                ("READ_DONE", 0x11), ("WRITE_DONE", 0x12),
                                ("KERNEL_DONE", tag), ("WRITE_DONE", 0x13)]), kinds
        (rd,) = by(EventKind.READ_DONE, 0x11)
        assert rd["value"] == xor_fold(bench.switch.reduced(MC | 0x7000, 64)), rd
        wdata = [w for w in bench.mon["tx__1"].packets(mark["tx__1"]) if w["tag"] == 0x12]
        assert wdata[0]["body"][:40] == pattern_bytes(0x77, 40)
        (red_sent,) = by(EventKind.SENT, 0x13)
        assert red_sent["cycle"] > done["cycle"], "a command left before KERNEL_DONE"
        (red,) = [p for p in bench.mon["tx__0"].packets(mark["tx__0"]) if p["tag"] == 0x13]
        assert (red["opcode"], red["inc"], red["dst"], red["src"], red["length"]) == \
            (Opcode.ATOMIC_ADD.value, 0, SW, PORT, 1), red


@cocotb.test()
async def nvls_errors(dut):
    """Error and malformed responses: each shows in KERNEL_DONE's status (the worst one), a failed
    READ writes nothing, a malformed one is written well framed; stray kernel responses are
    dropped without an event."""
    cfg, rng, bench = await setup(dut, "nvls_errors")
    sw = bench.switch
    # Stray kernel responses while no kernel runs: dropped, no event, the fabric not blocked.
    sw.rdata.send(*packet(Opcode.READ_RESP, bytes(100), tag=KBIT | 3, src=SW, dst=PORT,
                          length=100))
    sw.wresp.send(*packet(Opcode.WRITE_RESP, tag=KBIT | 1, src=SW, dst=PORT))
    await sw.rdata.wait_idle()
    await sw.wresp.wait_idle()
    length, count = 3 * FB, 10
    cases = [  # (read faults by packet, write faults by packet, worst status, window)
        ({3: "slverr"}, {}, Status.SLVERR, 4),
        ({}, {5: Status.DECERR}, Status.DECERR, 3),
        ({2: "short", 7: "long"}, {}, Status.SLVERR, 8),
        ({1: "badlen", 4: "decerr"}, {6: Status.SLVERR}, Status.DECERR, 2),
    ]
    for k, (rf, wf, worst, window) in enumerate(cases):
        addr = MC | (0x100000 * (k + 1))
        sw.read_faults = {addr + i * length: f for i, f in rf.items()}
        sw.write_faults = {addr + i * length: s for i, s in wf.items()}
        tag = 0x50 + k
        dut._log.info("case %d: read faults %s, write faults %s", k, rf, wf)
        mark = bench.mark()
        bench.send(AccOp.LDRED_ST, tag=tag, addr=addr, length=length, count=count, window=window)
        events = await bench.events_until(EventKind.KERNEL_DONE, tag)
        assert [e["kind"] for e in events] == [EventKind.SENT, EventKind.KERNEL_DONE], events
        check_kernel(bench, mark, op=AccOp.LDRED_ST, tag=tag, addr=addr, length=length,
                     count=count, window=window, sent=events[0], done=events[1],
                     expect_status=worst)
    await ClockCycles(dut.clk, 50)
    assert bench.seen == len(bench.events.items) and not bench.got


@cocotb.test()
async def nvls_barrier(dut):
    """NCCL's NVLS barrier on 4 ranks: this rank's RED(+1) on the multicast flag word, the other
    three ranks' reds at random times, WAIT_FLAG until the local copy reaches 4 (and 8 the second
    time round); FLAG only after the last add reached memory."""
    cfg, rng, bench = await setup(dut, "nvls_barrier")
    sw = bench.switch
    flag = 0x3F08
    await bench.backdoor.write(flag & ~(FB - 1), bytes(FB))
    for round_ in (1, 2):
        mark = bench.mark()
        tag = 0x20 + round_
        bench.send(AccOp.RED, dst=SW, tag=tag, length=1, addr=MC | flag)
        bench.send(AccOp.WAIT_FLAG, tag=0x30 + round_, addr=flag, generation=4 * round_)
        for _ in range(3):
            await ClockCycles(dut.clk, rng.randint(0, 300))
            sw.peer_red(MC | flag)
        events = await bench.events_until(EventKind.FLAG, 0x30 + round_)
        events += await bench.events_until(EventKind.WRITE_DONE, tag) \
            if not any(e["kind"] == EventKind.WRITE_DONE for e in events) else []
        (red,) = [p for p in bench.mon["tx__0"].packets(mark["tx__0"]) if p["tag"] == tag]
        assert (red["opcode"], red["msg_class"], red["inc"], red["src"], red["dst"],
                red["length"], red["addr"]) == (Opcode.ATOMIC_ADD.value, MsgClass.REQ.value, 0,
                                                PORT, SW, 1, MC | flag), red
        by = {e["kind"]: e for e in events}
        assert by[EventKind.SENT]["cycle"] == red["first"] and by[EventKind.SENT]["inc"] == 0
        wd = by[EventKind.WRITE_DONE]
        assert (wd["tag"], wd["status"], wd["src"], wd["inc"]) == (tag, 0, SW, 0), wd
        fl = by[EventKind.FLAG]
        assert fl["value"] == 4 * round_, fl
        adds = bench.mon["rx__0"].packets(mark["rx__0"])
        assert len(adds) == 4, adds
        assert fl["cycle"] > max(a["last"] for a in adds), "FLAG before the last red arrived"


@pytest.mark.parametrize("window", [1, 2, 8])
def test_nvls_kernel(sim, window):
    """LDRED_ST and LDRED_COPY with windows 1, 2 and 8 (one build for all, shared with
    tb/block/test_endpoint.py's latency-40 Endpoint)."""
    _run(sim, ["nvls_all_reduce"], window=window)


def test_nvls_errors_and_barrier(sim):
    _run(sim, ["nvls_errors", "nvls_barrier"])


def _run(sim, tests, **config):
    from scin.hdl.endpoint.endpoint import Endpoint
    make = lambda: Endpoint(PARAMS, port=PORT, mem_size=MEM_SIZE, latency=LATENCY, reorder=False)
    # The key tb/block/test_endpoint.py gives this configuration, so both files share one build.
    run_block(__file__, sim, "endpoint", make, f"{PORT},{MEM_SIZE},{LATENCY},False", testcase=tests,
              config=config)


def test_tags_and_layouts():
    """Command ops and events 0-3 keep their values; kernel tags use only the top tag bit and a
    slot; narrow tags shrink the kernel's slots; the command tag mask excludes the kernel bit."""
    assert [AccOp(v).name for v in range(4)] == ["ARRIVE", "WRITE_REMOTE", "READ_REMOTE",
                                                 "WAIT_FLAG"]
    assert [EventKind(v).name for v in range(4)] == ["SENT", "READ_DONE", "WRITE_DONE", "FLAG"]
    assert kernel_tag(PARAMS, 5) == 0x8005 and command_tag_mask(PARAMS) == 0x7FFF
    assert kernel_slots(PARAMS) == KERNEL_SLOTS
    assert kernel_slots(FabricParams(tag_width=3)) == 4
    narrowest = FabricParams(tag_width=1)
    assert kernel_slots(narrowest) == 1 and kernel_tag(narrowest) == 1
    assert PARAMS.switch_port == 15 and PARAMS.multicast_base == 1 << 47
