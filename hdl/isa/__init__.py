"""The In-Switch Accelerator (ISA): its public names.

Code outside ``hdl/isa`` imports from here only; the submodules are the ISA's internals.
"""

from .descriptor import (Op, FlagMode, FlagStatus, PushMode, ReadKind, IsaParams,
                         descriptor_layout, flag_layout, read_tag_layout, write_tag_layout,
                         push_addr_layout, push_mode, push_input_bytes, check_descriptor,
                         buffer_alignment, MAX_PORTS, MIN_TIMEOUT, WRITE_TAG_BITS, PUSH_OPS)
from .dtype import DType, DatapathStatus, BLOCK_ELEMENTS
from .instruction_buffer import load_layout
from .interfaces import counters_layout, COUNTER_BITS
from .isa import Isa
from .wave_table import read_tag
from .writeback import write_tag

__all__ = [
    "Isa", "IsaParams",
    "Op", "FlagMode", "FlagStatus", "PushMode", "ReadKind", "DType", "DatapathStatus",
    "descriptor_layout", "load_layout", "counters_layout", "flag_layout",
    "read_tag_layout", "write_tag_layout", "push_addr_layout", "read_tag", "write_tag",
    "check_descriptor", "push_mode", "push_input_bytes", "buffer_alignment",
    "MAX_PORTS", "PUSH_OPS", "MIN_TIMEOUT", "WRITE_TAG_BITS", "BLOCK_ELEMENTS", "COUNTER_BITS",
]
