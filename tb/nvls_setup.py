"""What the NVLS kernel testbenches share (tb/block/test_nvls_kernel.py, tb/system/test_ring.py):
the endpoint's configuration, packets as flit payloads, transfer monitors, a Python model of the
switch's NVLS engine (:class:`NvlsSwitch`) and the bench around the endpoint (:func:`setup`)."""

import random

import cocotb
from cocotb.triggers import RisingEdge

from scin.hdl.codec import pack, unpack
from scin.hdl.packet import FabricParams, MsgClass, Opcode, Status
from scin.hdl.endpoint.accelerator import (EventKind, command_layout, command_tag_mask,
                                           event_layout)
from scin.hdl.endpoint.kernel import kernel_tag
from scin.sim.testbench.backdoor import MemoryBackdoor
from scin.sim.testbench.env import read_int, start, tb_config, tb_rng
from scin.sim.testbench.streams import StreamSink, StreamSource, pause_generator
from scin.sim.testbench.traffic import flit, flit_data, is_last


PARAMS = FabricParams()
FB = PARAMS.flit_bytes
PORT = 2
MEM_SIZE = 1 << 16
LATENCY = 40
SW = PARAMS.switch_port
MC = PARAMS.multicast_base
KBIT = kernel_tag(PARAMS)
CMD = command_layout(PARAMS)
EVT = event_layout(PARAMS)


def nflits(length):
    return -(-length // FB)


def pauses(dut, cfg, salt):
    return pause_generator(cfg.get("pauses", "random"), tb_rng(dut, salt))


def packet(opcode, payload=b"", **fields):
    """A packet as flit payloads: the header, then ``payload`` cut into flits (zero-padded)."""
    flits = [PARAMS.pack_header(opcode=opcode, msg_class={
        Opcode.READ_RESP: MsgClass.RDATA, Opcode.WRITE_RESP: MsgClass.WRESP,
        Opcode.ATOMIC_ADD: MsgClass.REQ}[opcode], **fields)]
    flits += [int.from_bytes(payload[k:k + FB], "little") for k in range(0, len(payload), FB)]
    return [flit(PARAMS, f, i == len(flits) - 1) for i, f in enumerate(flits)]


class Monitor:
    """Every handshake on ``<prefix>__{valid,ready,payload}``, as ``(dut cycle, payload)``; the DUT
    cycle is the ``cycle`` output in the handshake's cycle, the clock of the events."""

    def __init__(self, dut, prefix):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.log = []
        cocotb.start_soon(self._run(dut))

    async def _run(self, dut):
        while True:
            await RisingEdge(dut.clk)
            if int(self.valid.value) and int(self.ready.value):
                self.log.append((read_int(dut.cycle), read_int(self.payload)))

    def packets(self, start=0):
        """Packets from log entry ``start`` on: dicts of header fields plus ``body`` (payload
        bytes), ``flits``, ``first`` and ``last`` (DUT cycles of their first and last flit)."""
        out, cur = [], []
        for cycle, item in self.log[start:]:
            cur.append((cycle, item))
            if is_last(PARAMS, item):
                h = PARAMS.unpack_header(flit_data(PARAMS, cur[0][1]))
                h.update(body=b"".join(flit_data(PARAMS, f).to_bytes(FB, "little")
                                       for _, f in cur[1:]),
                         flits=len(cur), first=cur[0][0], last=cur[-1][0])
                out.append(h)
                cur = []
        return out


class NvlsSwitch:
    """The switch side of NVLS as this endpoint sees it.

    * READ at a multicast address (ld_reduce): answered after a random delay with a READ_RESP
      (src = switch_port, same tag) of :meth:`reduced` bytes, or as ``read_faults[addr]`` says:
      ``slverr`` (header only, length 0), ``decerr`` (zeros), ``short`` (last flit missing),
      ``long`` (an extra flit), ``badlen`` (status OK, length one short). What was sent is kept in
      ``answers[addr]``.
    * WRITE: acknowledged after a random delay (status ``write_faults.get(addr, OK)``).
    * ATOMIC_ADD at a multicast address (red): added to this endpoint's memory word at ``addr -
      multicast_base`` through ``rx__0`` (the endpoint is a member), acknowledged to the requester
      after the member's WRITE_RESP. :meth:`peer_red` adds the other members' reds.
    Due responses go out in random order, so responses overtake one another.
    """

    def __init__(self, dut, cfg, rng, delay=(4, 90)):
        self.dut, self.rng, self.delay = dut, rng, delay
        pz = lambda salt: pauses(dut, cfg, salt)
        self.req = StreamSink(dut, "tx__0", pz("tx0"))
        self.wr = StreamSink(dut, "tx__1", pz("tx1"))
        self.rdata = StreamSource(dut, "rx__2", pz("rx2"))
        self.wresp = StreamSource(dut, "rx__3", pz("rx3"))
        self.member_req = StreamSource(dut, "rx__0", pz("rx0"))
        self.member_wresp = StreamSink(dut, "tx__3", pz("tx3"))
        self.member_rdata = StreamSink(dut, "tx__2")
        self.data_seed = rng.getrandbits(32)
        self.read_faults, self.write_faults, self.answers = {}, {}, {}
        self.pending = []           # (due cycle, source, flits)
        self.reds = {}              # member tag -> the requester's red header (None: a peer's)
        self.member_tag = 0x100
        self.now = 0
        self._seen = {"req": [0, []], "wr": [0, []], "mw": [0, []]}
        cocotb.start_soon(self._run())

    def reduced(self, addr, length):
        """The ld_reduce result at ``addr``: deterministic, different for every address."""
        return random.Random(f"{self.data_seed}:{addr}").randbytes(length)

    def _new_packets(self, key, sink):
        index, cur = self._seen[key]
        out = []
        for item in sink.items[index:]:
            cur.append(item)
            if is_last(PARAMS, item):
                h = PARAMS.unpack_header(flit_data(PARAMS, cur[0]))
                h["body"] = b"".join(flit_data(PARAMS, f).to_bytes(FB, "little") for f in cur[1:])
                out.append(h)
                cur = []
        self._seen[key] = [len(sink.items), cur]
        return out

    def _later(self, source, flits, spread=0):
        """Send ``flits`` on ``source`` after a random delay (``spread`` more cycles at most)."""
        delay = self.rng.randint(*self.delay) + self.rng.randint(0, spread)
        self.pending.append((self.now + delay, source, flits))

    def _answer_read(self, h):
        addr, length = h["addr"], h["length"]
        data = self.reduced(addr, length)
        fault = self.read_faults.get(addr)
        fields = dict(tag=h["tag"], src=SW, dst=h["src"], length=length, status=Status.OK)
        padded = data + bytes(-len(data) % FB)
        if fault == "slverr":
            fields.update(length=0, status=Status.SLVERR)
            padded = b""
        elif fault == "decerr":
            fields.update(status=Status.DECERR)
            padded = bytes(len(padded))
        elif fault == "short":
            padded = padded[:-FB]
        elif fault == "long":
            padded += bytes(range(1, FB + 1))
        elif fault == "badlen":
            fields.update(length=length - 1)
        self.answers[addr] = (fault, padded)
        # Long packets take long to stream: spread their delays as much, or the next response
        # would always be due before the current one ends and none could overtake another.
        self._later(self.rdata, packet(Opcode.READ_RESP, padded, **fields),
                    spread=3 * nflits(length))

    def peer_red(self, addr, addend=1):
        """Another member's red arriving at this endpoint's word (``addr`` multicast)."""
        self._member_add(addr, addend, None)

    def _member_add(self, addr, addend, red):
        tag, self.member_tag = self.member_tag, self.member_tag + 1
        self.reds[tag] = red
        self.member_req.send(*packet(Opcode.ATOMIC_ADD, tag=tag, src=SW, dst=PORT,
                                     length=addend, addr=addr - MC))

    async def _run(self):
        while True:
            await RisingEdge(self.dut.clk)
            self.now += 1
            for h in self._new_packets("req", self.req):
                assert h["addr"] >= MC, f"request outside the multicast range: {h}"
                if h["opcode"] == Opcode.READ.value:
                    self._answer_read(h)
                else:
                    assert h["opcode"] == Opcode.ATOMIC_ADD.value, h
                    self._member_add(h["addr"], h["length"], h)
            for h in self._new_packets("wr", self.wr):
                status = self.write_faults.get(h["addr"], Status.OK)
                self._later(self.wresp, packet(Opcode.WRITE_RESP, tag=h["tag"], src=SW,
                                               dst=h["src"], length=h["length"], status=status))
            for h in self._new_packets("mw", self.member_wresp):
                red = self.reds.pop(h["tag"])
                assert h["status"] == Status.OK.value, h
                if red is not None:
                    self._later(self.wresp, packet(Opcode.WRITE_RESP, tag=red["tag"], src=SW,
                                                   dst=red["src"], length=4, status=Status.OK))
            due = [p for p in self.pending if p[0] <= self.now]
            self.rng.shuffle(due)
            for p in due:
                self.pending.remove(p)
                p[1].send(*p[2])


class Bench:
    """The endpoint with the switch model, the command and event streams, and monitors."""

    def __init__(self, dut, cfg, rng):
        self.dut = dut
        self.cmd = StreamSource(dut, "cmd", pauses(dut, cfg, "cmd"))
        self.events = StreamSink(dut, "events", pauses(dut, cfg, "events"))
        self.switch = NvlsSwitch(dut, cfg, rng)
        self.mon = {name: Monitor(dut, name) for name in ("tx__0", "tx__1", "rx__2", "rx__3",
                                                          "rx__0", "events")}
        self.seen = 0
        self.got = []   # events read but not yet returned by events_until

    def send(self, op, **fields):
        assert fields.get("tag", 0) <= command_tag_mask(PARAMS)
        self.cmd.send(pack(CMD, op=op, **fields))

    def mark(self):
        """Where every monitor's log stands now."""
        return {k: len(m.log) for k, m in self.mon.items()}

    async def events_until(self, kind, tag, timeout=200_000):
        """Events up to and including the first of ``kind`` with ``tag``; returns the new ones."""
        for _ in range(timeout):
            while self.seen < len(self.events.items):
                e = unpack(EVT, self.events.items[self.seen])
                e["kind"] = EventKind(e["kind"])
                self.seen += 1
                self.got.append(e)
                if e["kind"] == kind and e["tag"] == tag:
                    out, self.got = self.got, []
                    return out
            await RisingEdge(self.dut.clk)
        raise AssertionError(f"no {kind.name} event with tag {tag:#x} in {timeout} cycles")


def idle_inputs(dut):
    for prefix in ("rx__0", "rx__1", "rx__2", "rx__3", "load", "dump_req", "cmd"):
        getattr(dut, f"{prefix}__valid").value = 0
        getattr(dut, f"{prefix}__payload").value = 0
    for prefix in ("tx__0", "tx__1", "tx__2", "tx__3", "dump_data", "events"):
        getattr(dut, f"{prefix}__ready").value = 1


async def setup(dut, salt):
    cfg = tb_config()
    rng = tb_rng(dut, salt)
    idle_inputs(dut)
    await start(dut)
    bench = Bench(dut, cfg, rng)
    bench.backdoor = MemoryBackdoor(dut, data_bytes=FB)
    return cfg, rng, bench

