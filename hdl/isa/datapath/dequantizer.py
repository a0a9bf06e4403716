"""Dequantizer: one participant's flit decoded into signed significands and shifts, per lane."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Mux, Value, signed

from ..dtype import DType
from .common import BASE_WIDTH, lanes16, lanes8, negate_if, wire


__all__ = ["Decoded", "dequantize"]


@dataclass
class Decoded:
    """The decoded fields of one participant's flit (combinational signals).

    * ``base[lane]`` (``lane < flit_width/16``, signed ``BASE_WIDTH``): FP16 ``+-sig``, BF16
      ``+-sig`` (8-bit significand, hidden bit set only for normals), INT8 ``q`` (element
      ``lane``); 0 for a non-finite FP16/BF16 input.
    * ``exp[lane]`` (8 bits): FP16 the shift ``e - 1`` (0 for subnormals), so
      ``x * 2**24 = base << exp``; BF16 the biased exponent (1 for zeros, subnormals and
      non-finite inputs); INT8 the scale's shift ``ssh``.
    * ``q[lane - flit_width/16]``: INT8 elements of the lanes above ``flit_width/16``.
    * ``ssig`` (11 bits), ``ssh`` (5 bits): the INT8 scale, ``s * 2**24 = ssig << ssh``;
      ``ssig = 0`` for a bad scale.
    * ``nan``, ``pinf``, ``ninf`` (one bit per FP16/BF16 lane): non-finite inputs.
    * ``bad``: the INT8 scale is negative (sign bit set, ``-0`` included), Inf or NaN.

    The fields of the modes other than ``dtype``'s are don't-care.
    """
    base: list
    exp: list
    q: list
    ssig: Value
    ssh: Value
    nan: Value
    pinf: Value
    ninf: Value
    bad: Value


def dequantize(m, dtype, flit, scale, flit_width, name):
    """Decode ``flit`` (one participant's ``flit_width`` bits) and its INT8 block ``scale`` (FP16
    bits) for ``dtype``, as :class:`Decoded` signals named ``<name>_...``.

    This is the datapath's first pipeline stage: :class:`TreeReducer` calls it and registers the
    fields its terms need (with the BF16 max-exponent tree), so the raw flit is never held in
    flip-flops. It has no registers and no stream of its own (and the simulators see one signal
    per field, not one wide payload with a driver per field).
    """
    l16, l8 = lanes16(flit_width), lanes8(flit_width)
    is_int8 = dtype == DType.INT8
    is_bf16 = dtype == DType.BF16

    # The INT8 scale, as significand and shift: s * 2**24 = ssig << ssh.
    s_exp, s_frac = scale[10:15], scale[:10]
    bad = wire(m, scale[15] | (s_exp == 0x1F), f"{name}_bad")
    ssig = wire(m, Mux(bad, 0, Mux(s_exp == 0, s_frac, Cat(s_frac, 1))), f"{name}_ssig", shape=11)
    ssh = wire(m, Mux(s_exp == 0, 0, s_exp - 1)[:5], f"{name}_ssh", shape=5)

    base, exp, nan, pinf, ninf = [], [], [], [], []
    for lane in range(l16):
        x = flit[16 * lane:16 * (lane + 1)]
        # Non-finite detection depends on the format's exponent field.
        f_exp, f_frac = x[10:15], x[:10]
        b_exp, b_frac = x[7:15], x[:7]
        f_special = f_exp == 0x1F
        b_special = b_exp == 0xFF
        special = Mux(is_bf16, b_special, f_special)
        frac_zero = Mux(is_bf16, b_frac == 0, f_frac == 0)
        nan.append(special & ~frac_zero)
        pinf.append(special & frac_zero & ~x[15])
        ninf.append(special & frac_zero & x[15])
        # FP16: x * 2**24 = (+-sig) << (e - 1) for normals, +-frac for subnormals.
        fsig = Mux(f_special, 0, Mux(f_exp == 0, f_frac, Cat(f_frac, 1)))
        fsh = Mux(f_exp == 0, 0, f_exp - 1)[:5]
        bsig = Mux(b_special, 0, Mux(b_exp == 0, b_frac, Cat(b_frac, 1)))
        bexp = Mux((b_exp == 0) | b_special, 1, b_exp)
        sig = Mux(is_bf16, bsig, fsig)
        # INT8 element `lane` is bits [8 lane, 8 lane + 8), not the low half of x.
        q = flit[8 * lane:8 * (lane + 1)].as_signed()
        signed_sig = negate_if(Cat(sig, Const(0, BASE_WIDTH - len(sig))), x[15])
        base.append(wire(m, Mux(is_int8, q, signed_sig[:BASE_WIDTH].as_signed()),
                         f"{name}_base_l{lane}", shape=signed(BASE_WIDTH)))
        exp.append(wire(m, Mux(is_int8, ssh, Mux(is_bf16, bexp, fsh)), f"{name}_exp_l{lane}",
                        shape=8))
    return Decoded(
        base=base, exp=exp,
        q=[flit[8 * lane:8 * (lane + 1)].as_signed() for lane in range(l16, l8)],
        ssig=ssig, ssh=ssh,
        nan=wire(m, Cat(*nan), f"{name}_nan"), pinf=wire(m, Cat(*pinf), f"{name}_pinf"),
        ninf=wire(m, Cat(*ninf), f"{name}_ninf"), bad=bad)
