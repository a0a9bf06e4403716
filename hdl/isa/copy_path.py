"""CopyPath: steers a slot past the datapath when an operation copies instead of reducing."""

from amaranth.hdl import Module
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from ..params import check_type
from .datapath.common import input_layout, output_layout
from .descriptor import IsaParams
from .interfaces import RunControl, feed_layout, result_layout


__all__ = ["CopyPath"]


class CopyPath(wiring.Component):
    """The feeder's flits go through the datapath, or, while ``run.msg.copy`` is set (AllGather,
    Broadcast: one participant read), straight to the write-back.

    A copied slot has one participant in its read set, and the feeder gives that participant's
    data and block scale as they are (``feed.payload.one``): they are written bit for bit (no
    arithmetic: -0, NaN payloads and INT8 block scales pass unchanged), with a zero status.
    ``copy`` holds for a whole collective, and a collective ends only after its last slot has been
    written back, so the two paths never hold flits of one collective at once.

    Members
    -------
    run : In(RunControl)
        ``msg.copy``.
    feed : In(stream.Signature(feed_layout))
        From the feeder: ``flit`` for the datapath, ``one`` to copy.
    dp_in : Out(stream.Signature(input_layout))
        To the datapath.
    dp_out : In(stream.Signature(output_layout))
        From the datapath.
    out : Out(stream.Signature(result_layout))
        To the write-back (with ``gather_pairs``, a copied slot's ``other`` flit too).
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        f = params.fabric
        inp, outp = input_layout(f.ports, f.flit_width), output_layout(f.flit_width)
        super().__init__({
            "run":    In(RunControl(params)),
            "feed":   In(stream.Signature(feed_layout(params))),
            "dp_in":  Out(stream.Signature(inp)),
            "dp_out": In(stream.Signature(outp)),
            "out":    Out(stream.Signature(result_layout(params))),
        })

    def elaborate(self, platform):
        m = Module()
        feed, out = self.feed, self.out
        flit = feed.payload.flit
        m.d.comb += self.dp_in.payload.eq(flit)
        with m.If(self.run.msg.copy):
            m.d.comb += [
                out.valid.eq(feed.valid), feed.ready.eq(out.ready),
                out.payload.dtype.eq(flit.dtype), out.payload.last.eq(flit.last),
                out.payload.data.eq(feed.payload.one.data),
                out.payload.scale.eq(feed.payload.one.scale),
                out.payload.status.eq(0),
            ]
            if self._params.gather_pairs:
                m.d.comb += out.payload.other.eq(feed.payload.other)
        with m.Else():
            m.d.comb += [
                self.dp_in.valid.eq(feed.valid),
                feed.ready.eq(self.dp_in.ready),
                out.valid.eq(self.dp_out.valid),
                *(out.payload[name].eq(self.dp_out.payload[name])
                  for name, _ in self.dp_out.payload.shape()),
                self.dp_out.ready.eq(out.ready),
            ]
        return m
