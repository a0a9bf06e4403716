"""AckTable: gathers the members' WRITE_RESPs of each st and red, and answers the requester once."""

from amaranth.hdl import Module, Signal, Mux, Cat
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ..lib import LowestSet, StreamRegister
from ..packet import MsgClass, Opcode, Status
from ..params import check_type
from ..transport.signature import packet_signature
from .interfaces import entry_alloc_signature
from .params import NvlsParams, ack_alloc_layout, out_layout, nvls_counters_layout


__all__ = ["AckTable"]


class AckTable(wiring.Component):
    """``acks`` entries, each waiting for the WRITE_RESPs of a set of members.

    ``alloc`` offers the lowest free entry; its ``claim`` (always ready) arms the entry it names
    with the requester's port and tag and the members it waits for. A WRITE_RESP on
    ``wresp[m]`` whose tag names a busy entry still waiting for member ``m`` clears that member;
    a non-``OK`` status marks the entry. Anything else on ``wresp[m]`` (another opcode, a free
    entry, a member already answered or not waited for, a tag beyond the table) is dropped whole
    and counted in ``stale_wresp``. The ``wresp`` streams are never
    back-pressured, so the members' responses always drain.

    An entry with no member left to wait for (at once, for a refused request) is answered on
    ``out`` with one WRITE_RESP to its requester (``src`` = the switch's port, its tag, status
    ``OK``, ``SLVERR`` if a member answered with an error, ``DECERR`` if the request was refused),
    and freed; ready entries are answered lowest first, one per cycle.

    Members
    -------
    alloc : In(entry_alloc_signature(ack_alloc_layout, ack_bits))
    wresp : In(packet_signature).array(ports)
    out : Out(stream.Signature(out_layout))
    counters : Out(stale_wresp)
    """

    def __init__(self, params):
        self._params = check_type("params", params, NvlsParams)
        f = params.fabric
        super().__init__({
            "alloc":    In(entry_alloc_signature(ack_alloc_layout(params), params.ack_bits)),
            "wresp":    In(packet_signature(f)).array(f.ports),
            "out":      Out(stream.Signature(out_layout(params))),
            "counters": Out(nvls_counters_layout("stale_wresp")),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n, k = f.ports, p.acks
        busy = Signal(k)
        pending = [Signal(n, name=f"pending{e}") for e in range(k)]
        error = Signal(k)      # a member answered with an error
        refused = Signal(k)
        requester = [Signal(f.port_bits, name=f"requester{e}") for e in range(k)]
        tag = [Signal(f.tag_width, name=f"tag{e}") for e in range(k)]

        m.submodules.lowest_free = lowest = LowestSet(k)
        m.d.comb += [lowest.bits.eq(~busy), self.alloc.free.eq(lowest.any),
                     self.alloc.entry.eq(lowest.index)]
        claim = self.alloc.claim
        a = claim.payload
        m.d.comb += claim.ready.eq(1)
        with m.If(claim.valid):
            with m.Switch(a.entry):
                for e in range(k):
                    with m.Case(e):
                        m.d.sync += [busy[e].eq(1), pending[e].eq(a.mask), error[e].eq(0),
                                     refused[e].eq(a.error), requester[e].eq(a.requester),
                                     tag[e].eq(a.tag)]

        self._collect(m, busy, pending, error)
        self._answer(m, busy, pending, error, refused, requester, tag)
        return m

    def _collect(self, m, busy, pending, error):
        """Each member's WRITE_RESP stream: clear the member's pending bit of the tagged entry."""
        p = self._params
        f = p.fabric
        stale = Signal(f.ports)
        c = self.counters
        m.d.sync += c.stale_wresp.eq(c.stale_wresp + sum(stale))
        for mem in range(f.ports):
            s = self.wresp[mem]
            in_packet = Signal(name=f"in_packet{mem}")
            m.d.comb += s.ready.eq(1)
            hdr = f.header_layout(s.payload.data[:f.header_layout.size])
            e_idx = hdr.tag[:p.ack_bits]
            known = (hdr.tag >> p.ack_bits == 0) & (e_idx < p.acks) & \
                (hdr.opcode == Opcode.WRITE_RESP)
            waiting = Signal(name=f"waiting{mem}")
            for e in range(p.acks):
                with m.If(e_idx == e):
                    m.d.comb += waiting.eq(busy[e] & pending[e][mem])
            with m.If(s.valid):
                m.d.sync += in_packet.eq(~s.payload.last)
                with m.If(~in_packet):
                    with m.If(known & waiting):
                        for e in range(p.acks):
                            with m.If(e_idx == e):
                                m.d.sync += pending[e][mem].eq(0)
                                with m.If(hdr.status != Status.OK):
                                    m.d.sync += error[e].eq(1)
                    with m.Else():
                        m.d.comb += stale[mem].eq(1)

    def _answer(self, m, busy, pending, error, refused, requester, tag):
        """The lowest entry with nothing pending: its WRITE_RESP on ``out``, and the entry freed."""
        p = self._params
        f = p.fabric
        m.submodules.lowest_ready = lowest = LowestSet(p.acks)
        m.d.comb += lowest.bits.eq(Cat(busy[e] & (pending[e] == 0) for e in range(p.acks)))
        pick = lowest.index
        hdr = Signal(f.header_layout)
        for e in range(p.acks):
            with m.If(pick == e):
                # The constant fields are assigned here too, beside the selected ones: assigned
                # alone they become `always @*` blocks reading nothing, which Verilator rejects.
                m.d.comb += [hdr.opcode.eq(Opcode.WRITE_RESP), hdr.msg_class.eq(MsgClass.WRESP),
                             hdr.src.eq(f.switch_port), hdr.inc.eq(0), hdr.length.eq(0),
                             hdr.addr.eq(0), hdr.dst.eq(requester[e]), hdr.tag.eq(tag[e]),
                             hdr.status.eq(Mux(refused[e], Status.DECERR,
                                               Mux(error[e], Status.SLVERR, Status.OK)))]
        m.submodules.out = reg = StreamRegister(out_layout(p))
        connect(m, reg.o, flipped(self.out))
        m.d.comb += [reg.i.valid.eq(lowest.any), reg.i.payload.flit.data.eq(hdr.as_value()),
                     reg.i.payload.flit.last.eq(1), reg.i.payload.port.eq(hdr.dst)]
        with m.If(reg.i.valid & reg.i.ready):
            for e in range(p.acks):
                with m.If(pick == e):
                    m.d.sync += busy[e].eq(0)
