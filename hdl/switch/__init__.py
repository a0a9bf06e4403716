"""The switch: per-port INC demux and ISA/core arbitration, and a crossbar core.

Blocks (one per module):

* :class:`~.arbiter.PacketArbiter` -- round robin among packet streams, grant changes only between
  packets.
* :class:`~.filter.PacketFilter` -- checks each received header, drops malformed packets whole and
  counts them, and steers good ones to the ISA (INC=1) or the switch core (INC=0).
* :class:`~.port.SwitchPort` -- one switch port: transport, filters, ISA queues, TX arbiters.
* :class:`~.core.SwitchCore` -- the crossbar between ports, per message class.
* :class:`~.switch.Switch` -- N switch ports and the core.
"""

from .arbiter import PacketArbiter
from .filter import PacketFilter, error_layout
from .port import SwitchPort
from .core import SwitchCore
from .switch import Switch, SWITCH_LATENCY

__all__ = ["PacketArbiter", "PacketFilter", "error_layout", "SwitchPort", "SwitchCore", "Switch",
           "SWITCH_LATENCY"]
