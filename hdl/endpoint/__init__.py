"""The endpoint side of the fabric: AXI4 protocol translation, memory model, accelerator."""

from .axi import AxiParams, Burst, Resp, axi_signature, poll_signature, FlatAxi
from .memory import AxiMemory
from .bridge import AxiBridge, bridge_axi_params
from .read_train import ReadTrainSplitter, train_piece_bytes
from .accelerator import (Accelerator, AccOp, EventKind, command_layout, event_layout,
                          pattern_bytes, xor_fold, FLAG_LAYOUT)
from .endpoint import Endpoint


__all__ = ["AxiParams", "Burst", "Resp", "axi_signature", "poll_signature", "FlatAxi", "AxiMemory",
           "AxiBridge", "bridge_axi_params", "ReadTrainSplitter", "train_piece_bytes",
           "Accelerator", "AccOp", "EventKind", "command_layout", "event_layout", "pattern_bytes",
           "xor_fold", "FLAG_LAYOUT", "Endpoint"]
