"""Bit-exact golden model of the SCIN ISA arithmetic.

The switch-side ISA reduces one element position across ``N`` participants in
one of three modes. This module defines the result of each mode bit for bit,
including the status flags; the hardware must match it exactly (the
normative text is ``docs/NUMERICS.md``). All intermediates are exact integers
in ``int64``; the only rounding steps are the ones named in each function.

Modes
-----
``allreduce_fp16``
    Exact fixed-point sum of FP16 inputs, one RNE rounding to FP16.
``allreduce_bf16``
    Sum of BF16 inputs aligned to the largest exponent with 32 guard bits
    (truncating), one RNE rounding to BF16.
``allreduce_int8``
    INQ: exact dequantize-and-sum of block-scaled INT8 (block 64, FP16 scale),
    then one requantization.

The endpoint-side ``quantize_int8`` uses the same block quantizer as the
switch, and ``dequantize_int8`` is its exact inverse map ``q * s``.

Collectives
-----------
``allreduce``, ``reduce_scatter``, ``allgather``, ``broadcast`` and ``reduce``
define NCCL's collective set on top of these modes (``collective`` dispatches
by name): the reductions are ``allreduce`` of the right columns, the others
copy bytes unchanged.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from .fp import (
    BF16, FP16, FP16_FIXED_SHIFT, FloatFormat, bit_length, decode, float_to_bf16_bits,
    fp16_to_fixed, round_fixed,
)

__all__ = [
    "Status", "BLOCK", "MAX_PARTICIPANTS", "BF16_GUARD_BITS", "Q_MAX",
    "allreduce_fp16", "allreduce_bf16", "allreduce_int8", "allreduce", "Reduced", "DTYPES",
    "encode", "quantize_int8", "quantize_int8_fixed", "dequantize_int8", "dequantize_int8_fixed",
    "num_blocks",
    "reduce_scatter", "allgather", "broadcast", "reduce", "collective", "OPS", "op_key",
]

#: INQ block size: elements sharing one FP16 scale.
BLOCK = 64
#: Largest quantized magnitude produced by the quantizer (symmetric INT8).
Q_MAX = 127
#: Guard bits below the BF16 significand in the aligned BF16 sum.
BF16_GUARD_BITS = 32
#: Largest N the model accepts: every intermediate then stays below 2**62.
#: The hardware widths in docs/NUMERICS.md are quoted for N <= 16.
MAX_PARTICIPANTS = 1024


class Status(enum.IntFlag):
    """Status flags of one element (FP16/BF16) or one block (INT8)."""

    NONE = 0
    #: A finite result had to be replaced: FP16/BF16 sum rounded beyond the
    #: largest finite value (result +-Inf); INT8 output scale saturated to 65504.
    OVERFLOW = 1
    #: An input was not a finite value (FP16/BF16 NaN or Inf; INT8 scale that is
    #: NaN, Inf or has its sign bit set).
    INVALID = 2


def num_blocks(n: int) -> int:
    """Number of INQ blocks (scales) for ``n`` elements: ``ceil(n / 64)``."""
    return -(-n // BLOCK)


# --------------------------------------------------------------------------- validation

def _dtype_name(a) -> str:
    return np.asarray(a).dtype.name


def _check_2d(name: str, a: np.ndarray, shape: str = "(N, n)") -> None:
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape {shape}, "
                         f"not {a.ndim}-D with shape {a.shape}")
    n_part = a.shape[0]
    if n_part < 1:
        raise ValueError(f"{name} must have N >= 1 participants (rows), not {n_part}")
    if n_part > MAX_PARTICIPANTS:
        raise ValueError(f"{name} must have N <= {MAX_PARTICIPANTS} participants (rows), "
                         f"not {n_part}")


def _fp16_input(name: str, x) -> tuple[np.ndarray, bool]:
    """Return (uint16 bits, given_as_float16)."""
    a = np.asarray(x)
    if a.dtype == np.float16:
        return a.view(np.uint16), True
    if a.dtype == np.uint16:
        return a, False
    raise TypeError(f"{name} must have dtype float16 or uint16 (FP16 bit patterns), "
                    f"not {a.dtype.name}")


def _non_finite_rule(bits_rows: np.ndarray, fmt: FloatFormat):
    """Per-column (any NaN or both infinities, any +Inf, any -Inf, any non-finite)."""
    any_nan = np.zeros(bits_rows.shape[1], dtype=bool)
    any_pinf = np.zeros_like(any_nan)
    any_ninf = np.zeros_like(any_nan)
    for row in bits_rows:
        r = row.astype(np.int64)
        special = (r & fmt.exp_mask) == fmt.exp_mask
        frac_zero = (r & fmt.frac_mask) == 0
        neg = (r & fmt.sign_mask) != 0
        any_nan |= special & ~frac_zero
        any_pinf |= special & frac_zero & ~neg
        any_ninf |= special & frac_zero & neg
    nan = any_nan | (any_pinf & any_ninf)
    return nan, any_pinf, any_ninf, any_nan | any_pinf | any_ninf


def _finish(bits: np.ndarray, overflow: np.ndarray, nonfinite, fmt: FloatFormat):
    """Apply the NaN/Inf input rule and build the status arrays."""
    nan, pinf, ninf, invalid = nonfinite
    bits = bits.astype(np.uint16)
    bits = np.where(pinf, np.uint16(fmt.inf), bits)
    bits = np.where(ninf, np.uint16(fmt.inf | fmt.sign_mask), bits)
    bits = np.where(nan, np.uint16(fmt.qnan), bits).astype(np.uint16)
    elem = np.where(invalid, np.uint8(Status.INVALID),
                    np.where(overflow, np.uint8(Status.OVERFLOW), np.uint8(0)))
    elem = elem.astype(np.uint8)
    return bits, elem, Status(int(np.bitwise_or.reduce(elem))) if elem.size else Status.NONE


# --------------------------------------------------------------------------- FP16

def allreduce_fp16(x):
    """All-Reduce (sum) of FP16 values, rounded once to nearest even.

    Each finite input is the exact integer ``X = x * 2**24`` (``|X| < 2**40``);
    ``T = sum_i X_i`` is exact; the result is ``RNE_fp16(T * 2**-24)`` with
    subnormals kept. The result does not depend on the order of the rows.

    Parameters
    ----------
    x : numpy.ndarray, shape (N, n), dtype float16 or uint16
        Row ``i`` is participant ``i``'s message; uint16 is read as FP16 bit
        patterns. ``1 <= N <= MAX_PARTICIPANTS``; ``n`` may be 0.

    Returns
    -------
    out : numpy.ndarray, shape (n,)
        Same dtype as ``x`` (float16 values or uint16 bit patterns).
    elem_status : numpy.ndarray of uint8, shape (n,)
        :class:`Status` bits per element.
    status : Status
        OR of ``elem_status``.

    Notes
    -----
    * An exact zero sum is ``+0`` (0x0000), even if every input is ``-0.0``.
    * Finite inputs whose sum rounds beyond 65504 give ``+-Inf`` and OVERFLOW.
    * Any NaN input, or both ``+Inf`` and ``-Inf`` among an element's inputs,
      gives the canonical NaN 0x7E00; otherwise any ``+Inf`` gives ``+Inf`` and
      any ``-Inf`` gives ``-Inf``. Any non-finite input sets INVALID (and never
      OVERFLOW) for that element.

    Raises
    ------
    TypeError
        If the dtype is not float16 or uint16.
    ValueError
        If ``x`` is not 2-D or ``N`` is out of range.
    """
    bits, as_float = _fp16_input("x", x)
    _check_2d("x", bits)
    total = np.zeros(bits.shape[1], dtype=np.int64)
    for row in bits:
        fixed = fp16_to_fixed(row)
        finite = (row & FP16.exp_mask) != FP16.exp_mask
        total += np.where(finite, fixed, 0)
    out, overflow = round_fixed(total, -FP16_FIXED_SHIFT, FP16)
    out, elem, status = _finish(out, overflow, _non_finite_rule(bits, FP16), FP16)
    return (out.view(np.float16) if as_float else out), elem, status


# --------------------------------------------------------------------------- BF16

def allreduce_bf16(bits):
    """All-Reduce (sum) of BF16 values with exponent alignment and 32 guard bits.

    For each element: ``e_i`` is input ``i``'s biased exponent field, with
    ``e_i := 1`` for zeros and subnormals; ``m_i`` its 8-bit significand (hidden
    bit set only for normals); ``E = max_i e_i`` over finite inputs.
    ``A_i = (m_i << 32) >> (E - e_i)`` (magnitude truncated toward zero),
    ``T = sum_i (-1)**sign_i * A_i`` exactly, and the result is
    ``RNE_bf16(T * 2**(E - 166))``. Order independent by construction.

    Parameters
    ----------
    bits : numpy.ndarray, shape (N, n), dtype uint16
        BF16 bit patterns, row ``i`` from participant ``i``.

    Returns
    -------
    out : numpy.ndarray of uint16, shape (n,)
        BF16 bit patterns of the result.
    elem_status : numpy.ndarray of uint8, shape (n,)
    status : Status

    Notes
    -----
    Exact zero ``T`` gives ``+0``. A nonzero ``T`` that rounds to zero keeps
    its sign. The NaN/Inf rule and flags are those of :func:`allreduce_fp16`
    with NaN 0x7FC0 and Inf 0x7F80/0xFF80. If every nonzero input has
    ``E - e_i <= 32`` the result is the correctly rounded sum; in general see
    ``docs/NUMERICS.md`` for the error bound.

    Raises
    ------
    TypeError
        If the dtype is not uint16.
    ValueError
        If ``bits`` is not 2-D or ``N`` is out of range.
    """
    a = np.asarray(bits)
    if a.dtype != np.uint16:
        raise TypeError(f"bits must have dtype uint16 (BF16 bit patterns), not {a.dtype.name}")
    _check_2d("bits", a)
    n = a.shape[1]
    emax = np.ones(n, dtype=np.int64)
    for row in a:
        _, e, _ = decode(row, BF16)
        emax = np.maximum(emax, np.where(e == 0xFF, 1, e))
    total = np.zeros(n, dtype=np.int64)
    for row in a:
        sign, e, frac = decode(row, BF16)
        finite = e != 0xFF
        m = np.where(e == 0, frac, frac | (1 << BF16.frac_bits))
        e_eff = np.maximum(e, 1)
        shift = np.clip(emax - e_eff, 0, 63)
        aligned = np.where(finite, (m << BF16_GUARD_BITS) >> shift, 0)
        total += np.where(sign, -aligned, aligned)
    k = emax - BF16.bias - BF16.frac_bits - BF16_GUARD_BITS
    out, overflow = round_fixed(total, k, BF16)
    return _finish(out, overflow, _non_finite_rule(a, BF16), BF16)


# --------------------------------------------------------------------------- INT8 (INQ)

def _blocked(v: np.ndarray) -> np.ndarray:
    """View the last axis as (nb, BLOCK), zero-padding a short last block."""
    n = v.shape[-1]
    pad = num_blocks(n) * BLOCK - n
    if pad:
        v = np.concatenate([v, np.zeros(v.shape[:-1] + (pad,), dtype=v.dtype)], axis=-1)
    return v.reshape(v.shape[:-1] + (-1, BLOCK))


def _expand(per_block: np.ndarray, n: int) -> np.ndarray:
    """Repeat each block value BLOCK times along the last axis, cut to n."""
    return np.repeat(per_block, BLOCK, axis=-1)[..., :n]


def _scale_of_max(m: np.ndarray):
    """FP16 bits of RNE((m * 2**-24) / 127), saturated at 65504.

    ``m`` is a non-negative int64 with ``m < 2**58``. The quotient by 127 is
    exact: ``m`` is left-aligned to 60 bits, divided by 127, and the remainder
    becomes a sticky bit below the quotient; the rounding then never looks at
    the sticky position itself (at least two bits are dropped), so the result
    is the correctly rounded value of the exact rational.

    Returns (bits uint16, saturated bool).
    """
    m = np.asarray(m, dtype=np.int64)
    f = np.where(m == 0, 0, 60 - bit_length(m))
    num = m << f
    quo, rem = np.divmod(num, Q_MAX)
    t = (quo << 1) | (rem != 0)
    bits, overflow = round_fixed(t, -FP16_FIXED_SHIFT - f - 1, FP16)
    bits = np.where(overflow, np.uint16(FP16.max_finite), bits).astype(np.uint16)
    return bits, overflow


def _quantize_fixed(v: np.ndarray):
    """Block-quantize exact fixed-point values ``v`` (units of 2**-24).

    Returns (q int8 [..., n], scale bits uint16 [..., nb], saturated bool [..., nb]).
    """
    v = np.asarray(v, dtype=np.int64)
    n = v.shape[-1]
    m = np.abs(_blocked(v)).max(axis=-1) if n else np.zeros(v.shape[:-1] + (0,), dtype=np.int64)
    s_bits, saturated = _scale_of_max(m)
    s_fixed = _expand(fp16_to_fixed(s_bits), n)
    mag = np.abs(v)
    divisor = np.maximum(s_fixed, 1)
    quo, rem = np.divmod(mag, divisor)
    twice = rem << 1
    up = (twice > divisor) | ((twice == divisor) & ((quo & 1) == 1))
    qm = np.minimum(quo + up, Q_MAX)
    qm = np.where(s_fixed == 0, 0, qm)
    q = np.where(v < 0, -qm, qm).astype(np.int8)
    return q, s_bits, saturated


def allreduce_int8(q, scales):
    """INQ All-Reduce of block-scaled INT8 messages (block 64, FP16 scales).

    Element ``j`` of participant ``i`` is ``q[i, j] * scales[i, j // 64]``.
    The switch dequantizes exactly (``S = s * 2**24`` integer, ``P = q * S``,
    ``V = sum_i P_i`` in int64), then requantizes once per block:
    ``M = max |V|`` over the block, ``s_out = RNE_fp16((M * 2**-24) / 127)``
    (saturated at 65504 with OVERFLOW), ``q_out = clamp(RNE(V / S_out), -127,
    127)``, with ``q_out = 0`` wherever ``s_out == 0``.

    Parameters
    ----------
    q : numpy.ndarray of int8, shape (N, n)
        Quantized values; -128 is accepted and exact.
    scales : numpy.ndarray of float16 or uint16, shape (N, ceil(n / 64))
        Block scales (uint16 = FP16 bit patterns). A short last block is
        treated as zero-padded to 64 elements.

    Returns
    -------
    q_out : numpy.ndarray of int8, shape (n,)
    s_out : numpy.ndarray, shape (ceil(n / 64),)
        Same dtype as ``scales``.
    block_status : numpy.ndarray of uint8, shape (ceil(n / 64),)
    status : Status

    Notes
    -----
    If any participant's scale of a block has its sign bit set (``-0.0``
    included) or is NaN/Inf, that output block is all ``q_out = 0`` with
    ``s_out = NaN`` (0x7E00) and INVALID; other blocks are unaffected.

    Raises
    ------
    TypeError
        If ``q`` is not int8 or ``scales`` not float16/uint16.
    ValueError
        If the shapes are wrong or ``N`` is out of range.
    """
    qa = np.asarray(q)
    if qa.dtype != np.int8:
        raise TypeError(f"q must have dtype int8, not {qa.dtype.name}")
    _check_2d("q", qa)
    sb, as_float = _fp16_input("scales", scales)
    n_part, n = qa.shape
    nb = num_blocks(n)
    if sb.shape != (n_part, nb):
        raise ValueError(f"scales must have shape (N, ceil(n/{BLOCK})) = ({n_part}, {nb}), "
                         f"not {sb.shape}")
    sb64 = sb.astype(np.int64)
    bad = ((sb64 & FP16.sign_mask) != 0) | ((sb64 & FP16.exp_mask) == FP16.exp_mask)
    invalid = bad.any(axis=0)
    total = np.zeros(n, dtype=np.int64)
    for i in range(n_part):
        s_fixed = np.where(bad[i], 0, fp16_to_fixed(sb[i]))
        total += qa[i].astype(np.int64) * _expand(s_fixed, n)
    q_out, s_bits, saturated = _quantize_fixed(total)
    s_bits = np.where(invalid, np.uint16(FP16.qnan), s_bits).astype(np.uint16)
    q_out = np.where(_expand(invalid, n), 0, q_out).astype(np.int8)
    blk = np.where(invalid, np.uint8(Status.INVALID),
                   np.where(saturated, np.uint8(Status.OVERFLOW), np.uint8(0)))
    blk = blk.astype(np.uint8)
    status = Status(int(np.bitwise_or.reduce(blk))) if blk.size else Status.NONE
    return q_out, (s_bits.view(np.float16) if as_float else s_bits), blk, status


def quantize_int8(x):
    """Endpoint-side block quantizer (the same rule as the switch's requantizer).

    For each block of 64 along the last axis: ``X = x * 2**24`` exactly,
    ``M = max |X|``, ``s = RNE_fp16((M * 2**-24) / 127)`` and
    ``q = clamp(RNE(X / S), -127, 127)`` (``q = 0`` if ``s == 0``). For FP16
    inputs the scale never saturates (``65504 / 127 < 65504``).

    Parameters
    ----------
    x : numpy.ndarray of float16, shape (n,) or (N, n)
        Finite values.

    Returns
    -------
    q : numpy.ndarray of int8, same shape as ``x``
    scales : numpy.ndarray of float16, shape (..., ceil(n / 64))

    Raises
    ------
    TypeError
        If ``x`` is not float16.
    ValueError
        If ``x`` is not 1-D or 2-D, or holds a NaN or Inf (the message names the
        first such index).
    """
    a = np.asarray(x)
    if a.dtype != np.float16:
        raise TypeError(f"x must have dtype float16, not {a.dtype.name}")
    if a.ndim not in (1, 2):
        raise ValueError(f"x must be 1-D (n,) or 2-D (N, n), not {a.ndim}-D with shape {a.shape}")
    bits = a.view(np.uint16)
    nonfinite = (bits & FP16.exp_mask) == FP16.exp_mask
    if nonfinite.any():
        idx = tuple(int(i) for i in np.argwhere(nonfinite)[0])
        where = idx[0] if len(idx) == 1 else idx
        raise ValueError(f"x must be finite; x[{where}] is {a[idx]!r}")
    q, s_bits, _ = _quantize_fixed(fp16_to_fixed(bits))
    return q, s_bits.view(np.float16)


def quantize_int8_fixed(v):
    """Block-quantize exact fixed-point values: the switch's requantizer on its own.

    ``v`` holds exact values in units of ``2**-24`` (as ``V`` inside
    :func:`allreduce_int8`). The rule is that of :func:`allreduce_int8` after
    the sum, including saturation of the scale at 65504.

    Parameters
    ----------
    v : numpy.ndarray of int64, shape (n,) or (N, n)
        ``|v| < 2**58``.

    Returns
    -------
    q : numpy.ndarray of int8, same shape as ``v``
    scales : numpy.ndarray of float16, shape (..., ceil(n / 64))
    saturated : numpy.ndarray of bool, shape (..., ceil(n / 64))
        Where the scale was saturated (the OVERFLOW condition).

    Raises
    ------
    TypeError
        If ``v`` is not an integer array.
    ValueError
        If ``v`` is not 1-D or 2-D or a magnitude reaches ``2**58``.
    """
    a = np.asarray(v)
    if a.dtype.kind not in "iu":
        raise TypeError(f"v must have an integer dtype, not {a.dtype.name}")
    if a.ndim not in (1, 2):
        raise ValueError(f"v must be 1-D (n,) or 2-D (N, n), not {a.ndim}-D with shape {a.shape}")
    a = a.astype(np.int64)
    if a.size and int(np.abs(a).max()) >= 1 << 58:
        raise ValueError("v must satisfy |v| < 2**58")
    q, s_bits, saturated = _quantize_fixed(a)
    return q, s_bits.view(np.float16), saturated


def _check_q_scales(q, scales):
    qa = np.asarray(q)
    if qa.dtype != np.int8:
        raise TypeError(f"q must have dtype int8, not {qa.dtype.name}")
    sa = np.asarray(scales)
    if sa.dtype == np.uint16:
        sa = sa.view(np.float16)
    if sa.dtype != np.float16:
        raise TypeError("scales must have dtype float16 or uint16 (FP16 bit patterns), "
                        f"not {sa.dtype.name}")
    if qa.ndim < 1:
        raise ValueError("q must have at least one dimension")
    want = qa.shape[:-1] + (num_blocks(qa.shape[-1]),)
    if sa.shape != want:
        raise ValueError(f"scales must have shape q.shape[:-1] + (ceil(n/{BLOCK}),) = {want}, "
                         f"not {sa.shape}")
    return qa, sa


def dequantize_int8(q, scales) -> np.ndarray:
    """Exact values ``q * s`` of a block-scaled INT8 message, as float64.

    ``q * s`` has at most 8 + 11 significant bits, so the float64 product is
    exact. Non-finite or negative scales follow IEEE arithmetic (NaN scale ->
    NaN values).

    Parameters
    ----------
    q : numpy.ndarray of int8, shape (..., n)
    scales : numpy.ndarray of float16 or uint16, shape (..., ceil(n / 64))

    Returns
    -------
    numpy.ndarray of float64, shape (..., n)
    """
    qa, sa = _check_q_scales(q, scales)
    return qa.astype(np.float64) * _expand(sa.astype(np.float64), qa.shape[-1])


def dequantize_int8_fixed(q, scales) -> np.ndarray:
    """Exact integers ``q * s * 2**24`` (int64) of a block-scaled INT8 message.

    Raises
    ------
    ValueError
        If a scale is negative (sign bit set) or not finite.
    """
    qa, sa = _check_q_scales(q, scales)
    sb = sa.view(np.uint16).astype(np.int64)
    if (((sb & FP16.sign_mask) != 0) | ((sb & FP16.exp_mask) == FP16.exp_mask)).any():
        raise ValueError("scales must be finite with the sign bit clear for an exact integer "
                         "result")
    return qa.astype(np.int64) * _expand(fp16_to_fixed(sb), qa.shape[-1])


class Reduced(NamedTuple):
    """The golden result of one collective on one rank, whatever its op and dtype.

    Every collective of this module returns this type: :func:`allreduce`, :func:`reduce`,
    each rank's entry of :func:`reduce_scatter`, and the copies :func:`allgather` and
    :func:`broadcast` (for those ``status_per`` is all zeros and ``status`` is NONE).

    Members
    -------
    out : numpy.ndarray, shape (n,)
        The result: float16 or uint16 (FP16), uint16 (BF16 bit patterns) or int8 (INT8), the
        dtype of the input data.
    scales : numpy.ndarray or None
        INT8: the output block scales, shape ``(ceil(n / 64),)``, the dtype of the input scales;
        None for FP16 and BF16.
    status_per : numpy.ndarray of uint8
        :class:`Status` bits per element (FP16, BF16) or per block (INT8).
    status : Status
        OR of ``status_per``: what the completion flag's data bits must carry.
    """

    out: np.ndarray
    scales: np.ndarray | None
    status_per: np.ndarray
    status: Status

    @property
    def out_bytes(self) -> bytes:
        """The result as it lies in an endpoint's memory (little-endian)."""
        return self.out.tobytes()

    @property
    def scale_bytes(self) -> bytes | None:
        """The INT8 output scales as they lie in memory; None for FP16 and BF16."""
        return None if self.scales is None else self.scales.tobytes()


#: The dtypes :func:`allreduce` and :func:`encode` take, by name.
DTYPES = ("fp16", "bf16", "int8")


def _dtype_key(dtype) -> str:
    name = str(getattr(dtype, "name", dtype)).lower()
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    return name


def encode(dtype, x):
    """Messages of ``dtype`` from real values ``x`` (any float array): ``(data, scales)``.

    FP16: ``x`` rounded to float16; BF16: rounded to float32, then RNE to BF16 bit patterns
    (:func:`~scin.sim.fp.float_to_bf16_bits`); INT8: rounded to float16, then block-quantized
    (:func:`quantize_int8`). ``scales`` is None but for INT8.
    """
    name = _dtype_key(dtype)
    x = np.asarray(x)
    if name == "fp16":
        return x.astype(np.float16), None
    if name == "bf16":
        return float_to_bf16_bits(x.astype(np.float32)), None
    return quantize_int8(x.astype(np.float16))


def allreduce(dtype, data, scales=None) -> Reduced:
    """The golden All-Reduce of ``N`` messages of one dtype: the one entry every check of a
    collective's result uses.

    Parameters
    ----------
    dtype : str or enum member
        ``"fp16"``, ``"bf16"`` or ``"int8"`` (any case), or a member named so (the ISA's
        ``DType``).
    data : numpy.ndarray, shape (N, n)
        Row ``i`` is participant ``i``'s message, as :func:`allreduce_fp16`,
        :func:`allreduce_bf16` or :func:`allreduce_int8` take it.
    scales : numpy.ndarray, shape (N, ceil(n / 64)), optional
        The INT8 block scales; required for ``int8``, refused otherwise.

    Raises
    ------
    ValueError
        If ``dtype`` is none of the three, or ``scales`` is missing (INT8) or given (FP16, BF16);
        and as the per-dtype functions raise.
    """
    name = _dtype_key(dtype)
    if name == "int8":
        if scales is None:
            raise ValueError("int8 needs the input block scales")
        return Reduced(*allreduce_int8(data, scales))
    if scales is not None:
        raise ValueError(f"{name} takes no scales")
    out, status_per, status = (allreduce_fp16 if name == "fp16" else allreduce_bf16)(data)
    return Reduced(out, None, status_per, status)


# ------------------------------------------------------------------------ the NCCL collective set

#: The collectives :func:`collective` takes, by name (NCCL's set).
OPS = ("allreduce", "reduce-scatter", "allgather", "broadcast", "reduce")

#: Per dtype: the data dtypes accepted, and how a message names them.
_DATA_KINDS = {
    "fp16": ((np.dtype(np.float16), np.dtype(np.uint16)), "float16 or uint16 (FP16 bit patterns)"),
    "bf16": ((np.dtype(np.uint16),), "uint16 (BF16 bit patterns)"),
    "int8": ((np.dtype(np.int8),), "int8"),
}


def _collective_input(op: str, dtype, data, scales, shape: str):
    """Check the dtype key, data dtype and 2-D shape, and that scales are given iff INT8.

    Returns (dtype key, data array, scale array or None); the caller checks the column count
    and the scales' shape, which depend on the op.
    """
    name = _dtype_key(dtype)
    a = np.asarray(data)
    kinds, text = _DATA_KINDS[name]
    if a.dtype not in kinds:
        raise TypeError(f"{op} {name} data must have dtype {text}, not {a.dtype.name}")
    _check_2d(f"{op} data", a, shape)
    if name != "int8":
        if scales is not None:
            raise ValueError(f"{op}: {name} takes no scales")
        return name, a, None
    if scales is None:
        raise ValueError(f"{op}: int8 needs the input block scales")
    sb = np.asarray(scales)
    if sb.dtype not in (np.float16, np.uint16):
        raise TypeError(f"{op} scales must have dtype float16 or uint16 (FP16 bit patterns), "
                        f"not {sb.dtype.name}")
    return name, a, sb


def _check_scales_shape(op: str, sb: np.ndarray, want: tuple[int, int], formula: str) -> None:
    if sb.shape != want:
        raise ValueError(f"{op} scales must have shape {formula} = {want}, not {sb.shape}")


def _check_whole_blocks(op: str, what: str, c: int) -> None:
    if c % BLOCK:
        raise ValueError(f"{op} int8 {what} must be a whole number of blocks "
                         f"(a multiple of {BLOCK} elements); got c={c}")


def _check_root(op: str, root, n_part: int) -> int:
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < n_part:
        raise ValueError(f"{op} root must be an int in 0..N-1 = 0..{n_part - 1} (N={n_part}), "
                         f"not {root!r}")
    return int(root)


def _copy_bits(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a`` made through an integer view, so no value is ever touched."""
    if a.dtype == np.float16:
        return np.ascontiguousarray(a.view(np.uint16)).copy().view(np.float16)
    return np.ascontiguousarray(a).copy()


def reduce_scatter(dtype, data, scales=None) -> list[Reduced]:
    """The golden ReduceScatter (NCCL ``ncclReduceScatter``, sum): rank ``r`` gets shard ``r``
    reduced.

    Every rank sends ``N * c`` elements, ``c`` being NCCL's ``recvcount``; rank ``r`` receives
    ``c`` elements: the reduction of all ranks' elements ``r*c .. (r+1)*c - 1``. Each shard is
    exactly :func:`allreduce` of that column slice, so the rounding, the status bits and, for
    INT8, the one requantization are those of All-Reduce.

    Parameters
    ----------
    dtype : str or enum member
        ``"fp16"``, ``"bf16"`` or ``"int8"``, as :func:`allreduce` takes it.
    data : numpy.ndarray, shape (N, N * c)
        Row ``i`` is rank ``i``'s send buffer (its dtype as for :func:`allreduce`).
    scales : numpy.ndarray, shape (N, N * c / 64), optional
        INT8 only (required): the block scales. ``c`` must then be a multiple of 64, so that
        every shard is a whole number of blocks.

    Returns
    -------
    list of Reduced
        ``N`` entries, rank ``r``'s at index ``r``: ``out`` of shape ``(c,)``, INT8 ``scales``
        of shape ``(c / 64,)``, and ``status_per``/``status`` of rank ``r``'s shard only.

    Raises
    ------
    TypeError
        If the data or scale dtype does not fit ``dtype``.
    ValueError
        If ``dtype`` is unknown, ``data`` is not 2-D, ``N`` is out of range, the column count is
        not a multiple of ``N``, an INT8 shard is not a whole number of blocks, the scales have
        the wrong shape, or scales are missing (INT8) or given (FP16, BF16).
    """
    op = "reduce_scatter"
    name, a, sb = _collective_input(op, dtype, data, scales, "(N, N*c)")
    n_part, width = a.shape
    if width % n_part:
        raise ValueError(f"{op} data must have shape (N, N*c); got {a.shape}: {width} columns "
                         f"are not a multiple of N={n_part}")
    c = width // n_part
    if name != "int8":
        return [allreduce(name, a[:, r * c:(r + 1) * c]) for r in range(n_part)]
    _check_whole_blocks(op, "shard", c)
    _check_scales_shape(op, sb, (n_part, width // BLOCK), "(N, N*c/64)")
    cb = c // BLOCK
    return [allreduce(name, a[:, r * c:(r + 1) * c], sb[:, r * cb:(r + 1) * cb])
            for r in range(n_part)]


def allgather(dtype, data, scales=None) -> Reduced:
    """The golden AllGather (NCCL ``ncclAllGather``): every rank gets all shards in rank order.

    Rank ``r`` sends ``c`` elements (NCCL's ``sendcount``); every rank receives ``N * c``:
    rank ``r``'s shard at ``r*c .. (r+1)*c - 1``. Nothing is computed: every bit pattern is
    copied unchanged (FP16 ``-0.0``, NaN payloads and signs, BF16 patterns, INT8 values and
    their scale patterns, valid or not), and the status is NONE.

    Parameters
    ----------
    dtype : str or enum member
        ``"fp16"``, ``"bf16"`` or ``"int8"``, as :func:`allreduce` takes it.
    data : numpy.ndarray, shape (N, c)
        Row ``r`` is rank ``r``'s shard.
    scales : numpy.ndarray, shape (N, c / 64), optional
        INT8 only (required): each shard's block scales; ``c`` must be a multiple of 64.

    Returns
    -------
    Reduced
        What every rank receives: ``out`` of shape ``(N * c,)`` in the dtype of ``data``; INT8
        ``scales`` of shape ``(N * c / 64,)`` (the rows of ``scales`` concatenated, their dtype);
        ``status_per`` all zeros (one per element, or per block for INT8); ``status`` NONE.

    Raises
    ------
    TypeError
        If the data or scale dtype does not fit ``dtype``.
    ValueError
        If ``dtype`` is unknown, ``data`` is not 2-D, ``N`` is out of range, an INT8 shard is not
        a whole number of blocks, the scales have the wrong shape, or scales are missing (INT8)
        or given (FP16, BF16).
    """
    op = "allgather"
    name, a, sb = _collective_input(op, dtype, data, scales, "(N, c)")
    n_part, c = a.shape
    out = _copy_bits(a).reshape(-1)  # row-major: rank 0's shard, then rank 1's, ...
    if name != "int8":
        return Reduced(out, None, np.zeros(out.shape, np.uint8), Status.NONE)
    _check_whole_blocks(op, "shard", c)
    _check_scales_shape(op, sb, (n_part, c // BLOCK), "(N, c/64)")
    s_out = _copy_bits(sb).reshape(-1)
    return Reduced(out, s_out, np.zeros(s_out.shape, np.uint8), Status.NONE)


def broadcast(dtype, data, scales=None, root=0) -> Reduced:
    """The golden Broadcast (NCCL ``ncclBroadcast``): every rank gets the root's buffer.

    The root sends ``n`` elements (NCCL's ``count``) and every rank, the root included,
    receives them unchanged: bit patterns and INT8 block scales are copied, status NONE.

    Parameters
    ----------
    dtype : str or enum member
        ``"fp16"``, ``"bf16"`` or ``"int8"``, as :func:`allreduce` takes it.
    data : numpy.ndarray, shape (N, n)
        Only row ``root`` is read; the other rows are checked for shape only and ignored.
    scales : numpy.ndarray, shape (N, ceil(n / 64)), optional
        INT8 only (required); only row ``root`` is read. A short last block is allowed.
    root : int
        The sending rank, ``0 <= root < N``.

    Returns
    -------
    Reduced
        ``out`` = row ``root`` of ``data`` (shape ``(n,)``), INT8 ``scales`` = row ``root`` of
        ``scales``, ``status_per`` all zeros, ``status`` NONE.

    Raises
    ------
    TypeError
        If the data or scale dtype does not fit ``dtype``.
    ValueError
        If ``root`` is not an int in ``0..N-1``, ``dtype`` is unknown, ``data`` is not 2-D,
        ``N`` is out of range, the scales have the wrong shape, or scales are missing (INT8) or
        given (FP16, BF16).
    """
    op = "broadcast"
    name, a, sb = _collective_input(op, dtype, data, scales, "(N, n)")
    n_part, n = a.shape
    root = _check_root(op, root, n_part)
    if name == "int8":
        _check_scales_shape(op, sb, (n_part, num_blocks(n)), "(N, ceil(n/64))")
    out = _copy_bits(a[root])
    if name != "int8":
        return Reduced(out, None, np.zeros(out.shape, np.uint8), Status.NONE)
    s_out = _copy_bits(sb[root])
    return Reduced(out, s_out, np.zeros(s_out.shape, np.uint8), Status.NONE)


def reduce(dtype, data, scales=None, root=0) -> Reduced:
    """The golden Reduce (NCCL ``ncclReduce``, sum): the root gets the reduction of all buffers.

    Every rank sends ``n`` elements (NCCL's ``count``); only the root receives, and what it
    receives is exactly :func:`allreduce` of ``data`` (INT8: one requantization).

    Parameters
    ----------
    dtype : str or enum member
        ``"fp16"``, ``"bf16"`` or ``"int8"``, as :func:`allreduce` takes it.
    data : numpy.ndarray, shape (N, n)
        Row ``i`` is rank ``i``'s send buffer.
    scales : numpy.ndarray, shape (N, ceil(n / 64)), optional
        INT8 only (required).
    root : int
        The receiving rank, ``0 <= root < N``; it does not change the result.

    Returns
    -------
    Reduced
        The root's result (the other ranks receive nothing; see :func:`collective`).

    Raises
    ------
    TypeError
        If the data or scale dtype does not fit ``dtype``.
    ValueError
        If ``root`` is not an int in ``0..N-1``, and as :func:`allreduce` raises.
    """
    op = "reduce"
    name, a, sb = _collective_input(op, dtype, data, scales, "(N, n)")
    n_part, n = a.shape
    _check_root(op, root, n_part)
    if name == "int8":
        _check_scales_shape(op, sb, (n_part, num_blocks(n)), "(N, ceil(n/64))")
    return allreduce(name, a, sb)


def op_key(op) -> str:
    """The name in :data:`OPS` of ``op`` (a name in any case, ``_`` for ``-``, or a member named
    so, as the ISA's ``Op``); ValueError for anything else."""
    name = str(getattr(op, "name", op)).lower().replace("_", "-")
    if name not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, not {op!r}")
    return name


def collective(op, dtype, data, scales=None, root=0) -> list[Reduced | None]:
    """The golden result of any collective of :data:`OPS`, per rank: the entry for checking a run.

    Parameters
    ----------
    op : str or enum member
        ``"allreduce"``, ``"reduce-scatter"``, ``"allgather"``, ``"broadcast"`` or ``"reduce"``
        (any case, ``_`` for ``-``), or a member named so (the ISA's ``Op``).
    dtype, data, scales
        As the op's function takes them: :func:`allreduce`, :func:`reduce_scatter`,
        :func:`allgather`, :func:`broadcast` or :func:`reduce`.
    root : int
        The root of ``broadcast`` and ``reduce``; ignored by the other ops.

    Returns
    -------
    list of (Reduced or None)
        ``N`` entries, rank ``r``'s at index ``r``: what rank ``r`` receives, or None if it
        receives nothing (``reduce``'s non-root ranks). Where every rank receives the same
        result (``allreduce``, ``allgather``, ``broadcast``) the entries are one object.

    Raises
    ------
    ValueError
        If ``op`` is none of :data:`OPS`; and as the op's function raises.
    """
    key = op_key(op)
    if key == "reduce-scatter":
        return reduce_scatter(dtype, data, scales)
    if key == "reduce":
        result = reduce(dtype, data, scales, root)
        return [result if r == root else None for r in range(np.asarray(data).shape[0])]
    if key == "allreduce":
        result = allreduce(dtype, data, scales)
    elif key == "allgather":
        result = allgather(dtype, data, scales)
    else:
        result = broadcast(dtype, data, scales, root)
    return [result] * np.asarray(data).shape[0]
