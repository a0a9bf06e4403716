"""Unit tests of the ISA's blocks in Amaranth's simulator (each runs in seconds).

Each bench drives its block cycle by cycle from one async testbench: inputs are set, the handshakes
of the cycle are sampled, then the clock ticks. Streams get idle cycles and backpressure from a
seeded ``random.Random`` (the seed is logged: replay with ``SCIN_SEED=<seed>``), sinks check the
stream contract (a payload holds while ``valid`` waits for ``ready``), and every check compares
against a Python model of the block or the codec of the layouts (``scin.hdl.codec``).
"""

import random

import pytest

from scin.hdl.codec import pack, unpack
from scin.hdl.isa import (IsaParams, Op, DType, ReadKind, check_descriptor, descriptor_layout,
                          read_tag, read_tag_layout, write_tag, load_layout)
from scin.hdl.isa.barrier import BarrierManager
from scin.hdl.isa.feeder import Feeder
from scin.hdl.isa.instruction_buffer import InstructionBuffer
from scin.hdl.isa.interfaces import flag_request_layout, job_layout, message_layout
from scin.hdl.isa.plan import op_plan, paired, ranks, segments
from scin.hdl.isa.read_issuer import ReadIssuer
from scin.hdl.isa.table_manager import TableManager
from scin.hdl.isa.wave_controller import DescriptorCheck, Watchdog
from scin.hdl.isa.wave_table import WaveTable
from scin.hdl.isa.writeback import WriteBack, WriteTags
from scin.hdl.packet import FabricParams, MsgClass, Opcode, Status
from scin.sim.testbench.traffic import train_pieces
from scin.tb.stream_bench import (Sink, Source, pauses, port_value, run_bench, seeded_rng,
                                  step)


#: Stimulus modes: every stream always valid / always ready, or with idle cycles and backpressure.
MODES = ("eager", "random")


def _flit(f, data, last):
    return data | (int(last) << f.flit_width)


def _packet(f, body=(), **header):
    """The flits (integers of ``flit_layout``) of a packet."""
    body = list(body)
    flits = [_flit(f, f.pack_header(**header), not body)]
    flits += [_flit(f, d, i == len(body) - 1) for i, d in enumerate(body)]
    return flits


def _packets(f, flits):
    """Split received flits into ``(header dict, [body data])``."""
    out, cur = [], None
    mask = (1 << f.flit_width) - 1
    for flit in flits:
        data, last = flit & mask, flit >> f.flit_width
        if cur is None:
            cur = (f.unpack_header(data), [])
        else:
            cur[1].append(data)
        if last:
            out.append(cur)
            cur = None
    assert cur is None, "a packet was left unfinished"
    return out


def test_barrier_takes_a_header_every_cycle_while_acks_are_taken():
    """Arrivals back to back on one port, acknowledgements taken at once: the manager takes a
    header every cycle (an ack slot being drained in the same cycle counts as free). (`scin
    mutate` showed that a manager taking a header only every other cycle passed every test.)"""
    p = IsaParams(sync_resources=4)
    f = p.fabric
    dut = BarrierManager(p)
    src = Source(dut.req[0])
    for k in range(6):
        src.queue += _packet(f, opcode=Opcode.ATOMIC_ADD, msg_class=MsgClass.REQ, inc=1, src=0,
                             length=1, tag=k, addr=k % 4)
    acks = [Sink(dut.ack[i]) for i in range(f.ports)]

    async def bench(ctx):
        taken = []
        for _ in range(10):
            taken += await step(ctx, [src], acks)
        first = taken.index(True)
        assert taken[first:first + 6] == [True] * 6, taken
        assert len(acks[0].got) == 6

    run_bench(dut, bench)


# -- barrier manager ------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_barrier_completes_exactly_when_every_participant_arrived(mode):
    rng = seeded_rng("barrier", mode)
    p = IsaParams(sync_resources=5)             # not a power of two: resources 5-7 do not exist
    f = p.fabric
    dut = BarrierManager(p)
    idle, stall = pauses(mode)
    srcs = [Source(dut.req[i], rng, idle) for i in range(f.ports)]
    acks = [Sink(dut.ack[i], rng, stall) for i in range(f.ports)]
    sync, mask = 2, 0b1011
    arrived = [0] * 8
    generation = [0] * 8
    count = dict(dup=0, bad_arrivals=0, bad_requests=0)
    expected_acks = [[] for _ in range(f.ports)]
    pending = [[] for _ in range(f.ports)]       # what each queued packet does, per port
    in_body = [False] * f.ports

    def arrive(port, resource, tag):
        srcs[port].queue += _packet(f, opcode=Opcode.ATOMIC_ADD, msg_class=MsgClass.REQ, inc=1,
                                    src=port, length=1, tag=tag, addr=resource)
        pending[port].append(("arrive", resource, tag))

    def other(port, body):
        srcs[port].queue += _packet(f, body, opcode=Opcode.WRITE if body else Opcode.READ,
                                    msg_class=MsgClass.REQ, inc=1, src=port, length=32, tag=7)
        pending[port].append(("other",))

    async def run_until_drained(ctx, consume=False):
        for _ in range(400):
            ctx.set(dut.query.sync, sync)
            ctx.set(dut.query.mask, mask)
            ctx.set(dut.query.consume, 0)
            for s in srcs + acks:
                s.drive(ctx)
            # Combinational: complete exactly when every participant's bit is set.
            assert ctx.get(dut.query.complete) == ((arrived[sync] & mask) == mask)
            assert ctx.get(dut.query.generation) == generation[sync]
            if consume and ctx.get(dut.query.complete):
                ctx.set(dut.query.consume, 1)
                consume = False
                arrived[sync] &= ~mask
                generation[sync] += 1
            heads = 0
            for i, s in enumerate(srcs):
                head = not in_body[i]
                if not s.sample(ctx):
                    continue
                last = s.taken_last
                in_body[i] = not last
                if head:
                    heads += 1
                    what = pending[i][0]
                    if what[0] == "arrive":
                        _, resource, tag = what
                        if resource < p.sync_resources:
                            count["dup"] += arrived[resource] >> i & 1
                            arrived[resource] |= 1 << i
                            expected_acks[i].append((Status.OK, tag))
                        else:
                            count["bad_arrivals"] += 1
                            expected_acks[i].append((Status.DECERR, tag))
                    else:
                        count["bad_requests"] += 1
                if last:
                    pending[i].pop(0)
            assert heads <= 1                        # one header per cycle, round robin
            for s in acks:
                s.sample(ctx)
            await ctx.tick()
            if all(s.empty for s in srcs) and not consume and \
                    all(len(a.got) == len(e) for a, e in zip(acks, expected_acks)):
                return
        raise AssertionError("the barrier manager stopped answering")

    async def bench(ctx):
        arrive(0, sync, 1)
        arrive(1, sync, 2)
        arrive(0, sync, 3)                       # a duplicate: must not complete the barrier
        arrive(2, 7, 4)                          # no such resource: DECERR
        arrive(2, 4, 5)                          # another resource
        other(1, [])                             # a READ: dropped, counted, not answered
        other(3, [0x55, 0x66])                   # a WRITE with a body: one bad request
        await run_until_drained(ctx)
        assert not ctx.get(dut.query.complete)
        arrive(3, sync, 6)                       # the last participant
        await run_until_drained(ctx)
        assert ctx.get(dut.query.complete)
        await run_until_drained(ctx, consume=True)
        assert ctx.get(dut.query.generation) == 1 and not ctx.get(dut.query.complete)
        for port in (3, 1, 0):                   # the next generation, in another order
            arrive(port, sync, 8 + port)
        await run_until_drained(ctx)
        assert ctx.get(dut.query.complete)
        c = dut.counters
        assert ctx.get(c.dup_arrivals) == count["dup"] == 1
        assert ctx.get(c.bad_arrivals) == count["bad_arrivals"] == 1
        assert ctx.get(c.bad_requests) == count["bad_requests"] == 2
        for i in range(f.ports):
            got = [f.unpack_header(flit & ((1 << f.flit_width) - 1)) for flit in acks[i].got]
            assert all(flit >> f.flit_width for flit in acks[i].got)      # header only
            assert [(Status(h["status"]), h["tag"]) for h in got] == expected_acks[i]
            for h in got:
                assert (h["opcode"], h["msg_class"], h["inc"], h["src"], h["dst"]) == \
                    (Opcode.WRITE_RESP.value, MsgClass.WRESP.value, 1, i, i)

    run_bench(dut, bench)


# -- table manager --------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("waves", [1, 4, 8])
def test_table_manager_hands_out_slots_in_ring_order_and_frees_whole_waves(mode, waves):
    rng = seeded_rng(f"tables{waves}", mode)
    p = IsaParams(waves=waves)                   # 8 slots
    dut = TableManager(p)

    async def bench(ctx):
        free, ptr, in_wave, done, reserved = p.slots, 0, 0, 0, 0
        for cycle in range(600):
            take = mode == "eager" or rng.random() < 0.6
            release = reserved > 0 and (mode == "eager" or rng.random() < 0.5)
            end = release and rng.random() < 0.15
            flush = cycle in (300, 301)
            ctx.set(dut.alloc.ready, take)
            ctx.set(dut.release.release, release)
            ctx.set(dut.release.end, end)
            ctx.set(dut.run.flush, flush)
            assert ctx.get(dut.free) == free
            assert ctx.get(dut.alloc.valid) == (free != 0)
            if free:
                assert ctx.get(dut.alloc.payload) == ptr
            assert ctx.get(dut.counters.waves) == done
            taken = take and free != 0
            freed = 0
            if release:
                reserved -= 1
                if end or in_wave + 1 == p.slots_per_wave:
                    freed, in_wave, done = in_wave + 1, 0, done + 1
                else:
                    in_wave += 1
            if taken:
                reserved += 1
                ptr = (ptr + 1) % p.slots
            free = free + freed - taken
            if flush:
                free, ptr, in_wave, reserved = p.slots, 0, 0, 0
            assert 0 <= free <= p.slots
            await ctx.tick()
        assert done > 10

    run_bench(dut, bench)


# -- read issuer ----------------------------------------------------------------------------------

def _message(p, op, dtype, mask, nbytes, *, root=0, src_addr=0, dst_addr=0, src_scale_addr=0,
             dst_scale_addr=0):
    """A ``run.msg`` dict for ``op``: its plan flags from :func:`op_plan` (in place when
    ``src_addr == dst_addr``), its root's port one-hot and, with ``gather_pairs``, its ``pair``
    flag (:func:`paired`)."""
    plan = op_plan(op, src_addr == dst_addr)
    pair = (dict(pair=int(paired(op, mask, nbytes, fabric=p.fabric, int8=dtype == DType.INT8,
                                 in_place=src_addr == dst_addr)))
            if p.gather_pairs else {})
    return dict(dtype=dtype, mask=mask, bytes=nbytes, src_addr=src_addr, dst_addr=dst_addr,
                src_scale_addr=src_scale_addr, dst_scale_addr=dst_scale_addr,
                root=1 << ranks(mask)[root], **{k: int(v) for k, v in plan._asdict().items()},
                **pair)


#: The read issuer's messages: (op, dtype, mask, bytes per rank, root, src, dst, src/dst scales).
ISSUER_MESSAGES = [
    (Op.ALLREDUCE, DType.FP16, 0b1101, 2 * 4096 + 96, 0, 0x40000, 0, 0, 0),
    # Five full pages: with read trains the first goes alone, the rest in trains.
    (Op.ALLREDUCE, DType.BF16, 0b0111, 5 * 4096, 0, 0x100000, 0x200000, 0, 0),
    (Op.ALLREDUCE, DType.INT8, 0b0110, 3 * 4096 + 128, 0, 0x80000, 0, 0x9000, 0),
    # Shards that start inside a page at the source (and, in place, at the destination).
    (Op.REDUCE_SCATTER, DType.FP16, 0b1011, 3000 + 8, 0, 0x10000, 0x20000, 0, 0),
    (Op.REDUCE_SCATTER, DType.INT8, 0b0111, 64 * 40, 0, 0x10000, 0x10000, 0x3000, 0x3000),
    (Op.ALLGATHER, DType.BF16, 0b1110, 4096 + 2048 + 32, 0, 0x30000, 0x30000, 0, 0),
    (Op.ALLGATHER, DType.INT8, 0b1001, 64 * 70, 0, 0x8000, 0x20000, 0x1000, 0x2000),
    (Op.BROADCAST, DType.FP16, 0b1111, 4096 + 64, 2, 0x5000, 0x5000, 0, 0),
    (Op.REDUCE, DType.INT8, 0b1110, 64 * 20, 1, 0x6000, 0x7000, 0x800, 0x900),
    # Whole pages in place: in pairs of ranks with gather_pairs (three ranks: two phases; two
    # ranks: one), one phase per rank without it.
    (Op.ALLGATHER, DType.FP16, 0b1011, 3 * 4096, 0, 0x40000, 0x40000, 0, 0),
    (Op.ALLGATHER, DType.BF16, 0b0110, 4096, 0, 0x8000, 0x8000, 0, 0),
]


def _read_pieces(p, hdr):
    """A request header as the per-slot READs it stands for: itself, or a READ_WAVE's slots, with
    the train's size (1 for a READ). Data: the train's pieces (cut at every ``max_payload``
    boundary of the address, tag ``+ j``), whole slots. Scales: one piece (a train's scales stay
    within a page), which the wave table spreads over the slots from the tag's, ``+ j``."""
    f = p.fabric
    if hdr["opcode"] == Opcode.READ.value:
        return [hdr], 1
    assert hdr["opcode"] == Opcode.READ_WAVE.value, hdr
    cut = train_pieces(f, hdr["addr"], hdr["length"])
    if unpack(read_tag_layout(p), hdr["tag"])["kind"] == ReadKind.SCALE.value:
        assert len(cut) == 1, hdr
        n = p.scale_bytes_per_slot
        cut = [(hdr["addr"] + j * n, n) for j in range(cut[0][1] // n)]
    else:
        assert all(n == f.max_payload for _, n in cut), hdr       # whole slots only
    return [dict(hdr, opcode=Opcode.READ.value, length=n, addr=a, tag=hdr["tag"] + j)
            for j, (a, n) in enumerate(cut)], len(cut)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("train, pairs", [(1, False), (4, False), (1, True), (4, True)])
def test_read_issuer_walks_each_operation_segment_by_segment(mode, train, pairs):
    """Every operation's segments (read set, write set, offsets, lengths: :func:`segments`), its
    arms, jobs and read requests with their tags and addresses, data and INT8 scales. With read
    trains (``read_train = 4``), a READ_WAVE stands for the READs of its slots (each armed with
    the train's issue number); without stalls trains form (eager mode checks some do). With
    ``gather_pairs`` a paired AllGather's segments read two ranks, the higher ``C`` further on."""
    rng = seeded_rng("issuer", mode)
    p = IsaParams(read_train=train, gather_pairs=pairs)
    f = p.fabric
    dut = ReadIssuer(p)
    idle, stall = pauses(mode)
    alloc = Source(dut.alloc, rng, idle)
    jobs = Sink(dut.job, rng, stall)
    reqs = [Sink(dut.req[i], rng, stall) for i in range(f.ports)]
    messages = [(op, _message(p, op, dt, mask, n, root=root, src_addr=sa, dst_addr=da,
                              src_scale_addr=ss, dst_scale_addr=ds), root)
                for op, dt, mask, n, root, sa, da, ss, ds in ISSUER_MESSAGES]

    async def bench(ctx):
        arms, next_slot = [], 5
        for _, msg, _ in messages:
            ctx.set(port_value(dut.run.msg), pack(message_layout(p), msg))
            ctx.set(dut.issue.start, 1)
            await ctx.tick()
            ctx.set(dut.issue.start, 0)
            for _ in range(4000):
                while len(alloc.queue) < 2:       # free slots, in ring order as the table manager
                    alloc.queue.append(next_slot)
                    next_slot = (next_slot + 1) % p.slots
                def probe():
                    if ctx.get(dut.arm.valid):
                        arms.append(unpack(dut.arm.payload.shape(),
                                           ctx.get(port_value(dut.arm.payload))))
                await step(ctx, [alloc], [jobs] + reqs, probe)
                if not ctx.get(dut.issue.busy) and all(r.waiting is None for r in reqs):
                    break
            else:
                raise AssertionError("the issuer never finished")
            alloc.queue.clear()
            for _ in range(8):                    # let the request queues drain
                await step(ctx, [], [jobs] + reqs)
        # Model: one job and one arm per segment, in order; reads to the segment's read set.
        issue, expect_jobs, expect_reqs = 0, [], [[] for _ in range(f.ports)]
        slots = [a["slot"] for a in arms]
        seqs = [a["seq"] for a in arms]
        if train == 1:
            assert seqs == list(range(len(arms)))
        else:       # a train's slots share its issue number
            assert all(0 <= b - a <= 1 for a, b in zip(seqs, seqs[1:])), seqs
        phases = 0
        for op, msg, root in messages:
            int8 = msg["dtype"] == DType.INT8
            segs = segments(op, msg["mask"], msg["bytes"], fabric=f, int8=int8, root=root,
                            in_place=msg["src_addr"] == msg["dst_addr"], gather_pairs=pairs)
            phases += sum(op == Op.ALLGATHER and bin(seg.rmask).count("1") == 2 for seg in segs)
            for seg in segs:
                slot, seq = slots[issue], seqs[issue]
                assert arms[issue] == dict(slot=slot, mask=seg.rmask, scales=int(int8), seq=seq)
                expect_jobs.append(dict(slot=slot, rmask=seg.rmask, wmask=seg.wmask,
                                        dst_off=seg.dst_off, bytes=seg.bytes, last=int(seg.last)))
                for i in ranks(seg.rmask):
                    hdr = dict(opcode=Opcode.READ.value, msg_class=MsgClass.REQ.value, inc=1,
                               status=0, src=i, dst=i)
                    # A pair's higher rank: its shard is C further on.
                    further = msg["bytes"] if msg.get("pair") and seg.rmask & ((1 << i) - 1) else 0
                    expect_reqs[i].append(dict(hdr, length=seg.bytes,
                                               addr=msg["src_addr"] + seg.src_off + further,
                                               tag=read_tag(p, slot, ReadKind.DATA, seq)))
                    if int8:
                        expect_reqs[i].append(dict(
                            hdr, length=seg.bytes // 32,
                            addr=msg["src_scale_addr"] + seg.src_off // 32,
                            tag=read_tag(p, slot, ReadKind.SCALE, seq)))
                issue += 1
        assert [unpack(job_layout(p), j) for j in jobs.got] == expect_jobs
        trains, scale_trains = [], False
        kind = lambda r: unpack(read_tag_layout(p), r["tag"])["kind"]
        for i in range(f.ports):
            got = _packets(f, reqs[i].got)
            assert all(not body for _, body in got)       # requests are single flits
            pieces = [_read_pieces(p, h) for h, _ in got]
            trains += [n for _, n in pieces]
            # INT8: each data request is followed by its slots' scale request, or with read
            # trains preceded by it (the scales come back first), so the data and scale READs
            # are each in segment order and every scale READ is next to its own data request.
            flat = [r for rs, _ in pieces for r in rs]
            for k in ReadKind:
                assert ([r for r in flat if kind(r) == k.value]
                        == [r for r in expect_reqs[i] if kind(r) == k.value]), f"port {i} {k}"
            heads = [h for h, _ in got]
            scale_trains |= any(kind(h) == ReadKind.SCALE.value
                                and h["opcode"] == Opcode.READ_WAVE.value for h in heads)
            for a, b in zip(heads, heads[1:]):
                data_, scale_ = (a, b) if train == 1 else (b, a)
                if kind(scale_) == ReadKind.SCALE.value:
                    tag_xor = read_tag(p, 0, ReadKind.SCALE, 0) ^ read_tag(p, 0, ReadKind.DATA, 0)
                    assert kind(data_) == ReadKind.DATA.value, (a, b)
                    assert scale_["tag"] == data_["tag"] ^ tag_xor, (a, b)
                    assert scale_["length"] == data_["length"] // 32, (a, b)
                    assert scale_["opcode"] == data_["opcode"], (a, b)
        assert ctx.get(dut.counters.slots) == issue == len(arms)
        # The paired messages' segments read two ranks (2 x 3 pages, 1 page) with gather_pairs.
        assert phases == (3 * 2 + 1 if pairs else 0), phases
        assert max(trains) <= train
        if mode == "eager":         # no stall: every run of full pages forms trains, INT8 too
            assert (max(trains) > 1) == (train > 1)
            assert scale_trains == (train > 1)

    run_bench(dut, bench)


@pytest.mark.parametrize("flush_after", [1, 3])
def test_read_issuer_stops_at_once_on_flush(flush_after):
    """``run.flush`` in the cycle after a slot is armed (an INT8 message: the issuer is about to
    queue that slot's scale READ) stops the issuer there: the scale read is not queued, nothing
    more is armed, ``busy`` drops, and the requests queued before still go out whole. (A scale
    READ let out during the flush would come back with a stale tag, and `scin mutate` showed no
    test noticed.)"""
    p = IsaParams()
    f = p.fabric
    dut = ReadIssuer(p)
    mask = 0b1011
    msg = _message(p, Op.ALLREDUCE, DType.INT8, mask, 6 * 4096)
    alloc = Source(dut.alloc)
    jobs = Sink(dut.job)
    reqs = [Sink(dut.req[i]) for i in range(f.ports)]

    async def bench(ctx):
        ctx.set(port_value(dut.run.msg), pack(message_layout(p), msg))
        ctx.set(dut.issue.start, 1)
        await ctx.tick()
        ctx.set(dut.issue.start, 0)
        alloc.queue.extend(range(p.slots))
        arms = 0
        for _ in range(200):
            armed = []
            await step(ctx, [alloc], [jobs] + reqs, lambda: armed.append(ctx.get(dut.arm.valid)))
            arms += armed[0]
            if arms == flush_after:
                break
        assert arms == flush_after
        ctx.set(dut.run.flush, 1)
        await step(ctx, [alloc], [jobs] + reqs)
        ctx.set(dut.run.flush, 0)
        for _ in range(30):
            assert not ctx.get(dut.arm.valid) and not ctx.get(dut.issue.busy)
            await step(ctx, [alloc], [jobs] + reqs)
        for i in ranks(mask):
            kinds = [h["tag"] for h, _ in _packets(f, reqs[i].got)]
            kind_of = [unpack(read_tag_layout(p), t)["kind"] for t in kinds]
            data = [t for t, k in zip(kinds, kind_of) if k == ReadKind.DATA.value]
            scale = [t for t, k in zip(kinds, kind_of) if k == ReadKind.SCALE.value]
            assert (len(data), len(scale)) == (flush_after, flush_after - 1), f"port {i}"
        assert len(jobs.got) == flush_after

    run_bench(dut, bench)


def test_read_issuer_counts_each_cycle_without_a_free_slot_once():
    """``stall_slot`` counts the cycles the issuer waits for a free slot, one per cycle (the
    figure docs/PERFORMANCE.md explains the wave regulation with). (`scin mutate` showed the
    count was unchecked.)"""
    p = IsaParams()
    dut = ReadIssuer(p)
    msg = _message(p, Op.ALLREDUCE, DType.FP16, 0b0011, 4096)

    async def bench(ctx):
        for i in range(p.fabric.ports):
            ctx.set(dut.req[i].ready, 1)
        ctx.set(dut.job.ready, 1)
        ctx.set(port_value(dut.run.msg), pack(message_layout(p), msg))
        ctx.set(dut.issue.start, 1)
        await ctx.tick()
        ctx.set(dut.issue.start, 0)
        for _ in range(7):                      # no free slot for 7 cycles
            await ctx.tick()
        assert ctx.get(dut.counters.stall_slot) == 7
        ctx.set(dut.alloc.valid, 1)
        ctx.set(dut.alloc.payload, 3)
        await ctx.tick()
        ctx.set(dut.alloc.valid, 0)
        assert ctx.get(dut.counters.stall_slot) == 7 and ctx.get(dut.counters.slots) == 1

    run_bench(dut, bench)


def test_segments_cross_no_page_and_cover_each_shard_once():
    """The plan's twin itself: every segment stays inside one 4 KiB page at both ends (INT8: its
    scales inside one flit at both ends), and each phase covers its shard exactly once."""
    f = FabricParams()
    rng = random.Random(7)
    for _ in range(300):
        op = rng.choice([Op.ALLREDUCE, Op.REDUCE_SCATTER, Op.ALLGATHER, Op.BROADCAST, Op.REDUCE])
        int8 = rng.random() < 0.5
        mask = rng.randrange(1, 16)
        nbytes = rng.randrange(1, 400) * (64 if int8 else 32)
        n = len(ranks(mask))
        segs = segments(op, mask, nbytes, fabric=f, int8=int8, root=rng.randrange(n),
                        in_place=rng.random() < 0.5)
        assert [s.last for s in segs].count(True) == 1 and segs[-1].last
        assert sum(s.bytes for s in segs) == nbytes * (n if op in (Op.REDUCE_SCATTER,
                                                                   Op.ALLGATHER) else 1)
        for s in segs:
            for off in (s.src_off, s.dst_off):
                assert off // 4096 == (off + s.bytes - 1) // 4096
                if int8:
                    assert (off % 1024 == 0) or (off // 1024 == (off + s.bytes - 1) // 1024)


# -- wave table -----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_wave_table_stores_expected_responses_and_drops_stale_tags(mode):
    rng = seeded_rng("wave_table", mode)
    p = IsaParams()
    f = p.fabric
    dut = WaveTable(p)
    idle, _ = pauses(mode)
    srcs = [Source(dut.rdata[i], rng, idle) for i in range(f.ports)]
    slot, seq, mask = 2, 5, 0b0101
    data = {i: [rng.getrandbits(f.flit_width) for _ in range(3)] for i in range(f.ports)}

    accept = [[] for _ in range(f.ports)]       # per queued flit: is it stored?

    def resp(port, body, kind=ReadKind.DATA, tag_seq=seq, tag_slot=slot, opcode=Opcode.READ_RESP,
             status=Status.OK, stored=True):
        srcs[port].queue += _packet(f, body, opcode=opcode, msg_class=MsgClass.RDATA, inc=1,
                                    status=status, src=port, length=32 * len(body),
                                    tag=read_tag(p, tag_slot, kind, tag_seq))
        accept[port] += [stored] * (1 + len(body))

    async def drain(ctx):
        """Send what is queued; ``progress`` must pulse exactly in the cycles in which some port's
        flit is stored. Returns the number of flits stored."""
        stored = 0
        for _ in range(200):
            for s in srcs:
                s.drive(ctx)
            now = [s.cur is not None and accept[i][0] for i, s in enumerate(srcs)]
            assert ctx.get(dut.status.progress) == any(now)
            stored += sum(now)
            for i, s in enumerate(srcs):
                assert ctx.get(s.s.ready)             # a wave table never pushes back
                if s.sample(ctx):
                    accept[i].pop(0)
            await ctx.tick()
            if all(s.empty for s in srcs):
                for s in srcs:
                    s.drive(ctx)                      # valid low again
                return stored
        raise AssertionError("responses were not taken")

    async def read(ctx, flit, scale_flit=0):
        ctx.set(dut.rd.slot, slot)
        ctx.set(dut.rd.flit, flit)
        ctx.set(dut.rd.scale_flit, scale_flit)
        ctx.set(dut.rd.en, 1)
        await ctx.tick()
        ctx.set(dut.rd.en, 0)
        return ([ctx.get(dut.rd.data[i]) for i in range(f.ports)],
                [ctx.get(dut.rd.scale[i]) for i in range(f.ports)])

    async def bench(ctx):
        ctx.set(dut.rd.slot, slot)
        ctx.set(port_value(dut.arm.payload), pack(dut.arm.payload.shape(),
                                              dict(slot=slot, mask=mask, scales=1, seq=seq)))
        ctx.set(dut.arm.valid, 1)
        await ctx.tick()
        ctx.set(dut.arm.valid, 0)
        assert [ctx.get(dut.rd.avail[i]) for i in range(f.ports)] == \
            [0, p.slot_flits, 0, p.slot_flits]
        assert ctx.get(dut.rd.scales_done) == 0b1010          # nothing expected from ports 1, 3
        # Port 0's data arrives one flit at a time: avail follows it (cut-through).
        resp(0, data[0])
        assert await drain(ctx) == 4
        assert ctx.get(dut.rd.avail[0]) == p.slot_flits        # ended: never stalls the feeder
        # Dropped whole and counted: a duplicate, a stale issue number, a port outside the mask
        # (data, and scales: `scin mutate` showed the scales' case untested), another opcode,
        # another slot.
        resp(0, [1, 2], stored=False)
        resp(2, [3], tag_seq=seq - 1, stored=False)
        resp(1, [4], stored=False)
        resp(3, [7], kind=ReadKind.SCALE, stored=False)
        resp(2, [5], opcode=Opcode.WRITE_RESP, stored=False)
        resp(2, [6], tag_slot=slot + 1, stored=False)
        assert await drain(ctx) == 0
        assert ctx.get(dut.counters.unknown_tags) == 6
        assert ctx.get(dut.rd.avail[2]) == 0
        assert not ctx.get(dut.status.error)
        # Port 2's data with an error status: stored, and the sticky error is set.
        resp(2, data[2], status=Status.SLVERR)
        resp(0, [0xA0], kind=ReadKind.SCALE)
        resp(2, [0xA2], kind=ReadKind.SCALE)
        assert await drain(ctx) == 8
        assert ctx.get(dut.status.error)
        assert ctx.get(dut.rd.scales_done) == 0b1111
        for k in range(3):
            got, scale = await read(ctx, k)
            assert got[0] == data[0][k] and got[2] == data[2][k]
        assert scale[0] == 0xA0 and scale[2] == 0xA2
        # The read port holds while en is low.
        await ctx.tick()
        assert ctx.get(dut.rd.data[0]) == data[0][2]
        ctx.set(dut.run.clear_error, 1)
        await ctx.tick()
        ctx.set(dut.run.clear_error, 0)
        assert not ctx.get(dut.status.error)
        # A flush disarms the slot: a response that was expected is now dropped.
        ctx.set(port_value(dut.arm.payload), pack(dut.arm.payload.shape(),
                                              dict(slot=slot, mask=0b0001, scales=0, seq=seq + 1)))
        ctx.set(dut.arm.valid, 1)
        await ctx.tick()
        ctx.set(dut.arm.valid, 0)
        ctx.set(dut.run.flush, 1)
        await ctx.tick()
        ctx.set(dut.run.flush, 0)
        resp(0, [7], tag_seq=seq + 1, stored=False)
        assert await drain(ctx) == 0
        assert ctx.get(dut.counters.unknown_tags) == 7

    run_bench(dut, bench)



def test_wave_table_rearm_drops_the_rest_of_an_overlong_response():
    """A response longer than a slot (a faulty endpoint) must not end the slot's next use. The
    feeder takes a slot as complete at a slot's worth of flits and the issuer may re-arm it while
    the tail is still coming; were the tail's ``last`` to end the new use before its own response
    came, the feeder would reduce stale data. The wave table's formal harness covers the same case
    (docs/VERIFICATION.md)."""
    p = IsaParams()
    f = p.fabric
    dut = WaveTable(p)
    sf = p.slot_flits
    slot, seq = 1, 3

    async def arm(ctx, tag_seq):
        ctx.set(port_value(dut.arm.payload), pack(dut.arm.payload.shape(),
                                              dict(slot=slot, mask=0b0001, scales=0, seq=tag_seq)))
        ctx.set(dut.arm.valid, 1)
        await ctx.tick()
        ctx.set(dut.arm.valid, 0)

    async def send(ctx, flits):
        for flit in flits:
            ctx.set(dut.rdata[0].valid, 1)
            ctx.set(port_value(dut.rdata[0].payload), flit)
            await ctx.tick()
        ctx.set(dut.rdata[0].valid, 0)

    async def bench(ctx):
        ctx.set(dut.rd.slot, slot)
        await arm(ctx, seq)
        assert ctx.get(dut.rd.avail[0]) == 0
        # A slot's worth of data flits and two more, the last two held back.
        flits = _packet(f, list(range(1, sf + 3)), opcode=Opcode.READ_RESP,
                        msg_class=MsgClass.RDATA, inc=1, src=0, length=f.max_payload,
                        tag=read_tag(p, slot, ReadKind.DATA, seq))
        await send(ctx, flits[:1 + sf])
        assert ctx.get(dut.rd.avail[0]) == sf          # the feeder may take the slot now
        await arm(ctx, seq + 1)                         # ... and the issuer re-arm it
        assert ctx.get(dut.rd.avail[0]) == 0
        await send(ctx, flits[1 + sf:])                 # the tail, `last` included
        assert ctx.get(dut.rd.avail[0]) == 0, "the old response's tail ended the new use"
        # The new use's own response fills and ends it.
        await send(ctx, _packet(f, [7, 8], opcode=Opcode.READ_RESP, msg_class=MsgClass.RDATA,
                                inc=1, src=0, length=2 * f.flit_bytes,
                                tag=read_tag(p, slot, ReadKind.DATA, seq + 1)))
        assert ctx.get(dut.rd.avail[0]) == sf
        assert ctx.get(dut.counters.unknown_tags) == 0

    run_bench(dut, bench)


# -- feeder ---------------------------------------------------------------------------------------

def _pattern(slot, flit, port):
    return (slot << 40) | (flit << 8) | port | 0x5A << 56


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [DType.FP16, DType.INT8])
def test_feeder_cuts_through_only_arrived_flits(mode, dtype):
    rng = seeded_rng(f"feeder{dtype.name}", mode)
    p = IsaParams()
    f = p.fabric
    dut = Feeder(p)
    idle, stall = pauses(mode)
    jobs_in = Source(dut.job, rng, idle)
    wb_jobs = Sink(dut.wb_job, rng, stall)
    out = Sink(dut.dp, rng, stall)
    # Each job reads its own set (an AllGather's phases): the flits of one job must not be
    # zeroed by the next job's set while they wait on the output.
    job = lambda slot, rmask, nbytes, last: dict(slot=slot, rmask=rmask, wmask=0b0110,
                                                 dst_off=64 * slot, bytes=nbytes, last=last)
    jobs = [job(3, 0b1011, 512, 0), job(4, 0b0010, 256, 0), job(5, 0b1000, 96, 0),
            job(6, 0b1101, 64, 1)]
    rmask_of = {j["slot"]: j["rmask"] for j in jobs}
    jobs_in.queue = [pack(job_layout(p), j) for j in jobs]
    block_flits = 64 * 8 // f.flit_width

    async def bench(ctx):
        ctx.set(dut.run.msg.dtype, dtype)
        arrived = {}                                  # (slot, port) -> flits arrived
        scales = {}
        releases = []
        for _ in range(3000):
            # The wave tables' progress: flits trickle in per port, scales at some point.
            for i in range(f.ports):
                for j in jobs:
                    key = (j["slot"], i)
                    if rng.random() < 0.5:
                        arrived[key] = min(p.slot_flits, arrived.get(key, 0) + 1)
                    if rng.random() < 0.05:
                        scales[key] = 1
            rd_slot = ctx.get(dut.rd.slot)
            for i in range(f.ports):
                ctx.set(dut.rd.avail[i], arrived.get((rd_slot, i), 0))
            ctx.set(dut.rd.scales_done,
                    sum(scales.get((rd_slot, i), 0) << i for i in range(f.ports)))
            for s in (jobs_in, wb_jobs, out):
                s.drive(ctx)
            en, flit = ctx.get(dut.rd.en), ctx.get(dut.rd.flit)
            scale_flit = ctx.get(dut.rd.scale_flit)
            if en:
                # A flit is read only once every participant's flit (and INT8 scales) is there.
                for i in range(f.ports):
                    if rmask_of[rd_slot] >> i & 1:
                        assert arrived.get((rd_slot, i), 0) > flit
                        if dtype == DType.INT8:
                            assert scales.get((rd_slot, i))
            if ctx.get(dut.release.release):
                releases.append((rd_slot, ctx.get(dut.release.end)))
            jobs_in.sample(ctx)
            wb_jobs.sample(ctx)
            out.sample(ctx)
            await ctx.tick()
            if en:                                    # a synchronous read port
                for i in range(f.ports):
                    ctx.set(dut.rd.data[i], _pattern(rd_slot, flit, i))
                    ctx.set(dut.rd.scale[i], sum((scale_flit * 16 + lane + i) << (16 * lane)
                                                 for lane in range(f.flit_width // 16)))
            if len(releases) == len(jobs) and out.waiting is None and not ctx.get(dut.dp.valid):
                break
        else:
            raise AssertionError("the feeder did not finish")
        assert [unpack(job_layout(p), j) for j in wb_jobs.got] == jobs
        assert releases == [(j["slot"], j["last"]) for j in jobs]
        layout = dut.dp.payload.shape()
        flits = [unpack(layout, v, nested=True) for v in out.got]
        expect = []
        for j in jobs:
            n = -(-j["bytes"] // f.flit_bytes)
            mask = j["rmask"]
            one = min(i for i in range(f.ports) if mask >> i & 1)   # the copy source
            for k in range(n):
                block = k // block_flits
                sf, lane = block // (f.flit_width // 16), block % (f.flit_width // 16)
                expect.append(dict(
                    flit=dict(
                        dtype=dtype.value, last=int(k == n - 1),
                        data=[_pattern(j["slot"], k, i) if mask >> i & 1 else 0
                              for i in range(f.ports)],
                        scale=[(sf * 16 + lane + i) & 0xFFFF if mask >> i & 1 else 0
                               for i in range(f.ports)]),
                    one=dict(data=_pattern(j["slot"], k, one),
                             scale=(sf * 16 + lane + one) & 0xFFFF)))
        assert flits == expect

    run_bench(dut, bench)


def _feeder_all_arrived(ctx, dut, p):
    """An FP16 message whose every flit has arrived at every port, and a write-back that takes
    jobs at once: the feeder is limited by nothing but its own logic."""
    ctx.set(dut.run.msg.dtype, DType.FP16)
    for i in range(p.fabric.ports):
        ctx.set(dut.rd.avail[i], p.slot_flits)
    ctx.set(dut.wb_job.ready, 1)


def test_feeder_streams_slots_back_to_back():
    """With every flit arrived and nothing stalling, the feeder gives a flit every cycle across
    jobs: it takes the next job in the cycle it reads the last flit of the current one. (A copied
    slot has no datapath between it and the write-back, so a cycle lost here is a cycle a slot.)"""
    p = IsaParams()
    f = p.fabric
    dut = Feeder(p)
    jobs = [dict(slot=s, rmask=0b0010, wmask=0b1111, dst_off=128 * s, bytes=128, last=int(s == 5))
            for s in range(6)]

    async def bench(ctx):
        _feeder_all_arrived(ctx, dut, p)
        ctx.set(dut.dp.ready, 1)
        queue, valid = list(jobs), []
        for _ in range(40):
            ctx.set(dut.job.valid, bool(queue))
            if queue:
                ctx.set(port_value(dut.job.payload), pack(job_layout(p), queue[0]))
            taken = queue and ctx.get(dut.job.ready)
            valid.append(ctx.get(dut.dp.valid))
            await ctx.tick()
            if taken:
                queue.pop(0)
        first = valid.index(1)
        flits = len(jobs) * 128 // f.flit_bytes
        assert valid[first:first + flits] == [1] * flits, valid
        assert not any(valid[first + flits:])

    run_bench(dut, bench)


@pytest.mark.parametrize("when", ["idle", "last_flit"])
def test_feeder_takes_no_job_while_flushing(when):
    """``run.flush`` high: no job is taken and none passed to the write-back, whether the feeder
    is idle or reading a job's last flit (when it would otherwise take the next job in the same
    cycle); once flush drops, the offered job is taken. (`scin mutate` showed that a feeder
    taking a job during a flush passed every test.)"""
    p = IsaParams()
    f = p.fabric
    dut = Feeder(p)
    job = dict(slot=0, rmask=0b0011, wmask=0b1111, dst_off=0, bytes=2 * f.flit_bytes, last=0)

    async def offer(ctx, payload):
        ctx.set(dut.job.valid, 1)
        ctx.set(port_value(dut.job.payload), pack(job_layout(p), payload))

    async def bench(ctx):
        _feeder_all_arrived(ctx, dut, p)
        ctx.set(dut.dp.ready, 1)
        if when == "last_flit":
            await offer(ctx, job)
            await ctx.tick()                    # job 0 taken; its flit 0 is read next cycle
            await offer(ctx, dict(job, slot=1))
            await ctx.tick()                    # flit 0 read; now reading the last flit
        else:
            await offer(ctx, job)
        ctx.set(dut.run.flush, 1)
        for _ in range(3):
            assert not ctx.get(dut.job.ready) and not ctx.get(dut.wb_job.valid)
            await ctx.tick()
        ctx.set(dut.run.flush, 0)
        assert ctx.get(dut.job.ready) and ctx.get(dut.wb_job.valid)

    run_bench(dut, bench)


def test_feeder_offers_a_flit_without_waiting_for_ready():
    """A stream source must not wait for ``ready`` before raising ``valid`` (the stream rule that
    keeps two blocks that each wait for the other from deadlocking): with the datapath not ready
    and the flits arrived, the feeder loads its output register and offers the flit. (`scin
    mutate` showed that a feeder waiting for ``dp.ready`` passed every test.)"""
    p = IsaParams()
    f = p.fabric
    dut = Feeder(p)
    job = dict(slot=0, rmask=0b0101, wmask=0b1111, dst_off=0, bytes=4 * f.flit_bytes, last=1)

    async def bench(ctx):
        _feeder_all_arrived(ctx, dut, p)
        ctx.set(dut.dp.ready, 0)
        ctx.set(dut.job.valid, 1)
        ctx.set(port_value(dut.job.payload), pack(job_layout(p), job))
        await ctx.tick()
        ctx.set(dut.job.valid, 0)
        for _ in range(4):
            await ctx.tick()
        assert ctx.get(dut.dp.valid), "the feeder waits for dp.ready before offering a flit"

    run_bench(dut, bench)


# -- write-back: write tags -----------------------------------------------------------------------

def test_write_tags_accept_only_current_responses():
    p = IsaParams()
    f = p.fabric
    dut = WriteTags(p)
    mask = 0b0111

    async def wresp(ctx, port, tag, opcode=Opcode.WRITE_RESP, status=Status.OK):
        ctx.set(dut.wresp[port].valid, 1)
        ctx.set(port_value(dut.wresp[port].payload),
                _flit(f, f.pack_header(opcode=opcode, msg_class=MsgClass.WRESP, inc=1,
                                       status=status, src=port, tag=tag), 1))
        assert ctx.get(dut.wresp[port].ready)
        progress = ctx.get(dut.progress)
        await ctx.tick()
        ctx.set(dut.wresp[port].valid, 0)
        return progress

    async def start(ctx):
        assert ctx.get(dut.free)
        tag = ctx.get(port_value(dut.tag))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        return tag

    async def bench(ctx):
        ctx.set(dut.mask, mask)
        tags = [await start(ctx) for _ in range(32)]
        assert tags == [write_tag(p, n) for n in range(32)]
        assert ctx.get(dut.outstanding) and not ctx.get(dut.free)   # every entry taken
        # Port 3 is not in the mask; a wrong opcode; a tag not sent yet (next round).
        assert not await wresp(ctx, 3, tags[0])
        assert not await wresp(ctx, 0, tags[0], opcode=Opcode.READ_RESP)
        assert not await wresp(ctx, 0, write_tag(p, 32))
        assert ctx.get(dut.counters.unknown_wresps) == 3
        assert await wresp(ctx, 0, tags[0])
        assert not ctx.get(dut.free)                  # ports 1 and 2 still wait for entry 0
        assert not await wresp(ctx, 0, tags[0])       # a duplicate
        assert await wresp(ctx, 1, tags[0])
        assert await wresp(ctx, 2, tags[0], status=Status.SLVERR)
        assert ctx.get(dut.error) and ctx.get(dut.free)
        assert ctx.get(dut.counters.unknown_wresps) == 4
        # The next write reuses entry 0 in the next round: the old tag is now stale.
        tag32 = await start(ctx)
        assert tag32 == write_tag(p, 32) and tag32 != tags[0]
        assert not await wresp(ctx, 0, tags[0])
        assert await wresp(ctx, 0, tag32)
        ctx.set(dut.clear_error, 1)
        await ctx.tick()
        ctx.set(dut.clear_error, 0)
        assert not ctx.get(dut.error)
        # A flush frees every entry and accepts nothing meanwhile.
        ctx.set(dut.flush, 1)
        assert not await wresp(ctx, 1, tags[1])
        ctx.set(dut.flush, 0)
        assert not ctx.get(dut.outstanding)
        assert not await wresp(ctx, 1, tags[1])       # late: its entry was freed by the abort
        assert ctx.get(dut.counters.unknown_wresps) == 7

    run_bench(dut, bench)


def test_write_tags_never_reuse_an_entry_a_port_outside_the_mask_still_owes():
    """An entry is free only when no port at all still owes its response: were ``free``
    checked only at the ports of the next write's mask, a write to port 0 alone would reuse
    entry 0 while port 1 still owed the write before it; port 1's correct response would then
    carry the previous round's ``seq``, be dropped as unknown, and its entry stay outstanding
    until the watchdog. Too deep for the write tags' bounded proof (33 writes)."""
    p = IsaParams()
    f = p.fabric
    dut = WriteTags(p)

    async def step(ctx, start=0, port=None, tag=None):
        ctx.set(dut.start, start)
        if port is not None:
            ctx.set(dut.wresp[port].valid, 1)
            ctx.set(port_value(dut.wresp[port].payload),
                    _flit(f, f.pack_header(opcode=Opcode.WRITE_RESP, msg_class=MsgClass.WRESP,
                                           inc=1, src=port, tag=tag), 1))
        progress = ctx.get(dut.progress)
        await ctx.tick()
        ctx.set(dut.start, 0)
        if port is not None:
            ctx.set(dut.wresp[port].valid, 0)
        return progress

    async def bench(ctx):
        ctx.set(dut.mask, 0b11)
        tag0 = ctx.get(port_value(dut.tag))
        await step(ctx, start=1)                        # write 0 to ports 0 and 1
        assert await step(ctx, port=0, tag=tag0)       # port 0 answers; port 1 still owes it
        ctx.set(dut.mask, 0b01)
        for n in range(1, 32):                          # writes 1..31 to port 0 alone
            assert ctx.get(dut.free)
            tag = ctx.get(port_value(dut.tag))
            await step(ctx, start=1)
            assert await step(ctx, port=0, tag=tag)
        # Entry 0 comes round again: port 1 still owes write 0, so it is not free.
        assert ctx.get(port_value(dut.tag)) == write_tag(p, 32)
        assert not ctx.get(dut.free)
        assert await step(ctx, port=1, tag=tag0)       # accepted, not counted as unknown
        assert ctx.get(dut.free)
        assert ctx.get(dut.counters.unknown_wresps) == 0
        assert not ctx.get(dut.outstanding)

    run_bench(dut, bench)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [DType.FP16, DType.INT8])
@pytest.mark.parametrize("train", [1, 2])
def test_write_back_multicasts_results_scales_and_flags(mode, dtype, train):
    """Results, INT8 scales and flags to each job's write set, in order, with write tags. With
    write trains (``write_train = 2``) only the last packet of every second slot and of the
    message's last slot is a WRITE (acknowledged, with a tag of the sequence); the rest are
    WRITE_POSTEDs, which take no tag."""
    rng = seeded_rng(f"writeback{dtype.name}", mode)
    p = IsaParams(write_train=train)
    f = p.fabric
    dut = WriteBack(p)
    idle, stall = pauses(mode)
    msg = dict(dtype=dtype, mask=0b1101, bytes=0, src_addr=0, src_scale_addr=0,
               dst_addr=0x100000, dst_scale_addr=0x200000)
    # Each job writes its own set at its own offset (a ReduceScatter's phases), the last one to
    # no port at all (an in-place AllGather of one participant).
    jobs = [dict(slot=1, rmask=0b1101, wmask=0b1101, dst_off=0, bytes=256, last=0),
            dict(slot=2, rmask=0b1101, wmask=0b0100, dst_off=5 * 1024, bytes=128, last=0),
            dict(slot=3, rmask=0b0001, wmask=0b0000, dst_off=64, bytes=64, last=1)]
    job_src = Source(dut.job, rng, idle)
    job_src.queue = [pack(job_layout(p), j) for j in jobs]
    flag_src = Source(dut.flag, rng, idle)
    dp = Source(dut.dp, rng, idle)
    wr = [Sink(dut.wr[i], rng, stall) for i in range(f.ports)]
    block_flits = 64 * 8 // f.flit_width
    expect = [[] for _ in range(f.ports)]             # per port, per packet: (addr, length, body)
    for n_job, j in enumerate(jobs):
        n = j["bytes"] // f.flit_bytes
        data = [rng.getrandbits(f.flit_width) for _ in range(n)]
        scales = [rng.getrandbits(16) for _ in range(n // block_flits)]
        for k, d in enumerate(data):
            dp.queue.append(pack(dut.dp.payload.shape(), dtype=dtype, data=d, last=int(k == n - 1),
                                 scale=scales[k // block_flits] if k % block_flits == 0 else 0,
                                 status=1 if (n_job, k) == (1, 2) else 0))
        acked = j["last"] or (n_job + 1) % train == 0       # the slot's last packet
        int8 = dtype == DType.INT8
        for i in ranks(j["wmask"]):
            expect[i].append((msg["dst_addr"] + j["dst_off"], j["bytes"], data,
                              acked and not (int8 and train > 1)))
            if int8:
                word = sum(sc << (16 * b) for b, sc in enumerate(scales))
                expect[i].append((msg["dst_scale_addr"] + j["dst_off"] // 32,
                                  len(scales) * 2, [word], acked))
    flag = dict(mask=0b0011, addr=0x3000, word=dict(generation=7, status=2))
    flag_word = pack(flag_request_layout(p)["word"].shape, flag["word"])

    async def bench(ctx):
        ctx.set(port_value(dut.run.msg), pack(message_layout(p), msg))
        slot_done, msg_done = [], []

        def probe():
            slot_done.append(ctx.get(dut.status.slot_done))
            msg_done.append(ctx.get(dut.status.msg_done))
        for cycle in range(2000):
            if cycle == 5:
                flag_src.queue.append(pack(flag_request_layout(p), flag))
            await step(ctx, [job_src, flag_src, dp], wr, probe)
            if all(s.empty for s in (job_src, flag_src, dp)) and not ctx.get(dut.status.busy) \
                    and all(w.waiting is None for w in wr) and cycle > 10:
                break
        for _ in range(8):
            await step(ctx, [], wr)
        assert sum(slot_done) == len(jobs)                # one pulse per slot's last flit
        assert sum(msg_done) == 1 and msg_done.index(1) == len(slot_done) - 1 - \
            slot_done[::-1].index(1)                      # ... and one on the last slot's
        assert ctx.get(dut.status.status) == 1            # the OR of the datapath's flags
        assert ctx.get(dut.status.outstanding)            # nothing acknowledged yet
        for i in range(f.ports):
            got = _packets(f, wr[i].got)
            want = list(expect[i])
            # The flag goes behind whatever was queued when it was taken: after the first job
            # at the earliest (the write-back takes a job before a flag when both wait).
            if flag["mask"] >> i & 1:
                at = next(n for n, (h, _) in enumerate(got) if h["addr"] == flag["addr"])
                want.insert(at, (flag["addr"], 4, [flag_word], True))
            write = lambda acked: (Opcode.WRITE if acked else Opcode.WRITE_POSTED).value
            assert [(h["addr"], h["length"], body, h["opcode"]) for h, body in got] == \
                [(a, n, body, write(acked)) for a, n, body, acked in want], f"port {i}"
            for n, (h, _) in enumerate(got):
                assert (h["msg_class"], h["inc"], h["src"], h["dst"]) == \
                    (MsgClass.WRITE.value, 1, i, i)
            # One write sequence for results, scales and flags: tags in order at every port.
            tags = [h["tag"] for h, _ in got if h["opcode"] == Opcode.WRITE.value]
            assert tags == sorted(tags) and len(set(tags)) == len(tags)
        # Every acknowledged packet takes the next tag, one sent to no port too (never seen).
        per_job = [1 + (dtype == DType.INT8 and train == 1) if j["last"] or (k + 1) % train == 0
                   else 0 for k, j in enumerate(jobs)]
        total = sum(per_job) + 1
        unseen = sum(n for n, j in zip(per_job, jobs) if not j["wmask"])
        every = sorted({h["tag"] for w in wr for h, _ in _packets(f, w.got)
                        if h["opcode"] == Opcode.WRITE.value})
        assert set(every) <= {write_tag(p, n) for n in range(total)}
        assert len(every) == total - unseen

    run_bench(dut, bench)


@pytest.mark.parametrize("delay", [0, 1, 2])
def test_write_back_sends_only_whole_packets_across_a_flush(delay):
    """``run.flush`` a few cycles after a job is taken, before the datapath gives a flit: every
    port receives whole packets only (a header not yet out is never sent; one that is out is
    completed with zero flits). (`scin mutate` showed that a header sent in the flush cycle itself,
    and then abandoned, passed every test: the link would carry a packet with no body.)"""
    p = IsaParams()
    f = p.fabric
    dut = WriteBack(p)
    msg = dict(dtype=DType.FP16, mask=0b0011, bytes=0, src_addr=0, src_scale_addr=0,
               dst_addr=0x100000, dst_scale_addr=0)
    job = dict(slot=1, rmask=0b0011, wmask=0b0011, dst_off=0, bytes=4 * f.flit_bytes, last=1)
    job_src = Source(dut.job)
    job_src.queue = [pack(job_layout(p), job)]
    wr = [Sink(dut.wr[i]) for i in range(f.ports)]

    async def bench(ctx):
        ctx.set(port_value(dut.run.msg), pack(message_layout(p), msg))
        while not job_src.sent:
            await step(ctx, [job_src], wr)
        for _ in range(delay):
            await step(ctx, [job_src], wr)
        ctx.set(dut.run.flush, 1)
        for _ in range(8):
            await step(ctx, [job_src], wr)
        ctx.set(dut.run.flush, 0)
        for _ in range(20):
            await step(ctx, [job_src], wr)
        assert not ctx.get(dut.status.busy)
        for i in range(f.ports):
            _whole_packets(f, wr[i].got, f"port {i}")

    run_bench(dut, bench)


def _whole_packets(f, flits, where):
    """Split ``flits`` into packets by their headers' lengths, asserting each is whole (its
    ``last`` bit on its last flit only, none cut short); returns ``[(header, body)]``."""
    flits, out = list(flits), []
    while flits:
        header = f.unpack_header(flits[0] & ((1 << f.flit_width) - 1))
        size = 1 + -(-header["length"] // f.flit_bytes)
        packet, flits = flits[:size], flits[size:]
        assert len(packet) == size, f"{where}: a packet cut short: {header}"
        lasts = [flit >> f.flit_width for flit in packet]
        assert lasts == [0] * (size - 1) + [1], f"{where}: {header}"
        out.append((header, [flit & ((1 << f.flit_width) - 1) for flit in packet[1:]]))
    return out


def test_write_back_holds_int8_scales_until_the_output_has_room():
    """An INT8 slot's result and scale packets through an output that does not drain for a long
    while: both arrive whole, the scales bit for bit. (`scin mutate` showed a scale packet
    pushed into a full output, losing flits, passed every test.)"""
    p = IsaParams()
    f = p.fabric
    dut = WriteBack(p)
    msg = dict(dtype=DType.INT8, mask=0b0001, bytes=0, src_addr=0, src_scale_addr=0,
               dst_addr=0x100000, dst_scale_addr=0x200000)
    n = 4096 // f.flit_bytes
    job = dict(slot=1, rmask=0b0001, wmask=0b0001, dst_off=0, bytes=4096, last=1)
    block_flits = 64 * 8 // f.flit_width
    scales = [0x100 + b for b in range(n // block_flits)]
    dp = Source(dut.dp)
    dp.queue = [pack(dut.dp.payload.shape(), dtype=DType.INT8, data=k, last=int(k == n - 1),
                     scale=scales[k // block_flits] if k % block_flits == 0 else 0, status=0)
                for k in range(n)]
    job_src = Source(dut.job)
    job_src.queue = [pack(job_layout(p), job)]
    wr = [Sink(dut.wr[i]) for i in range(f.ports)]

    async def bench(ctx):
        ctx.set(port_value(dut.run.msg), pack(message_layout(p), msg))
        wr[0].rng = random.Random(0)
        done_at = None
        for cycle in range(1200):
            # The output blocked while the data comes, then draining until the result packet is
            # out, then blocked again while the scales come (more flits than its queue holds).
            if done_at is None and len(wr[0].got) >= 1 + n:
                done_at = cycle
            blocked = cycle < 300 or (done_at is not None and cycle < done_at + 100)
            wr[0].stall = 1.0 if blocked else 0.0
            await step(ctx, [job_src, dp], wr)
        packets = _whole_packets(f, wr[0].got, "port 0")
        assert [(h["addr"], h["length"]) for h, _ in packets] == \
            [(0x100000, 4096), (0x200000, len(scales) * 2)]
        assert packets[0][1] == list(range(n))
        word = sum(sc << (16 * b) for b, sc in enumerate(scales))
        got = sum(flit << (f.flit_width * k) for k, flit in enumerate(packets[1][1]))
        assert got == word

    run_bench(dut, bench)


def test_write_back_counts_stall_tx_only_while_data_waits():
    """``stall_tx`` counts the cycles a result flit waits for room at the output, not the cycles
    the output is full while the datapath has nothing to give. (`scin mutate` showed the count
    was unchecked.)"""
    p = IsaParams()
    f = p.fabric
    dut = WriteBack(p)
    msg = dict(dtype=DType.FP16, mask=0b0001, bytes=0, src_addr=0, src_scale_addr=0,
               dst_addr=0x100000, dst_scale_addr=0)
    job = dict(slot=1, rmask=0b0001, wmask=0b0001, dst_off=0, bytes=4096, last=1)

    async def bench(ctx):
        ctx.set(port_value(dut.run.msg), pack(message_layout(p), msg))
        for i in range(f.ports):
            ctx.set(dut.wr[i].ready, 0)               # the output never drains
        ctx.set(dut.job.valid, 1)
        ctx.set(port_value(dut.job.payload), pack(job_layout(p), job))
        await ctx.tick()
        ctx.set(dut.job.valid, 0)
        ctx.set(dut.dp.valid, 1)
        ctx.set(port_value(dut.dp.payload), pack(dut.dp.payload.shape(), dtype=DType.FP16, data=5,
                                              last=0, scale=0, status=0))
        pushed = 0
        for _ in range(200):                          # fill the output queue
            ready = ctx.get(dut.dp.ready)
            if pushed and not ready:
                break
            pushed += ready
            await ctx.tick()
        assert not ctx.get(dut.dp.ready), "the output queue never filled"
        ctx.set(dut.dp.valid, 0)
        before = ctx.get(dut.counters.stall_tx)
        for _ in range(10):
            await ctx.tick()
        assert ctx.get(dut.counters.stall_tx) == before    # nothing waits: no stall
        ctx.set(dut.dp.valid, 1)
        for _ in range(5):
            await ctx.tick()
        assert ctx.get(dut.counters.stall_tx) == before + 5

    run_bench(dut, bench)


def test_write_back_streams_slots_back_to_back():
    """With jobs waiting, an output always ready and the datapath never short of flits, four
    full fp16 slots leave the write-back as header + 128 flits each with no idle cycle between:
    the next job is taken with the last flit of a slot (an IDLE cycle there cost every large
    collective 1 cycle in 130 per slot)."""
    p = IsaParams()
    dut = WriteBack(p)
    msg = dict(dtype=DType.FP16, mask=0b0001, bytes=0, src_addr=0, src_scale_addr=0,
               dst_addr=0x100000, dst_scale_addr=0)
    jobs = [dict(slot=k, rmask=0b0001, wmask=0b0001, dst_off=4096 * k, bytes=4096, last=k == 3)
            for k in range(4)]

    async def bench(ctx):
        ctx.set(port_value(dut.run.msg), pack(message_layout(p), msg))
        ctx.set(dut.wr[0].ready, 1)
        ctx.set(dut.dp.valid, 1)
        pending, sent, flits = list(jobs), [], 0
        for cycle in range(700):
            ctx.set(dut.job.valid, bool(pending))
            if pending:
                ctx.set(port_value(dut.job.payload), pack(job_layout(p), pending[0]))
            flits += 1
            ctx.set(port_value(dut.dp.payload), pack(dut.dp.payload.shape(), dtype=DType.FP16,
                                                  data=flits, last=flits % 128 == 0, scale=0,
                                                  status=0))
            if pending and ctx.get(dut.job.ready):
                pending.pop(0)
            if not ctx.get(dut.dp.ready):
                flits -= 1
            if ctx.get(dut.wr[0].valid):
                sent.append(cycle)
            await ctx.tick()
            if len(sent) == 4 * 129:
                break
        assert len(sent) == 4 * 129 and sent[-1] - sent[0] == 4 * 129 - 1, \
            f"{len(sent)} flits in {sent[-1] - sent[0] + 1} cycles"

    run_bench(dut, bench)


# -- instruction buffer ---------------------------------------------------------------------------

def test_instruction_buffer_loads_and_hands_turns_round_each_resource():
    p = IsaParams(descriptors=8, sync_resources=4)
    dut = InstructionBuffer(p)
    syncs = [0, 1, 0, 9, 1, 0]                       # 9: no such resource, never anyone's turn
    descs = [dict(op=Op.ALLREDUCE, sync=s, elements=100 + i, participants=0b11)
             for i, s in enumerate(syncs)]

    async def turns(ctx):
        out = []
        for a in range(len(syncs)):
            ctx.set(dut.program.read_addr, a)
            out.append(ctx.get(dut.program.turn))
        return out

    async def advance(ctx, addr):
        ctx.set(dut.program.read_addr, addr)
        ctx.set(dut.program.advance, 1)
        await ctx.tick()
        ctx.set(dut.program.advance, 0)

    async def bench(ctx):
        ctx.set(dut.program.load_enable, 0)
        ctx.set(dut.load.valid, 1)
        assert not ctx.get(dut.load.ready)            # no loads while a collective may run
        ctx.set(dut.program.load_enable, 1)
        restarts = 0
        for i, d in enumerate(descs):
            ctx.set(port_value(dut.load.payload),
                    pack(load_layout(p), index=i, last=int(i == len(descs) - 1), desc=d))
            assert ctx.get(dut.load.ready)
            await ctx.tick()
            restarts += ctx.get(dut.program.restart)
            assert ctx.get(dut.program.loading) == (i < len(descs) - 1)
        ctx.set(dut.load.valid, 0)
        await ctx.tick()
        restarts += ctx.get(dut.program.restart)
        await ctx.tick()
        assert restarts == 1 and not ctx.get(dut.program.restart)
        assert ctx.get(dut.program.length) == len(descs)
        for a in (4, 0, 5):                           # the read port is synchronous
            ctx.set(dut.program.read_addr, a)
            await ctx.tick()
            desc = unpack(descriptor_layout(), ctx.get(port_value(dut.program.desc)))
            assert desc["elements"] == 100 + a
        assert await turns(ctx) == [1, 1, 0, 0, 0, 0]
        await advance(ctx, 0)                         # resource 0: 0 -> 2 -> 5 -> 0
        assert await turns(ctx) == [0, 1, 1, 0, 0, 0]
        await advance(ctx, 2)
        assert await turns(ctx) == [0, 1, 0, 0, 0, 1]
        await advance(ctx, 1)                         # resource 1: 1 -> 4
        assert await turns(ctx) == [0, 0, 0, 0, 1, 1]
        await advance(ctx, 3)                         # no resource: nothing moves
        assert await turns(ctx) == [0, 0, 0, 0, 1, 1]
        await advance(ctx, 5)
        await advance(ctx, 4)
        assert await turns(ctx) == [1, 1, 0, 0, 0, 0]
        # A load offered while loads are disabled (a collective running) changes nothing, in the
        # memory either (`scin mutate` showed a write of the refused word went unnoticed).
        ctx.set(dut.program.load_enable, 0)
        ctx.set(dut.load.valid, 1)
        ctx.set(port_value(dut.load.payload),
                pack(load_layout(p), index=4, last=0, desc=dict(descs[4], elements=999)))
        for _ in range(3):
            await ctx.tick()
        ctx.set(dut.load.valid, 0)
        ctx.set(dut.program.read_addr, 4)
        await ctx.tick()
        assert unpack(descriptor_layout(), ctx.get(port_value(dut.program.desc)))["elements"] == 104
        assert not ctx.get(dut.program.loading) and ctx.get(dut.program.length) == len(descs)

    run_bench(dut, bench)


def test_instruction_buffer_advance_without_a_resource_moves_no_turn():
    """An ``advance`` at a slot whose sync resource does not exist changes no resource's turn,
    the last resource's included (the one an out-of-range index would reach). (`scin mutate`
    showed no test used the last resource beside such a slot.)"""
    p = IsaParams(descriptors=4, sync_resources=2)
    dut = InstructionBuffer(p)
    syncs = [1, 9, 1]

    async def bench(ctx):
        ctx.set(dut.program.load_enable, 1)
        ctx.set(dut.load.valid, 1)
        for i, sync in enumerate(syncs):
            desc = dict(op=Op.ALLREDUCE, sync=sync, elements=1, participants=0b11)
            ctx.set(port_value(dut.load.payload),
                    pack(load_layout(p), index=i, last=int(i == len(syncs) - 1), desc=desc))
            await ctx.tick()
        ctx.set(dut.load.valid, 0)
        await ctx.tick()

        def turns():
            out = []
            for a in range(len(syncs)):
                ctx.set(dut.program.read_addr, a)
                out.append(ctx.get(dut.program.turn))
            return out
        assert turns() == [1, 0, 0]
        ctx.set(dut.program.read_addr, 1)
        ctx.set(dut.program.advance, 1)
        await ctx.tick()
        ctx.set(dut.program.advance, 0)
        assert turns() == [1, 0, 0]

    run_bench(dut, bench)


# -- wave controller: descriptor check and watchdog -----------------------------------------------

def _random_descriptor(rng, p):
    """A descriptor with each field drawn from values the check accepts and values it refuses.

    Half the draws take every field from its good values only: a draw from all of them is good
    about one time in forty, too rarely for a 400-draw run to count on seeing good descriptors.
    """
    good = rng.random() < 0.5
    pick = lambda *choices, ok=None: rng.choice(ok if good and ok else choices)
    data_align, scale_align = 4096, 128
    return dict(
        op=pick(0, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 15, ok=(1, 2, 3, 4, 5, 6)),
        dtype=pick(0, 1, 2, 2, 3, ok=(0, 1, 2)),
        flag_mode=rng.getrandbits(1),
        sync=pick(0, 1, p.sync_resources - 1, p.sync_resources, 255,
                  ok=(0, 1, p.sync_resources - 1)),
        participants=pick(0, 0b1, 0b1111, 0b1011, 0b10001, 1 << 15, ok=(0b1111, 0b1011)),
        elements=pick(0, 1, 16, 48, 64, 100, 2048, p.max_elements, p.max_elements + 1,
                      (1 << 32) - 1, ok=(64, 2048, p.max_elements)),
        src_addr=pick(0, data_align, 0x11, data_align * 3 + 32, ok=(0, data_align)),
        dst_addr=pick(0, data_align * 7, 0x10020, ok=(0, data_align * 7)),
        src_scale_addr=pick(0, scale_align, 0x20040, ok=(0, scale_align)),
        dst_scale_addr=pick(0, scale_align * 5, 2, ok=(0, scale_align * 5)),
        flag_addr=pick(0, 4, 0x2000, 0x2002, ok=(0, 4, 0x2000)),
        root=pick(0, 1, 2, 3, 4, 15, ok=(0, 1, 2)),
    )


def test_descriptor_check_is_the_twin_of_check_descriptor():
    rng = seeded_rng("desc_check", "random")
    p = IsaParams(sync_resources=5, max_elements=1 << 20)
    dut = DescriptorCheck(p)
    layout = descriptor_layout()

    async def bench(ctx):
        good = bad = 0
        for _ in range(400):
            d = _random_descriptor(rng, p)
            ctx.set(port_value(dut.desc), pack(layout, d))
            ok = not check_descriptor(d, p)
            assert ctx.get(dut.ok) == ok, (d, check_descriptor(d, p))
            mask = d["participants"] & ((1 << p.fabric.ports) - 1)
            assert ctx.get(dut.mask) == mask
            assert ctx.get(dut.barrier_ok) == (d["sync"] < p.sync_resources and mask != 0)
            order = ranks(mask)
            assert ctx.get(dut.root) == (1 << order[d["root"]] if d["root"] < len(order) else 0)
            assert ctx.get(dut.in_place) == (d["src_addr"] == d["dst_addr"])
            good, bad = good + ok, bad + (not ok)
        assert good > 10 and bad > 10

    run_bench(dut, bench, clock=False)


@pytest.mark.parametrize("timeout", [0, 1, 5])
def test_watchdog_fires_after_timeout_quiet_cycles(timeout):
    rng = seeded_rng(f"watchdog{timeout}", "random")
    dut = Watchdog(timeout)

    async def bench(ctx):
        quiet, fired = 0, 0
        for _ in range(400):
            watch = rng.random() < 0.9
            moved = rng.random() < 0.03
            taken = rng.random() < 0.03
            ctx.set(dut.watch, watch)
            ctx.set(dut.moved, moved)
            ctx.set(dut.taken, taken)
            fire = bool(timeout) and watch and not moved and quiet == timeout - 1
            assert ctx.get(dut.fire) == fire
            fired += fire
            if not watch or moved or taken:
                quiet = 0
            elif timeout and quiet != timeout - 1:
                quiet += 1
            # With no timeout there is no register, hence no clock domain to tick.
            await (ctx.tick() if timeout else ctx.delay(1e-8))
        assert (fired > 0) == bool(timeout)

    run_bench(dut, bench, clock=bool(timeout))
