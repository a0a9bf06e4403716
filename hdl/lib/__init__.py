"""Hardware primitives shared by the ISA, the switch and the NVLS engine.

Blocks and helpers (one per module):

* :class:`~.queue.Queue` -- a stream FIFO of a given payload shape in block RAM.
* :class:`~.stream_register.StreamRegister` -- a stream stage whose output comes from flops.
* :class:`~.lowest_set.LowestSet` -- the lowest set bit of a vector (a table's lowest free
  entry).
* :mod:`~.counters` -- the counter convention: ``COUNTER_BITS``-bit wrapping counters, a
  ``counters`` member per block that counts, summed by name where the blocks are joined.
"""

from .counters import COUNTER_BITS, counters_layout, sum_counters
from .lowest_set import LowestSet
from .queue import Queue
from .stream_register import StreamRegister

__all__ = ["COUNTER_BITS", "counters_layout", "sum_counters", "LowestSet", "Queue",
           "StreamRegister"]
