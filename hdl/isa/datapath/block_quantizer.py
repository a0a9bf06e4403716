"""Block quantizer: exact sums to FP16/BF16 (RNE), or to INT8 blocks with a new FP16 scale."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...paper import FLIT_WIDTH
from ..dtype import DType, DatapathStatus
from .common import (SUM_WIDTH, FloatRounder, bit_length, block_flits, check_params, lanes16,
                     lanes8, negate_if, output_layout, register, rne_finish, rne_shift,
                     rne_window, sum_layout, wire)


__all__ = ["BlockQuantizer", "RECIPROCALS"]

_FP16_QNAN, _FP16_INF, _FP16_MAX = 0x7E00, 0x7C00, 0x7BFF
_BF16_QNAN, _BF16_INF = 0x7FC0, 0x7F80
_MAG_WIDTH = SUM_WIDTH - 1   # |V| < 2**51
_DIV_CHUNK = 3               # quotient bits of 2M/127 per pipeline stage (3 steps: ~9 logic levels)
_LANE_MAG_WIDTH = 45         # FP16/BF16: |T| < 8 * 2**40
_X_PAD = 11                  # zero bits below |V| before the output shifter (see Q1)
#: floor(2**20 / D') for D' = 1024 + i: the reciprocals of the normalised scale significands.
RECIPROCALS = [(1 << 20) // (1024 + i) for i in range(1024)]


class BlockQuantizer(wiring.Component):
    """Round exact sums to the output format.

    * FP16: ``RNE_fp16(sum * 2**-24)``; BF16: ``RNE_bf16(sum * 2**(exp - 166))``; subnormals kept,
      an exact zero gives +0, overflow gives +-Inf and OVERFLOW. Non-finite inputs override the
      lane: ``nan`` -> canonical NaN (0x7E00 / 0x7FC0), else ``pinf``/``ninf`` -> +-Inf, and
      INVALID (never OVERFLOW). ``scale`` = 0, ``status`` = OR over the flit's lanes.
    * INT8 (INQ): a block is ``block_flits(flit_width)`` flits (64 elements); the first INT8 flit
      after reset or after a ``last`` starts one, and a ``last`` also ends a short block. Per block
      ``M = max |V|``; ``scale = RNE_fp16(M * 2**-24 / 127)``, computed exactly by long division
      (``2M / 127`` to the last bit, plus a sticky bit), saturated to 0x7BFF with OVERFLOW. Per
      element ``q = clamp(RNE(V / S), -127, 127)`` with ``S = scale * 2**24``, exactly: by the
      scale significand's reciprocal (a 1024-entry ROM) on a multiplier, corrected by the exact
      remainder from a second multiplier (``q = 0`` when ``scale == 0``). If the block has a bad
      input scale (``bad``), every ``q`` is 0, ``scale`` = 0x7E00 and ``status`` = INVALID. Every
      flit of a block carries the block's ``scale`` and ``status``.

    Implementation: the flits enter a FIFO of ``block_flits + SCALE_STAGES + 4`` entries while a
    running ``max |V|`` is kept. When a block's last flit is written, its ``M`` enters the scale
    pipeline (``SCALE_STAGES`` stages: the long division, the scale's rounding and the read of its
    divisor's reciprocal), which pushes the finished scale to a second FIFO. The head flit of an
    INT8 block leaves the data FIFO once its block's scale is there, so the block's first flit
    waits for its last, the sums never ride along the division, and a stall anywhere is absorbed
    without losing a cycle (the FIFO covers the scale pipeline at full rate).

    An FP16/BF16 lane and the INT8 element in the same lane share one shifter after the FIFO: it
    gives FP16/BF16 rounding its guard bit, significand and sticky bit, and INT8 its quotient's
    dividend ``W`` and the bits dropped below it.

    Parameters
    ----------
    flit_width : int
        64, 128, 256 or 512.

    Members
    -------
    i : In(stream.Signature(sum_layout(flit_width)))
    o : Out(stream.Signature(output_layout(flit_width)))

    Latency (no stalls): ``INPUT_STAGES`` + FIFO (2 cycles) + ``OUTPUT_STAGES`` cycles, plus, for
    INT8, the time until the block's scale is known: its last flit has arrived and gone through
    the ``SCALE_STAGES`` of the scale pipeline.
    """

    INPUT_STAGES = 1
    FIFO_LATENCY = 2
    OUTPUT_STAGES = 4
    #: The scale pipeline: the block maximum's register, ceil(52 / _DIV_CHUNK) division stages,
    #: the rounder's 2 and the reciprocal ROM's read.
    SCALE_STAGES = 1 + -(-(_MAG_WIDTH + 1) // _DIV_CHUNK) + 3

    def __init__(self, *, flit_width=FLIT_WIDTH):
        check_params(2, flit_width)
        self.flit_width = flit_width
        self.fifo_depth = block_flits(flit_width) + self.SCALE_STAGES + 4
        super().__init__({
            "i": In(stream.Signature(sum_layout(flit_width))),
            "o": Out(stream.Signature(output_layout(flit_width))),
        })

    def elaborate(self, platform):
        m = Module()
        w = self.flit_width
        # The FIFO keeps each lane's sum as sign and magnitude (s.sum holds |sum|): the magnitude
        # is needed before the FIFO (block max) and after it (rounding, division), computed once.
        # An FP16/BF16 lane's rounding shift (``amt``, the shifter's amount) and whether it is
        # nonzero are found before the FIFO too, so that after it the lane's shifter, shared with
        # the INT8 division, starts at once.
        entry = data.StructLayout({"s": sum_layout(w), "neg": lanes8(w), "block_end": 1,
                                   "amt": data.ArrayLayout(6, lanes16(w)), "nz": lanes16(w)})
        m.submodules.fifo = dfifo = fifo.SyncFIFOBuffered(width=entry.size, depth=self.fifo_depth)
        # Every scale in the scale pipeline or in sfifo belongs to a block whose last flit is
        # still in the data FIFO, so sfifo (as deep as the data FIFO) never overflows.
        # With the scale, its divisor D' (normalised), the shift of the dividend and the
        # reciprocal of D', all found per block in the scale pipeline rather than per flit.
        sentry = data.StructLayout({"scale": 16, "ovf": 1, "bad": 1, "d": 11, "amt": 6, "r": 11})
        m.submodules.sfifo = sfifo = fifo.SyncFIFOBuffered(width=sentry.size, depth=self.fifo_depth)

        block = self._input_side(m, entry, dfifo)
        self._scale_pipeline(m, block, sentry, sfifo)
        en_b, info = self._output_head(m, entry, sentry, dfifo, sfifo)
        q1, blk, info = self._q1_shift(m, en_b, info)
        rnd = self._q2_round(m, en_b, q1, info)
        q2, blk, info = self._q2_divide(m, en_b, q1, blk, info)
        q3, rnd, blk, info = self._q3_multiply(m, en_b, q2, rnd, blk, info)
        self._q4_pack(m, en_b, q3, rnd, blk, info)
        return m

    def _input_side(self, m, entry, dfifo):
        """Input register: ``|V|`` per lane, max over the flit, running max over the block; writes
        the data FIFO. Returns what the scale pipeline needs: ``write`` (an entry is written),
        ``block_end`` (it ends an INT8 block), the block's ``M`` and ``bad`` including it."""
        w = self.flit_width
        l16, l8, nflits = lanes16(w), lanes8(w), block_flits(w)
        ip = self.i.payload
        en_a = Signal()
        a_valid = Signal()
        can_write = dfifo.w_rdy
        m.d.comb += [en_a.eq(~a_valid | can_write), self.i.ready.eq(en_a)]
        with m.If(en_a):
            m.d.sync += a_valid.eq(self.i.valid)
        # Its sums are unused (a_mag, a_neg below).
        a_s = register(m, en_a, ip, "a_s", reset_less=True)
        mags = [wire(m, negate_if(ip.sum[lane].as_unsigned(), ip.sum[lane][-1])[:_MAG_WIDTH],
                     f"mag_l{lane}") for lane in range(l8)]
        a_mag = [register(m, en_a, v, f"a_mag_l{lane}", reset_less=True)
                 for lane, v in enumerate(mags)]
        a_neg = register(m, en_a, Cat(*(ip.sum[lane] < 0 for lane in range(l8))), "a_neg",
                         reset_less=True)

        # Two levels of the lane max tree before the register, the rest after it.
        partial = [register(m, en_a, v, f"a_max_{j}", shape=_MAG_WIDTH,
                            reset_less=True)
                   for j, v in enumerate(_max_tree(m, mags, "lmax", levels=2))]
        flit_max = wire(m, _max_tree(m, partial, "fmax")[0], "flit_max")

        idx = Signal(range(nflits), name="blk_idx")
        acc_m = Signal(_MAG_WIDTH, name="blk_max")
        acc_bad = Signal(name="blk_bad")
        a_int8 = a_s.dtype == DType.INT8
        block_end = a_int8 & ((idx == nflits - 1) | a_s.last)
        new_m = Mux(flit_max > acc_m, flit_max, acc_m)
        new_bad = acc_bad | a_s.bad
        write = Signal()
        m.d.comb += write.eq(a_valid & can_write)
        w_entry = data.View(entry, dfifo.w_data)
        m.d.comb += [
            dfifo.w_en.eq(write),
            w_entry.s.eq(a_s),
            w_entry.neg.eq(a_neg),
            w_entry.block_end.eq(block_end),
        ]
        m.d.comb += [w_entry.s.sum[lane].eq(a_mag[lane]) for lane in range(l8)]
        a_bf16 = a_s.dtype == DType.BF16
        for lane in range(l16):
            length = wire(m, bit_length(a_mag[lane][:_LANE_MAG_WIDTH]), f"a_len_l{lane}",
                          shape=range(_LANE_MAG_WIDTH + 1))
            c = Mux(a_bf16, 33 - a_s.exp[lane], 0)
            # shift >= -8, so amt = shift + 10 is in [2, 47]: after the FIFO, shift = amt - 10.
            shift = rne_shift(length, c, a_bf16)
            m.d.comb += [w_entry.amt[lane].eq((shift + _X_PAD - 1)[:6]),
                         w_entry.nz[lane].eq(length != 0)]
        with m.If(write):
            with m.If(block_end | a_s.last):
                m.d.sync += [idx.eq(0), acc_m.eq(0), acc_bad.eq(0)]
            with m.Elif(a_int8):
                m.d.sync += [idx.eq(idx + 1), acc_m.eq(new_m), acc_bad.eq(new_bad)]
        return {"write": write, "block_end": block_end, "m": new_m, "bad": new_bad}

    def _scale_pipeline(self, m, block, sentry, sfifo):
        """A block's M, when its last flit is written, to its FP16 scale in sfifo
        (``SCALE_STAGES`` stages). It never stalls (sfifo cannot overflow, see
        :meth:`elaborate`), and it runs while the block's flits wait in the data FIFO, so the sums
        never ride through the division."""
        one = Const(1, 1)
        # c1..c18: 2M / 127 by long division, _DIV_CHUNK quotient bits per stage. The remainder
        # stays below 127, so each step is an 8-bit compare-and-subtract (two or three LUTs deep).
        # c0: the block's M registered (the flit max tree and the running max come before it).
        info = _ride(m, {"valid": block["write"] & block["block_end"], "bad": block["bad"],
                         "m": block["m"]}, 0, tag="c")
        num = Cat(Const(0, 1), info.pop("m"))
        nbits = len(num)
        rem = Const(0, 7)
        quo = Const(0, nbits)
        hi = nbits - 1
        stage = 1
        while hi >= 0:
            lo = max(hi - _DIV_CHUNK + 1, 0)
            bits = {}
            for pos in range(hi, lo - 1, -1):
                r2 = wire(m, Cat(num[pos], rem), f"div_r2_{pos}")
                ge = wire(m, r2 >= 127, f"div_ge_{pos}")
                rem = wire(m, Mux(ge, r2 - 127, r2)[:7], f"div_rem_{pos}")
                bits[pos] = ge
            quo = Cat(*(bits.get(pos, quo[pos]) for pos in range(nbits)))
            rem = register(m, one, rem, f"div_rem_c{stage}", shape=7, reset_less=True)
            quo = register(m, one, quo, f"div_quo_c{stage}", shape=nbits, reset_less=True)
            if lo > 0:
                num = register(m, one, num[:lo], f"div_num_c{stage}", shape=lo, reset_less=True)
                num = Cat(num, Const(0, nbits - lo))
            info = _ride(m, info, stage, tag="c")
            hi = lo - 1
            stage += 1
        # t = 2 * floor(2M / 127) + sticky: rounding t * 2**-26 (two or more bits are always
        # dropped, see FloatRounder's c = 2) gives the correctly rounded M * 2**-24 / 127.
        t = Cat(rem.any(), quo)
        scale_rnd = FloatRounder(m, one, t, Const(0, 1), Const(2, signed(4)), False, "scale")
        info = _ride(m, _ride(m, info, stage, tag="c"), stage + 1, tag="c")
        # The last stage: the block RAM reads the reciprocal of the scale's divisor, whose
        # output goes straight into the scale FIFO.
        scale = wire(m, Mux(scale_rnd.overflow, _FP16_MAX, scale_rnd.bits), "scale_bits", shape=16)
        d_val, d_amt = _divisor(m, scale)
        m.submodules.recip = recip = Memory(shape=11, depth=1024, init=RECIPROCALS)
        recip_rd = recip.read_port()
        m.d.comb += [recip_rd.addr.eq(d_val[:10]), recip_rd.en.eq(one)]
        info = _ride(m, {**info, "scale": scale, "ovf": scale_rnd.overflow, "d": d_val,
                         "amt": d_amt}, stage + 2, tag="c")
        assert stage + 3 == self.SCALE_STAGES
        s_entry = data.View(sentry, sfifo.w_data)
        m.d.comb += [
            sfifo.w_en.eq(info["valid"]),
            s_entry.scale.eq(info["scale"]),
            s_entry.ovf.eq(info["ovf"]),
            s_entry.bad.eq(info["bad"]),
            s_entry.d.eq(info["d"]),
            s_entry.amt.eq(info["amt"]),
            s_entry.r.eq(recip_rd.data),
        ]

    def _output_head(self, m, entry, sentry, dfifo, sfifo):
        """Pops the FIFOs into the output pipeline, every register of which loads on ``en_b``:
        an INT8 flit waits for its block's scale. Returns ``(en_b, fields of the head)``."""
        en_b = Signal()
        m.d.comb += en_b.eq(~self.o.valid | self.o.ready)
        head = data.View(entry, dfifo.r_data)
        shead = data.View(sentry, sfifo.r_data)
        head_int8 = head.s.dtype == DType.INT8
        head_ok = dfifo.r_rdy & (~head_int8 | sfifo.r_rdy)
        take = en_b & head_ok
        m.d.comb += [dfifo.r_en.eq(take), sfifo.r_en.eq(take & head_int8 & head.block_end)]
        info = {"valid": head_ok, "dtype": head.s.dtype, "last": head.s.last,
                "mag": head.s.sum, "neg": head.neg, "amt": head.amt, "nz": head.nz,
                "exp": head.s.exp, "nan": head.s.nan, "pinf": head.s.pinf, "ninf": head.s.ninf,
                "bad": shead.bad, "scale": shead.scale, "ovf": shead.ovf, "d": shead.d,
                "d_amt": shead.amt, "r": shead.r}
        return en_b, info

    def _q1_shift(self, m, en_b, info):
        """Stage Q1: per lane the one shared shifter (FP16/BF16 rounding window, INT8 dividend);
        the block's divisor and reciprocal, from the scale FIFO, registered for the multipliers.
        Returns ``(lanes, block, info)``."""
        w = self.flit_width
        l16, l8 = lanes16(w), lanes8(w)
        s_bits, s_sat = info["scale"], info["ovf"]
        stage = 1

        # Q1: the divisor D' and the shift d_amt come from the scale FIFO (see _divisor).
        d_val, d_amt = info["d"], info["d_amt"]
        x_w = _X_PAD + _MAG_WIDTH
        ones = Const((1 << x_w) - 1, x_w)
        low_mask = wire(m, ~(ones << d_amt)[:x_w], "q1_low_mask", shape=x_w)
        # FP16/BF16 lanes (0 to lanes16 - 1) round their sums with the same shifter (FloatRounder
        # split in two): a right shift of X by `shift + 10` gives the guard bit and the
        # significand (W's low 13 bits) and the sticky bit (`low`). Rounding finishes in Q2.
        is_bf16 = info["dtype"] == DType.BF16
        is_int8 = info["dtype"] == DType.INT8
        q1 = {}
        for lane in range(l8):
            x = Cat(Const(0, _X_PAD), info["mag"][lane][:_MAG_WIDTH])
            fields = {}
            if lane < l16:
                c = Mux(is_bf16, 33 - info["exp"][lane], 0)
                shift = wire(m, info["amt"][lane] - (_X_PAD - 1), f"q1_shift_l{lane}",
                             shape=signed(10))
                amt = Mux(is_int8, d_amt, info["amt"][lane])
                wq, low = rne_window(m, x, amt, 19, f"q1_l{lane}")
                fields = {"ebias": (shift - c)[:10], "nz": info["nz"][lane]}
            else:
                wq = wire(m, (x >> d_amt)[:19], f"q1w_l{lane}", shape=19)
                low = (x & low_mask).any()
            sat = s_sat & info["mag"][lane][47:_MAG_WIDTH].any()
            q1[lane] = _ride(m, {"w": wq, "low": low, "sat": sat, "neg": info["neg"][lane],
                                 **fields}, stage, en_b)
        # R registered here, so the Q2 multiplier has registered operands.
        blk = _ride(m, {"d": d_val, "scale": s_bits, "ovf": s_sat, "r": info["r"]}, stage, en_b)
        info = _ride(m, {k: info[k] for k in ("valid", "dtype", "last", "nan", "pinf", "ninf",
                                              "bad")}, stage, en_b)
        return q1, blk, info

    def _q2_round(self, m, en_b, q1, info):
        """Stage Q2, FP16/BF16 lanes: round (results in the same stage as the division's Q2).
        Returns each lane's ``(bits, overflow)`` registers."""
        rnd = []
        for lane in range(lanes16(self.flit_width)):
            ql = q1[lane]
            rnd.append(rne_finish(m, en_b, ql["w"][1:13], ql["w"][0], ql["low"], ql["ebias"],
                                  ql["neg"], ql["nz"], info["dtype"] == DType.BF16, f"lane{lane}"))
        return rnd

    def _q2_divide(self, m, en_b, q1, blk, info):
        """Stage Q2, INT8 lanes: the estimate ``qe`` of ``W / D'`` by the reciprocal (the first
        multiplier). Returns ``(lanes, block, info)`` registered."""
        stage = 2
        # Q2 to Q4: W / D' by the reciprocal, on two multipliers (DSPs) per lane. R = 2**20/D' - e
        # with 0 <= e < 1 and W < 2**19, so qe = floor(W * R / 2**20) (< 2**9) is floor(W/D') or
        # one less (W * e / 2**20 < 1/2); the exact remainder W - qe * D', in [0, 2D'), says
        # which, and gives the sticky bit. A quotient of 256 or more is clamped to 127 below.
        # Checked exhaustively, every D' and every 19-bit W: tb/block/test_datapath.py.
        q2 = {}
        for lane in range(lanes8(self.flit_width)):
            prod = wire(m, q1[lane]["w"] * blk["r"], f"q2_wr_l{lane}", shape=30)
            q2[lane] = _ride(m, {"qe": prod[20:29], "w": q1[lane]["w"][:12],
                                 "low": q1[lane]["low"], "sat": q1[lane]["sat"],
                                 "neg": q1[lane]["neg"]}, stage, en_b)
        blk = _ride(m, {k: blk[k] for k in ("d", "scale", "ovf")}, stage, en_b)
        info = _ride(m, info, stage, en_b)
        return q2, blk, info

    def _q3_multiply(self, m, en_b, q2, rnd, blk, info):
        """Stage Q3, INT8 lanes: ``qe * D'`` (the second multiplier), registered with nothing
        between the multiplier and its register (the remainder is below ``2**12``, so its low 12
        bits are enough). Returns ``(lanes, rnd, block, info)`` registered."""
        stage = 3
        q3 = {}
        for lane in range(lanes8(self.flit_width)):
            ql = q2[lane]
            prod = wire(m, ql["qe"] * blk["d"], f"q3_qd_l{lane}", shape=20)
            q3[lane] = _ride(m, {**ql, "qd": prod[:12]}, stage, en_b)
        rnd = [tuple(register(m, en_b, v, f"lane{lane}_{k}_s{stage}", reset_less=True)
                     for k, v in zip(("bits", "ovf"), pair)) for lane, pair in enumerate(rnd)]
        blk = _ride(m, blk, stage, en_b)
        info = _ride(m, info, stage, en_b)
        return q3, rnd, blk, info

    def _q4_pack(self, m, en_b, q3, rnd, blk, info):
        """Stage Q4: the INT8 quotient's exact correction, ties and clamping; the FP16/BF16
        non-finite override; the output flit, scale and status into the output register, which
        drives ``o``."""
        w = self.flit_width
        l16, l8 = lanes16(w), lanes8(w)
        stage = 4
        q_out = []
        for lane in range(l8):
            ql = q3[lane]
            rem = wire(m, (ql["w"] - ql["qd"])[:12], f"q4_rem_l{lane}", shape=12)
            ge = rem >= blk["d"]
            q8 = wire(m, ql["qe"] + ge, f"q4_q8_l{lane}", shape=10)  # floor(2|V| / S)
            qi, half = q8[1:], q8[0]
            sticky = Mux(ge, rem != blk["d"], rem != 0) | ql["low"]
            up = half & (sticky | qi[0])
            qm = Signal(8, name=f"qm_l{lane}")   # qi >= 128 (q8 >= 256) saturates too
            m.d.comb += qm.eq(Mux(ql["sat"] | ((qi + up) > 127), 127, qi + up))
            zero = (blk["scale"] == 0) | info["bad"]
            q_out.append(Mux(zero, 0, Mux(ql["neg"], -qm, qm))[:8])

        f_out, f_inv, f_ovf = [], [], []
        for lane in range(l16):
            nan, pinf, ninf = info["nan"][lane], info["pinf"][lane], info["ninf"][lane]
            bf = info["dtype"] == DType.BF16
            inf = Mux(bf, _BF16_INF, _FP16_INF)
            special = Mux(nan, Mux(bf, _BF16_QNAN, _FP16_QNAN), Mux(pinf, inf, inf | 0x8000))
            invalid = nan | pinf | ninf
            bits, overflow = rnd[lane]
            f_out.append(Mux(invalid, special, bits)[:16])
            f_inv.append(invalid)
            f_ovf.append(overflow & ~invalid)
        int8 = info["dtype"] == DType.INT8
        f_status = Cat(Cat(*f_ovf).any(), Cat(*f_inv).any())
        i_status = Mux(info["bad"], DatapathStatus.INVALID.value,
                       Mux(blk["ovf"], DatapathStatus.OVERFLOW.value, 0))
        out = {
            "valid": info["valid"],
            "dtype": info["dtype"],
            "last": info["last"],
            "data": Mux(int8, Cat(*q_out), Cat(*f_out)),
            "scale": Mux(int8, Mux(info["bad"], _FP16_QNAN, blk["scale"]), 0),
            "status": Mux(int8, i_status, f_status),
        }
        out = _ride(m, out, stage, en_b)
        assert stage == self.OUTPUT_STAGES, stage
        m.d.comb += self.o.valid.eq(out["valid"])
        for k in ("dtype", "last", "data", "scale", "status"):
            m.d.comb += self.o.payload[k].eq(out[k])


def _divisor(m, s_bits):
    """The divisor of a block's INT8 elements under the FP16 scale ``s_bits``: ``(D', shift)``.

    ``D'`` is the scale's significand normalised to ``[2**10, 2**11)`` (0 for a zero scale) and
    ``shift`` the right shift of ``X = 2|V| << 10`` that gives the dividend ``W`` (see below).
    Computed once per block in the scale pipeline, which also reads ``D'``'s reciprocal."""
    # S = D << sh. W = (2|V|) >> sh, so 2V/S = W/D up to the bits dropped (`low`). A
    # subnormal scale's D (below 2**10) is normalised: D' = D << k and W = (2|V|) << k with
    # k = 11 - bit_length(D), which leaves W/D unchanged and puts D' in [2**10, 2**11) for the
    # reciprocal below. Both are one right shift of X = 2|V| << 10 (by sh + 10, or by
    # 10 - k). W keeps 19 bits: every |V| of a block is at most its M. Under a normal scale
    # that did not overflow, M < 128 S (RNE's relative error is below 2**-11), so
    # W < 256 D < 2**19; under a subnormal one, M <= 127 D + 63 (an error of half a unit), so
    # W = 2|V| << k <= 2 (127 D + 63) << k < 2**19 for every D (at most 519,936, at D = 1023).
    # A lane with x >= 128 (saturate) shows as a quotient W / D' of 256 or more, found by the
    # division itself, except under an overflowed scale (D = 2047, sh = 29), where |V| may
    # reach 2**47 and W's 19 bits miss its top: those lanes are caught by |V| >= 2**47.
    # (Normalising W costs less than shifting the reciprocal's product by k instead:
    # measured, 268 LUTs at 64 bits.)
    s_exp, s_frac = s_bits[10:15], s_bits[:10]
    normal = s_exp != 0
    d_len = wire(m, bit_length(s_frac), "div_d_len", shape=4)
    d_val = wire(m, Mux(normal, Cat(s_frac, 1), (s_frac << (11 - d_len)[:4])[:11]),
                 "div_d_norm", shape=11)
    # The shift is never negative: D = 0 (a zero scale, q = 0) is the only d_len of 0.
    d_amt = wire(m, Mux(normal, s_exp - 1 + _X_PAD - 1, d_len - 1)[:6], "div_d_amt", shape=6)
    return d_val, d_amt


def _ride(m, values, stage, en=Const(1, 1), tag="s"):
    """Register every value of ``values`` (a dict) on ``en``, named ``{key}_{tag}{stage}``; only
    ``valid`` is reset."""
    return {k: register(m, en, v, f"{k}_{tag}{stage}", reset_less=k != "valid")
            for k, v in values.items()}


def _max_tree(m, values, tag, levels=None):
    """Pairwise maximum of ``values``, ``levels`` levels of it (all: one value left)."""
    level = 0
    while len(values) > 1 and (levels is None or level < levels):
        values = [wire(m, Mux(values[j + 1] > values[j], values[j + 1], values[j]),
                       f"{tag}_{level}_{j}") if j + 1 < len(values) else values[j]
                  for j in range(0, len(values), 2)]
        level += 1
    return values
