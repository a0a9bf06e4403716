"""Verilog conversion of a component as a top level.

``amaranth.back.verilog.convert`` (0.5) derives the top-level ports from the component's signature
but rejects constant members, and ``stream.Signature(..., always_ready=True)`` (every credit link)
has ``ready = Const(1)``. :func:`toplevel_ports` lists the same ports, under the same
``member__sub__name`` names, minus the constants; :func:`convert` uses it. Use these instead of
calling ``verilog.convert(component)`` directly.
"""

from amaranth.back import verilog
from amaranth.hdl import Const, Value, ValueCastable
from amaranth.hdl._ir import PortDirection
from amaranth.lib import wiring


__all__ = ["toplevel_ports", "convert"]


def toplevel_ports(component):
    """The ``ports=`` dict for :func:`amaranth.back.verilog.convert`: name -> (signal, direction),
    with constant members (``always_ready``/``always_valid`` handshakes) left out."""
    ports = {}
    for path, member, value in component.signature.flatten(component):
        if isinstance(value, ValueCastable):
            value = value.as_value()
        if isinstance(value, Const) or not isinstance(value, Value):
            continue
        direction = PortDirection.Input if member.flow == wiring.In else PortDirection.Output
        ports["__".join(map(str, path))] = (value, direction)
    return ports


def convert(component, name="top", **kwargs):
    """Verilog text of ``component`` as the top-level module ``name``."""
    return verilog.convert(component, name=name, ports=toplevel_ports(component), **kwargs)
