"""WaveController: fetches descriptors, waits for their barrier, runs them, writes completion
flags."""

from types import SimpleNamespace

from amaranth.hdl import Module, Signal, Mux, Cat, Const, Array
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..params import check_type, check_int
from .descriptor import (IsaParams, Op, FlagMode, FlagStatus, PushMode, descriptor_layout,
                         MAX_PORTS, IMPLEMENTED_OPS, SHARDED_OPS, ROOTED_OPS, IN_PLACE_OPS,
                         PUSH_OPS, buffer_alignment)
from .plan import OpPlan, op_plan
from .dtype import DType, BLOCK_ELEMENTS
from .interfaces import (counters_layout, block_counters_layout, flag_request_layout,
                         ProgramPort, BarrierQuery, RunControl, IssueControl, ReadStatus,
                         WriteStatus, PushControl)


__all__ = ["WaveController", "DescriptorCheck", "Watchdog", "counters_layout"]

#: Bit of FlagStatus.ERROR in a flag's status byte.
_ERROR_BIT = exact_log2(FlagStatus.ERROR.value)


class DescriptorCheck(wiring.Component):
    """The hardware twin of :func:`~.descriptor.check_descriptor` (combinational).

    Members
    -------
    desc : In(descriptor_layout)
    ok : Out(1)
        The descriptor is good: it runs (``check_descriptor`` returns no reason).
    barrier_ok : Out(1)
        Its sync resource exists and its participant set is not empty, so it can wait for a
        barrier (a bad descriptor that can still waits, so its arrivals are consumed).
    mask : Out(ports)
        Its participants that exist (``participants`` cut to the switch's ports).
    root : Out(ports)
        The port of rank ``root`` (one-hot; 0 when ``root`` names no participant).
    in_place : Out(1)
        ``src_addr == dst_addr``: the result over the input (:func:`~.plan.op_plan`).
    push : Out(1)
        It runs in push mode (:func:`~.descriptor.push_mode`: PUSH, or AUTO under the threshold,
        where the op, the resource's space and the size allow; a PUSH that cannot push is bad and
        has no usable barrier: its participants' pushes have nowhere to go).
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        super().__init__({
            "desc":       In(descriptor_layout()),
            "ok":         Out(1),
            "barrier_ok": Out(1),
            "mask":       Out(params.fabric.ports),
            "root":       Out(params.fabric.ports),
            "in_place":   Out(1),
            **({"push": Out(1)} if params.push_slots else {}),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        desc = self.desc
        d_mask = desc.participants[:f.ports]
        is_op = lambda ops: Cat(desc.op == op for op in ops).any()
        op_ok = is_op(IMPLEMENTED_OPS)
        parts_ok = (d_mask != 0) & ((desc.participants >> f.ports) == 0
                                    if f.ports < MAX_PORTS else 1)
        sync_ok = desc.sync < p.sync_resources
        # The root rank's port: the participant with `root` participants below it.
        ranks_below = [sum(d_mask[:i]) if i else 0 for i in range(f.ports)]
        m.d.comb += [self.root.eq(Cat(d_mask[i] & (ranks_below[i] == desc.root)
                                      for i in range(f.ports))),
                     self.in_place.eq(desc.src_addr == desc.dst_addr)]
        root_ok = ~is_op(ROOTED_OPS) | (self.root != 0)
        mode_ok, bad_push = self._push(m, is_op)
        m.d.comb += [
            self.ok.eq(op_ok & parts_ok & sync_ok & root_ok & aligned(desc.flag_addr, 4)
                       & ((desc.op == Op.BARRIER) | self._data_ok(is_op)) & mode_ok & ~bad_push),
            self.barrier_ok.eq(sync_ok & (d_mask != 0) & ~bad_push),
            self.mask.eq(d_mask),
        ]
        return m

    def _push(self, m, is_op):
        """Drive ``push``; return (the mode is valid, it is a PUSH that cannot push): the
        hardware twin of ``_push_reasons`` and :func:`~.descriptor.push_mode`."""
        p = self._params
        desc = self.desc
        mode_ok = desc.mode.as_value() != 3   # (3 is no PushMode)
        if not p.push_resources:
            return mode_ok, desc.mode == PushMode.PUSH
        nbytes = Mux(desc.dtype == DType.INT8, desc.elements, desc.elements * 2)
        # Each participant pushes C bytes, or N x C for a ReduceScatter: N x C <= limit exactly
        # when C <= limit // N, a table of N constants instead of a multiplier.
        parts = Signal(range(MAX_PORTS + 1))
        m.d.comb += parts.eq(Mux(desc.op == Op.REDUCE_SCATTER, sum(self.mask), 1))

        def fits(limit):
            return nbytes <= Array(limit // max(k, 1) for k in range(MAX_PORTS + 1))[parts]
        can = is_op(PUSH_OPS) & (desc.sync < p.push_resources) & fits(p.push_capacity)
        m.d.comb += self.push.eq(can & ((desc.mode == PushMode.PUSH)
                                        | ((desc.mode == PushMode.AUTO)
                                           & fits(p.auto_threshold))))
        return mode_ok, (desc.mode == PushMode.PUSH) & ~can

    def _data_ok(self, is_op):
        """The checks of a data-moving descriptor (``_data_reasons`` of ``check_descriptor``)."""
        p = self._params
        f = p.fabric
        desc = self.desc
        data_align, scale_align = buffer_alignment(f)
        int8 = desc.dtype == DType.INT8
        dtype_ok = Cat(desc.dtype == t for t in DType).any()
        nbytes = Mux(int8, desc.elements, desc.elements * 2)
        shard_ok = ~is_op(SHARDED_OPS) | (nbytes[:exact_log2(f.flit_bytes)] == 0)
        in_place_ok = (~int8 | ~is_op(IN_PLACE_OPS)
                       | (self.in_place == (desc.src_scale_addr == desc.dst_scale_addr)))
        return (dtype_ok & (desc.elements != 0) & (desc.elements <= p.max_elements)
                & (~int8 | (desc.elements[:exact_log2(BLOCK_ELEMENTS)] == 0)) & shard_ok
                & in_place_ok
                & aligned(desc.src_addr, data_align) & aligned(desc.dst_addr, data_align)
                & (~int8 | (aligned(desc.src_scale_addr, scale_align)
                            & aligned(desc.dst_scale_addr, scale_align))))


def aligned(addr, align):
    """``addr`` is a multiple of ``align`` (a power of two)."""
    return addr[:(align - 1).bit_length()] == 0


class Watchdog(wiring.Component):
    """The response watchdog: ``fire`` when ``watch`` has been high for ``timeout`` cycles in a
    row without ``moved`` or ``taken``.

    ``moved`` (something made progress this cycle) also holds ``fire`` low in the same cycle;
    ``taken`` (a flag was taken) only restarts the count: the flag's ``valid`` depends on ``fire``
    (a state the watchdog leaves sends nothing), so ``taken`` cannot feed ``fire`` back. With
    ``timeout = 0`` ``fire`` is always low.

    Members
    -------
    watch : In(1)
        The controller is in a watched state.
    moved : In(1)
    taken : In(1)
    fire : Out(1)
    """

    def __init__(self, timeout):
        self._timeout = check_int("timeout", timeout, 0)
        super().__init__({"watch": In(1), "moved": In(1), "taken": In(1), "fire": Out(1)})

    def elaborate(self, platform):
        m = Module()
        t = self._timeout
        if t:
            quiet = Signal(range(t))
            with m.If(~self.watch | self.moved | self.taken):
                m.d.sync += quiet.eq(0)
            with m.Elif(quiet != t - 1):
                m.d.sync += quiet.eq(quiet + 1)
            m.d.comb += self.fire.eq(self.watch & ~self.moved & (quiet == t - 1))
        return m


class WaveController(wiring.Component):
    """The ISA's sequencer (paper Fig. 4, steps 1-2 and 8-9).

    It loops over the loaded program: the same descriptors run again at the next barrier
    generation without reloading (graph replay). The descriptors of one sync resource run in
    program order; descriptors of different resources (different groups) run in whichever order
    their barriers complete: while a descriptor's barrier is incomplete the controller moves on
    to the next descriptor whose resource's turn it is (round robin over the program), so one
    group that has not arrived never holds up another. With a one-descriptor program it simply
    waits. For each descriptor:

    1. fetch it from the instruction buffer and check it (:func:`check_descriptor` is the software
       twin of the checks);
    2. wait until every participant has arrived at its sync resource, then consume the arrivals;
    3. run it: set ``run.msg`` from the descriptor (its buffers, its per-rank byte count and its
       plan: the flags of :func:`~.plan.op_plan` for its op, in place when ``src_addr ==
       dst_addr``, and its root's port), start the read issuer and wait until the write-back has
       sent the message's last slot (``writes.msg_done``; and, in ``ACKED`` flag mode, until
       every write is acknowledged);
    4. write the completion flag ``{generation, status}`` to every participant; in ``ORDERED`` mode
       the flag follows the data at once, and is rewritten with ``ERROR`` if a write then fails;
    5. wait until every write is acknowledged, and go on to the next descriptor.

    Watchdog (:class:`Watchdog`, ``params.timeout`` cycles; 0 disables it): in steps 3-5,
    ``reads.progress`` or ``writes.progress`` (a read or write response accepted), a slot reduced
    (``writes.slot_done``) or a flag taken restarts it. When it expires the collective is
    **aborted**: ``run.flush`` is held while the read issuer stops, the write-back completes the
    packet it has started (no packet is truncated) and frees its write tags, and the wave table
    disarms every slot; with the output at a packet boundary, ``flush`` is held one more cycle, in
    which the table manager frees every slot and the feeder, the job queues and the datapath are
    emptied. The collective then writes ``TIMEOUT`` flags and waits for their acknowledgements as in
    step 5; if the watchdog expires again there, the descriptor ends without more flags. Responses
    of the aborted collective that arrive later no longer match any tag and are dropped (their tags
    carry issue numbers, see :class:`WaveTable` and :class:`WriteBack`).

    A bad descriptor still waits for its barrier when its sync resource and participant set allow
    one (so its arrivals are consumed and the next generation starts clean), then ends with
    ``ERROR`` in every flag; with no usable barrier it writes ``ERROR`` flags to the existing ports
    of its set at once, once per program load (later passes skip it). Either way the ISA goes on
    to the next descriptor.

    Members
    -------
    program : Out(ProgramPort)
        To the instruction buffer.
    barrier : Out(BarrierQuery)
        To the barrier manager.
    run : Out(RunControl)
        To every data block: the running collective (``msg``), ``flush`` and ``clear_error``.
    issue : Out(IssueControl)
        To the read issuer.
    reads : In(ReadStatus)
        From the wave table.
    writes : In(WriteStatus)
        From the write-back.
    flag : Out(stream.Signature(flag_request_layout))
        The completion flags, to the write-back.
    push : Out(PushControl)
        To the wave table, in push mode only (``push_resources > 0``): a push descriptor starts
        when its inputs have begun to arrive (``push.ready``) instead of at its barrier (its
        generation still advances), reports ``push.error`` in its flags, and hands its space back
        (``push.rearm``) when its first flag is taken (every input has been read by then).
    counters : Out(busy_cycles, barrier_cycles, collectives, bad_descriptors, stall_wresp, timeouts)
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        super().__init__({
            "program":  Out(ProgramPort(params)),
            "barrier":  Out(BarrierQuery(params)),
            "run":      Out(RunControl(params)),
            "issue":    Out(IssueControl()),
            "reads":    In(ReadStatus()),
            "writes":   In(WriteStatus()),
            "flag":     Out(stream.Signature(flag_request_layout(params))),
            **({"push": Out(PushControl(params))} if params.push_slots else {}),
            "counters": Out(block_counters_layout(
                "busy_cycles", "barrier_cycles", "collectives", "bad_descriptors", "stall_wresp",
                "timeouts")),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        prog, c = self.program, self.counters

        # The controller's registers and the signals its states share (see the state helpers).
        r = SimpleNamespace(
            pc=Signal(range(p.descriptors)),
            d=Signal(descriptor_layout()),
            mask=Signal(f.ports),            # participants that exist
            bad=Signal(),
            barrier_ok=Signal(),
            status=Signal.like(self.flag.payload.word.status),
            generation=Signal.like(self.barrier.generation),
            root=Signal(f.ports),            # the root's port (one-hot)
            in_place=Signal(),
            flagged_error=Signal(),
            # Descriptors with no possible barrier, failed since restart.
            failed_once=Signal(p.descriptors),
            timed_out=Signal(),              # the watchdog has aborted this descriptor
            timed_out_again=Signal(),        # ... and has just expired a second time
            running=Signal(),
            full_status=Signal.like(self.flag.payload.word.status),
            push=Signal(),                   # the descriptor runs in push mode
            rearmed=Signal(),                # ... and has handed its push space back
        )
        r.next_pc = Mux(r.pc + 1 >= prog.length, 0, r.pc + 1)

        m.submodules.check = check = DescriptorCheck(p)
        m.submodules.watchdog = watchdog = Watchdog(p.timeout)
        r.watchdog = watchdog
        m.d.comb += [
            check.desc.eq(prog.desc),
            watchdog.moved.eq(self.reads.progress | self.writes.progress | self.writes.slot_done),
            watchdog.taken.eq(self.flag.valid & self.flag.ready),
        ]
        r.check = check

        m.d.comb += [prog.read_addr.eq(r.pc), self.barrier.sync.eq(r.d.sync),
                     self.barrier.mask.eq(r.mask)]

        # The message the datapath blocks see; held for the whole collective.
        msg = self.run.msg
        d = r.d
        m.d.comb += [
            msg.dtype.eq(d.dtype), msg.mask.eq(r.mask), msg.root.eq(r.root),
            msg.bytes.eq(Mux(d.dtype == DType.INT8, d.elements, d.elements * 2)),
            msg.src_addr.eq(d.src_addr), msg.src_scale_addr.eq(d.src_scale_addr),
            msg.dst_addr.eq(d.dst_addr), msg.dst_scale_addr.eq(d.dst_scale_addr),
        ]
        pushed = r.push if p.push_slots else Const(0, 1)
        self._plan(m, msg, d, r.in_place, pushed)
        if p.gather_pairs:
            self._pair(m, msg, d, r, pushed)
        # Flag status bits (FlagStatus): the datapath's OVERFLOW and INVALID (the same bits as
        # DatapathStatus), and ERROR for any AXI error on a read or a write.
        push_error = 0
        if p.push_slots:
            # A Broadcast's root alone pushes; every other op's participants all do.
            m.d.comb += [self.push.sync.eq(d.sync),
                         self.push.mask.eq(Mux(d.op == Op.BROADCAST, r.root, r.mask)),
                         msg.push.eq(r.push),
                         msg.push_slot.eq(p.slots + d.sync * p.push_slots_per_resource)]
            push_error = r.push & self.push.error
        m.d.comb += r.full_status.eq(r.status | Cat(self.writes.status,
                                                    self.reads.error | self.writes.error
                                                    | push_error))

        with m.FSM():
            self._fetch_states(m, r)
            with m.State("WAIT"):
                self._wait_state(m, r)
            self._run_states(m, r)

        with m.If(r.running):
            m.d.sync += c.busy_cycles.eq(c.busy_cycles + 1)
        return m

    @staticmethod
    def _plan(m, msg, d, in_place, pushed):
        """The running collective's plan flags (:func:`~.plan.op_plan`) for ``d``'s op, in place
        or not, pushed or not."""
        with m.Switch(d.op):
            for op in IMPLEMENTED_OPS:
                if op == Op.BARRIER:
                    continue
                with m.Case(op):
                    for name in OpPlan._fields:
                        def flag(ip, pu):
                            return int(getattr(op_plan(op, ip, pu), name))
                        by_place = [Mux(in_place, flag(True, pu), flag(False, pu))
                                    if flag(True, pu) != flag(False, pu) else flag(False, pu)
                                    for pu in (False, True)]
                        value = (Mux(pushed, by_place[1], by_place[0])
                                 if flag(True, True) != flag(True, False)
                                 or flag(False, True) != flag(False, False) else by_place[0])
                        m.d.comb += msg[name].eq(value)

    def _pair(self, m, msg, d, r, pushed):
        """``msg.pair`` (``gather_pairs``): the collective runs in pairs of ranks, the twin of
        :func:`~.plan.paired`."""
        lg = exact_log2(self._params.fabric.max_payload)
        m.d.comb += msg.pair.eq((d.op == Op.ALLGATHER) & r.in_place & ~pushed
                                & (d.dtype != DType.INT8) & ((r.mask & (r.mask - 1)) != 0)
                                & (msg.bytes[:lg] == 0))

    def _restart(self, m, r):
        """A program has been loaded: start again from descriptor 0."""
        m.d.sync += [r.pc.eq(0), r.failed_once.eq(0)]

    def _complete(self, m, r):
        """The descriptor is done: the next descriptor of its resource's group gets the turn."""
        c = self.counters
        m.d.comb += self.program.advance.eq(self.program.turn)
        m.d.sync += [c.collectives.eq(c.collectives + 1), r.pc.eq(r.next_pc)]
        m.next = "FETCH"

    def _rearm(self, m, r):
        """A push descriptor hands its space back, once: its inputs have all been read (or it
        is given up), and its participants may push the next generation once they see a flag.
        Its error is kept for the flags written again (ORDERED mode)."""
        if self._params.push_slots:
            with m.If(r.push & ~r.rearmed):
                m.d.comb += self.push.rearm.eq(1)
                m.d.sync += [r.rearmed.eq(1), r.status.eq(r.full_status)]

    def _watched(self, m, r, body):
        """A state the watchdog guards: ``body()`` runs unless the watchdog fires this cycle."""
        c = self.counters
        m.d.comb += r.watchdog.watch.eq(1)
        with m.If(r.watchdog.fire):
            m.d.sync += [r.timed_out.eq(1), r.timed_out_again.eq(r.timed_out),
                         r.status.eq(r.status | FlagStatus.TIMEOUT.value)]
            with m.If(~r.timed_out):
                m.d.sync += c.timeouts.eq(c.timeouts + 1)
            m.next = "ABORT"
        with m.Else():
            body()

    def _fetch_states(self, m, r):
        """IDLE (no program yet), FETCH and DECODE (read the descriptor at ``pc``, check it)."""
        prog = self.program
        with m.State("IDLE"):
            m.d.comb += prog.load_enable.eq(1)
            with m.If(prog.restart):
                self._restart(m, r)
                m.next = "FETCH"
        # A program load ends with `restart`, which can come while the controller is looking
        # for a ready descriptor (FETCH, DECODE) as well as in WAIT: it restarts from slot 0.
        with m.State("FETCH"):
            with m.If(prog.restart):
                self._restart(m, r)
            with m.Else():
                m.next = "DECODE"
        with m.State("DECODE"):
            m.d.sync += [
                r.d.eq(prog.desc), r.mask.eq(r.check.mask), r.root.eq(r.check.root),
                r.in_place.eq(r.check.in_place),
                r.bad.eq(~r.check.ok),
                r.barrier_ok.eq(r.check.barrier_ok), r.status.eq(0), r.timed_out.eq(0),
            ]
            if self._params.push_slots:
                # Only a good descriptor runs pushed: a bad one's participants arrive (push_mode()
                # says PULL), so its space is never handed back under pushes still arriving.
                m.d.sync += [r.push.eq(r.check.push & r.check.ok), r.rearmed.eq(0)]
            with m.If(prog.restart):
                self._restart(m, r)
                m.next = "FETCH"
            with m.Else():
                m.next = "WAIT"

    def _wait_state(self, m, r):
        """WAIT: hold the descriptor until its barrier is complete and it is its group's turn,
        or pass it by (another group's descriptor may be ready), or fail it at once."""
        p = self._params
        prog, q, c = self.program, self.barrier, self.counters
        m.d.comb += prog.load_enable.eq(1)
        with m.If(prog.restart):
            self._restart(m, r)
            m.next = "FETCH"
        with m.Elif(prog.loading):
            pass    # a program is being loaded: start nothing until it is complete
        with m.Elif(~r.barrier_ok):
            with m.If(r.failed_once.bit_select(r.pc, 1)):
                # Failed once since the program was loaded: skip it (passing its
                # resource's turn on, if it holds it) rather than flood ERROR flags.
                m.d.comb += prog.advance.eq(prog.turn)
                m.d.sync += r.pc.eq(r.next_pc)
                m.next = "FETCH"
            with m.Else():
                # No barrier is possible: fail at once.
                m.d.sync += [r.generation.eq(0), r.status.eq(FlagStatus.ERROR.value),
                             c.bad_descriptors.eq(c.bad_descriptors + 1),
                             r.failed_once.eq(r.failed_once | (Const(1, p.descriptors) << r.pc))]
                m.next = "FLAGS"
        with m.Elif(~prog.turn):
            # Not its resource's turn: an earlier descriptor of the same group comes first.
            m.d.sync += r.pc.eq(r.next_pc)
            m.next = "FETCH"
        with m.Elif(Mux(r.push, self.push.ready, q.complete) if p.push_slots else q.complete):
            # (A push descriptor's inputs are its arrivals: consuming advances the generation.)
            m.d.comb += [q.consume.eq(1), self.run.clear_error.eq(1)]
            m.d.sync += [r.generation.eq(q.generation + 1), r.flagged_error.eq(0)]
            with m.If(r.bad):
                m.d.sync += [r.status.eq(FlagStatus.ERROR.value),
                             c.bad_descriptors.eq(c.bad_descriptors + 1)]
                m.next = "FLAGS"
            with m.Elif(r.d.op == Op.BARRIER):
                m.next = "FLAGS"
            with m.Else():
                m.d.comb += self.issue.start.eq(1)
                m.next = "RUN"
        with m.Elif(prog.length > 1):
            # Its group has not all arrived: look at the next descriptor, so a group that
            # is late never holds up another group's collective (isolation).
            m.d.sync += [c.barrier_cycles.eq(c.barrier_cycles + 1), r.pc.eq(r.next_pc)]
            m.next = "FETCH"
        with m.Else():
            m.d.sync += c.barrier_cycles.eq(c.barrier_cycles + 1)

    def _run_states(self, m, r):
        """RUN, ACKS, FLAGS, FINISH (watched) and the abort, ABORT and ABORT_END."""
        c, w, d = self.counters, self.writes, r.d
        writes_done = ~w.outstanding & ~w.busy

        with m.State("RUN"):
            m.d.comb += r.running.eq(1)

            def run():
                with m.If(w.msg_done):
                    m.next = "ACKS"
            self._watched(m, r, run)
        with m.State("ACKS"):
            m.d.comb += r.running.eq(1)

            def acks():
                with m.If(d.flag_mode == FlagMode.ORDERED):
                    m.next = "FLAGS"
                with m.Elif(writes_done):
                    m.next = "FLAGS"
                with m.Else():
                    m.d.sync += c.stall_wresp.eq(c.stall_wresp + 1)
            self._watched(m, r, acks)
        with m.State("FLAGS"):
            m.d.comb += r.running.eq(1)

            def flags():
                flag = self.flag
                m.d.comb += [
                    flag.valid.eq(1),
                    flag.payload.eq(0),  # the reserved bits too: no bit is left undriven
                    flag.payload.mask.eq(r.mask), flag.payload.addr.eq(d.flag_addr),
                    flag.payload.word.generation.eq(r.generation),
                    flag.payload.word.status.eq(r.full_status),
                ]
                with m.If(flag.ready):
                    m.d.sync += r.flagged_error.eq(r.full_status[_ERROR_BIT])
                    self._rearm(m, r)
                    m.next = "FINISH"
            self._watched(m, r, flags)
        with m.State("FINISH"):
            m.d.comb += r.running.eq(1)

            def finish():
                with m.If(writes_done):
                    with m.If(r.full_status[_ERROR_BIT] & ~r.flagged_error):
                        # ORDERED mode: a write failed after the flag went out; say so.
                        m.next = "FLAGS"
                    with m.Else():
                        self._complete(m, r)
            self._watched(m, r, finish)
        with m.State("ABORT"):
            # Stop issuing, let the write-back finish its packet; nothing is truncated.
            m.d.comb += [r.running.eq(1), self.run.flush.eq(1)]
            with m.If(~w.busy & ~self.issue.busy):
                m.next = "ABORT_END"
        with m.State("ABORT_END"):
            # One more flush cycle with every producer quiet: the job queues, the feeder, the
            # datapath and the table manager come out of it empty.
            m.d.comb += [r.running.eq(1), self.run.flush.eq(1)]
            with m.If(r.timed_out_again):
                self._rearm(m, r)
                self._complete(m, r)    # the TIMEOUT flags themselves went unanswered: give up
            with m.Else():
                m.next = "FLAGS"
