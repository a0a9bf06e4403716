"""AXI4 interface definitions: parameters, channel layouts, the bus signature, a flat-port adapter.

Every AXI4 channel is an :mod:`amaranth.lib.stream` (``valid``/``ready``, transfer on both high)
whose ``payload`` is a :class:`data.StructLayout` with the standard AXI4 field names, so AXI blocks
connect with :func:`wiring.connect` and obey the same stream contract as the packet fabric.
Third-party AXI models (cocotbext-axi, vendor IP) want one port per field with the usual
``<prefix>_<channel><field>`` names instead; :class:`FlatAxi` adapts between the two.

Only the subset this project uses is modelled: ``awlock``, ``awcache``, ``awprot``, ``awqos``,
``awregion`` and their ``ar`` twins are absent (their defaults are 0), and ``wuser``, ``buser`` and
``ruser`` are absent. ``aruser``/``awuser`` bit 0 is the SCIN INC flag.
"""

from dataclasses import dataclass

from amaranth.hdl import Module, Value, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..params import check_int, check_power_of_two, check_type


__all__ = ["AxiParams", "Burst", "Resp", "axi_signature", "poll_signature", "FlatAxi",
           "FLAT_FIELDS"]


class Burst(enum.Enum, shape=2):
    """AXI ``axburst``. The fourth encoding, 0b11, is reserved (:class:`AxiMemory` answers it
    with SLVERR); a field of this shape holding it compares unequal to every member."""
    FIXED = 0
    INCR  = 1
    WRAP  = 2


class Resp(enum.Enum, shape=2):
    """AXI ``bresp``/``rresp``; the same encodings as :class:`scin.hdl.packet.Status` 0-3."""
    OKAY   = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


@dataclass(frozen=True)
class AxiParams:
    """Widths of one AXI4 bus.

    Parameters
    ----------
    data_width : int
        ``xdata`` bits: 32 to 1024, a power of two (the fabric uses its flit width).
    addr_width : int
        ``axaddr`` bits, 12 to 64.
    id_width : int
        ``axid``/``xid`` bits, 1 to 16.
    user_width : int
        ``axuser`` bits, at least 1: bit 0 carries the INC flag.

    Raises
    ------
    ValueError
        If a width is out of range.
    """
    data_width: int = 256
    addr_width: int = 48
    id_width:   int = 5
    user_width: int = 1

    def __post_init__(self):
        check_power_of_two("data_width", self.data_width, 32, 1024)
        check_int("addr_width", self.addr_width, 12, 64)
        check_int("id_width", self.id_width, 1, 16)
        check_int("user_width", self.user_width, 1, 64)

    @property
    def data_bytes(self):
        return self.data_width // 8

    @property
    def size_max(self):
        """``axsize`` of a full-width beat: log2 of the bytes per beat."""
        return exact_log2(self.data_bytes)

    @property
    def ax_layout(self):
        """``aw``/``ar`` payload."""
        return data.StructLayout({
            "id": self.id_width, "addr": self.addr_width, "len": 8, "size": 3, "burst": Burst,
            "user": self.user_width})

    @property
    def w_layout(self):
        return data.StructLayout({"data": self.data_width, "strb": self.data_bytes, "last": 1})

    @property
    def b_layout(self):
        return data.StructLayout({"id": self.id_width, "resp": Resp})

    @property
    def r_layout(self):
        return data.StructLayout({"id": self.id_width, "data": self.data_width, "resp": Resp,
                                  "last": 1})


def axi_signature(params):
    """The AXI4 bus as seen by the *manager* (master): ``Out`` for ``aw``, ``w``, ``ar``; ``In`` for
    ``b`` and ``r``. A subordinate (slave) uses ``In(axi_signature(params))``.

    Verilog port names come out as ``<member>__ar__valid``, ``<member>__ar__payload`` and so on.
    """
    check_type("params", params, AxiParams)
    return wiring.Signature({
        "aw": Out(stream.Signature(params.ax_layout)),
        "w":  Out(stream.Signature(params.w_layout)),
        "b":  In(stream.Signature(params.b_layout)),
        "ar": Out(stream.Signature(params.ax_layout)),
        "r":  In(stream.Signature(params.r_layout)),
    })


def poll_signature(addr_width, data_width):
    """A free-running read port, as seen by the reader: it drives ``addr`` (a word index) and sees
    the word at that index on ``data`` one cycle later, every cycle, with no handshake."""
    return wiring.Signature({"addr": Out(addr_width), "data": In(data_width)})


#: (channel, field, direction seen by the manager) in cocotbext-axi / AMBA naming order.
FLAT_FIELDS = (
    [("aw", f, Out) for f in ("id", "addr", "len", "size", "burst", "user", "valid")]
    + [("aw", "ready", In)]
    + [("w", f, Out) for f in ("data", "strb", "last", "valid")] + [("w", "ready", In)]
    + [("b", f, In) for f in ("id", "resp", "valid")] + [("b", "ready", Out)]
    + [("ar", f, Out) for f in ("id", "addr", "len", "size", "burst", "user", "valid")]
    + [("ar", "ready", In)]
    + [("r", f, In) for f in ("id", "data", "resp", "last", "valid")] + [("r", "ready", Out)]
)


class FlatAxi(wiring.Component):
    """Adapter from a stream-based AXI4 manager port to flat, AMBA-named ports.

    ``axi`` (``In(axi_signature)``: connect a manager's ``axi`` to it) is re-exposed as one member
    per AXI signal, named ``<prefix>_<channel><field>`` (``m_axi_awaddr``, ``m_axi_rready``, ...),
    which is what cocotbext-axi's ``AxiBus.from_prefix(dut, prefix)`` and vendor IP expect. Purely
    combinational.

    Parameters
    ----------
    params : AxiParams
    prefix : str
        Name prefix of the flat ports, a Python identifier.
    """

    def __init__(self, params, prefix="m_axi"):
        if not isinstance(prefix, str) or not prefix.isidentifier():
            raise ValueError(f"prefix must be an identifier, not {prefix!r}")
        self._params, self._prefix = params, prefix
        members = {"axi": In(axi_signature(params))}
        for ch, field, flow in FLAT_FIELDS:
            members[f"{prefix}_{ch}{field}"] = flow(self._field_shape(ch, field))
        super().__init__(members)

    def _field_shape(self, ch, field):
        if field in ("valid", "ready"):
            return 1
        layout = {"aw": self._params.ax_layout, "ar": self._params.ax_layout,
                  "w": self._params.w_layout, "b": self._params.b_layout,
                  "r": self._params.r_layout}[ch]
        # Plain widths, also for enum fields: flat ports are raw wires.
        return unsigned(layout[field].width)

    def elaborate(self, platform):
        m = Module()
        for ch, field, flow in FLAT_FIELDS:
            flat = getattr(self, f"{self._prefix}_{ch}{field}")
            chan = getattr(self.axi, ch)
            inner = Value.cast(getattr(chan, field) if field in ("valid", "ready")
                               else getattr(chan.payload, field))
            if flow == Out:   # manager -> flat port
                m.d.comb += flat.eq(inner)
            else:
                m.d.comb += inner.eq(flat)
        return m
