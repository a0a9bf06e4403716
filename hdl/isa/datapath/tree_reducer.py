"""Tree reducer: exact N-input sums per lane, BF16 exponent alignment, non-finite flags."""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ...paper import FLIT_WIDTH
from ..dtype import DType
from .common import (BASE_WIDTH, PROD_WIDTH, SUM_WIDTH, TERM_WIDTH, check_params, input_layout,
                     lanes16, lanes8, register, sum_layout, wire)
from .dequantizer import Decoded, dequantize


__all__ = ["TreeReducer"]


class TreeReducer(wiring.Component):
    """Add the participants' terms lane by lane, exactly, in a pipelined adder tree.

    * FP16: ``sum = sum_p base[p] << exp[p]``; INT8: ``sum = sum_p q[p] * ssig[p] << ssh[p]``
      (exact, two's complement, ``SUM_WIDTH`` bits).
    * BF16: per lane, ``E = max_p exp[p]`` (a max tree), every significand is aligned with 32
      guard bits, ``A_p = (|base[p]| << 32) >> (E - exp[p])`` (truncating; a shift of 40 or more
      gives 0), and ``sum = sum_p sign(base[p]) * A_p``; ``exp = E``. The result value is
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
    i : In(stream.Signature(input_layout(n_inputs, flit_width)))
    o : Out(stream.Signature(sum_layout(flit_width)))

    ``2 + ceil(log2(n_inputs))`` pipeline stages (``latency``): the decoded flits and the
    max-exponent tree; each term's operand and shift; then one stage per adder level, the first
    of which also forms the terms (one multiplier per participant and lane, shared by the three
    modes, and a 3:1 multiplexer).
    A stall holds the whole pipeline.
    """

    def __init__(self, *, n_inputs=4, flit_width=FLIT_WIDTH):
        check_params(n_inputs, flit_width)
        self.n_inputs = n_inputs
        self.flit_width = flit_width
        self.latency = self.latency_for(n_inputs)
        super().__init__({
            "i": In(stream.Signature(input_layout(n_inputs, flit_width))),
            "o": Out(stream.Signature(sum_layout(flit_width))),
        })

    @staticmethod
    def latency_for(n_inputs):
        """Pipeline stages for ``n_inputs`` participants: ``2 + ceil(log2(n_inputs))``."""
        return 2 + ceil_log2(n_inputs)

    def elaborate(self, platform):
        m = Module()
        n, w = self.n_inputs, self.flit_width
        ip = self.i.payload

        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]

        # Every participant's flit, decoded and registered with the lanes' largest exponents.
        parts = [dequantize(m, ip.dtype, ip.data[p], ip.scale[p], w, f"deq_p{p}") for p in range(n)]
        ride = self._flags(parts)
        parts, e_max = self._decode(m, en, parts)
        ride = _step(m, en, ride, 1)
        exps, ops = self._align(m, en, parts, e_max, ride["dtype"] == DType.BF16)
        ride = _step(m, en, ride, 2)
        terms = self._terms(m, ride, ops)
        sums, exps, ride = self._adder_tree(m, en, terms, exps, ride)

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
        for lane in range(lanes8(w)):
            m.d.comb += o.sum[lane].eq(sums[lane])
        for lane in range(lanes16(w)):
            m.d.comb += o.exp[lane].eq(exps[lane])
        return m

    def _flags(self, parts):
        """The fields that ride along unchanged (one register per stage): the input's framing and
        the non-finite and bad-scale flags, ORed over the participants."""
        ip = self.i.payload
        any_nan = parts[0].nan
        any_pinf = parts[0].pinf
        any_ninf = parts[0].ninf
        any_bad = parts[0].bad
        for p in range(1, self.n_inputs):
            any_nan = any_nan | parts[p].nan
            any_pinf = any_pinf | parts[p].pinf
            any_ninf = any_ninf | parts[p].ninf
            any_bad = any_bad | parts[p].bad
        return {
            "valid": self.i.valid,
            "dtype": ip.dtype,
            "last": ip.last,
            "nan": any_nan | (any_pinf & any_ninf),
            "pinf": any_pinf,
            "ninf": any_ninf,
            "bad": any_bad,
        }

    def _decode(self, m, en, parts):
        """Stage 1: every participant's decoded operands and exponents registered, and the
        largest exponent of each lane (BF16). Returns ``(parts, e_max)``: :class:`Decoded` of
        registers (its flags left out: they ride with ``_flags``) and the lanes' maxima."""
        n, w = self.n_inputs, self.flit_width
        l16, l8 = lanes16(w), lanes8(w)
        e_max = []
        for lane in range(l16):
            es, level = [parts[p].exp[lane] for p in range(n)], 0
            while len(es) > 1:   # a balanced max tree: ceil(log2 n) comparators deep
                es = [wire(m, Mux(es[j + 1] > es[j], es[j + 1], es[j]),
                           f"emax0_l{lane}_{level}_{j}") if j + 1 < len(es) else es[j]
                      for j in range(0, len(es), 2)]
                level += 1
            e_max.append(register(m, en, es[0], f"emax1_l{lane}", shape=8, reset_less=True))
        regs = []
        for p, part in enumerate(parts):
            def reg(value, name):
                return register(m, en, value, f"{name}1_p{p}", reset_less=True)
            regs.append(Decoded(
                base=[reg(part.base[lane], f"dbase_l{lane}_") for lane in range(l16)],
                exp=[reg(part.exp[lane], f"dexp_l{lane}_") for lane in range(l16)],
                q=[reg(part.q[lane - l16], f"dq_l{lane}_") for lane in range(l16, l8)],
                ssig=reg(part.ssig, "dssig"), ssh=reg(part.ssh, "dssh"),
                nan=None, pinf=None, ninf=None, bad=None))
        return regs, e_max

    def _align(self, m, en, parts, e_max, is_bf16):
        """Stage 2: per participant and lane, the operand and the shift of its term, from the
        registered decode of stage 1. Returns ``(exps, ops)``: the lanes' largest exponents
        (registered again) and ``ops`` = ``{"base", "amount", "q", "sigf", "sc"}`` of
        registers (``sigf`` = ``ssig << f`` and ``sc`` = ``c`` of the INT8 amount ``ssh + 8 =
        16 c + f``, per participant)."""
        n, w = self.n_inputs, self.flit_width
        l16, l8 = lanes16(w), lanes8(w)
        # The term is base << amount >> 8 (arithmetic).
        # FP16 and INT8: amount = exp + 8, so the term is base << exp exactly (INT8: times ssig).
        # BF16: amount = 40 - dist = exp + (40 - E) gives (bsig << 32) >> dist. A negative
        # significand must be truncated towards zero, and an arithmetic shift rounds down, so for
        # amount = 8 - k (k = 1..7 bits dropped) the operand is base + 2**k - 1 (base = -bsig):
        # floor((2**k - 1 - b) / 2**k) is -floor(b / 2**k). At amount <= 0 nothing is kept.
        # FP16 and INT8 amounts are at least 8, so these two cases need no test of the dtype,
        # and one adder per term, with a per-lane offset, makes every dtype's amount.
        offset = [wire(m, Mux(is_bf16, 40 - e, 8), f"offset2_l{lane}", shape=signed(10))
                  for lane, e in enumerate(e_max)]
        exps = [register(m, en, e, f"emax2_l{lane}", shape=8, reset_less=True)
                for lane, e in enumerate(e_max)]
        base, amount, q, sigf, sc = {}, {}, {}, {}, {}
        for p in range(n):
            part = parts[p]
            for lane in range(l16):
                b = part.base[lane]
                a = wire(m, part.exp[lane] + offset[lane], f"amount2_p{p}_l{lane}",
                         shape=signed(10))
                # 2**k - 1 with k = 8 - a, for 0 < a < 8 (b < 0 only).
                bias = Mux((a < 8) & (b < 0), Const(0x7F, 7) >> (a[:3] - 1)[:3], 0)
                base[p, lane] = register(m, en, Mux(a <= 0, 0, b + bias), f"base2_p{p}_l{lane}",
                                         shape=signed(BASE_WIDTH), reset_less=True)
                amount[p, lane] = register(m, en, a[:6], f"amount2r_p{p}_l{lane}", shape=6,
                                           reset_less=True)
            for lane in range(l16, l8):
                q[p, lane] = register(m, en, part.q[lane - l16], f"q2_p{p}_l{lane}",
                                         reset_less=True)
            amount_p = wire(m, part.ssh + 8, f"samount2_p{p}", shape=6)
            sigf[p] = register(m, en, part.ssig << amount_p[:4], f"sigf2_p{p}", shape=26,
                               reset_less=True)
            sc[p] = register(m, en, amount_p[4:], f"sc2_p{p}", reset_less=True)
        return exps, {"base": base, "amount": amount, "q": q, "sigf": sigf, "sc": sc}

    def _terms(self, m, ride, ops):
        """Stage 3, before the first adder level: the terms, each from one multiplier (a DSP) and
        a 3:1 multiplexer. Returns ``{(participant, lane): term}`` (combinational)."""
        n, w = self.n_inputs, self.flit_width
        l16, l8 = lanes16(w), lanes8(w)
        base, amount, q, sigf, sc = (ops[k] for k in ("base", "amount", "q", "sigf", "sc"))
        # The multiplier does operand * 2**(amount mod 16): INT8 q * (ssig << f), with ssig << f
        # formed once per participant in stage 2; FP16/BF16 base * a one-hot 2**f. The
        # multiplexer does the multiple of 16 that is left: term = (prod << 16 * c) >> 8, exact
        # for FP16 and INT8 (amount >= 8).
        is_int8 = ride["dtype"] == DType.INT8
        terms = {}
        for p in range(n):
            for lane in range(l8):
                if lane < l16:
                    f, c = amount[p, lane][:4], amount[p, lane][4:]
                    # The operand base (INT8: q) is always the multiplier's B input, so only
                    # A has a multiplexer, whose bits merge with the one-hot's decoder.
                    onehot = (Const(1, 16) << f)[:16]
                    a_op = Mux(is_int8, sigf[p], onehot)
                    b_op = base[p, lane]
                else:
                    a_op, b_op, c = sigf[p], q[p, lane], sc[p]
                prod = wire(m, a_op * b_op, f"prod3_p{p}_l{lane}", shape=signed(PROD_WIDTH))
                shifted = Mux(c == 0, prod, Mux(c == 1, prod << 16, prod << 32))
                terms[p, lane] = wire(m, shifted[8:8 + TERM_WIDTH].as_signed(),
                                      f"term3_p{p}_l{lane}", shape=signed(TERM_WIDTH))
        return terms

    def _adder_tree(self, m, en, terms, exps, ride):
        """Stages 3 to ``latency``: one registered adder level per halving (an odd operand passes
        to the next level), the exponents and flags riding along. Returns
        ``(per-lane sums, exps, ride)``."""
        n, l8 = self.n_inputs, lanes8(self.flit_width)
        levels = [[terms[p, lane] for p in range(n)] for lane in range(l8)]
        stage = 3
        while len(levels[0]) > 1:
            nxt = []
            for lane, ops in enumerate(levels):
                out = []
                for j in range(0, len(ops) - 1, 2):
                    out.append(register(m, en, ops[j] + ops[j + 1], f"add{stage}_l{lane}_{j}",
                                        shape=signed(SUM_WIDTH), reset_less=True))
                if len(ops) % 2:
                    out.append(register(m, en, ops[-1], f"add{stage}_l{lane}_{len(ops) - 1}",
                                        shape=signed(SUM_WIDTH), reset_less=True))
                nxt.append(out)
            levels = nxt
            exps = [register(m, en, e, f"emax{stage}_l{lane}", shape=8, reset_less=True)
                    for lane, e in enumerate(exps)]
            ride = _step(m, en, ride, stage)
            stage += 1
        assert stage - 1 == self.latency
        return [ops[0] for ops in levels], exps, ride


def _step(m, en, values, stage):
    """Register every value of ``values`` (a dict) on ``en``, named ``{key}_{stage}``; only
    ``valid`` is reset."""
    return {k: register(m, en, v, f"{k}_{stage}", reset_less=k != "valid")
            for k, v in values.items()}
