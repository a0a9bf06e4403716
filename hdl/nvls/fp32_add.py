"""A pipelined IEEE-754 binary32 adder: round to nearest even, subnormals in and out."""

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..isa.datapath.common import bit_length, register, wire


__all__ = ["Fp32Adder", "FP32_QNAN"]

#: The canonical quiet NaN every NaN result is replaced by.
FP32_QNAN = 0x7FC00000

_ONES27 = (1 << 27) - 1


class Fp32Adder(wiring.Component):
    """``sum = fp32(a + b)``: IEEE-754 binary32 addition, round to nearest, ties to even.

    Bit for bit NumPy's ``float32`` addition (x86 SSE without flush-to-zero), except that every
    NaN result is the canonical quiet NaN ``0x7FC00000``:

    * subnormal inputs are used as they are and subnormal results are produced (no flushing);
    * a finite sum that rounds beyond the largest finite value is +-Inf;
    * a NaN input (any payload or sign), or ``+Inf + -Inf``, gives ``0x7FC00000``; otherwise an
      infinite input gives that infinity;
    * an exact zero sum is ``+0``, except ``-0 + -0 = -0``. In particular ``x + (-0) = x`` for
      every non-NaN ``x``: the reducer uses ``-0`` as the operand of a stage that adds nothing.

    Members
    -------
    en : In(1)
        Pipeline enable: every register of the adder loads only on cycles where ``en`` is high
        (a stalled pipeline holds its contents).
    a, b : In(32)
        The operands, sampled on enabled cycles.
    sum : Out(32)
        A register: the sum of the operands sampled :attr:`LATENCY` enabled cycles earlier.

    Timing: a new pair every enabled cycle (one result per cycle), fixed latency
    :attr:`LATENCY` = 4 enabled cycles, results in the order of their operands. The stages:

    1. unpack, special cases, order the operands by magnitude (``|x| >= |y|``), exponent difference;
    2. align ``y`` to ``x`` with two guard bits and a sticky bit, add or subtract (28 bits);
    3. normalise (leading-one count and left shift, stopped at the subnormal exponent);
    4. round to nearest even, pack, overflow to +-Inf, select a special result.

    Why three extra bits are enough: with ``d = ex - ey <= 2`` nothing is shifted out and the sum
    is exact. With ``d >= 3``, ORing the shifted-out bits into bit 0 makes the sum the
    round-to-odd of the exact sum at bit 0 (``x`` has zeros there), and the result needs at most
    one left shift (``|x| >= 2**26`` units, ``|y| < 2**24``), so at least two bits lie below the
    24-bit significand: rounding a round-to-odd value carrying two extra bits to nearest even is
    the correct rounding of the exact value.
    """

    #: Enabled cycles from the operands to their sum on :attr:`sum`.
    LATENCY = 4

    def __init__(self):
        super().__init__({"en": In(1), "a": In(32), "b": In(32), "sum": Out(32)})

    @property
    def latency(self):
        """:attr:`LATENCY`."""
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        s1 = self._unpack(m)
        s2 = self._align_add(m, s1)
        s3 = self._normalise(m, s2)
        self._round(m, s3)
        return m

    def _stage(self, m, values, stage):
        """Register every entry of ``values`` (a dict of name -> value) for the next stage."""
        return {k: register(m, self.en, v, f"{k}{stage}") for k, v in values.items()}

    def _unpack(self, m):
        """Stage 1. Returns its registers: ``x`` is the operand of larger magnitude, so the
        exponent difference is never negative and a difference never goes below zero."""
        a, b = self.a, self.b

        def fields(v, name):
            e, f = v[23:31], v[:23]
            return {"s": v[31], "e": e, "f": f, "inf": (e == 0xFF) & ~f.any(),
                    "nan": wire(m, (e == 0xFF) & f.any(), f"{name}_nan")}

        fa, fb = fields(a, "a"), fields(b, "b")
        # Sign-magnitude: the 31 low bits of finite values order like their magnitudes.
        swap = wire(m, b[:31] > a[:31], "swap")
        x = wire(m, Mux(swap, b, a), "x")
        y = wire(m, Mux(swap, a, b), "y")
        ex_f, ey_f = x[23:31], y[23:31]
        # A subnormal has exponent 1 (not 0) and no hidden bit.
        ex = wire(m, Mux(ex_f == 0, 1, ex_f), "ex", shape=8)
        ey = wire(m, Mux(ey_f == 0, 1, ey_f), "ey", shape=8)
        d = wire(m, ex - ey, "d", shape=8)
        nan = (fa["nan"] | fb["nan"] | (fa["inf"] & fb["inf"] & (fa["s"] ^ fb["s"])))
        return self._stage(m, {
            "mx": Cat(x[:23], ex_f.any()),
            "my": Cat(y[:23], ey_f.any()),
            "ex": ex,
            # 27 or more: y lies entirely below the sticky position.
            "d": wire(m, Mux(d > 27, 27, d), "dclamp", shape=5),
            "sx": x[31],
            "sub": x[31] ^ y[31],
            "zsign": x[31] & y[31],     # the sign of an exact zero sum (RNE): -0 only for -0 + -0
            "nan": nan,
            "inf": fa["inf"] | fb["inf"],  # the result is x, the infinity, unless nan
        }, 1)

    def _align_add(self, m, r):
        """Stage 2: ``S = X +- Y`` with ``X = mx << 3`` and ``Y = (my << 3) >> d``, the bits shifted
        out ORed into bit 0 (sticky). ``S < 2**28`` and, as ``|x| >= |y|``, ``S >= 0``."""
        X = wire(m, Cat(Const(0, 3), r["mx"]), "X", shape=27)
        y3 = wire(m, Cat(Const(0, 3), r["my"]), "y3", shape=27)
        lost = wire(m, (y3 & ~(Const(_ONES27, 27) << r["d"])[:27]).any(), "lost")
        Y = wire(m, (y3 >> r["d"])[:27] | lost, "Y", shape=27)
        S = wire(m, Mux(r["sub"], X - Y, X + Y)[:28], "S", shape=28)
        keep = {k: r[k] for k in ("ex", "sx", "zsign", "nan", "inf")}
        return self._stage(m, {"S": S, **keep}, 2)

    def _normalise(self, m, r):
        """Stage 3: shift the leading one of ``S`` to bit 27, or less far if the exponent would go
        below 1 (a subnormal result, which is always exact). The biased exponent is then
        ``e = ex + 1 - shift`` (``1 <= e <= 255``)."""
        S, ex = r["S"], r["ex"]
        lz = wire(m, 28 - bit_length(S), "lz", shape=5)   # 28 for S == 0: masked as zero below
        shift = wire(m, Mux(lz > ex, ex, lz), "shift", shape=5)
        keep = {k: r[k] for k in ("sx", "zsign", "nan", "inf")}
        return self._stage(m, {
            "norm": (S << shift)[:28],
            "e": wire(m, ex + 1 - shift, "e", shape=8),
            "zero": ~S.any(),
            **keep,
        }, 3)

    def _round(self, m, r):
        """Stage 4: round to nearest even on the guard bit (bit 3) and sticky bits (2..0) and pack.
        ``sig`` keeps its hidden bit, so adding ``(e - 1) << 23`` encodes a normal (hidden bit 1),
        a subnormal (``e = 1``, hidden bit 0) and a rounding carry into the next exponent alike."""
        norm, sx = r["norm"], r["sx"]
        sig = norm[4:28]
        up = norm[3] & (norm[:3].any() | sig[0])
        body = wire(m, ((r["e"] - 1) << 23) + sig + up, "body", shape=32)
        inf_bits = Cat(Const(0, 23), Const(0xFF, 8), sx)
        result = Mux(r["nan"], FP32_QNAN,
                     Mux(r["inf"] | (body >= 0x7F800000), inf_bits,
                         Mux(r["zero"], Cat(Const(0, 31), r["zsign"]), Cat(body[:31], sx))))
        with m.If(self.en):
            m.d.sync += self.sum.eq(result)
