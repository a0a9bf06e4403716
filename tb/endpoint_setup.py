"""What the endpoint and bridge testbenches share (tb/block/test_endpoint.py,
tb/block/test_bridge_edges.py, tb/block/test_bridge_trains.py): the fabric parameters, transfer
monitors, idle inputs, packets as flit payloads, the bridge's packet-level driver
(:class:`BridgeTb`) and the AxiRam bench of the flat-AXI bridge with one page whose reads fail
(:func:`bridge_bench`)."""

import cocotb
from cocotb.triggers import RisingEdge

from scin.hdl.packet import FabricParams, Opcode, Status
from scin.sim.testbench.env import read_int, start, tb_config, tb_rng
from scin.sim.testbench.streams import StreamSink, StreamSource, pause_generator
from scin.sim.testbench.traffic import flit, flit_data, is_last


PARAMS = FabricParams()
FB = PARAMS.flit_bytes
#: The endpoint's switch port.
PORT = 2
MEM_SIZE = 1 << 16


class Cycles:
    """Counts rising edges, so monitors can stamp transfers."""

    def __init__(self, dut):
        self.now = 0
        cocotb.start_soon(self._run(dut.clk))

    async def _run(self, clk):
        while True:
            await RisingEdge(clk)
            self.now += 1


class Monitor:
    """Records ``(cycle, payload)`` of every transfer on ``<prefix>__{valid,ready,payload}``."""

    def __init__(self, dut, prefix, cycles):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.cycles, self.log = cycles, []
        cocotb.start_soon(self._run(dut.clk))

    async def _run(self, clk):
        while True:
            await RisingEdge(clk)
            if int(self.valid.value) and int(self.ready.value):
                self.log.append((self.cycles.now, read_int(self.payload)))


TOP_STREAMS = {  # (stream inputs driven by the testbench, stream outputs it takes) per top
    "axi_memory": (("axi__ar", "axi__aw", "axi__w", "load", "dump_req"),
                   ("axi__r", "axi__b", "dump_data")),
    "endpoint": (("rx__0", "rx__1", "rx__2", "rx__3", "load", "dump_req", "cmd"),
                 ("tx__0", "tx__1", "tx__2", "tx__3", "dump_data", "events")),
    "flat_axi_bridge": (("req_in", "write_in"), ("rdata_out", "wresp_out")),
}


def idle_inputs(dut):
    """Drive every input of the top to an idle value before reset (Icarus leaves undriven inputs
    at X, which would reach registers and handshakes)."""
    sources, sinks = TOP_STREAMS[dut._name]
    for prefix in sources:
        getattr(dut, f"{prefix}__valid").value = 0
        getattr(dut, f"{prefix}__payload").value = 0
    for prefix in sinks:
        getattr(dut, f"{prefix}__ready").value = 1
    if dut._name == "axi_memory":
        dut.poll__addr.value = 0


def pauses(dut, cfg, salt):
    """The configured pause mode (``random`` unless the test asks for none)."""
    return pause_generator(cfg.get("pauses", "random"), tb_rng(dut, salt))


def header(opcode, **fields):
    return PARAMS.pack_header(opcode=opcode, msg_class=class_of(opcode), **fields)


def class_of(opcode):
    from scin.hdl.packet import OPCODE_CLASS
    return OPCODE_CLASS[Opcode(opcode)]


def packet(opcode, payload=b"", **fields):
    """A packet as flit payloads (``PARAMS.flit_layout``)."""
    flits = [header(opcode, **fields)]
    for k in range(0, len(payload), FB):
        flits.append(int.from_bytes(payload[k:k + FB], "little"))
    return [flit(PARAMS, f, i == len(flits) - 1) for i, f in enumerate(flits)]


def split(items):
    """Flit payloads -> list of (header dict, payload bytes, flit count)."""
    out, cur = [], []
    for item in items:
        cur.append(item)
        if is_last(PARAMS, item):
            h = PARAMS.unpack_header(flit_data(PARAMS, cur[0]))
            body = b"".join(flit_data(PARAMS, f).to_bytes(FB, "little") for f in cur[1:])
            out.append((h, body, len(cur)))
            cur = []
    assert not cur, "a packet did not end with a last flit"
    return out


class BridgeTb:
    """Packet-level driver of a bridge; ``names`` maps req/write/rdata/wresp to port prefixes."""

    def __init__(self, dut, cfg, names, quiet=False):
        pz = (lambda salt: None) if quiet else (lambda salt: pauses(dut, cfg, salt))
        self.dut = dut
        self.req = StreamSource(dut, names["req"], pz("req"))
        self.wr = StreamSource(dut, names["write"], pz("write"))
        self.rdata = StreamSink(dut, names["rdata"], pz("rdata"))
        self.wresp = StreamSink(dut, names["wresp"], pz("wresp"))
        self.next_tag = 1
        self.seen_r = 0
        self.seen_w = 0
        self.responses = {}   # tag -> (header, payload)

    def tag(self):
        self.next_tag += 1
        return self.next_tag & 0xFFFF

    def write(self, addr, payload, *, src=1, inc=0, length=None):
        tag = self.tag()
        self.wr.send(*packet(Opcode.WRITE, payload, addr=addr, tag=tag, src=src, dst=PORT, inc=inc,
                             length=len(payload) if length is None else length))
        return tag

    def read(self, addr, length, *, src=1, inc=0):
        tag = self.tag()
        self.req.send(*packet(Opcode.READ, addr=addr, tag=tag, src=src, dst=PORT, inc=inc,
                              length=length))
        return tag

    def atomic(self, addr, addend, *, src=1, inc=1):
        tag = self.tag()
        self.req.send(*packet(Opcode.ATOMIC_ADD, addr=addr, tag=tag, src=src, dst=PORT, inc=inc,
                              length=addend))
        return tag

    async def wait(self, *tags, timeout=200_000):
        for _ in range(timeout):
            self._collect()
            if all(t in self.responses for t in tags):
                return [self.responses[t] for t in tags]
            await RisingEdge(self.dut.clk)
        missing = [t for t in tags if t not in self.responses]
        raise AssertionError(f"no response for tags {missing}")

    def _collect(self):
        for sink, attr in ((self.rdata, "seen_r"), (self.wresp, "seen_w")):
            items = sink.items
            seen = getattr(self, attr)
            # Only whole packets.
            ends = [i for i in range(seen, len(items)) if is_last(PARAMS, items[i])]
            if ends:
                for h, body, _ in split(items[seen:ends[-1] + 1]):
                    assert h["tag"] not in self.responses, f"two responses for tag {h['tag']}"
                    self.responses[h["tag"]] = (h, body)
                setattr(self, attr, ends[-1] + 1)

    def check(self, resp, *, opcode, status=Status.OK, length, src=1, inc=0):
        h, body = resp
        assert h["opcode"] == opcode.value, h
        assert h["msg_class"] == class_of(opcode).value, h
        assert h["status"] == status.value, (h, status)
        assert h["src"] == PORT and h["dst"] == src and h["inc"] == inc, h
        assert h["length"] == length, h
        if opcode == Opcode.READ_RESP:
            assert len(body) == -(-length // FB) * FB, (len(body), length)
            assert body[length:] == bytes(len(body) - length), "bytes past the length are not zero"
        else:
            assert body == b""
        return body[:length]


#: The flat-AXI bridge's packet ports, as :class:`BridgeTb` names them.
NAMES = {"req": "req_in", "write": "write_in", "rdata": "rdata_out", "wresp": "wresp_out"}
#: A 4 KB page of the memory whose reads fail: AxiRam answers a read whose data callback raises
#: with SLVERR (it wraps addresses past its size instead of refusing them).
FAULT_PAGE = 0x8000


def fail_page(interface, callback, page):
    """Make the AXI accesses of one 4 KiB ``page`` through ``interface`` (cocotbext-axi's
    ``ram.read_if`` or ``ram.write_if``) fail, by wrapping its data ``callback`` (``"_read"``
    or ``"_write"``); the RAM's backdoor ``read``/``write`` still reach the page."""
    access = getattr(interface, callback)

    async def faulty(address, *args):
        if page <= address < page + 4096:
            raise ValueError(f"injected {callback[1:]} fault at {address:#x}")
        return await access(address, *args)
    setattr(interface, callback, faulty)


def fail_reads_of_fault_page(ram):
    """Make ``ram``'s AXI reads of :data:`FAULT_PAGE` fail."""
    fail_page(ram.read_if, "_read", FAULT_PAGE)


async def bridge_bench(dut, salt):
    """Reset, an AxiRam of ``MEM_SIZE`` bytes with random pauses on every channel, the packet
    driver, and the seeded random source."""
    from cocotbext.axi import AxiBus, AxiRam
    cfg = tb_config()
    rng = tb_rng(dut, salt)
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=MEM_SIZE)
    for ch in (ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel,
               ram.read_if.ar_channel, ram.read_if.r_channel):
        ch.set_pause_generator(pauses(dut, cfg, f"{salt}-axi"))
    fail_reads_of_fault_page(ram)
    idle_inputs(dut)
    await start(dut)
    return BridgeTb(dut, cfg, NAMES), ram, rng

