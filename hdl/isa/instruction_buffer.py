"""InstructionBuffer: the preloaded descriptors (graph capture) the wave controller replays."""

from amaranth.hdl import Module, Signal, Array, Mux, Const
from amaranth.lib import wiring, stream, data
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from ..params import check_type
from .descriptor import IsaParams, descriptor_layout
from .interfaces import ProgramPort


__all__ = ["InstructionBuffer", "load_layout"]


def load_layout(params):
    """One descriptor load: slot ``index``; ``last`` ends the program (its length is
    ``index + 1``)."""
    return data.StructLayout({"index": range(params.descriptors), "last": 1,
                              "desc": descriptor_layout()})


class InstructionBuffer(wiring.Component):
    """Descriptor memory with a load port and a read port, and each sync resource's turn.

    Loading is a stream of :func:`load_layout` words; a program is loaded as slots ``0, 1, ...``
    in order (a word with ``index = 0`` starts a new program), and the word with ``last`` set fixes
    the program length and pulses ``restart`` (the wave controller starts again from descriptor
    0). Loads are accepted only while ``load_enable`` is high (the controller holds it high while
    no collective is running), so a program never changes under a running collective.

    ``program`` is the wave controller's port (:class:`~.interfaces.ProgramPort`); its members are
    named below without the ``program.`` prefix. The read port is synchronous: ``desc`` shows the
    descriptor at ``read_addr`` of the previous cycle.

    **Turns.** The descriptors of one sync resource must run in program order (each is one step
    of that group's sequence of collectives), while different resources are independent groups
    that must not wait for one another. While loading, the buffer chains each resource's
    descriptors in a ring (``next`` of each slot: the following slot on the same resource,
    wrapping to the first). After ``restart`` every resource's turn is its first descriptor;
    ``turn`` is high when the descriptor at ``read_addr`` (combinational, no read latency) is its
    resource's turn, and an ``advance`` pulse passes the turn of the resource of the slot at
    ``read_addr`` to its ``next``. A slot whose sync resource does not exist is never anyone's
    turn.

    Members
    -------
    load : In(stream.Signature(load_layout))
    program : In(ProgramPort)
        load_enable : In(1)
        read_addr : In(range(descriptors))
        desc : Out(descriptor_layout)
        length : Out(range(descriptors + 1))
            Program length (0 until a program is loaded).
        restart : Out(1)
            One-cycle pulse when a program has been loaded.
        loading : Out(1)
            A program load has begun (some word accepted) and its ``last`` word has not come yet.
        turn : Out(1)
            The slot at ``read_addr`` is its sync resource's next descriptor.
        advance : In(1)
            Pass the turn of the slot at ``read_addr``'s resource to the next slot on that resource.
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        super().__init__({
            "load":    In(stream.Signature(load_layout(params))),
            "program": In(ProgramPort(params)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        prog = self.program
        m.submodules.mem = mem = Memory(shape=descriptor_layout(), depth=p.descriptors, init=[])
        wr = mem.write_port()
        rd = mem.read_port()
        m.d.comb += [
            self.load.ready.eq(prog.load_enable),
            wr.addr.eq(self.load.payload.index),
            wr.data.eq(self.load.payload.desc),
            wr.en.eq(self.load.valid & self.load.ready),
            rd.addr.eq(prog.read_addr),
            prog.desc.eq(rd.data),
        ]
        m.d.sync += prog.restart.eq(0)
        with m.If(self.load.valid & self.load.ready):
            m.d.sync += prog.loading.eq(~self.load.payload.last)
        with m.If(self.load.valid & self.load.ready & self.load.payload.last):
            m.d.sync += [prog.length.eq(self.load.payload.index + 1), prog.restart.eq(1)]

        # Turn bookkeeping: a few bits per slot and per resource, in registers (not in the
        # descriptor memory) so that `turn` needs no read cycle.
        d, r = p.descriptors, p.sync_resources
        rbits = range(r + 1)                      # r: "no such resource"
        res_of = Array(Signal(rbits, name=f"res_of{i}", init=r) for i in range(d))
        nxt = Array(Signal(range(d), name=f"next{i}") for i in range(d))
        first = Array(Signal(range(d), name=f"first{s}") for s in range(r))
        last = Array(Signal(range(d), name=f"last{s}") for s in range(r))
        seen = Signal(r)
        cur = Array(Signal(range(d), name=f"turn{s}") for s in range(r))

        word = self.load.payload
        res = Signal(rbits)
        m.d.comb += res.eq(Mux(word.desc.sync < r, word.desc.sync, r))
        with m.If(self.load.valid & self.load.ready):
            index = word.index
            # A program starts at slot 0: forget the previous program's chains.
            seen_now = Mux(index == 0, 0, seen)
            m.d.sync += res_of[index].eq(res)
            with m.If(res < r):
                was = seen_now.bit_select(res, 1)
                # Append to the resource's ring: the previous last points here, this one points
                # back to the first (or to itself when it is the first).
                with m.If(was):
                    m.d.sync += [nxt[last[res]].eq(index), nxt[index].eq(first[res])]
                with m.Else():
                    m.d.sync += [nxt[index].eq(index), first[res].eq(index)]
                m.d.sync += [last[res].eq(index), seen.eq(seen_now | (Const(1, r) << res))]
            with m.Else():
                m.d.sync += [nxt[index].eq(index), seen.eq(seen_now)]

        here = res_of[prog.read_addr]
        with m.If(prog.restart):
            for s in range(r):
                m.d.sync += cur[s].eq(first[s])
        with m.Elif(prog.advance & (here < r)):
            m.d.sync += cur[here].eq(nxt[prog.read_addr])
        m.d.comb += prog.turn.eq((here < r) & (cur[here] == prog.read_addr))
        return m
