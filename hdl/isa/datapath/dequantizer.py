"""Dequantizer: every participant's flit decoded into exact significands and shifts, per lane."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..dtype import DType
from .common import check_params, dequant_layout, input_layout, lanes16, lanes8


__all__ = ["Dequantizer"]


class Dequantizer(wiring.Component):
    """Decode each participant's flit, lane by lane, into the operands of the term shifter.

    * FP16 (``flit_width/16`` lanes): ``x * 2**24 = pre << sh`` with ``pre`` the signed
      significand (``+-sig``) and ``sh`` the exponent; NaN/Inf inputs give ``pre = 0`` and raise
      ``nan``/``pinf``/``ninf`` of the lane.
    * BF16: the biased exponent ``bexp`` (1 for zeros, subnormals and non-finite inputs), the 8-bit
      significand ``bsig`` (hidden bit set only for normals; 0 for non-finite inputs) and the sign
      ``bneg``, for :class:`TreeReducer` to align to the largest exponent; plus the same flags.
    * INT8 (``flit_width/8`` lanes): ``q * s * 2**24 = pre << sh`` with ``pre = q * sig(s)``
      (an 8 x 11-bit product, registered: a DSP with its M register) and ``sh`` the scale's
      exponent; a negative (sign bit set, ``-0`` included) or non-finite scale raises ``bad`` and
      gives ``pre = 0``.

    The shift itself happens in :class:`TreeReducer`, in one shifter shared with the BF16
    alignment, so the 48-bit terms are registered once. The fields of other modes are
    don't-care. ``dtype`` and ``last`` pass through.

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

    One pipeline stage (``LATENCY``); one flit per cycle; a stall holds the pipeline
    (``en = ~o.valid | o.ready``).
    """

    LATENCY = 1

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
        dtype = self.i.payload.dtype
        is_int8 = dtype == DType.INT8
        with m.If(en):
            m.d.sync += [self.o.valid.eq(self.i.valid), self.o.payload.dtype.eq(dtype),
                         self.o.payload.last.eq(self.i.payload.last)]

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
                with m.If(en):
                    m.d.sync += [
                        out.bexp[lane].eq(Mux((b_exp == 0) | b_special, 1, b_exp)),
                        out.bsig[lane].eq(Mux(b_special, 0, Mux(b_exp == 0, x[:7], Cat(x[:7], 1)))),
                    ]
            with m.If(en):
                m.d.sync += [out.nan.eq(Cat(*nan)), out.pinf.eq(Cat(*pinf)),
                             out.ninf.eq(Cat(*ninf)), out.bneg.eq(Cat(*bneg)), out.bad.eq(bad)]

            for lane in range(l8):
                q = flit[8 * lane:8 * (lane + 1)].as_signed()
                pre = q * ssig
                sh = ssh
                if lane < l16:
                    # FP16: x * 2**24 = (+-sig) << (e - 1) for normals, +-frac for subnormals.
                    x = flit[16 * lane:16 * (lane + 1)]
                    f_exp, f_frac = x[10:15], x[:10]
                    fsig = Mux(f_exp == 0x1F, 0, Mux(f_exp == 0, f_frac, Cat(f_frac, 1)))
                    fval = Mux(x[15], -fsig, fsig)
                    fsh = Mux(f_exp == 0, 0, f_exp - 1)[:5]
                    pre = Mux(is_int8, pre, fval)
                    sh = Mux(is_int8, ssh, fsh)
                with m.If(en):
                    m.d.sync += [out.pre[lane].eq(pre), out.sh[lane].eq(sh)]
        return m
