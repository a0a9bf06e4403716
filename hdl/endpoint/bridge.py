"""AxiBridge: protocol translation between fabric packets and AXI4 manager transactions."""

from types import SimpleNamespace

from amaranth.hdl import Module, Signal, Const, Mux, Cat
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out, connect, flipped
from amaranth.utils import bits_for, exact_log2

from ..packet import FabricParams, MsgClass, Opcode
from ..params import check_int, check_type
from ..transport.signature import packet_signature
from .axi import AxiParams, Burst, Resp, axi_signature
from .read_train import ReadTrainSplitter


__all__ = ["AxiBridge", "bridge_axi_params", "AXI_BOUNDARY"]

#: An AXI burst must not cross a 4 KB address boundary (AMBA AXI4, A3.4.1).
AXI_BOUNDARY = 4096


def bridge_axi_params(params, outstanding=16):
    """The AXI bus an :class:`AxiBridge` drives: flit-wide data, the fabric's address width, IDs
    ``0 .. outstanding - 1`` for reads plus ``outstanding`` for the atomic unit, a 1-bit user field
    (the INC flag)."""
    return AxiParams(data_width=params.flit_width, addr_width=params.addr_width,
                     id_width=bits_for(outstanding), user_width=1)


class AxiBridge(wiring.Component):
    """Turns received REQ/WRITE packets into AXI4 transactions and AXI responses into packets.

    Request -> AXI
    --------------
    ``READ`` (on ``req_in``) becomes one AR burst, ``WRITE`` (on ``write_in``) one AW burst plus its
    W beats, ``ATOMIC_ADD`` (on ``req_in``) a read-modify-write (below). ``axuser[0]`` carries the
    request's ``inc``. Payload byte ``k`` goes to address ``addr + k`` (docs/PROTOCOL.md).

    An access is **legal** when ``1 <= length <= max_payload`` and either

    * ``addr`` is flit-aligned (a burst of ``ceil(length / flit_bytes)`` full-width beats; the last
      write beat's strobes cover only the bytes written), or
    * it lies inside one flit: ``addr % flit_bytes + length <= flit_bytes`` (one beat, data shifted
      to its byte lanes, strobes on exactly those bytes; e.g. 4- or 8-byte flag words),

    and it does not cross a 4 KB boundary and needs at most 256 beats (AXI4 burst rules), and a
    WRITE header is followed by payload. Anything else is answered with status ``SLVERR`` without
    touching memory (a READ error response has ``length`` 0 and no payload).

    ``READ_WAVE`` (on ``req_in``; ``length`` in flits) is cut by a :class:`ReadTrainSplitter` in
    front of the REQ paths into one READ per piece (every multiple of
    :func:`~scin.hdl.endpoint.read_train.train_piece_bytes` of the address: 4096 by default), each
    with its own read ID and context, answered by a train of READ_RESPs (tags ``tag + j``, ``addr``
    the piece's); a bad one (``length`` 0, unaligned, beyond the address space) by one READ_RESP
    ``SLVERR`` of length 0 (docs/PROTOCOL.md, "Read trains and posted writes").

    ``WRITE_POSTED`` (on ``write_in``) is written as a WRITE but not answered; its failure (a
    refused access or an AXI error) is kept, sticky, and the next WRITE's WRITE_RESP reports the
    worst of its own status and the sticky one, then clears it; ``posted_errors`` counts them.

    ``ATOMIC_ADD`` adds ``length`` to the 32-bit little-endian word at ``addr`` (4-byte aligned,
    else ``SLVERR``) and is answered with ``WRITE_RESP`` (``length`` 4). It is atomic **only with
    respect to traffic through this bridge**: it waits until every earlier write has its B response,
    holds back new writes, reads the word (AR with ID ``outstanding``), writes the sum (one
    narrow-strobe W beat), then lets writes go again. Reads keep flowing meanwhile. A failed read
    answers the read's status and writes nothing.

    AXI -> response
    ---------------
    ``READ_RESP`` (``rdata_out``, class RDATA) and ``WRITE_RESP`` (``wresp_out``, class WRESP) carry
    ``inc``, ``tag`` and ``length`` of their request, ``src`` = ``port``, ``dst`` = the request's
    ``src``, ``status`` = the AXI response (for reads: that of the first beat; a DECERR read still
    carries its ``length`` of zero bytes, so framing never changes), ``addr`` 0 (a train's
    READ_RESP: the piece's address).

    Ordering and throughput
    -----------------------
    * Up to ``outstanding`` READs are in flight, each with its own AXI ID and context (tag, src,
      inc, length, byte offset), so a subordinate may answer them in any order. The subordinate
      must not interleave the R beats of different bursts (AxiMemory and cocotbext-axi's AxiRam do
      not). A stream of 4 KB READs keeps R at one beat per cycle apart from one cycle per burst
      for the response header, and ``rdata_out`` at one flit per cycle (header + 128 flits).
    * All WRITEs use AXI ID 0, in arrival order, so a subordinate that keeps same-ID order commits
      them in order: a completion flag written after its data becomes visible after the data.
      Back-to-back WRITE packets are accepted at one flit per cycle.
    * Packets of the wrong opcode for their input are dropped through their ``last`` flit and
      counted in ``dropped``.

    Parameters
    ----------
    params : FabricParams
    port : int
        This endpoint's port number (``src`` of every response).
    outstanding : int
        READs in flight (1-64).

    Members
    -------
    req_in : In(packet_signature(params))
        Received REQ-class packets (READ, READ_WAVE, ATOMIC_ADD).
    write_in : In(packet_signature(params))
        Received WRITE-class packets.
    rdata_out : Out(packet_signature(params))
        READ_RESP packets to send.
    wresp_out : Out(packet_signature(params))
        WRITE_RESP packets to send.
    axi : Out(axi_signature(bridge_axi_params(params, outstanding)))
    dropped : Out(16)
        Packets dropped for a wrong opcode or class (wraps).
    rejected : Out(16)
        Requests answered with SLVERR by the bridge itself (wraps).
    posted_errors : Out(16)
        WRITE_POSTEDs that failed (refused, or an AXI error response) (wraps).
    """

    def __init__(self, params, *, port=0, outstanding=16):
        check_type("params", params, FabricParams)
        check_int("port", port, 0, params.ports - 1)
        check_int("outstanding", outstanding, 1, 64)
        self._params, self._port, self._outstanding = params, port, outstanding
        self._axi_params = bridge_axi_params(params, outstanding)
        pkt = packet_signature(params)
        super().__init__({
            "req_in":    In(pkt),
            "write_in":  In(pkt),
            "rdata_out": Out(pkt),
            "wresp_out": Out(pkt),
            "axi":       Out(axi_signature(self._axi_params)),
            "dropped":   Out(16),
            "rejected":  Out(16),
            "posted_errors": Out(16),
        })

    @property
    def axi_params(self):
        return self._axi_params

    def elaborate(self, platform):
        m = Module()
        # The paths share the AR/AW registers, the context stores and a few strobes; `s` holds
        # them. The helpers run in this order because later assignments to a shared signal
        # (req_in.ready, wctx.w_en, the W channel) take priority over earlier ones.
        s = SimpleNamespace()
        # READ_WAVEs are cut into pieces in front of the REQ paths, which see them as `s.req`.
        m.submodules.read_train = train = ReadTrainSplitter(self._params)
        connect(m, flipped(self.req_in), train.i)
        s.req = train.o
        self._counters(m, s)
        self._ax_registers(m, s)
        self._contexts(m, s)
        self._atomic_unit(m, s)
        self._read_requests(m, s)
        self._read_responses(m, s)
        self._write_path(m, s)
        self._write_responses(m, s)
        return m

    # --- helpers of the paths -------------------------------------------------------------------

    def _legal(self, h):
        """Whether a READ/WRITE header describes an access this bridge performs (see above)."""
        P = self._params
        fb, lg = P.flit_bytes, exact_log2(P.flit_bytes)
        off = h.addr[:lg]
        in_flit = (off + h.length) <= fb
        crosses = (h.addr[:exact_log2(AXI_BOUNDARY)] + h.length) > AXI_BOUNDARY
        too_long = h.length > min(P.max_payload, 256 * fb)
        return (h.length != 0) & ~too_long & ~crosses & ((off == 0) | in_flit)

    def _load_ax(self, reg, valid, *, id, addr, beats, inc):
        """Load a registered AR/AW: INCR burst of full-width beats from the flit holding addr."""
        lg = exact_log2(self._params.flit_bytes)
        return [valid.eq(1), reg.id.eq(id), reg.addr.eq(Cat(Const(0, lg), addr[lg:])),
                reg.len.eq(beats - 1), reg.size.eq(lg), reg.burst.eq(Burst.INCR),
                reg.user.eq(inc)]

    def _beats_of(self, h):
        fb = self._params.flit_bytes
        return (h.addr[:exact_log2(fb)] + h.length + (fb - 1)) >> exact_log2(fb)

    def _response_header(self, view, *, opcode, inc, status, dst, length, tag, addr=0):
        cls = MsgClass.RDATA if opcode == Opcode.READ_RESP else MsgClass.WRESP
        return [view.opcode.eq(opcode), view.msg_class.eq(cls), view.inc.eq(inc),
                view.status.eq(status), view.src.eq(self._port), view.dst.eq(dst),
                view.length.eq(length), view.tag.eq(tag), view.addr.eq(addr)]

    def _byte_keep(self, m, lo, hi):
        """Per-byte mask of a flit: bytes ``lo <= b < hi`` (a signal, so it is built once)."""
        fb = self._params.flit_bytes
        lg = exact_log2(fb)
        keep = Signal(fb)
        # The last byte is always >= lo: skip that compare (Verilator CMPCONST).
        m.d.comb += keep.eq(Cat(*[(((Const(b, lg + 1) >= lo) if b < fb - 1 else 1) & (b < hi))
                                  for b in range(fb)]))
        return keep

    def _expand(self, m, strb):
        fb = self._params.flit_bytes
        bits = Signal(8 * fb)
        m.d.comb += bits.eq(Cat(*[strb[b].replicate(8) for b in range(fb)]))
        return bits

    # --- the paths --------------------------------------------------------------------------------

    def _counters(self, m, s):
        """``dropped`` and ``rejected``, counted from one strobe per input (``drop_r``/``drop_w``,
        ``rej_r``/``rej_w``)."""
        dropped, rejected = Signal(16), Signal(16)
        drop_r, drop_w, rej_r, rej_w = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [dropped.eq(dropped + drop_r + drop_w), rejected.eq(rejected + rej_r + rej_w)]
        m.d.comb += [self.dropped.eq(dropped), self.rejected.eq(rejected)]
        s.drop_r, s.drop_w, s.rej_r, s.rej_w = drop_r, drop_w, rej_r, rej_w

    def _ax_registers(self, m, s):
        """AR and AW: registered stream outputs, shared with the atomic unit (``*_can``: the
        register may load this cycle)."""
        axi = self.axi
        ar_v, ar = Signal(), Signal(self._axi_params.ax_layout)
        ar_can = ~ar_v | axi.ar.ready
        m.d.comb += [axi.ar.valid.eq(ar_v), axi.ar.payload.eq(ar)]
        with m.If(axi.ar.ready):
            m.d.sync += ar_v.eq(0)
        aw_v, aw = Signal(), Signal(self._axi_params.ax_layout)
        aw_can = ~aw_v | axi.aw.ready
        m.d.comb += [axi.aw.valid.eq(aw_v), axi.aw.payload.eq(aw)]
        with m.If(axi.aw.ready):
            m.d.sync += aw_v.eq(0)
        s.ar_v, s.ar, s.ar_can, s.aw_v, s.aw, s.aw_can = ar_v, ar, ar_can, aw_v, aw, aw_can

    def _contexts(self, m, s):
        """The context stores: one write context per AW or locally answered request, in order
        (``wctx``); one read context per AXI read ID (``rctx``, with the ID allocator); the READs
        refused by the bridge (``rerr``), answered by the READ_RESP generator between packets."""
        P = self._params
        lg = exact_log2(P.flit_bytes)
        n = self._outstanding
        # write: a WRITE's context (its answer reports the sticky status of the posted writes);
        # posted: a WRITE_POSTED's (not answered: its status goes into the sticky one).
        wctx_layout = data.StructLayout({"tag": P.tag_width, "src": P.port_bits, "inc": 1,
                                         "length": P.length_width, "local": 1, "status": 3,
                                         "write": 1, "posted": 1})
        m.submodules.wctx = wctx = SyncFIFOBuffered(width=wctx_layout.size, depth=16)
        wctx_in = Signal(wctx_layout)
        m.d.comb += wctx.w_data.eq(wctx_in)
        w_inflight = Signal(range(32))  # AWs issued whose B has not come back
        aw_issue, b_fire = Signal(), Signal()
        m.d.sync += w_inflight.eq(w_inflight + aw_issue - b_fire)

        # raddr: the flit address its READ_RESP carries (a train's piece address; 0 for a READ).
        rctx_layout = data.StructLayout({"tag": P.tag_width, "src": P.port_bits, "inc": 1,
                                         "length": P.length_width, "off": lg,
                                         "raddr": P.addr_width - lg})
        rctx = [Signal(rctx_layout, name=f"rctx{i}") for i in range(n)]
        id_busy, id_alloc, id_free = Signal(n), Signal(n), Signal(n)
        m.d.sync += id_busy.eq((id_busy | id_alloc) & ~id_free)
        free_id = Signal(range(n))
        for i in reversed(range(n)):
            with m.If(~id_busy[i]):
                m.d.comb += free_id.eq(i)
        any_free = ~id_busy.all()

        rerr_layout = data.StructLayout({"tag": P.tag_width, "src": P.port_bits, "inc": 1})
        m.submodules.rerr = rerr = SyncFIFOBuffered(width=rerr_layout.size, depth=4)
        rerr_in = Signal(rerr_layout)
        m.d.comb += rerr.w_data.eq(rerr_in)
        s.wctx_layout, s.wctx, s.wctx_in = wctx_layout, wctx, wctx_in
        s.w_inflight, s.aw_issue, s.b_fire = w_inflight, aw_issue, b_fire
        s.rctx_layout, s.rctx, s.id_alloc, s.id_free = rctx_layout, rctx, id_alloc, id_free
        s.free_id, s.any_free = free_id, any_free
        s.rerr_layout, s.rerr, s.rerr_in = rerr_layout, rerr, rerr_in

    def _atomic_unit(self, m, s):
        """ATOMIC_ADD: drain the writes, read the word (AR with ID ``outstanding``), write the sum
        (its W beat is driven by :meth:`_write_path`), or answer an error locally."""
        P, axi = self._params, self.axi
        hdr_layout = P.header_layout
        wctx, wctx_in = s.wctx, s.wctx_in
        atom = Signal(data.StructLayout({"tag": P.tag_width, "src": P.port_bits, "inc": 1,
                                         "addr": P.addr_width, "addend": P.length_width}))
        atom_sum, atom_resp = Signal(32), Signal(Resp)
        rh = hdr_layout(s.req.payload.data[:hdr_layout.size])
        rh_atomic = (rh.opcode == Opcode.ATOMIC_ADD) & (rh.msg_class == MsgClass.REQ)
        # A READ, or one piece of a READ_WAVE (ReadTrainSplitter: its length in bytes).
        rh_read = (((rh.opcode == Opcode.READ) | (rh.opcode == Opcode.READ_WAVE)) &
                   (rh.msg_class == MsgClass.REQ))
        req_skip = Signal()       # dropping the tail of a malformed multi-flit REQ packet
        read_loads_ar = Signal()  # the read path takes the AR register this cycle
        atom_r_fire = Signal()    # the atomic unit's R beat is taken this cycle
        atom_push = Signal()      # the atomic unit pushes a write context (it wins over WRITEs)
        with m.If(atom_push):
            m.d.comb += wctx.w_en.eq(1)

        with m.FSM(name="atomic") as atom_fsm:
            with m.State("IDLE"):
                with m.If(~req_skip & s.req.valid & rh_atomic):
                    with m.If(rh.addr[:2] == 0):
                        m.d.comb += s.req.ready.eq(1)
                        m.d.sync += [atom.tag.eq(rh.tag), atom.src.eq(rh.src), atom.inc.eq(rh.inc),
                                     atom.addr.eq(rh.addr), atom.addend.eq(rh.length)]
                        m.next = "DRAIN"
                    with m.Elif(wctx.w_rdy):
                        m.d.comb += [s.req.ready.eq(1), atom_push.eq(1), s.rej_r.eq(1),
                                     wctx_in.tag.eq(rh.tag), wctx_in.src.eq(rh.src),
                                     wctx_in.inc.eq(rh.inc), wctx_in.length.eq(4),
                                     wctx_in.local.eq(1), wctx_in.status.eq(Resp.SLVERR)]
            with m.State("DRAIN"):
                # Every earlier write has its B response and new ones are held back, so nothing
                # through this bridge can land between our read and our write.
                with m.If(s.w_inflight == 0):
                    m.next = "AR"
            with m.State("AR"):
                with m.If(~read_loads_ar & s.ar_can):
                    m.d.sync += self._load_ax(s.ar, s.ar_v, id=self._outstanding, addr=atom.addr,
                                              beats=1, inc=atom.inc)
                    m.next = "RWAIT"
            with m.State("RWAIT"):
                # The R router (_read_responses) hands the beat over and latches the sum and the
                # response.
                with m.If(atom_r_fire):
                    with m.If(axi.r.payload.resp == Resp.OKAY):
                        m.next = "AW"
                    with m.Else():
                        m.next = "ERR"
            with m.State("AW"):
                with m.If(s.aw_can & wctx.w_rdy):
                    m.d.comb += [s.aw_issue.eq(1), atom_push.eq(1),
                                 wctx_in.tag.eq(atom.tag), wctx_in.src.eq(atom.src),
                                 wctx_in.inc.eq(atom.inc), wctx_in.length.eq(4)]
                    m.d.sync += self._load_ax(s.aw, s.aw_v, id=0, addr=atom.addr, beats=1,
                                              inc=atom.inc)
                    m.next = "W"
            with m.State("W"):
                # The single W beat is driven by _write_path (the write path is idle meanwhile).
                with m.If(axi.w.ready):
                    m.next = "IDLE"
            with m.State("ERR"):
                with m.If(wctx.w_rdy):
                    m.d.comb += [atom_push.eq(1), wctx_in.tag.eq(atom.tag),
                                 wctx_in.src.eq(atom.src), wctx_in.inc.eq(atom.inc),
                                 wctx_in.length.eq(4),
                                 wctx_in.local.eq(1), wctx_in.status.eq(atom_resp)]
                    m.next = "IDLE"
        atom_busy = ~atom_fsm.ongoing("IDLE")
        s.atom, s.atom_sum, s.atom_resp, s.atom_fsm, s.atom_busy = (atom, atom_sum, atom_resp,
                                                                     atom_fsm, atom_busy)
        s.rh, s.rh_atomic, s.rh_read, s.req_skip = rh, rh_atomic, rh_read, req_skip
        s.read_loads_ar, s.atom_r_fire, s.atom_push = read_loads_ar, atom_r_fire, atom_push

    def _read_requests(self, m, s):
        """REQ input: a legal READ takes a free read ID and the AR register; an illegal one goes
        to ``rerr``; other opcodes are dropped (ATOMIC_ADD is the atomic unit's)."""
        lg = exact_log2(self._params.flit_bytes)
        n = self._outstanding
        rh, rctx, free_id = s.rh, s.rctx, s.free_id
        with m.If(s.req.valid & s.req.ready):
            m.d.sync += s.req_skip.eq(~s.req.payload.last)
        with m.If(s.req_skip):
            m.d.comb += s.req.ready.eq(1)
        with m.Elif(s.req.valid & s.rh_read):
            with m.If(self._legal(rh)):
                with m.If(s.any_free & s.ar_can):
                    m.d.comb += [s.req.ready.eq(1), s.read_loads_ar.eq(1),
                                 s.id_alloc.eq(Const(1, n) << free_id)]
                    m.d.sync += self._load_ax(s.ar, s.ar_v, id=free_id, addr=rh.addr,
                                              beats=self._beats_of(rh), inc=rh.inc)
                    for i in range(n):
                        with m.If(free_id == i):
                            m.d.sync += [rctx[i].tag.eq(rh.tag), rctx[i].src.eq(rh.src),
                                         rctx[i].inc.eq(rh.inc), rctx[i].length.eq(rh.length),
                                         rctx[i].off.eq(rh.addr[:lg]),
                                         rctx[i].raddr.eq(Mux(rh.opcode == Opcode.READ_WAVE,
                                                              rh.addr[lg:], 0))]
            with m.Elif(s.rerr.w_rdy):
                m.d.comb += [s.req.ready.eq(1), s.rerr.w_en.eq(1), s.rej_r.eq(1),
                             s.rerr_in.tag.eq(rh.tag), s.rerr_in.src.eq(rh.src),
                             s.rerr_in.inc.eq(rh.inc)]
        with m.Elif(s.req.valid & ~s.rh_atomic):
            m.d.comb += [s.req.ready.eq(1), s.drop_r.eq(1)]

    def _read_responses(self, m, s):
        """R -> READ_RESP packets on ``rdata_out`` (registered): a header per burst from its read
        context, then the beats shifted to payload byte 0; refused READs' error responses between
        packets; the atomic unit's beat routed to it."""
        P, axi = self._params, self.axi
        fb = P.flit_bytes
        n = self._outstanding
        hdr_layout = P.header_layout
        rctx_layout, rerr, atom = s.rctx_layout, s.rerr, s.atom
        ro_v, ro = Signal(), Signal(P.flit_layout)
        ro_can = ~ro_v | self.rdata_out.ready
        m.d.comb += [self.rdata_out.valid.eq(ro_v), self.rdata_out.payload.eq(ro)]
        with m.If(self.rdata_out.ready):
            m.d.sync += ro_v.eq(0)
        r = axi.r.payload
        sel = Signal(rctx_layout)     # context of the burst on R
        with m.Switch(r.id):
            for i in range(n):
                with m.Case(i):
                    m.d.comb += sel.eq(s.rctx[i])
        cur = Signal(rctx_layout)     # context of the burst being forwarded
        cur_id = Signal(range(n))
        remaining = Signal(P.length_width)
        rerr_head = s.rerr_layout(rerr.r_data)
        out_hdr = Signal(hdr_layout)
        with m.FSM(name="rdata"):
            with m.State("HEADER"):
                with m.If(rerr.r_rdy & ro_can):
                    m.d.comb += [rerr.r_en.eq(1),
                                 *self._response_header(out_hdr, opcode=Opcode.READ_RESP,
                                                        inc=rerr_head.inc, status=Resp.SLVERR,
                                                        dst=rerr_head.src, length=0,
                                                        tag=rerr_head.tag)]
                    m.d.sync += [ro_v.eq(1), ro.data.eq(out_hdr.as_value()), ro.last.eq(1)]
                with m.Elif(axi.r.valid & (r.id == self._outstanding)):
                    with m.If(s.atom_fsm.ongoing("RWAIT")):
                        m.d.comb += [axi.r.ready.eq(1), s.atom_r_fire.eq(1)]
                        word = r.data.word_select(atom.addr[2:exact_log2(fb)], 32)
                        m.d.sync += [s.atom_sum.eq(word + atom.addend), s.atom_resp.eq(r.resp)]
                with m.Elif(axi.r.valid & ro_can):
                    m.d.comb += self._response_header(out_hdr, opcode=Opcode.READ_RESP,
                                                      inc=sel.inc, status=r.resp, dst=sel.src,
                                                      length=sel.length, tag=sel.tag,
                                                      addr=Cat(Const(0, exact_log2(fb)),
                                                               sel.raddr))
                    m.d.sync += [ro_v.eq(1), ro.data.eq(out_hdr.as_value()), ro.last.eq(0),
                                 cur.eq(sel), cur_id.eq(r.id), remaining.eq(sel.length)]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += axi.r.ready.eq(ro_can)
                with m.If(axi.r.valid & ro_can):
                    # Sub-flit reads: the requested bytes move down to payload byte 0; bytes past
                    # the length are zero, as the protocol requires.
                    shifted = r.data >> Cat(Const(0, 3), cur.off)
                    keep = self._expand(m, self._byte_keep(m, 0, remaining))
                    m.d.sync += [ro_v.eq(1), ro.data.eq(shifted & keep), ro.last.eq(r.last),
                                 remaining.eq(Mux(remaining > fb, remaining - fb, 0))]
                    with m.If(r.last):
                        m.d.comb += s.id_free.eq(Const(1, n) << cur_id)
                        m.next = "HEADER"

    def _write_path(self, m, s):
        """WRITE input -> AW + W: a legal WRITE loads AW and a write context and streams its
        payload as W beats; an illegal one is answered locally; the atomic unit's W beat."""
        P, axi = self._params, self.axi
        fb, lg = P.flit_bytes, exact_log2(P.flit_bytes)
        hdr_layout = P.header_layout
        wctx, wctx_in, atom = s.wctx, s.wctx_in, s.atom
        wh = hdr_layout(self.write_in.payload.data[:hdr_layout.size])
        w_off, w_rem = Signal(lg), Signal(P.length_width)
        w = axi.w.payload
        with m.FSM(name="write"):
            with m.State("HEADER"):
                posted = wh.opcode == Opcode.WRITE_POSTED
                is_write = (((wh.opcode == Opcode.WRITE) | posted) &
                            (wh.msg_class == MsgClass.WRITE))
                good = is_write & self._legal(wh) & ~self.write_in.payload.last
                with m.If(self.write_in.valid & good):
                    with m.If(~s.atom_busy & ~s.atom_push & s.aw_can & wctx.w_rdy):
                        m.d.comb += [self.write_in.ready.eq(1), s.aw_issue.eq(1), wctx.w_en.eq(1),
                                     wctx_in.tag.eq(wh.tag), wctx_in.src.eq(wh.src),
                                     wctx_in.inc.eq(wh.inc), wctx_in.length.eq(wh.length),
                                     wctx_in.write.eq(~posted), wctx_in.posted.eq(posted)]
                        m.d.sync += [*self._load_ax(s.aw, s.aw_v, id=0, addr=wh.addr,
                                                    beats=self._beats_of(wh), inc=wh.inc),
                                     w_off.eq(wh.addr[:lg]), w_rem.eq(wh.length)]
                        m.next = "DATA"
                with m.Elif(self.write_in.valid & is_write):
                    with m.If(~s.atom_push & wctx.w_rdy):
                        m.d.comb += [self.write_in.ready.eq(1), wctx.w_en.eq(1), s.rej_w.eq(1),
                                     wctx_in.tag.eq(wh.tag), wctx_in.src.eq(wh.src),
                                     wctx_in.inc.eq(wh.inc), wctx_in.length.eq(wh.length),
                                     wctx_in.local.eq(1), wctx_in.status.eq(Resp.SLVERR),
                                     wctx_in.write.eq(~posted), wctx_in.posted.eq(posted)]
                        with m.If(~self.write_in.payload.last):
                            m.next = "DROP"
                with m.Elif(self.write_in.valid):
                    m.d.comb += [self.write_in.ready.eq(1), s.drop_w.eq(1)]
                    with m.If(~self.write_in.payload.last):
                        m.next = "DROP"
            with m.State("DATA"):
                final = w_rem <= fb
                m.d.comb += [
                    axi.w.valid.eq(self.write_in.valid), self.write_in.ready.eq(axi.w.ready),
                    w.data.eq(self.write_in.payload.data << Cat(Const(0, 3), w_off)),
                    w.strb.eq(self._byte_keep(m, w_off, w_off + w_rem)),
                    w.last.eq(final | self.write_in.payload.last),
                ]
                with m.If(self.write_in.valid & axi.w.ready):
                    m.d.sync += w_rem.eq(w_rem - fb)
                    with m.If(self.write_in.payload.last):
                        m.next = "HEADER"
                    with m.Elif(final):
                        # More payload than the length says: the burst is complete; drop the rest.
                        m.next = "DROP"
            with m.State("DROP"):
                m.d.comb += self.write_in.ready.eq(1)
                with m.If(self.write_in.valid & self.write_in.payload.last):
                    m.next = "HEADER"

        with m.If(s.atom_fsm.ongoing("W")):
            lane = atom.addr[2:lg]
            m.d.comb += [axi.w.valid.eq(1), w.data.eq(s.atom_sum << Cat(Const(0, 5), lane)),
                         w.strb.eq(Const(0xF, fb) << Cat(Const(0, 2), lane)), w.last.eq(1)]

    def _write_responses(self, m, s):
        """B -> WRITE_RESP packets on ``wresp_out`` (registered), in write-context order; a
        locally answered context needs no B. A WRITE_POSTED's context sends nothing: its status
        goes into ``sticky`` (the worst since the last WRITE's answer), which the next WRITE's
        answer reports and clears; its errors are counted in ``posted_errors``."""
        P, axi = self._params, self.axi
        hdr_layout = P.header_layout
        wctx = s.wctx
        bo_v, bo = Signal(), Signal(P.flit_layout)
        bo_can = ~bo_v | self.wresp_out.ready
        m.d.comb += [self.wresp_out.valid.eq(bo_v), self.wresp_out.payload.eq(bo)]
        with m.If(self.wresp_out.ready):
            m.d.sync += bo_v.eq(0)
        whead = s.wctx_layout(wctx.r_data)
        b_hdr = Signal(hdr_layout)
        room = wctx.r_rdy & (bo_can | whead.posted)
        take = room & (whead.local | axi.b.valid)
        m.d.comb += [axi.b.ready.eq(room & ~whead.local), s.b_fire.eq(axi.b.valid & axi.b.ready)]
        status = Signal(3)
        m.d.comb += status.eq(Mux(whead.local, whead.status, axi.b.payload.resp))
        sticky, worst = Signal(3), Signal(3)
        m.d.comb += worst.eq(Mux(sticky > status, sticky, status))
        posted_errors = Signal(16)
        m.d.comb += self.posted_errors.eq(posted_errors)
        with m.If(take):
            m.d.comb += wctx.r_en.eq(1)
            with m.If(whead.posted):
                m.d.sync += [sticky.eq(worst), posted_errors.eq(posted_errors + status[1])]
            with m.Else():
                m.d.comb += self._response_header(b_hdr, opcode=Opcode.WRITE_RESP, inc=whead.inc,
                                                  status=Mux(whead.write, worst, status),
                                                  dst=whead.src, length=whead.length,
                                                  tag=whead.tag)
                m.d.sync += [bo_v.eq(1), bo.data.eq(b_hdr.as_value()), bo.last.eq(1)]
                with m.If(whead.write):
                    m.d.sync += sticky.eq(0)
