"""The N-port switch (sim/tops/fabric.py: SwitchHarness = Switch + a Link and an endpoint-side
TransportPort per port, so credits are modelled in HDL and the testbench only drives per-class
packet streams at the endpoints and at the ISA side).

Every endpoint sends to every other endpoint at once, in several classes, mixed with INC=1 packets
to the ISA and ISA packets out to every endpoint, under idle cycles and backpressure. Every packet
must arrive whole, at the right place, in order per (source, class), with no error counted.
"""

import cocotb
import pytest
from cocotb.triggers import ClockCycles

from scin.hdl.packet import FabricParams, MsgClass, NUM_CLASSES
from scin.sim.tops import fabric
from scin.sim.testbench.env import start, tb_config, tb_rng, read_int
from scin.sim.testbench.streams import StreamSource, StreamSink, pause_generator
from scin.sim.testbench.traffic import random_packet, split_packets, header_of
from scin.tb.cocotb_run import run_block


CREDITS, LATENCY, ISA_DEPTH = 16, 4, 16


def params_for(ports):
    # Narrow flits keep builds and simulations fast; the switch logic does not depend on the width.
    return FabricParams(flit_width=64, addr_width=16, tag_width=8, max_payload=1024, ports=ports)


@cocotb.test()
async def switch_all_to_all(dut):
    cfg = tb_config()
    params = params_for(cfg["ports"])
    n, classes = params.ports, cfg["classes"]
    for p in range(n):
        for c in range(NUM_CLASSES):
            for name in ("ep_tx", "isa_tx"):
                getattr(dut, f"{name}__{p}__{c}__valid").value = 0
                getattr(dut, f"{name}__{p}__{c}__payload").value = 0
            for name in ("ep_rx", "isa_rx"):
                getattr(dut, f"{name}__{p}__{c}__ready").value = 1
    await start(dut)
    rng = tb_rng(dut, "all")
    idle = lambda: pause_generator(cfg["src_mode"], rng)
    bp = lambda: pause_generator(cfg["snk_mode"], rng)
    port_classes = [(p, c) for p in range(n) for c in classes]
    ep_tx = {(p, c): StreamSource(dut, f"ep_tx__{p}__{c}", idle()) for p, c in port_classes}
    isa_tx = {(p, c): StreamSource(dut, f"isa_tx__{p}__{c}", idle()) for p, c in port_classes}
    ep_rx = {(p, c): StreamSink(dut, f"ep_rx__{p}__{c}", bp()) for p, c in port_classes}
    isa_rx = {(p, c): StreamSink(dut, f"isa_rx__{p}__{c}", bp()) for p, c in port_classes}

    lengths = [0, 1, 37, 64, 200, params.max_payload]
    to_ep = {(q, c): {} for q in range(n) for c in classes}   # (q, c) -> {(inc, src): [packets]}
    to_isa = {(p, c): [] for p in range(n) for c in classes}
    for c in classes:
        for p in range(n):
            traffic = []
            for q in range(n):
                if q != p:
                    traffic += [("ep", q)] * cfg["packets"]
            traffic += [("isa", p)] * cfg["isa_packets"]
            rng.shuffle(traffic)  # destinations interleaved, so every output sees every input
            for kind, q in traffic:
                if kind == "ep":
                    pkt = random_packet(params, rng, c, lengths=lengths, src=p, dst=q, inc=0)
                    to_ep[q, c].setdefault((0, p), []).append(pkt)
                else:
                    pkt = random_packet(params, rng, c, lengths=lengths, src=p, dst=0, inc=1)
                    to_isa[p, c].append(pkt)
                ep_tx[p, c].send(*pkt)
            # The ISA sends to every endpoint too, sharing each link with core traffic.
            for _ in range(cfg["isa_packets"]):
                pkt = random_packet(params, rng, c, lengths=lengths, src=p, dst=p, inc=1)
                to_ep[p, c].setdefault((1, p), []).append(pkt)
                isa_tx[p, c].send(*pkt)

    timeout = 200_000
    for c in classes:
        for q in range(n):
            want = to_ep[q, c]
            sink = ep_rx[q, c]
            await sink.wait_for(sum(len(pk) for pkts in want.values() for pk in pkts), timeout)
            got = {}
            for pkt in split_packets(params, sink.items):
                h = header_of(params, pkt)
                got.setdefault((h["inc"], h["src"]), []).append(pkt)
            assert got.keys() == want.keys(), f"endpoint {q} {MsgClass(c).name}: sources differ"
            for key in want:
                assert got[key] == want[key], \
                    f"endpoint {q} {MsgClass(c).name}: packets from {key} differ"
            sink = isa_rx[q, c]
            await sink.wait_for(sum(map(len, to_isa[q, c])), timeout)
            assert split_packets(params, sink.items) == to_isa[q, c], \
                f"ISA port {q} {MsgClass(c).name}: packets differ"
    await ClockCycles(dut.clk, 50)
    for (q, c), sink in ep_rx.items():
        assert len(sink.items) == sum(len(pk) for pkts in to_ep[q, c].values() for pk in pkts), \
            f"endpoint {q}: extra flits"
    for p in range(n):
        value = read_int(getattr(dut, f"errors__{p}"))
        assert value == 0, f"port {p} dropped packets: error counters {value:#x}"
    assert read_int(dut.overflow) == 0, "a receive queue overflowed"
    assert read_int(dut.credit_error) == 0, "a credit came back twice"


@cocotb.test()
async def switch_latency(dut):
    """One header-only packet from endpoint 0 to endpoint 1 through the core on an idle switch:
    user stream to user stream, 2 link traversals + 2 x TRANSPORT_LATENCY + SWITCH_LATENCY."""
    from cocotb.triggers import RisingEdge
    from scin.hdl.switch import SWITCH_LATENCY
    from scin.hdl.transport import TRANSPORT_LATENCY
    cfg = tb_config()
    params = params_for(cfg["ports"])
    for p in range(params.ports):
        for c in range(NUM_CLASSES):
            for name in ("ep_tx", "isa_tx"):
                getattr(dut, f"{name}__{p}__{c}__valid").value = 0
            for name in ("ep_rx", "isa_rx"):
                getattr(dut, f"{name}__{p}__{c}__ready").value = 1
    await start(dut)
    c = MsgClass.REQ.value
    pkt = random_packet(params, tb_rng(dut, "latency"), c, src=0, dst=1, inc=0)
    tx_valid = getattr(dut, f"ep_tx__0__{c}__valid")
    tx_payload = getattr(dut, f"ep_tx__0__{c}__payload")
    rx_valid = getattr(dut, f"ep_rx__1__{c}__valid")
    tx_payload.value = pkt[0]
    tx_valid.value = 1
    await RisingEdge(dut.clk)   # accepted at this edge (an idle port is always ready)
    tx_valid.value = 0
    cycles = 0
    while not int(rx_valid.value):
        await RisingEdge(dut.clk)
        cycles += 1
        assert cycles < 1000, "packet lost"
    expected = 2 * cfg["latency"] + 2 * TRANSPORT_LATENCY + SWITCH_LATENCY
    dut._log.info("endpoint to endpoint: %d cycles (expected %d)", cycles, expected)
    assert cycles == expected


def _run(sim, ports, testcase="switch_all_to_all", **cfg):
    params = params_for(ports)
    top = f"switch_harness{ports}"
    run_block(__file__, sim, top,
              lambda: fabric.SwitchHarness(params, credits=CREDITS, latency=LATENCY,
                                           isa_depth=ISA_DEPTH),
              f"{params!r} {CREDITS} {LATENCY} {ISA_DEPTH}", top_module=fabric, testcase=testcase,
              config=dict(ports=ports, latency=LATENCY, **cfg))


ALL = list(range(NUM_CLASSES))


@pytest.mark.parametrize("src_mode,snk_mode", [("none", "none"), ("random", "random"),
                                               ("bursty", "bursty")])
def test_switch4(sim, src_mode, snk_mode):
    _run(sim, 4, classes=ALL, packets=3, isa_packets=2, src_mode=src_mode, snk_mode=snk_mode)


@pytest.mark.parametrize("src_mode,snk_mode", [("none", "none"), ("random", "random")])
def test_switch8(sim, src_mode, snk_mode):
    # 8 ports, every class, on both simulators (about 3 s of simulation on Icarus).
    _run(sim, 8, classes=ALL, packets=2, isa_packets=2, src_mode=src_mode, snk_mode=snk_mode)


def test_switch_latency(sim):
    _run(sim, 4, testcase="switch_latency")
