"""Wave-level requests through the AxiBridge (docs/PROTOCOL.md, "Read trains and posted writes"):
``READ_WAVE`` answered by a train of ``READ_RESP``s, ``WRITE_POSTED`` answered by nobody and
reported by the next ``WRITE``.

* ``read_trains``: trains at addresses that are not 4 KB-aligned (short first and last pieces),
  single-piece and one-flit trains, a train ending at the top of the address space, a train whose
  tags wrap, mixed with plain READs; every response's tag, length, addr and data checked, and
  every AR burst seen on the AXI bus checked not to cross 4 KB (and to be exactly the pieces);
* ``read_train_axi_error``: a train across the page whose reads fail: that piece alone is
  answered ``SLVERR`` (with its length), the others are served;
* ``bad_read_trains``: length 0, an unaligned address, a range beyond the address space: one
  ``SLVERR`` of length 0 each (the request's tag, no AR), and a train with a tail flit (the tail
  dropped); each followed by a good train;
* ``read_train_throughput``: without pauses, a train's READ_RESPs leave at one flit per cycle;
* ``posted_writes``: posted writes then a WRITE: one WRITE_RESP, all data in memory; an AXI
  error and a refused access among posted writes: the next WRITE's answer is ``SLVERR``, the one
  after it ``OK`` again.

Top: the ``FlatAxiBridge`` build of ``tb/block/test_endpoint.py::test_bridge_axiram`` and
``tb/block/test_bridge_edges.py`` (one model per simulator for the three files), with
cocotbext-axi's ``AxiRam`` as memory, reads of :data:`FAULT_PAGE` failing and writes of
:data:`WRITE_FAULT_PAGE` failing. Every stream and AXI channel pauses at random; seeded
(``SCIN_SEED`` replays). """

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from scin.hdl.packet import OPCODE_CLASS, FabricParams, Opcode, Status
from scin.hdl.endpoint.read_train import train_piece_bytes
from scin.sim.testbench.env import read_int
from scin.sim.testbench.traffic import train_pieces
from scin.tb.endpoint_setup import (FAULT_PAGE, FB, MEM_SIZE, PARAMS, PORT, bridge_bench,
                                    fail_page, packet, split)
from scin.tb.cocotb_run import run_block


PIECE = train_piece_bytes(PARAMS)
TOP = 1 << PARAMS.addr_width
TAGS = 1 << PARAMS.tag_width
#: A 4 KB page whose AXI writes fail (AxiRam answers SLVERR when its write callback raises).
WRITE_FAULT_PAGE = 0xA000


def pieces(addr, flits, params=PARAMS):
    """The pieces of a READ_WAVE: (address, bytes), cut at every multiple of its piece size."""
    return train_pieces(params, addr, flits)


class ArMonitor:
    """Every AR handshake on the flat AXI bus, as (address, beats)."""

    def __init__(self, dut):
        self.dut, self.log = dut, []
        cocotb.start_soon(self._run())

    async def _run(self):
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            if int(d.m_axi_arvalid.value) and int(d.m_axi_arready.value):
                self.log.append((read_int(d.m_axi_araddr), read_int(d.m_axi_arlen) + 1))

    def check_4k(self):
        for addr, beats in self.log:
            assert addr // 4096 == (addr + beats * FB - 1) // 4096, \
                f"AR burst {addr:#x} x {beats} beats crosses 4 KB"


def _fail_writes_of_fault_page(ram):
    fail_page(ram.write_if, "_write", WRITE_FAULT_PAGE)


def read_wave(tb, addr, flits, *, src=1, inc=1, tag=None, tail=b""):
    """Send a READ_WAVE; return its tag (the tags of its pieces follow it: reserved here)."""
    if tag is None:
        tag = tb.tag()
        tb.next_tag += len(pieces(addr, flits))
    tb.req.send(*packet(Opcode.READ_WAVE, tail, addr=addr, tag=tag, src=src, dst=PORT, inc=inc,
                        length=flits))
    return tag


async def check_train(tb, ram, tag, addr, flits, *, src=1, inc=1, bad=None):
    """Wait for a train's responses and check each (``bad``: pieces answered SLVERR)."""
    want = pieces(addr, flits)
    tags = [(tag + j) % TAGS for j in range(len(want))]
    got = await tb.wait(*tags)
    for j, ((a, n), resp) in enumerate(zip(want, got)):
        status = Status.SLVERR if bad and j in bad else Status.OK
        body = tb.check(resp, opcode=Opcode.READ_RESP, status=status, length=n, src=src, inc=inc)
        assert resp[0]["addr"] == a, (j, resp[0], hex(a))
        if status == Status.OK:
            assert body == bytes(ram.read(a % MEM_SIZE, n)), f"piece {j} at {a:#x}: data"
    return want


@cocotb.test()
async def read_trains(dut):
    tb, ram, rng = await bridge_bench(dut, "read_trains")
    _fail_writes_of_fault_page(ram)
    ar = ArMonitor(dut)
    ram.write(0, bytes(rng.getrandbits(8) for _ in range(0x8000)))
    ram.write(0xF000, bytes(rng.getrandbits(8) for _ in range(0x1000)))
    trains = [  # (addr, flits): short first and last pieces; one piece; one flit; page-aligned
        (0x0A60, (3 * 4096 + 0x140) // FB), (0x5FE0, 2), (0x4120, 1), (0x2000, 2 * PIECE // FB),
        (0x6000 + FB * rng.randrange(1, 128), rng.randrange(1, 48)),
        (TOP - 2 * FB, 2),                          # ends at the top of the address space
    ]
    for _ in range(3):
        trains.append((FB * rng.randrange(0x7000 // FB), rng.randrange(1, 4096 // FB * 3)))
    trains = [(a, f) for a, f in trains if a + f * FB <= 0x8000 or a >= 0xF000]
    sent, reads = [], []
    for k, (addr, flits) in enumerate(trains):
        src, inc = rng.randrange(4), rng.randrange(2)
        sent.append((read_wave(tb, addr, flits, src=src, inc=inc), addr, flits, src, inc))
        if k % 2:   # a plain READ among the trains: its READ_RESP keeps addr 0
            a = 0xF000 + FB * rng.randrange(0x40)
            reads.append((tb.read(a, 64), a))
    # A train whose tags wrap around 2**tag_width.
    sent.append((read_wave(tb, 0x3FE0, 70, src=2, inc=1, tag=TAGS - 2), 0x3FE0, 70, 2, 1))
    expected = []
    for tag, addr, flits, src, inc in sent:
        expected += await check_train(tb, ram, tag, addr, flits, src=src, inc=inc)
    for tag, a in reads:
        (resp,) = await tb.wait(tag)
        assert tb.check(resp, opcode=Opcode.READ_RESP, length=64) == bytes(ram.read(a, 64))
        assert resp[0]["addr"] == 0, resp[0]
    ar.check_4k()
    # Exactly one AR burst per piece (and one per READ), in the pieces' order.
    bursts = [(a, -(-n // FB)) for a, n in expected]
    train_ars = [x for x in ar.log if x not in [(a, 2) for _, a in reads]]
    assert train_ars == bursts, (train_ars, bursts)
    dut._log.info("%d trains, %d pieces, %d AR bursts", len(sent), len(expected), len(ar.log))


@cocotb.test()
async def read_train_axi_error(dut):
    tb, ram, rng = await bridge_bench(dut, "read_train_axi_error")
    ar = ArMonitor(dut)
    ram.write(0x7000, bytes(rng.getrandbits(8) for _ in range(0x3000)))
    addr, flits = FAULT_PAGE - 0x200, (0x200 + 4096 + 0x300) // FB
    t = read_wave(tb, addr, flits, src=3, inc=0)
    # The failed piece is the second one; the rest of the train is answered as usual.
    await check_train(tb, ram, t, addr, flits, src=3, inc=0, bad={1})
    bad_body = tb.responses[(t + 1) % TAGS][1]
    assert len(bad_body) == 4096, "a failed piece keeps its length (framing unchanged)"
    # The bridge is not stuck: a train after it is served.
    t = read_wave(tb, 0x9040, 8)
    await check_train(tb, ram, t, 0x9040, 8)
    ar.check_4k()


@cocotb.test()
async def bad_read_trains(dut):
    tb, ram, rng = await bridge_bench(dut, "bad_read_trains")
    ar = ArMonitor(dut)
    ram.write(0, bytes(rng.getrandbits(8) for _ in range(0x4000)))
    bad = [(0x1000, 0), (0x1004, 4), (0x1010, 1), (TOP - 2 * FB, 3), (TOP - FB, 4096)]
    for addr, flits in bad:
        n_ar = len(ar.log)
        tag = read_wave(tb, addr, flits, src=2, inc=1, tag=tb.tag())
        (resp,) = await tb.wait(tag)
        tb.check(resp, opcode=Opcode.READ_RESP, status=Status.SLVERR, length=0, src=2, inc=1)
        assert resp[0]["addr"] == 0 and len(resp[1]) == 0, resp
        await ClockCycles(dut.clk, 4)
        assert len(ar.log) == n_ar, "a refused READ_WAVE reached the AXI bus"
        good = FB * rng.randrange(0x3000 // FB), rng.randrange(1, 200)
        t = read_wave(tb, *good, src=2)
        await check_train(tb, ram, t, *good, src=2)
    # A READ_WAVE with two tail flits: served, the tail dropped; the next request is served.
    t = read_wave(tb, 0x0FC0, 4, tail=bytes(range(2 * FB)))
    await check_train(tb, ram, t, 0x0FC0, 4)
    t = read_wave(tb, 0x2000, 1)
    await check_train(tb, ram, t, 0x2000, 1)
    ar.check_4k()
    if hasattr(dut, "bridge"):
        assert read_int(dut.bridge.rejected) == len(bad)
        assert read_int(dut.bridge.dropped) == 0


@cocotb.test()
async def posted_writes(dut):
    tb, ram, rng = await bridge_bench(dut, "posted_writes")
    _fail_writes_of_fault_page(ram)
    model = bytearray(ram.read(0, 0xC000))

    def posted(addr, payload, src=1, length=None):
        tb.wr.send(*packet(Opcode.WRITE_POSTED, payload, addr=addr, tag=tb.tag(), src=src,
                           dst=PORT, inc=1, length=len(payload) if length is None else length))

    def junk(n):
        return bytes(rng.getrandbits(8) for _ in range(n))

    async def acked_write(addr, payload, status, src=3):
        tag = tb.write(addr, payload, src=src, inc=1)
        (resp,) = await tb.wait(tag)
        tb.check(resp, opcode=Opcode.WRITE_RESP, status=status, length=len(payload), src=src,
                 inc=1)
        await ClockCycles(dut.clk, 30)
        assert len(split(tb.wresp.items)) == n_resp + 1, "a WRITE_POSTED was answered"
        return n_resp + 1

    n_resp = 0
    # Posted writes (flit-aligned 4 KB, odd lengths, a sub-flit word), then a WRITE.
    for addr, n in [(0x1000, 4096), (0x2040, 100), (0x2104, 4), (0x3000, 37 * FB), (0x3800, 1)]:
        data = junk(n)
        posted(addr, data)
        model[addr:addr + n] = data
    data = junk(3 * FB)
    n_resp = await acked_write(0x4000, data, Status.OK)
    model[0x4000:0x4000 + len(data)] = data
    assert bytes(ram.read(0, len(model))) == bytes(model), "memory after posted writes"

    # An AXI error in one posted write (its B response SLVERR): the next WRITE reports SLVERR,
    # the others are written; the WRITE after that is OK again.
    for addr, n in [(0x5000, 256), (WRITE_FAULT_PAGE + 0x100, 2 * FB), (0x5200, 64)]:
        data = junk(n)
        posted(addr, data)
        if addr < WRITE_FAULT_PAGE:
            model[addr:addr + n] = data
    data = junk(FB)
    n_resp = await acked_write(0x6000, data, Status.SLVERR)
    model[0x6000:0x6000 + FB] = data     # its own write succeeded: the error was a posted one's
    data = junk(FB)
    n_resp = await acked_write(0x6100, data, Status.OK)
    model[0x6100:0x6100 + FB] = data

    # A refused posted write (crossing 4 KB) among good ones: reported the same way.
    posted(0x0FE0, junk(2 * FB))
    data = junk(2 * FB)
    posted(0x7000, data)
    model[0x7000:0x7000 + len(data)] = data
    data = junk(FB)
    n_resp = await acked_write(0x7100, data, Status.SLVERR)
    model[0x7100:0x7100 + FB] = data
    data = junk(FB)
    n_resp = await acked_write(0x7200, data, Status.OK)
    model[0x7200:0x7200 + FB] = data

    assert bytes(ram.read(0, len(model)))[:WRITE_FAULT_PAGE] == bytes(model)[:WRITE_FAULT_PAGE]
    if hasattr(dut, "bridge"):
        assert read_int(dut.bridge.posted_errors) == 2
        assert read_int(dut.bridge.rejected) == 1
    else:
        dut._log.info("bridge counters not visible in this model: not checked")


@cocotb.test()
async def read_train_throughput(dut):
    """No pauses anywhere: a train of 4 KB pieces leaves ``rdata_out`` at one flit per cycle
    (a header per piece, as a stream of 4 KB READs)."""
    from cocotbext.axi import AxiBus, AxiRam
    from scin.sim.testbench.env import start, tb_config
    from scin.tb.endpoint_setup import NAMES, BridgeTb, Cycles, Monitor, idle_inputs
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=MEM_SIZE)
    idle_inputs(dut)
    await start(dut)
    tb = BridgeTb(dut, tb_config(), NAMES, quiet=True)
    out = Monitor(dut, "rdata_out", Cycles(dut))
    n = 8
    t = read_wave(tb, 0x4000, n * PIECE // FB)
    await check_train(tb, ram, t, 0x4000, n * PIECE // FB)
    cycles = [c for c, _ in out.log]
    span = cycles[-1] - cycles[0] + 1
    dut._log.info("READ_WAVE of %d pieces: %d READ_RESP flits in %d cycles", n, len(cycles), span)
    assert len(cycles) == n * (1 + PIECE // FB) and span == len(cycles), \
        "the train's READ_RESPs did not leave at one flit per cycle"


def test_bridge_trains(sim):
    """The four scenarios in one simulator run, on the model ``test_bridge_axiram`` builds."""
    from scin.sim.tops import endpoint
    make = lambda: endpoint.FlatAxiBridge(PARAMS, port=PORT)
    run_block(__file__, sim, "flat_axi_bridge", make, f"{PORT}", top_module=endpoint,
              testcase=["read_trains", "read_train_axi_error", "bad_read_trains", "posted_writes",
                        "read_train_throughput"],
              config={})


@pytest.mark.parametrize("params", [FabricParams.default_for(64), FabricParams(flit_width=128),
                                    FabricParams(addr_width=16, tag_width=4, max_payload=1024)],
                         ids=["f64", "f128", "a16"])
def test_splitter_cuts(params):
    """ReadTrainSplitter alone (Amaranth's simulator) on other parameters: the pieces of random
    READ_WAVEs (tags wrapping, ranges up to the top of the address space, bad ones), with output
    stalls, against the cut rule of docs/PROTOCOL.md; other packets pass through."""
    import random
    from scin.hdl.endpoint.read_train import ReadTrainSplitter
    from scin.tb.stream_bench import run_bench
    rng = random.Random(f"splitter-{params}")
    fb, top = params.flit_bytes, 1 << params.addr_width
    dut = ReadTrainSplitter(params)
    reqs = []
    for _ in range(12):
        flits = rng.choice([0, 1, 2, rng.randrange(1, 1 << params.length_width)])
        addr = rng.choice([rng.randrange(0, top, fb), max(0, top - fb * max(flits, 1)),
                           rng.randrange(top)])
        reqs.append(dict(opcode=Opcode.READ_WAVE, msg_class=OPCODE_CLASS[Opcode.READ_WAVE],
                         inc=1, src=1, dst=0, length=flits, addr=addr,
                         tag=rng.randrange(1 << params.tag_width)))
        reqs.append(dict(opcode=Opcode.READ, msg_class=OPCODE_CLASS[Opcode.READ], length=fb,
                         addr=addr, tag=3))
    want = []
    for h in reqs:
        a, n = h["addr"], h["length"]
        if h["opcode"] == Opcode.READ:
            want.append(h)
        elif not (n and a % fb == 0 and a + n * fb <= top):
            want.append(dict(h, length=0))
        else:
            for j, (pa, pn) in enumerate(pieces(a, n, params)):
                want.append(dict(h, addr=pa, length=pn,
                                 tag=(h["tag"] + j) % (1 << params.tag_width)))
    got = []

    async def bench(ctx):
        for h in reqs:
            ctx.set(dut.i.payload, {"data": params.pack_header(**h), "last": 1})
            ctx.set(dut.i.valid, 1)
            while True:
                ctx.set(dut.o.ready, rng.random() < 0.7)
                _, _, ov, oready, iready, data = await ctx.tick().sample(
                    dut.o.valid, dut.o.ready, dut.i.ready, dut.o.payload.data)
                if ov and oready:
                    got.append(params.unpack_header(data & ((1 << params.header_layout.size) - 1)))
                if iready and ov and oready:
                    break
        ctx.set(dut.i.valid, 0)

    run_bench(dut, bench, period=1e-6)
    norm = lambda h: {k: int(getattr(v, "value", v)) for k, v in h.items()}
    want = [norm(params.unpack_header(params.pack_header(**w))) for w in want]
    assert got == want
