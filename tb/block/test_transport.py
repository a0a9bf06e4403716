"""Transport layer: two TransportPorts joined by a Link (sim/tops/fabric.py: TransportPair).

What is checked:

* credit accounting under seeded random idle cycles and backpressure: no receive queue ever
  overflows, no credit is returned twice, every credit is back home once the link drains;
* nothing is dropped or reordered within a class, in both directions and all classes at once, for
  header-only, 1-flit, odd-length (37 B) and 128-flit packets;
* with credits covering the round trip (``credits_for_full_rate``) one class sustains exactly one
  flit per cycle and the one-way latency is ``latency + TRANSPORT_LATENCY``; with fewer credits the
  rate drops to ``credits / (2 * latency + CREDIT_LOOP_OVERHEAD)`` and traffic stays correct.
"""

import cocotb
import pytest
from cocotb.triggers import RisingEdge, ClockCycles

from scin.hdl.packet import FabricParams, MsgClass, NUM_CLASSES
from scin.hdl.transport import TRANSPORT_LATENCY, credits_for_full_rate
from scin.hdl.transport.port import CREDIT_LOOP_OVERHEAD
from scin.sim.tops import fabric
from scin.sim.testbench.env import start, tb_config, tb_rng, read_int
from scin.sim.testbench.streams import StreamSource, StreamSink, pause_generator
from scin.sim.testbench.traffic import random_packet, split_packets, make_packet, CLASS_OPCODE
from scin.tb.stream_bench import run_bench
from scin.tb.cocotb_run import run_block


#: Narrow flits keep the Verilator builds small; the transport logic does not depend on the width
#: (the 256-bit default is exercised by the switch tests). 128 flits of 8 bytes = 1 KB payloads.
PARAMS = FabricParams(flit_width=64, addr_width=16, tag_width=8, max_payload=1024)


class TB:
    """Drivers on every per-class stream of both ends, in both directions."""

    def __init__(self, dut, rng, src_mode="none", snk_mode="none"):
        self.dut = dut
        self.src = {(e, c): StreamSource(dut, f"{e}_tx__{c}", pause_generator(src_mode, rng))
                    for e in "ab" for c in range(NUM_CLASSES)}
        self.snk = {(e, c): StreamSink(dut, f"{e}_rx__{c}", pause_generator(snk_mode, rng))
                    for e in "ab" for c in range(NUM_CLASSES)}

    def check_clean(self):
        assert read_int(self.dut.overflow) == 0, "a receive queue overflowed"
        assert read_int(self.dut.credit_error) == 0, "a credit came back twice"

    async def drain(self, credits, timeout=200_000):
        for s in self.src.values():
            await s.wait_idle(timeout)
        for _ in range(timeout):
            if all(read_int(getattr(self.dut, f"{e}_available__{c}")) == credits
                   for e in "ab" for c in range(NUM_CLASSES)):
                return
            await RisingEdge(self.dut.clk)
        raise AssertionError("credits did not all come home")


@cocotb.test()
async def transport_traffic(dut):
    """Random packets in every class, both directions, with idle cycles and backpressure."""
    cfg = tb_config()
    await start(dut)
    rng = tb_rng(dut, "traffic")
    tb = TB(dut, rng, cfg["src_mode"], cfg["snk_mode"])
    expected = {}
    for e in "ab":
        for c in range(NUM_CLASSES):
            pkts = [random_packet(PARAMS, rng, c) for _ in range(cfg["packets"])]
            expected[(e, c)] = pkts
            for p in pkts:
                tb.src[(e, c)].send(*p)
    for (e, c), pkts in expected.items():
        peer = "b" if e == "a" else "a"
        sink = tb.snk[(peer, c)]
        await sink.wait_for(sum(map(len, pkts)), timeout_cycles=400_000)
        got = split_packets(PARAMS, sink.items)
        assert len(got) == len(pkts), f"{e}->{peer} class {MsgClass(c).name}: packet count"
        for k, (g, x) in enumerate(zip(got, pkts)):
            assert g == x, f"{e}->{peer} class {MsgClass(c).name}: packet {k} differs"
        tb.check_clean()
    await tb.drain(cfg["credits"])
    await ClockCycles(dut.clk, 20)
    for sink in tb.snk.values():
        other = ("b" if sink.name[0] == "a" else "a", int(sink.name[-1]))
        assert sum(1 for _ in sink.items) == sum(map(len, expected[other])), \
            f"{sink.name}: extra flits"
    tb.check_clean()


async def _measure(tb, classes, n_flits, credits, latency):
    """Saturate ``classes`` from a to b with no pauses; return (first-flit latency, rates)."""
    dut = tb.dut
    for c in classes:
        tb.snk[("b", c)].items.clear()
    per_class = {}
    for c in classes:
        flits = []
        while len(flits) < n_flits:
            flits += make_packet(PARAMS, opcode=CLASS_OPCODE[MsgClass(c)].value,
                                 length=PARAMS.max_payload, payload_seed=len(flits))
        per_class[c] = flits
    await RisingEdge(dut.clk)
    cycle = 0
    sent_at, got_at = {c: [] for c in classes}, {c: [] for c in classes}
    tx_valid = {c: getattr(dut, f"a_tx__{c}__valid") for c in classes}
    tx_ready = {c: getattr(dut, f"a_tx__{c}__ready") for c in classes}
    rx_valid = {c: getattr(dut, f"b_rx__{c}__valid") for c in classes}
    rx_ready = {c: getattr(dut, f"b_rx__{c}__ready") for c in classes}
    for c in classes:
        tb.src[("a", c)].send(*per_class[c])
    while any(len(got_at[c]) < len(per_class[c]) for c in classes):
        await RisingEdge(dut.clk)
        cycle += 1
        assert cycle < 50 * n_flits + 10 * latency, "traffic stalled"
        for c in classes:
            if int(tx_valid[c].value) and int(tx_ready[c].value):
                sent_at[c].append(cycle)
            if int(rx_valid[c].value) and int(rx_ready[c].value):
                got_at[c].append(cycle)
    for c in classes:
        await tb.snk[("b", c)].wait_for(len(per_class[c]))
        assert tb.snk[("b", c)].items == per_class[c], f"class {c}: data differs"
    tb.check_clean()
    lat = got_at[classes[0]][0] - sent_at[classes[0]][0]
    # Steady state: skip the first round trip's worth of flits, and stop when the first class
    # runs dry, so every class competes for the whole window.
    skip = min(credits, n_flits // 4)
    t0 = max(got_at[c][skip] for c in classes)
    t1 = min(got_at[c][-1] for c in classes)
    rates = {c: sum(1 for t in got_at[c] if t0 < t <= t1) / (t1 - t0) for c in classes}
    await tb.drain(credits)
    return lat, rates


@cocotb.test()
async def transport_rate(dut):
    """Latency and sustained rate, one class alone, then all classes together."""
    cfg = tb_config()
    credits, latency = cfg["credits"], cfg["latency"]
    await start(dut)
    rtt = 2 * latency + CREDIT_LOOP_OVERHEAD
    tb = TB(dut, tb_rng(dut, "rate"))
    lat, rates = await _measure(tb, [MsgClass.WRITE.value], cfg["flits"], credits, latency)
    dut._log.info("latency %d cycles (link %d), one-class rate %.4f flits/cycle with %d credits, "
                  "round trip %d", lat, latency, rates[1], credits, rtt)
    assert lat == latency + TRANSPORT_LATENCY
    expected = min(1.0, credits / rtt)
    if credits >= rtt:
        assert rates[1] == 1.0, f"rate {rates[1]} with {credits} >= {rtt} credits"
    else:
        assert abs(rates[1] - expected) < 0.02, f"rate {rates[1]}, expected {expected:.3f}"
    # All classes at once share the link one flit per cycle in total.
    lat, rates = await _measure(tb, list(range(NUM_CLASSES)), cfg["flits"] // 2, credits, latency)
    total = sum(rates.values())
    dut._log.info("all-class rates %s, total %.4f", rates, total)
    assert abs(total - min(1.0, NUM_CLASSES * expected)) < 0.03
    for r in rates.values():  # per-flit round robin: equal shares
        assert abs(r - total / NUM_CLASSES) < 0.02


def _run(sim, testcase, *, credits, latency, **cfg):
    top = "transport_pair"
    run_block(__file__, sim, top,
              lambda: fabric.TransportPair(PARAMS, credits=credits, latency=latency),
              f"{PARAMS!r} credits={credits} latency={latency}", top_module=fabric,
              testcase=testcase, config=dict(credits=credits, latency=latency, **cfg))


@pytest.mark.parametrize("src_mode,snk_mode", [("none", "none"), ("random", "random"),
                                               ("bursty", "random"), ("none", "bursty")])
@pytest.mark.parametrize("credits,latency", [(32, 5), (4, 3)], ids=["credits32", "credits4"])
def test_traffic(sim, credits, latency, src_mode, snk_mode):
    _run(sim, "transport_traffic", credits=credits, latency=latency, packets=12,
         src_mode=src_mode, snk_mode=snk_mode)


@pytest.mark.parametrize("credits,latency", [
    (credits_for_full_rate(20), 20),      # exactly the round trip: full rate
    (16, 20),                             # far too few: credits / round trip
    (256, 70),                            # the system's default link
], ids=["exact", "few", "default"])
def test_rate(sim, credits, latency):
    _run(sim, "transport_rate", credits=credits, latency=latency, flits=3 * 129)


@pytest.mark.parametrize("credits", [2, 3])
def test_credit_rx_takes_back_to_back_flits_of_the_smallest_window(credits):
    """A CreditRx of ``credits`` takes that many back-to-back flits of one class while nothing
    is read, without overflow, and delivers them in order. (At 2 credits this lost the second
    flit: Amaranth's SyncFIFOBuffered of depth 2 refuses a write in the cycle after a write into
    it while empty; `scin prove` found it, docs/VERIFICATION.md.) Amaranth's simulator, no build."""
    from scin.hdl.codec import pack
    from scin.hdl.transport import CreditRx

    dut = CreditRx(PARAMS, credits)
    cls = MsgClass.WRITE.value

    async def bench(ctx):
        for c in range(NUM_CLASSES):
            ctx.set(dut.o[c].ready, 0)
        for n in range(credits):
            ctx.set(dut.rx.valid, 1)
            ctx.set(dut.rx.payload.as_value(),
                    pack(PARAMS.link_layout, dict(flit=dict(data=100 + n, last=1), msg_class=cls)))
            await ctx.tick()
        ctx.set(dut.rx.valid, 0)
        for _ in range(4):
            await ctx.tick()
        assert not ctx.get(dut.overflow), "a back-to-back flit overflowed the queue"
        got = []
        ctx.set(dut.o[cls].ready, 1)
        for _ in range(3 * credits):
            if ctx.get(dut.o[cls].valid):
                got.append(ctx.get(dut.o[cls].payload.data))
            await ctx.tick()
        assert got == [100 + n for n in range(credits)]

    run_bench(dut, bench)
