"""ReadTrainSplitter: the bridge's REQ-input stage that cuts a READ_WAVE into its pieces."""

from amaranth.hdl import Module, Signal, Const, Mux, Cat
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..packet import FabricParams, MsgClass, Opcode
from ..params import check_type
from ..transport.signature import packet_signature


__all__ = ["ReadTrainSplitter", "train_piece_bytes"]


def train_piece_bytes(params):
    """The cut size of a READ_WAVE train: :attr:`FabricParams.train_piece_bytes
    <scin.hdl.packet.FabricParams.train_piece_bytes>` (the protocol defines it, so the ISA and the
    models agree with the bridge)."""
    return params.train_piece_bytes


class ReadTrainSplitter(wiring.Component):
    """Cuts every ``READ_WAVE`` on a REQ packet stream into one header per piece; passes every
    other flit through unchanged.

    Contract
    --------
    * Input ``i``: received REQ-class packets. A packet whose header has ``opcode`` READ_WAVE and
      ``msg_class`` REQ asks for ``length`` **flits** at ``addr`` (docs/PROTOCOL.md).
    * It is **good** when ``length >= 1``, ``addr`` is flit-aligned and
      ``addr + length * flit_bytes <= 2**addr_width``. Its range is then cut at every multiple of
      :func:`train_piece_bytes` (``P``); piece ``j`` = 0, 1, ... goes out on ``o`` as a header
      with ``opcode`` READ_WAVE, ``addr`` = the piece's address, ``length`` = the piece's
      **bytes** (at most ``P``, flit-aligned, never crossing a 4 KB boundary: a legal READ of
      :class:`~scin.hdl.endpoint.bridge.AxiBridge`), ``tag`` = the request's tag + ``j``
      (mod ``2**tag_width``) and the request's other fields. Every piece has ``last`` = 1 except
      the final one, which carries the request's ``last`` (so a malformed tail, passed through
      behind it, is dropped by the receiver as the tail of that packet).
    * A READ_WAVE that is not good goes out as **one** header with ``length`` 0 (the request's
      ``tag`` and ``addr``): an access the bridge refuses with ``SLVERR``.
    * The request flit is taken (``i.ready``) with its final piece. Other packets, and the
      flits after a header, pass through combinationally (``o`` = ``i``).
    * Throughput: one output header per cycle; no latency (combinational, except the piece
      counter and the next piece's address, registered between pieces).

    Members
    -------
    i : In(packet_signature(params))
    o : Out(packet_signature(params))
    """

    def __init__(self, params):
        check_type("params", params, FabricParams)
        self._params = params
        pkt = packet_signature(params)
        super().__init__({"i": In(pkt), "o": Out(pkt)})

    def elaborate(self, platform):
        m = Module()
        P = self._params
        lg = exact_log2(P.flit_bytes)
        pg = exact_log2(train_piece_bytes(P)) - lg    # log2 of the piece size in flits
        fa_width = P.addr_width - lg                  # flit addresses
        hl = P.header_layout
        i, o = self.i, self.o
        h = hl(i.payload.data[:hl.size])

        tail = Signal()   # the flits after a header
        with m.If(i.valid & i.ready):
            m.d.sync += tail.eq(~i.payload.last)
        wave = ~tail & (h.opcode == Opcode.READ_WAVE) & (h.msg_class == MsgClass.REQ)

        busy = Signal()              # pieces of the current request already sent
        nxt = Signal(fa_width)       # the next piece's flit address
        j = Signal(P.tag_width)      # the next piece's index
        end = Signal(max(fa_width, P.length_width) + 1)
        m.d.comb += end.eq(h.addr[lg:] + h.length)
        good = (h.length != 0) & (h.addr[:lg] == 0) & (end <= (1 << fa_width))
        cur = Signal(fa_width)
        m.d.comb += cur.eq(Mux(busy, nxt, h.addr[lg:]))
        boundary = Signal(fa_width + 1)   # the first cut above cur
        m.d.comb += boundary.eq(Cat(Const(0, pg), cur[pg:] + 1))
        final = boundary >= end
        stop = Mux(final, end, boundary)
        flits = Signal(pg + 1)
        m.d.comb += flits.eq(stop - cur)

        out = Signal(hl)
        m.d.comb += [o.payload.eq(i.payload), o.valid.eq(i.valid), i.ready.eq(o.ready)]
        with m.If(wave):
            m.d.comb += [out.eq(h), o.payload.data[:hl.size].eq(out)]
            with m.If(good):
                m.d.comb += [out.addr.eq(Cat(Const(0, lg), cur)),
                             out.length.eq(Cat(Const(0, lg), flits)),
                             out.tag.eq(h.tag + j),
                             o.payload.last.eq(~final | i.payload.last),
                             i.ready.eq(o.ready & final)]
                with m.If(o.valid & o.ready):
                    m.d.sync += [busy.eq(~final), nxt.eq(stop), j.eq(Mux(final, 0, j + 1))]
            with m.Else():
                m.d.comb += out.length.eq(0)
        return m
