"""Kernel: the GPU side of NCCL's NVLS (NVLink SHARP) kernels, inside the accelerator model.

An NVLS collective kernel is a loop of multimem instructions on multicast addresses
(``params.multicast_base`` and up; the switch's NVLS engine answers them, docs/NVLS.md):

* ``multimem.ld_reduce``: a READ (inc=0, ``dst`` = ``params.switch_port``) of ``length`` bytes at a
  multicast address; the switch reads that offset in every member, reduces, and answers this
  requester alone with a READ_RESP (same tag);
* ``multimem.st``: a WRITE to a multicast address, stored in every member and acknowledged with
  one WRITE_RESP once every member has;
* an ordinary WRITE to one port.

The :class:`Kernel` runs one such loop per command, in hardware, so a MiB-sized collective is
paced by the fabric and not by the testbench: ``count`` READs of ``length`` bytes at ``addr + i *
length`` with at most ``window`` unanswered, each READ_RESP forwarded cut-through (flit by flit, no
packet buffer) as a WRITE of the same bytes, and one ``done`` report when every WRITE is
acknowledged. The :class:`Accelerator` feeds it its LDRED_ST and LDRED_COPY commands and gives it
every response whose tag has the top bit set (:func:`kernel_tag`).

Structure: an *issue* unit (READs, slot table), a *forward* unit (READ_RESP to WRITE, per flit)
and an *ack* unit (WRITE_RESPs), sharing the counters of the running op.

The step of NCCL's ring kernels ("read the local data, add the data the previous rank wrote here,
send the sum to the next rank") is a different loop, with local reads instead of fabric READs:
:class:`ReduceSend`, beside the :class:`Kernel` in the accelerator (the REDUCE_SEND command). Its
push mode sends the same WRITEs with inc=1, posted, into the In-Switch Accelerator's reserved
space (the push protocol: each participant writes its operand, no READ at the ISA's initiative).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from ..isa.dtype import DType
from ..nvls.reducer import NvlsReducer
from ..packet import FabricParams, MsgClass, Opcode, Status
from ..params import check_int, check_type
from ..transport.signature import packet_signature
from .axi import poll_signature


__all__ = ["KernelOp", "KERNEL_SLOTS", "COUNT_BITS", "WINDOW_BITS", "kernel_slots", "kernel_tag",
           "kernel_command_layout", "kernel_done_layout", "KernelSignature", "Kernel",
           "REDUCE_SEND_FIFO_DEPTH", "reduce_send_layout", "ReduceSendSignature", "ReduceSend"]


#: Most READs a kernel keeps unanswered (slots of its table); fewer if the tag is narrow.
KERNEL_SLOTS = 16
#: Width of a kernel's packet count.
COUNT_BITS = 24
#: Width of a kernel's window field (values above the slot count mean the slot count).
WINDOW_BITS = 8


class KernelOp(enum.Enum, shape=2):
    """What a kernel writes for each ld_reduce result."""
    LDRED_ST   = 0  #: multimem.st: WRITE to the same multicast address, ``dst`` = switch_port
    LDRED_COPY = 1  #: ordinary WRITE (inc=0) to port ``dst`` at ``dest + i * length``


def kernel_slots(params):
    """Slots of a kernel on ``params``: :data:`KERNEL_SLOTS`, or fewer so that a slot number fits
    below the kernel tag bit."""
    return 1 << min(exact_log2(KERNEL_SLOTS), params.tag_width - 1)


def kernel_tag(params, slot=0):
    """The tag of a kernel packet: the top tag bit set (testbench command tags leave it clear),
    the slot number in the low bits."""
    return 1 << (params.tag_width - 1) | slot


def kernel_command_layout(params):
    """One kernel op. ``addr``: first multicast address read (READ ``i`` is at ``addr + i *
    length``); ``dest``: first address written by LDRED_COPY (ignored by LDRED_ST); ``dst``: the
    port LDRED_COPY writes to (ignored by LDRED_ST); ``length``: bytes per packet, at most
    ``max_payload``; ``count``: packets (0: the op completes at once); ``window``: most READs
    unanswered at any time (0, or more than :func:`kernel_slots`, means :func:`kernel_slots`)."""
    return data.StructLayout({
        "op": KernelOp, "addr": params.addr_width, "dest": params.addr_width,
        "dst": params.port_bits, "length": params.length_width, "count": COUNT_BITS,
        "window": WINDOW_BITS,
    })


def kernel_done_layout(params):
    """End of a kernel op. ``packets``: WRITEs acknowledged (``count`` unless a READ failed);
    ``status``: the worst :class:`Status` (largest value) of the op's responses; ``cycle``: the
    ``cycle`` input when the op's last response was taken (normally its last WRITE_RESP)."""
    return data.StructLayout({"packets": COUNT_BITS, "status": Status, "cycle": 32})


class KernelSignature(wiring.Signature):
    """The kernel as its host sees it (flipped: the kernel's own view).

    Members
    -------
    start : In(stream.Signature(kernel_command_layout(params)))
        Ops; taken only while no op runs.
    done : Out(stream.Signature(kernel_done_layout(params)))
        One report per op, after its last response.
    req : Out(packet_signature(params))
        READ headers (REQ class).
    write : Out(packet_signature(params))
        WRITE packets.
    rdata : In(packet_signature(params))
        READ_RESPs with a kernel tag; always drained, at one flit per cycle unless ``write``
        stalls a forwarded one.
    wresp : In(packet_signature(params))
        WRITE_RESPs with a kernel tag; always ready.
    cycle : In(32)
        The host's cycle counter, for ``done.cycle``.
    """

    def __init__(self, params):
        pkt = packet_signature(check_type("params", params, FabricParams))
        super().__init__({
            "start": In(stream.Signature(kernel_command_layout(params))),
            "done":  Out(stream.Signature(kernel_done_layout(params))),
            "req":   Out(pkt),
            "write": Out(pkt),
            "rdata": In(pkt),
            "wresp": In(pkt),
            "cycle": In(32),
        })


class Kernel(wiring.Component):
    """Runs LDRED_ST / LDRED_COPY ops (:class:`KernelOp`), one at a time.

    Contract, for an op taken on ``start``:

    * READ ``i`` (``0 <= i < count``, in order): ``addr + i * length``, ``length`` bytes, inc=0,
      ``src`` = ``port``, ``dst`` = ``params.switch_port``, tag :func:`kernel_tag` of a free slot.
      At most ``min(window, slots)`` READs are unanswered at any time.
    * A READ_RESP whose tag names a busy slot answers that slot's READ and frees the slot when its
      header is taken. If its status is OK or EXOKAY and its ``length`` is the op's, it is
      forwarded cut-through as a WRITE (inc=0, same tag, ``length`` bytes): LDRED_ST to
      ``params.switch_port`` at the READ's address, LDRED_COPY to ``dst`` at ``dest + i *
      length``. The WRITE always has ``ceil(length / flit_bytes)`` payload flits: missing
      response flits are sent as zeros, extra ones dropped, and either counts as SLVERR. Any
      other READ_RESP of a busy slot writes nothing and counts with its status (SLVERR if its
      status was OK but its length wrong).
    * A READ_RESP of a free slot, or taken while no op runs, is dropped through its ``last`` flit;
      so is a WRITE_RESP beyond the WRITEs sent, so a stray response can neither block the
      fabric nor end an op early.
    * ``done`` is offered once all ``count`` READs are answered and every WRITE is acknowledged;
      the next op is taken after it.
    """

    def __init__(self, params, *, port=0):
        self._params = check_type("params", params, FabricParams)
        self._port = port
        self.slots = kernel_slots(params)
        super().__init__(KernelSignature(params))

    def elaborate(self, platform):
        P, S = self._params, self.slots
        m = Module()
        cmd = Signal(kernel_command_layout(P))
        window = Signal(range(S + 1))
        nflits = Signal(range(P.max_payload_flits + 1))  # payload flits per packet
        issued, answered = Signal(COUNT_BITS), Signal(COUNT_BITS)
        written, acked = Signal(COUNT_BITS), Signal(COUNT_BITS)
        status, last_cycle = Signal(3), Signal(32)
        running, fwd_idle = Signal(), Signal()

        # Status and cycle updates from the forward and ack units in the same cycle: the worst
        # of both, so neither unit can overwrite the other's.
        st_fwd, st_ack = Signal(3), Signal(3)
        worst = Mux(status > st_fwd, status, st_fwd)
        m.d.sync += status.eq(Mux(worst > st_ack, worst, st_ack))
        touched = Signal()
        with m.If(touched):
            m.d.sync += last_cycle.eq(self.cycle)

        with m.FSM(name="kernel"):
            with m.State("IDLE"):
                m.d.comb += self.start.ready.eq(1)
                with m.If(self.start.valid):
                    w = self.start.payload.window
                    m.d.sync += [
                        cmd.eq(self.start.payload),
                        window.eq(Mux((w == 0) | (w > S), S, w)),
                        nflits.eq((self.start.payload.length + P.flit_bytes - 1)
                                  >> exact_log2(P.flit_bytes)),
                        issued.eq(0), answered.eq(0), written.eq(0), acked.eq(0),
                        status.eq(Status.OK), last_cycle.eq(self.cycle),
                    ]
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += running.eq(1)
                with m.If((issued == cmd.count) & (answered == cmd.count) & fwd_idle
                          & (acked == written)):
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [self.done.valid.eq(1), self.done.payload.packets.eq(acked),
                             self.done.payload.status.eq(status),
                             self.done.payload.cycle.eq(last_cycle)]
                with m.If(self.done.ready):
                    m.next = "IDLE"

        busy_set, busy_clr = Signal(S), Signal(S)
        busy = Signal(S)
        m.d.sync += busy.eq(busy & ~busy_clr | busy_set)
        outstanding = Signal(range(S + 1))
        m.d.sync += outstanding.eq(outstanding + (busy_set != 0) - (busy_clr != 0))
        table = memory.Memory(shape=P.addr_width, depth=S, init=[])  # WRITE address per slot
        m.submodules.table = table
        common = dict(running=running, cmd=cmd, busy=busy, table=table)
        self._issue(m, **common, window=window, outstanding=outstanding, issued=issued,
                    busy_set=busy_set)
        self._forward(m, **common, nflits=nflits, answered=answered, written=written,
                      busy_clr=busy_clr, st_fwd=st_fwd, touched=touched, fwd_idle=fwd_idle)
        self._ack(m, running=running, acked=acked, written=written, st_ack=st_ack,
                  touched=touched)
        return m

    def _out_register(self, m, port):
        return _out_register(m, self._params, port)

    def _header(self, m, **fields):
        return _request_header(m, self._params, self._port, **fields)

    def _issue(self, m, *, running, cmd, busy, table, window, outstanding, issued, busy_set):
        """READs in order, each into the lowest free slot, while the window allows."""
        P, S = self._params, self.slots
        rq_v, rq, rq_can = self._out_register(m, self.req)
        free = Signal(range(S))
        for k in reversed(range(S)):  # the last assignment wins: the lowest free slot
            with m.If(~busy[k]):
                m.d.comb += free.eq(k)
        next_rd, next_wr = Signal(P.addr_width), Signal(P.addr_width)
        with m.If(self.start.valid & self.start.ready):
            op = self.start.payload
            m.d.sync += [next_rd.eq(op.addr),
                         next_wr.eq(Mux(op.op == KernelOp.LDRED_COPY, op.dest, op.addr))]
        hdr = self._header(m, opcode=Opcode.READ, msg_class=MsgClass.REQ,
                           dst=P.switch_port, length=cmd.length,
                           tag=Cat(free, Const(0, P.tag_width - 1 - ceil_log2(S)), Const(1, 1)),
                           addr=next_rd)
        wp = table.write_port()
        go = running & (issued != cmd.count) & (outstanding < window) & ~busy.all() & rq_can
        m.d.comb += [wp.addr.eq(free), wp.data.eq(next_wr), wp.en.eq(go)]
        with m.If(go):
            m.d.comb += busy_set.eq(Const(1, S) << free)
            m.d.sync += [rq_v.eq(1), rq.data.eq(hdr), rq.last.eq(1), issued.eq(issued + 1),
                         next_rd.eq(next_rd + cmd.length), next_wr.eq(next_wr + cmd.length)]

    def _forward(self, m, *, running, cmd, busy, table, nflits, answered, written, busy_clr,
                 st_fwd, touched, fwd_idle):
        """READ_RESP to WRITE, flit by flit (see the class docstring for padding and errors)."""
        P, S = self._params, self.slots
        wo_v, wo, wo_can = self._out_register(m, self.write)
        rin = self.rdata
        rh = P.header_layout(rin.payload.data[:P.header_layout.size])
        slot = rh.tag[:ceil_log2(S)] if S > 1 else Const(0, 1)
        rp = table.read_port(domain="comb")
        m.d.comb += rp.addr.eq(slot)
        known = running & busy.bit_select(slot, 1)
        good = (rh.status.as_value() <= Status.EXOKAY.value) & (rh.length == cmd.length)
        usable = known & good
        hdr = self._header(m, opcode=Opcode.WRITE, msg_class=MsgClass.WRITE,
                           dst=Mux(cmd.op == KernelOp.LDRED_COPY, cmd.dst, P.switch_port),
                           length=cmd.length, tag=rh.tag, addr=rp.data)
        remaining = Signal.like(nflits)
        in_done = Signal()    # the READ_RESP's last flit has been taken: pad with zeros
        with m.FSM(name="forward"):
            with m.State("HEAD"):
                m.d.comb += [fwd_idle.eq(1), rin.ready.eq(~usable | wo_can)]
                with m.If(rin.valid & rin.ready):
                    with m.If(known):
                        m.d.comb += [busy_clr.eq(Const(1, S) << slot), touched.eq(~usable)]
                        m.d.sync += answered.eq(answered + 1)
                    with m.If(known & ~good):
                        m.d.comb += st_fwd.eq(Mux(rh.status.as_value() <= Status.EXOKAY.value,
                                                  Status.SLVERR, rh.status))
                    with m.If(usable):
                        m.d.sync += [wo_v.eq(1), wo.data.eq(hdr), wo.last.eq(nflits == 0),
                                     written.eq(written + 1), remaining.eq(nflits),
                                     in_done.eq(rin.payload.last)]
                        with m.If(nflits != 0):
                            m.next = "BODY"
                        with m.Elif(~rin.payload.last):
                            m.d.comb += st_fwd.eq(Status.SLVERR)  # payload on a 0-byte read
                            m.next = "DRAIN"
                    with m.Elif(~rin.payload.last):
                        m.next = "DRAIN"
            with m.State("BODY"):
                m.d.comb += rin.ready.eq(wo_can & ~in_done)
                with m.If(wo_can & (in_done | rin.valid)):
                    last = remaining == 1
                    m.d.sync += [wo_v.eq(1), wo.data.eq(Mux(in_done, 0, rin.payload.data)),
                                 wo.last.eq(last), remaining.eq(remaining - 1)]
                    with m.If(~in_done & rin.payload.last):
                        m.d.sync += in_done.eq(1)
                    with m.If(in_done):
                        m.d.comb += st_fwd.eq(Status.SLVERR)       # response too short
                    with m.If(last):
                        m.next = "HEAD"
                        with m.If(~in_done & ~rin.payload.last):
                            m.d.comb += st_fwd.eq(Status.SLVERR)   # response too long
                            m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.comb += rin.ready.eq(1)
                with m.If(rin.valid & rin.payload.last):
                    m.next = "HEAD"

    def _ack(self, m, *, running, acked, written, st_ack, touched):
        _count_acks(m, self._params, self.wresp, running=running, acked=acked, written=written,
                    st_ack=st_ack, touched=touched)


def _out_register(m, params, port):
    """A registered packet output (the stream contract holds whatever the units do next):
    returns ``(valid, flit, can_load)``."""
    v, p = Signal(), Signal(params.flit_layout)
    m.d.comb += [port.valid.eq(v), port.payload.eq(p)]
    with m.If(port.ready):
        m.d.sync += v.eq(0)
    return v, p, ~v | port.ready


def _request_header(m, params, port, **fields):
    """A request header from its fields (inc, status 0; ``src`` = ``port``) as a flit value."""
    h = Signal(params.header_layout)
    m.d.comb += [h.src.eq(port), *(getattr(h, k).eq(v) for k, v in fields.items())]
    return h.as_value()


def _count_acks(m, params, win, *, running, acked, written, st_ack, touched):
    """WRITE_RESPs on ``win`` (always ready): counted (with their status and cycle) while
    ``running`` and WRITEs are unacknowledged; the tail of a malformed multi-flit one is
    dropped."""
    wh = params.header_layout(win.payload.data[:params.header_layout.size])
    mid = Signal()
    m.d.comb += win.ready.eq(1)
    with m.If(win.valid):
        m.d.sync += mid.eq(~win.payload.last)
        with m.If(~mid & running & (acked != written)):
            m.d.sync += acked.eq(acked + 1)
            m.d.comb += [st_ack.eq(wh.status), touched.eq(1)]


#: Flits (flit pairs when reducing) a :class:`ReduceSend` holds between its local reads and its
#: output. A read reserves an entry, its data is written a cycle later and can leave a cycle after
#: that, and the entry is free again the next cycle: 3 entries keep one flit per cycle, 4 spare one.
REDUCE_SEND_FIFO_DEPTH = 4


def reduce_send_layout(params):
    """One :class:`ReduceSend` op. ``addr``: local byte address of the first source; ``addr2``: of
    the second (read only when ``reduce``); both flit-aligned. ``dest``: first address written at
    port ``dst``. ``length``: bytes per WRITE, at most ``max_payload``, a multiple of
    ``flit_bytes`` unless ``count`` is 1. ``count``: WRITEs (0: the op completes at once).
    ``reduce``: add the second source to the first (else copy the first). ``local``: also write
    each result to this endpoint's own port, in place over the first source (ignored with
    ``push``). ``dtype``: :class:`DType` of the elements (BF16, else FP16). ``push``: send the
    WRITEs with inc=1 (to the switch's In-Switch Accelerator), posted: nobody acknowledges them."""
    return data.StructLayout({
        "addr": params.addr_width, "addr2": params.addr_width, "dest": params.addr_width,
        "dst": params.port_bits, "length": params.length_width, "count": COUNT_BITS,
        "reduce": 1, "local": 1, "dtype": DType, "push": 1,
    })


class ReduceSendSignature(wiring.Signature):
    """:class:`ReduceSend` as its host sees it (flipped: the unit's own view).

    Members
    -------
    start : In(stream.Signature(reduce_send_layout(params)))
        Ops; taken only while no op runs.
    done : Out(stream.Signature(kernel_done_layout(params)))
        One report per op, once every WRITE is acknowledged (``push``: once the last flit has
        been taken on ``write``).
    write : Out(packet_signature(params))
        WRITE packets.
    wresp : In(packet_signature(params))
        WRITE_RESPs with a kernel tag; always ready.
    poll : Out(poll_signature(poll_addr_width, params.flit_width))
        A read port of the local memory: a word index out, that word one cycle later.
    cycle : In(32)
        The host's cycle counter, for ``done.cycle``.
    """

    def __init__(self, params, poll_addr_width):
        pkt = packet_signature(check_type("params", params, FabricParams))
        super().__init__({
            "start": In(stream.Signature(reduce_send_layout(params))),
            "done":  Out(stream.Signature(kernel_done_layout(params))),
            "write": Out(pkt),
            "wresp": In(pkt),
            "poll":  Out(poll_signature(poll_addr_width, params.flit_width)),
            "cycle": In(32),
        })


class ReduceSend(wiring.Component):
    """The step of NCCL's ring kernels: local data, plus (reducing) the data the previous rank
    wrote here, streamed to a peer as ordinary WRITEs; one op at a time.

    Contract, for an op taken on ``start`` (``n = ceil(length / flit_bytes)``):

    * WRITE ``i`` (``0 <= i < count``, in order): inc=0, status 0, ``src`` = ``port``, tag
      :func:`kernel_tag` (slot 0), ``length`` bytes to port ``dst`` at ``dest + i * length``. Its
      payload flit ``k`` is ``A + B``, ``A`` the local flit at ``addr + (i * n + k) *
      flit_bytes`` and ``B`` the one at the same offset from ``addr2`` (``reduce``), else ``A``;
      bytes past ``length`` in the last flit are zero. With ``local``, WRITE ``i`` is followed by
      the same WRITE to ``port`` itself at ``addr + i * length`` (in place over ``A``, which has
      been read by then; the accelerator's only way into its memory is through the switch).
    * ``A + B`` is, per 16-bit lane, the correctly rounded FP16 or BF16 sum (``dtype``): NCCL's
      ``__hadd2``. The adder is an :class:`~scin.hdl.nvls.reducer.NvlsReducer` of two members: it
      widens both to FP32, adds once (RNE) and rounds once to 16 bits; this double rounding is
      innocuous because binary32 has at least ``2p + 2`` significand bits for both formats (24 >=
      2 * 11 + 2 for FP16, 24 >= 2 * 8 + 2 for BF16; Figueroa, "When is double rounding
      innocuous?", 1995), and FP32's exponent range covers both. A NaN result is the canonical
      quiet NaN. A copy (``reduce`` = 0) bypasses the adder: bit-exact, NaN payloads included.
    * ``done`` is offered once every WRITE is acknowledged (the fence the ring needs before it
      signals the peer): ``packets`` = WRITE_RESPs counted (``count``, twice that with ``local``),
      ``status`` the worst of theirs, ``cycle`` when the last was taken. WRITE_RESPs beyond the
      WRITEs sent, or while no op runs, are dropped.
    * ``push`` (the push protocol's operand upload into the In-Switch Accelerator): the same
      ``count`` WRITEs, same addresses, lengths and payloads (sum or copy), but with inc=1, so the
      switch gives them to its ISA, which ignores ``dst`` (sent as given) and never answers them:
      they are posted. ``local`` is ignored (no copy to this port). ``done`` is offered as soon
      as the last flit of the last WRITE has been taken on ``write`` (no fence: there is nothing
      to wait for): ``packets`` = WRITEs sent (``count``), ``status`` OK, ``cycle`` that flit's
      handshake (the op's start if ``count`` is 0). Every WRITE_RESP that comes while it runs is
      dropped. The packets stream exactly as without ``push``: no extra cycle per packet.

    Without the adder (``adder=False``, a system that never runs the ring: the adder is sixteen
    FP32 adders per endpoint, over a quarter of the simulated system), an op with ``reduce`` is
    carried out as a copy of ``A`` and reported with ``status`` SLVERR, never silently.

    Local reads: ``poll`` delivers a whole flit one cycle after its address, every cycle; that
    one cycle is the model's GPU local read latency. A copy reads one flit per cycle; a reduction
    reads ``A`` then ``B`` on the one port, so it makes at most one result flit every two cycles
    (a GPU reads its memory much faster than it writes NVLink: a second read port on the endpoint
    memory would lift this). A read is issued only with a FIFO entry reserved for its data
    (:data:`REDUCE_SEND_FIFO_DEPTH`), as the port has no handshake; a stalled output holds the
    adder's pipeline. With ``local``, a packet's result flits are kept (one ``max_payload``
    buffer) and sent again behind its remote WRITE.
    """

    def __init__(self, params, *, port=0, poll_addr_width, adder=True):
        self._params = check_type("params", params, FabricParams)
        check_int("poll_addr_width", poll_addr_width, 1, params.addr_width)
        self._port = port
        self._adder = check_type("adder", adder, bool)
        super().__init__(ReduceSendSignature(params, poll_addr_width))

    def elaborate(self, platform):
        P = self._params
        m = Module()
        cmd = Signal(reduce_send_layout(P))
        nflits = Signal(range(P.max_payload_flits + 1))
        written, acked = Signal(COUNT_BITS + 1), Signal(COUNT_BITS + 1)
        status, last_cycle, st_ack, touched = Signal(3), Signal(32), Signal(3), Signal()
        m.d.sync += status.eq(Mux(status > st_ack, status, st_ack))
        with m.If(touched):
            m.d.sync += last_cycle.eq(self.cycle)
        active, counting = Signal(), Signal()  # sending packets; counting WRITE_RESPs
        q = m.submodules.fifo = fifo.SyncFIFOBuffered(width=2 * P.flit_width,
                                                      depth=REDUCE_SEND_FIFO_DEPTH)
        self._reader(m, cmd, active, q)
        result = self._results(m, cmd, q)
        packet_states, out_can = self._packets(m, cmd, nflits, result, written, active)
        # A push is posted: it ends when its last flit leaves (the output register can take the
        # next), stamped with that handshake's cycle; ``written`` is then the WRITEs sent.
        with m.If(cmd.push & self.write.valid & self.write.ready):
            m.d.comb += touched.eq(1)
        with m.FSM(name="reduce_send"):
            with m.State("IDLE"):
                m.d.comb += self.start.ready.eq(1)
                with m.If(self.start.valid):
                    p = self.start.payload
                    # A push has no local copy: it would be an ordinary WRITE to be acknowledged.
                    m.d.sync += [cmd.eq(p), cmd.local.eq(p.local & ~p.push),
                                 written.eq(0), acked.eq(0),
                                 status.eq(Mux(p.reduce & (not self._adder), Status.SLVERR,
                                               Status.OK)),
                                 nflits.eq((p.length + P.flit_bytes - 1)
                                           >> exact_log2(P.flit_bytes)),
                                 last_cycle.eq(self.cycle)]
                    m.next = "HEAD"
            packet_states()
            with m.State("FENCE"):
                m.d.comb += counting.eq(~cmd.push)
                with m.If(Mux(cmd.push, out_can, acked == written)):
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [self.done.valid.eq(1),
                             self.done.payload.packets.eq(Mux(cmd.push, written, acked)),
                             self.done.payload.status.eq(status),
                             self.done.payload.cycle.eq(last_cycle)]
                with m.If(self.done.ready):
                    m.next = "IDLE"
        # A push expects no WRITE_RESP: any that comes is a stray one, dropped.
        _count_acks(m, P, self.wresp, running=(active | counting) & ~cmd.push, acked=acked,
                    written=written, st_ack=st_ack, touched=touched)
        return m

    def _reader(self, m, cmd, active, q):
        """Local reads, flit after flit of the first source (reducing, each followed by the same
        flit of the second), their data into ``q`` (pairs: first source in the low half)."""
        P = self._params
        lg, fw = exact_log2(P.flit_bytes), P.flit_width
        left = Signal(COUNT_BITS + 8)           # flits still to read: count * n
        rd_a, rd_b = Signal.like(self.poll.addr), Signal.like(self.poll.addr)
        phase = Signal()                        # the second source's read is next
        free = Signal(range(REDUCE_SEND_FIFO_DEPTH + 1), init=REDUCE_SEND_FIFO_DEPTH)
        with m.If(self.start.valid & self.start.ready):
            p = self.start.payload
            n = (p.length + P.flit_bytes - 1) >> lg
            m.d.sync += [left.eq(p.count * n), rd_a.eq(p.addr[lg:]), rd_b.eq(p.addr2[lg:]),
                         phase.eq(0)]
        go_a = active & ~phase & (left != 0) & (free != 0)
        go_b = phase                            # its entry was reserved by the first read
        got_a, got_b, first = Signal(), Signal(), Signal(fw)
        m.d.sync += [got_a.eq(go_a), got_b.eq(go_b)]
        m.d.comb += self.poll.addr.eq(Mux(phase, rd_b, rd_a))
        with m.If(go_a):
            m.d.sync += [rd_a.eq(rd_a + 1), phase.eq(cmd.reduce)]
            with m.If(~cmd.reduce):
                m.d.sync += left.eq(left - 1)
        with m.If(go_b):
            m.d.sync += [rd_b.eq(rd_b + 1), phase.eq(0), left.eq(left - 1)]
        with m.If(got_a):
            m.d.sync += first.eq(self.poll.data)
        m.d.comb += [q.w_en.eq(got_a & ~cmd.reduce | got_b),
                     q.w_data.eq(Mux(got_b, Cat(first, self.poll.data),
                                     Cat(self.poll.data, Const(0, fw))))]
        m.d.sync += free.eq(free - go_a + (q.r_en & q.r_rdy))

    def _results(self, m, cmd, q):
        """The result flits as a stream: ``q``'s pairs through the two-member adder, or its first
        flits as they are (copy)."""
        fw = self._params.flit_width
        res = stream.Signature(fw).create(path=("result",))
        if not self._adder:
            m.d.comb += [res.valid.eq(q.r_rdy), res.payload.eq(q.r_data[:fw]),
                         q.r_en.eq(res.ready)]
            return res
        add = m.submodules.adder = NvlsReducer(flit_width=fw, members=2, user_width=1)
        ai = add.i.payload
        m.d.comb += [ai.data[0].eq(q.r_data[:fw]), ai.data[1].eq(q.r_data[fw:]),
                     ai.order[0].eq(0), ai.order[1].eq(1), ai.count.eq(2), ai.dtype.eq(cmd.dtype),
                     add.i.valid.eq(q.r_rdy & cmd.reduce)]
        m.d.comb += [res.valid.eq(Mux(cmd.reduce, add.o.valid, q.r_rdy)),
                     res.payload.eq(Mux(cmd.reduce, add.o.payload.data, q.r_data[:fw])),
                     add.o.ready.eq(res.ready & cmd.reduce),
                     q.r_en.eq(Mux(cmd.reduce, add.i.ready, res.ready))]
        return res

    def _packets(self, m, cmd, nflits, result, written, active):
        """The packet output. Returns a function that adds, inside the op's FSM, the states HEAD,
        BODY (the WRITE to ``dst``), LHEAD, LBODY (its copy to this port, ``local`` only), packet
        after packet, then FENCE; and the output register's ``can_load`` (in FENCE, true once
        the last flit is leaving or has left)."""
        P = self._params
        fb = P.flit_bytes
        wo_v, wo, wo_can = _out_register(m, P, self.write)
        pkt = Signal(COUNT_BITS)
        dest, own = Signal(P.addr_width), Signal(P.addr_width)
        remaining = Signal(P.length_width)
        k = Signal(range(P.max_payload_flits + 1))
        buf = m.submodules.replay = memory.Memory(shape=P.flit_width, depth=P.max_payload_flits,
                                                  init=[])
        bw, br = buf.write_port(), buf.read_port(domain="comb")
        with m.If(self.start.valid & self.start.ready):
            m.d.sync += [pkt.eq(0), dest.eq(self.start.payload.dest),
                         own.eq(self.start.payload.addr)]
        keep = Cat(*[(remaining > b).replicate(8) for b in range(fb)])
        fields = dict(opcode=Opcode.WRITE, msg_class=MsgClass.WRITE, length=cmd.length,
                      tag=kernel_tag(P))
        # inc=1 sends a push WRITE to the switch's ISA (which ignores ``dst``) instead of a port.
        remote = _request_header(m, P, self._port, dst=cmd.dst, addr=dest, inc=cmd.push,
                                 **fields)
        local = _request_header(m, P, self._port, dst=self._port, addr=own, **fields)
        data_ = result.payload & keep
        m.d.comb += [bw.addr.eq(k), bw.data.eq(data_), br.addr.eq(k)]
        load = lambda value, last: [wo_v.eq(1), wo.data.eq(value), wo.last.eq(last)]
        header = lambda hdr: [*load(hdr, nflits == 0), written.eq(written + 1),
                              remaining.eq(cmd.length), k.eq(0)]
        flit = lambda value: [*load(value, remaining <= fb), remaining.eq(remaining - fb),
                              k.eq(k + 1)]
        last = remaining <= fb
        next_packet = [pkt.eq(pkt + 1), dest.eq(dest + cmd.length), own.eq(own + cmd.length)]

        def states():
            with m.State("HEAD"):
                m.d.comb += active.eq(1)
                with m.If(pkt == cmd.count):
                    m.next = "FENCE"
                with m.Elif(wo_can):
                    m.d.sync += header(remote)
                    with m.If(nflits != 0):
                        m.next = "BODY"
                    with m.Elif(cmd.local):
                        m.next = "LHEAD"
                    with m.Else():
                        m.d.sync += next_packet
            with m.State("BODY"):
                m.d.comb += [active.eq(1), result.ready.eq(wo_can)]
                with m.If(wo_can & result.valid):
                    m.d.comb += bw.en.eq(1)
                    m.d.sync += flit(data_)
                    with m.If(last & cmd.local):
                        m.next = "LHEAD"
                    with m.Elif(last):
                        m.d.sync += next_packet
                        m.next = "HEAD"
            with m.State("LHEAD"):
                m.d.comb += active.eq(1)
                with m.If(wo_can):
                    m.d.sync += header(local)
                    with m.If(nflits != 0):
                        m.next = "LBODY"
                    with m.Else():
                        m.d.sync += next_packet
                        m.next = "HEAD"
            with m.State("LBODY"):
                m.d.comb += active.eq(1)
                with m.If(wo_can):
                    m.d.sync += flit(br.data)
                    with m.If(last):
                        m.d.sync += next_packet
                        m.next = "HEAD"
        return states, wo_can
