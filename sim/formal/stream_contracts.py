"""Formal harness of the stream contract on every stream a block drives, whatever the block."""

import itertools

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, connect, flipped

from ...hdl.endpoint.accelerator import Accelerator
from ...hdl.endpoint.bridge import AxiBridge, bridge_axi_params
from ...hdl.endpoint.memory import MIN_LATENCY, AxiMemory
from ...hdl.isa.copy_path import CopyPath
from ...hdl.isa.datapath import Datapath
from ...hdl.isa.feeder import Feeder
from ...hdl.isa.interfaces import job_layout
from ...hdl.isa.read_issuer import ReadIssuer
from ...hdl.isa.wave_controller import WaveController
from ...hdl.isa.writeback import WriteBack
from ...hdl.params import check_choice
from .properties import check_broken, OpenBlock, Properties
from .small_isa import small_isa


__all__ = ["StreamContractHarness", "BLOCKS", "streams_of"]


def _small_isa():
    """3 ports, 2 slots of 512-byte packets (64 flits and two scale flits: with one, the scale
    read address would be a zero-width port, which the SMT2 back end cannot name), two
    descriptors on two sync resources (for the same reason)."""
    return small_isa(ports=3, max_payload=512, slots=2, descriptors=2, sync_resources=2)


#: The blocks this harness checks: how to build each, and its environment. ``stable``: inputs
#: that hold one value for the whole check (a collective's description, held from its start to
#: its end); ``held``: inputs that hold unless an enable of the block was high in the cycle
#: before (a synchronous memory's read data); ``abort``: the input whose cycles are exempt
#: (an abort empties the block, dropping what it offered); ``broken``: named broken variants,
#: each a register of the block and what it is tied to (a function of the open block and the
#: parameters), one condition removed; ``quiet_broken``: the broken variants run with quiet data
#: (see the harness's ``quiet_data``).
BLOCKS = {
    "feeder": dict(
        make=Feeder, stable=("run.msg",),
        held={"rd.data": "rd.en", "rd.scale": "rd.en"}, abort="run.flush",
        # The output flit's read set taken from the current job instead of the flit's own: a
        # flit waiting on the output changes when the next job is taken behind it.
        broken={"mask_not_held": ("out_mask",
                                  lambda bo, p: job_layout(p)(bo.probe("job")).rmask)}),
    # Every `wr` stream is the read side of a `lib.fifo` queue, so the contract rests on the
    # queue alone: the broken variant is port 0's queue with its output register reloaded from
    # storage whenever the queue holds more (the `~r_rdy | r_en` condition of the read enable
    # removed): a flit waiting on `wr.0` is replaced by the one queued behind it.
    "writeback": dict(make=WriteBack, stable=("run.msg",), held={}, abort="run.flush",
                      broken={"reload_while_waiting": (
                          "wr_queue0.fifo.r_port__en",
                          lambda bo, p: bo.probe("wr_queue0.fifo.inner_r_rdy"))}),
    # The job is offered only in the cycle it is taken, atomically with the slot's arm and read
    # requests (its `valid` depends on `ready`, by design: the feeder's `ready` does not depend
    # on `valid`, so there is no loop): it never waits, which is stated instead of `held`.
    # Broken: the job offered whenever the table manager has a free slot, without the feeder's
    # `ready` (nor the SLOT state's other conditions): it would wait, and nothing in the issuer
    # holds it.
    "read_issuer": dict(make=ReadIssuer, stable=("run.msg",), held={}, abort="run.flush",
                        only_when_ready=("job",),
                        broken={"job_without_ready": (
                            "job__valid", lambda bo, p: bo.block.alloc.valid)}),
    # The completion flag's status bits are read live from the sticky error and datapath status
    # inputs while the flag waits: an error that arrives meanwhile is added to the flag that goes
    # out (more accurate, not less). Stated as: everything else held, status bits only added.
    # Its error and status inputs are sticky: they lose bits only after the controller's own
    # clear (a collective's start).
    "wave_controller": dict(make=WaveController, stable=(), held={}, abort=None,
                            sticky={"flag": ("word", "status")},
                            sticky_inputs={"reads.error": "run.clear_error",
                                           "writes.error": "run.clear_error",
                                           "writes.status": "run.clear_error"},
                            # The flag offered in every state, not only in FLAGS: an offer made
                            # before the flag's fields exist (its payload is 0 outside FLAGS)
                            # changes when the controller gets there.
                            broken={"flag_outside_flags": ("flag__valid", lambda bo, p: 1)}),
    # The endpoint's packet-to-AXI4 bridge, on the small fabric with 4 outstanding reads. The
    # AXI slave keeps the AXI rule the bridge relies on: a write's B only after its last W beat.
    "bridge": dict(make=lambda p: AxiBridge(p.fabric, outstanding=4), stable=(), held={},
                   abort=None, environment=lambda m, ports, p: _b_after_last_w(m, ports, p),
                   # AW's payload taken from the write input as it is, not registered.
                   broken={"aw_not_held": ("aw", lambda bo, p: bo.block.write_in.payload.data[
                       :len(bo.probe("aw"))])}),
    # The endpoint memory (the AXI4 slave of the simulations and the boards' stand-in for HBM):
    # 8 words, the shortest latency, reordered responses over 2 outstanding reads.
    "memory": dict(make=lambda p: AxiMemory(bridge_axi_params(p.fabric, outstanding=2), size=64,
                                            latency=MIN_LATENCY, reorder=True, outstanding=2),
                   stable=(), held={}, abort=None,
                   # The R beat's ID, response and last taken from the read address channel as
                   # it comes, not from the beat's own register.
                   broken={"r_not_held": ("s1", lambda bo, p: bo.block.axi.ar.payload.as_value()[
                       :len(bo.probe("s1"))])}),
    # The endpoint's accelerator model (commands to packets, responses to events).
    "accelerator": dict(make=lambda p: Accelerator(p.fabric, poll_addr_width=3), stable=(),
                        held={}, abort=None,
                        # The event output shows the newest command event, not the one offered.
                        broken={"event_not_held": ("eo", lambda bo, p: bo.probe("ev_cmd"))}),
    # Broken: the block quantizer's output pipeline (the datapath's last stages) advances every
    # cycle, its `~o.valid | o.ready` condition removed: a result waiting on `o` is overwritten
    # by the one behind it (or by nothing).
    "datapath": dict(make=lambda p: Datapath(n_inputs=p.fabric.ports,
                                             flit_width=p.fabric.flit_width),
                     stable=(), held={}, abort=None,
                     broken={"output_never_stalls": ("block_quantizer.en_b", lambda bo, p: 1)},
                     # A result reaches `o` only after the pipeline's 12 cycles, and a bounded
                     # search that deep through the FP16 adder tree with free data ran past 12
                     # minutes: the broken variant runs with every input payload 0, as the covers
                     # do (the offer is withdrawn whatever the data).
                     quiet_broken=True),
    # Broken: the feeder's flit offered to the datapath in copy mode too (the `~copy` condition
    # of `dp_in.valid` removed). The feeder then follows `out.ready` alone, so a flit offered on
    # `dp_in` leaves when the write-back takes its copy, whatever the datapath did.
    "copy_path": dict(make=CopyPath, stable=("run.msg",), held={}, abort="run.flush",
                      broken={"datapath_offered_in_copy": (
                          "dp_in__valid", lambda bo, p: bo.block.feed.valid)}),
}


def _b_after_last_w(m, ports, props):
    """Assume the AXI4 rule that a slave answers a write (B) only after its last W beat: the
    B responses never outnumber the W beats with ``last`` taken before them."""
    w, b = ports["axi.w"][2], ports["axi.b"][2]
    owed = Signal(8, name="env_b_owed")
    w_last = w.valid & w.ready & w.payload.last
    b_fire = b.valid & b.ready
    m.d.sync += owed.eq(owed + w_last - b_fire)
    props.assume(m, "b_only_after_last_w", ~b.valid | (owed != 0))
    # The bound must reach an atomic's write: its read (AR with the atomic unit's own ID, one
    # above the read IDs) and then a W beat.
    ar = ports["axi.ar"][2]
    atomic_read = Signal(name="env_atomic_read")
    with m.If(ar.valid & ar.ready & (ar.payload.id == 4)):
        m.d.sync += atomic_read.eq(1)
    props.cover(m, "atomic_write_beat", atomic_read & w.valid & w.ready)


def _members(sig, obj, path, flip):
    """Every port and stream under ``sig`` (of interface ``obj``): ``(kind, path, flow, value)``
    with ``kind`` ``"port"`` or ``"stream"`` and ``flow`` as the block sees it."""
    for name, member in sig.members.items():
        flow = member.flow.flip() if flip else member.flow
        for index in itertools.product(*(range(d) for d in member.dimensions)):
            value = getattr(obj, name)
            for i in index:
                value = value[i]
            here = path + (name,) + tuple(str(i) for i in index)
            if member.is_port:
                yield "port", here, flow, value
            elif isinstance(member.signature, stream.Signature):
                yield "stream", here, flow, value
            else:
                # An In member's `signature` is already flipped: its members' flows are as
                # ``sig``'s owner sees them.
                yield from _members(member.signature, value, here, flip)


def _always_ready(member):
    return (not member.is_port and isinstance(member.signature, stream.Signature)
            and member.signature.always_ready)


def _with_ready(sig):
    """``sig`` with every top-level ``always_ready`` stream given a ``ready`` port (the block's
    own ``ready`` is a constant, which cannot be a port of the harness)."""
    members = {}
    for name, member in sig.members.items():
        if _always_ready(member):
            # An In member's `signature` is flipped already: rebuild it as the block declares it.
            flow = member.flow
            inner = member.signature.flip() if flow == In else member.signature
            new = flow(stream.Signature(inner.members["payload"].shape))
            for d in reversed(member.dimensions):
                new = new.array(d)
            members[name] = new
        else:
            members[name] = member
    return wiring.Signature(members)


def _offset(view, parts):
    """The bit offset of the field ``parts`` (a path of names) in the layout of ``view``."""
    layout, offset = view.shape(), 0
    for part in parts:
        field = layout[part]
        offset += field.offset
        layout = field.shape
    return offset


def _past(m, value, name):
    """A register holding ``value`` from the cycle before, named ``{name}_was``."""
    was = Signal.like(value, name=f"{name}_was")
    m.d.sync += was.eq(value)
    return was


def streams_of(block):
    """The paths (``"wr.0"``) of the streams ``block`` drives (its outputs), in signature
    order."""
    return [".".join(p) for kind, p, flow, _ in _members(block.signature, block, (), False)
            if kind == "stream" and flow != In]


class StreamContractHarness(wiring.Component):
    """A block of :data:`BLOCKS` with the stream contract on every stream it drives.

    The harness's ports are the block's own (joined with ``connect``), left to the solver: every
    input stream keeps the contract (assumed), every other input is free in every cycle except
    the block's ``stable`` inputs (one value throughout) and ``held`` ones (they change only in
    the cycle after their enable). Each output stream's ``ready`` is free.

    Specification: ``<stream>_contract`` for every output stream (``valid`` stays high until a
    transfer, ``payload`` unchanged meanwhile), except across a cycle of the block's ``abort``
    input or the cycle after (an aborted collective's offer is withdrawn on purpose: the
    consumer is aborted in the same cycle). Covers: ``<stream>_transfer`` and ``<stream>_held``
    (an offer waited a cycle and is still there) for every output stream: the check is not vacuous,
    each stream moves and is back-pressured. ``always_ready`` streams have no contract to keep. A
    stream in the block's ``only_when_ready`` is offered only in cycles its ``ready`` is high (it
    never waits): ``<stream>_only_when_ready`` states that instead, with its ``transfer`` cover. A
    stream in the block's ``sticky`` has one field of sticky status bits that may gain bits while
    the offer waits (never lose one); the rest of its payload is held.

    Parameters
    ----------
    block : str
        A key of :data:`BLOCKS`.
    invariants : bool
        Unused (no invariants: these checks are bounded); accepted for the flow's broken
        variants.
    broken : None or str
        A broken variant of the block (its ``broken`` table).
    quiet_data : bool
        Every input stream's payload is the constant 0 (the harness's own payload ports are left
        unused): for covers, and the broken variants of a block with ``quiet_broken``, where a
        search through arithmetic on the data (the datapath's adder tree) would cost more than
        the events need. Never for a proof: it would prove nothing about other data.
    """

    def __init__(self, *, block, invariants=True, broken=None, quiet_data=False):
        check_choice("block", block, tuple(BLOCKS))
        self._spec = BLOCKS[block]
        check_broken(broken, tuple(self._spec["broken"]))
        self._broken = broken
        self._quiet = quiet_data or (broken is not None and self._spec.get("quiet_broken", False))
        self._params = _small_isa()
        self._block = self._spec["make"](self._params)
        self.properties = Properties(invariants=invariants)
        super().__init__(_with_ready(self._block.signature))

    def elaborate(self, platform):
        m = Module()
        m.submodules.block = bo = OpenBlock(self._block, platform)
        if self._broken:
            target, source = self._spec["broken"][self._broken]
            bo.tie(target, source(bo, self._params))
        self._connect(m)
        mine = {".".join(path): (kind, flow, value)
                for kind, path, flow, value in _members(self.signature, self, (), False)}
        started = Signal()                 # cycle 0 is reset's: "the cycle before" exists after
        m.d.sync += started.eq(1)
        self._environment(m, mine, started)
        self._stream_contracts(m, mine, started)
        return m

    def _connect(self, m):
        """Each of the harness's ports to the block's: streams joined, plain ports driven across;
        with quiet data, the block's input payloads the constant 0."""
        block = self._block
        # Member by member: `flipped` cannot flip an array of interfaces as a whole.
        for name, member in self.signature.members.items():
            for index in itertools.product(*(range(d) for d in member.dimensions)):
                mine, theirs = getattr(self, name), getattr(block, name)
                for i in index:
                    mine, theirs = mine[i], theirs[i]
                if _always_ready(block.signature.members[name]):
                    # The harness's copy has a `ready` port of its own, ignored: a constant
                    # cannot be a port.
                    m.d.comb += [mine.valid.eq(theirs.valid), mine.payload.eq(theirs.payload)]
                elif (self._quiet and member.flow == In
                      and isinstance(member.signature, stream.Signature)):
                    # Quiet data: the block's input payload is the constant 0, not an assumption
                    # on a free port, so that Yosys folds the arithmetic on it away before the
                    # solver sees it (assumed, the FP16 adder tree was still in every step).
                    m.d.comb += [theirs.valid.eq(mine.valid), mine.ready.eq(theirs.ready),
                                 theirs.payload.eq(0)]
                elif not member.is_port:
                    connect(m, flipped(mine), theirs)
                elif member.flow == In:
                    m.d.comb += theirs.eq(mine)
                else:
                    m.d.comb += mine.eq(theirs)

    def _environment(self, m, mine, started):
        """The assumptions on the block's plain inputs: ``stable`` ones hold, ``held`` ones hold
        unless their enable was high, the block's own ``environment``, and ``sticky_inputs``
        bits fall only in the cycle after their clear."""
        p, spec = self.properties, self._spec

        def under(prefix):
            return [(path, value) for path, (kind, flow, value) in mine.items()
                    if kind == "port" and flow == In
                    and (path == prefix or path.startswith(prefix + "."))]

        for prefix in spec["stable"]:
            for path, value in under(prefix):
                p.assume(m, "stable_inputs_hold", ~started | (value == _past(m, value, path)))
        for prefix, enable in spec["held"].items():
            en = _past(m, mine[enable][2], enable)
            for path, value in under(prefix):
                p.assume(m, "read_data_holds", ~started | en | (value == _past(m, value, path)))
        if "environment" in spec:
            spec["environment"](m, mine, p)
        for path, clear in spec.get("sticky_inputs", {}).items():
            value, cleared = mine[path][2], _past(m, mine[clear][2], f"{clear}_was")
            was = _past(m, value, path)
            p.assume(m, "sticky_inputs_fall_only_when_cleared",
                     ~started | cleared | ((value & was) == was))

    def _stream_contracts(self, m, mine, started):
        """The contract on every stream: assumed on the ones the block consumes, asserted (with
        a cover of a transfer and of a held offer) on the ones it drives."""
        p, block, spec = self.properties, self._block, self._spec
        # Exempt: the cycles of an abort and the one after (a block may withdraw its offer at
        # once, combinationally, or from its registers a cycle later).
        if spec["abort"]:
            abort = mine[spec["abort"]][2]
            aborted = abort | _past(m, abort, "abort")
        else:
            aborted = 0

        for path, (kind, flow, s) in mine.items():
            if kind != "stream" or _always_ready(block.signature.members[path.split(".")[0]]):
                continue
            name = path.replace(".", "_")
            payload = s.payload.as_value() if hasattr(s.payload, "as_value") else s.payload
            was_valid = _past(m, s.valid, f"{name}_valid")
            was_ready = _past(m, s.ready, f"{name}_ready")
            held = s.valid & (payload == _past(m, payload, f"{name}_payload"))
            if path in spec.get("sticky", {}):
                held = self._sticky_held(m, s, payload, spec["sticky"][path], name)
            waited = started & was_valid & ~was_ready
            # `flow` is the block's: it consumes an In stream and drives an Out one.
            if flow == In:
                p.assume(m, "input_streams_keep_contract", ~waited | held)
            elif path in spec.get("only_when_ready", ()):
                p.spec(m, f"{name}_only_when_ready", ~s.valid | s.ready)
                p.cover(m, f"{name}_transfer", s.valid & s.ready)
            else:
                p.spec(m, f"{name}_contract", ~waited | aborted | held)
                p.cover(m, f"{name}_transfer", s.valid & s.ready)
                p.cover(m, f"{name}_held", waited & s.valid)

    @staticmethod
    def _sticky_held(m, s, payload, parts, name):
        """A waiting offer held: the payload outside the sticky field unchanged, and the field's
        bits only ever rising."""
        field = s.payload
        for part in parts:
            field = field[part]
        field = field.as_value() if hasattr(field, "as_value") else field
        was_field = _past(m, field, f"{name}_sticky")
        offset = _offset(s.payload, parts)
        rest = payload & ~(((1 << len(field)) - 1) << offset)
        return (s.valid & (rest == _past(m, rest, f"{name}_rest"))
                & ((field & was_field) == was_field))
