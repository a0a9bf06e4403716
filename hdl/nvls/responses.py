"""ResponseBuffer: the reduction table's storage, filled by the members' READ_RESPs."""

from amaranth.hdl import Module, Signal, Array
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..lib import LowestSet
from ..packet import Opcode, Status
from ..params import check_type
from ..transport.signature import packet_signature
from .interfaces import STAMP_BITS, entry_alloc_signature, entry_view_signature
from .params import NvlsParams, reduce_alloc_layout, nvls_counters_layout


__all__ = ["ResponseBuffer"]


class ResponseBuffer(wiring.Component):
    """Every member's part of every reduction-table entry, in block RAM at that member's port.

    ``alloc`` offers the lowest free entry; its ``claim`` marks the entry it names busy with its
    members and payload flits, and passes on to ``order`` in the same cycle (``claim`` is ready
    while ``order`` is), so the sequencer takes the entries in request order; ``view.clear``
    frees ``view.cur``.

    ``rdata[m]`` (never back-pressured) carries member ``m``'s READ_RESPs. A response is taken
    when its tag names a busy entry that waits for ``m`` and has not yet had ``m``'s response:
    its header's cycle stamp and status are recorded and its payload flits are written to the
    entry, at most the entry's flits (the rest of an over-long response is dropped). A response
    that ends short counts as complete, so the sequencer never waits for flits that will not
    come (the missing flits hold whatever the entry held before). Any other packet is dropped
    whole and counted in ``stale_rdata``.

    Members
    -------
    alloc : In(entry_alloc_signature(reduce_alloc_layout, entry_bits))
    order : Out(stream.Signature(reduce_alloc_layout))
    rdata : In(packet_signature).array(ports)
    view : In(entry_view_signature)
    counters : Out(stale_rdata)
    """

    def __init__(self, params):
        self._params = check_type("params", params, NvlsParams)
        f = params.fabric
        super().__init__({
            "alloc":    In(entry_alloc_signature(reduce_alloc_layout(params), params.entry_bits)),
            "order":    Out(stream.Signature(reduce_alloc_layout(params))),
            "rdata":    In(packet_signature(f)).array(f.ports),
            "view":     In(entry_view_signature(params)),
            "counters": Out(nvls_counters_layout("stale_rdata")),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        n, k = p.fabric.ports, p.entries
        cnt_bits = ceil_log2(p.entry_flits + 1)
        busy = Signal(k)
        st = {
            "mask":  Array(Signal(n, name=f"mask{e}") for e in range(k)),
            "flits": Array(Signal(cnt_bits, name=f"flits{e}") for e in range(k)),
            "error": Array(Signal(name=f"error{e}") for e in range(k)),
        }
        stamp = Signal(STAMP_BITS)
        m.d.sync += stamp.eq(stamp + 1)

        m.submodules.lowest_free = lowest = LowestSet(k)
        m.d.comb += [lowest.bits.eq(~busy), self.alloc.free.eq(lowest.any),
                     self.alloc.entry.eq(lowest.index)]
        claim = self.alloc.claim
        a = claim.payload
        m.d.comb += [self.order.valid.eq(claim.valid), self.order.payload.eq(a),
                     claim.ready.eq(self.order.ready)]
        with m.If(claim.valid & claim.ready):
            m.d.sync += [busy.bit_select(a.entry, 1).eq(1), st["mask"][a.entry].eq(a.mask),
                         st["flits"][a.entry].eq(a.flits), st["error"][a.entry].eq(0)]
        cur = self.view.cur
        with m.If(self.view.clear):
            m.d.sync += busy.bit_select(cur, 1).eq(0)
        m.d.comb += self.view.error.eq(st["error"][cur])

        stale = Signal(n)
        m.d.sync += self.counters.stale_rdata.eq(self.counters.stale_rdata + sum(stale))
        for mem in range(n):
            self._member(m, mem, busy, st, stamp, stale)
        return m

    def _member(self, m, mem, busy, st, stamp, stale):
        """Member ``mem``'s collector, its RAM, and its part of the view of ``cur``."""
        p = self._params
        f = p.fabric
        k = p.entries
        ef = p.entry_flits
        cnt_bits = ceil_log2(ef + 1)
        s = self.rdata[mem]
        cur = self.view.cur
        seen = Signal(k, name=f"seen{mem}")
        done = Signal(k, name=f"done{mem}")      # the whole response is stored
        stamps = Array(Signal(STAMP_BITS, name=f"stamp{mem}_{e}") for e in range(k))
        m.submodules[f"ram{mem}"] = ram = Memory(shape=f.flit_width, depth=k * ef, init=[])
        wr, rd = ram.write_port(), ram.read_port()

        in_packet = Signal(name=f"in_packet{mem}")
        taking = Signal(name=f"taking{mem}")      # this packet's payload goes to entry ``at``
        at = Signal(p.entry_bits, name=f"at{mem}")
        flit = Signal(cnt_bits, name=f"flit{mem}")
        hdr = f.header_layout(s.payload.data[:f.header_layout.size])
        e_idx = hdr.tag[:p.entry_bits]
        known = (hdr.tag >> p.entry_bits == 0) & (e_idx < k) & (hdr.opcode == Opcode.READ_RESP)
        wanted = known & busy.bit_select(e_idx, 1) & st["mask"][e_idx].bit_select(mem, 1) & \
            ~seen.bit_select(e_idx, 1)
        m.d.comb += s.ready.eq(1)
        with m.If(s.valid):
            m.d.sync += in_packet.eq(~s.payload.last)
            with m.If(~in_packet):
                with m.If(wanted):
                    m.d.sync += [seen.bit_select(e_idx, 1).eq(1), stamps[e_idx].eq(stamp),
                                 at.eq(e_idx), flit.eq(0), taking.eq(~s.payload.last)]
                    with m.If(hdr.status != Status.OK):
                        m.d.sync += st["error"][e_idx].eq(1)
                    with m.If(s.payload.last):
                        m.d.sync += done.bit_select(e_idx, 1).eq(1)
                with m.Else():
                    m.d.comb += stale[mem].eq(1)
            with m.Elif(taking):
                room = flit < st["flits"][at]
                m.d.comb += [wr.en.eq(room), wr.addr.eq(at * ef + flit), wr.data.eq(s.payload.data)]
                m.d.sync += flit.eq(flit + room)
                with m.If(s.payload.last):
                    m.d.sync += [taking.eq(0), done.bit_select(at, 1).eq(1)]

        with m.If(self.view.clear):
            m.d.sync += [seen.bit_select(cur, 1).eq(0), done.bit_select(cur, 1).eq(0)]
        live = in_packet & taking & (at == cur)
        m.d.comb += [
            self.view.seen[mem].eq(seen.bit_select(cur, 1)),
            self.view.stamp[mem].eq(stamps[cur]),
            self.view.count[mem].eq(
                done.bit_select(cur, 1).replicate(cnt_bits) & st["flits"][cur] |
                live.replicate(cnt_bits) & flit),
            rd.en.eq(self.view.rd_en), rd.addr.eq(cur * ef + self.view.rd_flit),
            self.view.rd_data[mem].eq(rd.data),
        ]
