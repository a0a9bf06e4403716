"""Tree reducer: exact N-input sums per lane, BF16 exponent alignment, non-finite flags."""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..dtype import DType
from .common import (PRE_WIDTH, SUM_WIDTH, TERM_WIDTH, check_params, dequant_layout, lanes16, lanes8,
                     register, sum_layout, wire)


__all__ = ["TreeReducer"]


class TreeReducer(wiring.Component):
    """Add the participants' terms lane by lane, exactly, in a pipelined adder tree.

    * FP16 and INT8: ``sum = sum_p pre[p] << sh[p]`` (exact, two's complement, ``SUM_WIDTH`` bits).
    * BF16: per lane, ``E = max_p bexp[p]`` (a max tree), every significand is aligned with 32
      guard bits, ``A_p = (bsig[p] << 32) >> (E - bexp[p])`` (truncating; a shift of 40 or more
      gives 0), and ``sum = sum_p (-1)**bneg[p] * A_p``; ``exp = E``. The result value is
      ``sum * 2**(E - 166)``.
    * Flags: ``nan`` = some input NaN, or both +Inf and -Inf; ``pinf``/``ninf`` = some +Inf/-Inf;
      ``bad`` = some participant's INT8 scale is bad. The sum does not depend on the order of the
      participants (integer addition is associative and exact here).

    Parameters
    ----------
    n_inputs : int
        Participants, 2 to 8.
    flit_width : int
        64, 128, 256 or 512.

    Members
    -------
    i : In(stream.Signature(dequant_layout(n_inputs, flit_width)))
    o : Out(stream.Signature(sum_layout(flit_width)))

    ``2 + ceil(log2(n_inputs))`` pipeline stages (``latency``): max-exponent tree, the term shifter
    (one per participant and lane, shared by the three modes), one stage per adder level. A stall
    holds the whole pipeline.
    """

    def __init__(self, *, n_inputs=4, flit_width=256):
        check_params(n_inputs, flit_width)
        self.n_inputs = n_inputs
        self.flit_width = flit_width
        self.latency = self.latency_for(n_inputs)
        super().__init__({
            "i": In(stream.Signature(dequant_layout(n_inputs, flit_width))),
            "o": Out(stream.Signature(sum_layout(flit_width))),
        })

    @staticmethod
    def latency_for(n_inputs):
        """Pipeline stages for ``n_inputs`` participants: ``2 + ceil(log2(n_inputs))``."""
        return 2 + ceil_log2(n_inputs)

    def elaborate(self, platform):
        m = Module()
        n, w = self.n_inputs, self.flit_width
        l16, l8 = lanes16(w), lanes8(w)
        ip = self.i.payload

        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]

        # Fields that ride along unchanged, one register per stage.
        any_nan = ip.part[0].nan
        any_pinf = ip.part[0].pinf
        any_ninf = ip.part[0].ninf
        any_bad = ip.part[0].bad
        for p in range(1, n):
            any_nan = any_nan | ip.part[p].nan
            any_pinf = any_pinf | ip.part[p].pinf
            any_ninf = any_ninf | ip.part[p].ninf
            any_bad = any_bad | ip.part[p].bad
        ride = {
            "valid": self.i.valid,
            "dtype": ip.dtype,
            "last": ip.last,
            "nan": any_nan | (any_pinf & any_ninf),
            "pinf": any_pinf,
            "ninf": any_ninf,
            "bad": any_bad,
        }

        def step(values, stage):
            return {k: register(m, en, v, f"{k}_{stage}") for k, v in values.items()}

        # Stage 1: largest exponent per lane (BF16), alignment distance per participant.
        e_max = []
        for lane in range(l16):
            e = ip.part[0].bexp[lane]
            for p in range(1, n):
                e = wire(m, Mux(ip.part[p].bexp[lane] > e, ip.part[p].bexp[lane], e),
                         f"emax0_l{lane}_p{p}")
            e_max.append(e)
        exps = [register(m, en, e, f"emax1_l{lane}", shape=8) for lane, e in enumerate(e_max)]
        dist, bsig, bneg, pre, sh = {}, {}, {}, {}, {}
        for p in range(n):
            part = ip.part[p]
            for lane in range(l16):
                d = e_max[lane] - part.bexp[lane]
                # Only distances below 40 keep any bit: saturate to 6 bits.
                dist[p, lane] = register(m, en, Mux(d > 63, 63, d[:6]), f"dist1_p{p}_l{lane}", shape=6)
                bsig[p, lane] = register(m, en, part.bsig[lane], f"bsig1_p{p}_l{lane}", shape=8)
                bneg[p, lane] = register(m, en, part.bneg[lane], f"bneg1_p{p}_l{lane}")
            for lane in range(l8):
                pre[p, lane] = register(m, en, part.pre[lane], f"pre1_p{p}_l{lane}")
                sh[p, lane] = register(m, en, part.sh[lane], f"sh1_p{p}_l{lane}")
        ride = step(ride, 1)

        # Stage 2: every lane's term from one shifter, (base << amount) >> 8 (arithmetic):
        # FP16 and INT8: base = pre, amount = sh + 8, so the term is pre << sh exactly.
        # BF16: amount = 40 - dist gives (bsig << 32) >> dist. A negative significand must be
        # truncated towards zero, and an arithmetic shift rounds down, so for dist = 32 + k
        # (k = 1..7, bits dropped) the base is 2**k - 1 - bsig: floor((2**k - 1 - b) / 2**k) is
        # -floor(b / 2**k). At dist >= 40 nothing is kept.
        is_bf16 = ride["dtype"] == DType.BF16
        terms = {}
        for p in range(n):
            for lane in range(l8):
                if lane < l16:
                    d = dist[p, lane]
                    bias = Mux(d > 32, (Const(1, 8) << (d - 32)[:3]) - 1, 0)
                    bbase = Mux(d >= 40, 0, Mux(bneg[p, lane], bias - bsig[p, lane], bsig[p, lane]))
                    base = wire(m, Mux(is_bf16, bbase, pre[p, lane]), f"base2_p{p}_l{lane}",
                                shape=signed(PRE_WIDTH))
                    amount = wire(m, Mux(is_bf16, 40 - d, sh[p, lane] + 8), f"amount2_p{p}_l{lane}",
                                  shape=6)
                    term = (base << amount)[8:8 + TERM_WIDTH]
                else:
                    term = (pre[p, lane] << sh[p, lane])[:TERM_WIDTH]
                terms[p, lane] = register(m, en, term.as_signed(), f"term2_p{p}_l{lane}",
                                          shape=signed(TERM_WIDTH))
        exps = [register(m, en, e, f"emax2_l{lane}", shape=8) for lane, e in enumerate(exps)]
        ride = step(ride, 2)

        # Adder tree: one registered level per halving; an odd operand passes to the next level.
        levels = [[terms[p, lane] for p in range(n)] for lane in range(l8)]
        stage = 3
        while len(levels[0]) > 1:
            nxt = []
            for lane, ops in enumerate(levels):
                out = []
                for j in range(0, len(ops) - 1, 2):
                    out.append(register(m, en, ops[j] + ops[j + 1], f"add{stage}_l{lane}_{j}",
                                        shape=signed(SUM_WIDTH)))
                if len(ops) % 2:
                    out.append(register(m, en, ops[-1], f"add{stage}_l{lane}_{len(ops) - 1}",
                                        shape=signed(SUM_WIDTH)))
                nxt.append(out)
            levels = nxt
            exps = [register(m, en, e, f"emax{stage}_l{lane}", shape=8) for lane, e in enumerate(exps)]
            ride = step(ride, stage)
            stage += 1
        assert stage - 1 == self.latency

        o = self.o.payload
        m.d.comb += [
            self.o.valid.eq(ride["valid"]),
            o.dtype.eq(ride["dtype"]),
            o.last.eq(ride["last"]),
            o.nan.eq(ride["nan"]),
            o.pinf.eq(ride["pinf"]),
            o.ninf.eq(ride["ninf"]),
            o.bad.eq(ride["bad"]),
        ]
        for lane in range(l8):
            m.d.comb += o.sum[lane].eq(levels[lane][0])
        for lane in range(l16):
            m.d.comb += o.exp[lane].eq(exps[lane])
        return m
