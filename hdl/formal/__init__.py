"""Formal harnesses: one module per block under proof (docs/VERIFICATION.md).

Each harness is a :class:`~amaranth.lib.wiring.Component` whose ports are its block's environment,
left to the solver, and whose ``Assert``/``Assume``/``Cover`` statements state the block's
properties by name (:mod:`.properties`). ``sim/formal.py`` runs them; ``scin prove`` reports.

* :class:`~.credit_link.CreditLinkHarness` -- CreditTx, Link and CreditRx: the credit protocol.
* :class:`~.packet_arbiter.PacketArbiterHarness` -- the round-robin packet arbiter.
* :class:`~.barrier.BarrierHarness` -- the ISA's BarrierManager.
"""

from .properties import Properties, OpenBlock, stream_contract
from .credit_link import CreditLinkHarness
from .packet_arbiter import PacketArbiterHarness
from .barrier import BarrierHarness

__all__ = ["Properties", "OpenBlock", "stream_contract", "CreditLinkHarness",
           "PacketArbiterHarness", "BarrierHarness"]
