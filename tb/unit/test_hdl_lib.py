"""The shared hardware primitives of hdl/lib/ in Amaranth's simulator: the queue and the register
stage pass every payload in order under seeded idle and backpressure (the sink checks the stream
contract), the queue holds exactly ``depth``, the lowest set bit is found for every vector, and
the counters are summed by name; every parameter is checked, naming itself."""

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import Out

from scin.hdl.lib import COUNTER_BITS, LowestSet, Queue, StreamRegister, counters_layout, \
    sum_counters
from scin.tb.stream_bench import Sink, Source, run_bench, seeded_rng, step


def _pass_through(dut, mode, count=200, width=8):
    """Send ``count`` seeded payloads through ``dut`` (``i`` to ``o``); what came out, in order,
    and what went in."""
    rng = seeded_rng(type(dut).__name__, mode)
    idle, stall = (0.3, 0.3) if mode == "random" else (0, 0)
    src, sink = Source(dut.i, rng, idle), Sink(dut.o, rng, stall)
    src.queue = [rng.randrange(1 << width) for _ in range(count)]
    sent = list(src.queue)

    async def bench(ctx):
        for _ in range(20 * count):
            await step(ctx, [src], [sink])
            if len(sink.got) == count:
                return

    run_bench(dut, bench)
    return sink.got, sent


@pytest.mark.parametrize("mode", ["full_rate", "random"])
@pytest.mark.parametrize("make", [lambda: Queue(8, 3), lambda: StreamRegister(8)],
                         ids=["queue", "register"])
def test_payloads_pass_in_order(make, mode):
    got, sent = _pass_through(make(), mode)
    assert got == sent


def test_register_passes_one_payload_per_cycle():
    dut = StreamRegister(8)
    src, sink = Source(dut.i), Sink(dut.o)
    src.queue = list(range(50))

    async def bench(ctx):
        for _ in range(51):
            await step(ctx, [src], [sink])

    run_bench(dut, bench)
    assert sink.got == list(range(50))


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_queue_holds_depth_payloads(depth):
    dut = Queue(data.StructLayout({"a": 3, "b": 5}), depth)
    ready = []

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        for k in range(depth + 6):
            ctx.set(dut.i.payload.as_value(), k)
            ready.append(ctx.get(dut.i.ready))
            await ctx.tick()

    run_bench(dut, bench)
    assert sum(ready) == depth and not any(ready[-4:])
    if depth >= 3:
        assert ready == [1] * depth + [0] * 6      # no refusal while there is room


@pytest.mark.parametrize("width", [1, 3, 5])
def test_lowest_set_of_every_vector(width):
    dut = LowestSet(width)
    seen = []

    async def bench(ctx):
        for bits in range(1 << width):
            ctx.set(dut.bits, bits)
            seen.append((bits, ctx.get(dut.any), ctx.get(dut.index)))

    run_bench(dut, bench, clock=False)
    for bits, any_, index in seen:
        low = (bits & -bits).bit_length() - 1
        assert (any_, index) == ((1, low) if bits else (0, 0)), bits


class _Counting(wiring.Component):
    """A block that counts ``names`` every cycle ``go`` is high."""

    def __init__(self, *names):
        super().__init__({"go": wiring.In(1), "counters": Out(counters_layout(names))})

    def elaborate(self, platform):
        m = Module()
        c = self.counters
        for name, _ in c.shape():
            m.d.sync += c[name].eq(c[name] + self.go)
        return m


def test_counters_are_summed_by_name():
    a, b = _Counting("x", "y"), _Counting("y")
    total = Signal(counters_layout(["x", "y", "z"]))
    m = Module()
    m.submodules.a, m.submodules.b = a, b
    sum_counters(m, total, [a, b], constant=["z"])
    got = []

    async def bench(ctx):
        ctx.set(a.go, 1)
        ctx.set(b.go, 1)
        for _ in range(3):
            await ctx.tick()
        ctx.set(b.go, 0)
        for _ in range(2):
            await ctx.tick()
        got.append((ctx.get(total.x), ctx.get(total.y), ctx.get(total.z)))

    run_bench(m, bench)
    assert got == [(5, 8, 0)]
    assert counters_layout(["x"]).size == COUNTER_BITS


def test_counters_without_a_source_or_a_destination_are_refused():
    a = _Counting("x", "w")
    with pytest.raises(ValueError, match=r"without a source: \['y'\]; without a destination: "
                                         r"\['w'\]"):
        sum_counters(Module(), Signal(counters_layout(["x", "y"])), [a])
    with pytest.raises(ValueError, match="names must be among"):
        counters_layout(["x", "q"], known=["x"])


@pytest.mark.parametrize("make, error, message", [
    (lambda: Queue(8, 0), ValueError, "depth must be an integer >= 1, not 0"),
    (lambda: Queue(8, 2.0), TypeError, "depth must be an integer, not 2.0"),
    (lambda: Queue(True, 2), TypeError, "shape must be a width, a Shape or a data layout"),
    (lambda: StreamRegister("x"), TypeError, "shape must be a width, a Shape or a data layout"),
    (lambda: LowestSet(0), ValueError, "width must be an integer >= 1, not 0"),
])
def test_parameters_are_checked_by_name(make, error, message):
    with pytest.raises(error, match=message):
        make()
