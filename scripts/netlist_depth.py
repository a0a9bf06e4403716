"""Logic depth of a synthesized UltraScale+ netlist: levels, hops and an estimated delay per path.

The input is Yosys's ``write_json`` of a flattened ``synth_xilinx -family xcup`` netlist. Every
register-to-register path is measured over the per-bit net graph in one linear pass (a memoised
walk in topological order, not a search per path) in three ways, each maximised on its own:

* **levels**, as Vivado's ``LOGIC_LEVELS``: each LUT, MUXF7/8/9 and CARRY cell on the path counts
  one; Yosys maps xcup carries as CARRY4, and two cascaded CARRY4 (chain positions 2k and 2k+1)
  make one CARRY8, so the second half of a pair entered over CI counts nothing.
* **hops**, as AMD's ``report_failfast`` budgets them (UG949, "Timing Closure": one LUT-and-net
  hop is 0.300 ns at UltraScale+ -2): one per cell reached over general routing; the links inside
  a slice are free (LUT -> MUXF7/F8 data inputs, MUXF7 -> MUXF8 -> MUXF9, CARRY CO -> CI, LUT
  -> CARRY S/DI, DSP cascades); +1 when the path starts at a block RAM, DSP or LUTRAM output; +1
  when it ends anywhere but a flip-flop D pin.
* **ns**, an estimate: :data:`DELAY` (per hop, clock-to-out of each kind of start, the DSP48E2's
  internal delays). It is an estimate of a placed design from depth alone, not a timing analysis.

Start points: flip-flop Q pins, block RAM outputs, outputs of a DSP48E2 with a register, LUTRAM
and SRL outputs (their stored data), and the top's input ports (assumed registered outside).
End points: flip-flop D, CE and reset pins, block RAM, registered DSP and LUTRAM inputs, and the
top's output ports. A DSP48E2 with AREG = BREG = MREG = PREG = 0 is combinational and traversed,
unless its outputs drive flip-flop D pins only: Yosys packs no register into an xcup DSP48E2, and
that is the form Vivado packs into the P register, so those flip-flops are taken as its P register
(``DepthReport.dsps`` counts each kind). Likewise a block RAM port without DOA_REG/DOB_REG whose
outputs drive flip-flop D pins only has those flip-flops taken as its output register
(``DepthReport.brams`` counts output bits by kind). A LUTRAM's or SRL's read address is traversed
(an asynchronous read) as one level.
"""

import re
from collections import Counter
from dataclasses import dataclass, field


__all__ = ["DELAY", "Endpoint", "DepthReport", "analyze_netlist"]

#: The UltraScale+ -2 delay model (ns). Estimates, each from the document named:
#: ``hop``: report_failfast's budget per LUT-and-net hop at -2 (UG949, "Baselining and Timing
#: Closure", report_failfast). ``ff_cko``, ``ff_setup``: CLB flip-flop clock-to-out and setup,
#: rounded (DS923, CLB switching characteristics). ``bram_cko``/``bram_cko_reg``: block RAM
#: clock-to-out without / with DOA_REG/DOB_REG (UG949 block RAM guidance, DS923 block RAM
#: switching characteristics). DSP48E2 (DS923, DSP48E2 switching characteristics, rounded):
#: ``dsp_comb`` the A/B -> P multiply-add with no register (the period of a DSP registered at its
#: inputs and P only, no M register), ``dsp_to_m`` A/B -> M register, ``dsp_cko_p`` P register
#: clock-to-out, ``dsp_cko_m`` M register -> P out without PREG, ``dsp_setup`` A/B input setup.
DELAY = {
    "hop": 0.300,
    "ff_cko": 0.08,
    "ff_setup": 0.05,
    "bram_cko": 1.5,
    "bram_cko_reg": 0.4,
    "dsp_comb": 2.4,
    "dsp_to_m": 1.6,
    "dsp_cko_p": 0.4,
    "dsp_cko_m": 1.2,
    "dsp_setup": 0.3,
}

FF_TYPES = {"FDRE", "FDSE", "FDCE", "FDPE", "LDCE", "LDPE"}
LUT_TYPES = {"LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6", "LUT6_2", "INV"}
MUXF_TYPES = {"MUXF7", "MUXF8", "MUXF9"}
CARRY_TYPES = {"CARRY4", "CARRY8"}
BRAM_TYPES = {"RAMB18E2", "RAMB36E2"}
LUTRAM_TYPES = {"RAM32X1S", "RAM32X1D", "RAM64X1S", "RAM64X1D", "RAM128X1S", "RAM128X1D",
                "RAM256X1S", "RAM256X1D", "RAM512X1S", "RAM32M", "RAM64M", "RAM32M16", "RAM64M8",
                "SRL16E", "SRLC16E", "SRLC32E"}
CLOCK_PINS = {"C", "CLK", "WCLK", "CLKARDCLK", "CLKBWRCLK", "G"}
#: A flip-flop's control pins (clock enable, set/reset, gate enable).
FF_CONTROL = {"CE", "R", "S", "CLR", "PRE", "GE"}
_LUTRAM_ADDRESS = re.compile(r"^(A\d*|ADDR[A-H]|DPRA\d*)$")
_DSP_CASCADE = {"ACIN", "BCIN", "PCIN", "CARRYCASCIN", "MULTSIGNIN"}


@dataclass
class Endpoint:
    """The worst path into one end point (one bit of one pin).

    ``levels``, ``hops`` and ``ns`` are each the maximum over the paths into the pin;
    ``start`` is where the path of most hops starts (``start_levels``: of most levels).
    ``kind`` is ``ff_d``, ``ff_ctrl``, ``bram``, ``dsp``, ``lutram`` or ``output``; ``through``
    names the nets the path of most hops passes, in order (the first and last few).
    ``bram_levels`` is the most levels of a path from a block RAM output without its output
    register (``bram_start``), None when no such path reaches the pin."""
    name: str
    kind: str
    levels: int
    hops: int
    ns: float
    start: str
    start_levels: str
    src: str = ""
    start_src: str = ""
    through: list = field(default_factory=list)
    bram_levels: int = None
    bram_start: str = ""


@dataclass
class DepthReport:
    """What :func:`analyze_netlist` measured: every end point's worst path (``endpoints``, a list
    of :class:`Endpoint`), fanout (``fanout_control``, ``fanout_all``: ``(net, control pins,
    pins)``), the cell histogram, the loop arcs cut, the DSP48E2s by register configuration
    (``dsps``: ``comb``, ``AB``, ``M``, ``P``, ``packable_p``) and the block RAM output bits by
    register (``brams``: ``registered``, ``packable_reg``, ``unregistered``)."""
    top: str
    endpoints: list
    fanout_control: list
    fanout_all: list
    cells: dict
    loops: int
    dsps: dict = field(default_factory=dict)
    brams: dict = field(default_factory=dict)

    def worst(self, n, key="hops"):
        """The ``n`` end points of most ``key`` (``hops``, ``levels`` or ``ns``), worst first."""
        others = [k for k in ("hops", "levels", "ns") if k != key]
        return sorted(self.endpoints, key=lambda e: tuple(-getattr(e, k) for k in [key] + others)
                      )[:n]

    def bram_unregistered(self, levels=2):
        """``{block RAM output: (most levels, an end point)}`` of the block RAM outputs without
        their output register that reach an end point over more than ``levels`` levels."""
        found = {}
        for e in self.endpoints:
            if e.bram_levels is not None and e.bram_levels > levels:
                if e.bram_levels > found.get(e.bram_start, (-1, ""))[0]:
                    found[e.bram_start] = (e.bram_levels, e.name)
        return found

    def histogram(self, key):
        """``{value: end points}`` of ``key`` (``levels`` or ``hops``) over every end point."""
        return dict(sorted(Counter(getattr(e, key) for e in self.endpoints).items()))


# -- the netlist as a per-bit graph ---------------------------------------------------------------

def _param(cell, name, default=0):
    value = cell.get("parameters", {}).get(name, default)
    if isinstance(value, str):
        value = value.strip()
        return int(value, 2) if value and set(value) <= {"0", "1"} else value
    return value


def _bram_side(port):
    """``A`` or ``B``: the block RAM port an output pin belongs to."""
    return "A" if ("DOUTA" in port or "DOUTPA" in port or "CASDOUTA" in port) else "B"


def _dsp_config(cell):
    regs = {r: _param(cell, r) for r in ("AREG", "BREG", "MREG", "PREG")}
    if not any(regs.values()):
        return "comb"
    return "P" if regs["PREG"] else "M" if regs["MREG"] else "AB"


class _Graph:
    """Per-bit arcs of the combinational cells, start and end pins of the sequential ones."""

    def __init__(self, module):
        self.starts = {}      # bit -> (kind, cell name, hops, ns)
        self.ends = []        # (bit, kind, cell name, pin label, extra hops, extra ns)
        self.arcs = {}        # out bit -> [(in bit, levels, hop cost, ns, cell name)]
        self.driver = {}      # bit -> (cell type, port, cell name)
        self.cells = module.get("cells", {})
        self.types = Counter(c["type"] for c in self.cells.values())
        self.sinks = Counter()
        self.control_sinks = Counter()
        self.carry_pos = {}
        for name, port in module.get("ports", {}).items():
            for i, bit in enumerate(port["bits"]):
                if isinstance(bit, str):
                    continue
                if port["direction"] == "input":
                    self.starts[bit] = ("input", name, 0, 0.0)
                    self.driver[bit] = ("$input", name, "")
                else:
                    label = name if len(port["bits"]) == 1 else f"{name}[{i}]"
                    self.ends.append((bit, "output", name, label, 1, 0.0))
        for name, cell in self.cells.items():
            for port, bits in cell["connections"].items():
                if cell.get("port_directions", {}).get(port) == "output":
                    for bit in bits:
                        if not isinstance(bit, str):
                            self.driver[bit] = (cell["type"], port, name)
        self._chain_positions()
        self.packed = self._packable()
        self.dsps = Counter()
        self.brams = Counter()      # block RAM output bits by register
        for name, cell in self.cells.items():
            self._add_cell(name, cell)

    def _packable(self):
        """``{output bit: cell name}`` of the outputs that drive flip-flop D pins only, of the
        combinational DSP48E2s (all of its outputs) and of the block RAM ports without an output
        register (all of the port's outputs): the form Vivado packs into the P register or
        DOA_REG/DOB_REG. Yosys packs neither register for xcup, so these flip-flops are taken as
        the primitive's own register."""
        loads = {}
        for cell in self.cells.values():
            for port, bits in cell["connections"].items():
                if cell.get("port_directions", {}).get(port) == "input":
                    for bit in bits:
                        if not isinstance(bit, str):
                            loads.setdefault(bit, []).append((cell["type"], port))
        packed = {}
        for name, cell in self.cells.items():
            for outs in self._register_groups(cell):
                outs = [b for b in outs if b in loads]
                if outs and all(t in FF_TYPES and p == "D" for b in outs for t, p in loads[b]):
                    packed.update((b, name) for b in outs)
        return packed

    @staticmethod
    def _register_groups(cell):
        """The output bits of ``cell`` that one missing output register would hold, by group."""
        outputs = {p: [b for b in bits if not isinstance(b, str)]
                   for p, bits in cell["connections"].items()
                   if cell.get("port_directions", {}).get(p) == "output"}
        if cell["type"] == "DSP48E2" and _dsp_config(cell) == "comb":
            return [[b for bits in outputs.values() for b in bits]]
        if cell["type"] in BRAM_TYPES:
            return [[b for p, bits in outputs.items() if _bram_side(p) == side for b in bits]
                    for side in "AB" if not _param(cell, f"DO{side}_REG")]
        return []

    def _chain_positions(self):
        """Position of every CARRY4 in its chain (0 at the head), for CARRY8 pairing."""
        by_co3 = {}
        for name, cell in self.cells.items():
            if cell["type"] == "CARRY4":
                co = cell["connections"].get("CO", [])
                if len(co) == 4 and not isinstance(co[3], str):
                    by_co3[co[3]] = name
        for name, cell in self.cells.items():
            if cell["type"] != "CARRY4" or name in self.carry_pos:
                continue
            chain, current = [], name
            while current is not None and current not in self.carry_pos:
                chain.append(current)
                ci = self.cells[current]["connections"].get("CI", ["0"])[0]
                current = by_co3.get(ci)
            base = self.carry_pos[current] + 1 if current is not None else 0
            for offset, cell_name in enumerate(reversed(chain)):
                self.carry_pos[cell_name] = base + offset

    def _pins(self, cell, direction):
        dirs = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            if dirs.get(port, "input") == direction and port not in CLOCK_PINS:
                for i, bit in enumerate(bits):
                    if not isinstance(bit, str):
                        yield port, i, bit

    def _sink(self, bit, control=False):
        self.sinks[bit] += 1
        if control:
            self.control_sinks[bit] += 1

    def _add_cell(self, name, cell):
        kind = cell["type"]
        inputs = list(self._pins(cell, "input"))
        outputs = list(self._pins(cell, "output"))
        for port, _, bit in inputs:
            self._sink(bit, control=kind in FF_TYPES and port in FF_CONTROL)
        if kind in FF_TYPES:
            d = cell["connections"].get("D", ["x"])[0]
            host = self.packed.get(d)
            for port, i, bit in outputs:
                self.starts[bit] = self._packed_start(host) if host else \
                    ("ff", name, 0, DELAY["ff_cko"])
            for port, i, bit in inputs:
                ctrl = port in FF_CONTROL
                if host and not ctrl:
                    continue    # the D pin is inside the DSP or block RAM: it is its register
                self.ends.append((bit, "ff_ctrl" if ctrl else "ff_d", name, port,
                                  1 if ctrl else 0, DELAY["ff_setup"]))
        elif kind in BRAM_TYPES:
            self._add_bram(name, cell, inputs, outputs)
        elif kind == "DSP48E2":
            self._add_dsp(name, cell, inputs, outputs)
        elif kind in LUTRAM_TYPES:
            self._add_lutram(name, inputs, outputs)
        elif kind in CARRY_TYPES:
            self._add_carry(name, cell, kind, inputs, outputs)
        else:
            level = 1 if kind in LUT_TYPES or kind in MUXF_TYPES else 0
            for _, _, out in outputs:
                self.arcs[out] = [(bit, level, self._hop(bit, kind, port), 0.0, name)
                                  for port, _, bit in inputs]

    def _packed_start(self, host):
        """The start of a flip-flop taken as ``host``'s P register or block RAM output register."""
        if self.cells[host]["type"] == "DSP48E2":
            return ("dsp", host, 1, DELAY["dsp_cko_p"])
        return ("bram", host, 1, DELAY["bram_cko_reg"])

    def _hop(self, bit, kind, port):
        """1 when the net into ``port`` of a ``kind`` cell runs over general routing, else 0."""
        source = self.driver.get(bit, ("",))[0]
        if kind in MUXF_TYPES and port in ("I0", "I1"):
            return 0 if source in LUT_TYPES or source in MUXF_TYPES else 1
        if kind in CARRY_TYPES:
            if port == "CI":
                return 0 if source in CARRY_TYPES else 1
            if port in ("S", "DI"):
                return 0 if source in LUT_TYPES else 1
        if kind == "DSP48E2" and port in _DSP_CASCADE:
            return 0
        return 1

    def _add_bram(self, name, cell, inputs, outputs):
        for port, _, bit in outputs:
            registered = _param(cell, f"DO{_bram_side(port)}_REG")
            self.brams["registered" if registered else "packable_reg" if bit in self.packed
                       else "unregistered"] += 1
            self.starts[bit] = ("bram", name, 1,
                                DELAY["bram_cko_reg" if registered else "bram_cko"])
        for port, i, bit in inputs:
            self.ends.append((bit, "bram", name, f"{port}[{i}]", 1, DELAY["ff_setup"]))

    def _add_dsp(self, name, cell, inputs, outputs):
        config = _dsp_config(cell)
        if config == "comb" and any(b in self.packed for _, _, b in outputs):
            config = "P"
            self.dsps["packable_p"] += 1
        else:
            self.dsps[config] += 1
        data = [(p, i, b) for p, i, b in inputs if not (p.startswith("CE") or p.startswith("RST"))]
        for port, i, bit in inputs:
            if port.startswith("CE") or port.startswith("RST"):
                self.ends.append((bit, "dsp", name, f"{port}[{i}]", 1, DELAY["ff_setup"]))
        if config == "comb":
            for _, _, out in outputs:
                self.arcs[out] = [(bit, 0, self._hop(bit, "DSP48E2", port), DELAY["dsp_comb"], name)
                                  for port, _, bit in data]
            return
        cko = {"P": DELAY["dsp_cko_p"], "M": DELAY["dsp_cko_m"], "AB": DELAY["dsp_comb"]}[config]
        for _, _, out in outputs:
            self.starts[out] = ("dsp", name, 1, cko)
        # Without A/B registers the path into the DSP goes on to its M or P register.
        inside = {"AB": DELAY["dsp_setup"], "M": DELAY["dsp_to_m"], "P": DELAY["dsp_comb"]}[config]
        for port, i, bit in data:
            extra = 0 if port in _DSP_CASCADE else 1
            self.ends.append((bit, "dsp", name, f"{port}[{i}]", extra, inside))

    def _add_lutram(self, name, inputs, outputs):
        address = [(p, b) for p, _, b in inputs if _LUTRAM_ADDRESS.match(p)]
        for _, _, out in outputs:
            self.starts[out] = ("lutram", name, 1, DELAY["ff_cko"])
            if address:
                self.arcs[out] = [(bit, 1, 1, 0.0, name) for _, bit in address]
        for port, i, bit in inputs:
            self.ends.append((bit, "lutram", name, f"{port}[{i}]", 1, DELAY["ff_setup"]))

    def _add_carry(self, name, cell, kind, inputs, outputs):
        pos = self.carry_pos.get(name, 0)
        width = 4 if kind == "CARRY4" else 8
        for port, i, out in outputs:
            arcs = []
            for in_port, j, bit in inputs:
                if in_port in ("S", "DI") and j > i:
                    continue
                split = _param(cell, "CARRY_TYPE") == "DUAL_CY4"
                if in_port == "CI_TOP" and (not split or i < width // 2):
                    continue
                # The upper CARRY4 of a CARRY8 pair, entered from the lower over CI, adds no level.
                level = 0 if (kind == "CARRY4" and in_port == "CI" and pos % 2 == 1
                              and self.driver.get(bit, ("",))[0] == "CARRY4") else 1
                arcs.append((bit, level, self._hop(bit, kind, in_port), 0.0, name))
            self.arcs[out] = arcs


# -- the walk -------------------------------------------------------------------------------------

def _topological(graph):
    """The driven bits in an order where every arc's input comes before its output; arcs closing
    a combinational loop are dropped (counted)."""
    order, state, loops = [], {}, 0
    for root in graph.arcs:
        if root in state:
            continue
        stack = [(root, 0)]
        state[root] = 1
        while stack:
            bit, k = stack.pop()
            arcs = graph.arcs.get(bit, ())
            if k < len(arcs):
                stack.append((bit, k + 1))
                child = arcs[k][0]
                if child in graph.arcs:
                    if state.get(child) == 1:
                        loops += 1
                    elif child not in state:
                        state[child] = 1
                        stack.append((child, 0))
            else:
                state[bit] = 2
                order.append(bit)
    return order, loops


def _arrivals(graph, order):
    """Per bit, for each metric (levels, hops, ns, levels from a block RAM output without its
    output register): ``(value, start bit, predecessor bit)``, or None where no such path
    reaches the bit (the last metric only)."""
    arrival = {}
    for bit, (kind, _, hops, ns) in graph.starts.items():
        raw = (0, bit, None) if kind == "bram" and ns == DELAY["bram_cko"] else None
        arrival[bit] = ((0, bit, None), (hops, bit, None), (ns, bit, None), raw)
    for bit in order:
        if bit in graph.starts and not graph.arcs.get(bit):
            continue
        best = list(arrival[bit]) if bit in arrival else [None] * 4
        for src, level, hop, ns, _ in graph.arcs[bit]:
            got = arrival.get(src)
            if got is None:
                continue
            steps = (level, hop, ns + hop * DELAY["hop"], level)
            for m in range(4):
                if got[m] is None:
                    continue
                value = got[m][0] + steps[m]
                if best[m] is None or value > best[m][0]:
                    best[m] = (value, got[m][1], src)
        if best[0] is not None:
            arrival[bit] = tuple(best)
    return arrival


# -- names, source lines and the report -----------------------------------------------------------

def _short_src(src):
    """The ``hdl/FILE.py:LINE`` parts of a Yosys ``src`` attribute (``a|b``, absolute paths)."""
    return " ".join(dict.fromkeys(re.findall(r"(hdl/[\w/]+\.py:\d+)", str(src))))


def _names(module):
    """``bit -> (name, src)``: each bit's most readable net name (a named net before a hidden
    one, a given name before an unnamed signal's, an internal net before a port, then the
    shortest) with the ``hdl/`` lines of its
    declaration."""
    best = {}
    ports = set(module.get("ports", {}))
    for name, net in module.get("netnames", {}).items():
        bits = net["bits"]
        # A register's own name before the port it drives.
        auto = name.lstrip("\\").startswith("$")     # Amaranth's unnamed signals
        rank = (net.get("hide_name", 0), auto, name in ports, len(name))
        for i, bit in enumerate(bits):
            if isinstance(bit, str):
                continue
            if bit not in best or rank < best[bit][0]:
                label = name if len(bits) == 1 else f"{name}[{i}]"
                best[bit] = (rank, label, _short_src(net.get("attributes", {}).get("src", "")))
    return {bit: (label, src) for bit, (_, label, src) in best.items()}


def _label(graph, names, bit):
    """A start or a net: its net name, or for a hidden net its driving cell's type and port."""
    if bit in names and not names[bit][0].startswith("$"):
        return names[bit][0]
    kind, cell, _, _ = graph.starts.get(bit, ("", "", 0, 0))
    if cell:
        return f"{graph.cells[cell]['type'] if cell in graph.cells else 'input'}:{cell}"
    return names.get(bit, (str(bit), ""))[0]


def _net_name(graph, names, bit):
    """A net's name; a hidden net driven by a LUT is named by the named nets the LUT reads
    (``LUT2(rst, flush)``), which is what a reader can find in the HDL."""
    name = names.get(bit, (str(bit), ""))[0]
    kind, _, cell = graph.driver.get(bit, ("", "", ""))
    if not name.lstrip("\\").startswith("$") or kind not in LUT_TYPES:
        return name
    ins = [names.get(b, ("?", ""))[0] for b in graph.cells[cell]["connections"].get("I0", [])
           + [x for p in ("I1", "I2", "I3", "I4", "I5")
              for x in graph.cells[cell]["connections"].get(p, [])] if not isinstance(b, str)]
    # An input that is itself an unnamed net is shown as "-".
    ins = ["-" if n.lstrip("\\").startswith("$") else n for n in ins]
    return f"{kind}({', '.join(ins)})"


def _through(arrival, names, bit):
    """The named nets on the path of most hops into ``bit``, from its start: first and last 4."""
    path = []
    while bit is not None:
        if bit in names and not names[bit][0].startswith("$"):
            path.append(names[bit][0])
        bit = arrival[bit][1][2]
    path.reverse()
    path = list(dict.fromkeys(path))
    return path if len(path) <= 8 else path[:4] + ["..."] + path[-4:]


def _end_name(graph, names, bit, kind, cell, pin):
    if kind == "output":
        return pin
    q = graph.cells[cell]["connections"].get("Q")
    if kind.startswith("ff") and q and not isinstance(q[0], str):
        return f"{_label(graph, names, q[0])} ({pin})"
    return f"{graph.cells[cell]['type']}:{cell} ({pin})"


def analyze_netlist(netlist, top, fanout_threshold=2000, fanout_list=10, trace=20):
    """Measure every end point of module ``top`` of the Yosys JSON ``netlist`` (a dict).

    Returns a :class:`DepthReport`: one :class:`Endpoint` per end-point bit reached by at least
    one start, the nets driving more than ``fanout_threshold`` flip-flop control pins
    (``fanout_control``: ``[(name, control pins, all pins)]``), the ``fanout_list`` nets of most
    sink pins (``fanout_all``), the cell histogram and the number of combinational loop arcs cut.
    The ``trace`` worst end points by each metric get their path's named nets (``through``).

    Raises
    ------
    ValueError
        ``top`` is not a module of ``netlist``.
    """
    modules = netlist.get("modules", {})
    if top not in modules:
        raise ValueError(f"top must be a module of the netlist ({', '.join(modules)}), not {top!r}")
    module = modules[top]
    graph = _Graph(module)
    order, loops = _topological(graph)
    arrival = _arrivals(graph, order)
    names = _names(module)
    endpoints = []
    for bit, kind, cell, pin, extra_hops, extra_ns in graph.ends:
        got = arrival.get(bit)
        if got is not None:
            endpoints.append(_endpoint(graph, names, got, bit, kind, cell, pin, extra_hops,
                                       extra_ns))
    worst = {id(e) for key in ("hops", "levels", "ns") for e in
             sorted(endpoints, key=lambda e: -getattr(e, key))[:trace]}
    for e in endpoints:
        if id(e) in worst:
            e.through = _through(arrival, names, e.through)
        else:
            e.through = []
    control = [(_net_name(graph, names, b), n, graph.sinks[b])
               for b, n in graph.control_sinks.items() if n > fanout_threshold]
    widest = [(_net_name(graph, names, b), graph.control_sinks[b], n)
              for b, n in graph.sinks.most_common(fanout_list)]
    return DepthReport(top=top, endpoints=endpoints,
                       fanout_control=sorted(control, key=lambda c: -c[1]), fanout_all=widest,
                       cells=dict(graph.types), loops=loops, dsps=dict(graph.dsps),
                       brams=dict(graph.brams))


def _endpoint(graph, names, got, bit, kind, cell, pin, extra_hops, extra_ns):
    """One :class:`Endpoint`; its ``through`` holds the end bit until the path is traced."""
    (levels, l_start, _), (hops, h_start, _), (ns, _, _), raw = got
    cell_src = (_short_src(graph.cells[cell].get("attributes", {}).get("src", ""))
                if cell in graph.cells else "")
    q = graph.cells.get(cell, {}).get("connections", {}).get("Q")
    reg_src = names.get(q[0], ("", ""))[1] if q and not isinstance(q[0], str) else ""
    return Endpoint(
        name=_end_name(graph, names, bit, kind, cell, pin), kind=kind, levels=levels,
        hops=hops + extra_hops, ns=round(ns + extra_hops * DELAY["hop"] + extra_ns, 3),
        start=_label(graph, names, h_start), start_levels=_label(graph, names, l_start),
        src=reg_src or cell_src, start_src=names.get(h_start, ("", ""))[1], through=bit,
        bram_levels=raw[0] if raw else None,
        bram_start=_label(graph, names, raw[1]) if raw else "")
