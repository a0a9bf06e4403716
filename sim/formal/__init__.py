"""Formal verification: the harnesses, one module per block under proof, and the flow that
proves them (:mod:`.prover`; docs/VERIFICATION.md).

Each harness is a :class:`~amaranth.lib.wiring.Component` whose ports are its block's environment,
left to the solver, and whose ``Assert``/``Assume``/``Cover`` statements state the block's
properties by name (:mod:`.properties`). :mod:`.prover` runs them; ``scin prove`` reports. They
are verification code, so they live here and not in ``hdl/``: the design's Verilog cache
(:func:`scin.sim.runner.verilog_for`) does not depend on them.

* :class:`~.credit_link.CreditLinkHarness` -- CreditTx, Link and CreditRx: the credit protocol.
* :class:`~.packet_arbiter.PacketArbiterHarness` -- the round-robin packet arbiter.
* :class:`~.barrier.BarrierHarness` -- the ISA's BarrierManager.
* :class:`~.packet_filter.PacketFilterHarness` -- the switch port's PacketFilter (INC demux).
* :class:`~.write_tags.WriteTagsHarness` -- the ISA write-back's WriteTags (response tag check).
* :class:`~.table_manager.TableManagerHarness` -- the ISA's TableManager (slots, waves).
* :class:`~.switch_core.SwitchCoreHarness` -- the switch core's crossbar (one class).
* :class:`~.wave_table.WaveTableHarness` -- the ISA's WaveTable (read responses, tags, progress).
* :class:`~.push_table.PushTableHarness` -- the ISA's WaveTable in push mode (push WRITEs, bad
  pushes, the push error and rearm).
* :class:`~.stream_contracts.StreamContractHarness` -- the stream contract on every stream an ISA
  block drives (feeder, write-back, read issuer, copy path, wave controller, datapath) and the
  endpoint's (bridge, memory, accelerator).
"""

from .properties import Properties, OpenBlock, stream_contract
from .credit_link import CreditLinkHarness
from .packet_arbiter import PacketArbiterHarness
from .barrier import BarrierHarness
from .packet_filter import PacketFilterHarness
from .write_tags import WriteTagsHarness
from .table_manager import TableManagerHarness
from .switch_core import SwitchCoreHarness
from .wave_table import WaveTableHarness
from .push_table import PushTableHarness
from .stream_contracts import StreamContractHarness

__all__ = ["Properties", "OpenBlock", "stream_contract", "CreditLinkHarness",
           "PacketArbiterHarness", "BarrierHarness", "PacketFilterHarness", "WriteTagsHarness",
           "TableManagerHarness", "SwitchCoreHarness", "WaveTableHarness",
           "PushTableHarness", "StreamContractHarness"]
