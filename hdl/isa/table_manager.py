"""TableManager: hands out wave-table slots and regulates outstanding waves."""

from amaranth.hdl import Module, Signal, Mux, Const
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from ..params import check_type
from .descriptor import IsaParams
from .interfaces import block_counters_layout, RunControl, SlotRelease


__all__ = ["TableManager"]


class TableManager(wiring.Component):
    """Slot allocation in ring order, freed a whole wave at a time.

    The same slot index is used in every participant's table, so one allocation reserves the slot
    in all of them. Slots are handed out in ring order on ``alloc`` while any is free: the wave
    controller issues reads for as many slots as are free (a partial segment) and the rest as slots
    come back. Reduction consumes slots in the same order and pulses ``release`` once per slot;
    ``slots_per_wave`` releases (or a release with ``end`` set, at the end of a message) free the
    wave's slots together. With ``waves = k`` the table therefore holds at most ``k`` waves of
    ``capacity / k`` bytes in flight: the paper's wave regulation.

    Members
    -------
    alloc : Out(stream.Signature(slot_bits))
        The next free slot; a transfer reserves it.
    release : In(SlotRelease)
        From the feeder: a slot has been read out (``release``), the last of its message (``end``).
    run : In(RunControl)
        ``msg.push``: the slots being released are push slots, not this manager's (ignored).
        ``flush``: the wave controller is aborting a collective; every slot is free again and
        allocation restarts at slot 0 (``counters.waves`` keeps counting).
    free : Out(range(slots + 1))
        Free slots.
    counters : Out(waves)
        Waves freed so far (a performance counter).
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        super().__init__({
            "alloc":    Out(stream.Signature(params.slot_bits)),
            "release":  In(SlotRelease()),
            "run":      In(RunControl(params)),
            "free":     Out(range(params.slots + 1), init=params.slots),
            "counters": Out(block_counters_layout("waves")),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        ptr = Signal(p.slot_bits)
        in_wave = Signal(range(p.slots_per_wave + 1))  # slots released in the current wave

        taken = self.alloc.valid & self.alloc.ready
        freed = Signal(range(p.slots + 1))
        waves = self.counters.waves
        # A push collective's slots are the resource's own, handed back by the controller.
        pushed = self.run.msg.push if p.push_slots else Const(0, 1)
        with m.If(self.release.release & ~pushed):
            with m.If(self.release.end | (in_wave + 1 == p.slots_per_wave)):
                m.d.comb += freed.eq(in_wave + 1)
                m.d.sync += [in_wave.eq(0), waves.eq(waves + 1)]
            with m.Else():
                m.d.sync += in_wave.eq(in_wave + 1)

        m.d.comb += [self.alloc.valid.eq(self.free != 0), self.alloc.payload.eq(ptr)]
        m.d.sync += self.free.eq(self.free + freed - taken)
        with m.If(taken):
            m.d.sync += ptr.eq(Mux(ptr == p.slots - 1, 0, ptr + 1))
        with m.If(self.run.flush):
            # Last, so it wins over the updates above.
            m.d.sync += [self.free.eq(p.slots), ptr.eq(0), in_wave.eq(0)]
        return m
