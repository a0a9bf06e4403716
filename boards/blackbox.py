"""Vendor IP as documented black boxes: a named module, its ports, what each port means.

The XCVU13P boards need two pieces of vendor IP that this project does not (and should not)
model: the transceiver link PHY and the DDR4 memory controller. They are instantiated as
:class:`~amaranth.hdl.Instance` of a module *name*, with every port listed here: direction, width
and contract. Whoever builds the board supplies a module of that name with those ports (in the
prototype: an AMD Aurora 64B66B core with a small framing adapter; an AMD DDR4 MIG core behind an
AXI clock converter) and adds its sources to the Vivado project (see ``docs/BOARDS.md``).

:meth:`BlackBox.instance` checks every connection against the table (name, direction, width), so
a top cannot silently drift from the documented ports; :meth:`BlackBox.verilog_stub` writes the
port list as a Verilog module declaration with each port's contract as a comment.
"""

from dataclasses import dataclass

from amaranth.hdl import Instance, Value, ValueCastable, IOValue
from amaranth.lib import io

from ..hdl.paper import AURORA_CYCLES, CLOCK_HZ, CLOCK_MHZ, FLIT_WIDTH, ONE_WAY_LATENCY


__all__ = ["IpPort", "BlackBox", "link_phy", "ddr4_axi", "switch_ctrl", "endpoint_ctrl"]


@dataclass(frozen=True)
class IpPort:
    """One port of a black box: ``dir`` is ``"i"``, ``"o"`` or ``"io"`` as the IP sees it."""
    name:  str
    dir:   str
    width: int
    doc:   str

    def __post_init__(self):
        if self.dir not in ("i", "o", "io"):
            raise ValueError(f"port {self.name}: dir must be 'i', 'o' or 'io', not {self.dir!r}")
        if not isinstance(self.width, int) or self.width < 1:
            raise ValueError(f"port {self.name}: width must be a positive integer, "
                             f"not {self.width!r}")


@dataclass(frozen=True)
class BlackBox:
    """A vendor IP module known only by its name, parameters and ports.

    Parameters
    ----------
    module : str
        Verilog module name the Instance refers to.
    summary : str
        One line: what the IP does.
    realisation : str
        How the prototype realised it (which vendor core, which configuration).
    ports : tuple of IpPort
    params : dict
        Verilog parameters passed to the Instance, with their values.
    """
    module:      str
    summary:     str
    realisation: str
    ports:       tuple
    params:      tuple = ()

    def port(self, name):
        for p in self.ports:
            if p.name == name:
                return p
        raise KeyError(f"{self.module} has no port {name!r}")

    def instance(self, **connections):
        """An :class:`Instance` of this IP with every port connected.

        Raises
        ------
        ValueError
            If a port is missing or unknown, or a connection's width differs from the table.
        """
        names = {p.name for p in self.ports}
        unknown = sorted(set(connections) - names)
        missing = sorted(names - set(connections))
        if unknown or missing:
            raise ValueError(f"{self.module}: " + "; ".join(
                part for part in (f"unknown port(s) {unknown}" if unknown else "",
                                  f"unconnected port(s) {missing}" if missing else "") if part))
        kwargs = {f"p_{k}": v for k, v in self.params}
        for p in self.ports:
            value = connections[p.name]
            if isinstance(value, ValueCastable):
                value = value.as_value()
            if isinstance(value, io.SingleEndedPort):
                # A raw pin request (dir="-"): the IP drives the pin itself.
                if any(value.invert):
                    raise ValueError(f"{self.module}.{p.name}: inverted pins cannot go to a "
                                     "black box")
                value = value.io
            if not isinstance(value, (Value, IOValue)):
                value = Value.cast(value)
            if len(value) != p.width:
                raise ValueError(f"{self.module}.{p.name} is {p.width} bit(s) wide, "
                                 f"connected to {len(value)} bit(s)")
            kwargs[f"{p.dir}_{p.name}"] = value
        return Instance(self.module, **kwargs)

    def verilog_stub(self):
        """The module's port list as a Verilog declaration (``(* black_box *)``, no body), with
        each port's contract as a comment: a reference for whoever supplies the IP."""
        lines = [f"// {self.module}: {self.summary}",
                 *(f"// {line}" for line in _wrap(self.realisation, 96)),
                 "// Black box: supply a module with exactly these ports (see docs/BOARDS.md).",
                 "(* black_box *)",
                 f"module {self.module} #("]
        lines += [f"    parameter {k} = {v}{',' if i + 1 < len(self.params) else ''}"
                  for i, (k, v) in enumerate(self.params)]
        lines.append(") (")
        kinds = {"i": "input ", "o": "output", "io": "inout "}
        for i, p in enumerate(self.ports):
            rng = f"[{p.width - 1}:0] " if p.width > 1 else ""
            sep = "," if i + 1 < len(self.ports) else ""
            lines.append(f"    {kinds[p.dir]} wire {rng}{p.name}{sep}".ljust(52) + f"// {p.doc}")
        lines.append(");")
        lines.append("endmodule")
        return "\n".join(lines) + "\n"

    def markdown_table(self):
        """The ports as a Markdown table (for docs/BOARDS.md)."""
        rows = ["| port | dir | width | contract |", "| --- | --- | --- | --- |"]
        rows += [f"| `{p.name}` | {p.dir} | {p.width} | {p.doc} |" for p in self.ports]
        return "\n".join(rows)


def _wrap(text, width):
    words, lines, line = text.split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    return lines + ([line] if line else [])


def link_phy(flit_width=FLIT_WIDTH, lanes=4):
    """The link PHY of one switch port or endpoint: a full-duplex, ``lanes``-lane serial link that
    carries one SCIN link word per fabric clock cycle in each direction.

    A link word is a flit (``flit_width`` data bits, ``last``, 2-bit message class) with its
    ``valid``, plus a 4-bit credit-return nibble (one bit per message class). The user side is the
    project's credit link end (``scin.hdl.transport.signature.link_end_signature``) unchanged: it
    is valid-only, so the PHY must take a word every cycle and can never push back; credits are
    counted end to end by the two transport ports, not by the PHY.
    """
    w = flit_width
    word = w + 1 + 2 + 1 + 4   # data, last, class, valid, credits
    lane_gbps = word * CLOCK_HZ * 66 / 64 / lanes / 1e9
    ports = (
        IpPort("clk", "i", 1,
               f"fabric clock ({CLOCK_MHZ} MHz): every user-side port is synchronous to it"),
        IpPort("rst", "i", 1, "synchronous reset, active high (fabric clock domain)"),
        IpPort("gt_refclk_p", "i", 1,
               "transceiver reference clock, P (board oscillator on the GT quad's MGTREFCLK pins)"),
        IpPort("gt_refclk_n", "i", 1, "transceiver reference clock, N"),
        IpPort("gt_txp", "o", lanes,
               f"serial transmit lanes, P (one per GT channel, {lanes} lanes)"),
        IpPort("gt_txn", "o", lanes, "serial transmit lanes, N"),
        IpPort("gt_rxp", "i", lanes, "serial receive lanes, P"),
        IpPort("gt_rxn", "i", lanes, "serial receive lanes, N"),
        IpPort("s_flit_valid", "i", 1,
               "a flit to send this cycle (no ready: the PHY takes every flit)"),
        IpPort("s_flit_data", "i", w, "flit data"),
        IpPort("s_flit_last", "i", 1, "last flit of its packet"),
        IpPort("s_flit_class", "i", 2,
               "message class (virtual channel) of the flit: 0 REQ, 1 WRITE, 2 RDATA, 3 WRESP"),
        IpPort("s_credit", "i", 4,
               "credits to return to the far end, one bit per class, this cycle"),
        IpPort("m_flit_valid", "o", 1,
               "a flit arrived this cycle (no ready: the receiver always takes it)"),
        IpPort("m_flit_data", "o", w, "flit data"),
        IpPort("m_flit_last", "o", 1, "last flit of its packet"),
        IpPort("m_flit_class", "o", 2, "message class of the flit"),
        IpPort("m_credit", "o", 4,
               "credits returned by the far end, one bit per class, this cycle"),
        IpPort("channel_up", "o", 1,
               "all lanes aligned and the channel passes data (fabric clock domain)"),
        IpPort("lane_up", "o", lanes, "per-lane alignment status"),
        IpPort("link_error", "o", 1,
               "sticky: a word was lost or corrupted (hard/soft error, CRC); the link is then "
               "unusable until reset"),
    )
    return BlackBox(
        module="scin_link_phy",
        summary=(f"{lanes}-lane transceiver link carrying one {word}-bit SCIN link word per "
                 "fabric cycle each way"),
        realisation=(f"Prototype: AMD Aurora 64B66B, {lanes} GTY lanes, framing mode streaming, "
                     f"user clock crossed to the {CLOCK_MHZ} MHz fabric clock inside the wrapper. "
                     f"One word per cycle needs at least {lane_gbps:.2f} Gb/s per lane before "
                     "clock-compensation overhead. Its latency counts in the "
                     f"{AURORA_CYCLES}-cycle link share of the {ONE_WAY_LATENCY}-cycle one-way "
                     f"budget (docs/PROTOCOL.md). Words are delivered in order, none dropped or "
                     f"duplicated while channel_up is high."),
        ports=ports,
        params=(("FLIT_WIDTH", w), ("LANES", lanes)),
    )


def ddr4_axi(data_width=FLIT_WIDTH, addr_width=48, id_width=5, dq_width=64, row_width=17):
    """DDR4 memory behind an AXI4 subordinate port in the fabric clock domain."""
    dqs = dq_width // 8
    ports = (
        IpPort("clk", "i", 1, f"fabric clock ({CLOCK_MHZ} MHz): the AXI port is synchronous to it"),
        IpPort("rst", "i", 1, "synchronous reset, active high"),
        IpPort("sys_clk_p", "i", 1, "DDR4 controller reference clock, P (board oscillator)"),
        IpPort("sys_clk_n", "i", 1, "DDR4 controller reference clock, N"),
        IpPort("init_calib_complete", "o", 1,
               "memory calibrated; AXI transactions are accepted only after it rises"),
        IpPort("s_axi_awid", "i", id_width, "AXI4 write address channel: ID"),
        IpPort("s_axi_awaddr", "i", addr_width,
               "byte address; bits above the memory size are ignored"),
        IpPort("s_axi_awlen", "i", 8, "beats - 1"),
        IpPort("s_axi_awsize", "i", 3,
               f"log2 bytes per beat (always {(data_width // 8).bit_length() - 1}: full width)"),
        IpPort("s_axi_awburst", "i", 2, "INCR (1)"),
        IpPort("s_axi_awvalid", "i", 1, "AW valid"),
        IpPort("s_axi_awready", "o", 1, "AW ready"),
        IpPort("s_axi_wdata", "i", data_width, "write data"),
        IpPort("s_axi_wstrb", "i", data_width // 8, "byte strobes"),
        IpPort("s_axi_wlast", "i", 1, "last beat of the burst"),
        IpPort("s_axi_wvalid", "i", 1, "W valid"),
        IpPort("s_axi_wready", "o", 1, "W ready"),
        IpPort("s_axi_bid", "o", id_width, "write response ID"),
        IpPort("s_axi_bresp", "o", 2, "write response (OKAY, SLVERR, DECERR)"),
        IpPort("s_axi_bvalid", "o", 1, "B valid"),
        IpPort("s_axi_bready", "i", 1, "B ready"),
        IpPort("s_axi_arid", "i", id_width, "AXI4 read address channel: ID"),
        IpPort("s_axi_araddr", "i", addr_width, "byte address"),
        IpPort("s_axi_arlen", "i", 8, "beats - 1"),
        IpPort("s_axi_arsize", "i", 3, "log2 bytes per beat"),
        IpPort("s_axi_arburst", "i", 2, "INCR (1)"),
        IpPort("s_axi_arvalid", "i", 1, "AR valid"),
        IpPort("s_axi_arready", "o", 1, "AR ready"),
        IpPort("s_axi_rid", "o", id_width, "read data ID"),
        IpPort("s_axi_rdata", "o", data_width, "read data"),
        IpPort("s_axi_rresp", "o", 2, "read response"),
        IpPort("s_axi_rlast", "o", 1, "last beat of the burst"),
        IpPort("s_axi_rvalid", "o", 1, "R valid"),
        IpPort("s_axi_rready", "i", 1, "R ready"),
        IpPort("c0_ddr4_adr", "o", row_width, "DDR4 address (to the SDRAM)"),
        IpPort("c0_ddr4_ba", "o", 2, "bank address"),
        IpPort("c0_ddr4_bg", "o", 1, "bank group"),
        IpPort("c0_ddr4_act_n", "o", 1, "activate command"),
        IpPort("c0_ddr4_ck_t", "o", 1, "differential clock, true"),
        IpPort("c0_ddr4_ck_c", "o", 1, "differential clock, complement"),
        IpPort("c0_ddr4_cke", "o", 1, "clock enable"),
        IpPort("c0_ddr4_cs_n", "o", 1, "chip select"),
        IpPort("c0_ddr4_odt", "o", 1, "on-die termination"),
        IpPort("c0_ddr4_reset_n", "o", 1, "SDRAM reset"),
        IpPort("c0_ddr4_dm_dbi_n", "io", dqs, "data mask / data bus inversion, one per byte"),
        IpPort("c0_ddr4_dq", "io", dq_width, "data"),
        IpPort("c0_ddr4_dqs_t", "io", dqs, "data strobes, true"),
        IpPort("c0_ddr4_dqs_c", "io", dqs, "data strobes, complement"),
    )
    return BlackBox(
        module="scin_ddr4_axi",
        summary=f"DDR4 SDRAM ({dq_width}-bit) behind a {data_width}-bit AXI4 subordinate port",
        realisation=("Prototype: AMD DDR4 SDRAM (MIG) core with its AXI4 interface, behind an AXI "
                     f"clock converter from the {CLOCK_MHZ} MHz fabric clock to the controller's "
                     "UI clock "
                     "(and an AXI data-width converter if its native width differs). Must keep "
                     "same-ID write order (the SCIN bridge writes on ID 0 so that a completion "
                     "flag becomes visible after its data) and must not interleave the R beats of "
                     "different bursts. AxUSER (the INC flag) is not needed by memory and is not "
                     "a port."),
        ports=ports,
        params=(("DATA_WIDTH", data_width), ("ADDR_WIDTH", addr_width), ("ID_WIDTH", id_width)),
    )


def switch_ctrl(load_width, counters_width, status_width):
    """The switch board's control port: descriptor loading and counter readout."""
    ports = (
        IpPort("clk", "i", 1, "fabric clock: every port is synchronous to it"),
        IpPort("rst", "i", 1, "synchronous reset, active high"),
        IpPort("load_valid", "o", 1,
               "a descriptor load word is offered (amaranth.lib.stream contract)"),
        IpPort("load_ready", "i", 1, "the ISA takes it (only while no collective runs)"),
        IpPort("load_payload", "o", load_width,
               "load word: {desc, last, index}, LSB first as `load_layout` in "
               "hdl/isa/instruction_buffer.py (docs/ISA.md)"),
        IpPort("counters", "i", counters_width,
               "the ISA's counters, 32 bits each, in `counters_layout` order "
               "(hdl/isa/wave_controller.py)"),
        IpPort("status", "i", status_width,
               "per port: bad_opcode, bad_length, bad_dst counters (32 bits each), then the "
               "sticky overflow and credit_error bits of every port"),
    )
    return BlackBox(
        module="scin_switch_ctrl",
        summary="descriptor loading and counter readout of the switch board",
        realisation=("Prototype: instructions preconfigured over JTAG (AMD JTAG-to-AXI or VIO with "
                     "a small stream adapter). Any host interface with these ports will do."),
        ports=ports,
    )


def endpoint_ctrl(command_width, event_width, poll_addr_width, poll_data_width, status_width):
    """The endpoint board's host controller: drives the accelerator stand-in."""
    ports = (
        IpPort("clk", "i", 1, "fabric clock: every port is synchronous to it"),
        IpPort("rst", "i", 1, "synchronous reset, active high"),
        IpPort("cmd_valid", "o", 1,
               "an accelerator command is offered (amaranth.lib.stream contract)"),
        IpPort("cmd_ready", "i", 1, "the accelerator takes it"),
        IpPort("cmd_payload", "o", command_width,
               "command, LSB first as `command_layout` in hdl/endpoint/accelerator.py"),
        IpPort("events_valid", "i", 1, "an accelerator event is offered"),
        IpPort("events_ready", "o", 1, "the controller takes it"),
        IpPort("events_payload", "i", event_width,
               "event, LSB first as `event_layout` in hdl/endpoint/accelerator.py"),
        IpPort("poll_addr", "i", poll_addr_width,
               "flag-poll word index (words of poll_data's width) into the accelerator memory"),
        IpPort("poll_data", "o", poll_data_width,
               "the word at poll_addr of the previous cycle, every cycle, no handshake"),
        IpPort("status", "i", status_width,
               "bridge dropped and rejected counters (16 bits each), transport overflow and "
               "credit_error"),
    )
    return BlackBox(
        module="scin_endpoint_ctrl",
        summary="host controller of the endpoint board: accelerator commands, events, flag polling",
        realisation=("Prototype: a MicroBlaze emulating the GPU's synchronisation. It must answer "
                     "the flag-poll port from the accelerator memory's flag words as the memory "
                     "sees them (e.g. a copy kept from the AXI writes it snoops, or its own memory "
                     "port), never ahead of the data those flags cover."),
        ports=ports,
    )
