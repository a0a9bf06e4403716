"""RequestUnit: takes the GPUs' multimem requests and multicasts them to the group's members."""

from amaranth.hdl import Module, Signal, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ..packet import Opcode
from ..params import check_type
from ..transport.round_robin import round_robin
from ..transport.signature import packet_signature
from .interfaces import entry_alloc_signature
from .params import (NvlsParams, mc_load_layout, reduce_alloc_layout, ack_alloc_layout, fan_layout,
                     nvls_counters_layout)
from .table import MulticastTable


__all__ = ["RequestUnit"]


class RequestUnit(wiring.Component):
    """One request at a time, round robin over every port's REQ and WRITE streams.

    * ``READ`` (``ld_reduce``): claims the reduction-table entry ``reduce`` offers, then
      multicasts a ``READ`` of the members' local address, tagged with the entry, to every
      member.
    * ``ATOMIC_ADD`` (``red``) and ``WRITE`` (``st``): claim the ack-table entry ``ack`` offers
      and multicast the request, tagged with that entry, payload included.
    * A request outside every multicast group (or crossing a group's end), or an ``ld_reduce``
      whose length is not a whole number of flits between one flit and ``entry_bytes``, is
      *refused*: it still takes an entry, with no member and ``error`` set, so its answer
      (``DECERR``, a header-only READ_RESP for an ``ld_reduce``) comes through the same path as
      every other; a refused ``st``'s payload is dropped and counted in ``refused``.

    The multicast copies leave on ``fan`` with ``src`` = the switch's port, ``inc`` = 0, and the
    ``dst`` left for the engine to fill per member. A request waits (its stream is not read)
    while no entry of the kind it needs is free.

    Members
    -------
    req, wr : In(packet_signature).array(ports)
        Every port's NVLS-bound REQ and WRITE packets.
    load : In(stream.Signature(mc_load_layout))
        The multicast table's write port.
    reduce : Out(entry_alloc_signature(reduce_alloc_layout, entry_bits))
    ack : Out(entry_alloc_signature(ack_alloc_layout, ack_bits))
    fan : Out(stream.Signature(fan_layout))
    counters : Out(ld_reduces, stores, reds, refused)
        The requests taken, by kind, and refused.
    """

    def __init__(self, params):
        self._params = check_type("params", params, NvlsParams)
        f = params.fabric
        pkt = packet_signature(f)
        super().__init__({
            "req":          In(pkt).array(f.ports),
            "wr":           In(pkt).array(f.ports),
            "load":         In(stream.Signature(mc_load_layout(params))),
            "reduce":       Out(entry_alloc_signature(reduce_alloc_layout(params),
                                                      params.entry_bits)),
            "ack":          Out(entry_alloc_signature(ack_alloc_layout(params), params.ack_bits)),
            "fan":          Out(stream.Signature(fan_layout(params))),
            "counters":     Out(nvls_counters_layout("ld_reduces", "stores", "reds", "refused")),
        })

    def _select(self, m, sel):
        """The stream ``sel`` names (REQ streams first, then WRITE streams) as one valid,
        payload and ready."""
        f = self._params.fabric
        streams = [*self.req, *self.wr]
        s_valid, s_ready = Signal(), Signal()
        s_flit = Signal(f.flit_layout)
        with m.Switch(sel):
            for k, s in enumerate(streams):
                with m.Case(k):
                    m.d.comb += [s_valid.eq(s.valid), s_flit.eq(s.payload), s.ready.eq(s_ready)]
        return s_valid, s_flit, s_ready

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        m.submodules.table = table = MulticastTable(p)
        connect(m, flipped(self.load), table.load)

        last = Signal(range(2 * n))
        sel = Signal(range(2 * n))
        pick, any_ = round_robin(m, [s.valid for s in [*self.req, *self.wr]], last)
        s_valid, s_flit, s_ready = self._select(m, sel)
        hdr = f.header_layout(s_flit.data[:f.header_layout.size])
        is_read = hdr.opcode == Opcode.READ
        is_write = sel >= n
        # An ATOMIC_ADD's length is its addend: it touches one 32-bit word.
        m.d.comb += [table.addr.eq(hdr.addr),
                     table.length.eq(Mux(is_read | is_write, hdr.length, 4))]
        len_ok = (hdr.length != 0) & (hdr.length <= p.entry_bytes) & \
                 (hdr.length[:p.flit_shift] == 0)
        ok = table.hit & (~is_read | len_ok)
        mask = Mux(ok, table.group.members, 0)
        port = Mux(is_write, sel - n, sel)

        fan_hdr_v = Signal(f.header_layout)
        m.d.comb += [fan_hdr_v.eq(hdr), fan_hdr_v.src.eq(f.switch_port), fan_hdr_v.dst.eq(0),
                     fan_hdr_v.inc.eq(0), fan_hdr_v.status.eq(0), fan_hdr_v.addr.eq(table.local),
                     fan_hdr_v.tag.eq(Mux(is_read, self.reduce.entry, self.ack.entry))]

        claim_r, claim_a = self.reduce.claim, self.ack.claim
        m.d.comb += [
            claim_r.payload.entry.eq(self.reduce.entry),
            claim_r.payload.requester.eq(port), claim_r.payload.tag.eq(hdr.tag),
            claim_r.payload.flits.eq(Mux(ok, hdr.length[p.flit_shift:], 0)),
            claim_r.payload.mask.eq(mask),
            claim_r.payload.dtype.eq(table.group.dtype),
            claim_r.payload.error.eq(~ok),
            claim_a.payload.entry.eq(self.ack.entry),
            claim_a.payload.requester.eq(port), claim_a.payload.tag.eq(hdr.tag),
            claim_a.payload.mask.eq(mask), claim_a.payload.error.eq(~ok),
        ]
        fan_mask = Signal(n)
        fan_write = Signal()
        hdr_flit = Signal(f.flit_layout)
        with m.FSM(name="request"):
            with m.State("IDLE"):
                with m.If(any_):
                    m.d.sync += [sel.eq(pick), last.eq(pick)]
                    m.next = "DECODE"
            with m.State("DECODE"):
                # Take an entry and keep the multicast copy of the header; the header itself is
                # read from its stream once the copies have gone out.
                m.d.comb += [claim_r.valid.eq(is_read & self.reduce.free),
                             claim_a.valid.eq(~is_read & self.ack.free)]
                with m.If((claim_r.valid & claim_r.ready) | (claim_a.valid & claim_a.ready)):
                    c = self.counters
                    m.d.sync += [c.refused.eq(c.refused + ~ok),
                                 c.ld_reduces.eq(c.ld_reduces + (ok & is_read)),
                                 c.stores.eq(c.stores + (ok & is_write)),
                                 c.reds.eq(c.reds + (ok & ~is_read & ~is_write))]
                    m.d.sync += [fan_mask.eq(mask), fan_write.eq(is_write),
                                 hdr_flit.data.eq(fan_hdr_v.as_value()),
                                 hdr_flit.last.eq(s_flit.last)]
                    m.next = "HEADER"
            with m.State("HEADER"):
                m.d.comb += [self.fan.valid.eq(fan_mask != 0), self.fan.payload.flit.eq(hdr_flit),
                             self.fan.payload.mask.eq(fan_mask),
                             self.fan.payload.write.eq(fan_write),
                             self.fan.payload.header.eq(1),
                             s_ready.eq((fan_mask == 0) | self.fan.ready)]
                with m.If(s_ready):
                    # A refused st's payload, and any payload behind a READ or ATOMIC_ADD
                    # header (malformed), is read and dropped.
                    with m.If(~hdr_flit.last):
                        m.next = "DATA"
                    with m.Else():
                        m.next = "IDLE"
            with m.State("DATA"):
                forward = fan_write & (fan_mask != 0)
                m.d.comb += [self.fan.valid.eq(forward & s_valid), self.fan.payload.flit.eq(s_flit),
                             self.fan.payload.mask.eq(fan_mask), self.fan.payload.write.eq(1),
                             s_ready.eq(~forward | self.fan.ready)]
                with m.If(s_valid & s_ready & s_flit.last):
                    m.next = "IDLE"
        return m
