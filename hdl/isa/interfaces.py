"""The ISA's internal interfaces: the signatures that join its blocks, and the layouts they carry.

:class:`~.isa.Isa` joins its blocks only through these, with ``wiring.connect()``, so every wire
between two blocks is checked for width and direction at elaboration. Each signature is written
from the side of the block that *drives* the request (the wave controller, or the feeder towards
the wave table); the other side uses ``In(...)`` of the same signature, i.e. its flipped form::

    wave controller --program-->  instruction buffer      ProgramPort
                    --barrier-->  barrier manager         BarrierQuery
                    --run------>  issuer, feeder, wave    RunControl (one driver, six readers)
                                  table, write-back,
                                  table manager, copy path
                    --issue---->  read issuer             IssueControl
                    <--reads----  wave table              ReadStatus
                    <--writes---  write-back              WriteStatus
                    --flag----->  write-back              stream of flag_request_layout
                    --push----->  wave table              PushControl (push mode only)
    feeder          --rd------->  wave table              WaveTableRead
                    --release-->  table manager           SlotRelease

The data streams run issuer -> feeder -> copy path -> datapath -> copy path -> write-back; the
copy path (:class:`~.copy_path.CopyPath`) steers a copying operation's slots past the datapath.

Counters follow :mod:`scin.hdl.lib.counters`: every block that counts has a ``counters`` member
(:func:`block_counters_layout` of the names it counts, fields of :func:`counters_layout`); the ISA
sums them by name.
"""

from amaranth.hdl import Shape
from amaranth.lib import wiring, data
from amaranth.lib.wiring import In, Out

from ..lib.counters import COUNTER_BITS, counters_layout as named_counters_layout
from ..packet import flag_layout
from .descriptor import descriptor_layout
from .dtype import DType, DatapathStatus
from .plan import OpPlan
from .datapath.common import input_layout, output_layout


__all__ = ["COUNTER_BITS", "GENERATION_BITS", "counters_layout", "block_counters_layout",
           "message_layout", "job_layout", "feed_layout", "result_layout", "arm_layout",
           "flag_request_layout",
           "ProgramPort", "BarrierQuery", "RunControl", "IssueControl", "ReadStatus",
           "WriteStatus", "WaveTableRead", "SlotRelease", "PushControl"]

#: Width of a barrier generation: the ``generation`` field of the completion flag.
GENERATION_BITS = flag_layout()["generation"].width

_COUNTERS = (
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
    "bad_pushes",         # push writes dropped: no reserved space, not expected, misaligned
)


def counters_layout():
    """Performance and error counters of the ISA, readable by the testbench (``COUNTER_BITS``
    each, wrapping). ``docs/ISA.md`` (Counters) documents each one."""
    return named_counters_layout(_COUNTERS)


def block_counters_layout(*names):
    """The ``counters`` member of one block: the named fields of :func:`counters_layout`."""
    return named_counters_layout(names, known=_COUNTERS)


def message_layout(params):
    """What the issuer, feeder and write-back need to know of the running collective: its buffers,
    its per-rank byte count, and its plan (:class:`~.plan.OpPlan`'s flags; ``root`` is the
    selected port of an unphased plan, one-hot)."""
    return data.StructLayout({
        "dtype":      DType,
        "mask":       params.fabric.ports,
        "bytes":      params.byte_bits,     # data bytes per rank (elements * 2, or * 1 for INT8)
        "src_addr":   48, "src_scale_addr": 48,
        "dst_addr":   48, "dst_scale_addr": 48,
        **{name: 1 for name in OpPlan._fields},
        "root":       params.fabric.ports,
        # Push mode only: the inputs are in the push slots, from `push_slot` (the resource's
        # first) on. (Absent without push space: constant fields would be undriven bits.)
        **({"push": 1, "push_slot": params.table_slot_bits} if params.push_slots else {}),
        # gather_pairs only: the collective runs in pairs of ranks (:func:`~.plan.paired`).
        **({"pair": 1} if params.gather_pairs else {}),
    })


def job_layout(params):
    """One slot's worth of a message (a :class:`~.plan.Segment`): its wave-table ``slot``, the
    ports it reads (``rmask``) and writes (``wmask``), its destination offset ``dst_off``, its data
    ``bytes`` and whether it is the message's ``last``; in push mode also the ``flit`` of the slot
    it starts at (a pushed ReduceScatter's shard may start inside a slot; pulled segments always
    start a slot)."""
    ports = params.fabric.ports
    return data.StructLayout({"slot": params.table_slot_bits, "rmask": ports, "wmask": ports,
                              "dst_off": params.offset_bits,
                              "bytes": range(params.fabric.max_payload + 1), "last": 1,
                              **({"flit": range(params.slot_flits)} if params.push_slots else {})})


def feed_layout(params):
    """The feeder's output: one ``flit`` of every participant for the datapath
    (:func:`~.datapath.common.input_layout`), and ``one``, the data and block scale of the job's
    first participant unmasked, which a copying operation (one participant read) writes as it
    is. Selecting one port by its index costs a 4:1 multiplexer per bit, where an OR of the
    masked flits would also keep the masking out of the datapath's first stage."""
    f = params.fabric
    return data.StructLayout({
        "flit": input_layout(f.ports, f.flit_width),
        "one":  data.StructLayout({"data": f.flit_width, "scale": 16}),
        # gather_pairs only: the data of the job's highest read port (a paired phase's rank
        # j + 1, whose flit goes to ranks 0 to j).
        **({"other": f.flit_width} if params.gather_pairs else {}),
    })


def result_layout(params):
    """The write-back's input: the datapath's output (:func:`~.datapath.common.output_layout`)
    and, with ``gather_pairs``, the ``other`` flit of a paired phase (:func:`feed_layout`)."""
    f = params.fabric
    return data.StructLayout({
        **{name: field.shape for name, field in output_layout(f.flit_width)},
        **({"other": f.flit_width} if params.gather_pairs else {}),
    })


def arm_layout(params):
    """Arming a slot: which ports' packets it expects, and the issue number its tags carry."""
    return data.StructLayout({"slot": params.slot_bits, "mask": params.fabric.ports, "scales": 1,
                              "seq": params.read_seq_bits})


def flag_request_layout(params):
    """One completion flag to write: the participants, the flag's address and its word."""
    return data.StructLayout({"mask": params.fabric.ports, "addr": 48, "word": flag_layout()})


class ProgramPort(wiring.Signature):
    """Wave controller -> instruction buffer: reading the program, and each resource's turn.

    Members
    -------
    read_addr : Out(range(descriptors))
        The descriptor to read; ``desc`` shows it one cycle later.
    load_enable : Out(1)
        Loads are accepted (no collective is running).
    advance : Out(1)
        Pass the turn of ``read_addr``'s sync resource to its next descriptor.
    desc : In(descriptor_layout)
    length : In(range(descriptors + 1))
        Program length (0 until a program is loaded).
    restart : In(1)
        Pulse: a program has been loaded; start again from descriptor 0.
    loading : In(1)
        A program load has begun and not ended.
    turn : In(1)
        The descriptor at ``read_addr`` is its sync resource's turn.
    """

    def __init__(self, params):
        super().__init__({
            "read_addr":   Out(range(params.descriptors)),
            "load_enable": Out(1),
            "advance":     Out(1),
            "desc":        In(descriptor_layout()),
            "length":      In(range(params.descriptors + 1)),
            "restart":     In(1),
            "loading":     In(1),
            "turn":        In(1),
        })


class BarrierQuery(wiring.Signature):
    """Wave controller -> barrier manager: is a barrier complete, and consume it.

    Members
    -------
    sync : Out(range(sync_resources))
        The sync resource asked about (the controller only acts on a resource that exists).
    mask : Out(ports)
        The participants that must have arrived.
    consume : Out(1)
        Pulse: clear ``mask``'s arrivals at ``sync`` and advance its generation.
    complete : In(1)
        Every port of ``mask`` has arrived at ``sync`` (combinational).
    generation : In(GENERATION_BITS)
        Completed barriers of ``sync`` so far.
    """

    def __init__(self, params):
        super().__init__({
            "sync":       Out(range(params.sync_resources)),
            "mask":       Out(params.fabric.ports),
            "consume":    Out(1),
            "complete":   In(1),
            "generation": In(GENERATION_BITS),
        })


class RunControl(wiring.Signature):
    """Wave controller -> every data block: the running collective, and its abort.

    One driver (the controller), several readers; each reader uses the members it needs.

    Members
    -------
    msg : Out(message_layout)
        The running collective; held from its start to its end.
    flush : Out(1)
        Held while the controller aborts a collective (watchdog): each block empties itself.
    clear_error : Out(1)
        Pulse at the start of a collective: clear the sticky error and status bits.
    """

    def __init__(self, params):
        super().__init__({
            "msg":         Out(message_layout(params)),
            "flush":       Out(1),
            "clear_error": Out(1),
        })


class IssueControl(wiring.Signature):
    """Wave controller -> read issuer.

    Members
    -------
    start : Out(1)
        Pulse: issue the reads of ``run.msg``.
    busy : In(1)
        Requests are still to be queued.
    """

    def __init__(self):
        super().__init__({"start": Out(1), "busy": In(1)})


class ReadStatus(wiring.Signature):
    """Wave table -> wave controller.

    Members
    -------
    error : Out(1)
        Sticky: a read response had a non-``OK`` status (cleared by ``run.clear_error``).
    progress : Out(1)
        A read response flit was accepted this cycle (restarts the watchdog).
    """

    def __init__(self):
        super().__init__({"error": Out(1), "progress": Out(1)})


class WriteStatus(wiring.Signature):
    """Write-back -> wave controller.

    Members
    -------
    error : Out(1)
        Sticky: a write response had a non-``OK`` status (cleared by ``run.clear_error``).
    status : Out(DatapathStatus width)
        OR of the datapath's status flags since ``run.clear_error``.
    busy : Out(1)
        A packet is being sent (the output is not at a packet boundary).
    outstanding : Out(1)
        Some write has not been acknowledged.
    progress : Out(1)
        A write response was accepted this cycle.
    slot_done : Out(1)
        The last data flit of a slot was taken from the datapath this cycle.
    msg_done : Out(1)
        ... and that slot was the message's last (its job's ``last``).
    """

    def __init__(self):
        super().__init__({
            "error":       Out(1),
            "status":      Out(Shape.cast(DatapathStatus).width),
            "busy":        Out(1),
            "outstanding": Out(1),
            "progress":    Out(1),
            "slot_done":   Out(1),
            "msg_done":    Out(1),
        })


class WaveTableRead(wiring.Signature):
    """Feeder -> wave table: the read port of every participant's table, and its progress.

    Members
    -------
    slot : Out(table_slot_bits)
    flit : Out(range(slot_flits))
    scale_flit : Out(range(scale_flits_per_slot))
    en : Out(1)
        Read (``slot``, ``flit``) and (``slot``, ``scale_flit``); ``data``/``scale`` show them one
        cycle later and hold while ``en`` is low.
    data : In(flit_width).array(ports)
    scale : In(flit_width).array(ports)
    avail : In(range(slot_flits + 1)).array(ports)
        Data flits of ``slot`` written so far per port (``slot_flits`` once its packet has ended).
    scales_done : In(ports)
        Per port: the scale packet of ``slot`` has ended.
    """

    def __init__(self, params):
        f = params.fabric
        super().__init__({
            "slot":        Out(params.table_slot_bits),
            "flit":        Out(range(params.slot_flits)),
            "scale_flit":  Out(range(params.scale_flits_per_slot)),
            "en":          Out(1),
            "data":        In(f.flit_width).array(f.ports),
            "scale":       In(f.flit_width).array(f.ports),
            "avail":       In(range(params.slot_flits + 1)).array(f.ports),
            "scales_done": In(f.ports),
        })


class SlotRelease(wiring.Signature):
    """Feeder -> table manager.

    Members
    -------
    release : Out(1)
        Pulse: the oldest reserved slot has been read out to the datapath.
    end : Out(1)
        With ``release``: that slot was the last of its message (frees a partial wave).
    """

    def __init__(self):
        super().__init__({"release": Out(1), "end": Out(1)})



class PushControl(wiring.Signature):
    """Wave controller -> wave table, in push mode (``push_resources > 0``): is a pushed
    collective's input in, and hand its reserved space back.

    Members
    -------
    sync : Out(range(push_resources))
        The push resource asked about (meaningful only with a push descriptor in hand).
    mask : Out(ports)
        Its participants.
    ready : In(1)
        The first data flit of every participant of ``mask`` is in ``sync``'s first push slot
        (INT8 scales are pushed before the data, so they are in too): the collective can start.
    error : In(1)
        Something pushed to ``sync`` since its space was last handed back was dropped, or came
        from a port outside ``mask``: the collective ends with ERROR.
    rearm : Out(1)
        Pulse: ``sync``'s input has been read; empty its slots for the next generation and clear
        its error.
    """

    def __init__(self, params):
        super().__init__({
            # At least one bit: one push resource would make it a zero-width port, which
            # Verilog writes as [-1:0] (Verilator ASCRANGE).
            "sync":  Out(range(max(2, params.push_resources))),
            "mask":  Out(params.fabric.ports),
            "ready": In(1),
            "error": In(1),
            "rearm": Out(1),
        })
