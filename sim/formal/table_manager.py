"""Formal harness of the ISA's TableManager: slot allocation in ring order, wave regulation."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, flipped, connect

from ...hdl.isa.descriptor import IsaParams
from ...hdl.isa.interfaces import COUNTER_BITS, SlotRelease, block_counters_layout
from ...hdl.isa.table_manager import TableManager
from ...hdl.packet import FabricParams
from ...hdl.params import check_int
from .properties import check_broken, OpenBlock, Properties, stream_contract


__all__ = ["TableManagerHarness"]


class TableManagerHarness(wiring.Component):
    """:class:`~scin.hdl.isa.table_manager.TableManager` with its properties.

    The environment takes ``alloc`` with any ``ready`` pattern, and releases as the feeder does:
    a ``release`` pulse only for a slot allocated and not yet released (in ring order, so the
    harness only counts them), with ``end`` set or not at will; ``flush`` at any time (it frees
    every slot). The harness keeps the specification's allocation pointer, free count, slots
    released in the current wave and waves freed.

    Specification:

    * ``ring_order``: ``alloc.payload`` is the number of slots taken since reset or the last
      flush, modulo ``slots``.
    * ``free_counts_slots``: ``free`` is ``slots`` minus the slots taken and not yet freed, and
      ``alloc.valid`` is exactly ``free != 0``: never more than ``slots`` slots in flight.
    * ``waves_free_together``: a slot comes back only with its wave: ``slots_per_wave``
      releases, or a release with ``end`` (a partial wave), free their slots in that cycle, and
      ``counters.waves`` counts those wave ends.
    * ``alloc_contract``: ``alloc`` keeps the stream contract, except across a cycle with
      ``flush`` (an abort takes back the offered slot: see ``strict``).

    Invariants (read inside the block): its pointer and its count of released slots in the wave
    equal the harness's, and the free, in-flight and released-in-wave slots add up to ``slots``.

    Covers: ``all_slots_taken`` (``free = 0``), ``wave_freed`` (a whole wave comes back),
    ``partial_wave_freed`` (a release with ``end`` frees a partial wave), ``ring_wraps`` (the
    last slot is taken), ``taken_after_flush``.

    Parameters
    ----------
    slots, waves : int
        Wave-table slots (a power of two) and outstanding waves (dividing ``slots``).
    strict : bool
        State ``alloc_contract`` across a flush too (``TableManager`` does not keep it then: a
        flush while a slot is offered and not taken moves the offer to slot 0).
    invariants : bool
        State the invariants (for k-induction); broken variants leave them out.
    broken : None or str
        A deliberately broken variant (:meth:`OpenBlock.tie`): ``"slot_per_release"``, the
        count of slots released in the wave tied to 0, so every release frees its slot at once
        (no wave regulation: ``waves_free_together`` or ``free_counts_slots`` must fail);
        ``"pointer_stuck"``, the allocation pointer tied to 0 (``ring_order`` must fail).

    Members
    -------
    alloc : Out(stream.Signature(slot_bits))
    release : In(SlotRelease)
    flush : In(1)
    free : Out(range(slots + 1))
    counters : Out(waves)
    """

    BROKEN = ("slot_per_release", "pointer_stuck")

    def __init__(self, *, slots=4, waves=2, strict=False, invariants=True, broken=None):
        check_int("slots", slots, 2, 16)
        check_broken(broken, self.BROKEN)
        fabric = FabricParams.default_for(64, ports=2)
        self._params = IsaParams(fabric=fabric, capacity=slots * fabric.max_payload,
                                 waves=waves, descriptors=1, sync_resources=1)
        self._strict = strict
        self._broken = broken
        self.properties = Properties(invariants=invariants)
        p = self._params
        super().__init__({
            "alloc":    Out(stream.Signature(p.slot_bits)),
            "release":  In(SlotRelease()),
            "flush":    In(1),
            "free":     Out(range(p.slots + 1)),
            "counters": Out(block_counters_layout("waves")),
        })

    def elaborate(self, platform):
        m = Module()
        props, p = self.properties, self._params
        S, W = p.slots, p.slots_per_wave
        tm = TableManager(p)
        m.submodules.manager = to = OpenBlock(tm, platform)
        if self._broken == "slot_per_release":
            to.tie("in_wave", 0)
        elif self._broken == "pointer_stuck":
            to.tie("ptr", 0)
        connect(m, tm.alloc, flipped(self.alloc))
        connect(m, flipped(self.release), tm.release)
        m.d.comb += [tm.run.flush.eq(self.flush), self.free.eq(tm.free),
                     self.counters.eq(tm.counters)]

        flush, rel, end = self.flush, self.release.release, self.release.end
        taken = self.alloc.valid & self.alloc.ready
        ptr = Signal(range(S))
        free = Signal(range(S + 1), init=S)
        in_flight = Signal(range(S + 1))   # taken, not released
        in_wave = Signal(range(S + 1))     # released, not freed
        waves = Signal(COUNTER_BITS)
        props.assume(m, "release_only_taken_slots", ~rel | (in_flight != 0))

        wave_end = rel & (end | (in_wave + 1 == W))
        freed = Signal(range(S + 1))
        m.d.comb += freed.eq(Mux(wave_end, in_wave + 1, 0))
        with m.If(flush):
            m.d.sync += [ptr.eq(0), free.eq(S), in_flight.eq(0), in_wave.eq(0)]
        with m.Else():
            m.d.sync += [free.eq(free + freed - taken),
                         in_flight.eq(in_flight + taken - rel),
                         in_wave.eq(Mux(wave_end, 0, in_wave + rel))]
            with m.If(taken):
                m.d.sync += ptr.eq(Mux(ptr == S - 1, 0, ptr + 1))
        with m.If(wave_end):
            m.d.sync += waves.eq(waves + 1)

        props.spec(m, "ring_order", ~self.alloc.valid | (self.alloc.payload == ptr))
        props.spec(m, "free_counts_slots", (self.free == free) & (self.alloc.valid == (free != 0)))
        props.spec(m, "waves_free_together", self.counters.waves == waves)
        # The stream contract, from the cycle after a flush on.
        was_flush = Signal()
        m.d.sync += was_flush.eq(flush)
        if self._strict:
            stream_contract(m, props, self.alloc, "alloc", drives="block")
        else:
            was_valid, was_ready = Signal(), Signal()
            was_payload = Signal.like(self.alloc.payload)
            m.d.sync += [was_valid.eq(self.alloc.valid), was_ready.eq(self.alloc.ready),
                         was_payload.eq(self.alloc.payload)]
            props.spec(m, "alloc_contract", ~(was_valid & ~was_ready) | was_flush
                       | (self.alloc.valid & (self.alloc.payload == was_payload)))

        props.invariant(m, "pointer_matches", to.probe("ptr") == ptr)
        props.invariant(m, "wave_count_matches", to.probe("in_wave") == in_wave)
        props.invariant(m, "slots_conserved", (free + in_flight + in_wave == S) & (in_wave < W))

        # Covers.
        props.cover(m, "all_slots_taken", self.free == 0)
        props.cover(m, "wave_freed", wave_end & (freed == W) & ~flush)
        props.cover(m, "partial_wave_freed", wave_end & (freed < W) & ~flush)
        props.cover(m, "ring_wraps", taken & (self.alloc.payload == S - 1))
        props.cover(m, "taken_after_flush", was_flush & taken)
        return m
