"""Accelerator: the endpoint's stand-in for a GPU (the prototype's MicroBlaze).

It turns testbench commands into request packets (arrival flags, ordinary remote reads and
writes), takes the responses, watches the completion flag in local memory, and reports everything
on an event stream stamped with a free-running cycle counter, so latencies are measured in
hardware cycles rather than by Python polling.
"""

from amaranth.hdl import Module, Signal, Cat, Mux
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..packet import FabricParams, MsgClass, Opcode
from ..params import check_int, check_type
from ..transport.signature import packet_signature
from .axi import poll_signature

from ..packet import flag_layout


__all__ = ["AccOp", "EventKind", "command_layout", "event_layout", "Accelerator",
           "pattern_bytes", "xor_fold", "FLAG_LAYOUT"]


class AccOp(enum.Enum, shape=2):
    """Accelerator command."""
    ARRIVE       = 0  #: ATOMIC_ADD (inc=1) of ``length`` at ``addr``: set the arrival flag in the ISA
    WRITE_REMOTE = 1  #: WRITE ``length`` pattern bytes (seeded by ``seed``) at ``addr`` of port ``dst``
    READ_REMOTE  = 2  #: READ ``length`` bytes at ``addr`` of port ``dst``
    WAIT_FLAG    = 3  #: wait until the local flag word at ``addr`` reaches ``generation``


class EventKind(enum.Enum, shape=2):
    """Accelerator event."""
    SENT       = 0  #: a request's header flit left the accelerator (``cycle`` = that cycle)
    READ_DONE  = 1  #: a READ_RESP arrived completely (``value`` = XOR of its 32-bit payload words)
    WRITE_DONE = 2  #: a WRITE_RESP arrived (for a WRITE_REMOTE or an ARRIVE)
    FLAG       = 3  #: WAIT_FLAG saw the generation (``value`` = the flag word)


#: The completion flag word (32-bit little-endian in endpoint memory, written by the ISA) and its
#: status bits are defined by the ISA: :func:`scin.hdl.packet.flag_layout`, ``FlagStatus``.
FLAG_LAYOUT = flag_layout()


def command_layout(params):
    """One accelerator command.

    ``addr`` is the remote byte address (WRITE_REMOTE, READ_REMOTE), the arrival address as the ISA
    defines it (ARRIVE: it names the sync resource), or the local byte address of the flag word
    (WAIT_FLAG: 4-byte aligned). ``length`` is bytes (WRITE_REMOTE, READ_REMOTE) or the addend
    (ARRIVE, normally 1). ``tag`` goes into the request header and comes back in its events.
    """
    return data.StructLayout({
        "op": AccOp, "dst": params.port_bits, "tag": params.tag_width,
        "length": params.length_width, "addr": params.addr_width,
        "seed": 16, "generation": 16,
    })


def event_layout(params):
    """One accelerator event. ``status`` is the response header's status (READ_DONE, WRITE_DONE)
    or the flag's status field (FLAG); ``src``, ``inc`` and ``length`` come from the response
    header; ``cycle`` is the free-running cycle counter when the event happened."""
    return data.StructLayout({
        "kind": EventKind, "tag": params.tag_width, "status": 8, "src": params.port_bits, "inc": 1,
        "length": params.length_width, "value": 32, "cycle": 32,
    })


def pattern_bytes(seed, length):
    """Software reference of the WRITE_REMOTE payload: 32-bit little-endian word ``w`` of the
    packet is ``seed << 16 | (w & 0xFFFF)``, truncated to ``length`` bytes."""
    words = b"".join((((seed & 0xFFFF) << 16) | (w & 0xFFFF)).to_bytes(4, "little")
                     for w in range((length + 3) // 4))
    return words[:length]


def xor_fold(payload):
    """Software reference of READ_DONE's ``value``: XOR of the payload's 32-bit little-endian words
    (the last one zero-padded)."""
    value = 0
    padded = bytes(payload) + bytes(-len(payload) % 4)
    for i in range(0, len(padded), 4):
        value ^= int.from_bytes(padded[i:i + 4], "little")
    return value


class Accelerator(wiring.Component):
    """Command-driven traffic source and response sink of one endpoint.

    Commands execute one at a time, in order. A request command ends when its header flit (and, for
    WRITE_REMOTE, its last payload flit) has been sent, with a SENT event; it does not wait for the
    response, so several requests can be in flight. WAIT_FLAG blocks later commands until the
    flag's generation field, read through ``poll`` every cycle, has reached ``generation`` in
    16-bit serial-number order (``(flag - generation) mod 2**16 < 2**15``); it then emits FLAG.
    Responses are taken whenever they arrive (never blocking the fabric for long: only while the
    previous event of the same source waits to leave) and reported as READ_DONE/WRITE_DONE events,
    matched to requests by ``tag``. Event sources are served in fixed priority (sent headers,
    flags, write responses, read responses); each holds one event, so a source stalls only while
    its event waits.

    Event cycles: SENT is stamped with the cycle of the header flit's handshake on ``req_out`` or
    ``write_out`` (the flit leaves the accelerator); READ_DONE and WRITE_DONE with the cycle the
    response's last flit was taken; FLAG with the cycle the poll saw the generation.

    Request headers: ``src`` = ``port``, ``dst`` = the command's ``dst``, ``inc`` = 1 only for
    ARRIVE, status 0.

    Parameters
    ----------
    params : FabricParams
    port : int
        This endpoint's port number.
    poll_addr_width : int
        Width of the local memory's word index.

    Members
    -------
    cmd : In(stream.Signature(command_layout(params)))
    events : Out(stream.Signature(event_layout(params)))
    req_out : Out(packet_signature(params))
        REQ-class packets (ATOMIC_ADD, READ).
    write_out : Out(packet_signature(params))
        WRITE-class packets.
    rdata_in : In(packet_signature(params))
        Received READ_RESP packets.
    wresp_in : In(packet_signature(params))
        Received WRITE_RESP packets.
    poll : Out(poll_signature(poll_addr_width, flit_width))
        Read port on the local memory.
    cycle : Out(32)
        Free-running cycle counter (0 in the first cycle after reset).
    """

    def __init__(self, params, *, port=0, poll_addr_width):
        check_type("params", params, FabricParams)
        check_int("port", port, 0, params.ports - 1)
        check_int("poll_addr_width", poll_addr_width, 1, params.addr_width)
        self._params, self._port, self._poll_addr_width = params, port, poll_addr_width
        pkt = packet_signature(params)
        super().__init__({
            "cmd":       In(stream.Signature(command_layout(params))),
            "events":    Out(stream.Signature(event_layout(params))),
            "req_out":   Out(pkt),
            "write_out": Out(pkt),
            "rdata_in":  In(pkt),
            "wresp_in":  In(pkt),
            "poll":      Out(poll_signature(poll_addr_width, params.flit_width)),
            "cycle":     Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        cycle = Signal(32)
        m.d.sync += cycle.eq(cycle + 1)
        m.d.comb += self.cycle.eq(cycle)
        ev = self._event_merge(m)
        self._commands(m, cycle, ev)
        self._write_responses(m, cycle, ev)
        self._read_responses(m, cycle, ev)
        return m

    def _event_merge(self, m):
        """One event register per source (``sent``, ``cmd``, ``wr``, ``rd``: a valid bit and the
        event), merged in that fixed priority into the registered ``events`` output. Returns
        ``{source: (valid, event)}``; a source loads its pair, the merge clears the valid."""
        ev_layout = event_layout(self._params)
        ev_sent_v, ev_sent = Signal(), Signal(ev_layout)
        ev_cmd_v, ev_cmd = Signal(), Signal(ev_layout)
        ev_wr_v, ev_wr = Signal(), Signal(ev_layout)
        ev_rd_v, ev_rd = Signal(), Signal(ev_layout)
        eo_v, eo = Signal(), Signal(ev_layout)
        m.d.comb += [self.events.valid.eq(eo_v), self.events.payload.eq(eo)]
        with m.If(~eo_v | self.events.ready):
            m.d.sync += eo_v.eq(ev_sent_v | ev_cmd_v | ev_wr_v | ev_rd_v)
            with m.If(ev_sent_v):
                m.d.sync += [eo.eq(ev_sent), ev_sent_v.eq(0)]
            with m.Elif(ev_cmd_v):
                m.d.sync += [eo.eq(ev_cmd), ev_cmd_v.eq(0)]
            with m.Elif(ev_wr_v):
                m.d.sync += [eo.eq(ev_wr), ev_wr_v.eq(0)]
            with m.Elif(ev_rd_v):
                m.d.sync += [eo.eq(ev_rd), ev_rd_v.eq(0)]
        return {"sent": (ev_sent_v, ev_sent), "cmd": (ev_cmd_v, ev_cmd), "wr": (ev_wr_v, ev_wr),
                "rd": (ev_rd_v, ev_rd)}

    def _commands(self, m, cycle, ev):
        """The command FSM: request headers on ``req_out``/``write_out`` (registered), WRITE
        payload from the pattern generator, flag polling; SENT and FLAG events."""
        P = self._params
        fb, lg = P.flit_bytes, exact_log2(P.flit_bytes)
        hdr_layout = P.header_layout
        ev_sent_v, ev_sent = ev["sent"]
        ev_cmd_v, ev_cmd = ev["cmd"]

        c = Signal(command_layout(P))
        ro_v, ro = Signal(), Signal(P.flit_layout)       # req_out register
        wo_v, wo = Signal(), Signal(P.flit_layout)       # write_out register
        m.d.comb += [self.req_out.valid.eq(ro_v), self.req_out.payload.eq(ro),
                     self.write_out.valid.eq(wo_v), self.write_out.payload.eq(wo)]
        with m.If(self.req_out.ready):
            m.d.sync += ro_v.eq(0)
        with m.If(self.write_out.ready):
            m.d.sync += wo_v.eq(0)
        ro_can = ~ro_v | self.req_out.ready
        wo_can = ~wo_v | self.write_out.ready

        hdr = Signal(hdr_layout)
        opcode = Signal(Opcode, init=Opcode.WRITE)
        with m.Switch(c.op):
            with m.Case(AccOp.ARRIVE):
                m.d.comb += opcode.eq(Opcode.ATOMIC_ADD)
            with m.Case(AccOp.READ_REMOTE):
                m.d.comb += opcode.eq(Opcode.READ)
            with m.Default():
                m.d.comb += opcode.eq(Opcode.WRITE)
        m.d.comb += [
            hdr.opcode.eq(opcode),
            hdr.msg_class.eq(Mux(c.op == AccOp.WRITE_REMOTE, MsgClass.WRITE, MsgClass.REQ)),
            hdr.inc.eq(c.op == AccOp.ARRIVE), hdr.src.eq(self._port), hdr.dst.eq(c.dst),
            hdr.length.eq(c.length), hdr.tag.eq(c.tag), hdr.addr.eq(c.addr),
        ]
        # A SENT event is armed when a header is loaded into its output register and released,
        # stamped, when that header's handshake happens, so ``cycle`` is when the flit left. Only
        # one header is armed at a time.
        armed, armed_on_write = Signal(), Signal()
        ro_fire = ro_v & self.req_out.ready
        wo_fire = wo_v & self.write_out.ready
        with m.If(armed & Mux(armed_on_write, wo_fire, ro_fire)):
            m.d.sync += [armed.eq(0), ev_sent_v.eq(1), ev_sent.cycle.eq(cycle)]
        can_arm = ~armed & ~ev_sent_v
        arm = [armed.eq(1), ev_sent.kind.eq(EventKind.SENT), ev_sent.tag.eq(c.tag),
               ev_sent.length.eq(c.length), ev_sent.src.eq(self._port), ev_sent.status.eq(0),
               ev_sent.inc.eq(c.op == AccOp.ARRIVE), ev_sent.value.eq(0)]

        word_idx = Signal(16)               # 32-bit word index of the next WRITE payload flit
        remaining = Signal(P.length_width)  # WRITE payload bytes still to send
        words = fb // 4
        pattern = Cat(*[Cat((word_idx + k)[:16], c.seed) for k in range(words)])
        keep = Signal(fb)
        m.d.comb += keep.eq(Cat(*[remaining > b for b in range(fb)]))
        keep_bits = Cat(*[keep[b].replicate(8) for b in range(fb)])

        poll_ok = Signal()  # poll.data reflects the flag address (one cycle after it was set)
        flag = FLAG_LAYOUT(Signal(32))
        m.d.comb += [self.poll.addr.eq(c.addr[lg:]),
                     flag.as_value().eq(self.poll.data.word_select(c.addr[2:lg], 32))]
        reached = (flag.generation - c.generation)[:16] < 0x8000

        with m.FSM(name="command"):
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += c.eq(self.cmd.payload)
                    with m.Switch(self.cmd.payload.op):
                        with m.Case(AccOp.ARRIVE, AccOp.READ_REMOTE):
                            m.next = "REQ"
                        with m.Case(AccOp.WRITE_REMOTE):
                            m.next = "WRITE_HEADER"
                        with m.Case(AccOp.WAIT_FLAG):
                            m.d.sync += poll_ok.eq(0)
                            m.next = "POLL"
            with m.State("REQ"):
                with m.If(ro_can & can_arm):
                    m.d.sync += [ro_v.eq(1), ro.data.eq(hdr.as_value()), ro.last.eq(1),
                                 *arm, armed_on_write.eq(0)]
                    m.next = "IDLE"
            with m.State("WRITE_HEADER"):
                with m.If(wo_can & can_arm):
                    m.d.sync += [wo_v.eq(1), wo.data.eq(hdr.as_value()), wo.last.eq(c.length == 0),
                                 *arm, armed_on_write.eq(1),
                                 word_idx.eq(0), remaining.eq(c.length)]
                    with m.If(c.length != 0):
                        m.next = "WRITE_DATA"
                    with m.Else():
                        m.next = "IDLE"
            with m.State("WRITE_DATA"):
                with m.If(wo_can):
                    last = remaining <= fb
                    m.d.sync += [wo_v.eq(1), wo.data.eq(pattern & keep_bits), wo.last.eq(last),
                                 word_idx.eq(word_idx + words), remaining.eq(remaining - fb)]
                    with m.If(last):
                        m.next = "IDLE"
            with m.State("POLL"):
                m.d.sync += poll_ok.eq(1)
                with m.If(poll_ok & reached & ~ev_cmd_v):
                    m.d.sync += [ev_cmd_v.eq(1), ev_cmd.kind.eq(EventKind.FLAG),
                                 ev_cmd.tag.eq(c.tag), ev_cmd.status.eq(flag.status),
                                 ev_cmd.src.eq(self._port), ev_cmd.inc.eq(0), ev_cmd.length.eq(4),
                                 ev_cmd.value.eq(flag.as_value()), ev_cmd.cycle.eq(cycle)]
                    m.next = "IDLE"

    def _write_responses(self, m, cycle, ev):
        """WRITE_RESP packets (header only; a longer packet's tail is dropped) to WRITE_DONE
        events."""
        hdr_layout = self._params.header_layout
        ev_wr_v, ev_wr = ev["wr"]
        bh = hdr_layout(self.wresp_in.payload.data[:hdr_layout.size])
        wr_skip = Signal()  # dropping the tail of a malformed multi-flit WRESP packet
        with m.If(wr_skip):
            m.d.comb += self.wresp_in.ready.eq(1)
        with m.Else():
            m.d.comb += self.wresp_in.ready.eq(~ev_wr_v)
            with m.If(self.wresp_in.valid & ~ev_wr_v):
                m.d.sync += [ev_wr_v.eq(1), ev_wr.kind.eq(EventKind.WRITE_DONE), ev_wr.tag.eq(bh.tag),
                             ev_wr.status.eq(bh.status), ev_wr.src.eq(bh.src), ev_wr.inc.eq(bh.inc),
                             ev_wr.length.eq(bh.length), ev_wr.value.eq(0), ev_wr.cycle.eq(cycle)]
        with m.If(self.wresp_in.valid & self.wresp_in.ready):
            m.d.sync += wr_skip.eq(~self.wresp_in.payload.last)

    def _read_responses(self, m, cycle, ev):
        """READ_RESP packets to READ_DONE events, the payload folded by XOR into ``value``."""
        P = self._params
        hdr_layout, ev_layout = P.header_layout, event_layout(P)
        words = P.flit_bytes // 4
        ev_rd_v, ev_rd = ev["rd"]
        rh = hdr_layout(self.rdata_in.payload.data[:hdr_layout.size])
        fold = Signal(32)
        flit_fold = Signal(32)
        folded = self.rdata_in.payload.data.word_select(0, 32)
        for k in range(1, words):
            folded = folded ^ self.rdata_in.payload.data.word_select(k, 32)
        m.d.comb += flit_fold.eq(folded)
        rd = Signal(ev_layout)  # event being assembled
        in_last = self.rdata_in.payload.last
        with m.FSM(name="rdata"):
            with m.State("HEADER"):
                m.d.comb += self.rdata_in.ready.eq(~in_last | ~ev_rd_v)
                with m.If(self.rdata_in.valid & self.rdata_in.ready):
                    hdr_event = [rd.kind.eq(EventKind.READ_DONE), rd.tag.eq(rh.tag),
                                 rd.status.eq(rh.status), rd.src.eq(rh.src), rd.inc.eq(rh.inc),
                                 rd.length.eq(rh.length)]
                    with m.If(in_last):
                        m.d.sync += [ev_rd_v.eq(1), *[
                            getattr(ev_rd, f).eq(getattr(rh, f)) for f in ("tag", "src", "inc", "length")],
                            ev_rd.kind.eq(EventKind.READ_DONE), ev_rd.status.eq(rh.status),
                            ev_rd.value.eq(0), ev_rd.cycle.eq(cycle)]
                    with m.Else():
                        m.d.sync += [*hdr_event, fold.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += self.rdata_in.ready.eq(~in_last | ~ev_rd_v)
                with m.If(self.rdata_in.valid & self.rdata_in.ready):
                    m.d.sync += fold.eq(fold ^ flit_fold)
                    with m.If(in_last):
                        m.d.sync += [ev_rd_v.eq(1), ev_rd.eq(rd), ev_rd.value.eq(fold ^ flit_fold),
                                     ev_rd.cycle.eq(cycle)]
                        m.next = "HEADER"
