"""NCCL's ring All-Reduce on the RTL fabric (sim/ring_allreduce.py) and the accelerator op it
runs on, REDUCE_SEND (hdl/endpoint/kernel.py, ``ReduceSend``).

* The op alone, on the ``Endpoint`` of tb/block/test_nvls_kernel.py (same build), against its switch
  model: WRITEs acknowledged after random delays in random order, backpressure on the WRITE
  stream and the events (or none, to measure the streaming rate). Every WRITE's header and
  payload (the FP16/BF16 sum of the two local sources, computed from the memory contents with
  :func:`~scin.sim.ring_allreduce.add16`), the local copies, KERNEL_DONE and the fence.
  Randomness is seeded and logged (``SCIN_SEED`` replays).
* Its push mode (``push``: the push protocol's operand upload into the switch's ISA), on the same
  build, the model answering no inc=1 WRITE (as the ISA): every WRITE with inc=1, its address,
  length and payload; KERNEL_DONE without acknowledgements, at the last flit's cycle; a stray
  WRITE_RESP ignored; ``local`` ignored; the same streaming rate as without push; an ordinary op
  after it still fenced.
* The golden model: :func:`add16` is the two-member FP32 reduction rounded once (the double
  rounding argument of the op), and the ring's order of adds matters for the test inputs.
* The All-Reduce on the 4-endpoint system: every rank's buffer bit for bit the golden model's
  (ring order), which the wrongly ordered models are checked to differ from.
"""

import numpy as np
import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from scin.hdl.endpoint.accelerator import AccOp, EventKind
from scin.hdl.isa.dtype import DType
from scin.hdl.packet import MsgClass, Opcode, Status
from scin.sim.nvls import nvls_reduce
from scin.sim.nvls_run import NvlsSystem
from scin.sim.ring_allreduce import (RingAllReduce, add16, program, ring_golden, ring_inputs,
                                     run_ring_allreduce)
from scin.tb.simulators import sim_params
from scin.tb.nvls_setup import (FB, KBIT, LATENCY, MC, MEM_SIZE, PARAMS, PORT, SW, nflits,
                                packet, setup)
from scin.tb.cocotb_run import run_block


# --- the op on the Endpoint ------------------------------------------------------------------

def _values(rng, n, dtype):
    """``n`` random 16-bit patterns of mixed magnitudes, with a few signed zeros, subnormals and
    (FP16) values near the top of the range, so rounding, carries and overflow all happen."""
    x = np.array([rng.gauss(0, 1) * 2.0 ** rng.randint(-20, 15) for _ in range(n)])
    if dtype == "fp16":
        bits = np.clip(x, -65504, 65504).astype(np.float16).view(np.uint16)
    else:
        u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    for k in range(0, n, 37):
        bits[k] = rng.choice([0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0xFBFF])
    return bits


@cocotb.test()
async def reduce_send(dut):
    """REDUCE_SEND ops, one after another: FP16 and BF16 sums, copies (bit-exact, NaN payloads
    included), the local copy, a short single packet, ``count`` = 0 and an error acknowledgement;
    a RED queued behind each op must leave only after its KERNEL_DONE."""
    cfg, rng, bench = await setup(dut, "reduce_send")
    sw = bench.switch
    # (reduce, local, dtype, length, count, write fault on packet k)
    cases = [(1, 0, "fp16", FB * 4, rng.randint(3, 6), None),
             (1, 1, "bf16", FB * 2, rng.randint(2, 4), None),
             (0, 0, "fp16", rng.choice([FB * 8, 4096]), rng.randint(2, 5), None),
             (0, 1, "bf16", 70, 1, None),
             (1, 1, "fp16", 2 * FB + 6, 1, None),
             (1, 0, "fp16", FB * 3, 0, None),
             (1, 0, "bf16", FB, 5, 2)]
    for k, (reduce, local, dtype, length, count, fault) in enumerate(cases):
        # Sources apart (at most 20 KiB each), below 0xF000 (the RED's word) and 0x3F00 (the
        # flag word, used at the end only).
        a, b = 0x1000 if k != 1 else 0x6000, 0x8000
        dest = rng.randrange(0, 1 << 20, FB)
        dst = rng.choice([0, 1, 3])
        span = count * nflits(length) * FB
        sa = _values(rng, span // 2, dtype)
        sb = _values(rng, span // 2, dtype)
        if not reduce and span:
            sa[::5] = 0x7D55 if dtype == "fp16" else 0x7F85   # signalling NaNs: copied as they are
        if span:
            await bench.backdoor.write(a, sa.tobytes())
            await bench.backdoor.write(b, sb.tobytes())
        sw.write_faults = {dest + fault * length: Status.SLVERR} if fault is not None else {}
        tag = 0x60 + k
        dut._log.info("case %d: reduce %d local %d %s, %d x %d B, %#x + %#x -> port %d at %#x",
                      k, reduce, local, dtype, count, length, a, b, dst, dest)
        mark = bench.mark()
        bench.send(AccOp.REDUCE_SEND, tag=tag, addr=a, addr2=b, dest=dest, dst=dst,
                   length=length, count=count, reduce=reduce, local=local,
                   dtype=DType.BF16 if dtype == "bf16" else DType.FP16)
        bench.send(AccOp.RED, dst=SW, tag=0x13, length=1, addr=MC | 0xF000)
        events = await bench.events_until(EventKind.KERNEL_DONE, tag)
        events += await bench.events_until(EventKind.WRITE_DONE, 0x13)
        want = add16(sa, sb, dtype) if reduce else sa
        _check_op(bench, mark, events, tag=tag, a=a, dest=dest, dst=dst, length=length,
                  count=count, local=local, want=want.tobytes(),
                  status=Status.SLVERR if fault is not None else Status.OK)
    if cfg.get("pauses") == "none":
        _check_rates(bench)
    # The poll port is the flag poll's again: WAIT_FLAG still sees its word.
    await bench.backdoor.write(0x3F00, (0x1234_0005).to_bytes(4, "little") + bytes(FB - 4))
    bench.send(AccOp.WAIT_FLAG, tag=0x31, addr=0x3F00, generation=5)
    (flag,) = [e for e in await bench.events_until(EventKind.FLAG, 0x31)
               if e["kind"] == EventKind.FLAG]
    assert flag["value"] == 0x1234_0005, flag
    await ClockCycles(dut.clk, 50)
    assert bench.seen == len(bench.events.items) and not bench.got


@cocotb.test()
async def reduce_send_without_adder(dut):
    """An Endpoint built without the ring's adder: a sum is refused loudly (sent as a copy of the
    first source, reported SLVERR), a copy is unchanged (OK)."""
    cfg, rng, bench = await setup(dut, "reduce_send_without_adder")
    for k, reduce in enumerate((1, 0)):
        a, b, dest, length, count = 0x1000, 0x8000, 0x4000 * (k + 1), FB * 2, 3
        sa = _values(rng, count * nflits(length) * FB // 2, "fp16")
        await bench.backdoor.write(a, sa.tobytes())
        await bench.backdoor.write(b, _values(rng, len(sa), "fp16").tobytes())
        bench.switch.write_faults = {}
        tag = 0x70 + k
        mark = bench.mark()
        bench.send(AccOp.REDUCE_SEND, tag=tag, addr=a, addr2=b, dest=dest, dst=0, length=length,
                   count=count, reduce=reduce, local=0, dtype=DType.FP16)
        bench.send(AccOp.RED, dst=SW, tag=0x13, length=1, addr=MC | 0xF000)
        events = await bench.events_until(EventKind.KERNEL_DONE, tag)
        events += await bench.events_until(EventKind.WRITE_DONE, 0x13)
        _check_op(bench, mark, events, tag=tag, a=a, dest=dest, dst=0, length=length,
                  count=count, local=0, want=sa.tobytes(),
                  status=Status.SLVERR if reduce else Status.OK)


def _check_op(bench, mark, events, *, tag, a, dest, dst, length, count, local, want, status):
    """Every WRITE of one op (headers, payloads, order), its SENT and KERNEL_DONE, the fence."""
    writes = [p for p in bench.mon["tx__1"].packets(mark["tx__1"]) if p["tag"] & KBIT]
    acks = [p for p in bench.mon["rx__3"].packets(mark["rx__3"]) if p["tag"] & KBIT]
    per = 2 if local else 1
    assert len(writes) == per * count, (len(writes), count, local)
    n = nflits(length)
    for i in range(count):
        body = want[i * n * FB:i * n * FB + length] + bytes(n * FB - length)
        for j, (port, addr) in enumerate([(dst, dest + i * length), (PORT, a + i * length)][:per]):
            w = writes[per * i + j]
            assert (w["opcode"], w["msg_class"], w["inc"], w["status"], w["src"], w["dst"],
                    w["length"], w["addr"], w["tag"], w["flits"]) == \
                (Opcode.WRITE.value, MsgClass.WRITE.value, 0, 0, PORT, port, length, addr, KBIT,
                 1 + n), (i, j, w)
            assert w["body"] == body, f"packet {i} ({'local' if j else 'remote'}): payload differs"
    by = lambda kind, t: [e for e in events if e["kind"] == kind and e["tag"] == t]
    (done,) = by(EventKind.KERNEL_DONE, tag)
    assert (done["value"], done["status"], done["length"]) == (per * count, status.value, length)
    assert not by(EventKind.WRITE_DONE, tag) and len(acks) == per * count
    sent = by(EventKind.SENT, tag)
    if count:
        assert [s["cycle"] for s in sent] == [writes[0]["first"]], (sent, writes[0])
        assert done["cycle"] == max(p["first"] for p in acks), done
    else:
        assert not sent, sent
    (red_sent,) = by(EventKind.SENT, 0x13)
    assert red_sent["cycle"] > done["cycle"], "a command left before KERNEL_DONE"


def _check_rates(bench):
    """Without backpressure, once its pipeline is full, a copy streams a flit per cycle and a sum
    one per two cycles (two reads per flit on the one local read port): cycles per flit from
    header to last flit, of each packet of case 2 (copy, 8 or 128 flits) and case 0 (sum, 4)."""
    rates = {}
    for p in bench.mon["tx__1"].packets():
        if p["tag"] & KBIT:
            rates.setdefault(p["length"], []).append((p["last"] - p["first"]) / (p["flits"] - 1))
    bench.dut._log.info("cycles per flit by packet length: %s", rates)
    copy = rates.get(FB * 8, []) + rates.get(4096, [])
    assert copy and min(copy) == 1, rates
    assert min(rates[FB * 4]) <= 2, rates


@pytest.mark.parametrize("pauses", ["random", "none"])
def test_reduce_send_op(sim, pauses):
    """The op on the Endpoint, with random backpressure and idle cycles, and with none."""
    from scin.hdl.endpoint.endpoint import Endpoint
    make = lambda: Endpoint(PARAMS, port=PORT, mem_size=MEM_SIZE, latency=LATENCY, reorder=False)
    run_block(__file__, sim, "endpoint", make, f"{PORT},{MEM_SIZE},{LATENCY},False",
              testcase=["reduce_send"], config={"pauses": pauses})


def test_reduce_send_without_adder(sim):
    """The op on an Endpoint built without the adder (``adder=False``, what a system that never
    runs the ring has: :class:`~scin.hdl.system.SystemParams` ``ring_adder``)."""
    from scin.hdl.endpoint.endpoint import Endpoint
    make = lambda: Endpoint(PARAMS, port=PORT, mem_size=MEM_SIZE, latency=LATENCY, reorder=False,
                            adder=False)
    run_block(__file__, sim, "endpoint", make, f"{PORT},{MEM_SIZE},{LATENCY},False,no-adder",
              testcase=["reduce_send_without_adder"], config={"pauses": "random"})


# --- the push mode of the op --------------------------------------------------------------------

#: name: (pauses, cases). A case: (push, reduce, local, dtype, length, count, stray); ``stray``:
#: a kernel WRITE_RESP with SLVERR injected while the push runs (it must change nothing).
PUSH = {
    "random": ("random", [(1, 0, 0, "fp16", 4096, 3, False), (1, 0, 0, "fp16", 70, 1, False),
                          (1, 1, 1, "bf16", FB * 2, 3, False), (1, 0, 0, "fp16", FB, 0, False),
                          (1, 0, 0, "fp16", 4096, 2, True), (0, 0, 0, "fp16", FB * 4, 2, False)]),
    # No backpressure: the push streams exactly as the same op without push (its last case).
    "none": ("none", [(1, 0, 0, "fp16", 4096, 3, False), (1, 0, 0, "fp16", 70, 1, False),
                      (0, 0, 0, "fp16", 4096, 3, False)]),
    "short": ("random", [(1, 0, 0, "fp16", FB * 4, 2, False), (1, 0, 0, "fp16", 70, 1, False),
                         (0, 0, 0, "fp16", FB * 2, 1, False)]),
}


def _posted(sw):
    """Make the switch model treat inc=1 WRITEs as the ISA does push WRITEs: taken, never
    answered (posted); ``sw.pushed`` keeps their headers. Other WRITEs are acknowledged as
    before."""
    sw.pushed = []
    seen = sw._new_packets

    def new_packets(key, sink):
        out = seen(key, sink)
        if key != "wr":
            return out
        sw.pushed += [h for h in out if h["inc"]]
        return [h for h in out if not h["inc"]]
    sw._new_packets = new_packets


@cocotb.test()
async def reduce_send_push(dut):
    """Push REDUCE_SENDs (copies of 4 KiB packets and a short one, a BF16 sum with ``local``
    ignored, ``count`` = 0, one with a stray error WRITE_RESP during it), then an ordinary one:
    every push WRITE has inc=1, its address, length and payload; KERNEL_DONE comes with no
    WRITE_RESP (the model never answers inc=1 WRITEs), value = count, status OK, stamped with the
    last flit's cycle; the command behind it leaves after it; the ordinary op still waits for its
    acknowledgements. Without backpressure a push streams cycle for cycle as the same op without
    push."""
    cfg, rng, bench = await setup(dut, "reduce_send_push")
    sw = bench.switch
    _posted(sw)
    timing = {}
    for k, (push, reduce, local, dtype, length, count, stray) in enumerate(PUSH[cfg["case"]][1]):
        a, b = 0x1000, 0x8000
        dest = rng.randrange(0, 1 << 20, FB)
        dst = rng.choice([0, 1, 3, SW])
        span = count * nflits(length) * FB
        sa = _values(rng, span // 2, dtype)
        sb = _values(rng, span // 2, dtype)
        if span:
            await bench.backdoor.write(a, sa.tobytes())
            await bench.backdoor.write(b, sb.tobytes())
        tag = 0x70 + k
        dut._log.info("case %d: push %d reduce %d local %d %s, %d x %d B -> port %d at %#x",
                      k, push, reduce, local, dtype, count, length, dst, dest)
        mark, pushed = bench.mark(), len(sw.pushed)
        bench.send(AccOp.REDUCE_SEND, tag=tag, addr=a, addr2=b, dest=dest, dst=dst,
                   length=length, count=count, reduce=reduce, local=local, push=push,
                   dtype=DType.BF16 if dtype == "bf16" else DType.FP16)
        bench.send(AccOp.RED, dst=SW, tag=0x13, length=1, addr=MC | 0xF000)
        if stray:   # once the push runs (its first WRITE has left): a WRITE_RESP nobody asked for
            while len(bench.mon["tx__1"].log) == mark["tx__1"]:
                await RisingEdge(dut.clk)
            sw.wresp.send(*packet(Opcode.WRITE_RESP, tag=KBIT, src=SW, dst=PORT,
                                  status=Status.SLVERR))
        # A push waiting for acknowledgements would never end: no long timeout.
        events = await bench.events_until(EventKind.KERNEL_DONE, tag, timeout=20_000)
        events += await bench.events_until(EventKind.WRITE_DONE, 0x13, timeout=20_000)
        want = (add16(sa, sb, dtype) if reduce else sa).tobytes()
        if not push:
            _check_op(bench, mark, events, tag=tag, a=a, dest=dest, dst=dst, length=length,
                      count=count, local=local, want=want, status=Status.OK)
        else:
            _check_push(bench, mark, events, tag=tag, dest=dest, dst=dst, length=length,
                        count=count, want=want, stray=stray)
            assert len(sw.pushed) == pushed + count, "the model did not see every push WRITE"
        writes = [p for p in bench.mon["tx__1"].packets(mark["tx__1"]) if p["tag"] & KBIT]
        if writes:
            t0 = writes[0]["first"]
            timing.setdefault((length, count), []).append(
                [(w["first"] - t0, w["last"] - t0) for w in writes])
    if cfg["case"] == "none":
        bench.dut._log.info("packet cycles from the first header: %s", timing)
        push_t, plain_t = timing[(4096, 3)]
        assert push_t == plain_t, "a push does not stream as the same op without push"
        assert all(w[1] - w[0] == nflits(4096) for w in push_t[1:]), push_t   # one flit a cycle
        assert all(n[0] == w[1] + 1 for w, n in zip(push_t, push_t[1:])), push_t   # no gap
    await ClockCycles(dut.clk, 50)
    assert bench.seen == len(bench.events.items) and not bench.got


def _check_push(bench, mark, events, *, tag, dest, dst, length, count, want, stray):
    """Every WRITE of one push op (inc=1, headers, payloads, order, no local copy), its SENT and
    KERNEL_DONE (no acknowledgement; the cycle of the last flit), the next command after it."""
    writes = [p for p in bench.mon["tx__1"].packets(mark["tx__1"]) if p["tag"] & KBIT]
    acks = [p for p in bench.mon["rx__3"].packets(mark["rx__3"]) if p["tag"] & KBIT]
    assert len(writes) == count, (len(writes), count)
    n = nflits(length)
    for i, w in enumerate(writes):
        body = want[i * n * FB:i * n * FB + length] + bytes(n * FB - length)
        assert (w["opcode"], w["msg_class"], w["inc"], w["status"], w["src"], w["dst"],
                w["length"], w["addr"], w["tag"], w["flits"]) == \
            (Opcode.WRITE.value, MsgClass.WRITE.value, 1, 0, PORT, dst, length, dest + i * length,
             KBIT, 1 + n), (i, w)
        assert w["body"] == body, f"push packet {i}: payload differs from the local memory"
    by = lambda kind, t: [e for e in events if e["kind"] == kind and e["tag"] == t]
    (done,) = by(EventKind.KERNEL_DONE, tag)
    assert (done["value"], done["status"], done["length"], done["inc"], done["src"]) == \
        (count, Status.OK.value, length, 1, PORT), done
    assert not by(EventKind.WRITE_DONE, tag)
    if stray:   # the stray response came while the push ran, and changed nothing
        (s,) = acks
        assert s["status"] == Status.SLVERR.value and s["first"] < done["cycle"], (s, done)
    else:
        assert not acks, f"WRITE_RESPs to a push: {acks}"
    sent = by(EventKind.SENT, tag)
    if count:
        assert [(s["cycle"], s["inc"]) for s in sent] == [(writes[0]["first"], 1)], sent
        assert done["cycle"] == writes[-1]["last"], (done, writes[-1])
    else:
        assert not sent, sent
    (red_sent,) = by(EventKind.SENT, 0x13)
    assert red_sent["cycle"] > done["cycle"], "a command left before KERNEL_DONE"


@pytest.mark.parametrize("sim, case", sim_params(PUSH, {"short"}))
def test_reduce_send_push(sim, case):
    """The push mode on the Endpoint (the build of test_reduce_send_op): random backpressure,
    none (timing against the op without push), and a short case, also on Icarus."""
    from scin.hdl.endpoint.endpoint import Endpoint
    make = lambda: Endpoint(PARAMS, port=PORT, mem_size=MEM_SIZE, latency=LATENCY, reorder=False)
    run_block(__file__, sim, "endpoint", make, f"{PORT},{MEM_SIZE},{LATENCY},False",
              testcase=["reduce_send_push"], config={"pauses": PUSH[case][0], "case": case})


# --- the golden model ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_add16_is_the_fp32_add_rounded_once(dtype):
    """The software statement of the hardware's adder: for random and special operands, the
    correctly rounded 16-bit sum equals FP32 accumulation of the two, rounded once
    (:func:`~scin.sim.nvls.nvls_reduce`, the model of the NvlsReducer), NaNs canonical."""
    rng = np.random.default_rng(7)
    a = rng.integers(0, 1 << 16, 200_000, dtype=np.uint16)
    b = rng.integers(0, 1 << 16, 200_000, dtype=np.uint16)
    b[::3] = (a[::3] ^ rng.integers(0, 64, a[::3].size, dtype=np.uint16))   # close: cancellation
    special = np.array([0, 0x8000, 1, 0x8001, 0x03FF, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00,
                        0x7F7F, 0xFF7F, 0x7F80, 0x0080, 0x007F], np.uint16)
    a = np.concatenate([a, np.repeat(special, special.size)])
    b = np.concatenate([b, np.tile(special, special.size)])
    assert np.array_equal(add16(a, b, dtype), nvls_reduce([a, b], [0, 1], dtype))


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_ring_order_is_what_the_golden_checks(dtype):
    """For the inputs the system tests use, the ring order's result differs from the owner-first
    and the fixed rank order, so a wrongly ordered reduction cannot pass."""
    for size in (64, 4096, ODD):
        x = ring_inputs(5, 4, size, dtype)
        good = ring_golden(x, dtype, 4, FB, size)
        for wrong in _wrong_orders(4):
            assert not np.array_equal(good, ring_golden(x, dtype, 4, FB, size, order=wrong)), size


def _wrong_orders(n):
    return [lambda c: [(c + k) % n for k in range(n)],        # the chunk's owner first
            lambda c: list(range(n))]                          # rank 0 first, whatever the chunk


def test_program_signals_balance():
    """Every RED a rank sends on a flag word is waited for by its receiver, in order; every slot
    return a sender waits for is sent; a memory too small is refused."""
    from scin.hdl.endpoint.accelerator import AccOp as Op
    for size, slots in ((64, 4), (4096, 4), (ODD, 3), (65536, 4), (4096, 8)):
        cfg = RingAllReduce(size, slots=slots)
        cmds, expect = program(cfg, HW_LARGE, FB, PARAMS.max_payload)
        tail, head = cfg.flag_addr(), cfg.flag_addr() + 64
        for r in range(4):
            nxt = cmds[(r + 1) % 4]
            reds = [c for c in cmds[r] if c["op"] == Op.RED and c["addr"] == tail]
            waits = [c["generation"] for c in nxt if c["op"] == Op.WAIT_FLAG and c["addr"] == tail]
            assert waits == list(range(1, len(reds) + 1)) and len(reds) == 6 * cfg.slices
            returns = [c for c in nxt if c["op"] == Op.RED and c["addr"] == head]
            credit = [c["generation"] for c in cmds[r]
                      if c["op"] == Op.WAIT_FLAG and c["addr"] == head]
            assert credit == list(range(1, len(credit) + 1)) and len(credit) <= len(returns)
            assert bool(credit) == (slots < 3 * cfg.slices), (size, slots, credit)
            assert expect[r] == len(cmds[r])
    with pytest.raises(ValueError, match="staging slots"):
        program(RingAllReduce(60 * 1024), HW, FB, PARAMS.max_payload)      # no room
    with pytest.raises(ValueError, match="staging slots"):
        program(RingAllReduce(4096, slots=2), HW, FB, PARAMS.max_payload)  # would deadlock


# --- the All-Reduce on the system ------------------------------------------------------------

#: tb/system/test_nvls.py's system (one build for both files) and one with room for 64 KiB.
HW = NvlsSystem(endpoints=4, mem_size=1 << 16, entries=8, acks=8)
HW_LARGE = NvlsSystem(endpoints=4, mem_size=1 << 17, entries=8, acks=8)
#: A size that is not a whole number of flits, cut in unequal chunks.
ODD = 3 * 1024 + 34
#: name: (size, dtype, staging slots): NCCL's 4, the fewest (3), or enough never to wait (8).
RING = {"fp16_64B": (64, "fp16", 4), "bf16_64B": (64, "bf16", 8),
        "fp16_4KiB": (4096, "fp16", 4), "bf16_4KiB": (4096, "bf16", 8),
        "fp16_odd": (ODD, "fp16", 3), "bf16_odd": (ODD, "bf16", 3)}


@pytest.mark.parametrize("sim, case", sim_params(RING, {"fp16_64B"}))
def test_ring_allreduce(sim, case):
    """Every rank's buffer is the ring-order golden model's, bit for bit (and the inputs are
    such that the other orders give something else); no error status, no switch error."""
    size, dtype, slots = RING[case]
    rep = run_ring_allreduce(RingAllReduce(size, dtype, slots=slots), HW, sim=sim, seed=5,
                             log=lambda *_: None)
    assert rep["match"] and rep["status"] == 0, {k: rep[k] for k in (
        "mismatched_ranks", "status", "run_dir")}
    assert not any(rep["switch_errors"]), rep["switch_errors"]
    assert rep["cycles"] > 0 and rep["algorithm"] == "ring"
    # The match was against the ring order, which for these inputs no other order gives.
    x = ring_inputs(5, 4, size, dtype)
    good = ring_golden(x, dtype, 4, FB, size)
    for wrong in _wrong_orders(4):
        assert not np.array_equal(good, ring_golden(x, dtype, 4, FB, size, wrong))
