"""The ISA reduction datapath, one block per module (see ``docs/DATAPATH.md``)."""

from .block_quantizer import BlockQuantizer
from .common import block_flits, input_layout, lanes16, lanes8, output_layout
from .datapath import Datapath
from .dequantizer import dequantize
from .tree_reducer import TreeReducer

__all__ = ["Datapath", "dequantize", "TreeReducer", "BlockQuantizer", "input_layout",
           "output_layout", "lanes16", "lanes8", "block_flits"]
