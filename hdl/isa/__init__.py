"""The In-Switch Accelerator (ISA): element types and the reduction datapath."""

from .dtype import DType, DatapathStatus

__all__ = ["DType", "DatapathStatus"]
