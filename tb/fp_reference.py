"""Exact references for floating-point patterns that the numerics tests share
(tb/unit/test_numerics.py, tb/unit/test_nvls_golden.py): written from the formats' definitions with
Python ``Fraction`` arithmetic, independently of the golden model in sim/."""

from fractions import Fraction


def to_fraction(bits: int, fmt) -> Fraction:
    """Exact value of a finite bit pattern of ``fmt``; a non-finite pattern fails an assertion."""
    sign = -1 if bits & fmt.sign_mask else 1
    e = (bits >> fmt.frac_bits) & ((1 << fmt.exp_bits) - 1)
    f = bits & fmt.frac_mask
    assert e != (1 << fmt.exp_bits) - 1, "not finite"
    if e == 0:
        return sign * Fraction(f) * Fraction(2) ** (fmt.emin - fmt.frac_bits)
    return sign * Fraction(f + (1 << fmt.frac_bits)) * Fraction(2) ** (e - fmt.bias - fmt.frac_bits)


def binade(a: Fraction, fmt) -> int:
    """The exponent ``e`` of positive ``a`` (``2**e <= a < 2**(e + 1)``), ``fmt.emin`` if lower."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return max(e, fmt.emin)


def rne(v, fmt, negative_zero=False) -> int:
    """Pattern of ``v`` rounded to nearest even; overflow to +-Inf; a zero result is -0 if
    ``negative_zero`` (exact zero) or if ``v < 0`` (a negative value that rounds to zero), else
    +0."""
    if v == 0:
        return fmt.sign_mask if negative_zero else 0
    sign = fmt.sign_mask if v < 0 else 0
    a = abs(v)
    e = binade(a, fmt)
    n = round(a / Fraction(2) ** (e - fmt.frac_bits))   # Fraction rounds half to even
    body = ((e + fmt.bias - 1) << fmt.frac_bits) + n     # n keeps its hidden bit: carries step up
    return sign | min(body, fmt.inf)
