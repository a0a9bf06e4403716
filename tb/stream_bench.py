"""Driving blocks in Amaranth's simulator from one async testbench (shared by the block tests).

Each bench runs cycle by cycle: inputs are set, the handshakes of the cycle are sampled, then the
clock ticks (:func:`step`). :class:`Source` drives a ``lib.stream`` input one payload at a time,
with seeded idle cycles; :class:`Sink` takes an output with seeded backpressure and checks the
stream contract (a payload holds while ``valid`` waits for ``ready``). :func:`stream_put` and
:func:`stream_get` move one payload for benches that need no pauses. Randomness comes from
:func:`seeded_rng`, which logs its seed: replay a failure with ``SCIN_SEED=<seed>``.
"""

import logging
import os
import random

from amaranth.sim import Simulator

__all__ = ["seeded_rng", "pauses", "run_bench", "port_value", "Source", "Sink", "step",
           "stream_put", "stream_get"]

log = logging.getLogger(__name__)


def seeded_rng(name, mode):
    """A :class:`random.Random` for bench ``name`` in stimulus ``mode``, its seed logged and
    printed (``SCIN_SEED`` replays it)."""
    base = os.environ.get("SCIN_SEED") or str(random.randrange(1 << 32))
    seed = f"{base}:{name}:{mode}"
    log.info("random seed %r (replay with SCIN_SEED=%s)", seed, base)
    print(f"random seed {seed!r} (replay with SCIN_SEED={base})")
    return random.Random(seed)


def pauses(mode):
    """``(idle, stall)``: how often a source idles and a sink stalls, per cycle, in ``mode``
    (``"random"``: 30 % each; any other: never)."""
    return (0.3, 0.3) if mode == "random" else (0, 0)


def run_bench(dut, bench, clock=True, period=1e-8):
    """Simulate ``dut`` with the async testbench ``bench`` (and a clock of ``period`` seconds
    on its sync domain unless ``clock`` is False) until the bench returns."""
    sim = Simulator(dut)
    if clock:
        sim.add_clock(period)
    sim.add_testbench(bench)
    sim.run()


def port_value(v):
    """The plain value behind a port (a View's bits, or the signal itself)."""
    return v.as_value() if hasattr(v, "as_value") else v


class Source:
    """Drives a stream input: one payload (an integer) at a time from ``queue``, held until it
    is taken; idles a cycle with probability ``idle`` (drawn from ``rng``)."""

    def __init__(self, stream, rng=None, idle=0.0):
        self.s, self.rng, self.idle = stream, rng, idle
        self.queue, self.cur, self.sent = [], None, 0

    def drive(self, ctx):
        if self.cur is None and self.queue and not (self.idle and self.rng.random() < self.idle):
            self.cur = self.queue.pop(0)
        ctx.set(self.s.valid, self.cur is not None)
        if self.cur is not None:
            ctx.set(port_value(self.s.payload), self.cur)

    def sample(self, ctx):
        """Before the tick: is the payload taken at it?"""
        if self.cur is not None and ctx.get(self.s.ready):
            self.taken, self.cur = self.cur, None
            self.sent += 1
            return True
        return False

    @property
    def empty(self):
        return self.cur is None and not self.queue

    @property
    def taken_last(self):
        """The ``last`` bit of the packet flit taken last (packet streams only)."""
        return bool(self.taken >> (len(self.s.payload.data)))


class Sink:
    """Takes a stream output into ``got``, stalling a cycle with probability ``stall`` (drawn
    from ``rng``), and checks that a payload waiting for ``ready`` neither changes nor leaves."""

    def __init__(self, stream, rng=None, stall=0.0):
        self.s, self.rng, self.stall = stream, rng, stall
        self.got, self.ready, self.waiting = [], True, None

    def drive(self, ctx):
        self.ready = not (self.stall and self.rng.random() < self.stall)
        ctx.set(self.s.ready, self.ready)

    def sample(self, ctx):
        valid = ctx.get(self.s.valid)
        payload = ctx.get(port_value(self.s.payload))
        if self.waiting is not None:
            assert valid and payload == self.waiting, \
                "a payload changed or left before it was taken"
        self.waiting = None
        if valid and self.ready:
            self.got.append(payload)
        elif valid:
            self.waiting = payload


async def step(ctx, sources=(), sinks=(), probe=None):
    """Drive the streams, call ``probe()`` (inputs set, before the edge), sample the handshakes,
    tick; returns which sources were taken."""
    for s in list(sources) + list(sinks):
        s.drive(ctx)
    if probe is not None:
        probe()
    taken = [s.sample(ctx) for s in sources]
    for s in sinks:
        s.sample(ctx)
    await ctx.tick()
    return taken


async def stream_put(ctx, stream, payload):
    """Offer ``payload`` on the input ``stream`` until it is taken (at least one cycle)."""
    ctx.set(stream.valid, 1)
    ctx.set(stream.payload, payload)
    await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def stream_get(ctx, stream):
    """Be ready on the output ``stream`` until it is valid; the payload taken."""
    ctx.set(stream.ready, 1)
    payload, = await ctx.tick().sample(stream.payload).until(stream.valid)
    ctx.set(stream.ready, 0)
    return payload
