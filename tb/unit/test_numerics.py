"""Tests of the golden model of the ISA arithmetic (scin.sim.numerics).

The references here are written independently of the model: Python
``Fraction`` arithmetic with Python's own round-half-even (``round()`` on a
Fraction), and NumPy's float64 -> float16 cast where the float64 sum is
provably exact. Hypothesis runs derandomized so every failure replays.
"""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scin.sim.fp import (
    BF16, FP16, bf16_bits_to_float32, bit_length, float_to_bf16_bits, fp16_bits, fp16_from_bits,
    fp16_to_fixed, round_fixed,
)
from scin.sim.numerics import (
    BLOCK, DTYPES, MAX_PARTICIPANTS, OPS, Reduced, Status, allgather, allreduce, allreduce_bf16,
    allreduce_fp16, allreduce_int8, broadcast, collective, dequantize_int8, dequantize_int8_fixed,
    num_blocks, quantize_int8, quantize_int8_fixed, reduce, reduce_scatter,
)
from scin.tb.fp_reference import binade, rne, to_fraction

PROPS = settings(derandomize=True, max_examples=300, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# --------------------------------------------------------------------------- independent references

def ulp(a: Fraction, fmt) -> Fraction:
    """Spacing of the format at magnitude a (binade of a, subnormal spacing below)."""
    e = binade(abs(a), fmt) if a != 0 else fmt.emin
    return Fraction(2) ** (e - fmt.frac_bits)


def is_finite(bits: int, fmt) -> bool:
    return (bits & fmt.exp_mask) != fmt.exp_mask


def special_ref(column, fmt):
    """(bits, INVALID?) of the NaN/Inf rule for one element, or None if all finite."""
    col = [int(b) for b in column]
    nan = any(not is_finite(b, fmt) and b & fmt.frac_mask for b in col)
    pinf = any(b == fmt.inf for b in col)
    ninf = any(b == fmt.inf | fmt.sign_mask for b in col)
    if nan or (pinf and ninf):
        return fmt.qnan
    if pinf:
        return fmt.inf
    if ninf:
        return fmt.inf | fmt.sign_mask
    return None


def ref_quantize_block(values, fmt=FP16):
    """Reference block quantizer on exact Fractions: (q list, scale bits, saturated)."""
    m = max((abs(v) for v in values), default=Fraction(0))
    s_bits = rne(m / 127, FP16)
    saturated = s_bits == FP16.inf
    if saturated:
        s_bits = FP16.max_finite
    s = to_fraction(s_bits, FP16)
    q = [0 if s == 0 else max(-127, min(127, round(v / s))) for v in values]
    return q, s_bits, saturated


# --------------------------------------------------------------------------- strategies

finite_fp16 = st.integers(0, 0xFFFF).filter(lambda b: is_finite(b, FP16))
any_fp16 = st.one_of(finite_fp16,
                     st.sampled_from([0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0x8000, 0x0000]))
finite_bf16 = st.integers(0, 0xFFFF).filter(lambda b: is_finite(b, BF16))
any_bf16 = st.one_of(finite_bf16, st.sampled_from([0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x8000, 0x0000]))


@st.composite
def matrices(draw, elem, max_n=6, max_part=16):
    n_part = draw(st.integers(1, max_part))
    n = draw(st.integers(0, max_n))
    rows = draw(st.lists(st.lists(elem, min_size=n, max_size=n), min_size=n_part, max_size=n_part))
    return np.array(rows, dtype=np.uint16).reshape(n_part, n)


@st.composite
def clustered_bf16(draw, max_n=4, max_part=16, spread=40):
    """BF16 inputs whose exponents sit within `spread` below a common top exponent."""
    n_part = draw(st.integers(1, max_part))
    n = draw(st.integers(1, max_n))
    top = draw(st.integers(1, 250))
    out = np.zeros((n_part, n), dtype=np.uint16)
    for i in range(n_part):
        for j in range(n):
            e = max(0, top - draw(st.integers(0, spread)))
            out[i, j] = (draw(st.booleans()) << 15) | (e << 7) | draw(st.integers(0, 127))
    return out


@st.composite
def close_fp16(draw, max_n=4, max_part=16):
    """FP16 inputs in a narrow exponent range, so that cancellations and ties are common."""
    n_part = draw(st.integers(1, max_part))
    n = draw(st.integers(1, max_n))
    top = draw(st.integers(0, 30))
    vals = [[(draw(st.booleans()) << 15) | (max(0, top - draw(st.integers(0, 3))) << 10)
             | draw(st.integers(0, 1023))
             for _ in range(n)] for _ in range(n_part)]
    return np.array(vals, dtype=np.uint16)


# --------------------------------------------------------------------------- fp helpers

@PROPS
@given(st.integers(0, 2**62 - 1))
def test_bit_length_matches_python(v):
    assert bit_length(np.array([v], dtype=np.int64))[0] == v.bit_length()


@PROPS
@given(st.integers(-(2**61), 2**61), st.integers(-180, 40))
def test_round_fixed_matches_fraction(t, k):
    for fmt in (FP16, BF16):
        bits, ovf = round_fixed(np.array([t], dtype=np.int64), k, fmt)
        want = rne(Fraction(t) * Fraction(2) ** k, fmt)
        assert int(bits[0]) == want
        assert bool(ovf[0]) == ((want & ~fmt.sign_mask) == fmt.inf)


def test_fp16_to_fixed_is_exact_for_all_finite_patterns():
    bits = np.arange(0x10000, dtype=np.uint32).astype(np.uint16)
    finite = (bits & 0x7C00) != 0x7C00
    fixed = fp16_to_fixed(bits[finite])
    want = bits[finite].view(np.float16).astype(np.float64) * 2.0**24  # exact: < 2**40
    assert np.array_equal(fixed, want.astype(np.int64))


def test_bf16_conversions_round_trip_and_round_to_even():
    bits = np.arange(0x10000, dtype=np.uint32).astype(np.uint16)
    finite = (bits & 0x7F80) != 0x7F80
    assert np.array_equal(float_to_bf16_bits(bf16_bits_to_float32(bits[finite])), bits[finite])
    # 1 + 2**-8 is halfway between 1 and 1 + 2**-7: ties to even (1.0); 1 + 3 * 2**-8 -> 1 + 2**-6.
    assert float_to_bf16_bits(np.float32(1 + 2**-8)) == 0x3F80
    assert float_to_bf16_bits(np.float32(1 + 3 * 2**-8)) == 0x3F82


# --------------------------------------------------------------------------- FP16 properties

def check_fp16(bits):
    out, elem, status = allreduce_fp16(bits)
    assert out.dtype == np.uint16 and elem.dtype == np.uint8
    for j in range(bits.shape[1]):
        col = bits[:, j]
        special = special_ref(col, FP16)
        if special is not None:
            assert out[j] == special and elem[j] == Status.INVALID
            continue
        want = rne(sum(to_fraction(int(b), FP16) for b in col), FP16)
        assert out[j] == want, (col, hex(out[j]), hex(want))
        assert elem[j] == (Status.OVERFLOW if (want & 0x7FFF) == FP16.inf else Status.NONE)
    assert status == Status(int(np.bitwise_or.reduce(elem))) if elem.size else status == Status.NONE


@PROPS
@given(matrices(any_fp16))
def test_fp16_matches_exact_reference(bits):
    check_fp16(bits)


@PROPS
@given(close_fp16())
def test_fp16_matches_exact_reference_with_cancellation(bits):
    check_fp16(bits)


@PROPS
@given(matrices(finite_fp16, max_n=32))
def test_fp16_matches_numpy_cast_of_exact_float64_sum(bits):
    # Each input is a multiple of 2**-24 below 2**16, so the float64 sum of <= 16 of
    # them needs < 45 significant bits: exact, and numpy's float64->float16 cast
    # rounds once, to nearest even.
    out, _, _ = allreduce_fp16(fp16_from_bits(bits))
    with np.errstate(over="ignore"):
        want = bits.view(np.float16).astype(np.float64).sum(axis=0).astype(np.float16)
    want = np.where(want == 0, np.float16(0), want)  # exact zero is +0
    assert np.array_equal(fp16_bits(out), fp16_bits(want))


def assert_order_independent(allreduce, bits, rnd):
    """``allreduce`` of the rows of ``bits`` gives the same sums, flags and count in a shuffled
    order of the rows (``rnd`` draws the order); return ``allreduce(bits)``."""
    perm = list(range(bits.shape[0]))
    rnd.shuffle(perm)
    a, b = allreduce(bits), allreduce(bits[perm])
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]
    return a


@PROPS
@given(matrices(any_fp16, max_part=8), st.randoms(use_true_random=False))
def test_fp16_order_independent(bits, rnd):
    assert_order_independent(allreduce_fp16, bits, rnd)


# --------------------------------------------------------------------------- BF16 properties

def bf16_terms(col):
    """(E, exact sum S, delta = (N-1) * 2**(E-166)) of one all-finite element."""
    exps = [max((int(b) >> 7) & 0xFF, 1) for b in col]
    e_top = max(exps)
    s = sum(to_fraction(int(b), BF16) for b in col)
    delta = (len(col) - 1) * Fraction(2) ** (e_top - 166)
    return e_top, s, delta, exps


@st.composite
def cancelling_bf16(draw, max_extra=6, low=20, high=40):
    """One column: a big value and its negation plus small terms 2**-low..2**-high below it.

    The big pair cancels exactly, so the low-order bits of the aligned small
    terms decide the result: this is where the guard-bit count shows.
    """
    top = draw(st.integers(high + 1, 250))
    big = (top << 7) | draw(st.integers(0, 127))
    col = [big, big | 0x8000]
    for _ in range(draw(st.integers(1, max_extra))):
        e = top - draw(st.integers(low, high))
        col.append((draw(st.booleans()) << 15) | (e << 7) | draw(st.integers(0, 127)))
    order = draw(st.permutations(range(len(col))))
    return np.array([[col[i]] for i in order], dtype=np.uint16)


@PROPS
@given(st.one_of(clustered_bf16(spread=32), clustered_bf16(spread=0), cancelling_bf16(high=32),
                 cancelling_bf16(low=30, high=32)))
def test_bf16_exact_when_exponent_span_at_most_32(bits):
    out, elem, _ = allreduce_bf16(bits)
    for j in range(bits.shape[1]):
        want = rne(sum(to_fraction(int(b), BF16) for b in bits[:, j]), BF16)
        assert out[j] == want
        assert elem[j] == (Status.OVERFLOW if (want & 0x7FFF) == BF16.inf else Status.NONE)


@PROPS
@given(st.one_of(clustered_bf16(spread=45), clustered_bf16(spread=60),
                 clustered_bf16(spread=34, max_part=3), cancelling_bf16(low=28, high=45),
                 cancelling_bf16(max_extra=14, low=30, high=60)))
def test_bf16_truncation_error_bound(bits):
    out, _, _ = allreduce_bf16(bits)
    for j in range(bits.shape[1]):
        col = bits[:, j]
        e_top, s, delta, exps = bf16_terms(col)
        r_bits = int(out[j])
        lo, hi = rne(s - delta, BF16), rne(s + delta, BF16)
        if any((b & 0x7FFF) == BF16.inf for b in (r_bits, lo, hi)):
            continue  # overflow is covered by named tests
        r, exact = to_fraction(r_bits, BF16), to_fraction(rne(s, BF16), BF16)
        # (1) monotonicity: RNE(S - d) <= R <= RNE(S + d).
        assert to_fraction(lo, BF16) <= r <= to_fraction(hi, BF16)
        # (2) |R - RNE(S)| <= 2 d + ulp(|S| + d).
        assert abs(r - exact) <= 2 * delta + ulp(abs(s) + delta, BF16)
        # (3) one ulp at most unless the sum cancels far below the top binade.
        if abs(s) > delta and 2 * delta <= ulp(abs(s) - delta, BF16):
            assert abs(r - exact) <= ulp(max(abs(r), abs(exact)), BF16)
        # (4) exact whenever no nonzero term was shifted by more than 32.
        if all(e_top - e <= 32 or (int(b) & 0x7FFF) == 0 for b, e in zip(col, exps)):
            assert r_bits == rne(s, BF16)


@PROPS
@given(matrices(any_bf16, max_part=8), st.randoms(use_true_random=False))
def test_bf16_order_independent_and_special_rule(bits, rnd):
    a = assert_order_independent(allreduce_bf16, bits, rnd)
    for j in range(bits.shape[1]):
        special = special_ref(bits[:, j], BF16)
        if special is not None:
            assert a[0][j] == special and a[1][j] == Status.INVALID


# --------------------------------------------------------------------------- INT8 properties

@st.composite
def int8_messages(draw, max_part=8, max_n=140, bad_scales=False):
    n_part = draw(st.integers(1, max_part))
    n = draw(st.integers(0, max_n))
    nb = num_blocks(n)
    q = np.array(draw(st.lists(st.integers(-128, 127), min_size=n_part * n, max_size=n_part * n)),
                 dtype=np.int8).reshape(n_part, n)
    scale = st.integers(0, 0x7BFF) if not bad_scales else st.one_of(
        st.integers(0, 0x7BFF), st.sampled_from([0x8000, 0xBC00, 0x7C00, 0x7E00, 0xFC00]))
    s = np.array(draw(st.lists(scale, min_size=n_part * nb, max_size=n_part * nb)),
                 dtype=np.uint16).reshape(n_part, nb)
    return q, s


@PROPS
@given(int8_messages(bad_scales=True))
def test_int8_matches_fraction_reference(msg):
    q, s = msg
    q_out, s_out, blk, status = allreduce_int8(q, s)
    n_part, n = q.shape
    for b in range(num_blocks(n)):
        sl = slice(b * BLOCK, min(n, (b + 1) * BLOCK))
        col_scales = [int(x) for x in s[:, b]]
        if any(x & 0x8000 or not is_finite(x, FP16) for x in col_scales):
            assert s_out[b] == 0x7E00 and blk[b] == Status.INVALID and not q_out[sl].any()
            continue
        vals = [sum(int(q[i, j]) * to_fraction(col_scales[i], FP16) for i in range(n_part))
                for j in range(sl.start, sl.stop)]
        want_q, want_s, saturated = ref_quantize_block(vals)
        assert s_out[b] == want_s and list(q_out[sl]) == want_q
        assert blk[b] == (Status.OVERFLOW if saturated else Status.NONE)
        s_val = to_fraction(want_s, FP16)
        for v, qo in zip(vals, want_q):
            if abs(qo) < 127 and s_val > 0:
                assert abs(qo * s_val - v) <= s_val / 2
    assert status == (Status(int(np.bitwise_or.reduce(blk))) if blk.size else Status.NONE)


@PROPS
@given(int8_messages(bad_scales=True), st.randoms(use_true_random=False))
def test_int8_order_independent(msg, rnd):
    q, s = msg
    perm = list(range(q.shape[0]))
    rnd.shuffle(perm)
    a, b = allreduce_int8(q, s), allreduce_int8(q[perm], s[perm])
    assert all(np.array_equal(x, y) for x, y in zip(a[:3], b[:3])) and a[3] == b[3]


@PROPS
@given(st.lists(finite_fp16, min_size=0, max_size=200))
def test_quantizer_matches_reference_and_round_trips(xs):
    x = np.array(xs, dtype=np.uint16).view(np.float16)
    q, s = quantize_int8(x)
    assert q.dtype == np.int8 and s.dtype == np.float16 and s.shape == (num_blocks(len(xs)),)
    y = dequantize_int8(q, s)
    for b in range(num_blocks(len(xs))):
        sl = slice(b * BLOCK, (b + 1) * BLOCK)
        vals = [to_fraction(v, FP16) for v in xs[sl]]
        want_q, want_s, saturated = ref_quantize_block(vals)
        assert not saturated and int(fp16_bits(s[b])) == want_s and list(q[sl]) == want_q
        s_val = to_fraction(want_s, FP16)
        for v, yy, qq in zip(vals, y[sl], want_q):
            assert Fraction(yy) == s_val * qq  # dequantize is exact
            if s_val >= Fraction(2) ** -14:  # normal scale: error at most half a step
                assert abs(Fraction(yy) - v) <= s_val / 2
        if s_val >= Fraction(2) ** -14:  # the block maximum lands on +-127
            assert np.abs(q[sl]).max() == 127
    assert np.array_equal(dequantize_int8_fixed(q, s), q.astype(np.int64) * np.repeat(
        fp16_to_fixed(fp16_bits(s)), BLOCK)[: len(xs)])


def test_int8_allreduce_of_one_quantized_participant_is_identity():
    rng = np.random.default_rng(1234)
    x = (rng.standard_normal((3, 1000)) * rng.uniform(0.01, 100, (3, 1))).astype(np.float16)
    q, s = quantize_int8(x)
    for i in range(3):
        q_out, s_out, blk, status = allreduce_int8(q[i:i + 1], s[i:i + 1])
        assert np.array_equal(q_out, q[i]) and np.array_equal(fp16_bits(s_out), fp16_bits(s[i]))
        assert status == Status.NONE


# --------------------------------------------------------------------------- named edge cases: FP16

def f16(*vals):
    return np.array(vals, dtype=np.float16)


def fp16_sum(*rows):
    out, elem, status = allreduce_fp16(np.array(rows, dtype=np.float16))
    return fp16_bits(out), elem, status


@pytest.mark.parametrize("rows, want, flag", [
    pytest.param([[0.0], [0.0]], 0x0000, Status.NONE, id="zeros"),
    pytest.param([[-0.0], [-0.0], [-0.0]], 0x0000, Status.NONE,
                 id="all-negative-zero-gives-plus-zero"),
    pytest.param([[-0.0]], 0x0000, Status.NONE, id="single-negative-zero"),
    pytest.param([[1.5], [-1.5]], 0x0000, Status.NONE, id="cancellation-to-plus-zero"),
    pytest.param([[65504.0], [0.0]], 0x7BFF, Status.NONE, id="max-finite"),
    pytest.param([[-65504.0], [-0.0]], 0xFBFF, Status.NONE, id="min-finite"),
    pytest.param([[65504.0], [8.0]], 0x7BFF, Status.NONE, id="below-half-ulp-above-max"),
    pytest.param([[65504.0], [16.0]], 0x7C00, Status.OVERFLOW, id="tie-at-max-rounds-to-inf"),
    pytest.param([[65504.0], [65504.0]], 0x7C00, Status.OVERFLOW, id="overflow"),
    pytest.param([[-65504.0], [-65504.0]], 0xFC00, Status.OVERFLOW, id="negative-overflow"),
    pytest.param([[65504.0], [65504.0], [-65504.0]], 0x7BFF, Status.NONE,
                 id="exact-intermediate-no-overflow"),
    pytest.param([[2.0**-24], [2.0**-24]], 0x0002, Status.NONE, id="subnormals"),
    pytest.param([[1023 * 2.0**-24], [2.0**-24]], 0x0400, Status.NONE,
                 id="subnormal-carries-to-normal"),
    pytest.param([[2.0**-14], [-2.0**-24]], 0x03FF, Status.NONE, id="normal-to-subnormal"),
    pytest.param([[2048.0], [1.0]], 0x6800, Status.NONE, id="tie-rounds-down-to-even"),
    pytest.param([[2050.0], [1.0]], 0x6802, Status.NONE, id="tie-rounds-up-to-even"),
    pytest.param([[-2050.0], [-1.0]], 0xE802, Status.NONE, id="negative-tie-rounds-to-even"),
    pytest.param([[2048.0], [1.0], [2.0**-24]], 0x6801, Status.NONE, id="sticky-breaks-tie"),
    pytest.param([[2047.0], [1.0]], 0x6800, Status.NONE, id="carry-into-exponent"),
])
def test_fp16_named(rows, want, flag):
    out, elem, status = fp16_sum(*rows)
    assert (int(out[0]), Status(int(elem[0])), status) == (want, flag, flag)


@pytest.mark.parametrize("col, want", [
    pytest.param([1.0, np.nan], 0x7E00, id="nan"),
    pytest.param([np.inf, 1.0], 0x7C00, id="plus-inf"),
    pytest.param([-np.inf, 1.0], 0xFC00, id="minus-inf"),
    pytest.param([np.inf, np.inf], 0x7C00, id="two-plus-inf"),
    pytest.param([np.inf, -np.inf], 0x7E00, id="opposite-infs"),
    pytest.param([np.inf, 65504.0, 65504.0], 0x7C00,
                 id="inf-with-overflowing-finite-is-invalid-only"),
    pytest.param([-np.inf, np.nan], 0x7E00, id="nan-and-inf"),
])
def test_fp16_non_finite(col, want):
    out, elem, status = fp16_sum(*[[v] for v in col])
    assert int(out[0]) == want and elem[0] == Status.INVALID and status == Status.INVALID


def test_fp16_nan_payload_and_sign_canonicalised():
    bits = np.array([[0x7C01, 0x0000], [0x3C00, 0xFE00]], dtype=np.uint16)  # sNaN payload, -qNaN
    out, elem, status = allreduce_fp16(bits)
    assert out.dtype == np.uint16 and list(out) == [0x7E00, 0x7E00]


def test_fp16_status_per_element_and_aggregate():
    out, elem, status = fp16_sum([1.0, 65504.0, np.nan, 0.0], [2.0, 65504.0, 1.0, 0.0])
    assert list(out) == [0x4200, 0x7C00, 0x7E00, 0x0000]
    assert list(elem) == [0, Status.OVERFLOW, Status.INVALID, 0]
    assert status == Status.OVERFLOW | Status.INVALID


def test_fp16_returns_kind_given_and_empty_message():
    out, elem, status = allreduce_fp16(np.zeros((3, 0), dtype=np.float16))
    assert out.dtype == np.float16 and out.shape == (0,) and elem.shape == (0,)
    assert status == Status.NONE
    out, _, _ = allreduce_fp16(np.zeros((2, 5), dtype=np.uint16))
    assert out.dtype == np.uint16


# --------------------------------------------------------------------------- named edge cases: BF16

def bf(*patterns):
    return np.array([[p] for p in patterns], dtype=np.uint16)


@pytest.mark.parametrize("col, want, flag", [
    pytest.param([0x8000, 0x8000], 0x0000, Status.NONE, id="negative-zeros-give-plus-zero"),
    pytest.param([0x3F80, 0xBF80], 0x0000, Status.NONE, id="cancellation"),
    pytest.param([0x0001, 0x0001], 0x0002, Status.NONE, id="subnormals"),
    pytest.param([0x007F, 0x0001], 0x0080, Status.NONE, id="subnormal-carries-to-normal"),
    pytest.param([0x3F80, 0x3B80], 0x3F80, Status.NONE, id="tie-rounds-down-to-even"),
    pytest.param([0x3F81, 0x3B80], 0x3F82, Status.NONE, id="tie-rounds-up-to-even"),
    pytest.param([0x3FFF, 0x3B80], 0x4000, Status.NONE, id="carry-into-exponent"),
    pytest.param([0x7F7F, 0x0000], 0x7F7F, Status.NONE, id="max-finite"),
    pytest.param([0x7F7F, 0x7F7F], 0x7F80, Status.OVERFLOW, id="overflow"),
    pytest.param([0xFF7F, 0xFF7F], 0xFF80, Status.OVERFLOW, id="negative-overflow"),
    pytest.param([0x7F80, 0x3F80], 0x7F80, Status.INVALID, id="plus-inf"),
    pytest.param([0xFF80, 0x7F80], 0x7FC0, Status.INVALID, id="opposite-infs"),
    pytest.param([0x7F81, 0x3F80], 0x7FC0, Status.INVALID, id="nan"),
    pytest.param([0x7F80, 0x7F7F, 0x7F7F], 0x7F80, Status.INVALID,
                 id="inf-with-overflowing-finite"),
    # 1 + 2**-40: the small term is shifted out entirely, as is RNE's verdict anyway.
    pytest.param([0x3F80, 0x2B80], 0x3F80, Status.NONE, id="far-term-dropped"),
])
def test_bf16_named(col, want, flag):
    out, elem, status = allreduce_bf16(bf(*col))
    assert (int(out[0]), Status(int(elem[0])), status) == (want, flag, flag)


def test_bf16_truncation_visible_after_cancellation():
    # 1 - 1 + 2**-33 * (1 + 2**-7): the last term is shifted by 33 > 32 and loses its
    # lowest significand bit, so the result is 2**-33, one ulp below RNE(S) = S,
    # within the documented bound.
    col = [0x3F80, 0xBF80, ((127 - 33) << 7) | 1]
    out, elem, _ = allreduce_bf16(bf(*col))
    s = sum(to_fraction(b, BF16) for b in col)
    assert rne(s, BF16) == col[2]
    assert int(out[0]) == (127 - 33) << 7 and elem[0] == Status.NONE
    assert abs(to_fraction(int(out[0]), BF16) - s) < 2 * Fraction(2) ** (127 - 166)


def test_bf16_term_shifted_by_exactly_32_is_kept_whole():
    # 1 - 1 + 2**-32 * (1 + 2**-7): a shift of exactly 32 still keeps every bit.
    col = [0x3F80, ((127 - 32) << 7) | 1, 0xBF80]
    out, _, _ = allreduce_bf16(bf(*col))
    assert int(out[0]) == col[1]


def test_bf16_dtype_and_empty():
    out, elem, status = allreduce_bf16(np.zeros((2, 0), dtype=np.uint16))
    assert out.shape == (0,) and status == Status.NONE
    with pytest.raises(TypeError,
                       match=r"bits must have dtype uint16 \(BF16 bit patterns\), not float32"):
        allreduce_bf16(np.zeros((2, 3), dtype=np.float32))


# --------------------------------------------------------------------------- named edge cases: INT8

def one_block(q_rows, s_rows):
    q = np.array(q_rows, dtype=np.int8)
    s = np.array(s_rows, dtype=np.float16).reshape(len(q_rows), -1)
    return allreduce_int8(q, s)


def test_int8_all_zero_block():
    q_out, s_out, blk, status = one_block([[0] * 64, [5] * 64], [[1.0], [0.0]])
    assert not q_out.any() and fp16_bits(s_out)[0] == 0 and status == Status.NONE


def test_int8_q_ties_round_to_even():
    # V = [127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5] with s_out = 1 exactly.
    q0 = [127, 0, 1, 2, 0, -1, -2]
    q1 = [0, 1, 1, 1, -1, -1, -1]
    q_out, s_out, _, status = one_block([q0, q1], [[1.0], [0.5]])
    assert s_out[0] == 1.0 and list(q_out) == [127, 0, 2, 2, 0, -2, -2] and status == Status.NONE


@pytest.mark.parametrize("s0, want", [
    pytest.param(1.0, 1.0, id="scale-tie-rounds-down-to-even"),
    pytest.param(1 + 2**-10, 1 + 2**-9, id="scale-tie-rounds-up-to-even"),
])
def test_int8_scale_ties_round_to_even(s0, want):
    # M / 127 = s0 + 2**-11 exactly, halfway between two FP16 values.
    q_out, s_out, _, _ = one_block([[127], [127]], [[s0], [2.0**-11]])
    assert s_out[0] == want


def test_int8_saturated_scale():
    q_out, s_out, blk, status = one_block([[127, -127, 64], [127, -127, 0]], [[65504.0], [65504.0]])
    assert fp16_bits(s_out)[0] == 0x7BFF and blk[0] == Status.OVERFLOW and status == Status.OVERFLOW
    assert list(q_out) == [127, -127, 64]  # 254 and -254 clamp; 64 * 65504 / 65504 = 64


def test_int8_minus_128_is_exact_input():
    q_out, s_out, _, _ = one_block([[-128]], [[1.0]])
    assert s_out[0] == np.float16(128 / 127) and q_out[0] == -127


def test_int8_tiny_sum_gives_zero_scale_and_subnormal_scale():
    q_out, s_out, _, status = one_block([[1]], [[2.0**-24]])
    assert fp16_bits(s_out)[0] == 0 and q_out[0] == 0 and status == Status.NONE
    q_out, s_out, _, _ = one_block([[127, 1]], [[2.0**-20]])
    assert s_out[0] == 2.0**-20 and list(q_out) == [127, 1]


@pytest.mark.parametrize("bad", [0xBC00, 0x8000, 0x7C00, 0xFC00, 0x7E00])
def test_int8_invalid_scale_poisons_only_its_block(bad):
    q = np.full((2, 100), 3, dtype=np.int8)
    s = np.array([[0x3C00, 0x3C00], [bad, 0x3C00]], dtype=np.uint16)
    q_out, s_out, blk, status = allreduce_int8(q, s)
    assert s_out.dtype == np.uint16
    assert s_out[0] == 0x7E00 and not q_out[:64].any() and blk[0] == Status.INVALID
    assert s_out[1] == int(fp16_bits(np.float16(6 / 127)))
    assert (q_out[64:] == 127).all() and blk[1] == 0
    assert status == Status.INVALID


def test_int8_short_last_block_equals_zero_padding():
    rng = np.random.default_rng(7)
    q = rng.integers(-127, 128, (4, 70), dtype=np.int8)
    s = rng.uniform(0, 2, (4, 2)).astype(np.float16)
    padded = np.concatenate([q, np.zeros((4, 58), dtype=np.int8)], axis=1)
    a, b = allreduce_int8(q, s), allreduce_int8(padded, s)
    assert np.array_equal(a[0], b[0][:70]) and np.array_equal(a[1], b[1]) and not b[0][70:].any()


def test_int8_empty_message():
    q_out, s_out, blk, status = allreduce_int8(np.zeros((2, 0), np.int8),
                                               np.zeros((2, 0), np.float16))
    assert q_out.shape == s_out.shape == blk.shape == (0,) and status == Status.NONE


def test_quantize_2d_and_empty():
    x = np.arange(-100, 100, dtype=np.float16).reshape(2, 100)
    q, s = quantize_int8(x)
    assert q.shape == (2, 100) and s.shape == (2, 2)
    for i in range(2):
        qi, si = quantize_int8(x[i])
        assert np.array_equal(qi, q[i]) and np.array_equal(si, s[i])
    q, s = quantize_int8(np.zeros(0, np.float16))
    assert q.shape == (0,) and s.shape == (0,)


def test_allreduce_is_one_entry_for_every_dtype():
    """``allreduce(dtype, ...)`` returns what the per-dtype function does, in one shape."""
    from scin.hdl.isa import DType
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 130)).astype(np.float16)
    bits = rng.integers(0, 1 << 16, size=(3, 130)).astype(np.uint16)
    q, s = quantize_int8(x)
    for dtype, args, ref in (("fp16", (x,), allreduce_fp16(x)),
                             ("bf16", (bits,), allreduce_bf16(bits)),
                             ("int8", (q, s), allreduce_int8(q, s))):
        for name in (dtype, dtype.upper(), DType[dtype.upper()]):
            got = allreduce(name, *args)
            assert got.status == ref[-1] and np.array_equal(got.status_per, ref[-2])
            assert np.array_equal(got.out, ref[0]) and got.out_bytes == ref[0].tobytes()
            if dtype == "int8":
                assert np.array_equal(got.scales, ref[1]) and got.scale_bytes == ref[1].tobytes()
            else:
                assert got.scales is None and got.scale_bytes is None


def test_allreduce_refuses_a_wrong_dtype_or_scales():
    x = np.ones((2, 3), dtype=np.float16)
    with pytest.raises(ValueError, match=r"^dtype must be one of fp16, bf16, int8, not 'fp32'$"):
        allreduce("fp32", x)
    with pytest.raises(ValueError, match=r"^fp16 takes no scales$"):
        allreduce("fp16", x, np.ones((2, 1), np.float16))
    with pytest.raises(ValueError, match=r"^int8 needs the input block scales$"):
        allreduce("int8", np.ones((2, 3), np.int8))


# --------------------------------------------------------------------------- error messages

def test_error_messages():
    with pytest.raises(TypeError, match=r"x must have dtype float16 or uint16 "
                                        r"\(FP16 bit patterns\), not float32"):
        allreduce_fp16(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError,
                       match=r"x must be a 2-D array of shape \(N, n\), not 1-D with shape \(3,\)"):
        allreduce_fp16(np.zeros(3, np.float16))
    with pytest.raises(ValueError, match=r"x must have N >= 1 participants \(rows\), not 0"):
        allreduce_fp16(np.zeros((0, 3), np.float16))
    with pytest.raises(ValueError, match=rf"bits must have N <= {MAX_PARTICIPANTS} participants"):
        allreduce_bf16(np.zeros((MAX_PARTICIPANTS + 1, 1), np.uint16))
    with pytest.raises(TypeError, match=r"q must have dtype int8, not int16"):
        allreduce_int8(np.zeros((4, 100), np.int16), np.zeros((4, 2), np.float16))
    with pytest.raises(ValueError, match=r"scales must have shape \(N, ceil\(n/64\)\) = "
                                         r"\(4, 2\), not \(4, 3\)"):
        allreduce_int8(np.zeros((4, 100), np.int8), np.zeros((4, 3), np.float16))
    with pytest.raises(TypeError, match=r"scales must have dtype float16 or uint16"):
        allreduce_int8(np.zeros((4, 100), np.int8), np.zeros((4, 2), np.float32))
    with pytest.raises(TypeError, match=r"x must have dtype float16, not float64"):
        quantize_int8(np.zeros(3))
    with pytest.raises(ValueError, match=r"x must be finite; x\[2\] is np.float16\(inf\)"):
        quantize_int8(f16(1, 2, np.inf, np.nan))
    with pytest.raises(ValueError, match=r"x must be finite; x\[\(1, 0\)\] is np.float16\(nan\)"):
        quantize_int8(np.array([[1, 2], [np.nan, 3]], np.float16))
    with pytest.raises(ValueError, match=r"x must be 1-D \(n,\) or 2-D \(N, n\), not 3-D"):
        quantize_int8(np.zeros((1, 1, 1), np.float16))
    with pytest.raises(ValueError, match=r"scales must have shape q.shape\[:-1\] \+ "
                                         r"\(ceil\(n/64\),\) = \(2,\), not \(3,\)"):
        dequantize_int8(np.zeros(65, np.int8), np.zeros(3, np.float16))
    with pytest.raises(ValueError, match=r"scales must be finite with the sign bit clear"):
        dequantize_int8_fixed(np.zeros(1, np.int8), np.array([-1.0], np.float16))


def test_quantize_int8_fixed_is_the_switch_requantizer():
    v = np.array([127 * 2**24, -3, 0, 2**57], dtype=np.int64)
    q, s, saturated = quantize_int8_fixed(v[:3])
    assert s[0] == 1.0 and list(q) == [127, 0, 0] and not saturated.any()
    _, s, saturated = quantize_int8_fixed(v[3:])
    assert fp16_bits(s)[0] == 0x7BFF and saturated[0]
    with pytest.raises(ValueError, match=r"v must satisfy \|v\| < 2\*\*58"):
        quantize_int8_fixed(np.array([2**58], dtype=np.int64))
    with pytest.raises(TypeError, match=r"v must have an integer dtype, not float64"):
        quantize_int8_fixed(np.zeros(2))


def test_accuracy_script_smoke(tmp_path, capsys):
    from scin.scripts.accuracy import main
    assert main(["--endpoints", "2,4", "--seeds", "1", "--tokens", "2", "--hidden", "256",
                 "--outliers", "2", "--out", str(tmp_path), "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "| inq | rel. L2 |" in out
    assert (tmp_path / "accuracy.csv").read_text().startswith("mode,N,")


# --------------------------------------------------------------------------- collectives

#: The collective properties: fewer examples (each runs N All-Reduces) but the same seeding.
COLL = settings(PROPS, max_examples=100)

#: Bit patterns every copying collective must keep: +-0, +-Inf, NaNs with payloads and either sign.
SPECIAL_BITS = {
    "fp16": [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x7D55, 0xFE00, 0xFFFF, 0x0001,
             0x7BFF],
    "bf16": [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x7FAA, 0xFFC1, 0xFFFF, 0x0001,
             0x7F7F],
}
#: INT8 scale patterns: negative (-0.0 included), Inf and NaN scales (invalid in a reduction) and
#: extremes.
SPECIAL_SCALES = [0x0000, 0x8000, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01, 0x0001, 0x7BFF]


def random_messages(dtype, rng, n_part, n, special=0.1, wide=True, as_float=False):
    """(data, scales) of N random messages of n elements, with special patterns mixed in.

    ``wide`` draws FP16/BF16 data from every bit pattern (sums often overflow) and INT8 scales from
    every finite non-negative one; otherwise magnitudes stay below 2, so most results are ordinary.
    A fraction ``special`` of the patterns is replaced by ``SPECIAL_BITS`` / ``SPECIAL_SCALES``.
    """
    def patterns(shape, specials, limit, signed):
        bits = rng.integers(0, limit, size=shape, dtype=np.uint32)
        if signed:
            bits |= rng.integers(0, 2, size=shape, dtype=np.uint32) << 15
        pick = rng.random(shape) < special
        chosen = rng.choice(np.array(specials, dtype=np.uint32), size=shape)
        return np.where(pick, chosen, bits).astype(np.uint16)

    if dtype == "int8":
        q = rng.integers(-128, 128, size=(n_part, n), dtype=np.int8)
        s = patterns((n_part, num_blocks(n)), SPECIAL_SCALES, 0x7C00 if wide else 0x4000,
                     signed=False)
        return q, (s.view(np.float16) if as_float else s)
    data = patterns((n_part, n), SPECIAL_BITS[dtype], 1 << 16 if wide else 0x4000, signed=not wide)
    return (data.view(np.float16) if as_float and dtype == "fp16" else data), None


@st.composite
def collective_cases(draw, max_part=8, max_c=6, max_blocks=2):
    """(dtype, N, c, rng, random_messages options) for the collective properties."""
    dtype = draw(st.sampled_from(DTYPES))
    n_part = draw(st.integers(2, max_part))
    c = draw(st.integers(0, max_blocks)) * BLOCK if dtype == "int8" else draw(st.integers(0, max_c))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    opts = dict(special=draw(st.sampled_from([0.0, 0.05, 0.3])), wide=draw(st.booleans()),
                as_float=draw(st.booleans()))
    return dtype, n_part, c, rng, opts


def bits_of(a):
    """Bytes of an array (its bit patterns), or None."""
    return None if a is None else np.ascontiguousarray(a).tobytes()


def assert_same(got: Reduced, want: Reduced, status=True):
    """Bit for bit: out and scale bytes and dtypes, and (if ``status``) the status bits."""
    assert got.out.dtype == want.out.dtype and got.out.shape == want.out.shape
    assert bits_of(got.out) == bits_of(want.out)
    assert (got.scales is None) == (want.scales is None)
    if want.scales is not None:
        assert got.scales.dtype == want.scales.dtype and bits_of(got.scales) == bits_of(want.scales)
    if status:
        assert np.array_equal(got.status_per, want.status_per) and got.status == want.status


def assert_copy(result: Reduced, dtype):
    """A copying collective reports no status: zeros per element (per block for INT8) and NONE."""
    assert result.status == Status.NONE
    assert result.status_per.dtype == np.uint8 and not result.status_per.any()
    per = result.scales if dtype == "int8" else result.out
    assert result.status_per.shape == per.shape


@COLL
@given(collective_cases())
def test_reduce_scatter_then_allgather_equals_allreduce(case):
    dtype, n_part, c, rng, opts = case
    data, scales = random_messages(dtype, rng, n_part, n_part * c, **opts)
    shards = collective("reduce-scatter", dtype, data, scales)
    assert len(shards) == n_part and all(r.out.shape == (c,) for r in shards)
    gather_scales = np.stack([r.scales for r in shards]) if dtype == "int8" else None
    gathered = collective("allgather", dtype, np.stack([r.out for r in shards]), gather_scales)
    want = allreduce(dtype, data, scales)
    assert len(gathered) == n_part
    for rank in gathered:  # on every rank
        assert_same(rank, want, status=False)
        assert_copy(rank, dtype)
    # Each rank's status is its own shard's: together they are All-Reduce's.
    assert np.array_equal(np.concatenate([r.status_per for r in shards]), want.status_per)
    assert Status(int(np.bitwise_or.reduce([int(r.status) for r in shards]))) == want.status


@COLL
@given(collective_cases(max_c=40, max_blocks=3), st.data())
def test_reduce_then_broadcast_equals_allreduce(case, data_strategy):
    dtype, n_part, c, rng, opts = case
    # INT8: a short last block.
    n = c + data_strategy.draw(st.integers(0, BLOCK - 1)) if dtype == "int8" else c
    data, scales = random_messages(dtype, rng, n_part, n, **opts)
    root = data_strategy.draw(st.integers(0, n_part - 1))
    reduced = collective("reduce", dtype, data, scales, root=root)
    assert [r is None for r in reduced] == [r != root for r in range(n_part)]
    want = allreduce(dtype, data, scales)
    assert_same(reduced[root], want)
    # The root broadcasts its result; the other ranks' buffers hold anything.
    other, other_scales = random_messages(dtype, rng, n_part, n, special=0.3,
                                          as_float=opts["as_float"])
    other[root] = reduced[root].out
    if dtype == "int8":
        other_scales[root] = reduced[root].scales
    for rank in collective("broadcast", dtype, other, other_scales, root=root):
        assert_same(rank, want, status=False)
        assert_copy(rank, dtype)


@COLL
@given(collective_cases(max_c=24, max_blocks=3))
def test_allgather_is_concatenation_byte_for_byte(case):
    dtype, n_part, c, rng, opts = case
    data, scales = random_messages(dtype, rng, n_part, c, special=max(opts["special"], 0.3),
                                   wide=True, as_float=opts["as_float"])
    if dtype == "int8":  # any scale bit pattern at all
        bits = rng.integers(0, 1 << 16, size=scales.shape, dtype=np.uint32).astype(np.uint16)
        scales = bits.view(scales.dtype)
    got = allgather(dtype, data, scales)
    assert got.out.dtype == data.dtype and got.out.shape == (n_part * c,)
    assert bits_of(got.out) == b"".join(data[r].tobytes() for r in range(n_part))
    if dtype == "int8":
        assert got.scales.dtype == scales.dtype and got.scales.shape == (n_part * c // BLOCK,)
        assert bits_of(got.scales) == b"".join(scales[r].tobytes() for r in range(n_part))
    else:
        assert got.scales is None
    assert_copy(got, dtype)


@pytest.mark.parametrize("dtype, as_float", [("fp16", True), ("fp16", False), ("bf16", False),
                                             ("int8", False), ("int8", True)])
def test_allgather_and_broadcast_copy_every_16_bit_pattern(dtype, as_float):
    """Every data pattern (INT8: every value and every scale pattern) through both copies."""
    n_part = 4
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).reshape(n_part, -1)
    if dtype == "int8":
        scales = every.view(np.float16) if as_float else every
        data = np.tile(np.arange(-128, 128, dtype=np.int8), (1 << 16) * BLOCK // 256)
        data = data.reshape(n_part, -1)
    else:
        data, scales = (every.view(np.float16) if as_float else every), None
    got = allgather(dtype, data, scales)
    assert bits_of(got.out) == bits_of(data)
    if dtype == "int8":
        assert bits_of(got.scales) == bits_of(scales)
    for root in range(n_part):
        got = broadcast(dtype, data, scales, root=root)
        assert bits_of(got.out) == bits_of(data[root]) and got.out.dtype == data.dtype
        assert dtype != "int8" or bits_of(got.scales) == bits_of(scales[root])
        assert_copy(got, dtype)


@COLL
@given(collective_cases(max_c=20, max_blocks=2), st.data())
def test_broadcast_ignores_non_root_rows(case, data_strategy):
    dtype, n_part, c, rng, opts = case
    data, scales = random_messages(dtype, rng, n_part, c, **opts)
    root = data_strategy.draw(st.integers(0, n_part - 1))
    first = broadcast(dtype, data, scales, root=root)
    assert bits_of(first.out) == bits_of(data[root])
    assert dtype != "int8" or bits_of(first.scales) == bits_of(scales[root])
    assert_copy(first, dtype)
    other, other_scales = random_messages(dtype, rng, n_part, c, special=0.5, wide=True,
                                          as_float=opts["as_float"])
    keep = np.arange(n_part) == root
    data2 = np.where(keep[:, None], data, other.view(data.dtype))
    scales2 = (None if scales is None
               else np.where(keep[:, None], scales, other_scales.view(scales.dtype)))
    assert_same(broadcast(dtype, data2, scales2, root=root), first)
    # The same for reduce's root: it does not change the result.
    assert_same(reduce(dtype, data, scales, root=root), allreduce(dtype, data, scales))


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter_status_is_the_ranks_own_shard(dtype):
    """Three ranks, c = 64: shard 0 overflows, shard 1 is ordinary, shard 2 is invalid."""
    n_part, c = 3, BLOCK
    if dtype == "int8":
        data = np.full((n_part, n_part * c), 1, dtype=np.int8)
        data[:, :c] = 127
        scales = np.full((n_part, n_part), 0x3C00, dtype=np.uint16)   # 1.0
        scales[:, 0] = 0x7BFF                                   # 3 * 127 * 65504 / 127 > 65504
        scales[1, 2] = 0x7E00                                           # one NaN scale in shard 2
    else:
        big, one, nan = (0x7BFF, 0x3C00, 0x7E00) if dtype == "fp16" else (0x7F7F, 0x3F80, 0x7FC0)
        data = np.full((n_part, n_part * c), one, dtype=np.uint16)
        data[:, :c] = big
        data[1, 2 * c + 5] = nan
        scales = None
    shards = reduce_scatter(dtype, data, scales)
    assert [r.status for r in shards] == [Status.OVERFLOW, Status.NONE, Status.INVALID]
    for r, want in zip(shards, [Status.OVERFLOW, Status.NONE, Status.INVALID]):
        assert r.status == Status(int(np.bitwise_or.reduce(r.status_per)))
        assert set(int(v) for v in r.status_per) <= {0, int(want)}
    full = allreduce(dtype, data, scales)
    assert full.status == Status.OVERFLOW | Status.INVALID
    for r in range(n_part):
        sl = slice(r * c, (r + 1) * c) if dtype != "int8" else slice(r, r + 1)
        assert np.array_equal(shards[r].status_per, full.status_per[sl])


def test_collective_dispatch_names_and_per_rank_lists():
    from scin.hdl.isa import Op
    rng = np.random.default_rng(9)
    for dtype in DTYPES:
        n_part, c = 4, 2 * BLOCK
        data, scales = random_messages(dtype, rng, n_part, n_part * c)
        calls = {
            "allreduce": (allreduce(dtype, data, scales),) * n_part,
            "reduce-scatter": tuple(reduce_scatter(dtype, data, scales)),
            "allgather": (allgather(dtype, data, scales),) * n_part,
            "broadcast": (broadcast(dtype, data, scales, root=2),) * n_part,
            "reduce": (None, None, reduce(dtype, data, scales, root=2), None),
        }
        assert tuple(calls) == OPS
        for op, want in calls.items():
            name = op.upper().replace("-", "_")
            for spelling in (op, op.upper(), op.replace("-", "_"), Op[name]):
                got = collective(spelling, dtype, data, scales, root=2)
                assert isinstance(got, list) and len(got) == n_part
                for g, w in zip(got, want):
                    assert (g is None) == (w is None)
                    if w is not None:
                        assert_same(g, w)


def test_collective_refuses_an_unknown_op():
    from scin.hdl.isa import Op
    x = np.ones((2, 4), np.uint16)
    with pytest.raises(ValueError, match=r"^op must be one of allreduce, reduce-scatter, "
                                         r"allgather, broadcast, reduce, not 'all-to-all'$"):
        collective("all-to-all", "bf16", x)
    with pytest.raises(ValueError, match=r"^op must be one of .*, not <Op.BARRIER: 6>$"):
        collective(Op.BARRIER, "bf16", x)


def _i8(n_part, n):
    return np.zeros((n_part, n), np.int8)


def _s(n_part, nb, dtype=np.uint16):
    return np.zeros((n_part, nb), dtype)


@pytest.mark.parametrize("call, exc, match", [
    pytest.param(lambda: reduce_scatter("fp16", np.zeros((4, 10), np.uint16)), ValueError,
                 r"^reduce_scatter data must have shape \(N, N\*c\); got \(4, 10\): 10 columns "
                 r"are not a multiple of N=4$", id="rs-not-multiple-of-N"),
    pytest.param(lambda: reduce_scatter("int8", _i8(2, 20), _s(2, 1)), ValueError,
                 r"^reduce_scatter int8 shard must be a whole number of blocks "
                 r"\(a multiple of 64 elements\); got c=10$", id="rs-int8-shard-not-blocks"),
    pytest.param(lambda: reduce_scatter("int8", _i8(2, 256), _s(2, 3)), ValueError,
                 r"^reduce_scatter scales must have shape \(N, N\*c/64\) = \(2, 4\), not \(2, 3\)$",
                 id="rs-scales-shape"),
    pytest.param(lambda: reduce_scatter("fp16", np.zeros(8, np.float16)), ValueError,
                 r"^reduce_scatter data must be a 2-D array of shape \(N, N\*c\), "
                 r"not 1-D with shape \(8,\)$",
                 id="rs-not-2d"),
    pytest.param(lambda: reduce_scatter("bf16", np.zeros((0, 4), np.uint16)), ValueError,
                 r"^reduce_scatter data must have N >= 1 participants \(rows\), not 0$",
                 id="rs-no-rows"),
    pytest.param(lambda: reduce_scatter("bf16", np.zeros((MAX_PARTICIPANTS + 1, 0), np.uint16)),
                 ValueError,
                 rf"^reduce_scatter data must have N <= {MAX_PARTICIPANTS} participants \(rows\), "
                 rf"not {MAX_PARTICIPANTS + 1}$", id="rs-too-many-rows"),
    pytest.param(lambda: reduce_scatter("bf16", np.zeros((2, 4), np.float16)), TypeError,
                 r"^reduce_scatter bf16 data must have dtype uint16 \(BF16 bit patterns\), "
                 r"not float16$",
                 id="rs-bf16-dtype"),
    pytest.param(lambda: reduce_scatter("fp16", np.zeros((2, 4), np.float32)), TypeError,
                 r"^reduce_scatter fp16 data must have dtype float16 or uint16 "
                 r"\(FP16 bit patterns\), not float32$",
                 id="rs-fp16-dtype"),
    pytest.param(lambda: reduce_scatter("fp32", np.zeros((2, 4), np.float32)), ValueError,
                 r"^dtype must be one of fp16, bf16, int8, not 'fp32'$", id="rs-unknown-dtype"),
    pytest.param(lambda: reduce_scatter("int8", _i8(2, 128)), ValueError,
                 r"^reduce_scatter: int8 needs the input block scales$", id="rs-int8-no-scales"),
    pytest.param(lambda: reduce_scatter("fp16", np.zeros((2, 4), np.uint16), _s(2, 1)), ValueError,
                 r"^reduce_scatter: fp16 takes no scales$", id="rs-fp16-scales"),
    pytest.param(lambda: allgather("int8", _i8(2, 10), _s(2, 1)), ValueError,
                 r"^allgather int8 shard must be a whole number of blocks "
                 r"\(a multiple of 64 elements\); got c=10$",
                 id="ag-int8-shard-not-blocks"),
    pytest.param(lambda: allgather("int8", _i8(2, 64), _s(2, 2)), ValueError,
                 r"^allgather scales must have shape \(N, c/64\) = \(2, 1\), not \(2, 2\)$",
                 id="ag-scales-shape"),
    pytest.param(lambda: allgather("int8", np.zeros((2, 64), np.uint8), _s(2, 1)), TypeError,
                 r"^allgather int8 data must have dtype int8, not uint8$", id="ag-int8-dtype"),
    pytest.param(lambda: allgather("int8", _i8(2, 64), _s(2, 1, np.float32)), TypeError,
                 r"^allgather scales must have dtype float16 or uint16 \(FP16 bit patterns\), "
                 r"not float32$",
                 id="ag-scales-dtype"),
    pytest.param(lambda: allgather("bf16", np.zeros((2, 2, 2), np.uint16)), ValueError,
                 r"^allgather data must be a 2-D array of shape \(N, c\), "
                 r"not 3-D with shape \(2, 2, 2\)$",
                 id="ag-not-2d"),
    pytest.param(lambda: broadcast("fp16", np.zeros((4, 3), np.float16), root=4), ValueError,
                 r"^broadcast root must be an int in 0..N-1 = 0..3 \(N=4\), not 4$",
                 id="bc-root-too-big"),
    pytest.param(lambda: broadcast("fp16", np.zeros((4, 3), np.float16), root=-1), ValueError,
                 r"^broadcast root must be an int in 0..N-1 = 0..3 \(N=4\), not -1$",
                 id="bc-root-negative"),
    pytest.param(lambda: broadcast("int8", _i8(2, 65), _s(2, 1)), ValueError,
                 r"^broadcast scales must have shape \(N, ceil\(n/64\)\) = \(2, 2\), not \(2, 1\)$",
                 id="bc-scales-shape"),
    pytest.param(lambda: reduce("bf16", np.zeros((4, 3), np.uint16), root=4), ValueError,
                 r"^reduce root must be an int in 0..N-1 = 0..3 \(N=4\), not 4$",
                 id="rd-root-too-big"),
    pytest.param(lambda: reduce("bf16", np.zeros((4, 3), np.uint16), root=1.0), ValueError,
                 r"^reduce root must be an int in 0..N-1 = 0..3 \(N=4\), not 1.0$",
                 id="rd-root-float"),
    pytest.param(lambda: reduce("bf16", np.zeros((4, 3), np.uint16), root=True), ValueError,
                 r"^reduce root must be an int in 0..N-1 = 0..3 \(N=4\), not True$",
                 id="rd-root-bool"),
    pytest.param(lambda: reduce("int8", _i8(2, 65), _s(2, 3)), ValueError,
                 r"^reduce scales must have shape \(N, ceil\(n/64\)\) = \(2, 2\), not \(2, 3\)$",
                 id="rd-scales-shape"),
    pytest.param(lambda: reduce("bf16", np.zeros((2, 3), np.uint16), _s(2, 1)), ValueError,
                 r"^reduce: bf16 takes no scales$", id="rd-bf16-scales"),
    pytest.param(lambda: collective("broadcast", "fp16", np.zeros((2, 3), np.float16), root=2),
                 ValueError,
                 r"^broadcast root must be an int in 0..N-1 = 0..1 \(N=2\), not 2$",
                 id="dispatch-root"),
])
def test_collective_error_messages(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
