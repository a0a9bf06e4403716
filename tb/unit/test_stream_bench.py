"""The shared stream drivers of the block tests (tb/stream_bench.py), on Amaranth's own FIFO: what
goes in comes out in order, with and without pauses, and a sink notices a payload that changes
while it waits (Amaranth's simulator; well under a second)."""

import pytest
from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from scin.tb.stream_bench import (Sink, Source, pauses, run_bench, seeded_rng, step,
                                  stream_get, stream_put)


def test_put_and_get_one_at_a_time():
    dut = SyncFIFOBuffered(width=8, depth=4)
    got = []

    async def bench(ctx):
        for v in (3, 5, 7):
            await stream_put(ctx, dut.w_stream, v)
        for _ in range(3):
            got.append(await stream_get(ctx, dut.r_stream))
    run_bench(dut, bench)
    assert got == [3, 5, 7]


@pytest.mark.parametrize("mode", ["eager", "random"])
def test_source_and_sink_keep_order_under_pauses(mode):
    dut = SyncFIFOBuffered(width=8, depth=4)
    rng = seeded_rng("fifo", mode)
    idle, stall = pauses(mode)
    src, snk = Source(dut.w_stream, rng, idle), Sink(dut.r_stream, rng, stall)
    src.queue = [rng.randrange(256) for _ in range(40)]
    want = list(src.queue)

    async def bench(ctx):
        for _ in range(400):
            await step(ctx, [src], [snk])
            if src.empty and len(snk.got) == len(want):
                break
    run_bench(dut, bench)
    assert snk.got == want


class _Fickle(wiring.Component):
    """A stream output whose payload counts up every cycle, valid always: it breaks the
    contract whenever the sink stalls."""
    o: Out(stream.Signature(8))
    go: In(1)

    def elaborate(self, platform):
        m = Module()
        count = Signal(8)
        m.d.sync += count.eq(count + 1)
        m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(count)]
        return m


def test_sink_notices_a_payload_that_changes_while_waiting():
    dut = _Fickle()
    rng = seeded_rng("fickle", "random")
    snk = Sink(dut.o, rng, stall=1.0)

    async def bench(ctx):
        for _ in range(3):
            await step(ctx, [], [snk])
    with pytest.raises(AssertionError, match="changed or left"):
        run_bench(dut, bench)
