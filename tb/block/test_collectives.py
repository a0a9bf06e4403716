"""ReduceScatter, AllGather, Broadcast and Reduce on the ISA, every dtype, against the golden model.

Each test runs one operation in every dtype, one simulation for all of them (one descriptor per
run, each on its own sync resource), on the ISA build that ``tb/block/test_isa.py`` uses. Before
each run every endpoint model's whole memory is filled with random bytes and the inputs are written
over it (``scin.sim.collective_buffers``); after it, the whole memory must equal that background
plus exactly the result regions the operation gives that rank, bit for bit
(``scin.sim.numerics.collective``), and the flag. So a byte written where a rank should get
nothing fails the test, and so does a missing one. Every READ and WRITE the ISA sends is checked
against the 4 KB rule and the endpoint bridges' legal forms (flit-aligned, or inside one flit),
and the bytes written to each rank are counted: an in-place AllGather must not send a rank its
own shard, an in-place Broadcast nothing to the root, a Reduce nothing to the other ranks.

Verilator runs shards that start inside a 4 KiB page and cross page boundaries, INT8 shards whose
scales start inside a flit, subsets of the ports, in place and out of place, with random pauses on
every stream. Icarus (a 4 KiB collective takes minutes there) runs the same runs at a few flits
per rank and without pauses (``ICARUS_ELEMENTS``), with every check.
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge

from scin.hdl.isa import Op, FlagMode, DType
from scin.hdl.isa.plan import paired
from scin.sim import numerics
from scin.sim.collective_buffers import (Buffers, in_place_buffers, input_regions,
                                         result_regions)
from scin.sim.testbench.env import tb_config
from scin.sim.testbench.isa_program import load_program

from scin.tb.isa_setup import (SRC, DST, SSRC, SDST, FLAG, DATA_FLAGS, isa_params, make_inputs,
                               flag_word, counters, start_isa)
from scin.tb.simulators import sim_params
from scin.tb.cocotb_run import run_isa


BUFS = Buffers(SRC, DST, SSRC, SDST)

#: Per operation, its runs: (dtype, elements per rank, participants, root, in place, flag mode).
#: Elements are NCCL's count: the result per rank (ReduceScatter), the shard sent (AllGather).
RUNS = {
    "reduce_scatter": [
        ("fp16", 1504, 0b1111, 0, False, "ACKED"),    # 3,008-byte shards: ranks 1-3 cross pages
        ("int8", 1280, 0b1111, 0, True, "ORDERED"),   # in place; scale shards at 40-byte steps
        ("bf16", 2064, 0b1011, 0, False, "ACKED"),    # a subset; 4,128-byte shards
    ],
    "allgather": [
        ("fp16", 1504, 0b1111, 0, True, "ACKED"),     # in place: no rank gets its own shard
        # Whole pages in place: in pairs of ranks (isa_params has gather_pairs), 4, 3 and 2 ranks.
        ("fp16", 4096, 0b1111, 0, True, "ACKED"),
        ("bf16", 2048, 0b1101, 0, True, "ORDERED"),
        ("fp16", 2048, 0b0110, 0, True, "ACKED"),
        ("int8", 1536, 0b1111, 0, False, "ORDERED"),  # scale shards at 48-byte steps
        ("bf16", 2064, 0b0111, 0, False, "ACKED"),
    ],
    "broadcast": [
        ("fp16", 2080, 0b1111, 2, True, "ACKED"),     # in place: nothing written to the root
        ("int8", 4160, 0b1111, 1, False, "ORDERED"),
        ("bf16", 1000, 0b1101, 2, False, "ACKED"),    # not a whole number of flits
    ],
    "reduce": [
        ("fp16", 2080, 0b1111, 3, False, "ACKED"),
        ("int8", 1280, 0b1111, 1, True, "ORDERED"),
        ("bf16", 1000, 0b1110, 1, False, "ACKED"),
    ],
}

#: Icarus's elements per rank, by dtype: 3 flits (FP16, BF16), one INT8 block (2 flits, its scale
#: 2 bytes inside a flit). The rest of each run is as on Verilator.
ICARUS_ELEMENTS = {"fp16": 48, "bf16": 48, "int8": 64}

OPS = {"reduce_scatter": Op.REDUCE_SCATTER, "allgather": Op.ALLGATHER, "broadcast": Op.BROADCAST,
       "reduce": Op.REDUCE}


def _check_packets(ep, fabric):
    """Every READ and WRITE the ISA sent this endpoint stays inside a 4 KB page and is one the
    bridges serve: flit-aligned, or inside one flit."""
    fb = fabric.flit_bytes
    for h in ep.reads_seen + ep.writes_seen:
        a, n = h["addr"], h["length"]
        assert a // 4096 == (a + n - 1) // 4096, f"port {ep.port}: {h} crosses a 4 KB page"
        assert a % fb == 0 or a % fb + n <= fb, \
            f"port {ep.port}: {h} is neither aligned nor in a flit"


def _written(ep, since):
    """Bytes written to ``ep`` since its ``since``-th write (data and INT8 scales; flags left
    out)."""
    return sum(h["length"] for h in ep.writes_seen[since:] if not FLAG <= h["addr"] < FLAG + 0x1000)


def _read(ep, since):
    """Bytes read from ``ep`` since its ``since``-th read (READ_WAVE pieces counted one by one)."""
    return sum(h["length"] for h in ep.reads_seen[since:])


def _want_read(op, rank, n, nbytes, pairs):
    """The bytes an AllGather reads from rank ``rank`` (None for the other operations): its
    shard, or in pairs of ranks (``pairs``, :func:`~scin.hdl.isa.plan.paired`) twice but for the
    first and last rank's."""
    if op != Op.ALLGATHER:
        return None
    return nbytes * (2 if pairs and 0 < rank < n - 1 else 1)


def _want_written(op, rank, n, nbytes, in_place, root):
    """The bytes rank ``rank`` must be sent: only what the operation gives it (``nbytes`` per
    shard, scales included)."""
    if op == Op.REDUCE_SCATTER:
        return nbytes
    if op == Op.ALLGATHER:
        return (n - 1 if in_place else n) * nbytes
    if op == Op.BROADCAST:
        return 0 if in_place and rank == root else nbytes
    return nbytes if rank == root else 0


class _Run:
    """One collective of the test: its descriptor, each participant's memory image it must leave,
    and the flag status it must carry. Filling the memories is part of making it."""

    def __init__(self, eps, rng, op, k, dtype, elements, mask, root, in_place, flag_mode,
                 flag_addr=FLAG):
        self.op, self.k, self.dtype, self.elements, self.in_place, self.root = \
            op, k, dtype, elements, in_place, root
        self.eps = eps
        self.parts = [i for i, _ in enumerate(eps) if mask >> i & 1]
        n = len(self.parts)
        bufs = in_place_buffers(BUFS) if in_place else BUFS
        shards = n if op == Op.REDUCE_SCATTER else 1
        data, scales = make_inputs(rng, dtype, n, shards * elements)
        golden = numerics.collective(op, dtype, data, scales, root)
        self.want, self.status = [], 0
        for r, i in enumerate(self.parts):
            ep = eps[i]
            ep.mem[:] = rng.randbytes(len(ep.mem))
            for addr, raw in input_regions(op, r, data[r], None if scales is None else scales[r],
                                           bufs):
                ep.mem[addr:addr + len(raw)] = raw
            image = bytearray(ep.mem)
            for addr, raw in result_regions(op, r, golden[r], bufs, root=root):
                image[addr:addr + len(raw)] = raw
            self.want.append(image)
            self.status |= 0 if golden[r] is None else int(golden[r].status)
        self.desc = dict(op=op, dtype=DType[dtype.upper()], flag_mode=FlagMode[flag_mode], sync=k,
                         participants=mask, elements=elements, root=root, src_addr=bufs.src,
                         dst_addr=bufs.dst, src_scale_addr=bufs.src_scale,
                         dst_scale_addr=bufs.dst_scale, flag_addr=flag_addr)

    async def run(self, dut, params, loader, desc=None):
        """Load the descriptor (or ``desc``), make every participant arrive at its resource and
        wait until it has completed; return the cycles waited."""
        load_program(loader, params, [desc or self.desc])
        await loader.wait_idle()
        self.before = [len(ep.writes_seen) for ep in self.eps]
        self.before_reads = [len(ep.reads_seen) for ep in self.eps]
        done = counters(dut)["collectives"]
        for i in self.parts:
            self.eps[i].arrive(self.k)
        for cycle in range(40_000):
            if counters(dut)["collectives"] == done + 1:
                return cycle
            await RisingEdge(dut.clk)
        raise AssertionError(f"run {self.k}: not complete; counters {counters(dut)}")

    def flags(self):
        return [self.eps[i].flag(self.desc["flag_addr"]) for i in self.parts]

    def check(self, params):
        """Bit for bit over every participant's whole memory, only legal packets, only the bytes
        the operation gives each rank, nothing to the other ports."""
        fabric = params.fabric
        n = len(self.parts)
        flag = flag_word(1, self.status & DATA_FLAGS).to_bytes(4, "little")
        pairs = params.gather_pairs and paired(
            self.op, self.desc["participants"], self.elements * (1 if self.dtype == "int8" else 2),
            fabric=fabric, int8=self.dtype == "int8", in_place=self.in_place)
        # Per shard: its data, and for INT8 its scales (2 bytes per 64-element block).
        nbytes = (self.elements + self.elements // 32 if self.dtype == "int8"
                  else 2 * self.elements)
        at = self.desc["flag_addr"]
        for r, i in enumerate(self.parts):
            want = self.want[r]
            want[at:at + 4] = flag
            got = self.eps[i].mem
            if got != want:
                a, b = np.frombuffer(bytes(got), np.uint8), np.frombuffer(bytes(want), np.uint8)
                bad = np.flatnonzero(a != b)
                raise AssertionError(f"run {self.k} ({self.dtype}) rank {r} (port {i}): "
                                     f"{len(bad)} bytes differ, first at {bad[0]:#x}: got "
                                     f"{a[bad[:8]]}, want {b[bad[:8]]}")
            _check_packets(self.eps[i], fabric)
            sent = _written(self.eps[i], self.before[i])
            assert sent == _want_written(self.op, r, n, nbytes, self.in_place, self.root), \
                f"run {self.k} rank {r}: {sent} bytes written"
            want_read = _want_read(self.op, r, n, nbytes, pairs)
            got_read = _read(self.eps[i], self.before_reads[i])
            assert want_read in (None, got_read), \
                f"run {self.k} rank {r}: {got_read} bytes read, want {want_read} (pairs {pairs})"
        for i in set(range(len(self.eps))) - set(self.parts):
            assert len(self.eps[i].writes_seen) == self.before[i], \
                f"run {self.k}: port {i} is not a participant"


@cocotb.test()
async def collectives_match_golden_model(dut):
    cfg = tb_config()
    params, ports, rng, eps, loader = await start_isa(dut)
    op = OPS[cfg["op"]]
    for k, spec in enumerate(cfg["runs"]):
        run = _Run(eps, rng, op, k, *spec)
        cycles = await run.run(dut, params, loader)
        run.check(params)
        dut._log.info("run %d: %s %s x%d, %d elements, in place %s: bit-exact after %d cycles",
                      k, op.name, run.dtype, len(run.parts), run.elements, run.in_place, cycles)
    c = counters(dut)
    assert c["bad_descriptors"] == 0 and c["unknown_tags"] == 0, c
    assert c["unknown_wresps"] == 0 and c["timeouts"] == 0, c


#: Per operation, a descriptor of it that is bad for a reason of its own (check_descriptor's).
BAD = {
    "reduce_scatter": dict(elements=24),            # a 48-byte shard: not whole flits
    "allgather":      dict(dtype=DType.INT8, elements=64, dst_scale_addr=SDST),  # scales apart
    "broadcast":      dict(root=4),                 # 4 participants: ranks 0-3
    "reduce":         dict(root=7),
}


@cocotb.test()
async def faults_during_each_operation(dut):
    """For the operation of the config: a descriptor bad for a reason of its own ends with
    ERROR; an AXI error on a read and on a write ends with ERROR in every flag; a read response
    that never comes ends with TIMEOUT (watchdog); after each, a good collective of the same
    operation is bit-exact. ``elements`` (default 64: one flit per rank) sets the size; 2048
    (a 4 KiB page per rank) runs the in-place AllGathers in pairs of ranks (``gather_pairs``)."""
    cfg = tb_config()
    params, ports, rng, eps, loader = await start_isa(dut)
    op = OPS[cfg["op"]]
    root = 1 if op in (Op.BROADCAST, Op.REDUCE) else 0
    spec = ("fp16", cfg.get("elements", 64), (1 << ports) - 1, root, op == Op.ALLGATHER, "ACKED")
    read_port = root                          # rank r is port r here: every port takes part
    write_port = 2 if op == Op.BROADCAST else root
    from scin.hdl.isa import FlagStatus, check_descriptor
    from scin.hdl.packet import Status
    faults = [
        ("bad descriptor", None, FlagStatus.ERROR),
        ("read error", lambda: eps[read_port].on_read(lambda h: True, status=Status.SLVERR,
                                                       payload=False), FlagStatus.ERROR),
        ("write error", lambda: eps[write_port].on_write(lambda h: h["addr"] < FLAG,
                                                         status=Status.SLVERR), FlagStatus.ERROR),
        ("read never answered", lambda: eps[read_port].on_read(lambda h: True, hold=True),
         FlagStatus.TIMEOUT),
    ]
    k = 0
    for name, inject, status in faults:
        run = _Run(eps, rng, op, k, *spec)
        desc = None
        if inject is None:
            desc = dict(run.desc, **BAD[cfg["op"]])
            fields = {f: getattr(v, "value", v) for f, v in desc.items()}
            assert check_descriptor(fields, params), desc
        else:
            inject()
        await run.run(dut, params, loader, desc)
        flags = run.flags()
        assert all(f == flag_word(1, status.value) for f in flags), \
            f"{name}: flags {[hex(f) for f in flags]}, want status {status!r}"
        for ep in eps:
            ep.held.clear()                   # the withheld response never comes
        good = _Run(eps, rng, op, k + 1, *spec)
        await good.run(dut, params, loader)
        good.check(params)
        dut._log.info("%s: %s flags, then a good %s bit-exact", name, status.name, op.name)
        k += 2
    c = counters(dut)
    assert c["bad_descriptors"] == 1 and c["timeouts"] == 1, c


def test_paired_allgather_faults():
    """The faults of ``faults_during_each_operation`` in the middle of an in-place AllGather run
    in pairs of ranks (4 KiB per rank: phase 0 reads ranks 0 and 1 at once, and the read fault is
    rank 0's), each followed by a good paired AllGather bit-exact with its reads counted.
    Verilator only: a 4 KiB collective takes Icarus minutes (module docstring)."""
    cfg = {"op": "allgather", "elements": 2048, "stalls": True}
    params = isa_params(cfg)
    run_isa(__file__, "verilator", params, config=cfg, testcase="faults_during_each_operation")


def _icarus_form(runs):
    return [(dt, ICARUS_ELEMENTS[dt], *rest) for dt, _, *rest in runs]


@pytest.mark.parametrize("sim, op", sim_params(RUNS, {op: {} for op in RUNS}))
def test_collective_faults(sim, op):
    """The faults of ``faults_during_each_operation``, one-flit-per-rank messages on both
    simulators (with random pauses on Verilator)."""
    cfg = {"op": op, "stalls": sim == "verilator"}
    params = isa_params(cfg)
    run_isa(__file__, sim, params, config=cfg, testcase="faults_during_each_operation")


@pytest.mark.parametrize("sim, op", sim_params(RUNS, {op: {} for op in RUNS}))
def test_collective(sim, op):
    """Every dtype of ``op`` in one simulation: in full with random pauses on Verilator, at a
    few flits per rank without pauses on Icarus (module docstring)."""
    runs = RUNS[op] if sim == "verilator" else _icarus_form(RUNS[op])
    cfg = {"op": op, "runs": runs, "stalls": sim == "verilator"}
    params = isa_params(cfg)
    run_isa(__file__, sim, params, config=cfg, testcase="collectives_match_golden_model")
