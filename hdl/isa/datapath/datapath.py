"""The ISA datapath: dequantize -> tree reduce -> quantize, at one flit per cycle."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...paper import FLIT_WIDTH
from .block_quantizer import BlockQuantizer
from .common import check_params, input_layout, output_layout
from .tree_reducer import TreeReducer


__all__ = ["Datapath"]


class Datapath(wiring.Component):
    """All-Reduce arithmetic of the ISA: one flit of every participant in, one result flit out.

    The arithmetic is that of :mod:`scin.sim.numerics` (``docs/NUMERICS.md``), bit for bit,
    status flags included; results do not depend on the order of the participants.

    Parameters
    ----------
    n_inputs : int
        Participants, 2 to 8.
    flit_width : int
        64, 128, 256 (default, the prototype's 32-byte flit) or 512. FP16/BF16 flits hold
        ``flit_width/16`` lanes, INT8 flits ``flit_width/8``; an INT8 block of 64 elements spans
        ``512/flit_width`` flits.

    Members
    -------
    i : In(stream.Signature(input_layout(n_inputs, flit_width)))
        ``dtype``; ``data[p]``, participant ``p``'s flit; ``scale[p]``, participant ``p``'s FP16
        scale of the INT8 block this flit belongs to (ignored for FP16/BF16); ``last``, the end of a
        wave or message (passes through). For INT8, the first flit after reset or after a ``last``
        starts a block; a wave should be a whole number of blocks (a ``last`` ends a short block,
        which is then treated as zero-padded, like the golden model does). The dtype may change
        only at a block boundary.
    o : Out(stream.Signature(output_layout(flit_width)))
        ``dtype`` and ``last`` of the input flit; ``data``, the result; ``scale``, the output block
        scale (INT8; 0 otherwise); ``status``, :class:`DatapathStatus` flags, OR'ed over the
        flit's elements (INT8: the block's).

    Timing: with no stalls it accepts a flit every cycle, in every mode and across dtype changes.
    Latency is :attr:`latency` cycles from a flit's transfer on ``i`` to its result's ``valid`` on
    ``o`` (FP16/BF16, and the last flit of an INT8 block; an INT8 block's earlier flits also wait
    for that last flit). A stall on ``o`` propagates back to ``i``.

    Raises
    ------
    TypeError, ValueError
        On invalid parameters, e.g. "n_inputs must be between 2 and 8, not 9".
    """

    def __init__(self, *, n_inputs=4, flit_width=FLIT_WIDTH):
        check_params(n_inputs, flit_width)
        self.n_inputs = n_inputs
        self.flit_width = flit_width
        super().__init__({
            "i": In(stream.Signature(input_layout(n_inputs, flit_width))),
            "o": Out(stream.Signature(output_layout(flit_width))),
        })

    @staticmethod
    def latency_for(n_inputs):
        """Cycles from an input transfer to the output ``valid`` (see the class docstring), without
        building a datapath: 10 for N = 2, 11 for N = 3-4, 12 for N = 5-8."""
        return (TreeReducer.latency_for(n_inputs) + BlockQuantizer.INPUT_STAGES
                + BlockQuantizer.FIFO_LATENCY + BlockQuantizer.OUTPUT_STAGES)

    @property
    def latency(self):
        """:meth:`latency_for` this datapath's ``n_inputs``."""
        return self.latency_for(self.n_inputs)

    def elaborate(self, platform):
        m = Module()
        # The dequantizer is the tree reducer's first stage (dequantize()).
        red = TreeReducer(n_inputs=self.n_inputs, flit_width=self.flit_width)
        quant = BlockQuantizer(flit_width=self.flit_width)
        m.submodules.tree_reducer = red
        m.submodules.block_quantizer = quant
        wiring.connect(m, wiring.flipped(self.i), red.i)
        wiring.connect(m, red.o, quant.i)
        wiring.connect(m, quant.o, wiring.flipped(self.o))
        return m
