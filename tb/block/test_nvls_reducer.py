"""cocotb tests of the NVLS arithmetic: :class:`scin.hdl.nvls.fp32_add.Fp32Adder` against NumPy's
``float32`` addition, and :class:`scin.hdl.nvls.reducer.NvlsReducer` bit for bit against the golden
model :func:`scin.sim.nvls.nvls_reduce`.

Reducer tests stream flits with seeded random idle cycles on the input and backpressure on the
output (the sink also checks that a held payload never changes), and compare every output flit
(data and ``user``) exactly. Inputs mix ordinary values (sums that round), subnormals, infinities,
NaNs, large cancellations, BF16 values whose FP32 partial sums overflow, every ``count`` from 1 to
``N``, random orders and both dtypes. One build per (simulator, configuration): every cocotb test
of a configuration runs in that one build.

Run: ``pytest tb/block/test_nvls_reducer.py`` (Verilator and Icarus); replay a failure with the seed
it logs: ``SCIN_SEED=<seed> pytest ...``.
"""

import numpy as np
import pytest

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

from scin.hdl.codec import pack, unpack
from scin.hdl.isa import DType
from scin.hdl.nvls.fp32_add import FP32_QNAN, Fp32Adder
from scin.hdl.nvls.reducer import NvlsReducer, input_layout, output_layout
from scin.sim import nvls
from scin.sim.runner import verilog_for
from scin.sim.testbench.env import read_int, start, tb_config, tb_rng
from scin.sim.testbench.streams import StreamSink, StreamSource, pause_generator
from scin.tb.simulators import needs_icarus
from scin.tb.cocotb_run import run_block


# ---------------------------------------------------------------------------------------------
# FP32 adder.

def fp32_reference(a, b):
    """NumPy float32 ``a + b`` on uint32 patterns, every NaN as ``0x7FC00000``."""
    with np.errstate(all="ignore"):
        s = (a.view(np.float32) + b.view(np.float32)).astype(np.float32)
    return np.where(np.isnan(s), np.uint32(FP32_QNAN), s.view(np.uint32)).astype(np.uint32)


def fp32_pairs(g, n):
    """Operand pairs that reach every path: random patterns (all exponents, subnormals, NaN, Inf),
    near exponents (d = 0..30, both signs: carries, cancellation, sticky bits), exact negation,
    near negation (massive cancellation), tiny values (subnormal in and out), exact rounding ties,
    and the special values against each other."""
    u32 = lambda v: np.asarray(v, dtype=np.uint64).astype(np.uint32)
    a = u32(g.integers(0, 1 << 32, n))
    e = np.clip(((a >> 23) & 0xFF).astype(np.int64) + g.integers(-30, 31, n), 0, 255)
    near = u32((g.integers(0, 2, n) << 31) | (e << 23) | g.integers(0, 1 << 23, n))
    tiny = u32((g.integers(0, 2, n) << 31) | g.integers(0, 1 << 25, n))
    b = np.where(g.random(n) < 0.5, near, u32(g.integers(0, 1 << 32, n)))
    pick = g.random(n)
    b = np.where(pick < 0.08, a ^ 0x80000000, b)
    b = np.where((pick >= 0.08) & (pick < 0.16), u32((a ^ 0x80000000).astype(np.int64)
                                                      + g.integers(-3, 4, n)), b)
    a = np.where((pick >= 0.16) & (pick < 0.24), tiny, a)
    b = np.where((pick >= 0.20) & (pick < 0.28), tiny[::-1], b)
    # Ties: b is exactly half an ulp of a (or 1.5 ulps) below a's significand: d = 24 or 23.
    tie = (a & 0x7F800000) >= (30 << 23)
    b = np.where((pick >= 0.28) & (pick < 0.34) & tie,
                 u32((a & 0xFF800000).astype(np.int64) - (24 << 23)), b)
    b = np.where((pick >= 0.34) & (pick < 0.38) & tie,
                 u32((a & 0xFF800000).astype(np.int64) - (23 << 23) + (1 << 22)), b)
    specials = u32([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
                    0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000, 0x007FFFFF, 0x807FFFFF, 1,
                    0x80000001, 0x3F800000, 0xBF800000, 0x33800000, 0x4B800000])
    sa, sb = np.meshgrid(specials, specials)
    return (np.concatenate([sa.ravel(), a]).astype(np.uint32),
            np.concatenate([sb.ravel(), b]).astype(np.uint32))


@cocotb.test()
async def fp32_add_against_numpy(dut):
    """Thousands of random and special pairs, one per enabled cycle, ``en`` low on random cycles:
    the sum of the pair sampled 4 enabled cycles earlier appears and holds while ``en`` is low."""
    dut.en.value, dut.a.value, dut.b.value = 0, 0, 0    # driven before reset (start_reducer)
    await start(dut)
    rng = tb_rng(dut, "fp32_add")
    g = np.random.default_rng(rng.getrandbits(64))
    a, b = fp32_pairs(g, tb_config()["pairs"])
    want = fp32_reference(a, b)
    latency = Fp32Adder.LATENCY
    issued, checked, prev = [], 0, None
    await FallingEdge(dut.clk)
    while checked < len(a):
        en = rng.random() < 0.8
        k = len(issued)
        dut.en.value = int(en)
        dut.a.value = int(a[k]) if k < len(a) else 0
        dut.b.value = int(b[k]) if k < len(a) else 0
        await RisingEdge(dut.clk)
        await ReadOnly()
        got = read_int(dut.sum)
        if en:
            issued.append(k)
            if len(issued) >= latency:     # the pair sampled `latency` enabled edges ago
                j = issued[-latency]
                if j < len(a):
                    assert got == int(want[j]), (f"{int(a[j]):#010x} + {int(b[j]):#010x}: got "
                                                 f"{got:#010x}, expected {int(want[j]):#010x}")
                    checked += 1
        elif prev is not None:
            assert got == prev, f"sum changed from {prev:#010x} to {got:#010x} with en low"
        prev = got
        await FallingEdge(dut.clk)
    dut._log.info("%d pairs checked against numpy float32", checked)


# ---------------------------------------------------------------------------------------------
# Reducer: flits and the golden model.

def _int(arr):
    return int.from_bytes(np.ascontiguousarray(arr, dtype=np.uint16).tobytes(), "little")


class Flit:
    """One input flit (every member's lanes, order, count, dtype, user) and its expected output."""

    def __init__(self, cfg, values, order, count, dtype, user):
        self.values, self.order, self.count = values, order, count
        self.dtype, self.user = dtype, user
        self.expected = nvls.nvls_reduce(values, order[:count], dtype)
        layout = input_layout(cfg["w"], cfg["n"], cfg["u"])
        self.payload = pack(layout, data=[_int(v) for v in values], order=order, count=count,
                            dtype=DType.BF16 if dtype == "bf16" else DType.FP16, user=user)

    def check(self, cfg, got):
        out = unpack(output_layout(cfg["w"], cfg["u"]), got)
        lanes = [(out["data"] >> (16 * j)) & 0xFFFF for j in range(len(self.expected))]
        for j, (g, e) in enumerate(zip(lanes, self.expected)):
            assert g == e, (f"{self.dtype} order {self.order[:self.count]} lane {j}: got {g:#06x}, "
                            f"expected {int(e):#06x}; inputs "
                            f"{[hex(int(v)) for v in self.values[:, j]]}")
        assert out["user"] == self.user, f"user {out['user']:#x}, expected {self.user:#x}"


def lane_values(g, dtype, n, lanes):
    """``(n, lanes)`` uint16 patterns; each lane drawn from one of several families."""
    cols = [_lane(g, dtype, n) for _ in range(lanes)]
    return np.stack(cols, axis=1).astype(np.uint16)


def _lane(g, dtype, n):
    kind = g.integers(0, 8)
    fp16 = dtype == "fp16"
    if kind <= 2:       # similar magnitudes: sums that round (FP16 scale reaches subnormals)
        scale = 2.0 ** (g.integers(-26, 14) if fp16 else g.integers(-135, 120))
        x = (g.standard_normal(n) * scale).astype(np.float32)
        return x.astype(np.float16).view(np.uint16) if fp16 else nvls.fp32_to_bf16(x)
    if kind == 3:       # any finite pattern: exponents far apart, FP32 bits lost
        x = g.integers(0, 1 << 16, n)
        top = 0x7C00 if fp16 else 0x7F80
        return np.where((x & top) == top, x & ~top, x)
    if kind == 4:       # large cancellation: +-big pairs and small terms
        big = (0x7800 if fp16 else 0x7000) | g.integers(0, 1 << 10 if fp16 else 1 << 7)
        x = g.integers(0, 0x0400 if fp16 else 0x0C00, n)
        x[0], x[min(1, n - 1)] = big, big | 0x8000
        return g.permutation(x | (g.integers(0, 2, n) << 15))
    if kind == 5:       # subnormals and zeros of both signs
        return g.integers(0, 0x0400 if fp16 else 0x0080, n) | (g.integers(0, 2, n) << 15)
    if kind == 6:       # huge: FP16 final overflow; BF16 FP32 partial sums overflow
        return (0x7B00 if fp16 else 0x7F00) | g.integers(0, 0x100 if fp16 else 0x80, n) \
            | (g.integers(0, 2, n) << 15)
    x = g.integers(0, 1 << 16, n)   # wild, with NaN and Inf of both signs
    specials = np.array([0x7C00, 0xFC00, 0x7E00, 0x7C01] if fp16
                        else [0x7F80, 0xFF80, 0x7FC0, 0xFF81])
    return np.where(g.random(n) < 0.3, g.choice(specials, n), x)


def random_flits(rng, cfg, count):
    """``count`` flits: random dtype, order and user; the member count cycles through 1..N so
    every count appears equally often."""
    g = np.random.default_rng(rng.getrandbits(64))
    n, lanes = cfg["n"], cfg["w"] // 16
    flits = []
    for t in range(count):
        dtype = ("fp16", "bf16")[int(g.integers(0, 2))]
        order = [int(k) for k in g.permutation(n)]
        flits.append(Flit(cfg, lane_values(g, dtype, n, lanes), order, 1 + t % n, dtype,
                          int(g.integers(0, 1 << cfg["u"]))))
    return flits


def directed_flits(cfg):
    """Named lanes (members beyond those listed are +0, in every order): zeros and signed zeros,
    ties, subnormals to normals, FP16 overflow at the final rounding, NaN/Inf rules, BF16 partial
    sums that overflow, the ISA-documented cancellations; each flit in identity and reversed
    order, with every count."""
    n, lanes = cfg["n"], cfg["w"] // 16
    f16 = lambda *v: [int(np.float16(x).view(np.uint16)) for x in v]
    cases = {"fp16": [
        [0x8000, 0x8000], [0x8000, 0x0000], f16(65504.0, 65504.0), f16(65504.0, 16.0),
        f16(65504.0, 15.5), [0x0001, 0x0001], [0x03FF, 0x0001], [0x0001, 0x8001],
        f16(1.0, 2.0 ** -11), f16(1.0 + 2.0 ** -10, 2.0 ** -11), [0x7800, 0xF800, 0x0001],
        [0x7E00, 0x3C00], [0x7C01, 0x3C00], [0x7C00, 0xFBFF], [0xFC00, 0x7BFF],
        [0x7C00, 0xFC00], [0xFE01, 0x0000], f16(2048.0, 1.0, -2048.0, 2.0 ** -24),
    ], "bf16": [
        [0x8000, 0x8000], [0x7F7F, 0x7F7F, 0xFF7F], [0x7F7F, 0xFF7F, 0x7F7F],
        [0xFF7F, 0xFF7F, 0x7F80],
        [0x3F80, 0x3B80], [0x3F81, 0x3B80], [0x3F80, 0x2B80], [0x0001, 0x0001], [0x0001, 0x8001],
        [0x0080, 0x8001], [0x7FC0, 0x3F80], [0x7F80, 0xFF7F], [0x7F80, 0xFF80],
        [0x4B80, 0x3F80, 0xCB80], [0x0001, 0x7F00, 0xFF00],
    ]}
    flits = []
    for dtype, cols in cases.items():
        cols = [(c + [0] * n)[:n] for c in cols]
        cols += [[0] * n] * (-len(cols) % lanes)
        for first in range(0, len(cols), lanes):
            values = np.array(cols[first:first + lanes], dtype=np.uint16).T
            for count in range(1, n + 1):
                for order in (list(range(n)), list(range(n))[::-1]):
                    flits.append(Flit(cfg, values, order, count, dtype, count % (1 << cfg["u"])))
    return flits


async def start_reducer(dut):
    """Drive the stream inputs to idle before reset, then reset. The stream drivers are created
    after reset; an input left undriven until then is Z on Icarus at the first edge after reset,
    and ``en = ~o.valid | o.ready`` with ``valid = Z`` would load an unknown token into the
    pipeline (Verilator, two-state, reads 0 there)."""
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    await start(dut)


async def stream_flits(dut, flits, src_pauses=None, snk_pauses=None):
    """Send ``flits`` back to back and check every output flit, in order."""
    cfg = tb_config()
    src = StreamSource(dut, "i", src_pauses)
    snk = StreamSink(dut, "o", snk_pauses)
    src.send(*(f.payload for f in flits))
    await snk.wait_for(len(flits), timeout_cycles=50 * len(flits) + 1000)
    await ClockCycles(dut.clk, cfg["latency"] + 4)
    assert len(snk.items) == len(flits), f"{len(snk.items) - len(flits)} extra output flits"
    for flit, got in zip(flits, snk.items):
        flit.check(cfg, got)


@cocotb.test()
async def reducer_random(dut):
    """Random flits (every count, random orders, both dtypes, specials, cancellations), random idle
    cycles on the input and random backpressure on the output."""
    await start_reducer(dut)
    rng = tb_rng(dut, "random")
    cfg = tb_config()
    flits = random_flits(rng, cfg, cfg["flits"])
    await stream_flits(dut, flits, pause_generator("random", rng), pause_generator("random", rng))
    dut._log.info("%d random flits checked", len(flits))


@cocotb.test()
async def reducer_directed(dut):
    """Named edge cases, every count, two orders; bursty idle cycles and backpressure."""
    await start_reducer(dut)
    rng = tb_rng(dut, "directed")
    cfg = tb_config()
    await stream_flits(dut, directed_flits(cfg), pause_generator("bursty", rng),
                       pause_generator("bursty", rng))


@cocotb.test()
async def reducer_order_dependence(dut):
    """The same members in two orders give different bits, both predicted by the golden model
    (FP16: cancellation; BF16: an FP32 partial sum that overflows in one order only)."""
    await start_reducer(dut)
    cfg = tb_config()
    n, lanes = cfg["n"], cfg["w"] // 16
    flits = []
    for dtype in ("fp16", "bf16"):
        members, order_a, order_b, want_a, want_b = nvls.order_dependence_example(dtype)
        values = np.zeros((n, lanes), dtype=np.uint16)
        values[:len(members), :] = members      # every lane holds the example
        rest = list(range(len(members), n))     # the other members (all +0) come last, unused
        fa = Flit(cfg, values, order_a + rest, len(members), dtype, 0)
        fb = Flit(cfg, values, order_b + rest, len(members), dtype, 1)
        assert (int(fa.expected[0]), int(fb.expected[0])) == (want_a, want_b) and want_a != want_b
        flits += [fa, fb]
    await stream_flits(dut, flits)


@cocotb.test()
async def reducer_throughput_and_latency(dut):
    """With no pauses the input takes a flit every cycle, and the first result's ``valid`` comes
    the documented latency after its transfer."""
    await start_reducer(dut)
    rng = tb_rng(dut, "rate")
    cfg = tb_config()
    flits = random_flits(rng, cfg, 3 * cfg["n"])
    seen = {"xfer": 0, "stall": 0, "first_in": None, "first_out": None, "cycle": 0}

    async def monitor():
        while True:
            await RisingEdge(dut.clk)
            seen["cycle"] += 1
            if int(dut.i__valid.value):
                if int(dut.i__ready.value):
                    seen["xfer"] += 1
                    if seen["first_in"] is None:
                        seen["first_in"] = seen["cycle"]
                else:
                    seen["stall"] += 1
            if int(dut.o__valid.value) and seen["first_out"] is None:
                seen["first_out"] = seen["cycle"]

    cocotb.start_soon(monitor())
    await stream_flits(dut, flits)
    assert seen["xfer"] == len(flits)
    assert seen["stall"] == 0, f"input stalled {seen['stall']} cycles with no backpressure"
    latency = seen["first_out"] - seen["first_in"]
    dut._log.info("%d flits, no stall; latency %d cycles (documented %d)", len(flits), latency,
                  cfg["latency"])
    assert latency == cfg["latency"], f"latency {latency}, documented {cfg['latency']}"


# ---------------------------------------------------------------------------------------------
# pytest entry points.

ADDER_TESTS = ["fp32_add_against_numpy"]
REDUCER_TESTS = ["reducer_random", "reducer_directed", "reducer_order_dependence",
                 "reducer_throughput_and_latency"]
USER_WIDTH = 4

#: Random flits per (simulator, N). Icarus is the slow one: 120 flits took 17 s at N = 4 (16 lanes)
#: on the 2-core machine; N = 8 runs at 4 lanes (:data:`REDUCERS`), 28 adders, and sends as many.
FLITS = {("verilator", 4): 600, ("verilator", 8): 600, ("icarus", 4): 120, ("icarus", 8): 120}
PAIRS = {"verilator": 20000, "icarus": 4000}


def _sim_param(sim, *values, id):
    return pytest.param(sim, *values, id=f"{sim}-{id}",
                        marks=needs_icarus if sim == "icarus" else ())


@pytest.mark.parametrize("sim", [_sim_param(s, id="fp32") for s in ("verilator", "icarus")])
def test_fp32_add(sim):
    run_block(__file__, sim, "nvls_fp32_add", Fp32Adder, "fp32_add", testcase=ADDER_TESTS,
              config={"pairs": PAIRS[sim]})


#: (members, flit width): four members at the paper's flit width (16 lanes), and the eight-member
#: tree at 64 bits (4 lanes: lanes are copies of one circuit, the tree's depth is what N = 8 adds;
#: at 256 bits its model took minutes to build for nothing more).
REDUCERS = [(4, 256), (8, 64)]


@pytest.mark.parametrize("sim, n, w", [_sim_param(s, n, w, id=f"n{n}w{w}")
                                       for s in ("verilator", "icarus") for n, w in REDUCERS])
def test_reducer(sim, n, w):
    run_block(__file__, sim, "nvls_reducer",
              lambda: NvlsReducer(flit_width=w, members=n, user_width=USER_WIDTH),
              f"n{n}w{w}u{USER_WIDTH}", testcase=REDUCER_TESTS,
              config={"n": n, "w": w, "u": USER_WIDTH, "flits": FLITS[sim, n],
                      "latency": NvlsReducer.latency_for(n)})


@pytest.mark.parametrize("top, make", [
    ("nvls_fp32_add", Fp32Adder),
    ("nvls_reducer", lambda: NvlsReducer(flit_width=256, members=4, user_width=USER_WIDTH)),
], ids=["fp32_add", "reducer_n4"])
def test_lint(top, make):
    """The generated Verilog is clean under ``verilator --lint-only -Wall`` (the project's waivers)
    and Yosys ``check -assert``."""
    from scin.scripts.lint import lint_verilog, yosys_check
    key = "fp32_add" if top == "nvls_fp32_add" else f"n4w256u{USER_WIDTH}"
    v = verilog_for(make, top, key)
    for check in (lint_verilog, yosys_check):
        ok, output = check(v, top)
        assert ok, output[-4000:]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"members": 1}, ValueError, "members must be an integer between 2 and 16, not 1"),
    ({"members": 17}, ValueError, "members must be an integer between 2 and 16, not 17"),
    ({"members": 4.0}, TypeError, "members must be an integer, not 4.0"),
    ({"flit_width": 48}, ValueError, "flit_width must be an integer between 64 and 512, not 48"),
    ({"flit_width": 528}, ValueError, "flit_width must be an integer between 64 and 512, not 528"),
    ({"flit_width": 200}, ValueError, "flit_width must be a multiple of 16, not 200"),
    ({"user_width": 0}, ValueError, "user_width must be an integer between 1 and 256, not 0"),
])
def test_parameters_rejected(kwargs, error, message):
    with pytest.raises(error, match=f"^{message}$"):
        NvlsReducer(**kwargs)


def test_latency_property():
    assert Fp32Adder().latency == Fp32Adder.LATENCY == 4
    assert [NvlsReducer.latency_for(n) for n in (2, 4, 8, 16)] == [6, 14, 30, 62]
    assert NvlsReducer(members=8).latency == 30

