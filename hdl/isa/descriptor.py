"""ISA descriptors (the instructions of the wave controller), read and write tags, ISA parameters.

A descriptor is captured once (graph capture: addresses, shapes and sizes are fixed across replays),
loaded into the instruction buffer, and replayed at every barrier generation of its sync resource.
``docs/ISA.md`` documents every field; ``tb/unit/test_isa_descriptor.py`` checks its tables against
:func:`descriptor_layout`, :func:`read_tag_layout` and :func:`write_tag_layout`. The completion
flag the ISA writes is protocol and lives in :mod:`scin.hdl.packet` (:func:`flag_layout`,
:class:`FlagStatus`, re-exported here).
"""

from dataclasses import dataclass, field

from amaranth.lib import data, enum
from amaranth.utils import ceil_log2

from ..packet import FabricParams, FlagStatus, flag_layout
from ..params import check_type, check_int
from .datapath.common import MIN_INPUTS, MAX_INPUTS
from .dtype import DType, BLOCK_ELEMENTS


__all__ = ["Op", "IMPLEMENTED_OPS", "SHARDED_OPS", "ROOTED_OPS", "IN_PLACE_OPS", "PUSH_OPS",
           "FlagMode", "PushMode", "FlagStatus", "ReadKind", "descriptor_layout", "flag_layout",
           "read_tag_layout", "push_addr_layout", "push_mode", "push_input_bytes",
           "write_tag_layout", "IsaParams", "MAX_PORTS", "WRITE_TAG_BITS", "MIN_TAG_SEQ_BITS",
           "MIN_TIMEOUT", "check_descriptor", "buffer_alignment"]

#: Width of the participant mask in a descriptor: the format does not change with the switch size.
MAX_PORTS = 16
#: Write tags: the low bits of a WRITE's tag index a table of ``2**WRITE_TAG_BITS`` outstanding
#: writes per port (32: several 4 KiB writes per port cover the link round trip many times over).
WRITE_TAG_BITS = 5
#: Fewest sequence bits a read or write tag must keep above its index, so that a late or duplicate
#: response is told apart from the one the index now waits for (docs/ISA.md, "Tags").
MIN_TAG_SEQ_BITS = 4
#: Smallest non-zero watchdog timeout: below a few link round trips (2 x 90 cycles plus memory
#: latency and a 129-flit packet) a healthy collective would be aborted.
MIN_TIMEOUT = 256


class Op(enum.Enum, shape=4):
    """Collective operation (NCCL's definitions; ``docs/ISA.md``, Operations). 0 is never valid, so
    an unloaded (all-zero) slot fails cleanly. A participant's *rank* is its place in the
    participant set in ascending port order; ``elements`` is NCCL's per-rank count."""
    ALLREDUCE      = 1  #: every participant gets the reduction of all participants' buffers
    REDUCE_SCATTER = 2  #: rank r gets the reduction of everyone's shard r (N shards in, one out)
    ALLGATHER      = 3  #: every rank gets all N ranks' shards, in rank order
    BROADCAST      = 4  #: the root's buffer is written to every participant
    REDUCE         = 5  #: the reduction of all participants' buffers goes to the root only
    BARRIER        = 6  #: synchronisation only: barrier, then completion flags


#: Ops the ISA executes; any other encoding ends with ERROR.
IMPLEMENTED_OPS = (Op.ALLREDUCE, Op.REDUCE_SCATTER, Op.ALLGATHER, Op.BROADCAST, Op.REDUCE,
                   Op.BARRIER)
#: Ops that run one phase per participant (each rank's shard in turn, docs/ISA.md).
SHARDED_OPS = (Op.REDUCE_SCATTER, Op.ALLGATHER)
#: Ops whose reads or writes change when in place (``src_addr == dst_addr``).
IN_PLACE_OPS = (Op.REDUCE_SCATTER, Op.ALLGATHER, Op.BROADCAST)
#: Ops with a root (the ``root`` field is a rank of the participant set).
ROOTED_OPS = (Op.BROADCAST, Op.REDUCE)
#: Ops a descriptor may run in push mode (:class:`PushMode`): every op that moves data. Each
#: participant pushes what the ISA would read of it, once: its input (ReduceScatter: its N shards,
#: read in N phases; AllGather: its shard, read in its phase); a Broadcast's root alone pushes.
PUSH_OPS = (Op.ALLREDUCE, Op.REDUCE, Op.REDUCE_SCATTER, Op.ALLGATHER, Op.BROADCAST)


class FlagMode(enum.Enum, shape=1):
    """When the completion flags are written."""
    #: After every result write has been acknowledged (the paper's scheme): two more one-way hops,
    #: but the flag's status covers write errors too.
    ACKED   = 0
    #: Right behind the result data, in the same message class (the endpoint commits writes in
    #: order, so the flag cannot become visible before the data): saves the write-response and
    #: flag hops. A write error detected afterwards is reported by rewriting the flag with ERROR.
    ORDERED = 1


class PushMode(enum.Enum, shape=2):
    """How the operands reach the ISA (docs/ISA.md, Push mode). 3 is invalid."""
    #: The ISA reads every participant's buffer after the barrier (the paper's protocol).
    PULL = 0
    #: Every participant writes its buffer into its reserved space in the ISA (inc=1 WRITEs); the
    #: collective starts when every participant's first flit is in, with no READ at all.
    PUSH = 1
    #: PUSH when the op can be pushed, the resource has reserved space and each participant's
    #: input is at most ``push_threshold`` bytes; PULL otherwise (:func:`push_mode`).
    AUTO = 2


class ReadKind(enum.Enum, shape=1):
    """Which packet of a wave-table slot a read asks for (the ``kind`` field of a read tag)."""
    DATA  = 0  #: the slot's data (``max_payload`` bytes at most)
    SCALE = 1  #: INT8: the slot's block scales


def descriptor_layout():
    """The descriptor as a :class:`data.StructLayout` (LSB first). Addresses are 48-bit byte
    addresses, identical in every participant's memory (symmetric buffers, as in NVLS multicast
    objects): the ISA derives each participant's addresses from them. ``root`` (BROADCAST,
    REDUCE) is a rank, not a port; it was added after ``flag_addr`` so every earlier field keeps
    its place, and ``mode`` (:class:`PushMode`) after it for the same reason."""
    return data.StructLayout({
        "op":             Op,
        "dtype":          DType,
        "flag_mode":      FlagMode,
        "sync":           8,
        "participants":   MAX_PORTS,
        "elements":       32,
        "src_addr":       48,
        "dst_addr":       48,
        "src_scale_addr": 48,
        "dst_scale_addr": 48,
        "flag_addr":      48,
        "root":           range(MAX_PORTS),
        "mode":           PushMode,
    })


def read_tag_layout(params):
    """The tag of a ``READ`` the ISA sends (LSB first; ``tag_width`` bits in all).

    ``slot`` and ``kind`` (:class:`ReadKind`) name the place in the wave table the response is
    written to; ``seq`` is the slot's issue number modulo ``2**read_seq_bits``, so that a late
    response to an earlier use of the slot is told apart from the current one (docs/ISA.md, Tags).
    ``slot`` is lowest so that the ``j``-th response of a ``READ_WAVE`` train, whose tag is the
    request's plus ``j`` (docs/PROTOCOL.md), names the ``j``-th slot after the request's (a train
    never wraps round the slots)."""
    return data.StructLayout({"slot": params.slot_bits, "kind": ReadKind,
                              "seq": params.read_seq_bits})


def push_addr_layout(params):
    """The ``addr`` of a push WRITE (``inc = 1``, docs/PROTOCOL.md), LSB first: ``offset`` is the
    byte offset in the participant's input (``kind`` DATA) or in its INT8 block scales (``kind``
    SCALE: the data offset / 32), ``sync`` the sync resource whose reserved space it goes to."""
    f = params.fabric
    return data.StructLayout({"offset": f.addr_width - 9, "kind": ReadKind, "sync": 8})


def write_tag_layout(params):
    """The tag of a ``WRITE`` the ISA sends (LSB first; ``tag_width`` bits in all): the write's
    sequence number modulo ``2**tag_width``. ``index`` (the low ``WRITE_TAG_BITS``) names its entry
    in the outstanding-write table of each port, ``seq`` (the bits above) the round of the sequence
    that entry is in, so a late response is told apart from the one the entry waits for now."""
    return data.StructLayout({"index": WRITE_TAG_BITS, "seq": params.write_seq_bits})


@dataclass(frozen=True)
class IsaParams:
    """Parameters of the In-Switch Accelerator.

    Parameters
    ----------
    fabric : FabricParams
        Flit width, ports, header fields.
    capacity : int
        Wave-table capacity per participant, in bytes (a power of two, a multiple of
        ``fabric.max_payload``). The table is cut into *slots* of one maximum-size packet each.
    waves : int
        Outstanding waves ``k``: the capacity is regulated as ``k`` waves of ``capacity / k`` bytes
        (``slots / k`` slots each); a wave's slots are freed together when the whole wave has been
        reduced. ``k = slots`` frees every slot as soon as it is reduced.
    descriptors : int
        Instruction-buffer depth.
    sync_resources : int
        Barrier sync resources (arrival bitmaps and generation counters).
    max_elements : int
        Largest ``elements`` a descriptor may name.
    timeout : int
        Response watchdog, in cycles: a running collective that makes no progress (no read or
        write response accepted, no slot reduced, no flag taken) for this many cycles is aborted
        and ends with ``TIMEOUT`` in every flag. 0 disables the watchdog; otherwise at least
        ``MIN_TIMEOUT``. The default, 65536 cycles (262 us at 250 MHz), is about 150 round trips of
        the paper latency model (2 x 90-cycle links, 40-cycle memory, a 129-flit packet).
    push_resources : int
        Sync resources ``0`` to ``push_resources - 1`` have space reserved for push mode
        (:class:`PushMode`): ``push_capacity`` bytes per participant each, wave-table slots of their
        own beside the ``capacity`` that pull mode uses. 0 (the default, the paper's
        configuration) builds no push logic and no push space: PUSH descriptors are bad, AUTO
        pulls.
    push_capacity : int
        Bytes reserved per participant per push resource (a multiple of ``max_payload``): the
        largest input a participant can push.
    push_threshold : int or None
        AUTO pushes when each participant's input is at most this many bytes (at most
        ``push_capacity``; None, the default: ``push_capacity``, see :attr:`auto_threshold`).
    read_train : int
        Most slots one read request fetches. 1 (the default, the paper's protocol): one ``READ``
        per slot. Above 1, consecutive full ``max_payload`` segments of a message, page-aligned
        in the source, read from the same ports into consecutive slots taken back to back, share
        one ``READ_WAVE`` (docs/PROTOCOL.md), answered by a train of ``READ_RESP`` packets, one
        per slot: the links carry one request flit per train instead of one per slot. At most
        ``slots``, and at most ``max_payload`` flits a train (the switch ports' length check:
        32 slots of 4 KiB at 256-bit flits).
    write_train : int
        Most result slots one ``WRITE_RESP`` acknowledges. 1 (the default, the paper's
        protocol): every ``WRITE`` is acknowledged. Above 1, the result (and INT8 scale) packets
        of a slot go out as ``WRITE_POSTED`` (docs/PROTOCOL.md: no response; a failure is
        reported by the next acknowledged write) except the last packet of every
        ``write_train``-th slot and of the message's last slot, so the links carry one response
        flit per ``write_train`` slots. Flags are always acknowledged. At most 64.
    gather_pairs : bool
        In-place AllGather in pairs of ranks (docs/ISA.md, Paired AllGather). False (the
        default, the paper's configuration): one phase per rank, each rank's shard read and
        written to every other rank, so a link is idle one phase in N (the in-place bound is
        ``N - 1`` phases). True: ``N - 1`` phases, phase ``j`` reading ranks ``j`` and ``j + 1``
        at once and writing rank ``j``'s shard to the ranks above ``j`` and rank ``j + 1``'s to
        the others, so every link carries data in every phase. It adds a second copy output
        to the feeder and a per-port choice of flit and address to the write-back and the read
        requests (docs/RESOURCES.md). It applies to pulled FP16 and BF16 in-place AllGathers of
        two or more ranks whose shard is a whole number of ``max_payload`` pages; any other
        AllGather runs one phase per rank as without it.
    """
    fabric:         FabricParams = field(default_factory=FabricParams)
    capacity:       int = 32768
    waves:          int = 8
    descriptors:    int = 16
    sync_resources: int = 8
    max_elements:   int = 1 << 28
    timeout:        int = 1 << 16
    push_resources: int = 0
    push_capacity:  int = 16384
    push_threshold: int = None
    read_train:     int = 1
    write_train:    int = 1
    gather_pairs:   bool = False

    def __post_init__(self):
        f = check_type("fabric", self.fabric, FabricParams)
        # The datapath reduces MIN_INPUTS to MAX_INPUTS participants (and the descriptor's
        # participant mask has MAX_PORTS bits): refuse any other switch here, not at elaboration.
        check_int("fabric.ports", f.ports, MIN_INPUTS, min(MAX_INPUTS, MAX_PORTS))
        if f.flit_width > 512 or 512 % f.flit_width:
            raise ValueError(f"flit_width must divide 512 (one INT8 block), not {f.flit_width}")
        if f.max_payload > 4096 or f.max_payload & (f.max_payload - 1):
            # A segment is cut at max_payload boundaries of its source and destination offsets
            # (plan.py): with a power of two up to 4 KiB, no packet crosses a 4 KB page.
            raise ValueError(f"the ISA needs fabric.max_payload to be a power of two of at most "
                             f"4096 bytes, not {f.max_payload!r}")
        check_int("capacity", self.capacity)
        if (self.capacity < f.max_payload or self.capacity % f.max_payload
                or self.capacity & (self.capacity - 1)):
            raise ValueError(f"capacity must be a power of two multiple of max_payload "
                             f"({f.max_payload} bytes), not {self.capacity!r}")
        check_int("waves", self.waves)
        if not (1 <= self.waves <= self.slots and self.slots % self.waves == 0):
            raise ValueError(f"waves must divide the {self.slots} slots of the wave table "
                             f"(1 to {self.slots}), not {self.waves!r}")
        check_int("descriptors", self.descriptors, 1, 256)
        check_int("sync_resources", self.sync_resources, 1, 256)
        check_int("max_elements", self.max_elements, 1, (1 << 32) - 1)
        if self.read_seq_bits < MIN_TAG_SEQ_BITS or self.write_seq_bits < MIN_TAG_SEQ_BITS:
            need = max(1 + self.slot_bits, WRITE_TAG_BITS) + MIN_TAG_SEQ_BITS
            raise ValueError(f"tag_width {f.tag_width} is too narrow for {self.slots} slots: read "
                             f"and write tags need {need} bits (an index and {MIN_TAG_SEQ_BITS} "
                             f"sequence bits)")
        check_int("timeout", self.timeout)
        if not (self.timeout == 0 or MIN_TIMEOUT <= self.timeout < (1 << 32)):
            raise ValueError(f"timeout must be 0 (no watchdog) or between {MIN_TIMEOUT} and "
                             f"2**32-1 cycles, not {self.timeout!r}")
        check_int("push_resources", self.push_resources, 0, self.sync_resources)
        check_int("push_capacity", self.push_capacity)
        limit = 1 << (f.addr_width - 9)  # push_addr_layout's offset field
        if not (f.max_payload <= self.push_capacity <= limit
                and self.push_capacity % f.max_payload == 0):
            raise ValueError(f"push_capacity must be a multiple of max_payload ({f.max_payload} "
                             f"bytes) up to {limit}, not {self.push_capacity!r}")
        if self.push_threshold is not None:
            check_int("push_threshold", self.push_threshold, 0, self.push_capacity)
        # A READ_WAVE's length counts flits; the switch ports refuse any length over max_payload.
        most = min(self.slots, f.max_payload // self.slot_flits)
        check_int("read_train", self.read_train, 1, most)
        if self.read_train > 1 and f.train_piece_bytes != f.max_payload:
            # A train's j-th response must be the j-th slot: one piece per max_payload page.
            raise ValueError(f"read_train needs READ_WAVE pieces of one slot, but this fabric "
                             f"cuts trains into {f.train_piece_bytes}-byte pieces (max_payload "
                             f"{f.max_payload}, {f.flit_width}-bit flits): read_train must be 1")
        check_int("write_train", self.write_train, 1, 64)
        check_type("gather_pairs", self.gather_pairs, bool)

    @property
    def slots(self):
        return self.capacity // self.fabric.max_payload

    @property
    def slot_bits(self):
        return max(1, ceil_log2(self.slots))

    @property
    def auto_threshold(self):
        """The largest input, in bytes per participant, that an AUTO descriptor pushes."""
        return self.push_capacity if self.push_threshold is None else self.push_threshold

    @property
    def push_slots_per_resource(self):
        return self.push_capacity // self.fabric.max_payload if self.push_resources else 0

    @property
    def push_slots(self):
        """Wave-table slots reserved for push mode, after the ``slots`` of pull mode: resource
        ``s``'s are ``slots + s * push_slots_per_resource`` and up."""
        return self.push_resources * self.push_slots_per_resource

    @property
    def table_slots(self):
        return self.slots + self.push_slots

    @property
    def table_slot_bits(self):
        """Width of a wave-table slot index, push slots included (read tags name pull slots
        only, in ``slot_bits``)."""
        return max(1, ceil_log2(self.table_slots))

    @property
    def read_seq_bits(self):
        """Bits of a read tag above ``kind`` and ``slot``: the slot's issue number (docs/ISA.md)."""
        return self.fabric.tag_width - 1 - self.slot_bits

    @property
    def write_seq_bits(self):
        """Bits of a write tag above its index: the high bits of the write's sequence number."""
        return self.fabric.tag_width - WRITE_TAG_BITS

    @property
    def byte_bits(self):
        """Width of a per-rank byte count: ``elements`` up to ``max_elements``, 2 bytes each."""
        return (2 * self.max_elements).bit_length()

    @property
    def offset_bits(self):
        """Width of a byte offset into a buffer of every rank's shards (ports x the count)."""
        return (self.fabric.ports * 2 * self.max_elements).bit_length()

    @property
    def slots_per_wave(self):
        return self.slots // self.waves

    @property
    def slot_flits(self):
        return self.fabric.max_payload_flits

    @property
    def slot_elements_int8(self):
        return self.fabric.max_payload

    @property
    def scale_bytes_per_slot(self):
        """Scale bytes for one full INT8 slot: one FP16 scale per 64-element block."""
        return 2 * self.fabric.max_payload // BLOCK_ELEMENTS

    @property
    def scale_flits_per_slot(self):
        return -(-self.scale_bytes_per_slot // self.fabric.flit_bytes)


def buffer_alignment(fabric):
    """``(data, scales)``: the alignment, in bytes, of a descriptor's data and scale buffers.

    The ISA moves a buffer in packets of ``max_payload`` bytes from its start (one wave-table slot
    each), and a packet must not cross a 4 KB boundary (the AXI burst rule the endpoints' bridges
    enforce, docs/PROTOCOL.md). Data buffers are therefore aligned to ``max_payload`` (4 KiB) and
    INT8 scale buffers to the scales of one such packet (``max_payload / 32``: 128 bytes): then
    no packet the ISA sends or asks for crosses a boundary.
    """
    return fabric.max_payload, max(fabric.max_payload // 32, fabric.flit_bytes)


def check_descriptor(desc, params):
    """Software twin of the hardware's descriptor check: the reasons a descriptor ends with ERROR.

    ``desc`` is a dict of integers (field name -> value). Returns a list of human-readable reasons
    (empty when the descriptor is good). Used by tests and by the CLI before it loads a descriptor.
    """
    f = params.fabric
    reasons = []
    try:
        op = Op(desc.get("op", 0))
    except ValueError:
        op = None
    if op not in IMPLEMENTED_OPS:
        reasons.append(f"op {desc.get('op', 0)} is not implemented")
    parts = desc.get("participants", 0)
    if parts == 0:
        reasons.append("participant set is empty")
    if parts >> f.ports:
        reasons.append(f"participant set {parts:#x} names ports beyond {f.ports - 1}")
    if desc.get("sync", 0) >= params.sync_resources:
        reasons.append(f"sync resource {desc.get('sync')} is out of range "
                       f"(0 to {params.sync_resources - 1})")
    if op in ROOTED_OPS:
        n = bin(parts & ((1 << f.ports) - 1)).count("1")
        if desc.get("root", 0) >= n:
            reasons.append(f"root {desc.get('root', 0)} is not a rank of the {n} participants")
    if op not in (None, Op.BARRIER):
        reasons += _data_reasons(desc, params, op)
    if desc.get("flag_addr", 0) % 4:
        reasons.append(f"flag_addr {desc.get('flag_addr', 0):#x} is not 4-byte aligned")
    reasons += _push_reasons(desc, params, op)
    return reasons


def push_input_bytes(desc):
    """Bytes each participant pushes for the descriptor ``desc`` (a dict of integers): its whole
    input, ``C`` bytes (ReduceScatter: its ``N`` shards, ``N x C``; AllGather: its shard, ``C``;
    Broadcast: the root's ``C``, and the others push nothing)."""
    nbytes = desc.get("elements", 0) * (1 if desc.get("dtype", 0) == DType.INT8.value else 2)
    if desc.get("op", 0) == Op.REDUCE_SCATTER.value:
        nbytes *= bin(desc.get("participants", 0)).count("1")
    return nbytes


def _can_push(desc, params, op):
    """Whether the descriptor can run in push mode: its op, its resource's reserved space."""
    return (op in PUSH_OPS and desc.get("sync", 0) < params.push_resources
            and push_input_bytes(desc) <= params.push_capacity)


def _push_reasons(desc, params, op):
    mode = desc.get("mode", 0)
    if mode not in {m.value for m in PushMode}:
        return [f"mode {mode} is unknown"]
    if mode != PushMode.PUSH.value or _can_push(desc, params, op):
        return []
    if op not in PUSH_OPS:
        return [f"{op.name if op else 'this op'} cannot be pushed (push mode: "
                f"{', '.join(o.name for o in PUSH_OPS)})"]
    if desc.get("sync", 0) >= params.push_resources:
        return [f"sync resource {desc.get('sync', 0)} has no push space (push_resources = "
                f"{params.push_resources})"]
    return [f"{push_input_bytes(desc)} bytes per participant exceed the push space "
            f"(push_capacity = {params.push_capacity})"]


def push_mode(desc, params):
    """The mode a descriptor runs in, :attr:`PushMode.PUSH` or :attr:`PushMode.PULL`: the
    software twin of the hardware's choice (AUTO resolved). The participants' programs follow it:
    push their inputs, or arrive. A bad descriptor (:func:`check_descriptor`) never runs pushed:
    its participants arrive and it ends with ERROR at its barrier, or at once if it has none
    (a PUSH that cannot push)."""
    try:
        op = Op(desc.get("op", 0))
    except ValueError:
        op = None
    mode = desc.get("mode", 0)
    if check_descriptor(desc, params):
        return PushMode.PULL
    if mode == PushMode.PUSH.value:
        return PushMode.PUSH
    if (mode == PushMode.AUTO.value and _can_push(desc, params, op)
            and push_input_bytes(desc) <= params.auto_threshold):
        return PushMode.PUSH
    return PushMode.PULL


def _data_reasons(desc, params, op):
    """The reasons a data-moving descriptor is bad: its dtype, length and buffers."""
    f = params.fabric
    reasons = []
    elements = desc.get("elements", 0)
    try:
        dtype = DType(desc.get("dtype", 0))
    except ValueError:
        dtype = None
        reasons.append(f"dtype {desc.get('dtype')} is unknown")
    if elements == 0:
        reasons.append("length is zero")
    if elements > params.max_elements:
        reasons.append(f"length {elements} exceeds the maximum {params.max_elements}")
    int8 = dtype == DType.INT8
    if int8 and elements % BLOCK_ELEMENTS:
        reasons.append(f"INT8 length {elements} is not a whole number of "
                       f"{BLOCK_ELEMENTS}-element blocks")
    nbytes = elements * (1 if int8 else 2)
    if op in SHARDED_OPS and dtype is not None and nbytes % f.flit_bytes:
        reasons.append(f"{op.name} shard of {elements} elements is not a whole number of "
                       f"{f.flit_bytes}-byte flits")
    data_align, scale_align = buffer_alignment(f)
    names = [("src_addr", data_align), ("dst_addr", data_align)]
    if int8:
        names += [("src_scale_addr", scale_align), ("dst_scale_addr", scale_align)]
    for name, align in names:
        if desc.get(name, 0) % align:
            reasons.append(f"{name} {desc.get(name, 0):#x} is not {align}-byte aligned")
    if int8 and op in IN_PLACE_OPS and ((desc.get("src_addr", 0) == desc.get("dst_addr", 0))
                 != (desc.get("src_scale_addr", 0) == desc.get("dst_scale_addr", 0))):
        reasons.append("INT8 in place needs the scales in place too (src_scale_addr == "
                       "dst_scale_addr exactly when src_addr == dst_addr)")
    return reasons
