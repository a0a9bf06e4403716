"""PacketArbiter: round robin among packet streams, changing grant only at packet boundaries."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..transport.round_robin import round_robin
from ..params import check_int
from ..transport.signature import check_params, packet_signature


__all__ = ["PacketArbiter"]


class PacketArbiter(wiring.Component):
    """Merges ``n`` packet streams into one, a whole packet at a time.

    When no packet is in progress, the grant goes round robin to the next input (after the one
    granted last) whose ``valid`` is high; it then stays with that input until its ``last`` flit
    has passed, so packets never interleave on the output. Saturated inputs alternate packet by
    packet and none starves; an input alone gets the whole output. Switching from one packet to the
    next costs no cycle, so the output can carry one flit per cycle.

    The output is registered (``o.valid``/``o.payload`` come from flops; ``i[k].ready`` is
    ``o.ready | ~o.valid`` for the granted input), so arbiters can be chained without a long
    combinational path.

    Parameters
    ----------
    params : FabricParams
    n : int
        Number of inputs (>= 1).

    Members
    -------
    i : In(packet_signature).array(n)
    o : Out(packet_signature)
    """

    def __init__(self, params, n):
        self._params = check_params(params)
        self._n = check_int("n", n, 1)
        sig = packet_signature(params)
        super().__init__({"i": In(sig).array(n), "o": Out(sig)})

    @property
    def n(self):
        return self._n

    def elaborate(self, platform):
        m = Module()
        n = self._n
        locked = Signal()                      # a packet is in progress on input ``owner``
        owner = Signal(range(n) if n > 1 else 1)
        last = Signal.like(owner)              # input granted most recently, for round robin
        pick, any_ = round_robin(m, [self.i[k].valid for k in range(n)], last)
        grant = Signal.like(owner)
        m.d.comb += grant.eq(pick)
        with m.If(locked):
            m.d.comb += grant.eq(owner)

        take = Signal()
        m.d.comb += take.eq(self.o.ready | ~self.o.valid)
        for k in range(n):
            m.d.comb += self.i[k].ready.eq(take & (grant == k))

        with m.If(take):
            m.d.sync += self.o.valid.eq(0)
            with m.Switch(grant):
                for k in range(n):
                    with m.Case(k):
                        with m.If(self.i[k].valid):
                            m.d.sync += [
                                self.o.valid.eq(1),
                                self.o.payload.eq(self.i[k].payload),
                                locked.eq(~self.i[k].payload.last),
                                owner.eq(k),
                            ]
                            with m.If(~locked):
                                m.d.sync += last.eq(k)
        return m
