"""NVLS reducer: one flit of every member in, the FP32-accumulated, once-rounded flit out."""

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from ..isa.datapath.common import bit_length, register, wire
from ..isa.dtype import DType
from ..paper import FLIT_WIDTH
from ..params import check_int
from .fp32_add import Fp32Adder


__all__ = ["NvlsReducer", "AccumulateStage", "input_layout", "output_layout", "chain_signature",
           "widen_to_fp32", "round_from_fp32", "NEG_ZERO16"]

#: The 16-bit pattern of -0.0 in FP16 and BF16 alike. A chain stage whose index is not below
#: ``count`` adds this: ``x + (-0) = x`` for every ``x`` (``+0 + -0 = +0``, ``-0 + -0 = -0``), so
#: the stage is the identity without a bypass multiplexer or a second latency to match.
NEG_ZERO16 = 0x8000


def input_layout(flit_width, members, user_width):
    """Payload of :attr:`NvlsReducer.i`: one flit of every member and how to accumulate them."""
    return data.StructLayout({
        "data":  data.ArrayLayout(flit_width, members),
        "order": data.ArrayLayout(ceil_log2(members), members),
        "count": bits_for(members),
        "dtype": DType,
        "user":  user_width,
    })


def output_layout(flit_width, user_width):
    """Payload of :attr:`NvlsReducer.o`: the reduced flit and the input's ``user`` field."""
    return data.StructLayout({"data": flit_width, "user": user_width})


def chain_signature(lanes, user_width, pending):
    """What flows down the accumulation chain (every member ``Out``, towards the output): the
    per-lane FP32 accumulator, the 16-bit operands of the ``pending`` stages still to come
    (``ops[0]`` is the next stage's; no ``ops`` member after the last stage, as a zero-width
    port is an empty ``[-1:0]`` range in Verilog), and the fields that ride along."""
    members = {
        "valid": Out(1),
        "dtype": Out(DType),
        "user":  Out(user_width),
        "acc":   Out(data.ArrayLayout(32, lanes)),
    }
    if pending:
        members["ops"] = Out(data.ArrayLayout(data.ArrayLayout(16, lanes), pending))
    return wiring.Signature(members)


def widen_to_fp32(m, bits, is_bf16, name):
    """The exact FP32 pattern of a 16-bit FP16 or BF16 pattern (combinational). BF16 is the high
    half of an FP32 pattern. Every FP16 value is an FP32 normal: a subnormal ``f * 2**-24`` is
    normalised (its leading one becomes the hidden bit); Inf and NaN keep their fraction, so a NaN
    stays a NaN."""
    s, e, f = bits[15], bits[10:15], bits[:10]
    lz = wire(m, 10 - bit_length(f), f"{name}_lz", shape=4)          # subnormal: 0..9
    sub_frac = wire(m, (f << (lz + 1))[:10], f"{name}_subf", shape=10)  # leading one dropped
    exp32 = Mux(e == 0x1F, 0xFF, Mux(e != 0, e + 112, Mux(f.any(), 112 - lz, 0)))
    frac10 = Mux(e == 0, sub_frac, f)
    fp16 = Cat(Const(0, 13), frac10, exp32[:8], s)
    return wire(m, Mux(is_bf16, Cat(Const(0, 16), bits), fp16), f"{name}_f32", shape=32)


def round_from_fp32(m, x, is_bf16, name):
    """``x`` (an FP32 pattern) rounded to an FP16 or BF16 pattern (combinational): round to nearest
    even, subnormals kept, overflow to +-Inf, NaN to the canonical ``0x7E00``/``0x7FC0``, and the
    sign kept (a negative value too small for the format gives ``-0``, as IEEE conversion does).

    The value is ``M * 2**(E - 150)`` (``M`` the 24-bit significand, ``E >= 1`` the effective
    exponent). The target's quantum is ``2**sh`` units of it, ``sh = 16`` (BF16: same exponent
    range) or ``max(13, 126 - E)`` (FP16, clamped at 26, which drops every bit of ``M`` and rounds
    to zero like any larger shift). As in :func:`scin.sim.fp.round_fixed`, the rounded significand
    keeps its hidden bit, so ``((e - 1) << f) + sig`` encodes subnormals, normals and rounding
    carries alike."""
    s, e_f, f = x[31], x[23:31], x[:23]
    nan = wire(m, (e_f == 0xFF) & f.any(), f"{name}_nan")
    inf = wire(m, (e_f == 0xFF) & ~f.any(), f"{name}_inf")
    M = wire(m, Cat(f, e_f.any()), f"{name}_M", shape=24)
    E = wire(m, Mux(e_f == 0, 1, e_f), f"{name}_E", shape=8)
    sh_fp16 = Mux(E >= 113, 13, Mux(E <= 100, 26, 126 - E))
    sh = wire(m, Mux(is_bf16, 16, sh_fp16), f"{name}_sh", shape=5)
    kept = wire(m, (M >> sh)[:11], f"{name}_kept", shape=11)
    guard = (M >> (sh - 1)[:5])[0]
    sticky = (M & ~(Const((1 << 24) - 1, 24) << (sh - 1)[:5])[:24]).any()
    rounded = kept + (guard & (sticky | kept[0]))
    ebase = Mux(is_bf16, (E - 1) << 7, Mux(E >= 113, (E - 113) << 10, 0))
    body = wire(m, ebase + rounded, f"{name}_body", shape=18)
    inf16 = Mux(is_bf16, 0x7F80, 0x7C00)
    qnan16 = Mux(is_bf16, 0x7FC0, 0x7E00)
    mag = Mux(inf | (body >= inf16), inf16, body[:15])
    return wire(m, Mux(nan, qnan16, Cat(mag[:15], s)), f"{name}_r16", shape=16)


def _delay(m, en, value, cycles, name):
    """``value`` delayed by ``cycles`` enabled cycles (a chain of registers loaded on ``en``)."""
    for c in range(cycles):
        value = register(m, en, value, f"{name}_d{c}")
    return value


class AccumulateStage(wiring.Component):
    """One link of the accumulation chain: ``acc += widen(ops[0])`` in every lane.

    Members
    -------
    en : In(1)
        Pipeline enable of every register.
    i : In(chain_signature(lanes, user_width, pending))
    o : Out(chain_signature(lanes, user_width, pending - 1))
        ``acc`` from one :class:`Fp32Adder` per lane; ``ops[1:]`` (now ``ops[0:]``), ``valid``,
        ``dtype`` and ``user`` delayed by the same :attr:`latency` so they stay aligned.

    Latency :attr:`latency` = ``Fp32Adder.LATENCY`` enabled cycles; one flit per enabled cycle.
    """

    def __init__(self, lanes, user_width, pending):
        self.lanes, self.user_width, self.pending = lanes, user_width, pending
        self.latency = Fp32Adder.LATENCY
        super().__init__({
            "en": In(1),
            "i": In(chain_signature(lanes, user_width, pending)),
            "o": Out(chain_signature(lanes, user_width, pending - 1)),
        })

    def elaborate(self, platform):
        m = Module()
        i, o, en = self.i, self.o, self.en
        is_bf16 = wire(m, i.dtype == DType.BF16, "is_bf16")
        for lane in range(self.lanes):
            add = m.submodules[f"add_l{lane}"] = Fp32Adder()
            m.d.comb += [
                add.en.eq(en),
                add.a.eq(i.acc[lane]),
                add.b.eq(widen_to_fp32(m, i.ops[0][lane], is_bf16, f"op_l{lane}")),
                o.acc[lane].eq(add.sum),
            ]
        for name in ("valid", "dtype", "user"):
            m.d.comb += getattr(o, name).eq(_delay(m, en, getattr(i, name), self.latency, name))
        for j in range(1, self.pending):
            m.d.comb += o.ops[j - 1].eq(_delay(m, en, i.ops[j], self.latency, f"ops{j}"))
        return m


class _OperandSelect(wiring.Component):
    """The chain's first register stage: per lane, operand ``k`` is lane of ``data[order[k]]``, or
    ``-0`` (:data:`NEG_ZERO16`) for ``k >= count``; operand 0 is widened into the accumulator.
    ``i.ready`` is ``en``."""

    def __init__(self, flit_width, members, user_width):
        self.flit_width, self.members, self.user_width = flit_width, members, user_width
        self.lanes = flit_width // 16
        super().__init__({
            "en": In(1),
            "i": In(stream.Signature(input_layout(flit_width, members, user_width))),
            "o": Out(chain_signature(self.lanes, user_width, members - 1)),
        })

    def elaborate(self, platform):
        m = Module()
        p, en, n = self.i.payload, self.en, self.members
        m.d.comb += self.i.ready.eq(en)
        is_bf16 = wire(m, p.dtype == DType.BF16, "is_bf16")
        for k in range(n):
            # An AND-OR multiplexer: one-hot selects, so an index >= members (possible when
            # members is not a power of two) selects nothing, i.e. +0.
            hit = [wire(m, p.order[k] == j, f"sel_k{k}_m{j}") for j in range(n)]
            flit = 0
            for j in range(n):
                flit = flit | (p.data[j] & hit[j].replicate(self.flit_width))
            if k:
                flit = Mux(p.count > k, flit, Const(NEG_ZERO16, 16).replicate(self.lanes))
            flit = wire(m, flit, f"op_k{k}", shape=self.flit_width)
            for lane in range(self.lanes):
                bits = flit[16 * lane:16 * (lane + 1)]
                if k == 0:
                    acc = widen_to_fp32(m, bits, is_bf16, f"acc_l{lane}")
                    m.d.comb += self.o.acc[lane].eq(register(m, en, acc, f"acc_l{lane}_r"))
                else:
                    m.d.comb += self.o.ops[k - 1][lane].eq(
                        register(m, en, bits, f"op_k{k}_l{lane}_r"))
        m.d.comb += [
            self.o.valid.eq(register(m, en, self.i.valid, "valid_r")),
            self.o.dtype.eq(register(m, en, p.dtype, "dtype_r")),
            self.o.user.eq(register(m, en, p.user, "user_r")),
        ]
        return m


class _Round(wiring.Component):
    """The last register stage: every lane's FP32 accumulator rounded to the flit's dtype, into
    the output stream's payload register. It also makes the pipeline enable of the whole chain,
    ``en = ~o.valid | o.ready``: the output register may load when it is empty or being read."""

    def __init__(self, flit_width, user_width):
        self.lanes = flit_width // 16
        super().__init__({
            "en": Out(1),
            "i": In(chain_signature(self.lanes, user_width, 0)),
            "o": Out(stream.Signature(output_layout(flit_width, user_width))),
        })

    def elaborate(self, platform):
        m = Module()
        i, en = self.i, self.en
        m.d.comb += en.eq(~self.o.valid | self.o.ready)
        is_bf16 = wire(m, i.dtype == DType.BF16, "is_bf16")
        lanes = [round_from_fp32(m, i.acc[lane], is_bf16, f"rnd_l{lane}")
                 for lane in range(self.lanes)]
        m.d.comb += [
            self.o.valid.eq(register(m, en, i.valid, "valid_r")),
            self.o.payload.data.eq(register(m, en, Cat(*lanes), "data_r")),
            self.o.payload.user.eq(register(m, en, i.user, "user_r")),
        ]
        return m


class NvlsReducer(wiring.Component):
    """NVLS reduction of one flit of every member: FP32 accumulation in a given order, one RNE
    rounding per element; bit for bit :func:`scin.sim.nvls.nvls_reduce`.

    Parameters
    ----------
    flit_width : int
        64 to 512, a multiple of 16: ``flit_width / 16`` FP16/BF16 lanes.
    members : int
        2 to 16: ``N``, the most members one flit can reduce.
    user_width : int
        Width of ``user``, carried unchanged from input to output (a tag, a ``last`` bit). 1 to 256
        (a zero-width port would be an empty ``[-1:0]`` range in Verilog).

    Members
    -------
    i : In(stream.Signature(input_layout(flit_width, members, user_width)))
        ``data[j]``: member ``j``'s flit. ``order[k]``: the member accumulated ``k``-th (arrival
        order); only ``order[0 .. count-1]`` are used, and they should be distinct members.
        ``count``: members taking part, 1 to ``N`` (0 acts as 1, more than ``N`` as ``N``).
        ``dtype``: :class:`DType` ``BF16``, else FP16 (INT8 and the reserved code are reduced as
        FP16; NVLS reduces neither). An ``order`` entry ``>= N`` (``N`` not a power of two) adds
        ``+0``. ``user``: passes through.
    o : Out(stream.Signature(output_layout(flit_width, user_width)))
        ``data``: lane ``l`` is ``round(dtype, (...((x[order[0]] + x[order[1]]) + ...) +
        x[order[count-1]]))`` in FP32 with RNE after every add (:mod:`scin.sim.nvls` for the
        rules, NaN/Inf and signed zeros included). ``user``: the input's.

    Structure: an operand-select register stage, a chain of ``N - 1`` :class:`AccumulateStage`
    (stage ``k`` adds member ``order[k]`` when ``k < count``, else ``-0``, the identity), and a
    rounding register stage, so the arithmetic is exactly the golden model's sequence.

    Timing: one flit per cycle while ``o`` is ready; results in input order. Latency
    :attr:`latency` = ``2 + (N - 1) * Fp32Adder.LATENCY`` cycles (14 for ``N = 4``, 30 for
    ``N = 8``) from a transfer on ``i`` to ``valid`` on ``o``, whatever ``count``. Flow control is a
    pipeline enable, ``en = ~o.valid | o.ready``: a stalled output holds every register (nothing
    is lost or duplicated) and ``i.ready = en``, so ``i.ready`` depends combinationally on
    ``o.ready``; bubbles are not squeezed out during a stall.

    Raises
    ------
    TypeError, ValueError
        On invalid parameters, naming the parameter, e.g. "members must be an integer between 2
        and 16, not 17".
    """

    MIN_MEMBERS, MAX_MEMBERS = 2, 16
    MIN_FLIT, MAX_FLIT = 64, 512

    def __init__(self, *, flit_width=FLIT_WIDTH, members=8, user_width=1):
        check_int("flit_width", flit_width, self.MIN_FLIT, self.MAX_FLIT)
        if flit_width % 16:
            raise ValueError(f"flit_width must be a multiple of 16, not {flit_width!r}")
        check_int("members", members, self.MIN_MEMBERS, self.MAX_MEMBERS)
        check_int("user_width", user_width, 1, 256)
        self.flit_width, self.members, self.user_width = flit_width, members, user_width
        super().__init__({
            "i": In(stream.Signature(input_layout(flit_width, members, user_width))),
            "o": Out(stream.Signature(output_layout(flit_width, user_width))),
        })

    @staticmethod
    def latency_for(members):
        """Cycles from an input transfer to the output ``valid``: ``2 + (members - 1) * 4``."""
        return 2 + (members - 1) * Fp32Adder.LATENCY

    @property
    def latency(self):
        """:meth:`latency_for` this reducer's ``members``."""
        return self.latency_for(self.members)

    def elaborate(self, platform):
        m = Module()
        w, n, u = self.flit_width, self.members, self.user_width
        front = m.submodules.select = _OperandSelect(w, n, u)
        stages = [AccumulateStage(w // 16, u, n - 1 - k) for k in range(n - 1)]
        back = m.submodules.round = _Round(w, u)
        wiring.connect(m, wiring.flipped(self.i), front.i)
        chain = [front, *stages, back]
        for k, stage in enumerate(stages, start=1):
            m.submodules[f"stage{k}"] = stage
        for up, down in zip(chain, chain[1:]):
            wiring.connect(m, up.o, down.i)
        wiring.connect(m, back.o, wiring.flipped(self.o))
        m.d.comb += [block.en.eq(back.en) for block in chain[:-1]]
        return m
