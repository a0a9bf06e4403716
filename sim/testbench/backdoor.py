"""The test backdoor of :class:`~scin.hdl.endpoint.memory.AxiMemory`, driven from cocotb."""

from scin.hdl.codec import pack
from scin.hdl.endpoint.memory import backdoor_load_layout

from .streams import StreamSource, StreamSink


__all__ = ["MemoryBackdoor"]


class MemoryBackdoor:
    """Word writes through an AxiMemory's ``load`` stream and reads through ``dump_req`` /
    ``dump_data``, on the ports ``load{suffix}``, ``dump_req{suffix}`` and ``dump_data{suffix}``
    of ``dut`` (``suffix`` is ``"__2"`` for endpoint 2 of a system, empty for a lone memory).

    ``data_bytes`` is the memory's word size; ``pauses``, if given, makes a pause generator for
    each of the three streams (idle cycles and backpressure). Addresses are byte addresses."""

    def __init__(self, dut, suffix="", *, data_bytes, pauses=None):
        self.fb = data_bytes
        width = len(getattr(dut, f"load{suffix}__payload"))
        self.layout = backdoor_load_layout(width - 8 * data_bytes, 8 * data_bytes)
        mk = lambda: pauses() if pauses else None
        self.load = StreamSource(dut, f"load{suffix}", mk())
        self.req = StreamSource(dut, f"dump_req{suffix}", mk())
        self.data = StreamSink(dut, f"dump_data{suffix}", mk())

    async def write(self, addr, raw):
        """Write ``raw`` from the word-aligned byte address ``addr``, zero-padding the last word."""
        if addr % self.fb:
            raise ValueError(f"backdoor writes start on a {self.fb}-byte word, not at {addr:#x}")
        raw = bytes(raw) + bytes(-len(raw) % self.fb)
        first = addr // self.fb
        self.load.send(*[pack(self.layout, addr=first + k // self.fb,
                              data=int.from_bytes(raw[k:k + self.fb], "little"))
                         for k in range(0, len(raw), self.fb)])
        await self.load.wait_idle()

    async def read(self, addr, length):
        """The ``length`` bytes from byte address ``addr`` (any alignment)."""
        first, count = addr // self.fb, -(-(addr % self.fb + length) // self.fb)
        self.data.items.clear()
        self.req.send(*range(first, first + count))
        await self.data.wait_for(count)
        raw = b"".join(w.to_bytes(self.fb, "little") for w in self.data.items[:count])
        return raw[addr % self.fb:addr % self.fb + length]
