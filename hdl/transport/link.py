"""Link model: a full-duplex credit link with a configurable one-way latency.

This is a *simulation model* of the SerDes, PHY and cable between a port and its peer (the
prototype's Aurora link is about 70 cycles one way). It is synthesizable, but nothing in the
switch depends on it.
"""

from amaranth.hdl import Module, Signal, Cat, Mux, unsigned, Shape
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..packet import NUM_CLASSES
from ..paper import AURORA_CYCLES
from ..params import check_int
from .signature import check_params, link_end_signature


__all__ = ["DelayLine", "Link"]


class DelayLine(wiring.Component):
    """Delays a valid-only stream by exactly ``latency`` cycles.

    Whatever is on ``i`` (``valid`` and ``payload``) in cycle ``t`` appears on ``o`` in cycle
    ``t + latency``. For ``latency >= 2`` the line is a circular buffer in a
    :class:`~amaranth.lib.memory.Memory` of ``latency - 1`` entries read through its synchronous
    read port (the read register is the last stage), so a 70-cycle, 262-bit line costs one RAM
    instead of 18k flops and simulates just as cheaply. Entries written before the most recent reset
    are never delivered: ``o.valid`` stays low until the buffer has been written once all round.

    Parameters
    ----------
    shape : shape-like
        Payload shape.
    latency : int
        Delay in cycles, >= 1.

    Members
    -------
    i : In(stream.Signature(shape, always_ready=True))
    o : Out(stream.Signature(shape, always_ready=True))
    """

    def __init__(self, shape, latency):
        self._shape = shape
        self._latency = check_int("latency", latency, 1)
        sig = stream.Signature(shape, always_ready=True)
        super().__init__({"i": In(sig), "o": Out(sig)})

    @property
    def latency(self):
        return self._latency

    def elaborate(self, platform):
        m = Module()
        if self._latency == 1:
            m.d.sync += [self.o.valid.eq(self.i.valid), self.o.payload.eq(self.i.payload)]
            return m

        depth = self._latency - 1
        width = Shape.cast(self._shape).width
        mem = m.submodules.mem = Memory(shape=unsigned(width + 1), depth=depth, init=[])
        wp = mem.write_port()
        # Not transparent: returns the entry as it was before this cycle's write.
        rp = mem.read_port()
        ptr = Signal(range(depth))
        primed = Signal()     # every entry has been written since reset
        primed_q = Signal()   # ``primed`` aligned with the read port's output register
        m.d.sync += [
            ptr.eq(Mux(ptr == depth - 1, 0, ptr + 1)),
            primed_q.eq(primed),
        ]
        with m.If(ptr == depth - 1):
            m.d.sync += primed.eq(1)
        # Write slot ``ptr`` in cycle t and read its old content, written in cycle t - depth; the
        # read register delivers it in cycle t + 1: a delay of depth + 1 = latency cycles.
        m.d.comb += [
            wp.addr.eq(ptr), wp.en.eq(1), wp.data.eq(Cat(self.i.payload, self.i.valid)),
            rp.addr.eq(ptr), rp.en.eq(1),
            self.o.payload.eq(rp.data[:width]),
            self.o.valid.eq(rp.data[width] & primed_q),
        ]
        return m


class Link(wiring.Component):
    """A full-duplex credit link between two ports, ``a`` and ``b``.

    Flits sent on ``a.tx`` arrive on ``b.rx`` ``latency`` cycles later and vice versa; credits
    returned on ``b.rx_credit`` arrive on ``a.tx_credit`` ``latency`` cycles later and vice versa.
    Nothing is ever dropped or reordered. Connect a port's link end to ``a`` or ``b`` with
    :func:`amaranth.lib.wiring.connect`.

    Parameters
    ----------
    params : FabricParams
    latency : int
        One-way latency in cycles (>= 1), the same for flits and credits and for both directions;
        default :data:`~scin.hdl.paper.AURORA_CYCLES`, the prototype's link.

    Members
    -------
    a, b : In(link_end_signature)
        The two ends (flipped: the link receives what a port's link end sends).
    """

    def __init__(self, params, latency=AURORA_CYCLES):
        self._params = check_params(params)
        self._latency = check_int("latency", latency, 1)
        end = link_end_signature(params)
        super().__init__({"a": In(end), "b": In(end)})

    @property
    def latency(self):
        return self._latency

    def elaborate(self, platform):
        m = Module()
        flit = self._params.link_layout
        for name, src, dst in (("ab", self.a, self.b), ("ba", self.b, self.a)):
            fl = m.submodules[f"flits_{name}"] = DelayLine(flit, self._latency)
            cr = m.submodules[f"credits_{name[::-1]}"] = DelayLine(NUM_CLASSES, self._latency)
            m.d.comb += [
                fl.i.valid.eq(src.tx.valid), fl.i.payload.eq(src.tx.payload),
                dst.rx.valid.eq(fl.o.valid), dst.rx.payload.eq(fl.o.payload),
                # Credits for the flits src sent come back from dst.
                cr.i.valid.eq(dst.rx_credit.valid), cr.i.payload.eq(dst.rx_credit.payload),
                src.tx_credit.valid.eq(cr.o.valid), src.tx_credit.payload.eq(cr.o.payload),
            ]
        return m
