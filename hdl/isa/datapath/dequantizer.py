"""Dequantizer: every participant's flit to exact fixed-point terms (one per lane)."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..dtype import DType
from .common import (check_params, dequant_layout, input_layout, lanes16, lanes8, register)


__all__ = ["Dequantizer"]


class Dequantizer(wiring.Component):
    """Turn each participant's flit into exact terms, lane by lane.

    * FP16 (``flit_width/16`` lanes): ``val = x * 2**24``, an exact signed integer (``|val| < 2**40``);
      NaN/Inf inputs give ``val = 0`` and raise ``nan``/``pinf``/``ninf`` of the lane.
    * BF16: the biased exponent ``bexp`` (1 for zeros, subnormals and non-finite inputs), the 8-bit
      significand ``bsig`` (hidden bit set only for normals; 0 for non-finite inputs) and the sign
      ``bneg``, for :class:`TreeReducer` to align to the largest exponent; plus the same flags.
    * INT8 (``flit_width/8`` lanes): ``val = q * s * 2**24`` with ``s`` the participant's FP16 block
      scale; a negative (sign bit set, ``-0`` included) or non-finite scale raises ``bad`` and gives
      ``val = 0``. The product is an 8 x 11-bit multiply (``q`` times the scale's significand)
      followed by a shift by the scale's exponent; the FP16 path shares that shifter.

    The fields of other modes are don't-care. ``dtype`` and ``last`` pass through.

    Parameters
    ----------
    n_inputs : int
        Participants, 2 to 8.
    flit_width : int
        64, 128, 256 or 512.

    Members
    -------
    i : In(stream.Signature(input_layout(n_inputs, flit_width)))
    o : Out(stream.Signature(dequant_layout(n_inputs, flit_width)))

    Two pipeline stages (``LATENCY``); one flit per cycle; a stall holds the whole pipeline
    (``en = ~o.valid | o.ready``).
    """

    LATENCY = 2

    def __init__(self, *, n_inputs=4, flit_width=256):
        check_params(n_inputs, flit_width)
        self.n_inputs = n_inputs
        self.flit_width = flit_width
        super().__init__({
            "i": In(stream.Signature(input_layout(n_inputs, flit_width))),
            "o": Out(stream.Signature(dequant_layout(n_inputs, flit_width))),
        })

    def elaborate(self, platform):
        m = Module()
        n, w = self.n_inputs, self.flit_width
        l16, l8 = lanes16(w), lanes8(w)

        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]
        v1 = register(m, en, self.i.valid, "v1")
        with m.If(en):
            m.d.sync += self.o.valid.eq(v1)

        dtype = self.i.payload.dtype
        is_int8 = dtype == DType.INT8
        dtype1 = register(m, en, dtype, "dtype1")
        last1 = register(m, en, self.i.payload.last, "last1")
        with m.If(en):
            m.d.sync += [self.o.payload.dtype.eq(dtype1), self.o.payload.last.eq(last1)]

        for p in range(n):
            flit = self.i.payload.data[p]
            out = self.o.payload.part[p]

            # The INT8 scale, as significand and shift: s * 2**24 = ssig << ssh.
            scale = self.i.payload.scale[p]
            s_exp, s_frac = scale[10:15], scale[:10]
            bad = scale[15] | (s_exp == 0x1F)
            ssig = Mux(bad, 0, Mux(s_exp == 0, s_frac, Cat(s_frac, 1)))
            ssh = Mux(s_exp == 0, 0, s_exp - 1)[:5]

            nan, pinf, ninf, bneg = [], [], [], []
            bexp, bsig = [], []
            for lane in range(l16):
                x = flit[16 * lane:16 * (lane + 1)]
                # Non-finite detection depends on the format's exponent field.
                f_exp = x[10:15]
                b_exp = x[7:15]
                f_special = f_exp == 0x1F
                b_special = b_exp == 0xFF
                special = Mux(dtype == DType.BF16, b_special, f_special)
                frac_zero = Mux(dtype == DType.BF16, x[:7] == 0, x[:10] == 0)
                nan.append(special & ~frac_zero)
                pinf.append(special & frac_zero & ~x[15])
                ninf.append(special & frac_zero & x[15])
                bneg.append(x[15])
                bexp.append(Mux((b_exp == 0) | b_special, 1, b_exp))
                bsig.append(Mux(b_special, 0, Mux(b_exp == 0, x[:7], Cat(x[:7], 1))))

            for name, bits in (("nan", nan), ("pinf", pinf), ("ninf", ninf), ("bneg", bneg)):
                reg = register(m, en, Cat(*bits), f"{name}1_p{p}")
                with m.If(en):
                    m.d.sync += out[name].eq(reg)
            for name, fields in (("bexp", bexp), ("bsig", bsig)):
                for lane, value in enumerate(fields):
                    reg = register(m, en, value, f"{name}1_p{p}_l{lane}", shape=8)
                    with m.If(en):
                        m.d.sync += out[name][lane].eq(reg)
            bad1 = register(m, en, bad, f"bad1_p{p}")
            with m.If(en):
                m.d.sync += out.bad.eq(bad1)

            for lane in range(l8):
                q = flit[8 * lane:8 * (lane + 1)].as_signed()
                # 8 x 11-bit product, registered (maps to a DSP with its M register, or to LUTs).
                pre = q * ssig
                sh = ssh
                if lane < l16:
                    # FP16 shares the INT8 shifter: x * 2**24 = (+-sig) << (e - 1) for normals.
                    x = flit[16 * lane:16 * (lane + 1)]
                    f_exp, f_frac = x[10:15], x[:10]
                    fsig = Mux(f_exp == 0x1F, 0, Mux(f_exp == 0, f_frac, Cat(f_frac, 1)))
                    fval = Mux(x[15], -fsig, fsig)
                    fsh = Mux(f_exp == 0, 0, f_exp - 1)[:5]
                    pre = Mux(is_int8, pre, fval)
                    sh = Mux(is_int8, ssh, fsh)
                pre1 = register(m, en, pre, f"pre1_p{p}_l{lane}", shape=signed(20))
                sh1 = register(m, en, sh, f"sh1_p{p}_l{lane}", shape=5)
                with m.If(en):
                    m.d.sync += out.val[lane].eq(pre1 << sh1)
        return m
