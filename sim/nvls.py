"""Golden model of the NVLink-SHARP (NVLS) baseline reduction: FP32 accumulation in arrival order.

NVLS's ``multimem.ld_reduce`` reduces FP16/BF16 elements by accumulating in FP32 and rounding once
per result. The FP32 additions happen in the order the members' responses arrive, and FP32
addition is not associative, so the result bits depend on that order. This module pins the model
the switch's NVLS mode implements (:class:`scin.hdl.nvls.reducer.NvlsReducer`), bit for bit:

1. **Widen.** Each member's 16-bit element is converted to FP32 exactly (FP16: every value,
   subnormals included, is an FP32 normal; BF16: the pattern shifted left by 16).
2. **Accumulate.** ``acc = x[order[0]]``, then ``acc = fp32(acc + x[order[k]])`` for
   ``k = 1 .. len(order) - 1``: IEEE-754 binary32 addition, round to nearest even after every add,
   subnormals kept (no flush to zero), overflow to +-Inf.
3. **Narrow.** ``acc`` is rounded once to the output dtype, round to nearest even, subnormals
   kept, overflow to +-Inf (FP16 via NumPy's ``astype(float16)``; BF16 by :func:`fp32_to_bf16`).

Non-finite values follow IEEE-754 arithmetic, and every NaN result is replaced by the dtype's
canonical quiet NaN (FP16 ``0x7E00``, BF16 ``0x7FC0``, as in ``docs/NUMERICS.md`` section 1). So:

* any NaN input (any payload, any sign, signalling or quiet) gives the canonical NaN;
* ``+Inf`` and ``-Inf`` among the inputs give the canonical NaN; otherwise an infinite input gives
  that infinity. For FP16 this is exactly the rule of the ISA modes (``docs/NUMERICS.md``
  section 3): an FP32 sum of FP16 values cannot overflow (``16 * 65504 < 2**24``).
* BF16 values reach FP32's range, so an FP32 partial sum can overflow to +-Inf, which then behaves
  like an infinite input from that point of the order on (e.g. ``max + max - max`` is ``+Inf``
  while ``max - max + max`` is ``max``; :data:`BF16_OVERFLOW_EXAMPLE`). The ISA modes, with their
  wider exact sums, return ``max`` for both: this is an NVLS difference, not a bug.
* A final sum beyond the output format's largest finite value gives +-Inf (no status flags: NVLS
  reports none).

Zeros keep IEEE signs, unlike the ISA modes' always-``+0``: ``-0 + -0 = -0``, ``x + (-x) = +0``, a
single member's ``-0`` stays ``-0``, and a negative FP32 sum too small for the output format rounds
to ``-0``.

Order: ``order`` lists the members taking part, in arrival order (each at most once); members not
listed do not contribute. With two members the result never depends on the order (IEEE addition
is commutative); with three or more it can (:func:`order_dependence_example`).
"""

from __future__ import annotations

import numpy as np

from .fp import BF16, FP16

__all__ = ["DTYPES", "MAX_MEMBERS", "CANONICAL_NAN", "widen", "narrow", "fp32_to_bf16",
           "accumulate_fp32", "nvls_reduce", "order_dependence_example", "ORDER_EXAMPLE",
           "BF16_OVERFLOW_EXAMPLE"]

#: The dtypes the NVLS mode reduces, by the names :mod:`scin.sim.numerics` uses.
DTYPES = ("fp16", "bf16")
#: Most members one reduction may name (the hardware's largest ``members`` parameter is 16; the
#: model itself has no reason to stop there, but an order longer than this is surely a mistake).
MAX_MEMBERS = 1024
#: The canonical quiet NaN produced for each dtype (``docs/NUMERICS.md`` section 1).
CANONICAL_NAN = {"fp16": FP16.qnan, "bf16": BF16.qnan}

#: A concrete FP16 case whose result depends on the order: ``(members, order_a, order_b,
#: result_a, result_b)``, members as uint16 bit patterns of one element each. 32768 - 32768 + 2**-24
#: keeps the subnormal (``0x0001``); 32768 + 2**-24 rounds back to 32768 in FP32 (the subnormal is
#: 2**-39 of the big term, far below FP32's 24 bits), so 32768 + 2**-24 - 32768 is ``+0``.
ORDER_EXAMPLE = (((0x7800,), (0xF800,), (0x0001,)), (0, 1, 2), (0, 2, 1), 0x0001, 0x0000)

#: A BF16 case where an FP32 partial sum overflows in one order only: ``max + max`` is +Inf in
#: FP32 and stays +Inf (``0x7F80``), while ``max - max + max`` is ``max`` (``0x7F7F``).
BF16_OVERFLOW_EXAMPLE = (((0x7F7F,), (0x7F7F,), (0xFF7F,)), (0, 1, 2), (0, 2, 1), 0x7F80, 0x7F7F)


def _dtype_key(dtype) -> str:
    """``"fp16"`` or ``"bf16"`` from a name (any case) or an enum member named so (``DType``)."""
    name = str(getattr(dtype, "name", dtype)).lower()
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (NVLS reduces no other), "
                         f"not {dtype!r}")
    return name


def _bits(x, what="members") -> np.ndarray:
    a = np.asarray(x)
    if a.dtype == np.float16:
        return a.view(np.uint16)
    if a.dtype != np.uint16:
        raise TypeError(f"{what} must hold uint16 bit patterns (or float16 for FP16), "
                        f"not {a.dtype.name}")
    return a


def widen(bits, dtype) -> np.ndarray:
    """Exact FP32 values (``float32``) of FP16 or BF16 bit patterns (``uint16``, any shape).

    Every FP16 and BF16 value, subnormals and infinities included, is an FP32 value; NaNs stay
    NaN (their payload does not matter: every NaN result is made canonical by :func:`narrow`).
    """
    b = _bits(bits, "bits")
    if _dtype_key(dtype) == "fp16":
        return b.view(np.float16).astype(np.float32)   # exact: binary16 is a subset of binary32
    return (b.astype(np.uint32) << 16).view(np.float32)


def fp32_to_bf16(x) -> np.ndarray:
    """Round FP32 values (``float32``) to BF16 bit patterns: RNE on the bits, subnormals kept,
    overflow to +-Inf, any NaN to the canonical ``0x7FC0``.

    On the FP32 pattern ``b``, adding ``0x7FFF + b[16]`` and keeping the high half is RNE at bit
    16: below half (low half < 0x8000) never carries, above half always does, and exactly half
    carries iff the kept LSB ``b[16]`` is odd. A carry out of the fraction steps into the exponent
    by plain addition (the next binade, or +-Inf from the largest finite binade); sign and
    subnormals need nothing special, as the pattern is sign-magnitude.
    """
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = ((b & 0x7F800000) == 0x7F800000) & ((b & 0x007FFFFF) != 0)
    return np.where(nan, np.uint16(BF16.qnan), rounded).astype(np.uint16)


def narrow(acc, dtype) -> np.ndarray:
    """Round FP32 values (``float32``) once to ``dtype`` bit patterns (``uint16``): round to nearest
    even, subnormals kept, overflow to +-Inf, every NaN to the dtype's canonical NaN."""
    a = np.asarray(acc, dtype=np.float32)
    if _dtype_key(dtype) == "bf16":
        return fp32_to_bf16(a)
    with np.errstate(over="ignore"):    # overflow to +-Inf is the defined result
        out = a.astype(np.float16).view(np.uint16)
    return np.where(np.isnan(a), np.uint16(FP16.qnan), out).astype(np.uint16)


def _check(members, order):
    rows = [_bits(m) for m in members] if isinstance(members, (list, tuple)) else None
    arr = np.stack(rows) if rows is not None and rows else _bits(members)
    if arr.ndim != 2:
        raise ValueError("members must be N equal-length arrays, shape (N, n); "
                         f"got shape {arr.shape}")
    n_members = arr.shape[0]
    order = [int(k) for k in order]
    if not 1 <= len(order) <= min(n_members, MAX_MEMBERS):
        raise ValueError(f"order must name between 1 and N={n_members} members, not {len(order)}")
    bad = [k for k in order if not 0 <= k < n_members]
    if bad:
        raise ValueError(f"order entries must be member indices 0..{n_members - 1}, not {bad[0]}")
    if len(set(order)) != len(order):
        raise ValueError(f"order must name each member at most once: {order}")
    return arr, order


def accumulate_fp32(members, order, dtype) -> np.ndarray:
    """The FP32 accumulator after every member of ``order`` was added, before the final rounding
    (``float32``, shape ``(n,)``). NaNs keep NumPy's payloads here; see :func:`nvls_reduce`."""
    arr, order = _check(members, order)
    acc = widen(arr[order[0]], dtype)
    with np.errstate(over="ignore", invalid="ignore"):   # Inf and NaN are defined results
        for k in order[1:]:
            # float32 + float32 in NumPy is one IEEE binary32 addition, rounded to nearest even.
            acc = (acc + widen(arr[k], dtype)).astype(np.float32)
    return acc


def nvls_reduce(members, order, dtype) -> np.ndarray:
    """NVLS reduction of one element position per column: widen to FP32, add in ``order``, round.

    Parameters
    ----------
    members : sequence of N equal-length uint16 arrays, or an array of shape (N, n)
        Member ``i``'s elements as FP16 or BF16 bit patterns (FP16 may also be given as float16).
    order : sequence of int
        The members taking part, in the order their values are accumulated (arrival order): a list
        of distinct indices in ``0..N-1``, ``1 <= len(order) <= N``. ``order[0]`` starts the
        accumulator; members not listed are ignored.
    dtype : str or enum member
        ``"fp16"`` or ``"bf16"`` (any case), or a ``DType`` member named so.

    Returns
    -------
    numpy.ndarray of uint16, shape (n,)
        ``narrow(acc)`` where ``acc`` is the sequential FP32 sum (module docstring): one RNE
        rounding per FP32 add, one per result. Any NaN result, including ``+Inf + -Inf`` anywhere in
        the sequence, is the canonical quiet NaN (FP16 ``0x7E00``, BF16 ``0x7FC0``); infinities
        keep their sign; zeros keep IEEE signs.

    Raises
    ------
    TypeError
        If ``members`` does not hold uint16 (or float16) values.
    ValueError
        If ``dtype`` is not FP16/BF16, ``members`` is not 2-D, or ``order`` is not a list of
        distinct member indices of length 1..N.
    """
    return narrow(accumulate_fp32(members, order, dtype), dtype)


def order_dependence_example(dtype="fp16"):
    """A case whose result depends on the order: ``(members, order_a, order_b, result_a,
    result_b)`` with ``members`` an array of shape (3, 1) and the results as ints, checked against
    :func:`nvls_reduce` before it is returned (so the example cannot go stale).

    FP16 (:data:`ORDER_EXAMPLE`): large cancellation. BF16 (:data:`BF16_OVERFLOW_EXAMPLE`): an FP32
    partial sum that overflows in one order only.
    """
    example = ORDER_EXAMPLE if _dtype_key(dtype) == "fp16" else BF16_OVERFLOW_EXAMPLE
    members, order_a, order_b, want_a, want_b = example
    arr = np.array(members, dtype=np.uint16)
    got_a = int(nvls_reduce(arr, order_a, dtype)[0])
    got_b = int(nvls_reduce(arr, order_b, dtype)[0])
    assert (got_a, got_b) == (want_a, want_b) and got_a != got_b, (got_a, got_b)
    return arr, list(order_a), list(order_b), got_a, got_b
