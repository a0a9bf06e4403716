"""Simulation tops for the endpoint testbenches (not for synthesis)."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ..transport.signature import packet_signature
from .axi import FLAT_FIELDS, FlatAxi
from .bridge import AxiBridge


__all__ = ["FlatAxiBridge"]


class FlatAxiBridge(wiring.Component):
    """An :class:`AxiBridge` whose AXI manager port comes out as flat AMBA-named ports
    (``m_axi_awaddr``, ``m_axi_rready``, ...), so a third-party AXI subordinate model such as
    cocotbext-axi's ``AxiRam(AxiBus.from_prefix(dut, "m_axi"), ...)`` can be the memory.

    Members: ``req_in``, ``write_in``, ``rdata_out``, ``wresp_out`` as on :class:`AxiBridge`, plus
    one member per flat AXI signal.
    """

    def __init__(self, params, *, port=0, outstanding=16, prefix="m_axi"):
        self.bridge = AxiBridge(params, port=port, outstanding=outstanding)
        self.flat = FlatAxi(self.bridge.axi_params, prefix)
        pkt = packet_signature(params)
        members = {"req_in": In(pkt), "write_in": In(pkt), "rdata_out": Out(pkt),
                   "wresp_out": Out(pkt)}
        for name, member in self.flat.signature.members.items():
            if name != "axi":
                members[name] = member
        self._prefix = prefix
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.bridge, m.submodules.flat = self.bridge, self.flat
        connect(m, self.bridge.axi, self.flat.axi)
        for name in ("req_in", "write_in"):
            connect(m, flipped(getattr(self, name)), getattr(self.bridge, name))
        for name in ("rdata_out", "wresp_out"):
            connect(m, getattr(self.bridge, name), flipped(getattr(self, name)))
        for ch, field, flow in FLAT_FIELDS:
            name = f"{self._prefix}_{ch}{field}"
            if flow == Out:
                m.d.comb += getattr(self, name).eq(getattr(self.flat, name))
            else:
                m.d.comb += getattr(self.flat, name).eq(getattr(self, name))
        return m
