"""The tops ``scin timing`` measures: every synthesizable block of ``scin verilog``, and the ISA
datapath's parts on their own (feeder, dequantizer, tree reducer, block quantizer)."""

from amaranth.hdl import Cat, Fragment, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..hdl.catalog import BLOCKS, SIMULATION_ONLY


__all__ = ["TIMING_BLOCKS", "DATAPATH_PARTS", "Dequantizer"]


class Dequantizer(wiring.Component):
    """One participant's flit decoded by the datapath's ``dequantize``, with no register, as a
    top for measurement: ``dtype``, ``flit`` and ``scale`` in, every decoded field out (``o``).
    Its depth is the part of the tree reducer's first stage that decoding takes."""

    def __init__(self, flit_width):
        from ..hdl.isa.datapath.common import check_params
        from ..hdl.isa.dtype import DType
        check_params(2, flit_width)
        self.flit_width = flit_width
        self._inputs = (Signal(DType), Signal(flit_width), Signal(16))
        # Decoded once into a scratch module only to learn the output's width (elaborated, so
        # Amaranth does not warn that it was never used).
        scratch = Module()
        decoded = self._decode(scratch)
        Fragment.get(scratch, None)
        super().__init__({"dtype": In(DType), "flit": In(flit_width), "scale": In(16),
                          "o": Out(len(decoded))})

    def _decode(self, m):
        from ..hdl.isa.datapath import dequantize
        dtype, flit, scale = self._inputs
        d = dequantize(m, dtype, flit, scale, self.flit_width, "deq")
        return Cat(*d.base, *d.exp, *d.q, d.ssig, d.ssh, d.nan, d.pinf, d.ninf, d.bad)

    def elaborate(self, platform):
        m = Module()
        dtype, flit, scale = self._inputs
        m.d.comb += [dtype.eq(self.dtype), flit.eq(self.flit), scale.eq(self.scale)]
        m.d.comb += self.o.eq(self._decode(m))
        return m


def _feeder(params):
    from ..hdl.isa import IsaParams
    from ..hdl.isa.feeder import Feeder
    return Feeder(IsaParams(fabric=params))


def _tree_reducer(params):
    from ..hdl.isa.datapath import TreeReducer
    return TreeReducer(n_inputs=params.ports, flit_width=params.flit_width)


def _block_quantizer(params):
    from ..hdl.isa.datapath import BlockQuantizer
    return BlockQuantizer(flit_width=params.flit_width)


#: The datapath's parts, each on its own: ``name -> (factory(params), description)``.
DATAPATH_PARTS = {
    "feeder": (_feeder, "ISA feeder: wave-table reads into the datapath's input flit"),
    "dequantizer": (lambda p: Dequantizer(p.flit_width),
                    "one participant's flit decoded (combinational, ports to ports)"),
    "tree_reducer": (_tree_reducer, "decode, align and the pipelined adder tree"),
    "block_quantizer": (_block_quantizer, "the sum rounded to FP16/BF16 or quantized to INT8"),
}

#: Every top ``scin timing --block`` accepts.
TIMING_BLOCKS = {**{n: b for n, b in BLOCKS.items() if n not in SIMULATION_ONLY}, **DATAPATH_PARTS}
