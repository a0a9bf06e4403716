"""Simulation tops for the endpoint testbenches (not for synthesis).

Pass this module as ``top_module`` to :func:`scin.sim.runner.verilog_for`, so an edit here
re-elaborates the models built on these tops (and nothing else).
"""

from amaranth.hdl import Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...hdl.transport.signature import packet_signature
from ...hdl.endpoint.axi import FLAT_FIELDS, FlatAxi
from ...hdl.endpoint.bridge import AxiBridge
from ...hdl.endpoint.memory import AxiMemory


__all__ = ["FlatAxiBridge", "FlatAxiMemory", "IGNORED_SIDEBANDS"]

#: AXI4 address-channel signals :class:`FlatAxiMemory` accepts and ignores, with their widths.
IGNORED_SIDEBANDS = {"lock": 1, "cache": 4, "prot": 3, "qos": 4, "region": 4}


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


class FlatAxiMemory(wiring.Component):
    """An :class:`AxiMemory` whose AXI port comes out as flat AMBA-named subordinate ports
    (``s_axi_awaddr``, ``s_axi_rready``, ...), so a third-party AXI manager such as cocotbext-axi's
    ``AxiMaster(AxiBus.from_prefix(dut, "s_axi"), ...)`` can drive it.

    Besides the fields of :data:`~scin.hdl.endpoint.axi.FLAT_FIELDS`, it has the AXI4
    ``<prefix>_{aw,ar}{lock,cache,prot,qos,region}`` inputs (:data:`IGNORED_SIDEBANDS`), which the
    memory ignores: they are there so that a standard manager can be bound with every signal it
    drives. In particular an exclusive access (``axlock = 1``) is carried out as a normal one and
    answered ``OKAY``, never ``EXOKAY``: the AXI4 response of a subordinate without exclusive-access
    support. ``poll.addr`` is tied to 0.

    Members: one per flat AXI signal, plus ``load``, ``dump_req`` and ``dump_data`` as on
    :class:`AxiMemory`. Keyword arguments other than ``prefix`` go to :class:`AxiMemory`.
    """

    def __init__(self, params, *, prefix="s_axi", **memory_kwargs):
        if not isinstance(prefix, str) or not prefix.isidentifier():
            raise ValueError(f"prefix must be an identifier, not {prefix!r}")
        self.memory = AxiMemory(params, **memory_kwargs)
        self._prefix = prefix
        members = {}
        for ch, field, flow in FLAT_FIELDS:   # directions as seen by the manager, so flipped
            width = len(self._inner(ch, field))
            members[f"{prefix}_{ch}{field}"] = In(width) if flow == Out else Out(width)
        for ch in ("aw", "ar"):
            for field, width in IGNORED_SIDEBANDS.items():
                members[f"{prefix}_{ch}{field}"] = In(width)
        for name in ("load", "dump_req", "dump_data"):
            members[name] = self.memory.signature.members[name]
        super().__init__(members)

    def _inner(self, ch, field):
        chan = getattr(self.memory.axi, ch)
        return Value.cast(getattr(chan, field) if field in ("valid", "ready")
                          else getattr(chan.payload, field))

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = self.memory
        for ch, field, flow in FLAT_FIELDS:
            name = f"{self._prefix}_{ch}{field}"
            inner = self._inner(ch, field)
            if flow == Out:   # outside manager -> memory
                m.d.comb += inner.eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(inner)
        m.d.comb += self.memory.poll.addr.eq(0)
        for name in ("load", "dump_req"):
            connect(m, flipped(getattr(self, name)), getattr(self.memory, name))
        connect(m, self.memory.dump_data, flipped(self.dump_data))
        return m
