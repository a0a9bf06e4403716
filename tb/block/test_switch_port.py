"""One switch port (sim/tops/fabric.py: PortHarness = endpoint TransportPort + Link +
SwitchPort, the testbench playing the switch core and the ISA).

What is checked:

* INC demux of every message class: INC=1 packets reach ``isa_rx[c]``, INC=0 packets ``core_rx[c]``,
  whole and in order, under idle cycles and backpressure; ISA and core packets sent back reach the
  endpoint whole (never interleaved within a class) and in order per source;
* round-robin fairness on TX: ISA and core saturated alternate packet by packet and neither starves;
  one idle lets the other use the whole link (one flit per cycle);
* bad input: unknown opcode, opcode or class field in the wrong class, length over the maximum and
  dst out of range are each dropped whole with their payload and counted under the right kind,
  while the good packets around them pass intact; the port never hangs.
"""

import cocotb
import pytest
from cocotb.triggers import RisingEdge, ClockCycles

from scin.hdl.codec import unpack
from scin.hdl.switch.filter import error_layout
from scin.hdl.packet import FabricParams, MsgClass, Opcode, NUM_CLASSES
from scin.sim.tops import fabric
from scin.sim.testbench.env import start, tb_config, tb_rng, read_int
from scin.sim.testbench.streams import StreamSource, StreamSink, pause_generator
from scin.sim.testbench.traffic import random_packet, split_packets, make_packet, header_of
from scin.tb.cocotb_run import run_block


#: Narrow flits keep builds and simulations fast; the port logic does not depend on the width.
PARAMS = FabricParams(flit_width=64, addr_width=16, tag_width=8, max_payload=1024, ports=4)
CREDITS, LATENCY, ISA_DEPTH = 16, 4, 16
CLASSES = range(NUM_CLASSES)


def tie_off(dut, prefixes):
    """Idle every stream driven from Python that no driver owns: ``valid = 0`` on inputs,
    ``ready = 1`` on outputs (so nothing blocks behind an undriven signal)."""
    for prefix, is_input in prefixes:
        if is_input:
            getattr(dut, f"{prefix}__valid").value = 0
            getattr(dut, f"{prefix}__payload").value = 0
        else:
            getattr(dut, f"{prefix}__ready").value = 1


STREAMS = [(f"{name}__{c}", name.endswith("tx")) for name in ("ep_tx", "ep_rx", "isa_rx",
                                                              "isa_tx", "core_rx", "core_tx")
           for c in CLASSES]


def check_clean(dut):
    assert read_int(dut.overflow) == 0, "a receive queue overflowed"
    assert read_int(dut.credit_error) == 0, "a credit came back twice"


def errors(dut, handle=None):
    """The error counters, unpacked with the same layout the RTL uses."""
    value = read_int(dut.errors if handle is None else handle)
    return unpack(error_layout(), value)


async def expect(sink, packets, timeout=100_000):
    await sink.wait_for(sum(map(len, packets)), timeout_cycles=timeout)
    got = split_packets(PARAMS, sink.items)
    assert len(got) == len(packets), f"{sink.name}: {len(got)} packets, expected {len(packets)}"
    for k, (g, x) in enumerate(zip(got, packets)):
        assert g == x, f"{sink.name}: packet {k} differs"


@cocotb.test()
async def port_demux(dut):
    """Every class: INC=1 -> isa_rx, INC=0 -> core_rx; isa_tx and core_tx -> endpoint."""
    cfg = tb_config()
    tie_off(dut, STREAMS)
    await start(dut)
    rng = tb_rng(dut, "demux")
    idle = lambda: pause_generator(cfg["src_mode"], rng)
    bp = lambda: pause_generator(cfg["snk_mode"], rng)
    drv = {}
    for c in CLASSES:
        for name in ("ep_tx", "isa_tx", "core_tx"):
            drv[name, c] = StreamSource(dut, f"{name}__{c}", idle())
        for name in ("ep_rx", "isa_rx", "core_rx"):
            drv[name, c] = StreamSink(dut, f"{name}__{c}", bp())
    want = {}
    for c in CLASSES:
        to_isa, to_core, from_isa, from_core = [], [], [], []
        for k in range(cfg["packets"]):
            inc = rng.random() < 0.5
            pkt = random_packet(PARAMS, rng, c, inc=inc, src=1, dst=rng.randrange(PARAMS.ports))
            (to_isa if inc else to_core).append(pkt)
            drv["ep_tx", c].send(*pkt)
            # Sources told apart on the way back by ``inc``, as the ISA marks its packets.
            from_isa.append(random_packet(PARAMS, rng, c, inc=1, src=0, dst=1))
            from_core.append(random_packet(PARAMS, rng, c, inc=0, src=2, dst=1))
        for pkt in from_isa:
            drv["isa_tx", c].send(*pkt)
        for pkt in from_core:
            drv["core_tx", c].send(*pkt)
        want[c] = to_isa, to_core, from_isa, from_core
    for c in CLASSES:
        to_isa, to_core, from_isa, from_core = want[c]
        await expect(drv["isa_rx", c], to_isa)
        await expect(drv["core_rx", c], to_core)
        total = sum(map(len, from_isa + from_core))
        await drv["ep_rx", c].wait_for(total)
        got = split_packets(PARAMS, drv["ep_rx", c].items)
        # Whole packets (no interleaving within the class), and each source's order kept.
        assert [p for p in got if header_of(PARAMS, p)["inc"]] == from_isa
        assert [p for p in got if not header_of(PARAMS, p)["inc"]] == from_core
        assert len(got) == len(from_isa) + len(from_core)
    assert errors(dut) == {"bad_opcode": 0, "bad_length": 0, "bad_dst": 0}
    check_clean(dut)


async def _arbitrate(dut, rng, n_isa, n_core, flits):
    """Send ``n_isa`` ISA and ``n_core`` core WRITE packets of ``flits`` flits at once; return the
    order of sources seen at the endpoint and the cycles the endpoint received flits."""
    c = MsgClass.WRITE.value
    isa = StreamSource(dut, f"isa_tx__{c}")
    core = StreamSource(dut, f"core_tx__{c}")
    sink = StreamSink(dut, f"ep_rx__{c}")
    length = (flits - 1) * PARAMS.flit_bytes
    for k in range(n_isa):
        isa.send(*make_packet(PARAMS, opcode=Opcode.WRITE, length=length, inc=1, tag=k % 256))
    for k in range(n_core):
        core.send(*make_packet(PARAMS, opcode=Opcode.WRITE, length=length, inc=0, tag=k % 256))
    total = (n_isa + n_core) * flits
    valid, ready = getattr(dut, f"ep_rx__{c}__valid"), getattr(dut, f"ep_rx__{c}__ready")
    times = []
    cycle = 0
    while len(times) < total:
        await RisingEdge(dut.clk)
        cycle += 1
        assert cycle < 20 * total + 1000, "arbiter stalled"
        if int(valid.value) and int(ready.value):
            times.append(cycle)
    await sink.wait_for(total)
    packets = split_packets(PARAMS, sink.items)
    assert all(len(p) == flits for p in packets), "packets interleaved or cut"
    order = ["I" if header_of(PARAMS, p)["inc"] else "C" for p in packets]
    for s in (isa, core):
        s._task.cancel()
    sink._task.cancel()
    return "".join(order), times


@cocotb.test()
async def port_round_robin(dut):
    """Both saturated: strict alternation, neither starves. One idle: the other gets the link."""
    tie_off(dut, STREAMS)
    await start(dut)
    rng = tb_rng(dut, "rr")
    # Let both TX queues fill before the arbiter sees them, so both are saturated from the start.
    order, times = await _arbitrate(dut, rng, 12, 12, 9)
    dut._log.info("both saturated: %s", order)
    assert order.count("I") == 12 and order.count("C") == 12
    assert order in ("IC" * 12, "CI" * 12), f"not alternating packet by packet: {order}"
    for who in "IC":
        order, times = await _arbitrate(dut, rng, 16 if who == "I" else 0,
                                        16 if who == "C" else 0, 9)
        assert order == who * 16
        rate = (len(times) - 1) / (times[-1] - times[0])
        dut._log.info("%s alone: %.4f flits/cycle", who, rate)
        assert rate == 1.0, f"{who} alone gets {rate} flits/cycle, not the whole link"
    check_clean(dut)


def _bad_packets():
    """(packet, class, kind) for each malformed case; payloads included so a whole drop shows."""
    P = PARAMS
    mp = lambda **kw: make_packet(P, **kw)
    return [
        (mp(opcode=0, msg_class=MsgClass.REQ), MsgClass.REQ, "bad_opcode"),
        (mp(opcode=8, msg_class=MsgClass.WRITE, payload_flits=5), MsgClass.WRITE, "bad_opcode"),
        (mp(opcode=15, msg_class=MsgClass.RDATA, payload_flits=128), MsgClass.RDATA, "bad_opcode"),
        # A known opcode in the wrong class (WRITE sent as a request), and a lying class field.
        (mp(opcode=Opcode.WRITE, length=64, msg_class=MsgClass.REQ), MsgClass.REQ, "bad_opcode"),
        (mp(opcode=Opcode.WRITE_RESP, msg_class=MsgClass.REQ), MsgClass.WRESP, "bad_opcode"),
        (mp(opcode=Opcode.WRITE, length=P.max_payload + 1, payload_flits=3), MsgClass.WRITE,
         "bad_length"),
        (mp(opcode=Opcode.READ_RESP, length=(1 << P.length_width) - 1, payload_flits=128),
         MsgClass.RDATA, "bad_length"),
        (mp(opcode=Opcode.READ, length=P.max_payload + 1), MsgClass.REQ, "bad_length"),
        (mp(opcode=Opcode.WRITE, length=40, dst=P.ports), MsgClass.WRITE, "bad_dst"),
        (mp(opcode=Opcode.WRITE_RESP, dst=(1 << P.port_bits) - 1), MsgClass.WRESP, "bad_dst"),
    ]


@cocotb.test()
async def port_bad_input(dut):
    """Malformed packets dropped whole and counted; good ones around them intact; no hang."""
    cfg = tb_config()
    tie_off(dut, STREAMS)
    await start(dut)
    rng = tb_rng(dut, "bad")
    src = {c: StreamSource(dut, f"ep_tx__{c}", pause_generator(cfg["src_mode"], rng))
           for c in CLASSES}
    isa = {c: StreamSink(dut, f"isa_rx__{c}", pause_generator(cfg["snk_mode"], rng))
           for c in CLASSES}
    core = {c: StreamSink(dut, f"core_rx__{c}", pause_generator(cfg["snk_mode"], rng))
            for c in CLASSES}
    good = {c: ([], []) for c in CLASSES}
    counts = {"bad_opcode": 0, "bad_length": 0, "bad_dst": 0}

    def send_good(c, n):
        for _ in range(n):
            inc = rng.random() < 0.3
            pkt = random_packet(PARAMS, rng, c, inc=inc, dst=rng.randrange(PARAMS.ports))
            good[c][0 if inc else 1].append(pkt)
            src[c].send(*pkt)

    bad = _bad_packets()
    # Every bad packet twice, between good ones, in shuffled order; plus good ISA-bound packets
    # with an out-of-range dst, which are legal (dst is not used for the ISA).
    cases = bad + bad
    rng.shuffle(cases)
    for pkt, c, kind in cases:
        c = MsgClass(c).value
        send_good(c, rng.randint(0, 2))
        src[c].send(*pkt)
        counts[kind] += 1
        send_good(c, 1)
    ok_isa = make_packet(PARAMS, opcode=Opcode.WRITE, length=37, inc=1,
                         dst=(1 << PARAMS.port_bits) - 1)
    good[MsgClass.WRITE.value][0].append(ok_isa)
    src[MsgClass.WRITE.value].send(*ok_isa)
    for c in CLASSES:
        send_good(c, 2)  # good traffic right after the last bad packet
    for c in CLASSES:
        await expect(isa[c], good[c][0])
        await expect(core[c], good[c][1])
    await ClockCycles(dut.clk, 50)
    for c in CLASSES:
        assert len(isa[c].items) == sum(map(len, good[c][0])), "extra flits to the ISA"
        assert len(core[c].items) == sum(map(len, good[c][1])), "extra flits to the core"
    dut._log.info("error counters %s", errors(dut))
    assert errors(dut) == counts
    check_clean(dut)


def _run(sim, testcase, **cfg):
    top = "port_harness"
    run_block(__file__, sim, top,
              lambda: fabric.PortHarness(PARAMS, credits=CREDITS, latency=LATENCY,
                                         isa_depth=ISA_DEPTH),
              f"{PARAMS!r} {CREDITS} {LATENCY} {ISA_DEPTH}", top_module=fabric, testcase=testcase,
              config=cfg)


PAUSES = [("none", "none"), ("random", "random"), ("bursty", "bursty")]


@pytest.mark.parametrize("src_mode,snk_mode", PAUSES)
def test_demux(sim, src_mode, snk_mode):
    _run(sim, "port_demux", packets=10, src_mode=src_mode, snk_mode=snk_mode)


def test_round_robin(sim):
    _run(sim, "port_round_robin")


@pytest.mark.parametrize("src_mode,snk_mode", PAUSES)
def test_bad_input(sim, src_mode, snk_mode):
    _run(sim, "port_bad_input", src_mode=src_mode, snk_mode=snk_mode)
