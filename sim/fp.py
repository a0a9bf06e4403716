"""Bit-level helpers for the 16-bit float formats of the SCIN ISA.

Everything here is integer arithmetic on NumPy ``int64`` arrays, so results are
bit exact and match the hardware datapath (see ``docs/NUMERICS.md``). Floats are
used only for conversions that are provably exact (a 16-bit float widened to
``float32``/``float64``).

Contents
--------
FloatFormat, FP16, BF16
    Field layout of a binary16-like format.
bit_length
    Vectorised ``int.bit_length`` for non-negative ``int64`` arrays.
round_fixed
    Round-to-nearest-even of the exact value ``t * 2**k`` into a format.
fp16_to_fixed
    Exact conversion of FP16 bit patterns to integers ``x * 2**24``.
float_to_bf16_bits, bf16_bits_to_float32, fp16_bits, fp16_from_bits
    Conversions for tests and data generation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "FloatFormat", "FP16", "BF16", "FP16_FIXED_SHIFT",
    "bit_length", "round_fixed", "fp16_to_fixed", "decode",
    "float_to_bf16_bits", "bf16_bits_to_float32", "fp16_bits", "fp16_from_bits",
]

#: ``x * 2**FP16_FIXED_SHIFT`` is an integer for every finite FP16 value ``x``
#: (the smallest subnormal is ``2**-24``).
FP16_FIXED_SHIFT = 24


@dataclass(frozen=True)
class FloatFormat:
    """Layout of a 16-bit IEEE-754-style binary float format.

    Parameters
    ----------
    name : str
        Human-readable name (``"fp16"``, ``"bf16"``).
    exp_bits : int
        Width of the biased exponent field.
    frac_bits : int
        Width of the stored fraction field (the precision is ``frac_bits + 1``).
    qnan : int
        The canonical quiet NaN this project produces (sign bit clear).
    """

    name: str
    exp_bits: int
    frac_bits: int
    qnan: int

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def precision(self) -> int:
        """Significand bits including the hidden bit."""
        return self.frac_bits + 1

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal number."""
        return 1 - self.bias

    @property
    def exp_mask(self) -> int:
        return ((1 << self.exp_bits) - 1) << self.frac_bits

    @property
    def frac_mask(self) -> int:
        return (1 << self.frac_bits) - 1

    @property
    def sign_mask(self) -> int:
        return 1 << (self.exp_bits + self.frac_bits)

    @property
    def inf(self) -> int:
        """Bit pattern of +Inf (``| sign_mask`` for -Inf)."""
        return self.exp_mask

    @property
    def max_finite(self) -> int:
        """Bit pattern of the largest finite positive number."""
        return self.exp_mask - 1


FP16 = FloatFormat("fp16", exp_bits=5, frac_bits=10, qnan=0x7E00)
BF16 = FloatFormat("bf16", exp_bits=8, frac_bits=7, qnan=0x7FC0)


def bit_length(x: np.ndarray) -> np.ndarray:
    """Vectorised :meth:`int.bit_length` of non-negative ``int64`` values.

    Parameters
    ----------
    x : numpy.ndarray of int64
        Values in ``[0, 2**63)``.

    Returns
    -------
    numpy.ndarray of int64
        ``floor(log2(x)) + 1`` for ``x > 0`` and ``0`` for ``x == 0``.
    """
    x = np.asarray(x, dtype=np.int64)
    if x.size == 0 or int(x.max()) < 1 << 53:
        # Every integer below 2**53 is exact in float64, so frexp's exponent is
        # exactly the bit length (and 0 for 0): no rounding is involved.
        return np.frexp(x.astype(np.float64))[1].astype(np.int64)
    x = x.copy()
    n = np.zeros(x.shape, dtype=np.int64)
    # Binary search on the position of the leading one: integer only, so no
    # float64 rounding can move a value such as 2**53 - 1 into the next binade.
    for step in (32, 16, 8, 4, 2, 1):
        hi = (x >> step) != 0
        n += np.where(hi, step, 0)
        x = np.where(hi, x >> step, x)
    return n + (x != 0)


def decode(bits: np.ndarray, fmt: FloatFormat):
    """Split bit patterns into fields.

    Returns
    -------
    sign : numpy.ndarray of bool
    exp : numpy.ndarray of int64
        The biased exponent field as stored (0 for zeros and subnormals).
    frac : numpy.ndarray of int64
        The stored fraction field.
    """
    b = np.asarray(bits).astype(np.int64)
    sign = (b & fmt.sign_mask) != 0
    exp = (b >> fmt.frac_bits) & ((1 << fmt.exp_bits) - 1)
    frac = b & fmt.frac_mask
    return sign, exp, frac


def round_fixed(t: np.ndarray, k, fmt: FloatFormat):
    """Round the exact value ``t * 2**k`` to ``fmt`` with round-to-nearest-even.

    This is the integer rounding step shared by every mode: normalise (find the
    leading one), choose the quantum (``2**(e - frac_bits)``, with ``e``
    clamped to ``emin`` so subnormal results are produced, never flushed),
    round on the guard bit and sticky bits with ties to even, and let a
    carry out of the significand propagate into the exponent field.

    Parameters
    ----------
    t : numpy.ndarray of int64
        Signed integers with ``|t| < 2**62``.
    k : int or numpy.ndarray of int64
        Power-of-two scale, broadcast against ``t``.
    fmt : FloatFormat
        Target format.

    Returns
    -------
    bits : numpy.ndarray of uint16
        The rounded bit patterns. ``t == 0`` gives ``+0``; a nonzero ``t`` that
        rounds to zero keeps its sign; results beyond the largest finite value
        are ``+-Inf``.
    overflow : numpy.ndarray of bool
        True where the rounded magnitude exceeded the largest finite value.
    """
    t = np.asarray(t, dtype=np.int64)
    k = np.asarray(k, dtype=np.int64)
    neg = t < 0
    mag = np.abs(t)
    if mag.size and int(mag.max()) >= 1 << 62:
        raise ValueError("round_fixed needs |t| < 2**62")
    length = bit_length(mag)
    # Unbiased exponent of the result before rounding, clamped to the subnormal range.
    e = np.maximum(length - 1 + k, fmt.emin)
    shift = e - fmt.frac_bits - k  # >0: drop `shift` low bits; <=0: exact left shift
    rs = np.clip(shift, 1, 63)
    q = mag >> rs
    rem = mag & ((np.int64(1) << rs) - 1)
    half = np.int64(1) << (rs - 1)
    up = (rem > half) | ((rem == half) & ((q & 1) == 1))
    rounded = q + up
    exact = mag << np.clip(-shift, 0, 62)
    sig = np.where(shift > 0, rounded, exact)
    sig = np.where(mag == 0, 0, sig)
    # Biased exponent field (e + bias - 1) plus the significand including its
    # hidden bit: a subnormal that rounds up to 2**frac_bits, or a significand
    # that carries to 2**precision, lands in the next exponent by plain addition.
    body = np.where(mag == 0, 0, ((e + fmt.bias - 1) << fmt.frac_bits) + sig)
    overflow = body >= fmt.inf
    body = np.where(overflow, fmt.inf, body)
    bits = body | np.where(neg, fmt.sign_mask, 0)
    return bits.astype(np.uint16), overflow


def fp16_to_fixed(bits: np.ndarray) -> np.ndarray:
    """Exact integer ``x * 2**24`` of FP16 bit patterns.

    Parameters
    ----------
    bits : numpy.ndarray of uint16
        FP16 bit patterns. Only finite inputs have a meaning; non-finite
        patterns give an arbitrary value that callers must mask.

    Returns
    -------
    numpy.ndarray of int64
        Signed integers with ``|X| <= 65504 * 2**24 < 2**40``; ``-0.0`` gives 0.
    """
    sign, exp, frac = decode(bits, FP16)
    # value = (1024 + f) * 2**(e - 25) for normals, f * 2**-24 for subnormals.
    mag = np.where(exp == 0, frac, (frac | (1 << FP16.frac_bits)) << np.maximum(exp - 1, 0))
    return np.where(sign, -mag, mag)


def fp16_bits(x) -> np.ndarray:
    """Bit patterns (uint16) of a float16 array (a view when possible)."""
    return np.asarray(x, dtype=np.float16).view(np.uint16)


def fp16_from_bits(bits) -> np.ndarray:
    """float16 values of uint16 bit patterns (a view when possible)."""
    return np.asarray(bits, dtype=np.uint16).view(np.float16)


def float_to_bf16_bits(x) -> np.ndarray:
    """Round float32 values to BF16 bit patterns (round to nearest even).

    float64 input is first converted to float32 (itself a rounding); pass
    float32 to get a single correct rounding. NaN becomes a quiet NaN with
    the input's sign; overflow gives ``+-Inf``.
    """
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = ((b & 0x7F800000) == 0x7F800000) & ((b & 0x007FFFFF) != 0)
    r = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    r = np.where(nan, (b >> 16) | 0x0040, r)
    return r.astype(np.uint16)


def bf16_bits_to_float32(bits) -> np.ndarray:
    """Exact float32 values of BF16 bit patterns."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
