"""Credit-based transport layer: per-class queues and credits over a full-duplex link.

Blocks (one per module):

* :class:`~.credit_tx.CreditTx` -- per-class credit counters and the flit-level class mux onto a
  link.
* :class:`~.credit_rx.CreditRx` -- per-class receive queues (block RAM) that return credits.
* :class:`~.port.TransportPort` -- CreditTx + CreditRx: one end of a link.
* :class:`~.link.Link` -- a full-duplex link model with a configurable one-way latency.
"""

from .signature import (link_flit_signature, credit_signature, link_end_signature, packet_signature,
                        check_credits)
from .credit_tx import CreditTx
from .credit_rx import CreditRx
from .link import DelayLine, Link
from .port import TransportPort, TRANSPORT_LATENCY, CREDIT_LOOP_OVERHEAD, credits_for_full_rate

__all__ = ["link_flit_signature", "credit_signature", "link_end_signature", "packet_signature",
           "check_credits", "CreditTx", "CreditRx", "DelayLine", "Link", "TransportPort",
           "TRANSPORT_LATENCY", "CREDIT_LOOP_OVERHEAD", "credits_for_full_rate"]
