"""BarrierManager: the ISA-resident arrival flags (pre-barrier) of every sync resource."""

from amaranth.hdl import Module, Signal, Array, Mux, Const
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..packet import MsgClass, Opcode, Status
from ..transport import packet_signature
from ..transport.round_robin import round_robin
from .descriptor import IsaParams


__all__ = ["BarrierManager"]


class BarrierManager(wiring.Component):
    """Arrival bitmaps and generation counters of the sync resources.

    An accelerator arrives at sync resource ``s`` by sending ``ATOMIC_ADD`` with ``inc = 1`` and
    ``addr = s`` (``length``, the addend, is ignored: arrival is a set, not a sum). The manager sets
    bit ``port`` of resource ``s``'s arrival bitmap and answers ``WRITE_RESP`` (``OK``) to that port.
    A bitmap rather than a counter makes a duplicate arrival harmless (counted in ``dup_arrivals``)
    instead of completing the barrier early. An arrival at a resource that does not exist is
    answered ``DECERR`` and counted in ``bad_arrivals``; any other request (``READ``) is dropped and
    counted in ``bad_requests``.

    The wave controller asks whether resource ``query_sync`` has arrivals from every port of
    ``query_mask`` (``complete``, combinational) and, when it starts the collective, pulses
    ``consume``: the mask's bits are cleared and the resource's generation counter advances.
    ``generation`` is the count of completed barriers of ``query_sync`` (so it is 1 during the first).

    Members
    -------
    req : In(packet_signature).array(ports)
        The ISA's REQ-class receive stream of each port.
    ack : Out(packet_signature).array(ports)
        The ISA's WRESP-class send stream of each port.
    """

    def __init__(self, params):
        if not isinstance(params, IsaParams):
            raise TypeError(f"params must be an IsaParams, not {params!r}")
        self._params = params
        f = params.fabric
        pkt = packet_signature(f)
        super().__init__({
            "req":          In(pkt).array(f.ports),
            "ack":          Out(pkt).array(f.ports),
            "query_sync":   In(8),
            "query_mask":   In(f.ports),
            "complete":     Out(1),
            "consume":      In(1),
            "generation":   Out(16),
            "bad_arrivals": Out(32),
            "dup_arrivals": Out(32),
            "bad_requests": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        hdr_layout = f.header_layout

        arrived = Array(Signal(n, name=f"arrived{s}") for s in range(p.sync_resources))
        generation = Array(Signal(16, name=f"generation{s}") for s in range(p.sync_resources))

        sync_ok = self.query_sync < p.sync_resources
        m.d.comb += [
            self.complete.eq(sync_ok & ((arrived[self.query_sync] & self.query_mask) == self.query_mask)),
            self.generation.eq(Mux(sync_ok, generation[self.query_sync], 0)),
        ]

        # Per port: a packet is "in body" after its header until its last flit; body flits of a
        # request (there should be none) are consumed without effect.
        in_body = [Signal(name=f"in_body{i}") for i in range(n)]
        ack_full = [Signal(name=f"ack_full{i}") for i in range(n)]
        for i in range(n):
            with m.If(self.ack[i].ready):
                m.d.sync += ack_full[i].eq(0)
            m.d.comb += self.ack[i].valid.eq(ack_full[i])

        # One header per cycle, round robin over the ports whose ack slot is free.
        requests = [self.req[i].valid & ~in_body[i] & (~ack_full[i] | self.ack[i].ready)
                    for i in range(n)]
        last = Signal(range(n) if n > 1 else 1)
        grant, any_ = round_robin(m, requests, last)
        for i in range(n):
            # Body flits drain freely; a header waits for its grant.
            m.d.comb += self.req[i].ready.eq(in_body[i] | (any_ & (grant == i)))
            with m.If(self.req[i].valid & self.req[i].ready):
                m.d.sync += in_body[i].eq(~self.req[i].payload.last)

        hdr = Signal(hdr_layout)
        req_payload = Array(self.req[i].payload for i in range(n))
        m.d.comb += hdr.eq(req_payload[grant].data[:hdr_layout.size])

        new_bits = Signal(n)
        new_sync = Signal(8)
        with m.If(any_):
            m.d.sync += last.eq(grant)
            with m.If(hdr.opcode == Opcode.ATOMIC_ADD):
                resource_ok = hdr.addr < p.sync_resources
                ack = Signal(hdr_layout)
                m.d.comb += [
                    ack.eq(0),  # drive every field (length, addr) so no bit is left undriven
                    ack.opcode.eq(Opcode.WRITE_RESP), ack.msg_class.eq(MsgClass.WRESP),
                    ack.inc.eq(1), ack.status.eq(Mux(resource_ok, Status.OK, Status.DECERR)),
                    ack.src.eq(grant), ack.dst.eq(grant), ack.tag.eq(hdr.tag),
                ]
                for i in range(n):
                    with m.If(grant == i):
                        m.d.sync += [
                            ack_full[i].eq(1),
                            self.ack[i].payload.data.eq(ack.as_value()),
                            self.ack[i].payload.last.eq(1),
                        ]
                with m.If(resource_ok):
                    m.d.comb += [new_bits.eq(1 << grant), new_sync.eq(hdr.addr)]
                    with m.If(arrived[hdr.addr[:8]].bit_select(grant, 1)):
                        m.d.sync += self.dup_arrivals.eq(self.dup_arrivals + 1)
                with m.Else():
                    m.d.sync += self.bad_arrivals.eq(self.bad_arrivals + 1)
            with m.Else():
                m.d.sync += self.bad_requests.eq(self.bad_requests + 1)

        # Consume and arrive may hit the same resource in one cycle: clear first, then set.
        for s in range(p.sync_resources):
            cleared = Mux(self.consume & sync_ok & (self.query_sync == s), ~self.query_mask,
                          Const((1 << n) - 1, n))
            added = Mux(new_sync == s, new_bits, 0)
            m.d.sync += arrived[s].eq((arrived[s] & cleared) | added)
            with m.If(self.consume & sync_ok & (self.query_sync == s)):
                m.d.sync += generation[s].eq(generation[s] + 1)
        return m
