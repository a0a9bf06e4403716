"""Formal harness of the ISA's BarrierManager: arrival bitmaps, generations, acknowledgements."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...hdl.isa.barrier import BarrierManager
from ...hdl.isa.descriptor import IsaParams
from ...hdl.isa.interfaces import GENERATION_BITS, BarrierQuery, block_counters_layout
from ...hdl.packet import FabricParams, MsgClass, Opcode, Status
from ...hdl.params import check_int
from ...hdl.transport import packet_signature
from .properties import check_broken, OpenBlock, Properties, stream_contract


__all__ = ["BarrierHarness"]


class BarrierHarness(wiring.Component):
    """:class:`~scin.hdl.isa.barrier.BarrierManager` with its properties.

    The environment sends request packets (any opcodes, lengths, addresses and tags, keeping the
    stream contract) on every port's REQ stream, takes acknowledgements with any ``ready``
    pattern, and asks and consumes through ``query`` freely (any resource, any mask, consuming
    whether or not the barrier is complete). An *arrival* is the header of an ``ATOMIC_ADD`` from
    port ``p`` at ``addr = s``, for a resource that exists (``s < sync_resources``). The harness
    keeps the specification's bitmap of each resource: the ports that arrived since the last
    consume of their bit (a consume clears the mask's bits, then the cycle's arrival sets one).

    Specification:

    * ``complete_iff_all_arrived``: ``query.complete`` is high exactly when the resource exists
      and every port of ``query.mask`` has arrived at it.
    * ``duplicate_never_completes``: in the cycle after an arrival from a port that had already
      arrived (and no consume of that resource), the same query gives the same answer: a
      duplicate changes nothing, so it never completes a barrier.
    * ``generation_counts_consumes``: ``query.generation`` is the number of consumes of the
      resource, modulo ``2**GENERATION_BITS`` (0 for a resource that does not exist).
    * ``counters_count``: ``dup_arrivals``, ``bad_arrivals`` and ``bad_requests`` count exactly
      the duplicate arrivals, the ``ATOMIC_ADD`` headers at resources that do not exist and the
      headers of any other opcode.
    * ``every_arrival_acknowledged``: each ``ATOMIC_ADD`` header is answered by one
      ``WRITE_RESP`` header on its own port (status ``OK``, or ``DECERR`` for a resource that does
      not exist; its tag; ``src = dst = port``; one flit), and nothing else is ever sent.
    * ``one_header_per_cycle``: the manager takes at most one header per cycle.
    * ``ack{p}_contract``: each acknowledgement stream keeps the stream contract.

    Invariants (read inside the manager): its bitmaps, generations and per-port packet framing
    equal the harness's, and its round-robin pointer names a port.

    Covers: ``barrier_completes`` (every port arrived, the query complete for all of them and
    consumed), ``duplicate_then_complete`` (a barrier completes after a duplicate arrival at its
    resource), ``arrive_while_consumed`` (an arrival at the resource being consumed, in the same
    cycle), ``second_generation`` (a resource's second barrier of every port completes),
    ``decerr_answered``.

    Parameters
    ----------
    ports : int
        Switch ports (2 to 8).
    sync_resources : int
        Barrier resources (a non-power of two leaves ``query.sync`` values that name none).
    invariants : bool
        State the invariants (for k-induction); broken variants leave them out.
    broken : None or str
        A deliberately broken variant (:meth:`OpenBlock.tie`): ``"arrival_marks_all"``, the new
        arrival bits tied to every port, so one arrival completes a barrier;
        ``"bodies_as_headers"``, the per-port "in a packet's body" flags tied to 0, so a body flit
        that looks like an ``ATOMIC_ADD`` counts as an arrival. ``complete_iff_all_arrived`` (or,
        for the second, ``counters_count``) must fail.

    Members
    -------
    req : In(packet_signature).array(ports)
    ack : Out(packet_signature).array(ports)
    query : In(BarrierQuery)
    counters : Out(bad_arrivals, dup_arrivals, bad_requests)
    """

    BROKEN = ("arrival_marks_all", "bodies_as_headers")

    def __init__(self, *, ports=3, sync_resources=3, invariants=True, broken=None):
        check_int("ports", ports, 2, 8)
        check_broken(broken, self.BROKEN)
        fabric = FabricParams.default_for(64, ports=ports)
        self._params = IsaParams(fabric=fabric, capacity=fabric.max_payload, waves=1,
                                 descriptors=1, sync_resources=sync_resources)
        self._broken = broken
        self.properties = Properties(invariants=invariants)
        pkt = packet_signature(fabric)
        super().__init__({
            "req":      In(pkt).array(ports),
            "ack":      Out(pkt).array(ports),
            "query":    In(BarrierQuery(self._params)),
            "counters": Out(block_counters_layout("bad_arrivals", "dup_arrivals", "bad_requests")),
        })

    def elaborate(self, platform):
        m = Module()
        p, params = self.properties, self._params
        n, R = params.fabric.ports, params.sync_resources
        bm = BarrierManager(params)
        m.submodules.barrier = bm_open = OpenBlock(bm, platform)
        if self._broken == "arrival_marks_all":
            bm_open.tie("new_bits", (1 << n) - 1)
        elif self._broken == "bodies_as_headers":
            for i in range(n):
                bm_open.tie(f"in_body{i}", 0)
        for i in range(n):
            connect(m, flipped(self.req[i]), bm.req[i])
            connect(m, bm.ack[i], flipped(self.ack[i]))
            stream_contract(m, p, self.req[i], f"req{i}", drives="environment")
            stream_contract(m, p, self.ack[i], f"ack{i}", drives="block")
        connect(m, flipped(self.query), bm.query)
        m.d.comb += self.counters.eq(bm.counters)

        headers, arrivals = self._framing(m, bm_open)
        bitmap, generation = self._model(m, headers, arrivals)
        self._check_query(m, bitmap, generation, arrivals)
        self._check_acks(m, headers)

        for s in range(R):
            p.invariant(m, "bitmaps_match", bm_open.probe(f"arrived{s}") == bitmap[s])
            p.invariant(m, "generations_match", bm_open.probe(f"generation{s}") == generation[s])
        p.invariant(m, "pointer_in_range", bm_open.probe("last") < n)
        return m

    def _framing(self, m, bm_open):
        """Per port, the header taken this cycle (or none) and whether it is an arrival."""
        p, f = self.properties, self._params.fabric
        n, hdr_layout = f.ports, f.header_layout
        headers, arrivals = [], []
        for i in range(n):
            xfer = self.req[i].valid & self.req[i].ready
            in_body = Signal(name=f"in_body{i}")
            with m.If(xfer):
                m.d.sync += in_body.eq(~self.req[i].payload.last)
            p.invariant(m, "framing_matches", bm_open.probe(f"in_body{i}") == in_body)
            header = Signal(name=f"header{i}")
            m.d.comb += header.eq(xfer & ~in_body)
            hdr = data.View(hdr_layout, self.req[i].payload.data[:hdr_layout.size])
            headers.append((header, hdr))
            arrivals.append(header & (hdr.opcode == Opcode.ATOMIC_ADD))
        for i in range(n):
            for j in range(i + 1, n):
                p.spec(m, "one_header_per_cycle", ~(headers[i][0] & headers[j][0]))
        return headers, arrivals

    def _model(self, m, headers, arrivals):
        """The specification's bitmaps and generations, and the counters' expected values."""
        p, params = self.properties, self._params
        n, R = params.fabric.ports, params.sync_resources
        q = self.query
        bitmap = [Signal(n, name=f"bitmap{s}") for s in range(R)]
        generation = [Signal(GENERATION_BITS, name=f"generation{s}") for s in range(R)]
        dup, bad, other = (Signal(32, name=name) for name in ("dups", "bad_arrivals", "others"))
        arrival_at, dup_at = [[] for _ in range(R)], [[] for _ in range(R)]
        for i in range(n):
            header, hdr = headers[i]
            with m.If(arrivals[i] & (hdr.addr >= R)):
                m.d.sync += bad.eq(bad + 1)
            with m.If(header & (hdr.opcode != Opcode.ATOMIC_ADD)):
                m.d.sync += other.eq(other + 1)
            for s in range(R):
                here = arrivals[i] & (hdr.addr == s)
                arrival_at[s].append(here)
                dup_at[s].append(here & bitmap[s][i])
        # This cycle's arrival, per resource, and whether it is a duplicate.
        self._arrival_at = Cat(Cat(a).any() for a in arrival_at)
        self._dup_at = Cat(Cat(d).any() for d in dup_at)
        with m.If(self._dup_at.any()):
            m.d.sync += dup.eq(dup + 1)
        for s in range(R):
            consumed = q.consume & (q.sync == s)
            new = Cat(arrivals[i] & (headers[i][1].addr == s) for i in range(n))
            m.d.sync += bitmap[s].eq(Mux(consumed, bitmap[s] & ~q.mask, bitmap[s]) | new)
            with m.If(consumed):
                m.d.sync += generation[s].eq(generation[s] + 1)
        c = self.counters
        p.spec(m, "counters_count", (c.dup_arrivals == dup) & (c.bad_arrivals == bad)
               & (c.bad_requests == other))
        self._consumed_at = Cat(q.consume & (q.sync == s) for s in range(R))
        return bitmap, generation

    def _check_query(self, m, bitmap, generation, arrivals):
        p, params = self.properties, self._params
        n, R = params.fabric.ports, params.sync_resources
        q = self.query
        exists = q.sync < R
        asked = Array(bitmap)[q.sync]
        p.spec(m, "complete_iff_all_arrived",
               q.complete == (exists & ((asked & q.mask) == q.mask)))
        p.spec(m, "generation_counts_consumes",
               q.generation == Mux(exists, Array(generation)[q.sync], 0))

        # The same query one cycle later, after a duplicate arrival (or none) and no consume.
        was = Signal(len(q.sync) + n + 2)
        m.d.sync += was.eq(Cat(q.sync, q.mask, q.complete,
                               (self._dup_at | ~self._arrival_at).bit_select(q.sync, 1)
                               & ~self._consumed_at.bit_select(q.sync, 1)))
        was_sync, was_mask = was[:len(q.sync)], was[len(q.sync):len(q.sync) + n]
        was_complete, only_dup = was[-2], was[-1]
        same = (q.sync == was_sync) & (q.mask == was_mask)
        p.spec(m, "duplicate_never_completes", ~(same & only_dup) | (q.complete == was_complete))

        # Covers.
        everyone = (1 << n) - 1
        dup_seen = Signal()
        with m.If(self._dup_at[0]):
            m.d.sync += dup_seen.eq(1)
        p.cover(m, "barrier_completes", q.complete & (q.mask == everyone) & q.consume)
        p.cover(m, "duplicate_then_complete",
                dup_seen & (q.sync == 0) & (q.mask == everyone) & q.complete)
        p.cover(m, "arrive_while_consumed", (self._arrival_at & self._consumed_at).any())
        completed = Signal(2)   # barriers of every port completed and consumed at resource 0
        full = q.complete & (q.mask == everyone) & q.consume & (q.sync == 0)
        with m.If(full & (completed != 3)):
            m.d.sync += completed.eq(completed + 1)
        p.cover(m, "second_generation", full & (completed == 1))

    def _check_acks(self, m, headers):
        """Every ATOMIC_ADD header answered once, on its port, with the right header."""
        p, f = self.properties, self._params.fabric
        R, hdr_layout = self._params.sync_resources, f.header_layout
        for i, (header, hdr) in enumerate(headers):
            pending = Signal(name=f"ack_pending{i}")
            expected = Signal(hdr_layout, name=f"ack_expected{i}")
            with m.If(self.ack[i].valid & self.ack[i].ready):
                m.d.sync += pending.eq(0)
            with m.If(header & (hdr.opcode == Opcode.ATOMIC_ADD)):
                m.d.sync += [
                    pending.eq(1),
                    expected.eq(0),
                    expected.opcode.eq(Opcode.WRITE_RESP), expected.msg_class.eq(MsgClass.WRESP),
                    expected.inc.eq(1), expected.src.eq(i), expected.dst.eq(i),
                    expected.tag.eq(hdr.tag),
                    expected.status.eq(Mux(hdr.addr < R, Status.OK, Status.DECERR)),
                ]
            ack = self.ack[i]
            p.spec(m, "every_arrival_acknowledged", ack.valid == pending)
            p.spec(m, "every_arrival_acknowledged",
                   ~ack.valid | ((ack.payload.data == expected.as_value()) & ack.payload.last))
            sent = data.View(hdr_layout, ack.payload.data[:hdr_layout.size])
            p.cover(m, "decerr_answered", ack.valid & ack.ready & (sent.status == Status.DECERR))
