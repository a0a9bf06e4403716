"""The IP view of a generated top: its ports grouped into AXI4 and AXI4-Stream interfaces with
standard names, and a thin Verilog wrapper that carries them with Vivado's interface attributes.

Amaranth names a top's ports after its signature (``rx__0__1__payload``, ``axi__aw__valid``), and
a payload is one wide vector. Tools that infer buses (Vivado IP Integrator, cocotbext-axi's
``AxiBus.from_prefix``) want one port per field under the AMBA names. :func:`interfaces` reads
the component's signature and groups its ports:

* a member with the AXI4 signature (:func:`~scin.hdl.endpoint.axi.axi_signature`: ``aw``, ``w``,
  ``b``, ``ar``, ``r`` streams) becomes an ``aximm`` interface, ``m_axi`` when the top is the
  manager (drives ``awvalid``), ``s_axi`` when it is the subordinate; one port per field of
  :data:`~scin.hdl.endpoint.axi.FLAT_FIELDS` (``m_axi_awaddr``, ``m_axi_rready``, ...);
* every other :class:`amaranth.lib.stream.Signature` member becomes an ``axis`` interface,
  ``s_axis_<path>`` when it flows into the top and ``m_axis_<path>`` when it flows out. The
  payload's ``data`` field is ``TDATA``, ``last`` is ``TLAST``, ``msg_class`` (a link flit's
  virtual channel, whose flits interleave per class the way AXI4-Stream lets streams of
  different ``TID`` interleave) is ``TID``, the other fields (neighbours in the payload) are
  ``TUSER``; a payload without a ``data`` field is ``TDATA`` whole. ``TDATA`` is padded with
  zero bits to whole bytes (AXI4-Stream requires it): padding bits of an output are 0, those of
  an input are ignored. A stream whose
  ``ready`` is constant (a credit link's flits: the credit protocol, not a handshake, guarantees
  room) has no ``TREADY`` (``HAS_TREADY 0``);
* except a *credit* stream (``tx_credit``, ``rx_credit`` of a link end, :data:`PLAIN_STREAMS`):
  a per-class bit mask of returned credits, consumed every cycle it is valid, with no data and
  no handshake. Declared as AXI4-Stream, IP Integrator would let it be joined to a FIFO or a
  width converter, which would break the credit loop's accounting; it stays two plain ports;
* every remaining port (counters, error flags, the memory's poll port) is a plain port, named by
  its path with ``_`` for ``__``.

:func:`wrapper_verilog` writes module ``<top>_ip`` with those ports, each carrying
``X_INTERFACE_INFO`` (bus type and the port's logical name) and, on the first port of each
interface, ``X_INTERFACE_PARAMETER`` (data width, ID/user widths, ``FREQ_HZ``); the clock carries
``ASSOCIATED_BUSIF`` (every interface), ``ASSOCIATED_RESET`` and ``FREQ_HZ``, the reset its
polarity (Amaranth's ``rst``: synchronous, active high). The wrapper only renames and slices:
no logic.
"""

import itertools
from dataclasses import dataclass, field

from amaranth.lib import data, stream, wiring

from ..hdl.endpoint.axi import FLAT_FIELDS
from ..hdl.toplevel import toplevel_ports


__all__ = ["BusPort", "Interface", "Plain", "PLAIN_STREAMS", "interfaces", "wrapper_name",
           "wrapper_verilog", "describe"]

#: Stream members that stay plain ports, with the reason (module docstring).
PLAIN_STREAMS = {
    "tx_credit": "credit returns: a per-class bit mask consumed every valid cycle, not data",
    "rx_credit": "credit returns: a per-class bit mask consumed every valid cycle, not data",
}

#: Vivado's bus definitions (VLNV) of the interface kinds.
BUS_TYPES = {"aximm": "xilinx.com:interface:aximm:1.0", "axis": "xilinx.com:interface:axis:1.0"}
CLOCK_TYPE = "xilinx.com:signal:clock:1.0"
RESET_TYPE = "xilinx.com:signal:reset:1.0"


@dataclass
class BusPort:
    """One wrapper port of an interface: ``name`` (the wrapper's), ``logical`` (the bus
    definition's port, e.g. ``AWADDR``), ``direction`` (as the wrapper sees it), ``width``, and
    where it comes from: ``core`` (the core's port) and ``lo`` (its lowest bit there); ``bits`` of
    the wrapper port are meaningful, the rest is padding."""
    name: str
    logical: str
    direction: str
    width: int
    core: str
    lo: int = 0
    bits: int | None = None

    def __post_init__(self):
        if self.bits is None:
            self.bits = self.width


@dataclass
class Interface:
    """One bus of the wrapper: ``name`` (``m_axi``, ``s_axis_rx_0_1``), ``kind`` (``aximm`` or
    ``axis``), ``mode`` (``master`` or ``slave``), its ``signals`` and ``parameters`` (Vivado's
    ``X_INTERFACE_PARAMETER`` names and values, without ``FREQ_HZ``, which comes from the clock)."""
    name: str
    kind: str
    mode: str
    signals: list = field(default_factory=list)
    parameters: dict = field(default_factory=dict)


@dataclass
class Plain:
    """A wrapper port that belongs to no bus, with the ``reason`` when it could have been one."""
    name: str
    direction: str
    width: int
    core: str
    reason: str = ""


def _ports(component):
    """``{core port name: (direction, width)}`` of the non-constant ports, as the top has them."""
    from amaranth.hdl._ir import PortDirection
    return {name: ("input" if d == PortDirection.Input else "output", len(v))
            for name, (v, d) in toplevel_ports(component).items()}


def _is_axi(sig):
    return (set(sig.members) == {"aw", "w", "b", "ar", "r"}
            and all(isinstance(m.signature, stream.Signature) for m in sig.members.values()))


def _walk(sig, path):
    """``(path, member)`` of every member of ``sig``, arrays expanded, signatures not entered."""
    for name, member in sig.members.items():
        for index in itertools.product(*(range(n) for n in member.dimensions)):
            yield (*path, name, *map(str, index)), member


def _leaves(layout, lo=0, path=()):
    """``(path, offset, width)`` of every leaf field of a (nested) struct layout."""
    for name, fld in layout:
        shape = fld.shape
        if isinstance(shape, data.StructLayout):
            yield from _leaves(shape, lo + fld.offset, (*path, name))
        else:
            yield (*path, name), lo + fld.offset, fld.width


def _axis(core, ports, name, mode, layout, width):
    """The ``axis`` interface of the stream whose core ports start with ``core``."""
    inward = mode == "slave"
    pdir = "input" if inward else "output"
    iface = Interface(name, "axis", mode)
    leaves = list(_leaves(layout)) if isinstance(layout, data.StructLayout) else []
    fields = {p[-1]: (lo, w) for p, lo, w in leaves}
    user = [(p, lo, w) for p, lo, w in leaves if p[-1] not in ("data", "last", "msg_class")]
    if "data" not in fields:   # no data field: the whole payload is the data
        fields, user = {"data": (0, width)}, []
    lo, w = fields["data"]
    padded = -(-w // 8) * 8
    iface.signals.append(BusPort(f"{name}_tdata", "TDATA", pdir, padded, f"{core}__payload", lo, w))
    iface.parameters["TDATA_NUM_BYTES"] = padded // 8
    if "last" in fields:
        iface.signals.append(BusPort(f"{name}_tlast", "TLAST", pdir, 1, f"{core}__payload",
                                    fields["last"][0]))
    if "msg_class" in fields:
        lo, w = fields["msg_class"]
        iface.signals.append(BusPort(f"{name}_tid", "TID", pdir, w, f"{core}__payload", lo))
    if user:   # one TUSER: the other fields, which must be neighbours in the payload
        user.sort(key=lambda f: f[1])
        lo, end = user[0][1], user[-1][1] + user[-1][2]
        if sum(w for _, _, w in user) != end - lo:
            raise ValueError(f"stream {core}: fields {', '.join('.'.join(p) for p, _, _ in user)} "
                             f"are not contiguous, so they cannot form one TUSER")
        iface.signals.append(BusPort(f"{name}_tuser", "TUSER", pdir, end - lo,
                                     f"{core}__payload", lo))
    iface.signals.append(BusPort(f"{name}_tvalid", "TVALID", pdir, 1, f"{core}__valid"))
    has_ready = f"{core}__ready" in ports
    if has_ready:
        iface.signals.append(BusPort(f"{name}_tready", "TREADY",
                                    "output" if inward else "input", 1, f"{core}__ready"))
    iface.parameters.update({
        "TID_WIDTH": fields["msg_class"][1] if "msg_class" in fields else 0,
        "TDEST_WIDTH": 0, "TUSER_WIDTH": sum(w for _, _, w in user),
        "HAS_TREADY": int(has_ready), "HAS_TSTRB": 0, "HAS_TKEEP": 0,
        "HAS_TLAST": int("last" in fields)})
    return iface


def _aximm(core, name, mode, sig):
    """The ``aximm`` interface of the AXI4 member whose core ports start with ``core``."""
    manager = mode == "master"
    iface = Interface(name, "aximm", mode)
    for ch, fld, flow in FLAT_FIELDS:
        chan = sig.members[ch].signature
        if fld in ("valid", "ready"):
            lo, width, port = 0, 1, f"{core}__{ch}__{fld}"
        else:
            f = chan.members["payload"].shape[fld]
            lo, width, port = f.offset, f.width, f"{core}__{ch}__payload"
        drives = (flow == wiring.Out) == manager   # FLAT_FIELDS: as seen by the manager
        iface.signals.append(BusPort(f"{name}_{ch}{fld}", f"{ch}{fld}".upper(),
                                    "output" if drives else "input", width, port, lo))
    ax = sig.members["aw"].signature.members["payload"].shape
    w = sig.members["w"].signature.members["payload"].shape
    iface.parameters.update({
        "PROTOCOL": "AXI4", "DATA_WIDTH": w["data"].width, "ADDR_WIDTH": ax["addr"].width,
        "ID_WIDTH": ax["id"].width, "AWUSER_WIDTH": ax["user"].width,
        "ARUSER_WIDTH": ax["user"].width, "WUSER_WIDTH": 0, "RUSER_WIDTH": 0, "BUSER_WIDTH": 0,
        "READ_WRITE_MODE": "READ_WRITE", "HAS_LOCK": 0, "HAS_CACHE": 0, "HAS_PROT": 0,
        "HAS_QOS": 0, "HAS_REGION": 0, "HAS_BURST": 1, "HAS_WSTRB": 1, "HAS_BRESP": 1,
        "HAS_RRESP": 1, "MAX_BURST_LENGTH": 256})
    # AxiMemory takes narrow beats (tb/block/test_axi_memory.py); the bridge's are full.
    if not manager:
        iface.parameters["SUPPORTS_NARROW_BURST"] = 1
    return iface


def interfaces(component):
    """``(interfaces, plain)``: the :class:`Interface` buses and :class:`Plain` ports of the IP
    view of ``component`` (rules in the module docstring), every core port but ``clk``/``rst``
    used exactly once.

    Raises
    ------
    ValueError
        If two interfaces would get the same name (a top with two AXI4 members of one direction).
    """
    ports = _ports(component)
    buses, plain, used = [], [], set()

    def count_axi(sig):
        count = 0
        for _, m in _walk(sig, ()):
            if m.is_signature and not isinstance(m.signature, stream.Signature):
                count += 1 if _is_axi(m.signature) else count_axi(m.signature)
        return count
    single_axi = count_axi(component.signature) == 1

    def walk(sig, path):
        for p, member in _walk(sig, path):
            core = "__".join(p)
            if member.is_port:
                if core in ports:
                    plain.append(Plain("_".join(p), *ports[core], core))
                continue
            s = member.signature
            if _is_axi(s):
                manager = s.members["aw"].flow == wiring.Out
                prefix = "m_axi" if manager else "s_axi"
                name = prefix if single_axi else f"{prefix}_{'_'.join(p)}"
                buses.append(_aximm(core, name, "master" if manager else "slave", s))
            elif isinstance(s, stream.Signature) and p[-1] in PLAIN_STREAMS:
                for part in ("payload", "valid"):
                    if f"{core}__{part}" in ports:
                        n = "_".join(p) + ("" if part == "payload" else "_valid")
                        plain.append(Plain(n, *ports[f"{core}__{part}"], f"{core}__{part}",
                                           PLAIN_STREAMS[p[-1]]))
            elif isinstance(s, stream.Signature):
                inward = s.members["valid"].flow == wiring.In
                name = f"{'s' if inward else 'm'}_axis_{'_'.join(p)}"
                shape = s.members["payload"].shape
                buses.append(_axis(core, ports, name, "slave" if inward else "master", shape,
                                   ports[f"{core}__payload"][1]))
            else:
                walk(s, p)

    walk(component.signature, ())
    names = [b.name for b in buses] + [p.name for p in plain]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"interface names {', '.join(dupes)} are not unique")
    for bus in buses:
        for s in bus.signals:
            used.add(s.core)
    used.update(p.core for p in plain)
    missing = sorted(set(ports) - used)
    assert not missing, f"core ports not mapped: {missing}"
    return buses, plain


def wrapper_name(top):
    """The wrapper module of ``top``: ``<top>_ip``."""
    return f"{top}_ip"


def _attr(name, value):
    return f'  (* {name} = "{value}" *)'


def _decl(direction, width, name, last):
    rng = f"[{width - 1}:0] " if width > 1 else ""
    return f"  {direction:6s} wire {rng}{name}{'' if last else ','}"


def describe(buses, plain, freq_hz):
    """The ``ip`` entry of a top's ports JSON: the wrapper's buses and plain ports."""
    return {
        "clock": {"name": "clk", "freq_hz": freq_hz}, "reset": {"name": "rst",
                                                                "polarity": "ACTIVE_HIGH"},
        "interfaces": [{"name": b.name, "bus": BUS_TYPES[b.kind], "mode": b.mode,
                        "parameters": {**b.parameters, "FREQ_HZ": freq_hz},
                        "ports": [{"name": s.name, "logical": s.logical, "direction": s.direction,
                                   "width": s.width, "core": s.core, "core_lo": s.lo,
                                   "core_bits": s.bits} for s in b.signals]} for b in buses],
        "plain": [{"name": p.name, "direction": p.direction, "width": p.width, "core": p.core,
                   **({"reason": p.reason} if p.reason else {})} for p in plain],
    }


def wrapper_verilog(top, component, description, freq_hz):
    """The Verilog text of module ``<top>_ip``: ``top`` instantiated with every port renamed and
    sliced into the standard AXI names, with Vivado's interface attributes (module docstring)."""
    buses, plain = interfaces(component)
    ports = _ports(component)
    wrapper = wrapper_name(top)
    busif = ":".join(b.name for b in buses)
    associated = f"ASSOCIATED_BUSIF {busif}, " if busif else ""
    clock_param = f"XIL_INTERFACENAME clk, {associated}ASSOCIATED_RESET rst, FREQ_HZ {freq_hz}"
    lines = [f"// {wrapper}: the IP view of `{top}` ({description}).",
             ("// Generated by `scin package` (scripts/ip_wrapper.py); do not edit. Only "
              "renames and"),
             "// slices ports: AXI4 / AXI4-Stream names and Vivado interface attributes. TDATA is",
             "// padded to whole bytes (output padding 0, input padding ignored).",
             f"module {wrapper} ("]
    decls = [[_attr("X_INTERFACE_INFO", f"{CLOCK_TYPE} clk CLK"),
              _attr("X_INTERFACE_PARAMETER", clock_param), ("input", 1, "clk")],
             [_attr("X_INTERFACE_INFO", f"{RESET_TYPE} rst RST"),
              _attr("X_INTERFACE_PARAMETER", "XIL_INTERFACENAME rst, POLARITY ACTIVE_HIGH"),
              ("input", 1, "rst")]]
    for bus in buses:
        for k, s in enumerate(bus.signals):
            entry = [_attr("X_INTERFACE_INFO", f"{BUS_TYPES[bus.kind]} {bus.name} {s.logical}")]
            if k == 0:
                params = {**bus.parameters, "FREQ_HZ": freq_hz}
                params = ", ".join(f"{n} {v}" for n, v in params.items())
                entry.append(_attr("X_INTERFACE_PARAMETER",
                                   f"XIL_INTERFACENAME {bus.name}, {params}"))
            decls.append(entry + [(s.direction, s.width, s.name)])
    for p in plain:
        entry = [f"  // {p.name}: plain port ({p.reason})"] if p.reason else []
        decls.append(entry + [(p.direction, p.width, p.name)])
    for k, entry in enumerate(decls):
        lines += entry[:-1] + [_decl(*entry[-1], last=k == len(decls) - 1)]
    lines.append(");")
    # One wire per core port; the wrapper's ports are assigned from or to its slices.
    body, conns = [], [".clk(clk)", ".rst(rst)"]
    pieces = {}
    for bus in buses:
        for s in bus.signals:
            pieces.setdefault(s.core, []).append(s)
    for core, (direction, width) in ports.items():
        wire = f"core_{core}"
        body.append(f"  wire [{width - 1}:0] {wire};" if width > 1 else f"  wire {wire};")
        conns.append(f".{core}({wire})")
        for s in pieces.get(core, ()):
            sl = f"{wire}[{s.lo + s.bits - 1}:{s.lo}]" if width > 1 else wire
            if direction == "input":
                src = f"{s.name}[{s.bits - 1}:0]" if s.width > s.bits else s.name
                body.append(f"  assign {sl} = {src};")
            else:
                pad = f"{{{s.width - s.bits}'d0, {sl}}}" if s.width > s.bits else sl
                body.append(f"  assign {s.name} = {pad};")
    for p in plain:
        if p.direction == "input":
            body.append(f"  assign core_{p.core} = {p.name};")
        else:
            body.append(f"  assign {p.name} = core_{p.core};")
    lines += body
    lines.append(f"  {top} core (")
    lines += [f"    {c}{',' if k < len(conns) - 1 else ''}" for k, c in enumerate(conns)]
    lines += ["  );", "endmodule", ""]
    return "\n".join(lines)
