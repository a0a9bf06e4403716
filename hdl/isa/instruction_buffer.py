"""InstructionBuffer: the preloaded descriptors (graph capture) the wave controller replays."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring, stream, data
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .descriptor import IsaParams, descriptor_layout


__all__ = ["InstructionBuffer", "load_layout"]


def load_layout(params):
    """One descriptor load: slot ``index``; ``last`` ends the program (its length is ``index + 1``)."""
    return data.StructLayout({"index": range(params.descriptors), "last": 1,
                              "desc": descriptor_layout()})


class InstructionBuffer(wiring.Component):
    """Descriptor memory with a load port and a read port.

    Loading is a stream of :func:`load_layout` words; the word with ``last`` set fixes the program
    length and pulses ``restart`` (the wave controller starts again from descriptor 0). Loads are
    accepted only while ``load_enable`` is high (the controller holds it high while no collective is
    running), so a program never changes under a running collective.

    The read port is synchronous: ``desc`` shows the descriptor at ``read_addr`` of the previous
    cycle.

    Members
    -------
    load : In(stream.Signature(load_layout))
    load_enable : In(1)
    read_addr : In(range(descriptors))
    desc : Out(descriptor_layout)
    length : Out(range(descriptors + 1))
        Program length (0 until a program is loaded).
    restart : Out(1)
        One-cycle pulse when a program has been loaded.
    """

    def __init__(self, params):
        if not isinstance(params, IsaParams):
            raise TypeError(f"params must be an IsaParams, not {params!r}")
        self._params = params
        super().__init__({
            "load":        In(stream.Signature(load_layout(params))),
            "load_enable": In(1),
            "read_addr":   In(range(params.descriptors)),
            "desc":        Out(descriptor_layout()),
            "length":      Out(range(params.descriptors + 1)),
            "restart":     Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        m.submodules.mem = mem = Memory(shape=descriptor_layout(), depth=p.descriptors, init=[])
        wr = mem.write_port()
        rd = mem.read_port()
        m.d.comb += [
            self.load.ready.eq(self.load_enable),
            wr.addr.eq(self.load.payload.index),
            wr.data.eq(self.load.payload.desc),
            wr.en.eq(self.load.valid & self.load.ready),
            rd.addr.eq(self.read_addr),
            self.desc.eq(rd.data),
        ]
        m.d.sync += self.restart.eq(0)
        with m.If(self.load.valid & self.load.ready & self.load.payload.last):
            m.d.sync += [self.length.eq(self.load.payload.index + 1), self.restart.eq(1)]
        return m
