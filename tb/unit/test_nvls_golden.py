"""Tests of the NVLS golden model (scin.sim.nvls).

The references are independent of the model's NumPy arithmetic: exact ``Fraction`` values of the
bit patterns, Python's round-half-even (``round()`` on a Fraction) for every FP32 addition and for
the final rounding, explicit IEEE special-value rules, and the project's integer rounding
(:func:`scin.sim.fp.round_fixed`) for the FP32 -> FP16/BF16 conversions. Hypothesis runs
derandomized so every failure replays; the other random tests are seeded.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scin.sim import nvls
from scin.sim.fp import BF16, FP16, FloatFormat, round_fixed
from scin.sim.numerics import Status, allreduce_fp16
from scin.tb.fp_reference import rne, to_fraction

PROPS = settings(derandomize=True, max_examples=300, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])

FP32 = FloatFormat("fp32", exp_bits=8, frac_bits=23, qnan=0x7FC00000)
FMT = {"fp16": FP16, "bf16": BF16}
ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


# --------------------------------------------------------------------------- independent references

def kind(bits, fmt):
    """``"nan"``, ``"inf"`` or ``"finite"`` of one pattern."""
    e = (bits & fmt.exp_mask) >> fmt.frac_bits
    if e != (1 << fmt.exp_bits) - 1:
        return "finite"
    return "nan" if bits & fmt.frac_mask else "inf"


def ref_add(a, b):
    """IEEE binary32 ``a + b`` on patterns, written from the standard's rules."""
    ka, kb = kind(a, FP32), kind(b, FP32)
    sa, sb = a >> 31, b >> 31
    if "nan" in (ka, kb) or (ka == kb == "inf" and sa != sb):
        return FP32.qnan
    if ka == "inf":
        return a
    if kb == "inf":
        return b
    total = to_fraction(a, FP32) + to_fraction(b, FP32)
    # An exact zero sum is +0 in round-to-nearest, except (-0) + (-0).
    return rne(total, FP32, negative_zero=(total == 0 and sa == sb == 1))


def ref_widen(bits, fmt):
    """The FP32 pattern of a 16-bit pattern, from its exact value."""
    k = kind(bits, fmt)
    sign = (bits >> 15) << 31
    if k == "nan":
        return FP32.qnan
    if k == "inf":
        return sign | FP32.inf
    v = to_fraction(bits, fmt)
    return rne(v, FP32, negative_zero=bool(sign))


def ref_narrow(bits, fmt):
    k = kind(bits, FP32)
    if k == "nan":
        return fmt.qnan
    if k == "inf":
        return ((bits >> 31) << 15) | fmt.inf
    return rne(to_fraction(bits, FP32), fmt, negative_zero=bool(bits >> 31))


def ref_nvls(members, order, dtype):
    """Sequential FP32 accumulation in ``order``, one final rounding, per column."""
    fmt = FMT[dtype]
    out = []
    for col in np.asarray(members, dtype=np.uint16).T:
        acc = ref_widen(int(col[order[0]]), fmt)
        for k in order[1:]:
            acc = ref_add(acc, ref_widen(int(col[k]), fmt))
        out.append(ref_narrow(acc, fmt))
    return np.array(out, dtype=np.uint16)


# --------------------------------------------------------------------------- strategies

def patterns(dtype):
    """16-bit patterns: anything, or values within a few binades of one another (sums that round
    and cancel), subnormals, and the largest finite values (BF16 partial sums that overflow)."""
    fmt = FMT[dtype]
    top = (1 << fmt.exp_bits) - 1
    near = st.builds(lambda s, e, f: (s << 15) | (e << fmt.frac_bits) | f, st.integers(0, 1),
                     st.integers(top // 2 - 3, top // 2 + 3), st.integers(0, fmt.frac_mask))
    sub = st.builds(lambda s, f: (s << 15) | f, st.integers(0, 1), st.integers(0, fmt.frac_mask))
    huge = st.sampled_from([fmt.max_finite, fmt.max_finite | fmt.sign_mask, fmt.max_finite - 1])
    return st.one_of(st.integers(0, 0xFFFF), near, near, sub, huge)


@st.composite
def reductions(draw, dtype, min_members=1, max_members=8, max_cols=6):
    n = draw(st.integers(min_members, max_members))
    cols = draw(st.integers(1, max_cols))
    members = np.array(draw(st.lists(st.lists(patterns(dtype), min_size=cols, max_size=cols),
                                     min_size=n, max_size=n)), dtype=np.uint16)
    perm = draw(st.permutations(range(n)))
    count = draw(st.integers(1, n))
    return members, list(perm[:count])


# --------------------------------------------------------------------------- conversions

@pytest.mark.parametrize("dtype", nvls.DTYPES)
def test_widen_is_exact_for_every_pattern(dtype):
    """Every one of the 65536 patterns widens to the FP32 pattern of exactly its value (NaN stays
    NaN, Inf stays Inf with its sign, -0 stays -0)."""
    fmt = FMT[dtype]
    got = nvls.widen(ALL16, dtype).view(np.uint32)
    for bits in range(1 << 16):
        k = kind(bits, fmt)
        if k == "nan":
            assert kind(int(got[bits]), FP32) == "nan", hex(bits)
        else:
            assert int(got[bits]) == ref_widen(bits, fmt), hex(bits)


@pytest.mark.parametrize("dtype", nvls.DTYPES)
def test_narrow_inverts_widen(dtype):
    """Rounding the FP32 value of a 16-bit pattern gives the pattern back (every pattern); every
    NaN comes back as the canonical NaN."""
    fmt = FMT[dtype]
    back = nvls.narrow(nvls.widen(ALL16, dtype), dtype)
    nan = ((ALL16 & fmt.exp_mask) == fmt.exp_mask) & ((ALL16 & fmt.frac_mask) != 0)
    assert np.array_equal(back[~nan], ALL16[~nan])
    assert (back[nan] == fmt.qnan).all() and nan.sum() == 2 * (fmt.frac_mask)


def _fp32_samples(seed, n=100_000):
    """Random FP32 patterns across every exponent, plus exact ties and near-ties for both formats
    (the bits below the kept significand are 0b100..0, 0b011..1, 0b100..01)."""
    g = np.random.default_rng(seed)
    x = g.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    ties = []
    for drop in (13, 16):            # FP16 normals drop 13 fraction bits, BF16 16
        base = x[: n // 8] & ~np.uint32((1 << drop) - 1)
        half = np.uint32(1 << (drop - 1))
        ties += [base | half, base | (half - np.uint32(1)), base | half | np.uint32(1)]
    # FP16's subnormal and overflow boundaries: exponents 101..113 and 142..143.
    e = g.integers(98, 114, n // 8).astype(np.uint32)
    e = np.where(g.random(n // 8) < 0.25, np.uint32(142) + (e & 1), e)
    edge = (x[: n // 8] & np.uint32(0x807FFFFF)) | (e << 23)
    return np.concatenate([x, *ties, edge]).astype(np.uint32)


@pytest.mark.parametrize("dtype", nvls.DTYPES)
def test_narrow_matches_integer_rounding(dtype):
    """narrow() (NumPy's float16 cast; the BF16 bit trick) equals the project's integer RNE,
    ``round_fixed``, on the exact value ``M * 2**(E - 150)`` of random FP32 patterns, ties, and
    FP16's subnormal and overflow boundaries; signed zeros, Inf and canonical NaN as documented."""
    fmt = FMT[dtype]
    x = _fp32_samples(1 if dtype == "fp16" else 2)
    got = nvls.narrow(x.view(np.float32), dtype)
    e = ((x >> 23) & 0xFF).astype(np.int64)
    f = (x & 0x7FFFFF).astype(np.int64)
    neg = (x >> 31) == 1
    m = np.where(e == 0, f, f | (1 << 23))
    want, _ = round_fixed(np.where(neg, -m, m), np.maximum(e, 1) - 150, fmt)
    want = np.where((m == 0) & neg, np.uint16(fmt.sign_mask), want)         # -0 stays -0
    want = np.where(e == 255, np.where(f != 0, np.uint16(fmt.qnan),
                                       np.where(neg, np.uint16(fmt.inf | fmt.sign_mask),
                                                np.uint16(fmt.inf))), want)
    bad = np.nonzero(got != want.astype(np.uint16))[0]
    assert bad.size == 0, [(hex(int(x[i])), hex(int(got[i])), hex(int(want[i]))) for i in bad[:5]]


# --------------------------------------------------------------------------- the reduction

@PROPS
@given(st.sampled_from(nvls.DTYPES).flatmap(lambda d: st.tuples(st.just(d), reductions(d))))
def test_matches_exact_sequential_reference(case):
    """nvls_reduce equals the Fraction reference: IEEE binary32 additions in ``order`` (each one
    correctly rounded from the exact sum), then one correctly rounded conversion, NaN canonical."""
    dtype, (members, order) = case
    assert np.array_equal(nvls.nvls_reduce(members, order, dtype), ref_nvls(members, order, dtype))


@PROPS
@given(st.sampled_from(nvls.DTYPES), st.data())
def test_two_members_are_order_independent(dtype, data):
    """With two members the result never depends on the order (IEEE addition commutes, signed
    zeros and NaN included), for any patterns."""
    members, _ = data.draw(reductions(dtype, min_members=2, max_members=2))
    assert np.array_equal(nvls.nvls_reduce(members, [0, 1], dtype),
                          nvls.nvls_reduce(members, [1, 0], dtype))


def test_order_matters_pinned_fp16_case():
    """32768, -32768, 2**-24: (a + b) + c keeps the subnormal, (a + c) + b loses it in FP32."""
    members = np.array([[0x7800], [0xF800], [0x0001]], dtype=np.uint16)
    assert nvls.nvls_reduce(members, [0, 1, 2], "fp16").tolist() == [0x0001]
    assert nvls.nvls_reduce(members, [0, 2, 1], "fp16").tolist() == [0x0000]
    assert nvls.nvls_reduce(members, [2, 0, 1], "fp16").tolist() == [0x0000]
    assert ref_nvls(members, [0, 2, 1], "fp16").tolist() == [0x0000]
    for dtype in nvls.DTYPES:
        arr, order_a, order_b, want_a, want_b = nvls.order_dependence_example(dtype)
        assert want_a != want_b
        assert nvls.nvls_reduce(arr, order_a, dtype).tolist() == [want_a]
        assert nvls.nvls_reduce(arr, order_b, dtype).tolist() == [want_b]


@pytest.mark.parametrize("dtype", nvls.DTYPES)
def test_order_matters_with_three_or_more(dtype):
    """Commutativity fails in general: with finite patterns of any exponent and member 1 = -member 0
    (a large cancellation), reversing the order changes hundreds of 4000 results for every N from
    3 to 8, and none for N = 2. (Values of similar magnitude rarely show it: FP32 keeps 13 bits more
    than FP16, so an order only matters when its rounding errors straddle a final rounding
    boundary.)"""
    g = np.random.default_rng(7)
    top = (0x7C00 if dtype == "fp16" else 0x7F80)
    changed = {}
    for n in range(2, 9):
        x = g.integers(0, 1 << 16, size=(n, 4000))
        x = np.where((x & top) == top, x & ~top, x).astype(np.uint16)
        x[1] = x[0] ^ np.uint16(0x8000)
        fwd = nvls.nvls_reduce(x, list(range(n)), dtype)
        rev = nvls.nvls_reduce(x, list(range(n))[::-1], dtype)
        changed[n] = int((fwd != rev).sum())
    assert changed[2] == 0
    assert all(changed[n] >= 10 for n in range(3, 9)), changed


@PROPS
@given(reductions("fp16"))
def test_fp16_non_finite_rule_is_the_isa_rule(case):
    """For FP16, an FP32 sum cannot overflow, so NaN/Inf come only from inputs, and the result is
    the ISA's rule (docs/NUMERICS.md section 3) for every element with a non-finite input."""
    members, order = case
    got = nvls.nvls_reduce(members, order, "fp16")
    isa, elem_status, _ = allreduce_fp16(members[order])
    special = (elem_status & Status.INVALID) != 0       # some input of the element is NaN or Inf
    assert np.array_equal(special, ((members[order] & 0x7C00) == 0x7C00).any(axis=0))
    assert np.array_equal(got[special], isa[special])


def test_bf16_partial_sum_overflow_is_order_dependent():
    """max + max overflows FP32 to +Inf, which then absorbs -max; the other order does not
    overflow; and an overflow to +Inf meeting -Inf is NaN."""
    mx, nmx = 0x7F7F, 0xFF7F
    m = np.array([[mx], [mx], [nmx]], dtype=np.uint16)
    assert nvls.nvls_reduce(m, [0, 1, 2], "bf16").tolist() == [0x7F80]
    assert nvls.nvls_reduce(m, [0, 2, 1], "bf16").tolist() == [mx]
    m = np.array([[mx], [mx], [0xFF80]], dtype=np.uint16)
    assert nvls.nvls_reduce(m, [0, 1, 2], "bf16").tolist() == [0x7FC0]


@pytest.mark.parametrize("dtype", nvls.DTYPES)
def test_single_member_is_identity(dtype):
    """count = 1: every pattern comes out unchanged (-0 included), every NaN canonical."""
    fmt = FMT[dtype]
    out = nvls.nvls_reduce(ALL16[None, :], [0], dtype)
    nan = ((ALL16 & fmt.exp_mask) == fmt.exp_mask) & ((ALL16 & fmt.frac_mask) != 0)
    assert np.array_equal(out[~nan], ALL16[~nan]) and (out[nan] == fmt.qnan).all()


@pytest.mark.parametrize("dtype", nvls.DTYPES)
def test_signed_zeros_and_unlisted_members(dtype):
    """-0 + -0 = -0; +0 + -0 = +0; x + (-x) = +0; members not in ``order`` do not count."""
    one = 0x3C00 if dtype == "fp16" else 0x3F80
    m = np.array([[0x8000, 0x8000, one], [0x8000, 0x0000, one | 0x8000], [0x7E00, 0x7E00, 0x7E00]],
                 dtype=np.uint16)
    assert nvls.nvls_reduce(m, [0, 1], dtype).tolist() == [0x8000, 0x0000, 0x0000]
    assert nvls.nvls_reduce(m, [1, 0], dtype).tolist() == [0x8000, 0x0000, 0x0000]


def test_inputs_as_list_and_float16():
    a = np.array([1.5, -2.0], dtype=np.float16)
    b = np.array([0.25, 4.0], dtype=np.float16)
    out = nvls.nvls_reduce([a, b], [1, 0], "FP16")
    assert out.tolist() == np.array([1.75, 2.0], dtype=np.float16).view(np.uint16).tolist()


@pytest.mark.parametrize("members, order, dtype, error, message", [
    (np.zeros((2, 3), np.uint16), [0, 1], "int8", ValueError,
     r"dtype must be one of fp16, bf16 \(NVLS reduces no other\), not 'int8'"),
    (np.zeros((2, 3), np.float32), [0, 1], "bf16", TypeError,
     r"members must hold uint16 bit patterns \(or float16 for FP16\), not float32"),
    (np.zeros(3, np.uint16), [0], "fp16", ValueError,
     r"members must be N equal-length arrays, shape \(N, n\); got shape \(3,\)"),
    (np.zeros((2, 3), np.uint16), [], "fp16", ValueError,
     "order must name between 1 and N=2 members, not 0"),
    (np.zeros((2, 3), np.uint16), [0, 2], "fp16", ValueError,
     "order entries must be member indices 0..1, not 2"),
    (np.zeros((3, 3), np.uint16), [1, 1], "fp16", ValueError,
     r"order must name each member at most once: \[1, 1\]"),
])
def test_errors(members, order, dtype, error, message):
    with pytest.raises(error, match=f"^{message}$"):
        nvls.nvls_reduce(members, order, dtype)
