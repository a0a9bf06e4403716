"""Formal harness of the round-robin packet arbiter (the switch port's per-class TX arbiter)."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...hdl.params import check_int
from ...hdl.switch.arbiter import PacketArbiter
from ...hdl.transport import packet_signature
from .credit_link import FORMAL_FABRIC
from .properties import check_broken, OpenBlock, Properties, stream_contract


__all__ = ["PacketArbiterHarness"]


class PacketArbiterHarness(wiring.Component):
    """:class:`~scin.hdl.switch.arbiter.PacketArbiter` of ``n`` inputs, with its properties.

    The environment offers packets on every input (keeping the stream contract; any lengths,
    any idle cycles) and takes the output with any ``ready`` pattern. A *start* is the transfer
    of a packet's first flit from an input; the harness follows packets by the transfers on the
    inputs alone (``busy``: a packet has started and its ``last`` flit has not passed yet).

    Specification:

    * ``one_input_at_a_time``: at most one input transfers a flit in a cycle.
    * ``grant_changes_only_at_packet_boundaries``: while a packet is in progress, no other input
      transfers a flit.
    * ``no_grant_without_request``: at a packet boundary, an input is offered ``ready`` without
      ``valid`` only when no input is requesting.
    * ``work_conserving``: at a packet boundary, when the output can take a flit and some input
      requests, one of them transfers.
    * ``bounded_wait``: while an input waits (``valid`` high, not in a packet of its own), every
      other input starts at most one packet: a waiting input is granted within one packet of
      each of the others.
    * ``output_is_what_was_taken``: the output register holds exactly the flit last taken from
      an input until it is delivered (nothing lost, duplicated, changed or made up).
    * ``o_contract``: the output keeps the stream contract.

    Invariants (read inside the arbiter): its lock is the harness's ``busy``, its owner the input
    that transferred last, and its round-robin pointer that owner; every input that started while
    an input ``k`` waits lies between ``k`` and the pointer in round-robin order.

    Covers: ``grant_switches`` (a packet of another input starts in the cycle after a last flit),
    ``waited_for_every_other`` (an input starts after each of the ``n - 1`` others started once
    while it waited: the bound is reached), ``long_packet`` (a packet of three flits or more).

    Parameters
    ----------
    n : int
        Inputs (>= 2).
    invariants : bool
        State the invariants (for k-induction); broken variants leave them out.
    broken : None or str
        A deliberately broken variant (:meth:`OpenBlock.tie`): ``"forgets_lock"``, the lock
        register tied to 0, so it arbitrates every flit (``grant_changes_only_at_packet_boundaries``
        must fail); ``"fixed_priority"``, the round-robin pointer tied to 0, so the search always
        starts at input 1 (``bounded_wait`` must fail).

    Members
    -------
    i : In(packet_signature).array(n)
    o : Out(packet_signature)
    """

    BROKEN = ("forgets_lock", "fixed_priority")

    def __init__(self, *, n=3, invariants=True, broken=None):
        self._n = check_int("n", n, 2)
        check_broken(broken, self.BROKEN)
        self._broken = broken
        self.properties = Properties(invariants=invariants)
        sig = packet_signature(FORMAL_FABRIC)
        super().__init__({"i": In(sig).array(n), "o": Out(sig)})

    def elaborate(self, platform):
        m = Module()
        p, n = self.properties, self._n
        arb = PacketArbiter(FORMAL_FABRIC, n)
        m.submodules.arb = arb_open = OpenBlock(arb, platform)
        if self._broken == "forgets_lock":
            arb_open.tie("locked", 0)
        elif self._broken == "fixed_priority":
            arb_open.tie("last", 0)
        for k in range(n):
            connect(m, flipped(self.i[k]), arb.i[k])
            stream_contract(m, p, self.i[k], f"i{k}", drives="environment")
        connect(m, arb.o, flipped(self.o))
        stream_contract(m, p, self.o, "o", drives="block")

        xfer = Cat(self.i[k].valid & self.i[k].ready for k in range(n))
        valid = Cat(self.i[k].valid for k in range(n))
        busy = Signal()                        # a packet has started and not ended
        owner = Signal(range(n))               # the input that transferred last
        start = Signal(n)
        m.d.comb += start.eq(Mux(busy, 0, xfer))
        for k in range(n):
            with m.If(xfer[k]):
                m.d.sync += [busy.eq(~self.i[k].payload.last), owner.eq(k)]

        for j in range(n):
            for k in range(j + 1, n):
                p.spec(m, "one_input_at_a_time", ~(xfer[j] & xfer[k]))
        for k in range(n):
            p.spec(m, "grant_changes_only_at_packet_boundaries", ~(busy & xfer[k]) | (owner == k))
            p.spec(m, "no_grant_without_request",
                   busy | ~self.i[k].ready | self.i[k].valid | ~valid.any())
        take = self.o.ready | ~self.o.valid
        p.spec(m, "work_conserving", busy | ~take | ~valid.any() | xfer.any())

        self._check_output(m, xfer)
        served = self._check_wait(m, start, busy, owner)

        locked = arb_open.probe("locked")
        p.invariant(m, "lock_is_packet_in_progress", locked == busy)
        p.invariant(m, "owner_is_last_input", (arb_open.probe("owner") == owner) & (owner < n))
        p.invariant(m, "pointer_is_owner", arb_open.probe("last") == owner)
        pointer = arb_open.probe("last")
        for k in range(n):
            dist_to_pointer = Array((p - k) % n for p in range(n))[pointer]
            for j in range(n):
                if j != k:
                    p.invariant(m, "served_lie_before_pointer",
                                ~served[k][j] | ((j - k) % n <= dist_to_pointer))

        # Covers.
        was_end = Signal()
        was_from = Signal(range(n))
        m.d.sync += [was_end.eq(0)]
        for k in range(n):
            with m.If(xfer[k] & self.i[k].payload.last):
                m.d.sync += [was_end.eq(1), was_from.eq(k)]
        for k in range(n):
            p.cover(m, "grant_switches", was_end & start[k] & (was_from != k))
            p.cover(m, "waited_for_every_other",
                    start[k] & (served[k] == ((1 << n) - 1 ^ (1 << k))))
        # Flits of the packet in progress taken so far (saturating at 2).
        flits = Signal(2)
        ends = Cat(xfer[k] & self.i[k].payload.last for k in range(n))
        with m.If(ends.any()):
            m.d.sync += flits.eq(0)
        with m.Elif(xfer.any() & (flits != 2)):
            m.d.sync += flits.eq(flits + 1)
        p.cover(m, "long_packet", (flits == 2) & ends.any())
        return m

    def _check_output(self, m, xfer):
        """The output register against the harness's copy of the flit last taken."""
        p, n = self.properties, self._n
        pending = Signal()
        taken = Signal.like(self.o.payload)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += pending.eq(0)
        for k in range(n):
            with m.If(xfer[k]):
                m.d.sync += [pending.eq(1), taken.eq(self.i[k].payload)]
        p.spec(m, "output_is_what_was_taken", self.o.valid == pending)
        p.spec(m, "output_is_what_was_taken",
               ~pending | (self.o.payload.as_value() == taken.as_value()))

    def _check_wait(self, m, start, busy, owner):
        """``bounded_wait``; returns, per input, the inputs that started while it waited."""
        p, n = self.properties, self._n
        served = [Signal(n, name=f"served{k}") for k in range(n)]
        for k in range(n):
            waiting = self.i[k].valid & ~(busy & (owner == k))
            others = start & ~(1 << k)
            p.spec(m, "bounded_wait", ~waiting | ((served[k] & others) == 0))
            with m.If(~waiting | start[k]):
                m.d.sync += served[k].eq(0)
            with m.Else():
                m.d.sync += served[k].eq(served[k] | others)
        return served

