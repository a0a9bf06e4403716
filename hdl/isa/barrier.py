"""BarrierManager: the ISA-resident arrival flags (pre-barrier) of every sync resource."""

from amaranth.hdl import Module, Signal, Array, Mux, Const
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..packet import MsgClass, Opcode, Status
from ..transport import packet_signature
from ..transport.round_robin import round_robin
from ..params import check_type
from .descriptor import IsaParams
from .interfaces import GENERATION_BITS, block_counters_layout, BarrierQuery


__all__ = ["BarrierManager"]


class BarrierManager(wiring.Component):
    """Arrival bitmaps and generation counters of the sync resources.

    An accelerator arrives at sync resource ``s`` by sending ``ATOMIC_ADD`` with ``inc = 1`` and
    ``addr = s`` (``length``, the addend, is ignored: arrival is a set, not a sum). The manager sets
    bit ``port`` of resource ``s``'s arrival bitmap and answers ``WRITE_RESP`` (``OK``) to that
    port. A bitmap rather than a counter makes a duplicate arrival harmless (counted in
    ``dup_arrivals``) instead of completing the barrier early. An arrival at a resource that does
    not exist is answered ``DECERR`` and counted in ``bad_arrivals``; any other request (``READ``)
    is dropped and counted in ``bad_requests``.

    The wave controller asks (``query``) whether resource ``query.sync`` has arrivals from every
    port of ``query.mask`` (``query.complete``, combinational) and, when it starts the collective,
    pulses ``query.consume``: the mask's bits are cleared and the resource's generation counter
    advances. ``query.generation`` is the count of completed barriers of ``query.sync`` (the flag
    written during the first collective says 1, being that count plus one).

    Members
    -------
    req : In(packet_signature).array(ports)
        The ISA's REQ-class receive stream of each port.
    ack : Out(packet_signature).array(ports)
        The ISA's WRESP-class send stream of each port.
    query : In(BarrierQuery)
        The wave controller's question, and its ``consume``.
    counters : Out(bad_arrivals, dup_arrivals, bad_requests)
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        f = params.fabric
        pkt = packet_signature(f)
        super().__init__({
            "req":      In(pkt).array(f.ports),
            "ack":      Out(pkt).array(f.ports),
            "query":    In(BarrierQuery(params)),
            "counters": Out(block_counters_layout("bad_arrivals", "dup_arrivals", "bad_requests")),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        hdr_layout = f.header_layout

        arrived = Array(Signal(n, name=f"arrived{s}") for s in range(p.sync_resources))
        generation = Array(Signal(GENERATION_BITS, name=f"generation{s}")
                           for s in range(p.sync_resources))
        q, c = self.query, self.counters

        # `sync` can hold values above the last resource when sync_resources is not a power of two.
        sync_ok = q.sync < p.sync_resources
        m.d.comb += [
            q.complete.eq(sync_ok & ((arrived[q.sync] & q.mask) == q.mask)),
            q.generation.eq(Mux(sync_ok, generation[q.sync], 0)),
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
        new_sync = Signal(range(p.sync_resources))   # set only for a resource that exists
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
                        m.d.sync += c.dup_arrivals.eq(c.dup_arrivals + 1)
                with m.Else():
                    m.d.sync += c.bad_arrivals.eq(c.bad_arrivals + 1)
            with m.Else():
                m.d.sync += c.bad_requests.eq(c.bad_requests + 1)

        # Consume and arrive may hit the same resource in one cycle: clear first, then set.
        for s in range(p.sync_resources):
            consumed = q.consume & sync_ok & (q.sync == s)
            cleared = Mux(consumed, ~q.mask, Const((1 << n) - 1, n))
            added = Mux(new_sync == s, new_bits, 0)
            m.d.sync += arrived[s].eq((arrived[s] & cleared) | added)
            with m.If(consumed):
                m.d.sync += generation[s].eq(generation[s] + 1)
        return m
