"""Endpoint testbenches: AxiMemory, AxiBridge (on AxiMemory and on cocotbext-axi's AxiRam), the
accelerator, and parameter validation.

Tops: ``AxiMemory`` (AXI streams driven from cocotb), ``Endpoint`` (packets in and out per class,
memory backdoor, accelerator commands and events), ``FlatAxiBridge`` (the bridge with AMBA-named
ports and cocotbext-axi's ``AxiRam`` as its memory). Every stream gets idle cycles and backpressure
except in the throughput tests; randomness is seeded and logged (``SCIN_SEED`` replays).
"""

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from scin.hdl.packet import MsgClass, Opcode, Status
from scin.hdl.endpoint.axi import AxiParams, Burst, Resp
from scin.hdl.endpoint.bridge import bridge_axi_params
from scin.hdl.endpoint.accelerator import (AccOp, EventKind, FLAG_LAYOUT, command_layout,
                                           event_layout, pattern_bytes, xor_fold)
from scin.hdl.codec import pack, unpack
from scin.sim.testbench.backdoor import MemoryBackdoor
from scin.sim.testbench.env import read_int, start, tb_config, tb_rng
from scin.sim.testbench.streams import StreamSink, StreamSource
from scin.tb.endpoint_setup import (FB, MEM_SIZE, PARAMS, PORT, BridgeTb, Cycles, Monitor,
                                    idle_inputs, packet, pauses, split)
from scin.tb.cocotb_run import run_block


MEMORY_AXI = AxiParams(data_width=256, addr_width=48, id_width=4, user_width=1)
MEMORY_TEST_SIZE = 1 << 14


# ================================================================================================
# AxiMemory
# ================================================================================================

class MemoryTb:
    def __init__(self, dut, cfg, rng, quiet=False):
        self.dut, self.cfg, self.rng = dut, cfg, rng
        pz = (lambda salt: None) if quiet else (lambda salt: pauses(dut, cfg, salt))
        self.ar = StreamSource(dut, "axi__ar", pz("ar"))
        self.aw = StreamSource(dut, "axi__aw", pz("aw"))
        self.w = StreamSource(dut, "axi__w", pz("w"))
        self.r = StreamSink(dut, "axi__r", pz("r"))
        self.b = StreamSink(dut, "axi__b", pz("b"))
        self.model = bytearray(MEMORY_TEST_SIZE)
        self.size = MEMORY_TEST_SIZE

    @staticmethod
    def beat_addrs(addr, length, size):
        out, a = [], addr
        for _ in range(length + 1):
            out.append(a)
            a = (a & ~((1 << size) - 1)) + (1 << size)
        return out

    def resp_for(self, addr, length, size):
        base = addr & ~((1 << size) - 1)   # AXI: the extent starts at the aligned address
        return Resp.DECERR if base + ((length + 1) << size) > self.size else Resp.OKAY

    def write(self, id, addr, length, size=5):
        p = MEMORY_AXI
        self.aw.send(pack(p.ax_layout, id=id, addr=addr, len=length, size=size, burst=Burst.INCR))
        resp = self.resp_for(addr, length, size)
        for k, a in enumerate(self.beat_addrs(addr, length, size)):
            data = self.rng.getrandbits(256)
            strb = self.rng.getrandbits(32) if self.rng.random() < 0.5 else (1 << 32) - 1
            self.w.send(pack(p.w_layout, data=data, strb=strb, last=k == length))
            if resp == Resp.OKAY:
                base = a & ~31
                for byte in range(32):
                    if strb >> byte & 1:
                        self.model[base + byte] = data >> (8 * byte) & 0xFF
        return (id, resp)

    def expect_read(self, addr, length, size):
        resp = self.resp_for(addr, length, size)
        beats = []
        for a in self.beat_addrs(addr, length, size):
            base = a & ~31
            data = int.from_bytes(self.model[base:base + 32], "little") if resp == Resp.OKAY else 0
            beats.append(data)
        return resp, beats


def random_burst(rng, size_bytes):
    size = rng.choice([5, 5, 5, 2, 3, 4])
    length = rng.choice([0, 0, 1, 3, 7, 15, rng.randrange(256)]) if size == 5 else rng.randrange(16)
    span = (length + 1) << size
    if rng.random() < 0.1:
        addr = rng.randrange(size_bytes - span // 2, size_bytes + 4096) & ~((1 << size) - 1)
    else:
        addr = rng.randrange(0, max(1, size_bytes - span)) & ~((1 << size) - 1)
    return addr, length, size


@cocotb.test()
async def memory_random(dut):
    """Random bursts against a byte-array model: data, strobes, DECERR, same-ID order, reorder."""
    cfg = tb_config()
    rng = tb_rng(dut, "memory_random")
    idle_inputs(dut)
    await start(dut)
    tb = MemoryTb(dut, cfg, rng)
    p = MEMORY_AXI
    for _ in range(3):
        # Writes, then reads of the state they left (the model is exact only between phases).
        expect_b = [tb.write(rng.randrange(4), *random_burst(rng, tb.size)) for _ in range(25)]
        target = len(tb.b.items) + len(expect_b)
        await tb.b.wait_for(target, 200_000)
        got_b = [unpack(p.b_layout, x) for x in tb.b.items[-len(expect_b):]]
        assert [(x["id"], Resp(x["resp"])) for x in got_b] == expect_b

        pending = {i: [] for i in range(16)}
        order = []
        nbeats = 0
        for seq in range(40):
            addr, length, size = random_burst(rng, tb.size)
            id = rng.randrange(4)
            resp, beats = tb.expect_read(addr, length, size)
            pending[id].append((seq, resp, beats))
            nbeats += len(beats)
            tb.ar.send(pack(p.ax_layout, id=id, addr=addr, len=length, size=size, burst=Burst.INCR))
        start_r = len(tb.r.items)
        await tb.r.wait_for(start_r + nbeats, 400_000)
        beats_in = [unpack(p.r_layout, x) for x in tb.r.items[start_r:]]
        i = 0
        while i < len(beats_in):
            id = beats_in[i]["id"]
            assert pending[id], f"R beat for ID {id} with no burst outstanding"
            seq, resp, beats = pending[id].pop(0)  # same-ID order: must be the oldest
            order.append(seq)
            for k, want in enumerate(beats):
                got = beats_in[i + k]
                assert got["id"] == id, f"burst {seq}: beats interleaved with ID {got['id']}"
                assert Resp(got["resp"]) == resp, f"burst {seq} beat {k}: resp {got['resp']}"
                assert got["data"] == want, f"burst {seq} beat {k}: data mismatch"
                assert got["last"] == (k == len(beats) - 1), f"burst {seq} beat {k}: last"
            i += len(beats)
        overtaken = sum(1 for a, b in zip(order, order[1:]) if b < a)
        dut._log.info("read bursts returned out of AR order: %d of %d", overtaken, len(order))
        if cfg["reorder"]:
            assert overtaken > 0, "reorder=True but every burst came back in AR order"
        else:
            assert order == sorted(order), "reorder=False but bursts came back out of order"


@cocotb.test()
async def memory_throughput(dut):
    """Read latency on an idle memory; R and W at one beat per cycle, concurrently."""
    cfg = tb_config()
    rng = tb_rng(dut, "memory_throughput")
    idle_inputs(dut)
    await start(dut)
    cycles = Cycles(dut)
    ar_mon = Monitor(dut, "axi__ar", cycles)
    r_mon = Monitor(dut, "axi__r", cycles)
    w_mon = Monitor(dut, "axi__w", cycles)
    tb = MemoryTb(dut, cfg, rng, quiet=True)
    p = MEMORY_AXI
    tb.ar.send(pack(p.ax_layout, id=1, addr=0x40, len=0, size=5, burst=Burst.INCR))
    await tb.r.wait_for(1)
    await ClockCycles(dut.clk, 2)
    latency = r_mon.log[0][0] - ar_mon.log[0][0]
    dut._log.info("read latency (AR handshake to first R beat): %d cycles", latency)
    if cfg["reorder"]:
        assert cfg["latency"] <= latency < cfg["latency"] + 32
    else:
        assert latency == cfg["latency"]

    r0, w0 = len(r_mon.log), len(w_mon.log)
    for k in range(8):
        tb.ar.send(pack(p.ax_layout, id=k % 4, addr=k * 1024, len=255, size=5, burst=Burst.INCR))
        tb.write(0, (k * 2048) % tb.size, 255)
    await tb.r.wait_for(1 + 8 * 256, 100_000)
    await tb.b.wait_for(8, 100_000)
    rc = [c for c, _ in r_mon.log[r0:]]
    wc = [c for c, _ in w_mon.log[w0:]]
    dut._log.info("R: %d beats in %d cycles; W: %d beats in %d cycles",
                  len(rc), rc[-1] - rc[0] + 1, len(wc), wc[-1] - wc[0] + 1)
    assert rc[-1] - rc[0] + 1 == len(rc) == 2048, "R did not sustain one beat per cycle"
    assert wc[-1] - wc[0] + 1 == len(wc) == 2048, "W did not sustain one beat per cycle"
    # Overlap: both ran at once.
    assert wc[0] < rc[-1] and rc[0] < wc[-1]


# storage="sim" (the behavioural SimRam the system's memories use) must behave exactly as the
# lib.memory storage: the same random test runs against both.
@pytest.mark.parametrize("latency,reorder,storage", [(3, False, "memory"), (40, True, "memory"),
                                                     (40, True, "sim")])
def test_axi_memory(sim, latency, reorder, storage):
    from scin.hdl.endpoint.memory import AxiMemory
    make = lambda: AxiMemory(MEMORY_AXI, size=MEMORY_TEST_SIZE, latency=latency, reorder=reorder,
                             outstanding=8, storage=storage, name="mem")
    run_block(__file__, sim, "axi_memory", make, f"{latency},{reorder},{storage}",
              testcase=["memory_random", "memory_throughput"],
              config={"latency": latency, "reorder": reorder})


# ================================================================================================
# Bridge (on AxiMemory inside Endpoint, or on cocotbext-axi's AxiRam)
# ================================================================================================

async def bridge_scenarios(dut, tb, backdoor_write, backdoor_read, rng, decerr=True):
    """The packet-level checks shared by AxiMemory and cocotbext-axi's AxiRam."""
    background = bytes(rng.getrandbits(8) for _ in range(0x3000))
    await backdoor_write(0, background)
    model = bytearray(background)

    cases = [  # (addr, length): 1 flit, odd, sub-flit flag words, 4 KB, flit-aligned odd tail
        (0x0200, 32), (0x0240, 37), (0x02C4, 4), (0x02D4, 8), (0x1000, 4096), (0x0300, 95),
        (0x0360 + 31, 1),
    ]
    tags = []
    for addr, length in cases:
        payload = bytes(rng.getrandbits(8) for _ in range(length))
        src, inc = rng.randrange(4), rng.randrange(2)
        tags.append((tb.write(addr, payload, src=src, inc=inc), length, src, inc))
        model[addr:addr + length] = payload
    for (tag, length, src, inc) in tags:
        (resp,) = await tb.wait(tag)
        tb.check(resp, opcode=Opcode.WRITE_RESP, length=length, src=src, inc=inc)
    # Read everything back through the bridge, and the bytes around it through the backdoor.
    rtags = []
    for addr, length in cases:
        src, inc = rng.randrange(4), rng.randrange(2)
        rtags.append((tb.read(addr, length, src=src, inc=inc), addr, length, src, inc))
    for tag, addr, length, src, inc in rtags:
        (resp,) = await tb.wait(tag)
        got = tb.check(resp, opcode=Opcode.READ_RESP, length=length, src=src, inc=inc)
        assert got == bytes(model[addr:addr + length]), f"READ {addr:#x}+{length} mismatch"
    assert await backdoor_read(0, 0x3000) == bytes(model), "memory differs from the model"

    # Refused accesses: a sub-flit access crossing a flit, zero length, 4 KB boundary crossing.
    bad = [(0x021C, 8), (0x0400, 0), (0x0F00 + 0x20, 4096)]
    for addr, length in bad:
        t = tb.read(addr, length, src=3)
        (resp,) = await tb.wait(t)
        tb.check(resp, opcode=Opcode.READ_RESP, status=Status.SLVERR, length=0, src=3)
        t = tb.write(addr, bytes(k & 0xFF for k in range(max(length, 1))), src=3, length=length)
        (resp,) = await tb.wait(t)
        tb.check(resp, opcode=Opcode.WRITE_RESP, status=Status.SLVERR, length=length, src=3)
    assert await backdoor_read(0, 0x3000) == bytes(model), "a refused WRITE touched memory"

    # ATOMIC_ADD: increments, inc echoed, misaligned refused; interleaved with writes elsewhere.
    word_addr = 0x0504
    model[word_addr:word_addr + 4] = (0xFFFFFFFE).to_bytes(4, "little")
    await backdoor_write(0x0500, bytes(model[0x0500:0x0520]))
    atags, wtags = [], []
    total = 0xFFFFFFFE
    for k in range(6):
        addend = rng.choice([1, 1, 5, 300])
        total = (total + addend) & 0xFFFFFFFF
        atags.append((tb.atomic(word_addr, addend, src=k % 4, inc=1), k % 4))
        payload = bytes(rng.getrandbits(8) for _ in range(64))
        wtags.append(tb.write(0x0800 + 64 * k, payload))
        model[0x0800 + 64 * k:0x0840 + 64 * k] = payload
    t_bad = tb.atomic(word_addr + 2, 1, src=2)
    for tag, src in atags:
        (resp,) = await tb.wait(tag)
        tb.check(resp, opcode=Opcode.WRITE_RESP, length=4, src=src, inc=1)
    (resp,) = await tb.wait(t_bad)
    tb.check(resp, opcode=Opcode.WRITE_RESP, status=Status.SLVERR, length=4, src=2, inc=1)
    model[word_addr:word_addr + 4] = total.to_bytes(4, "little")
    t = tb.read(word_addr, 4)
    (resp,) = await tb.wait(t)
    assert tb.check(resp, opcode=Opcode.READ_RESP, length=4) == total.to_bytes(4, "little")
    for resp in await tb.wait(*wtags):
        tb.check(resp, opcode=Opcode.WRITE_RESP, length=64)
    assert await backdoor_read(0, 0x3000) == bytes(model)

    if decerr:
        t = tb.read(MEM_SIZE + 64, 128)
        (resp,) = await tb.wait(t)
        assert tb.check(resp, opcode=Opcode.READ_RESP, status=Status.DECERR,
                        length=128) == bytes(128)


ENDPOINT_NAMES = {"req": "rx__0", "write": "rx__1", "rdata": "tx__2", "wresp": "tx__3"}


@cocotb.test()
async def bridge_memory(dut):
    """WRITE/READ/ATOMIC_ADD/SLVERR/DECERR through the bridge into AxiMemory."""
    cfg = tb_config()
    rng = tb_rng(dut, "bridge_memory")
    idle_inputs(dut)
    await start(dut)
    tb = BridgeTb(dut, cfg, ENDPOINT_NAMES)
    bd = MemoryBackdoor(dut, data_bytes=FB)
    await bridge_scenarios(dut, tb, bd.write, bd.read, rng)
    assert read_int(dut.dropped) == 0


@cocotb.test()
async def bridge_out_of_order(dut):
    """Many READs in flight: with a reordering memory, responses overtake one another; every one is
    still intact and matched to its tag."""
    cfg = tb_config()
    rng = tb_rng(dut, "bridge_out_of_order")
    idle_inputs(dut)
    await start(dut)
    tb = BridgeTb(dut, cfg, ENDPOINT_NAMES)
    bd = MemoryBackdoor(dut, data_bytes=FB)
    image = bytes(rng.getrandbits(8) for _ in range(0x4000))
    await bd.write(0, image)
    reqs = []
    for _ in range(48):
        length = rng.choice([4, 32, 64, 200, 1024, 4096])
        # Legal accesses only: flit-aligned within a 4 KB page, or inside one flit.
        page = rng.randrange(3) * 4096
        if length >= FB:
            addr = page + rng.randrange(0, 4096 - length + 1, FB)
        else:
            addr = page + rng.randrange(0, 4096, FB) + rng.randrange(0, FB - length + 1, 4)
        reqs.append((tb.read(addr, length, src=0), addr, length))
    await tb.wait(*[t for t, _, _ in reqs])
    for t, addr, length in reqs:
        got = tb.check(tb.responses[t], opcode=Opcode.READ_RESP, length=length, src=0)
        assert got == image[addr:addr + length]
    order = [h["tag"] for h, _, _ in split(tb.rdata.items)]
    sent = [t for t, _, _ in reqs]
    overtaken = sum(1 for a, b in zip(order, order[1:]) if sent.index(b) < sent.index(a))
    dut._log.info("READ_RESPs out of request order: %d of %d", overtaken, len(order))
    if cfg["reorder"]:
        assert overtaken > 0


@cocotb.test()
async def bridge_throughput(dut):
    """Back-to-back 4 KB READs keep READ_RESP at one flit per cycle; back-to-back 4 KB WRITEs are
    accepted at one flit per cycle; latency of a READ (header in to first response flit out)."""
    cfg = tb_config()
    idle_inputs(dut)
    await start(dut)
    cycles = Cycles(dut)
    req_mon = Monitor(dut, "rx__0", cycles)
    out_mon = Monitor(dut, "tx__2", cycles)
    wr_mon = Monitor(dut, "rx__1", cycles)
    tb = BridgeTb(dut, cfg, ENDPOINT_NAMES, quiet=True)
    t = tb.read(0x40, 32)
    await tb.wait(t)
    latency = out_mon.log[0][0] - req_mon.log[0][0]
    dut._log.info("READ latency, header accepted to first READ_RESP flit: %d cycles "
                  "(memory latency %d)", latency, cfg["latency"])
    assert latency <= cfg["latency"] + 3

    n = 24
    o0 = len(out_mon.log)
    tags = [tb.read((k % 8) * 4096, 4096) for k in range(n)]
    await tb.wait(*tags)
    oc = [c for c, _ in out_mon.log[o0:]]
    span = oc[-1] - oc[0] + 1
    dut._log.info("READ_RESP: %d flits in %d cycles", len(oc), span)
    assert len(oc) == n * 129 and span == len(oc), "READ_RESP did not sustain one flit per cycle"

    w0 = len(wr_mon.log)
    wtags = [tb.write((k % 8) * 4096, bytes([k]) * 4096) for k in range(16)]
    await tb.wait(*wtags)
    wc = [c for c, _ in wr_mon.log[w0:]]
    span = wc[-1] - wc[0] + 1
    dut._log.info("WRITE: %d flits accepted in %d cycles", len(wc), span)
    assert len(wc) == 16 * 129 and span == len(wc), "WRITEs were not accepted at one flit per cycle"


# ================================================================================================
# Accelerator
# ================================================================================================

CMD = command_layout(PARAMS)
EVT = event_layout(PARAMS)


class AccTb:
    def __init__(self, dut, cfg):
        self.dut = dut
        self.cmd = StreamSource(dut, "cmd", pauses(dut, cfg, "cmd"))
        self.events = StreamSink(dut, "events", pauses(dut, cfg, "events"))

    def send(self, op, **fields):
        self.cmd.send(pack(CMD, op=op, **fields))

    async def event(self, index, timeout=50_000):
        await self.events.wait_for(index + 1, timeout)
        e = unpack(EVT, self.events.items[index])
        e["kind"] = EventKind(e["kind"])
        return e


@cocotb.test()
async def accelerator_packets(dut):
    """ARRIVE, WRITE_REMOTE and READ_REMOTE make the right packets; responses become events;
    WAIT_FLAG fires on the expected generation of a flag written by a WRITE packet."""
    cfg = tb_config()
    rng = tb_rng(dut, "accelerator_packets")
    idle_inputs(dut)
    await start(dut)
    acc = AccTb(dut, cfg)
    req_out = StreamSink(dut, "tx__0", pauses(dut, cfg, "tx0"))
    wr_out = StreamSink(dut, "tx__1", pauses(dut, cfg, "tx1"))
    rdata_in = StreamSource(dut, "rx__2", pauses(dut, cfg, "rx2"))
    wresp_in = StreamSource(dut, "rx__3", pauses(dut, cfg, "rx3"))
    tb = BridgeTb(dut, cfg, ENDPOINT_NAMES)  # to write the flag with a WRITE packet

    acc.send(AccOp.ARRIVE, dst=0, tag=0x51, length=1, addr=0x0003_0000 | 7)
    acc.send(AccOp.WRITE_REMOTE, dst=3, tag=0x52, length=100, addr=0x2000, seed=0xBEEF)
    acc.send(AccOp.READ_REMOTE, dst=1, tag=0x53, length=4096, addr=0x1000)
    await req_out.wait_for(2)
    await wr_out.wait_for(5)
    (arrive, read), (write,) = split(req_out.items), split(wr_out.items)
    h, _, nf = arrive
    assert (h["opcode"], h["msg_class"], h["inc"], h["src"], h["dst"], h["length"], h["tag"],
            h["addr"]) == (Opcode.ATOMIC_ADD.value, MsgClass.REQ.value, 1, PORT, 0, 1, 0x51,
                           0x0003_0007) and nf == 1, h
    h, body, nf = write
    assert (h["opcode"], h["msg_class"], h["inc"], h["dst"], h["length"], h["tag"], h["addr"]) == \
        (Opcode.WRITE.value, MsgClass.WRITE.value, 0, 3, 100, 0x52, 0x2000), h
    assert nf == 5 and body == pattern_bytes(0xBEEF, 100) + bytes(28)
    h, _, nf = read
    assert (h["opcode"], h["inc"], h["dst"], h["length"], h["tag"], h["addr"]) == \
        (Opcode.READ.value, 0, 1, 4096, 0x53, 0x1000) and nf == 1, h
    sent = [await acc.event(i) for i in range(3)]
    assert [e["kind"] for e in sent] == [EventKind.SENT] * 3
    assert [e["tag"] for e in sent] == [0x51, 0x52, 0x53]

    # Responses -> events.
    data = bytes(rng.getrandbits(8) for _ in range(4096))
    rdata_in.send(*packet(Opcode.READ_RESP, data, tag=0x53, src=1, dst=PORT, length=4096,
                          status=Status.OK))
    wresp_in.send(*packet(Opcode.WRITE_RESP, tag=0x52, src=3, dst=PORT, length=100,
                          status=Status.SLVERR))
    wresp_in.send(*packet(Opcode.WRITE_RESP, tag=0x51, src=0, dst=PORT, length=4, inc=1))
    # A malformed WRITE_RESP with a two-flit tail: one event from its header, its tail dropped
    # (not read as headers), and the WRITE_RESP behind it an event of its own.
    wresp_in.send(*packet(Opcode.WRITE_RESP, bytes(2 * FB), tag=0x54, src=2, dst=PORT, length=8))
    wresp_in.send(*packet(Opcode.WRITE_RESP, tag=0x55, src=2, dst=PORT, length=8))
    events = [await acc.event(i) for i in range(3, 8)]
    by_tag = {e["tag"]: e for e in events}
    assert sorted(by_tag) == [0x51, 0x52, 0x53, 0x54, 0x55], sorted(by_tag)
    for t in (0x54, 0x55):
        assert by_tag[t]["kind"] == EventKind.WRITE_DONE and by_tag[t]["src"] == 2, by_tag[t]
    assert by_tag[0x53]["kind"] == EventKind.READ_DONE and by_tag[0x53]["value"] == xor_fold(data)
    assert by_tag[0x53]["length"] == 4096 and by_tag[0x53]["src"] == 1
    assert by_tag[0x52]["kind"] == EventKind.WRITE_DONE
    assert by_tag[0x52]["status"] == Status.SLVERR.value
    assert by_tag[0x51]["kind"] == EventKind.WRITE_DONE and by_tag[0x51]["inc"] == 1

    # WAIT_FLAG: the flag word at 0x3F04, expected generation 3.
    flag_addr = 0x3F04
    older = pack(FLAG_LAYOUT, generation=2, status=0)
    t = tb.write(flag_addr, older.to_bytes(4, "little"))
    await tb.wait(t)
    acc.send(AccOp.WAIT_FLAG, tag=0x60, addr=flag_addr, generation=3)
    await ClockCycles(dut.clk, 200)
    assert len(acc.events.items) == 8, "WAIT_FLAG fired before the generation was reached"
    timed_out = pack(FLAG_LAYOUT, generation=3, status=4)           # generation 3, TIMEOUT
    t = tb.write(flag_addr, timed_out.to_bytes(4, "little"))
    (resp,) = await tb.wait(t)
    written = read_int(dut.cycle)
    e = await acc.event(8)
    assert e["kind"] == EventKind.FLAG and e["tag"] == 0x60 and e["status"] == 4, e
    assert e["value"] == timed_out
    dut._log.info("flag seen %d cycles before the WRITE_RESP was taken", written - e["cycle"])
    assert 0 < written - e["cycle"] < 200


@cocotb.test()
async def accelerator_loopback(dut):
    """The endpoint's own tx looped to its rx: WRITE_REMOTE lands in memory, READ_REMOTE returns
    it, three ARRIVEs (ATOMIC_ADD) raise a counter that WAIT_FLAG sees as generation 3."""
    cfg = tb_config()
    idle_inputs(dut)
    await start(dut)
    acc = AccTb(dut, cfg)
    bd = MemoryBackdoor(dut, data_bytes=FB)
    for c in range(4):
        sink = StreamSink(dut, f"tx__{c}", pauses(dut, cfg, f"ltx{c}"))
        source = StreamSource(dut, f"rx__{c}", pauses(dut, cfg, f"lrx{c}"))

        async def forward(sink=sink, source=source):
            taken = 0
            while True:
                await RisingEdge(dut.clk)
                if len(sink.items) > taken:
                    source.send(*sink.items[taken:])
                    taken = len(sink.items)
        cocotb.start_soon(forward())
    await bd.write(0x3000, bytes(32))
    acc.send(AccOp.WRITE_REMOTE, dst=PORT, tag=1, length=1000, addr=0x1000, seed=0x1234)
    acc.send(AccOp.WRITE_REMOTE, dst=PORT, tag=2, length=4096, addr=0x2000, seed=0x0042)
    for k in range(3):
        acc.send(AccOp.ARRIVE, dst=PORT, tag=10 + k, length=1, addr=0x3008)
    acc.send(AccOp.WAIT_FLAG, tag=20, addr=0x3008, generation=3)
    acc.send(AccOp.READ_REMOTE, dst=PORT, tag=3, length=1000, addr=0x1000)
    acc.send(AccOp.READ_REMOTE, dst=PORT, tag=4, length=4096, addr=0x2000)
    # 7 SENT, 5 WRITE_DONE (2 writes, 3 arrivals), 2 READ_DONE, 1 FLAG.
    events = [await acc.event(i, 100_000) for i in range(7 + 5 + 2 + 1)]
    await ClockCycles(dut.clk, 100)
    assert len(acc.events.items) == 15, "unexpected extra events"
    done = {e["tag"]: e for e in events if e["kind"] != EventKind.SENT}
    for t in (1, 2, 10, 11, 12):
        assert done[t]["kind"] == EventKind.WRITE_DONE and done[t]["status"] == 0, done[t]
    assert done[3]["value"] == xor_fold(pattern_bytes(0x1234, 1000)) and done[3]["status"] == 0
    assert done[4]["value"] == xor_fold(pattern_bytes(0x0042, 4096))
    assert done[20]["kind"] == EventKind.FLAG and done[20]["value"] == 3
    assert (await bd.read(0x1000, 1024))[:1000] == pattern_bytes(0x1234, 1000)
    assert await bd.read(0x2000, 4096) == pattern_bytes(0x0042, 4096)


@pytest.mark.parametrize("latency,reorder", [(40, False), (9, True)])
def test_endpoint(sim, latency, reorder):
    from scin.hdl.endpoint.endpoint import Endpoint
    make = lambda: Endpoint(PARAMS, port=PORT, mem_size=MEM_SIZE, latency=latency, reorder=reorder)
    tests = ["bridge_memory", "bridge_out_of_order", "accelerator_packets", "accelerator_loopback"]
    if not reorder:
        tests.append("bridge_throughput")
    run_block(__file__, sim, "endpoint", make, f"{PORT},{MEM_SIZE},{latency},{reorder}",
              testcase=tests, config={"latency": latency, "reorder": reorder})


# ================================================================================================
# cocotbext-axi stand-in
# ================================================================================================

@cocotb.test()
async def bridge_axiram(dut):
    """The same packet-level checks with cocotbext-axi's AxiRam as the memory."""
    from cocotbext.axi import AxiBus, AxiRam
    cfg = tb_config()
    rng = tb_rng(dut, "bridge_axiram")
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=MEM_SIZE)
    for ch in (ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel,
               ram.read_if.ar_channel, ram.read_if.r_channel):
        ch.set_pause_generator(pauses(dut, cfg, "axiram"))
    idle_inputs(dut)
    await start(dut)
    tb = BridgeTb(dut, cfg, {"req": "req_in", "write": "write_in", "rdata": "rdata_out",
                             "wresp": "wresp_out"})

    async def backdoor_write(addr, payload):
        ram.write(addr, payload)

    async def backdoor_read(addr, length):
        return bytes(ram.read(addr, length))

    await bridge_scenarios(dut, tb, backdoor_write, backdoor_read, rng, decerr=False)


def test_bridge_axiram(sim):
    from scin.sim.tops import endpoint
    make = lambda: endpoint.FlatAxiBridge(PARAMS, port=PORT)
    run_block(__file__, sim, "flat_axi_bridge", make, f"{PORT}", top_module=endpoint,
              testcase="bridge_axiram", config={})


# ================================================================================================
# Parameter validation
# ================================================================================================

def test_parameter_errors():
    from scin.hdl.endpoint.memory import AxiMemory
    from scin.hdl.endpoint.bridge import AxiBridge
    from scin.hdl.endpoint.accelerator import Accelerator
    with pytest.raises(ValueError, match=r"data_width must be a power of two, not 96"):
        AxiParams(data_width=96)
    with pytest.raises(ValueError, match=r"user_width must be an integer between 1 and 64, not 0"):
        AxiParams(user_width=0)
    with pytest.raises(ValueError, match=r"size must be a power of two .* not 3000"):
        AxiMemory(MEMORY_AXI, size=3000)
    with pytest.raises(ValueError, match=r"latency must be an integer between 3 and 4096, not 2"):
        AxiMemory(MEMORY_AXI, size=4096, latency=2)
    with pytest.raises(TypeError, match=r"reorder must be a bool, not 1"):
        AxiMemory(MEMORY_AXI, size=4096, reorder=1)
    with pytest.raises(ValueError, match=r"storage must be 'memory' or 'sim', not 'sram'"):
        AxiMemory(MEMORY_AXI, size=4096, storage="sram")
    from scin.hdl.endpoint.sim_ram import SimRam
    with pytest.raises(ValueError, match=r"depth must be a power of two of at least 2, not 1000"):
        SimRam(width=256, depth=1000, name="ep0")
    with pytest.raises(ValueError, match=r"width must be a positive multiple of 8 bits, not 12"):
        SimRam(width=12, depth=1024, name="ep0")
    with pytest.raises(ValueError, match=r"name must be an identifier .* not 'ep 0'"):
        SimRam(width=256, depth=1024, name="ep 0")
    with pytest.raises(ValueError, match=r"outstanding must be an integer between 1 and 64, not 0"):
        AxiBridge(PARAMS, outstanding=0)
    with pytest.raises(ValueError, match=r"port must be an integer between 0 and 3, not 4"):
        AxiBridge(PARAMS, port=4)
    with pytest.raises(ValueError, match=r"poll_addr_width must be an integer"):
        Accelerator(PARAMS, poll_addr_width=0)


def test_software_references():
    assert pattern_bytes(0xBEEF, 6) == bytes([0, 0, 0xEF, 0xBE, 1, 0])
    assert xor_fold(b"\x01\0\0\0\x03\0\0\0\x04") == 1 ^ 3 ^ 4
    assert bridge_axi_params(PARAMS, 16).id_width == 5
