"""Parameters, payload layouts and small arithmetic generators shared by the datapath blocks.

Widths (N <= 8 participants, see ``docs/DATAPATH.md``):

* ``TERM_WIDTH`` = 48: one participant's exact term in units of its mode's fixed point: an FP16
  value times 2**24 (``|X| < 2**40``), a BF16 significand aligned with 32 guard bits (``< 2**40``),
  or an INT8 product ``q * s * 2**24`` (``|q| <= 128``, ``s * 2**24 < 2**40``, so ``< 2**47``).
* ``SUM_WIDTH`` = 52: the exact sum of up to 8 terms (``< 2**50``), signed.
* ``BASE_WIDTH`` = 12: a lane's signed operand before the shift: FP16 or BF16 ``+-sig``, INT8 ``q``.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, signed, unsigned
from amaranth.lib import data
from amaranth.utils import ceil_log2

from ...params import check_choice, check_int
from ..dtype import BLOCK_ELEMENTS, DType


__all__ = ["FLIT_WIDTHS", "TERM_WIDTH", "SUM_WIDTH", "BASE_WIDTH", "PROD_WIDTH", "check_params",
           "lanes16", "lanes8", "block_flits", "input_layout", "output_layout", "sum_layout",
           "bit_length", "negate_if", "wire", "register", "FloatRounder", "RNE_PAD", "rne_window",
           "rne_shift", "rne_finish"]

FLIT_WIDTHS = (64, 128, 256, 512)
MIN_INPUTS, MAX_INPUTS = 2, 8
TERM_WIDTH = 48
SUM_WIDTH = 52
BASE_WIDTH = 12  # FP16 +-sig (11-bit significand), BF16 +-sig (8 bits), INT8 q
# A term's product before its multiple-of-16 shift, base * 2**f (f < 16): FP16/BF16 |.| < 2**26;
# INT8 q * (ssig << f): |.| <= 128 * 2047 * 2**15 < 2**34.
PROD_WIDTH = 35


def check_params(n_inputs, flit_width):
    """Validate the two datapath parameters.

    Raises
    ------
    TypeError
        If a parameter is not an integer.
    ValueError
        If ``n_inputs`` is not between 2 and 8 or ``flit_width`` not one of 64, 128, 256, 512.
    """
    check_int("n_inputs", n_inputs, MIN_INPUTS, MAX_INPUTS)
    check_int("flit_width", flit_width)
    check_choice("flit_width", flit_width, FLIT_WIDTHS)


def lanes16(flit_width):
    """FP16/BF16 elements per flit."""
    return flit_width // 16


def lanes8(flit_width):
    """INT8 elements per flit."""
    return flit_width // 8


def block_flits(flit_width):
    """Flits per INT8 block of 64 elements (1 at 512 bits, 8 at 64 bits)."""
    return BLOCK_ELEMENTS * 8 // flit_width


def input_layout(n_inputs, flit_width):
    """Payload of :attr:`Datapath.i`: one flit of every participant, and their INT8 block scales."""
    return data.StructLayout({
        "dtype": DType,
        "data":  data.ArrayLayout(flit_width, n_inputs),
        "scale": data.ArrayLayout(16, n_inputs),
        "last":  1,
    })


def output_layout(flit_width):
    """Payload of :attr:`Datapath.o`: one result flit, its block scale and its status."""
    return data.StructLayout({
        "dtype":  DType,
        "data":   flit_width,
        "scale":  16,
        "status": 2,
        "last":   1,
    })


def sum_layout(flit_width):
    """Payload between :class:`TreeReducer` and :class:`BlockQuantizer`: exact sums and flags."""
    l16 = lanes16(flit_width)
    return data.StructLayout({
        "dtype": DType,
        # FP16: T = sum x * 2**24; BF16: T = sum of aligned significands, value T * 2**(E-166);
        # INT8: V = sum q * s * 2**24. FP16/BF16 use the low lanes16 lanes.
        "sum":   data.ArrayLayout(signed(SUM_WIDTH), lanes8(flit_width)),
        "exp":   data.ArrayLayout(8, l16),   # BF16: E, the largest biased exponent of the lane
        "nan":   unsigned(l16),              # some input is NaN, or both +Inf and -Inf appear
        "pinf":  unsigned(l16),
        "ninf":  unsigned(l16),
        "bad":   1,                          # INT8: some participant's scale is bad
        "last":  1,
    })


def bit_length(value):
    """``value.bit_length()`` of an unsigned value, as a balanced tree of priority muxes."""
    width = len(value)
    if width == 1:
        return value[0]
    half = 1 << (ceil_log2(width) - 1)
    lo, hi = value[:half], value[half:]
    hi_len, lo_len = bit_length(hi), bit_length(lo)
    return Mux(hi.any(), half + hi_len, lo_len)


def negate_if(value, sign):
    """``-value`` if ``sign`` else ``value``, as ``(value ^ sign...sign) + sign`` (unsigned, one bit
    wider than ``value``; take its low bits). On a LUT + carry-chain FPGA the XOR merges into the
    adder's LUTs, where a multiplexer between ``value`` and ``-value`` costs an inverter and a LUT
    per bit."""
    return (value ^ sign.replicate(len(value))) + sign


def wire(m, value, name, shape=None):
    """A combinational signal driven by ``value``: names an intermediate result, and stops an
    expression that is used several times from being duplicated in the netlist."""
    sig = Signal(shape if shape is not None else value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def register(m, en, value, name, shape=None, *, reset_less=False):
    """A register that loads ``value`` on cycles where ``en`` is high, reset to zero unless
    ``reset_less``. A pipeline's data registers are reset-less: their stage's valid bit (reset)
    says whether they hold anything, and leaving them off the reset keeps the reset (or flush)
    net's fanout to the valid bits and the state."""
    reg = Signal(shape if shape is not None else value.shape(), name=name, reset_less=reset_less)
    with m.If(en):
        m.d.sync += reg.eq(value)
    return reg


def rne_window(m, x, amt, width, name):
    """``x >> amt`` (its low ``width`` bits) and whether any bit of ``x`` below ``amt`` is set.

    The shifter of the rounding step, shared in the block quantizer by a lane's FP16/BF16 rounding
    and its INT8 division (which needs the same window of the same magnitude, at the block's
    shift). Returns ``(window, low)``, both combinational.
    """
    xw = len(x)
    window = wire(m, (x >> amt)[:width], f"{name}_win", shape=width)
    below = ~(Const((1 << xw) - 1, xw) << amt)[:xw]
    low = wire(m, (x & below).any(), f"{name}_low")
    return window, low


def rne_shift(length, c, is_bf16):
    """The rounding step's shift for a magnitude of bit length ``length``:
    ``shift = max(length - precision, c)`` (signed; the bits dropped, negative for an exact left
    shift), with precision 8 (BF16) or 11 (FP16). See :class:`FloatRounder`."""
    raw = length - Mux(is_bf16, 8, 11)
    return Mux(raw > c, raw, c)


#: Zero bits put below a magnitude before the rounding shifter, so a left shift (``shift >= -7``,
#: see :class:`FloatRounder`) is a right shift by ``shift + RNE_PAD - 1`` like any other.
RNE_PAD = 8


def rne_finish(m, en, kept, guard, sticky, ebias, neg, nonzero, is_bf16, name):
    """The last stage of :class:`FloatRounder`: round ``kept`` (the significand, before rounding)
    to nearest even with its ``guard`` and ``sticky`` bits, add the biased exponent ``ebias`` and
    saturate to +-Inf. Returns the registers ``(bits, overflow)`` (loaded on ``en``)."""
    rounded = kept + (guard & (sticky | kept[0]))
    body = Signal(20, name=f"{name}_body")
    m.d.comb += body.eq(Mux(is_bf16, ebias << 7, ebias << 10) + rounded)
    inf = Mux(is_bf16, 0x7F80, 0x7C00)
    over = nonzero & (body >= inf)
    final = Mux(~nonzero, 0, Mux(over, inf, body))[:15]
    bits = register(m, en, ((neg & nonzero) << 15) | final, f"{name}_bits", shape=unsigned(16))
    overflow = register(m, en, over, f"{name}_ovf")
    return bits, overflow


class FloatRounder:
    """Round ``(-1)**neg * mag * 2**k`` to FP16 or BF16 with round-to-nearest-even, in two
    pipeline stages (the registers of each load on ``en``).

    This is :func:`scin.sim.fp.round_fixed` in hardware. The format and ``k`` arrive as
    ``c = emin - frac_bits - k``: the quantum is ``2**(shift + k)`` with
    ``shift = max(bit_length(mag) - precision, c)`` bits dropped (a negative ``shift`` is an exact
    left shift), and the biased exponent field is ``shift - c``. So subnormal results come out
    without a special case, and a significand that carries out lands in the next exponent by
    plain addition. For a nonzero ``mag``, ``shift >= -7`` is required (true for FP16 with
    ``c >= 0``, and for BF16: ``shift >= bit_length(mag) - 8``), so that, with ``RNE_PAD`` zero
    bits below ``mag``, one right shift by ``shift + 7`` gives the guard bit and the significand
    in every case.

    Parameters
    ----------
    m : Module
    en : Value
        Pipeline enable.
    mag : Value
        Unsigned magnitude.
    neg : Value
        Sign of a nonzero ``mag``; an exact zero always gives +0.
    c : Value
        Signed, see above (``0`` for an FP16 sum in units of 2**-24, ``33 - E`` for a BF16 sum,
        ``2`` for the INT8 scale quotient).
    is_bf16 : Value or bool
        Target format: BF16 (8-bit precision) when high, else FP16 (11-bit precision).
    name : str

    Attributes (valid two enabled cycles after the inputs)
    ----------
    bits : Signal(16)
        The rounded bit pattern (+-Inf on overflow).
    overflow : Signal()
        The rounded magnitude exceeded the largest finite value.
    """

    def __init__(self, m, en, mag, neg, c, is_bf16, name):
        width = len(mag)
        is_bf16 = Const(is_bf16, 1) if isinstance(is_bf16, bool) else is_bf16
        # Stage 1: normalise (find the leading one) and choose the quantum.
        mag = wire(m, mag, f"{name}_mag")
        length = wire(m, bit_length(mag), f"{name}_len", shape=range(width + 1))
        shift = Signal(signed(10), name=f"{name}_shift_c")
        m.d.comb += shift.eq(rne_shift(length, c, is_bf16))
        mag1 = register(m, en, mag, f"{name}_mag1")
        nz1 = register(m, en, mag.any(), f"{name}_nz1")
        neg1 = register(m, en, neg, f"{name}_neg1")
        bf1 = register(m, en, is_bf16, f"{name}_bf1")
        amt1 = register(m, en, (shift + RNE_PAD - 1)[:6], f"{name}_amt1", shape=6)
        ebias1 = register(m, en, (shift - c)[:10], f"{name}_ebias1", shape=unsigned(10))

        # Stage 2: the guard bit and the significand from one right shift, then RNE.
        x = Cat(Const(0, RNE_PAD), mag1)
        win, sticky = rne_window(m, x, amt1, 13, name)
        self.bits, self.overflow = rne_finish(m, en, win[1:], win[0], sticky, ebias1, neg1, nz1,
                                              bf1, name)
