"""AXI4 conformance of ``AxiMemory``, driven by cocotbext-axi against a byte-array reference.

Top: :class:`~scin.sim.tops.endpoint.FlatAxiMemory` (the memory with AMBA-named ``s_axi_*``
ports and its backdoor). Two benches, each starting from random memory contents loaded through
the backdoor and ending with a backdoor dump of the whole memory compared with the reference:

* ``master_random``: cocotbext-axi's ``AxiMaster`` (what a user puts in front of the memory) with
  random transfers of 1 byte to 6 KiB at random, unaligned start addresses, narrow beat sizes,
  transfers that end at the last byte of memory, cross its end or lie beyond it, exclusive
  accesses, and many transfers outstanding on several IDs at once.
* ``raw_bursts``: cocotbext-axi's raw channel drivers, burst by burst: INCR, FIXED and WRAP
  bursts with narrow beats, unaligned starts and sparse strobes, the illegal bursts the memory
  must refuse (SLVERR: reserved burst type, bad WRAP length or alignment, FIXED over 16 beats,
  beats wider than the bus), out-of-range bursts (DECERR), and good traffic after them; per-ID
  order of B and R, no R interleaving, and (with ``reorder``) reordering across IDs.

Every channel of both benches has a pause generator (idle cycles on AW/W/AR, backpressure on
B/R). Randomness is seeded and logged (``SCIN_SEED`` replays).

Configurations: the 64-bit bus (64 KiB in the ``storage="sim"`` RAM, reordered responses,
5-cycle latency) and the shipped 256-bit block (``scin verilog --block axi_memory``: the bridge's
bus, 64 KiB of ``lib.memory``, 40-cycle latency, in order), each on Verilator and Icarus. Icarus
runs a sixth of the rounds: it is about half as fast and the cocotbext-axi drivers do Python
work every cycle. Verilator takes about a minute per configuration after its build.
"""

import logging

import pytest

import cocotb
from cocotb.triggers import Combine

from scin.hdl.packet import FabricParams
from scin.hdl.endpoint.axi import AxiParams, Burst, Resp
from scin.hdl.endpoint.bridge import bridge_axi_params
from scin.sim.testbench.env import start, tb_config, tb_rng
from scin.sim.testbench.streams import StreamSink, StreamSource, pause_generator
from scin.tb.cocotb_run import run_block


MEM_SIZE = 1 << 16
CONFIGS = {  # name: (AxiParams, AxiMemory keyword arguments)
    "64": (AxiParams(data_width=64, addr_width=32, id_width=4, user_width=1),
           {"latency": 5, "reorder": True, "outstanding": 8, "storage": "sim"}),
    "256": (bridge_axi_params(FabricParams()), {"latency": 40, "reorder": False}),
}
PAGE = 4096            # AXI4 bursts must not cross a 4 KB boundary (A3.4.1)
RESERVED_BURST = 0b11
WRAP_LENS = (1, 3, 7, 15)   # awlen of the legal WRAP lengths 2, 4, 8, 16


# ================================================================================================
# Reference: the burst rules of AxiMemory's docstring, on a byte array
# ================================================================================================

class Reference:
    """The memory as bytes, and what a burst does to it (the contract in ``AxiMemory``'s
    docstring, written independently of the RTL)."""

    def __init__(self, size, lanes, contents):
        self.size, self.lanes = size, lanes
        self.size_max = lanes.bit_length() - 1
        self.mem = bytearray(contents)

    def resp(self, addr, len_, size, burst):
        nb = 1 << size
        if (size > self.size_max or burst == RESERVED_BURST
                or (burst == Burst.FIXED.value and len_ >= 16)
                or (burst == Burst.WRAP.value and (len_ not in WRAP_LENS or addr % nb))):
            return Resp.SLVERR
        base = addr - addr % nb   # the extent starts at the address aligned to the beat size
        if burst == Burst.INCR.value:
            end = base + (len_ + 1) * nb
        elif burst == Burst.FIXED.value:
            end = base + nb
        else:
            total = (len_ + 1) * nb
            end = addr - addr % total + total
        return Resp.DECERR if end > self.size else Resp.OKAY

    @staticmethod
    def beat_addrs(addr, len_, size, burst):
        nb = 1 << size
        if burst == Burst.WRAP.value:
            total = (len_ + 1) * nb
            lower = addr - addr % total
            return [lower + (addr - lower + k * nb) % total for k in range(len_ + 1)]
        if burst == Burst.INCR.value:
            return [addr] + [addr - addr % nb + k * nb for k in range(1, len_ + 1)]
        return [addr] * (len_ + 1)   # FIXED (and the reserved type, which moves nothing)

    def lanes_of(self, addr, size):
        """Byte lanes a beat at ``addr`` of ``1 << size`` bytes may carry (A3.4.3)."""
        nb = 1 << size
        first = addr % self.lanes
        return list(range(first, (addr - addr % nb) % self.lanes + nb))

    def write(self, addr, len_, size, burst, beats):
        """Apply the ``(data, strb)`` beats of a burst; returns its B response."""
        resp = self.resp(addr, len_, size, burst)
        if resp == Resp.OKAY:
            for a, (data, strb) in zip(self.beat_addrs(addr, len_, size, burst), beats):
                word = a - a % self.lanes
                for lane in range(self.lanes):
                    if strb >> lane & 1:
                        self.mem[word + lane] = data >> (8 * lane) & 0xFF
        return resp

    def read(self, addr, len_, size, burst):
        """``(resp, [rdata of each beat])``: the whole bus word at each beat address; zero data
        on an error."""
        resp = self.resp(addr, len_, size, burst)
        if resp != Resp.OKAY:
            return resp, [0] * (len_ + 1)
        words = []
        for a in self.beat_addrs(addr, len_, size, burst):
            word = a - a % self.lanes
            words.append(int.from_bytes(self.mem[word:word + self.lanes], "little"))
        return resp, words


def master_bursts(addr, length, size, max_len=256):
    """The INCR bursts an AXI4 manager splits a transfer into (at 256 beats and at every 4 KB
    boundary), as ``(start address, beats, first byte, end byte)``."""
    nb = 1 << size
    cycles = (length + addr % nb + nb - 1) // nb
    out, cur, k = [], addr, 0
    while k < cycles:
        beats = min(cycles - k, max_len)
        beats = (min(beats * nb, PAGE - cur % PAGE) + nb - 1) // nb
        end = cur - cur % nb + beats * nb
        out.append((cur, beats, max(cur, addr), min(end, addr + length)))
        cur, k = end, k + beats
    return out


# ================================================================================================
# Bench
# ================================================================================================

class Tb:
    def __init__(self, dut, salt):
        from cocotbext.axi import AxiBus
        self.dut, self.cfg = dut, tb_config()
        self.rng = tb_rng(dut, salt)
        self.lanes = self.cfg["data_width"] // 8
        self.size_max = self.lanes.bit_length() - 1
        self.bus = AxiBus.from_prefix(dut, "s_axi")
        for ch in ("aw", "ar"):
            for field in ("lock", "cache", "prot", "qos", "region", "user"):
                getattr(dut, f"s_axi_{ch}{field}").value = 0
        dut.load__valid.value = 0
        dut.load__payload.value = 0
        dut.dump_req__valid.value = 0
        dut.dump_req__payload.value = 0
        dut.dump_data__ready.value = 1

    def pauses(self, name):
        return pause_generator(self.cfg.get("pauses", "random"), tb_rng(self.dut, name), 0.2)

    def set_pauses(self, channels):
        for name, ch in channels.items():
            ch.set_pause_generator(self.pauses(name))

    async def load_random(self):
        """Random contents through the backdoor (so a read that wrongly returns zeros fails)."""
        words = MEM_SIZE // self.lanes
        contents = self.rng.randbytes(MEM_SIZE)
        load = StreamSource(self.dut, "load")
        wbits = (words - 1).bit_length()
        lanes = self.lanes
        load.send(*(i | int.from_bytes(contents[i * lanes:(i + 1) * lanes], "little") << wbits
                    for i in range(words)))
        await load.wait_idle(4 * words)
        return Reference(MEM_SIZE, self.lanes, contents)

    async def check_dump(self, ref):
        """Every byte of the memory, read through the backdoor, against the reference."""
        words = MEM_SIZE // self.lanes
        req = StreamSource(self.dut, "dump_req")
        sink = StreamSink(self.dut, "dump_data")
        req.send(*range(words))
        await sink.wait_for(words, 4 * words)
        got = b"".join(w.to_bytes(self.lanes, "little") for w in sink.items)
        bad = [i for i in range(MEM_SIZE) if got[i] != ref.mem[i]]
        assert not bad, (f"{len(bad)} bytes differ from the reference, first at {bad[0]:#x}: "
                         f"{got[bad[0]]:#04x} != {ref.mem[bad[0]]:#04x}")


# ------------------------------------------------------------------------------------------------
# AxiMaster: transfers as a user issues them
# ------------------------------------------------------------------------------------------------

def expect_transfer(ref, kind, addr, length, size, data=None):
    """The response and read data the reference gives an ``AxiMaster`` transfer, applying a
    write. A transfer is DECERR if any of its bursts is; only in-range bursts write."""
    resp, out = Resp.OKAY, bytearray()
    for first, beats, lo, hi in master_bursts(addr, length, size):
        r = ref.resp(first, beats - 1, size, Burst.INCR.value)
        if r != Resp.OKAY:
            resp = r
        if kind == "write" and r == Resp.OKAY:
            ref.mem[lo:hi] = data[lo - addr:hi - addr]
        elif kind == "read":
            out += ref.mem[lo:hi] if r == Resp.OKAY else bytes(hi - lo)
    return resp, bytes(out)


def random_transfer(rng, size_max):
    size = rng.choice([size_max] * 3 + list(range(size_max)))
    length = rng.choice([rng.randint(1, 8), rng.randint(1, 64), rng.randint(1, 512),
                         rng.randint(1, 6144)])
    where = rng.random()
    if where < 0.15:     # ends at the last byte of memory
        addr = MEM_SIZE - length
    elif where < 0.22:   # crosses the end of memory
        addr = MEM_SIZE - rng.randint(1, length) if length > 1 else MEM_SIZE - 1
    elif where < 0.27:   # beyond it
        addr = MEM_SIZE + rng.randrange(2 * PAGE)
    else:
        addr = rng.randrange(MEM_SIZE - length + 1)
    return max(addr, 0), length, size


@cocotb.test()
async def master_random(dut):
    """cocotbext-axi's AxiMaster: unaligned, narrow, long, end-of-memory, out-of-range and
    exclusive transfers, many outstanding, against the reference."""
    from cocotbext.axi import AxiLockType, AxiMaster, AxiResp
    tb = Tb(dut, "master_random")
    rng, cfg = tb.rng, tb.cfg
    await start(dut)
    ref = await tb.load_random()
    master = AxiMaster(tb.bus, dut.clk, dut.rst)
    w, r = master.write_if, master.read_if
    for side in (w, r):
        side.log.setLevel(logging.WARNING)   # it logs every byte of every transfer at INFO
    tb.set_pauses({"aw": w.aw_channel, "w": w.w_channel, "b": w.b_channel,
                   "ar": r.ar_channel, "r": r.r_channel})

    async def check(kind, addr, length, size, lock=AxiLockType.NORMAL):
        if kind == "write":
            data = rng.randbytes(length)
            want, _ = expect_transfer(ref, kind, addr, length, size, data)
            got = await master.write(addr, data, size=size, lock=lock)
        else:
            want, wdata = expect_transfer(ref, kind, addr, length, size)
            got = await master.read(addr, length, size=size, lock=lock)
            assert got.data == wdata, f"read {addr:#x}+{length} size {size}: data differs"
        assert got.resp == AxiResp(want.value), \
            f"{kind} {addr:#x}+{length} size {size}: {got.resp!r}, expected {want!r}"

    # The cases (64-bit, 64 KiB): a one-beat write and read of the last 7 bytes (strobes
    # 0xFE), a 3,108-byte read from 0xF824 whose first 2,012 bytes are in range, an 8-byte
    # access to the last word on the 256-bit bus; then the same at every beat size.
    narrow = min(3, tb.size_max)
    for kind in ("write", "read"):
        await check(kind, MEM_SIZE - 7, 7, narrow)
        await check(kind, MEM_SIZE - 8, 8, narrow)
        await check(kind, 0xF824, 3108, narrow)
    for size in range(tb.size_max + 1):
        for kind in ("write", "read"):
            await check(kind, MEM_SIZE - 3 * (1 << size) + 1, 3 * (1 << size) - 1, size)
    # Exclusive access is not supported: carried out as a normal access, answered OKAY.
    for kind in ("write", "read"):
        await check(kind, 0x1000, tb.lanes, tb.size_max, lock=AxiLockType.EXCLUSIVE)

    # Rounds of concurrent transfers on rotating IDs. Within a round no write overlaps another
    # transfer, so the outcome does not depend on how the memory orders them.
    for rnd in range(cfg["rounds"]):
        taken, tasks = [], []
        for _ in range(rng.randint(4, 16)):
            addr, length, size = random_transfer(rng, tb.size_max)
            kind = rng.choice(("read", "write"))
            span = (addr, addr + length, kind)
            if any(lo < span[1] and span[0] < hi and "write" in (k, kind) for lo, hi, k in taken):
                continue
            taken.append(span)
            lock = AxiLockType.EXCLUSIVE if rng.random() < 0.05 else AxiLockType.NORMAL
            tasks.append(cocotb.start_soon(check(kind, addr, length, size, lock)))
        await Combine(*tasks)
        for task in tasks:
            task.result()   # re-raise a failed check
    await master.wait()
    await tb.check_dump(ref)


# ------------------------------------------------------------------------------------------------
# Raw channel drivers: every burst type, legal and not
# ------------------------------------------------------------------------------------------------

def random_burst(rng, ref):
    """``(kind, addr, len, size, burst)``: a random legal or illegal burst."""
    size_max = ref.size_max
    kind = rng.choices(["incr", "fixed", "wrap", "end", "illegal", "out", "cross", "page"],
                       [30, 12, 15, 10, 15, 8, 6, 4])[0]
    size = rng.choice([size_max, size_max] + list(range(size_max)))
    nb = 1 << size
    if kind in ("incr", "end", "cross", "out", "page"):
        len_ = rng.choice([0, 0, 1, 3, rng.randrange(16), rng.randrange(256)])
        if kind in ("incr", "end"):   # legal: inside one 4 KB page
            len_ = min(len_ + 1, PAGE // nb) - 1
        offset = rng.randrange(nb) if rng.random() < 0.5 else 0   # an unaligned start
        if kind == "incr":
            page = rng.randrange(MEM_SIZE // PAGE) * PAGE
            addr = page + rng.randrange((PAGE - (len_ + 1) * nb) // nb + 1) * nb + offset
        elif kind == "end":    # the last beat is the last of memory
            addr = MEM_SIZE - (len_ + 1) * nb + offset
        elif kind == "cross":  # crosses the end of memory: DECERR, nothing written
            len_ = max(len_, 1)
            addr = MEM_SIZE - rng.randrange(1, len_ + 1) * nb + offset
        elif kind == "page":   # crosses a 4 KB boundary (not allowed by AXI4): done linearly
            len_ = max(len_, 1)
            addr = (rng.randrange(1, MEM_SIZE // PAGE) * PAGE - rng.randrange(1, len_ + 1) * nb
                    + offset)
        else:
            addr = MEM_SIZE + rng.randrange(PAGE)
        return kind, addr, len_, size, Burst.INCR.value
    if kind == "fixed":
        return kind, rng.randrange(MEM_SIZE), rng.randrange(16), size, Burst.FIXED.value
    if kind == "wrap":
        len_ = rng.choice(WRAP_LENS)
        return kind, rng.randrange(MEM_SIZE // nb) * nb, len_, size, Burst.WRAP.value
    # Illegal: refused with SLVERR whatever the address.
    addr = rng.randrange(MEM_SIZE)
    choice = rng.randrange(5 if size_max < 7 else 4)
    if choice == 0:
        return kind, addr, rng.randrange(16), size, RESERVED_BURST
    if choice == 1:    # WRAP of a length other than 2, 4, 8, 16
        return kind, addr - addr % nb, rng.choice([0, 2, 4, 5, 14, 16, 255]), size, Burst.WRAP.value
    if choice == 2:    # WRAP from an address not aligned to the beat size
        size = max(size, 1)
        return kind, addr | 1, rng.choice(WRAP_LENS), size, Burst.WRAP.value
    if choice == 3:    # FIXED of more than 16 beats
        return kind, addr, rng.randrange(16, 256), size, Burst.FIXED.value
    return kind, addr, rng.randrange(8), rng.randint(size_max + 1, 7), Burst.INCR.value


def random_beats(rng, ref, addr, len_, size, burst):
    """``(data, strb)`` per beat: random data; strobes a random (often sparse) subset of the
    beat's byte lanes, never outside them (A3.4.3)."""
    out = []
    for a in ref.beat_addrs(addr, len_, size, burst):
        lanes = ref.lanes_of(a, min(size, ref.size_max)) if size <= ref.size_max else []
        mode = rng.random()
        strb = 0
        for lane in lanes:
            if mode < 0.4 or rng.random() < 0.5:
                strb |= 1 << lane
        out.append((rng.getrandbits(8 * ref.lanes), strb))
    return out


@cocotb.test()
async def raw_bursts(dut):
    """INCR/FIXED/WRAP, narrow, unaligned, sparse strobes, illegal and out-of-range bursts
    followed by good ones, many outstanding on random IDs, through the raw channel drivers."""
    from cocotbext.axi.axi_channels import AxiARSource, AxiAWSource, AxiBSink, AxiRSink, AxiWSource
    tb = Tb(dut, "raw_bursts")
    rng, cfg = tb.rng, tb.cfg
    await start(dut)
    ref = await tb.load_random()
    bus = tb.bus
    aw = AxiAWSource(bus.write.aw, dut.clk, dut.rst)
    w = AxiWSource(bus.write.w, dut.clk, dut.rst)
    b = AxiBSink(bus.write.b, dut.clk, dut.rst)
    ar = AxiARSource(bus.read.ar, dut.clk, dut.rst)
    r = AxiRSink(bus.read.r, dut.clk, dut.rst)
    tb.set_pauses({"raw_aw": aw, "raw_w": w, "raw_b": b, "raw_ar": ar, "raw_r": r})
    ids = 1 << cfg["id_width"]
    kinds, overtaken, bursts_read = {}, 0, 0

    for rnd in range(cfg["rounds"]):
        # Writes: all outstanding at once; W beats go in AW order (AXI4 has no write
        # interleaving), so overlapping bursts apply in that order, as in the reference.
        expect_b = {}
        bursts = [random_burst(rng, ref) for _ in range(rng.randint(8, 24))]
        for kind, addr, len_, size, burst in bursts:
            kinds[kind] = kinds.get(kind, 0) + 1
            id = rng.randrange(ids)
            beats = random_beats(rng, ref, addr, len_, size, burst)
            expect_b.setdefault(id, []).append((ref.write(addr, len_, size, burst, beats),
                                                kind, addr, len_, size, burst))
            t = aw._transaction_obj()
            t.awid, t.awaddr, t.awlen, t.awsize, t.awburst = id, addr, len_, size, burst
            await aw.send(t)
            for k, (data, strb) in enumerate(beats):
                t = w._transaction_obj()
                t.wdata, t.wstrb, t.wlast = data, strb, int(k == len_)
                await w.send(t)
        for _ in bursts:
            got = await b.recv()
            id = int(got.bid)
            assert expect_b.get(id), f"B for ID {id} with no write outstanding"
            resp, *what = expect_b[id].pop(0)   # same-ID order
            assert Resp(int(got.bresp)) == resp, \
                f"write {what}: B {int(got.bresp)}, expected {resp!r}"

        # Reads: all outstanding at once, then every R beat checked per ID, in order, contiguous.
        pending, seq = {}, 0
        nbeats = 0
        for _ in range(rng.randint(8, 24)):
            kind, addr, len_, size, burst = random_burst(rng, ref)
            kinds[kind] = kinds.get(kind, 0) + 1
            id = rng.randrange(ids)
            resp, words = ref.read(addr, len_, size, burst)
            pending.setdefault(id, []).append((seq, resp, words, (kind, addr, len_, size, burst)))
            seq, nbeats = seq + 1, nbeats + len_ + 1
            t = ar._transaction_obj()
            t.arid, t.araddr, t.arlen, t.arsize, t.arburst = id, addr, len_, size, burst
            await ar.send(t)
        order, cur = [], None
        for _ in range(nbeats):
            got = await r.recv()
            id = int(got.rid)
            if cur is None:
                assert pending.get(id), f"R beat for ID {id} with no read outstanding"
                cur = pending[id].pop(0) + (id, 0)   # same-ID order: the oldest
                order.append(cur[0])
            n, resp, words, what, cid, k = cur
            assert id == cid, f"read {what}: beat {k} interleaved with ID {id}"
            assert Resp(int(got.rresp)) == resp, \
                f"read {what} beat {k}: resp {int(got.rresp)}, expected {resp!r}"
            assert int(got.rdata) == words[k], f"read {what} beat {k}: data differs"
            assert int(got.rlast) == (k == len(words) - 1), f"read {what} beat {k}: rlast"
            cur = None if k == len(words) - 1 else (n, resp, words, what, cid, k + 1)
        overtaken += sum(1 for x, y in zip(order, order[1:]) if y < x)
        bursts_read += len(order)

    dut._log.info("bursts by kind: %s; read bursts overtaken: %d of %d", kinds, overtaken,
                  bursts_read)
    assert all(kinds.get(k) for k in ("incr", "fixed", "wrap", "end", "illegal", "out", "cross",
                                      "page")), kinds
    if cfg["reorder"]:
        assert overtaken > 0, "reorder=True but every read burst came back in AR order"
    else:
        assert overtaken == 0, "reorder=False but read bursts came back out of AR order"
    await tb.check_dump(ref)


# ================================================================================================
# pytest
# ================================================================================================

@pytest.mark.parametrize("width", sorted(CONFIGS, key=int))
def test_axi_memory_conformance(sim, width):
    from scin.sim.tops import endpoint
    params, kwargs = CONFIGS[width]
    make = lambda: endpoint.FlatAxiMemory(params, size=MEM_SIZE, **kwargs)
    rounds = 24 if sim == "verilator" else 4
    run_block(__file__, sim, "flat_axi_memory", make, f"{params!r},{MEM_SIZE},{kwargs!r}",
              top_module=endpoint, testcase=["master_random", "raw_bursts"],
              config={"data_width": params.data_width, "id_width": params.id_width,
                      "reorder": kwargs["reorder"], "rounds": rounds})
