"""ReduceSequencer: reduces the reduction table's entries in request order, flit by flit."""

from amaranth.hdl import Module, Signal, Mux, Cat
from amaranth.lib import stream, wiring, data
from amaranth.lib.wiring import In, Out, connect, flipped
from amaranth.utils import ceil_log2

from ..lib import Queue
from ..packet import MsgClass, Opcode, Status
from ..params import check_type
from .params import NvlsParams, McDType, reduce_alloc_layout, out_layout
from .reducer import NvlsReducer
from .interfaces import entry_view_signature, STAMP_BITS


__all__ = ["ReduceSequencer"]


def _user_layout(params):
    """What rides beside each flit through the reducer: a header flit's bits (``header`` set)
    or a result flit's ``last``, and the requester's port."""
    f = params.fabric
    return data.StructLayout({"header": 1, "bits": f.header_layout.size, "last": 1,
                              "port": f.port_bits})


class ReduceSequencer(wiring.Component):
    """Answers each ``ld_reduce`` with a READ_RESP to its requester, in the order they were taken.

    For the oldest entry (``alloc``, queued in request order), once every member's response
    header has arrived, the members are ranked by arrival (stamp, then port: the order NVLS's
    switch would accumulate them in), and a READ_RESP header (``src`` = the switch's port, the
    requester's tag, ``length`` = the entry's bytes; status ``DECERR`` for a refused request,
    ``SLVERR`` if a member answered with an error, else ``OK``) goes through the reducer ahead
    of the data. Flit ``k`` is read from every member's part of the table as soon as every
    member's flit ``k`` has arrived (cut-through), and the :class:`NvlsReducer` accumulates the
    members in FP32 in arrival order and rounds once. After the last flit is read the entry is
    freed (``view.clear``).

    One flit per cycle when ``out`` is ready; ``out`` carries the packet flits with the port to
    send them on.

    Members
    -------
    alloc : In(stream.Signature(reduce_alloc_layout))
    view : Out(entry_view_signature)
    out : Out(stream.Signature(out_layout))
    """

    def __init__(self, params):
        self._params = check_type("params", params, NvlsParams)
        super().__init__({
            "alloc": In(stream.Signature(reduce_alloc_layout(params))),
            "view":  Out(entry_view_signature(params)),
            "out":   Out(stream.Signature(out_layout(params))),
        })

    def _order(self, m, mask):
        """Each member's rank among ``mask`` by arrival, and the members in rank order (``order[r]``
        is the member of rank ``r``), combinationally, as one value of ``n`` indices."""
        f = self._params.fabric
        n = f.ports
        bits = max(1, ceil_log2(n))
        stamps = self.view.stamp
        ranks = []
        for mem in range(n):
            # Member j arrived before ``mem``: an earlier stamp (serial order), or the same
            # stamp and a lower port.
            before = [((stamps[j] - stamps[mem])[:STAMP_BITS] >= 1 << (STAMP_BITS - 1)) |
                      ((stamps[j] == stamps[mem]) & (j < mem)) for j in range(n) if j != mem]
            others = [j for j in range(n) if j != mem]
            rank = Signal(range(n + 1), name=f"rank{mem}")
            m.d.comb += rank.eq(sum((mask[j] & b for j, b in zip(others, before)), start=0))
            ranks.append(rank)
        order = []
        for r in range(n):
            pick = 0
            for mem in range(n):
                hit = mask[mem] & (ranks[mem] == r)
                pick = pick | (hit.replicate(bits) & mem)
            slot = Signal(bits, name=f"order{r}")
            m.d.comb += slot.eq(pick)
            order.append(slot)
        return Cat(*order)

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        layout = reduce_alloc_layout(p)
        m.submodules.queue = queue = Queue(layout, depth=p.entries)
        connect(m, flipped(self.alloc), queue.i)
        user = _user_layout(p)
        m.submodules.reducer = red = NvlsReducer(flit_width=f.flit_width, members=n,
                                                 user_width=user.size)
        info = Signal(layout)
        mask = info.mask
        m.d.comb += self.view.cur.eq(info.entry)

        # Stage s1: the flit whose RAM read was issued last cycle, waiting for the reducer.
        s1_valid = Signal()
        s1_user = Signal(user)
        s1_order = Signal(red.i.payload.order.shape().size)
        s1_count = Signal(len(red.i.payload.count))
        s1_dtype = Signal(McDType)
        advance = ~s1_valid | red.i.ready
        m.d.comb += [red.i.valid.eq(s1_valid), red.i.payload.order.eq(s1_order),
                     red.i.payload.count.eq(s1_count), red.i.payload.dtype.eq(s1_dtype.as_value()),
                     red.i.payload.user.eq(s1_user), self.view.rd_en.eq(advance)]
        for mem in range(n):
            m.d.comb += red.i.payload.data[mem].eq(self.view.rd_data[mem])
        with m.If(advance):
            m.d.sync += s1_valid.eq(0)

        order = Signal(len(s1_order))
        arrival = self._order(m, mask)
        members = Signal(range(n + 1))
        m.d.comb += members.eq(sum(mask[j] for j in range(n)))
        flit = Signal(len(info.flits))
        counts_ok = Cat(~mask[j] | (self.view.count[j] > flit) for j in range(n)).all()
        hdr = Signal(f.header_layout)
        m.d.comb += [hdr.opcode.eq(Opcode.READ_RESP), hdr.msg_class.eq(MsgClass.RDATA),
                     hdr.src.eq(f.switch_port), hdr.dst.eq(info.requester), hdr.tag.eq(info.tag),
                     hdr.length.eq(info.flits << p.flit_shift),
                     hdr.status.eq(Mux(info.error, Status.DECERR,
                                       Mux(self.view.error, Status.SLVERR, Status.OK)))]
        load = [s1_valid.eq(1), s1_order.eq(order), s1_count.eq(Mux(members == 0, 1, members)),
                s1_dtype.eq(info.dtype), s1_user.port.eq(info.requester)]
        with m.FSM(name="sequence"):
            with m.State("IDLE"):
                m.d.comb += queue.o.ready.eq(1)
                with m.If(queue.o.valid):
                    m.d.sync += info.eq(queue.o.payload)
                    m.next = "WAIT"
            with m.State("WAIT"):
                with m.If((self.view.seen & mask) == mask):
                    m.d.sync += order.eq(arrival)
                    m.next = "HEADER"
            with m.State("HEADER"):
                with m.If(advance):
                    m.d.sync += [*load, s1_user.header.eq(1), s1_user.bits.eq(hdr.as_value()),
                                 s1_user.last.eq(info.flits == 0), flit.eq(0)]
                    m.next = "DATA"
                    with m.If(info.flits == 0):
                        m.next = "FREE"
            with m.State("DATA"):
                m.d.comb += self.view.rd_flit.eq(flit)
                with m.If(advance & counts_ok):
                    m.d.sync += [*load, s1_user.header.eq(0),
                                 s1_user.last.eq(flit == info.flits - 1), flit.eq(flit + 1)]
                    with m.If(flit == info.flits - 1):
                        m.next = "FREE"
            with m.State("FREE"):
                m.d.comb += self.view.clear.eq(1)
                m.next = "IDLE"

        o = red.o.payload
        ou = user(o.user)
        m.d.comb += [self.out.valid.eq(red.o.valid), red.o.ready.eq(self.out.ready),
                     self.out.payload.flit.data.eq(Mux(ou.header, ou.bits, o.data)),
                     self.out.payload.flit.last.eq(ou.last), self.out.payload.port.eq(ou.port)]
        return m
