"""Element types and status flags of the ISA arithmetic.

The arithmetic itself is defined in ``docs/NUMERICS.md`` and, bit for bit, by the golden model
:mod:`scin.sim.numerics`; the datapath in :mod:`scin.hdl.isa.datapath` implements it in hardware.
"""

from amaranth.lib import enum


__all__ = ["DType", "DatapathStatus", "BLOCK_ELEMENTS", "lanes_for"]

#: INQ block size: INT8 elements that share one FP16 scale (512 bits of INT8 data).
BLOCK_ELEMENTS = 64


class DType(enum.Enum, shape=2):
    """Element type of a reduction. Encoding 3 is reserved (the datapath treats it as FP16)."""
    FP16 = 0  #: IEEE binary16; exact sum, one round-to-nearest-even
    BF16 = 1  #: bfloat16; sum aligned to the largest exponent with 32 guard bits, one RNE
    INT8 = 2  #: INQ: symmetric INT8 with one FP16 scale per block of 64 elements


class DatapathStatus(enum.Flag, shape=2):
    """Status flags of one element (FP16/BF16) or one block (INT8); same values as
    :class:`scin.sim.numerics.Status`."""
    OVERFLOW = 1  #: a finite result was replaced: +-Inf (FP16/BF16) or a scale saturated at 65504
    INVALID  = 2  #: a NaN/Inf input (FP16/BF16) or a negative or non-finite input scale (INT8)


def lanes_for(dtype, flit_width):
    """Elements per flit of ``dtype`` (16 bits per FP16/BF16 element, 8 per INT8 element)."""
    return flit_width // (8 if DType(dtype) == DType.INT8 else 16)
