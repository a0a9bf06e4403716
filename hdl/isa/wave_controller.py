"""WaveController: fetches descriptors, waits for their barrier, runs them, writes completion flags."""

from amaranth.hdl import Module, Signal, Mux, Cat, Const
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from .descriptor import (IsaParams, Op, FlagMode, FlagStatus, descriptor_layout, MAX_PORTS,
                         buffer_alignment)
from .dtype import DType, BLOCK_ELEMENTS
from .read_issuer import message_layout
from .writeback import flag_request_layout


__all__ = ["WaveController", "counters_layout"]


def counters_layout():
    """Performance and error counters of the ISA, readable by the testbench (all 32-bit)."""
    return data.StructLayout({name: 32 for name in (
        "busy_cycles",        # a collective is running (barrier complete to flags done)
        "barrier_cycles",     # a descriptor is waiting for its barrier
        "collectives",        # descriptors completed (good or bad)
        "bad_descriptors",    # descriptors that ended with ERROR before running
        "slots",              # wave-table slots issued
        "waves",              # waves freed by the table manager
        "stall_slot",         # issuer waiting for a free slot (wave regulation)
        "stall_req",          # issuer waiting for request-queue room
        "stall_data",         # feeder waiting for read data
        "stall_tx",           # write-back waiting for send-queue room
        "stall_wresp",        # waiting for write responses before the flags (ACKED mode)
        "unknown_tags",       # read responses dropped: unknown, duplicate or late tag
        "bad_arrivals",       # arrivals at a sync resource that does not exist
        "dup_arrivals",       # a port arrived twice in one generation
        "bad_requests",       # requests to the ISA it does not serve
        "unknown_wresps",     # write responses dropped: unknown, duplicate or late tag
        "timeouts",           # collectives ended by the response watchdog
    )})


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
    3. run it: start the read issuer and wait until the write-back has sent every slot (and, in
       ``ACKED`` flag mode, until every write is acknowledged);
    4. write the completion flag ``{generation, status}`` to every participant; in ``ORDERED`` mode
       the flag follows the data at once, and is rewritten with ``ERROR`` if a write then fails;
    5. wait until every write is acknowledged, and go on to the next descriptor.

    Watchdog (``params.timeout`` cycles; 0 disables it): in steps 3-5, ``progress`` (a read or
    write response accepted, pulsed by the wave table and the write-back), a slot reduced
    (``slot_done``) or a flag taken restarts it. When it expires the collective is **aborted**:
    ``flush`` is held while the read issuer stops, the write-back completes the packet it has
    started (no packet is truncated) and frees its write tags, and the wave table disarms every
    slot; with the output at a packet boundary, ``flush`` is held one more cycle, in which the
    table manager frees every slot and the feeder, the job queues and the datapath are emptied.
    The collective then writes ``TIMEOUT`` flags and waits for their acknowledgements as in step
    5; if the watchdog expires again there, the descriptor ends without more flags. Responses of
    the aborted collective that arrive later no longer match any tag and are dropped (their tags
    carry issue numbers, see :class:`WaveTable` and :class:`WriteBack`).

    A bad descriptor still waits for its barrier when its sync resource and participant set allow
    one (so its arrivals are consumed and the next generation starts clean), then ends with
    ``ERROR`` in every flag; with no usable barrier it writes ``ERROR`` flags to the existing ports
    of its set at once, once per program load (later passes skip it). Either way the ISA goes on
    to the next descriptor.
    """

    def __init__(self, params):
        if not isinstance(params, IsaParams):
            raise TypeError(f"params must be an IsaParams, not {params!r}")
        self._params = params
        f = params.fabric
        super().__init__({
            # instruction buffer
            "length":       In(range(params.descriptors + 1)),
            "restart":      In(1),
            "loading":      In(1),
            "read_addr":    Out(range(params.descriptors)),
            "desc":         In(descriptor_layout()),
            "load_enable":  Out(1),
            "turn":         In(1),
            "advance":      Out(1),
            # barrier manager
            "query_sync":   Out(8),
            "query_mask":   Out(f.ports),
            "complete":     In(1),
            "consume":      Out(1),
            "generation":   In(16),
            # datapath control
            "start":        Out(1),
            "msg":          Out(message_layout(params)),
            "slot_done":    In(1),         # the write-back finished a slot
            "wb_busy":      In(1),
            "outstanding":  In(1),
            "flag":         Out(stream.Signature(flag_request_layout(params))),
            "clear_error":  Out(1),
            "progress":     In(1),         # a read or write response was accepted
            "issuer_busy":  In(1),
            "flush":        Out(1),        # abort: empty the datapath blocks
            "read_error":   In(1),
            "write_error":  In(1),
            "dp_status":    In(2),
            "running":      Out(1),
            "busy_cycles":     Out(32),
            "barrier_cycles":  Out(32),
            "collectives":     Out(32),
            "bad_descriptors": Out(32),
            "stall_wresp":     Out(32),
            "timeouts":        Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        fb = f.flit_bytes

        pc = Signal(range(p.descriptors))
        d = Signal(descriptor_layout())
        mask = Signal(f.ports)        # participants that exist
        bad = Signal()
        barrier_ok = Signal()
        status = Signal(8)
        generation = Signal(16)
        slots_left = Signal(27)
        flagged_error = Signal()
        failed_once = Signal(p.descriptors)   # descriptors with no possible barrier, failed since restart
        next_pc = Mux(pc + 1 >= self.length, 0, pc + 1)
        timed_out = Signal()          # the watchdog has aborted this descriptor
        timed_out_again = Signal()    # ... and has just expired a second time

        # Watchdog: cycles without progress in a watched state.
        watch = Signal()
        # A flag taken restarts the count too, but is left out of `fire`: the flag's valid
        # depends on `fire` (a state the watchdog leaves sends nothing), so it cannot be an input.
        moved = self.progress | self.slot_done
        fire = Signal() if p.timeout else Const(0)
        if p.timeout:
            quiet = Signal(range(p.timeout))
            with m.If(~watch | moved | (self.flag.valid & self.flag.ready)):
                m.d.sync += quiet.eq(0)
            with m.Elif(quiet != p.timeout - 1):
                m.d.sync += quiet.eq(quiet + 1)
            m.d.comb += fire.eq(watch & ~moved & (quiet == p.timeout - 1))

        def complete():
            # The next descriptor of this resource's group gets the turn.
            m.d.comb += self.advance.eq(self.turn)
            m.d.sync += [self.collectives.eq(self.collectives + 1), pc.eq(next_pc)]
            m.next = "FETCH"

        def watched(body):
            """A state the watchdog guards: ``body`` runs unless the watchdog fires this cycle."""
            m.d.comb += watch.eq(1)
            with m.If(fire):
                m.d.sync += [timed_out.eq(1), timed_out_again.eq(timed_out),
                             status.eq(status | FlagStatus.TIMEOUT.value)]
                with m.If(~timed_out):
                    m.d.sync += self.timeouts.eq(self.timeouts + 1)
                m.next = "ABORT"
            with m.Else():
                body()

        m.d.comb += [self.read_addr.eq(pc), self.query_sync.eq(d.sync), self.query_mask.eq(mask)]

        # Descriptor checks (twin of descriptor.check_descriptor).
        desc = self.desc
        d_mask = desc.participants[:f.ports]
        op_ok = (desc.op == Op.ALLREDUCE) | (desc.op == Op.BARRIER)
        parts_ok = (d_mask != 0) & ((desc.participants >> f.ports) == 0 if f.ports < MAX_PORTS else 1)
        sync_ok = desc.sync < p.sync_resources
        data_align, scale_align = buffer_alignment(f)
        aligned = lambda a, align: a[:(align - 1).bit_length()] == 0
        int8 = desc.dtype == DType.INT8
        data_ok = ((desc.dtype.as_value() != 3) & (desc.elements != 0) & (desc.elements <= p.max_elements)
                   & (~int8 | (desc.elements[:6] == 0))
                   & aligned(desc.src_addr, data_align) & aligned(desc.dst_addr, data_align)
                   & (~int8 | (aligned(desc.src_scale_addr, scale_align)
                               & aligned(desc.dst_scale_addr, scale_align))))
        desc_ok = (op_ok & parts_ok & sync_ok & (desc.flag_addr[:2] == 0)
                   & ((desc.op != Op.ALLREDUCE) | data_ok))

        # The message the datapath blocks see; held for the whole collective.
        msg = self.msg
        m.d.comb += [
            msg.dtype.eq(d.dtype), msg.mask.eq(mask),
            msg.bytes.eq(Mux(d.dtype == DType.INT8, d.elements, d.elements * 2)),
            msg.src_addr.eq(d.src_addr), msg.src_scale_addr.eq(d.src_scale_addr),
            msg.dst_addr.eq(d.dst_addr), msg.dst_scale_addr.eq(d.dst_scale_addr),
        ]
        full_status = Signal(8)
        # Flag status bits (FlagStatus): the datapath's OVERFLOW and INVALID, and ERROR for any
        # AXI error on a read or a write.
        m.d.comb += full_status.eq(status | Cat(self.dp_status, self.read_error | self.write_error))

        def send_flags(word_status):
            m.d.comb += [
                self.flag.valid.eq(1),
                self.flag.payload.eq(0),  # the reserved bits too: no bit is left undriven
                self.flag.payload.mask.eq(mask), self.flag.payload.addr.eq(d.flag_addr),
                self.flag.payload.word.generation.eq(generation),
                self.flag.payload.word.status.eq(word_status),
            ]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.load_enable.eq(1)
                with m.If(self.restart):
                    m.d.sync += [pc.eq(0), failed_once.eq(0)]
                    m.next = "FETCH"
            # A program load ends with `restart`, which can come while the controller is looking
            # for a ready descriptor (FETCH, DECODE) as well as in WAIT: it restarts from slot 0.
            with m.State("FETCH"):
                with m.If(self.restart):
                    m.d.sync += [pc.eq(0), failed_once.eq(0)]
                with m.Else():
                    m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += [
                    d.eq(desc), mask.eq(d_mask), bad.eq(~desc_ok),
                    barrier_ok.eq(sync_ok & (d_mask != 0)), status.eq(0), timed_out.eq(0),
                ]
                with m.If(self.restart):
                    m.d.sync += [pc.eq(0), failed_once.eq(0)]
                    m.next = "FETCH"
                with m.Else():
                    m.next = "WAIT"
            with m.State("WAIT"):
                m.d.comb += self.load_enable.eq(1)
                with m.If(self.restart):
                    m.d.sync += [pc.eq(0), failed_once.eq(0)]
                    m.next = "FETCH"
                with m.Elif(self.loading):
                    pass    # a program is being loaded: start nothing until it is complete
                with m.Elif(~barrier_ok):
                    with m.If(failed_once.bit_select(pc, 1)):
                        # Failed once since the program was loaded: skip it (passing its
                        # resource's turn on, if it holds it) rather than flood ERROR flags.
                        m.d.comb += self.advance.eq(self.turn)
                        m.d.sync += pc.eq(next_pc)
                        m.next = "FETCH"
                    with m.Else():
                        # No barrier is possible: fail at once.
                        m.d.sync += [generation.eq(0), status.eq(FlagStatus.ERROR.value),
                                     self.bad_descriptors.eq(self.bad_descriptors + 1),
                                     failed_once.eq(failed_once | (Const(1, p.descriptors) << pc))]
                        m.next = "FLAGS"
                with m.Elif(~self.turn):
                    # Not its resource's turn: an earlier descriptor of the same group comes first.
                    m.d.sync += pc.eq(next_pc)
                    m.next = "FETCH"
                with m.Elif(self.complete):
                    m.d.comb += [self.consume.eq(1), self.clear_error.eq(1)]
                    m.d.sync += [generation.eq(self.generation + 1), flagged_error.eq(0),
                                 slots_left.eq((msg.bytes + f.max_payload - 1) // f.max_payload)]
                    with m.If(bad):
                        m.d.sync += [status.eq(FlagStatus.ERROR.value),
                                     self.bad_descriptors.eq(self.bad_descriptors + 1)]
                        m.next = "FLAGS"
                    with m.Elif(d.op == Op.BARRIER):
                        m.next = "FLAGS"
                    with m.Else():
                        m.d.comb += self.start.eq(1)
                        m.next = "RUN"
                with m.Elif(self.length > 1):
                    # Its group has not all arrived: look at the next descriptor, so a group that
                    # is late never holds up another group's collective (isolation).
                    m.d.sync += [self.barrier_cycles.eq(self.barrier_cycles + 1), pc.eq(next_pc)]
                    m.next = "FETCH"
                with m.Else():
                    m.d.sync += self.barrier_cycles.eq(self.barrier_cycles + 1)
            with m.State("RUN"):
                m.d.comb += self.running.eq(1)

                def run():
                    with m.If(self.slot_done):
                        m.d.sync += slots_left.eq(slots_left - 1)
                        with m.If(slots_left == 1):
                            m.next = "ACKS"
                watched(run)
            with m.State("ACKS"):
                m.d.comb += self.running.eq(1)

                def acks():
                    with m.If(d.flag_mode == FlagMode.ORDERED):
                        m.next = "FLAGS"
                    with m.Elif(~self.outstanding & ~self.wb_busy):
                        m.next = "FLAGS"
                    with m.Else():
                        m.d.sync += self.stall_wresp.eq(self.stall_wresp + 1)
                watched(acks)
            with m.State("FLAGS"):
                m.d.comb += self.running.eq(1)

                def flags():
                    send_flags(full_status)
                    with m.If(self.flag.ready):
                        m.d.sync += flagged_error.eq(full_status[2])
                        m.next = "FINISH"
                watched(flags)
            with m.State("FINISH"):
                m.d.comb += self.running.eq(1)

                def finish():
                    with m.If(~self.outstanding & ~self.wb_busy):
                        with m.If(full_status[2] & ~flagged_error):
                            # ORDERED mode: a write failed after the flag went out; say so.
                            m.next = "FLAGS"
                        with m.Else():
                            complete()
                watched(finish)
            with m.State("ABORT"):
                # Stop issuing, let the write-back finish its packet; nothing is truncated.
                m.d.comb += [self.running.eq(1), self.flush.eq(1)]
                with m.If(~self.wb_busy & ~self.issuer_busy):
                    m.next = "ABORT_END"
            with m.State("ABORT_END"):
                # One more flush cycle with every producer quiet: the job queues, the feeder, the
                # datapath and the table manager come out of it empty.
                m.d.comb += [self.running.eq(1), self.flush.eq(1)]
                with m.If(timed_out_again):
                    complete()         # the TIMEOUT flags themselves went unanswered: give up
                with m.Else():
                    m.next = "FLAGS"

        with m.If(self.running):
            m.d.sync += self.busy_cycles.eq(self.busy_cycles + 1)
        return m
