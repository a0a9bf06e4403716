"""Accelerator: the endpoint's stand-in for a GPU (the prototype's MicroBlaze).

It turns testbench commands into request packets (arrival flags, ordinary remote reads and
writes, NVLS multimem reductions), takes the responses, watches the completion flag in local
memory, and reports everything on an event stream stamped with a free-running cycle counter, so
latencies are measured in hardware cycles rather than by Python polling.

The NVLS kernels of NCCL (LDRED_ST: All-Reduce of one rank's shard; LDRED_COPY: ReduceScatter)
run in a sub-component, :class:`~scin.hdl.endpoint.kernel.Kernel`, that issues their packets
itself; RED plus WAIT_FLAG is NCCL's NVLS barrier. The step of NCCL's ring kernels (REDUCE_SEND:
local data, plus the data the previous rank wrote here, added and written to the next rank) runs
in another, :class:`~scin.hdl.endpoint.kernel.ReduceSend`, which reads the local memory through
the flag poll port (WAIT_FLAG and a kernel op never run at once); RED to the next rank's flag
word plus its WAIT_FLAG is the ring's signal. REDUCE_SEND with ``push`` is the push protocol's
upload of an operand into the switch's In-Switch Accelerator: the same WRITEs with inc=1, posted.

**Tags.** Kernel packets carry tags with the top tag bit set (:func:`command_tag_mask`); their
responses go to the kernel and produce no READ_DONE/WRITE_DONE events. Command tags (the ``tag``
of every command) must leave that bit clear: a response to a request whose tag has it set is
taken by the kernel, not reported.
"""

from amaranth.hdl import Module, Signal, Cat, Mux
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out, connect
from amaranth.utils import exact_log2

from ..packet import FabricParams, MsgClass, Opcode
from ..params import check_int, check_type
from ..transport.signature import packet_signature
from .axi import poll_signature
from ..isa.dtype import DType
from .kernel import (COUNT_BITS, WINDOW_BITS, Kernel, KernelOp, KernelSignature, ReduceSend,
                     ReduceSendSignature)

from ..packet import flag_layout


__all__ = ["AccOp", "EventKind", "command_layout", "event_layout", "command_tag_mask",
           "Accelerator", "pattern_bytes", "xor_fold", "FLAG_LAYOUT"]


class AccOp(enum.Enum, shape=3):
    """Accelerator command (fields per op: :func:`command_layout`)."""
    ARRIVE       = 0  #: ATOMIC_ADD (inc=1) of ``length`` at ``addr``: set the ISA's arrival flag
    WRITE_REMOTE = 1  #: WRITE ``length`` pattern bytes (seed ``seed``) at ``addr`` of port ``dst``
    READ_REMOTE  = 2  #: READ ``length`` bytes at ``addr`` of port ``dst``
    WAIT_FLAG    = 3  #: wait until the local flag word at ``addr`` reaches ``generation``
    #: multimem.red: ATOMIC_ADD (inc=0) of ``length`` at ``addr`` of port ``dst`` (normally
    #: ``params.switch_port``, ``addr`` a multicast address); otherwise like ARRIVE
    RED          = 4
    #: NVLS All-Reduce of a shard: ``count`` multimem.ld_reduce READs, each result multimem.st
    #: back to the same multicast address; blocks until every st is acknowledged, then KERNEL_DONE
    LDRED_ST     = 5
    #: NVLS ReduceScatter: the same READs, each result written (ordinary WRITE) to port ``dst``
    #: at ``dest + i * length``; blocks until acknowledged, then KERNEL_DONE
    LDRED_COPY   = 6
    #: NCCL ring step: ``count`` WRITEs (ordinary, inc=0) of ``length`` bytes to port ``dst`` at
    #: ``dest + i * length``, carrying the local data at ``addr`` plus (``reduce``) the local data
    #: at ``addr2``, added as ``dtype``; with ``local`` each also written back over ``addr``;
    #: blocks until every WRITE is acknowledged, then KERNEL_DONE
    #: (:class:`~scin.hdl.endpoint.kernel.ReduceSend`). With ``push``: the same WRITEs with
    #: inc=1 (to the switch's ISA), posted, ``local`` ignored; blocks until the last flit has left,
    #: then KERNEL_DONE (no acknowledgement is awaited: the ISA sends none)
    REDUCE_SEND  = 7


class EventKind(enum.Enum, shape=3):
    """Accelerator event."""
    SENT        = 0  #: a request's header flit left the accelerator (``cycle`` = that cycle)
    #: a READ_RESP arrived completely (``value`` = XOR of its 32-bit payload words)
    READ_DONE   = 1
    WRITE_DONE  = 2  #: a WRITE_RESP arrived (for a WRITE_REMOTE, an ARRIVE or a RED)
    FLAG        = 3  #: WAIT_FLAG saw the generation (``value`` = the flag word)
    #: an LDRED_ST/LDRED_COPY/REDUCE_SEND finished (``value`` = WRITEs acknowledged, ``status`` =
    #: the worst status of its responses, ``cycle`` = when its last response, normally a
    #: WRITE_RESP, came); a push REDUCE_SEND: ``value`` = WRITEs sent, ``status`` OK, ``inc`` 1,
    #: ``cycle`` = when its last flit left the accelerator
    KERNEL_DONE = 4


#: The completion flag word (32-bit little-endian in endpoint memory, written by the ISA) and its
#: status bits are defined by the ISA: :func:`scin.hdl.packet.flag_layout`, ``FlagStatus``.
FLAG_LAYOUT = flag_layout()


def command_layout(params):
    """One accelerator command. Fields an op does not name below are ignored.

    ``op`` : :class:`AccOp`.
    ``tag`` : every op; goes into the request header (not for the kernel ops, whose packets carry
    kernel tags) and comes back in the op's events. It must leave the top tag bit clear
    (:func:`command_tag_mask`).
    ``addr`` : the remote byte address (WRITE_REMOTE, READ_REMOTE), the arrival address as the ISA
    defines it (ARRIVE: it names the sync resource), the multicast address of the word to add to
    (RED) or of the first packet (LDRED_ST, LDRED_COPY: packet ``i`` is read at ``addr + i *
    length``), or the local byte address of the flag word (WAIT_FLAG: 4-byte aligned).
    ``dst`` : the destination port (WRITE_REMOTE, READ_REMOTE, RED: normally
    ``params.switch_port``; LDRED_COPY: the port written, normally this endpoint's own). ARRIVE
    sends it as given; the kernel ops' READs and LDRED_ST's WRITEs go to ``params.switch_port``.
    ``length`` : bytes (WRITE_REMOTE, READ_REMOTE; bytes per packet for LDRED_ST and LDRED_COPY,
    at most ``max_payload``) or the addend (ARRIVE, RED; normally 1).
    ``seed`` : WRITE_REMOTE's pattern. ``generation`` : WAIT_FLAG's expected generation.
    ``count`` : packets of LDRED_ST/LDRED_COPY (0: done at once).
    ``window`` : LDRED_ST/LDRED_COPY's most READs unanswered at a time (0, or more than the
    kernel's slots, :func:`~scin.hdl.endpoint.kernel.kernel_slots` (16 at the default tag width),
    means that many).
    ``dest`` : LDRED_COPY's and REDUCE_SEND's first destination address (packet ``i`` written at
    ``dest + i * length``).

    REDUCE_SEND (:class:`~scin.hdl.endpoint.kernel.ReduceSend`, whose contract this is): ``addr``
    and ``addr2`` are local byte addresses (flit-aligned) of the first and second source,
    ``dst``/``dest`` the port and address written, ``length`` bytes per WRITE (a multiple of the
    flit unless ``count`` is 1), ``count`` WRITEs (0: done at once); ``reduce`` adds the second
    source (else the first is copied), ``dtype`` (:class:`~scin.hdl.isa.dtype.DType`, FP16 or
    BF16) is the elements' type, ``local`` also writes each result packet to this endpoint's own
    port at ``addr + i * length`` (through the switch: the accelerator has no other way into its
    memory).
    ``push`` (REDUCE_SEND only; the last field, so the others keep their bit positions): the
    push protocol's upload of an operand into the switch's In-Switch Accelerator. The same
    ``count`` WRITEs of ``length`` bytes at ``dest + i * length`` with the same payload (copy or,
    with ``reduce``, sum), but inc=1: the switch hands them to its ISA, which ignores ``dst``
    (sent as given) and never answers them. They are posted: KERNEL_DONE comes once the last flit
    of the last WRITE has left the accelerator (``cycle`` = that cycle, ``value`` = WRITEs sent,
    ``status`` OK), without waiting for any WRITE_RESP. ``local`` is ignored with ``push`` (no
    copy is written to this port). ``dest`` is the ISA's address as the caller builds it.
    """
    return data.StructLayout({
        "op": AccOp, "dst": params.port_bits, "tag": params.tag_width,
        "length": params.length_width, "addr": params.addr_width,
        "seed": 16, "generation": 16,
        "count": COUNT_BITS, "window": WINDOW_BITS, "dest": params.addr_width,
        "addr2": params.addr_width, "reduce": 1, "local": 1, "dtype": DType,
        "push": 1,
    })


def command_tag_mask(params):
    """The tags commands may carry: every bit below the top tag bit, which marks kernel
    packets (their responses are the kernel's, never events)."""
    return (1 << (params.tag_width - 1)) - 1


def event_layout(params):
    """One accelerator event. ``status`` is the response header's status (READ_DONE, WRITE_DONE),
    the flag's status field (FLAG) or the worst status of the op's responses (KERNEL_DONE);
    ``src``, ``inc`` and ``length`` come from the response header (SENT, FLAG and KERNEL_DONE:
    this port, the request's ``inc``, the command's ``length``); ``tag`` is the command's (SENT,
    FLAG, KERNEL_DONE) or the response's; ``value`` is given per :class:`EventKind` (0 where
    none is); ``cycle`` is the free-running cycle counter when the event happened."""
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

    LDRED_ST and LDRED_COPY hand the command to the :class:`~scin.hdl.endpoint.kernel.Kernel`
    (``kernel``), which sends READs on ``req_out`` and WRITEs on ``write_out`` (through the same
    output registers) and takes every response whose tag has the top bit set; the command blocks
    later commands until the kernel reports that every WRITE is acknowledged, then emits
    KERNEL_DONE. Its SENT event is that of its first READ header (none if ``count`` is 0).
    Responses with the top tag bit clear are reported as before, also while a kernel runs.
    REDUCE_SEND does the same with the :class:`~scin.hdl.endpoint.kernel.ReduceSend` (``ring``),
    which reads the local memory through ``poll`` while it runs (``adder``: whether it has the
    ring's adder, :class:`~scin.hdl.endpoint.kernel.ReduceSend`); its SENT event is that of its
    first WRITE header. With ``push`` nothing is acknowledged: the command ends, with KERNEL_DONE,
    once the ReduceSend is done and its last flit has left ``write_out``.

    Event cycles: SENT is stamped with the cycle of the header flit's handshake on ``req_out`` or
    ``write_out`` (the flit leaves the accelerator); READ_DONE and WRITE_DONE with the cycle the
    response's last flit was taken; FLAG with the cycle the poll saw the generation; KERNEL_DONE
    with the cycle the op's last response (normally a WRITE_RESP) was taken, or, for a push
    REDUCE_SEND of at least one WRITE, the cycle its last flit's handshake on ``write_out``.

    Request headers: ``src`` = ``port``, ``dst`` = the command's ``dst``, ``inc`` = 1 only for
    ARRIVE, status 0. Kernel packets: see :class:`~scin.hdl.endpoint.kernel.Kernel` and
    :class:`~scin.hdl.endpoint.kernel.ReduceSend` (inc = 1 for a push REDUCE_SEND's WRITEs; its
    SENT and KERNEL_DONE events say ``inc`` = 1 too).

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

    def __init__(self, params, *, port=0, poll_addr_width, adder=True):
        check_type("params", params, FabricParams)
        check_int("port", port, 0, params.ports - 1)
        check_int("poll_addr_width", poll_addr_width, 1, params.addr_width)
        self._params, self._port, self._poll_addr_width = params, port, poll_addr_width
        self.kernel = Kernel(params, port=port)
        self.ring = ReduceSend(params, port=port, poll_addr_width=poll_addr_width, adder=adder)
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
        m.submodules.kernel = self.kernel
        kbus = KernelSignature(self._params).flip().create(path=("kernel_bus",))
        connect(m, kbus, self.kernel)
        m.submodules.ring = self.ring
        rbus = ReduceSendSignature(self._params, self._poll_addr_width).flip().create(
            path=("ring_bus",))
        connect(m, rbus, self.ring)
        m.d.comb += [kbus.cycle.eq(cycle), rbus.cycle.eq(cycle)]
        # Responses to kernel packets (top tag bit set) go to the kernels, the rest to the events.
        # Both kernels' WRITE_RESP inputs are always ready, and only the one running counts them.
        rd_local = packet_signature(self._params).create(path=("rd_local",))
        wr_local = packet_signature(self._params).create(path=("wr_local",))
        wr_kernel = packet_signature(self._params).create(path=("wr_kernel",))
        self._route(m, self.rdata_in, kbus.rdata, rd_local)
        self._route(m, self.wresp_in, wr_kernel, wr_local)
        m.d.comb += [kbus.wresp.payload.eq(wr_kernel.payload), kbus.wresp.valid.eq(wr_kernel.valid),
                     rbus.wresp.payload.eq(wr_kernel.payload), rbus.wresp.valid.eq(wr_kernel.valid),
                     wr_kernel.ready.eq(kbus.wresp.ready & rbus.wresp.ready)]
        ev = self._event_merge(m)
        self._commands(m, cycle, ev, kbus, rbus)
        self._write_responses(m, cycle, ev, wr_local)
        self._read_responses(m, cycle, ev, rd_local)
        return m

    def _route(self, m, src, kernel, local):
        """Packets of ``src`` to ``kernel`` if their header's top tag bit is set, else to
        ``local``; the decision is taken on the header flit and kept to its ``last`` flit."""
        hdr_layout = self._params.header_layout
        head = hdr_layout(src.payload.data[:hdr_layout.size])
        mid, mid_kernel = Signal(), Signal()  # inside a packet, and where it goes
        to_kernel = Mux(mid, mid_kernel, head.tag[-1])
        m.d.comb += [kernel.payload.eq(src.payload), local.payload.eq(src.payload),
                     kernel.valid.eq(src.valid & to_kernel), local.valid.eq(src.valid & ~to_kernel),
                     src.ready.eq(Mux(to_kernel, kernel.ready, local.ready))]
        with m.If(src.valid & src.ready):
            m.d.sync += [mid.eq(~src.payload.last), mid_kernel.eq(to_kernel)]

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

    def _commands(self, m, cycle, ev, kbus, rbus):
        """The command FSM: request headers on ``req_out``/``write_out`` (registered), WRITE
        payload from the pattern generator, flag polling, kernel ops; SENT, FLAG and KERNEL_DONE
        events."""
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
        wo_left = Signal(32)   # the cycle of the latest flit handshake on write_out (push's end)
        with m.If(wo_v & self.write_out.ready):
            m.d.sync += wo_left.eq(cycle)

        hdr = Signal(hdr_layout)
        opcode = Signal(Opcode, init=Opcode.WRITE)
        with m.Switch(c.op):
            with m.Case(AccOp.ARRIVE, AccOp.RED):
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
        push = (c.op == AccOp.REDUCE_SEND) & c.push   # its WRITEs carry inc=1
        arm = [armed.eq(1), ev_sent.kind.eq(EventKind.SENT), ev_sent.tag.eq(c.tag),
               ev_sent.length.eq(c.length), ev_sent.src.eq(self._port), ev_sent.status.eq(0),
               ev_sent.inc.eq((c.op == AccOp.ARRIVE) | push), ev_sent.value.eq(0)]

        word_idx = Signal(16)               # 32-bit word index of the next WRITE payload flit
        remaining = Signal(P.length_width)  # WRITE payload bytes still to send
        words = fb // 4
        pattern = Cat(*[Cat((word_idx + k)[:16], c.seed) for k in range(words)])
        keep = Signal(fb)
        m.d.comb += keep.eq(Cat(*[remaining > b for b in range(fb)]))
        keep_bits = Cat(*[keep[b].replicate(8) for b in range(fb)])

        kstart_v, rstart_v, kfirst, kernel_mode = Signal(), Signal(), Signal(), Signal()
        ring_op = c.op == AccOp.REDUCE_SEND
        self._kernel_glue(m, c, kbus, kstart_v, kfirst, kernel_mode & ~ring_op, ro_v, ro, ro_can,
                          wo_v, wo, wo_can, can_arm, [*arm, armed_on_write.eq(0)])
        self._ring_glue(m, c, rbus, rstart_v, kfirst, kernel_mode & ring_op, wo_v, wo, wo_can,
                        can_arm, [*arm, armed_on_write.eq(1)])

        poll_ok = Signal()  # poll.data reflects the flag address (one cycle after it was set)
        flag = FLAG_LAYOUT(Signal(32))
        m.d.comb += [self.poll.addr.eq(Mux(ring_op, rbus.poll.addr, c.addr[lg:])),
                     rbus.poll.data.eq(self.poll.data),
                     flag.as_value().eq(self.poll.data.word_select(c.addr[2:lg], 32))]
        reached = (flag.generation - c.generation)[:16] < 0x8000

        with m.FSM(name="command"):
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += c.eq(self.cmd.payload)
                    with m.Switch(self.cmd.payload.op):
                        with m.Case(AccOp.ARRIVE, AccOp.READ_REMOTE, AccOp.RED):
                            m.next = "REQ"
                        with m.Case(AccOp.WRITE_REMOTE):
                            m.next = "WRITE_HEADER"
                        with m.Case(AccOp.WAIT_FLAG):
                            m.d.sync += poll_ok.eq(0)
                            m.next = "POLL"
                        with m.Case(AccOp.LDRED_ST, AccOp.LDRED_COPY):
                            m.d.sync += [kstart_v.eq(1), kfirst.eq(1)]
                            m.next = "KERNEL"
                        with m.Case(AccOp.REDUCE_SEND):
                            m.d.sync += [rstart_v.eq(1), kfirst.eq(1)]
                            m.next = "KERNEL"
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
            with m.State("KERNEL"):
                m.d.comb += kernel_mode.eq(1)
                done = Mux(ring_op, rbus.done.payload.as_value(), kbus.done.payload.as_value())
                done = kbus.done.payload.shape()(done)
                # A push is posted: its end is its last flit leaving ``write_out`` (the ring is
                # done once that flit is in ``wo``, so the last handshake before ``wo`` empties
                # is that flit's), not a response.
                done_v = Mux(ring_op, rbus.done.valid & ~(push & wo_v), kbus.done.valid)
                done_cycle = Mux(push & (done.packets != 0), wo_left, done.cycle)
                with m.If(done_v & ~ev_cmd_v):
                    m.d.comb += [kbus.done.ready.eq(~ring_op), rbus.done.ready.eq(ring_op)]
                    m.d.sync += [ev_cmd_v.eq(1), ev_cmd.kind.eq(EventKind.KERNEL_DONE),
                                 ev_cmd.tag.eq(c.tag), ev_cmd.status.eq(done.status),
                                 ev_cmd.src.eq(self._port), ev_cmd.inc.eq(push),
                                 ev_cmd.length.eq(c.length), ev_cmd.value.eq(done.packets),
                                 ev_cmd.cycle.eq(done_cycle)]
                    m.next = "IDLE"

    def _kernel_glue(self, m, c, kbus, kstart_v, kfirst, kernel_mode, ro_v, ro, ro_can, wo_v,
                     wo, wo_can, can_arm, arm):
        """The kernel's side of the command FSM: the op offered on ``kbus.start`` (``kstart_v``,
        the payload from the held command), and while the FSM waits in KERNEL
        (``kernel_mode``) the kernel's flits loaded into the output registers; the first READ
        arms the command's SENT event (``kfirst``), so it waits for a free SENT register."""
        start = kbus.start.payload
        m.d.comb += [kbus.start.valid.eq(kstart_v),
                     start.op.eq(Mux(c.op == AccOp.LDRED_COPY, KernelOp.LDRED_COPY,
                                     KernelOp.LDRED_ST)),
                     *(getattr(start, f).eq(getattr(c, f))
                       for f in ("addr", "dest", "dst", "length", "count", "window"))]
        with m.If(kbus.start.ready):
            m.d.sync += kstart_v.eq(0)
        with m.If(kernel_mode):
            m.d.comb += [kbus.req.ready.eq(ro_can & (~kfirst | can_arm)),
                         kbus.write.ready.eq(wo_can)]
            with m.If(kbus.req.valid & kbus.req.ready):
                m.d.sync += [ro_v.eq(1), ro.eq(kbus.req.payload)]
                with m.If(kfirst):
                    m.d.sync += [kfirst.eq(0), *arm]
            with m.If(kbus.write.valid & kbus.write.ready):
                m.d.sync += [wo_v.eq(1), wo.eq(kbus.write.payload)]

    def _ring_glue(self, m, c, rbus, rstart_v, kfirst, ring_mode, wo_v, wo, wo_can, can_arm,
                   arm):
        """The :class:`ReduceSend`'s side of the command FSM, as :meth:`_kernel_glue`: the op
        offered from the held command, its WRITE flits loaded into ``write_out``'s register while
        it runs (``ring_mode``); the first header arms the SENT event."""
        start = rbus.start.payload
        m.d.comb += [rbus.start.valid.eq(rstart_v),
                     *(getattr(start, f).eq(getattr(c, f))
                       for f in ("addr", "addr2", "dest", "dst", "length", "count", "reduce",
                                 "local", "dtype", "push"))]
        with m.If(rbus.start.ready):
            m.d.sync += rstart_v.eq(0)
        with m.If(ring_mode):
            m.d.comb += rbus.write.ready.eq(wo_can & (~kfirst | can_arm))
            with m.If(rbus.write.valid & rbus.write.ready):
                m.d.sync += [wo_v.eq(1), wo.eq(rbus.write.payload)]
                with m.If(kfirst):
                    m.d.sync += [kfirst.eq(0), *arm]

    def _write_responses(self, m, cycle, ev, wresp_in):
        """WRITE_RESP packets (header only; a longer packet's tail is dropped) to WRITE_DONE
        events."""
        hdr_layout = self._params.header_layout
        ev_wr_v, ev_wr = ev["wr"]
        bh = hdr_layout(wresp_in.payload.data[:hdr_layout.size])
        wr_skip = Signal()  # dropping the tail of a malformed multi-flit WRESP packet
        with m.If(wr_skip):
            m.d.comb += wresp_in.ready.eq(1)
        with m.Else():
            m.d.comb += wresp_in.ready.eq(~ev_wr_v)
            with m.If(wresp_in.valid & ~ev_wr_v):
                m.d.sync += [ev_wr_v.eq(1), ev_wr.kind.eq(EventKind.WRITE_DONE),
                             ev_wr.tag.eq(bh.tag), ev_wr.status.eq(bh.status),
                             ev_wr.src.eq(bh.src), ev_wr.inc.eq(bh.inc),
                             ev_wr.length.eq(bh.length), ev_wr.value.eq(0), ev_wr.cycle.eq(cycle)]
        with m.If(wresp_in.valid & wresp_in.ready):
            m.d.sync += wr_skip.eq(~wresp_in.payload.last)

    def _read_responses(self, m, cycle, ev, rdata_in):
        """READ_RESP packets to READ_DONE events, the payload folded by XOR into ``value``."""
        P = self._params
        hdr_layout, ev_layout = P.header_layout, event_layout(P)
        words = P.flit_bytes // 4
        ev_rd_v, ev_rd = ev["rd"]
        rh = hdr_layout(rdata_in.payload.data[:hdr_layout.size])
        fold = Signal(32)
        flit_fold = Signal(32)
        folded = rdata_in.payload.data.word_select(0, 32)
        for k in range(1, words):
            folded = folded ^ rdata_in.payload.data.word_select(k, 32)
        m.d.comb += flit_fold.eq(folded)
        rd = Signal(ev_layout)  # event being assembled
        in_last = rdata_in.payload.last
        with m.FSM(name="rdata"):
            with m.State("HEADER"):
                m.d.comb += rdata_in.ready.eq(~in_last | ~ev_rd_v)
                with m.If(rdata_in.valid & rdata_in.ready):
                    hdr_event = [rd.kind.eq(EventKind.READ_DONE), rd.tag.eq(rh.tag),
                                 rd.status.eq(rh.status), rd.src.eq(rh.src), rd.inc.eq(rh.inc),
                                 rd.length.eq(rh.length)]
                    with m.If(in_last):
                        m.d.sync += [ev_rd_v.eq(1), *[
                            getattr(ev_rd, f).eq(getattr(rh, f))
                            for f in ("tag", "src", "inc", "length")],
                            ev_rd.kind.eq(EventKind.READ_DONE), ev_rd.status.eq(rh.status),
                            ev_rd.value.eq(0), ev_rd.cycle.eq(cycle)]
                    with m.Else():
                        m.d.sync += [*hdr_event, fold.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += rdata_in.ready.eq(~in_last | ~ev_rd_v)
                with m.If(rdata_in.valid & rdata_in.ready):
                    m.d.sync += fold.eq(fold ^ flit_fold)
                    with m.If(in_last):
                        m.d.sync += [ev_rd_v.eq(1), ev_rd.eq(rd), ev_rd.value.eq(fold ^ flit_fold),
                                     ev_rd.cycle.eq(cycle)]
                        m.next = "HEADER"
