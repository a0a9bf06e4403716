"""Stream drivers and monitors, and the pause generators that shape their traffic.

Every stream testbench uses :class:`StreamSource` and :class:`StreamSink`, which take a *pause
generator* (``idle`` on a source: cycles with ``valid`` low; ``backpressure`` on a sink: cycles with
``ready`` low), so idle cycles and backpressure are injected the same way everywhere.
"""

import cocotb
from cocotb.triggers import Event, RisingEdge

from .env import read_int


__all__ = ["StreamSource", "StreamSink", "random_pauses", "bursty_pauses", "PAUSE_MODES",
           "pause_generator"]


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


class _StreamEnd:
    """The handles of the stream ``prefix`` of ``dut`` (``clk``, ``valid``, ``ready``,
    ``payload``) and the pause generator (None: never pause) that one end of it is driven by."""

    def __init__(self, dut, prefix, pauses):
        self.clk = dut.clk
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.pauses = pauses


class StreamSource(_StreamEnd):
    """Drives an Amaranth ``stream`` input port ``<prefix>__{valid,ready,payload}``.

    ``valid`` never depends on ``ready``, and ``payload`` holds while ``valid`` is high, as the
    stream contract requires. Payloads are integers (pack a struct with
    :func:`scin.hdl.codec.pack`).
    """

    def __init__(self, dut, prefix, pauses=None):
        super().__init__(dut, prefix, pauses)
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


class StreamSink(_StreamEnd):
    """Receives from an Amaranth ``stream`` output port ``<prefix>__{valid,ready,payload}``.

    Collects every transferred payload (as an integer) in :attr:`items`, and checks the stream
    contract on the way: once ``valid`` is high it stays high, with the same payload, until the
    transfer happens.
    """

    def __init__(self, dut, prefix, pauses=None):
        super().__init__(dut, prefix, pauses)
        self.name = prefix
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

