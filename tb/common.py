"""Shared cocotb helpers: clock and reset, seeded randomness, stream drivers and monitors.

Every stream testbench uses :class:`StreamSource` and :class:`StreamSink`, which take a *pause
generator* (``idle`` on a source: cycles with ``valid`` low; ``backpressure`` on a sink: cycles with
``ready`` low), so idle cycles and backpressure are injected the same way everywhere. Randomness
comes from :func:`tb_rng`, which logs its seed so a failure can be replayed with ``SCIN_SEED=<seed>``.
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Event, RisingEdge
from cocotb.types import Logic


__all__ = ["tb_config", "tb_rng", "start", "StreamSource", "StreamSink", "random_pauses",
           "PAUSE_MODES", "pause_generator", "read_int"]

CLOCK_PERIOD_NS = 4  # 250 MHz, the prototype's fabric clock


def tb_config():
    """The configuration the pytest runner passed in ``SCIN_TB_CONFIG`` (a dict)."""
    return json.loads(os.environ.get("SCIN_TB_CONFIG", "{}"))


def tb_rng(dut, salt=""):
    """A :class:`random.Random` seeded from ``SCIN_SEED`` (or cocotb's random seed), logged."""
    base = os.environ.get("SCIN_SEED") or os.environ.get("COCOTB_RANDOM_SEED") or "1"
    seed = f"{base}:{salt}" if salt else base
    dut._log.info("random seed %r (replay with SCIN_SEED=%s)", seed, base)
    return random.Random(seed)


async def start(dut, reset_cycles=4):
    """Start the 250 MHz clock on ``clk`` and hold ``rst`` for ``reset_cycles`` cycles."""
    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
    dut.rst.value = 1
    await ClockCycles(dut.clk, reset_cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def read_int(handle):
    """The value of a signal as an unsigned integer; fails loudly on X or Z."""
    value = handle.value
    if not value.is_resolvable:
        raise AssertionError(f"{handle._name} is {value} (X or Z)")
    return int(value) if isinstance(value, Logic) else value.to_unsigned()


def random_pauses(rng, probability):
    """An endless pause generator: each cycle pauses with the given probability."""
    while True:
        yield rng.random() < probability


def bursty_pauses(rng, run=(1, 16), pause=(1, 16)):
    """An endless pause generator with runs of activity and runs of pauses."""
    while True:
        for _ in range(rng.randint(*run)):
            yield False
        for _ in range(rng.randint(*pause)):
            yield True


PAUSE_MODES = ("none", "random", "bursty")


def pause_generator(mode, rng, probability=0.3):
    """A pause generator by name: ``none`` (never pause), ``random`` or ``bursty``."""
    if mode == "none":
        return None
    if mode == "random":
        return random_pauses(rng, probability)
    if mode == "bursty":
        return bursty_pauses(rng)
    raise ValueError(f"pause mode must be one of {PAUSE_MODES}, not {mode!r}")


class StreamSource:
    """Drives an Amaranth ``stream`` input port ``<prefix>__{valid,ready,payload}``.

    ``valid`` never depends on ``ready``, and ``payload`` holds while ``valid`` is high, as the
    stream contract requires. Payloads are integers (pack a struct with the layout's field offsets).
    """

    def __init__(self, dut, prefix, pauses=None):
        self.clk = dut.clk
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.pauses = pauses
        self.queue = []
        self.sent = 0
        self.valid.value = 0
        self.payload.value = 0
        self._valid = False  # what we drive on `valid` (a write is not readable back at once)
        self._wake = Event()
        self._task = cocotb.start_soon(self._run())

    def send(self, *payloads):
        """Queue payloads; they go out from the next clock edge on."""
        self.queue.extend(payloads)
        self._wake.set()

    @property
    def idle(self):
        return not self.queue and not int(self.valid.value)

    async def wait_idle(self, timeout_cycles=100_000):
        for _ in range(timeout_cycles):
            if self.idle:
                return
            await RisingEdge(self.clk)
        raise AssertionError(f"{self.valid._name[:-7]} did not drain in {timeout_cycles} cycles")

    async def _run(self):
        while True:
            if not self.queue and not self._valid:
                # Nothing queued and nothing offered: sleep until send() instead of waking every
                # cycle (long simulations spend their time here otherwise). send() is called just
                # after a clock edge, so driving now offers the payload at the next edge, as the
                # per-cycle loop below would.
                self._wake.clear()
                await self._wake.wait()
            else:
                await RisingEdge(self.clk)
                if self._valid and read_int(self.ready):
                    self.queue.pop(0)
                    self.sent += 1
            # Drive for the next cycle.
            pause = self.pauses is not None and next(self.pauses)
            if self.queue and not pause:
                self.payload.value = self.queue[0]
                self._valid = True
            elif self._valid and not int(self.ready.value):
                pass  # never drop valid while a transfer is pending
            else:
                self._valid = False
            self.valid.value = int(self._valid)


class StreamSink:
    """Receives from an Amaranth ``stream`` output port ``<prefix>__{valid,ready,payload}``.

    Collects every transferred payload (as an integer) in :attr:`items`, and checks the stream
    contract on the way: once ``valid`` is high it stays high, with the same payload, until the
    transfer happens.
    """

    def __init__(self, dut, prefix, pauses=None):
        self.clk = dut.clk
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.name = prefix
        self.pauses = pauses
        self.items = []
        self.ready.value = 0
        self._task = cocotb.start_soon(self._run())

    async def _run(self):
        pending = None  # payload offered but not taken at the previous edge
        was_valid = False
        while True:
            if self.pauses is None and not was_valid:
                # Always ready and nothing offered at the last edge: sleep until `valid` rises
                # (no per-cycle Python), then take the payload at the next edge.
                self.ready.value = 1
                await RisingEdge(self.valid)
            await RisingEdge(self.clk)
            # Values read right after the edge are the ones the DUT presented at the edge.
            was_valid = bool(int(self.valid.value))
            if was_valid:
                payload = read_int(self.payload)
                if pending is not None:
                    assert payload == pending, (f"{self.name}: payload changed while valid was "
                                                f"held ({pending:#x} -> {payload:#x})")
                if int(self.ready.value):
                    self.items.append(payload)
                    pending = None
                else:
                    pending = payload
            else:
                assert pending is None, f"{self.name}: valid dropped before the transfer"
            pause = self.pauses is not None and next(self.pauses)
            self.ready.value = 0 if pause else 1

    async def wait_for(self, count, timeout_cycles=100_000):
        for _ in range(timeout_cycles):
            if len(self.items) >= count:
                return
            await RisingEdge(self.clk)
        raise AssertionError(f"{self.name}: got {len(self.items)} of {count} items "
                             f"in {timeout_cycles} cycles")



def cocotb_module(file):
    """The importable name of a testbench file (``scin.tb.<stem>``), for ``run_cocotb``."""
    from pathlib import Path
    return f"scin.tb.{Path(file).stem}"
