"""Open-toolchain build: the switch FPGA's logic, reduced, on a ULX3S-85F (Lattice ECP5 LFE5U-85F).

The prototype configuration (256-bit flits, 4 ports, 32 KiB wave tables, 256-flit queues) is sized
for an XCVU13P. This board holds a reduced one (:func:`reduced_isa`): 64-bit flits, 2 ports by
default (4 with ``ports=4``), 8 KiB of wave table per participant in 2 waves, 4 descriptors, 2 sync
resources, 64-flit queues. It is the same code as the full design, only parameterised smaller. Two
ports, not four, because the open place and route of the 4-port design takes about half an hour on
a 2-core machine (docs/BOARDS.md).

What the build contains (:class:`Ulx3sSwitchTop`): :class:`~scin.hdl.scin_switch.ScinSwitch` (switch
ports, switch core, ISA) inside a :class:`~scin.boards.logic.ScanHarness`: its link ends, its
descriptor port and all its counters go to three pins (scan-in, shift, signature-out) instead of
transceivers, which an ECP5 does not have at this rate. The core clock comes from the board's
25 MHz oscillator through an EHXPLLL; the reset is synchronised to it and distributed on a global
line.
"""

from amaranth.build import Resource, Pins, Attrs
from amaranth.hdl import Elaboratable, Module, Signal, ClockDomain, Instance
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer
from amaranth_boards.ulx3s import ULX3S_85F_Platform

from ..hdl.isa import IsaParams
from ..hdl.packet import FabricParams
from ..hdl.params import check_int
from ..hdl.scin_switch import ScinSwitch
from .logic import ScanHarness


__all__ = ["REDUCED_PORTS", "reduced_isa", "REDUCED_CREDITS", "REDUCED_ISA_DEPTH",
           "DEFAULT_CLOCK_MHZ", "ScinULX3S85FPlatform", "Ulx3sSwitchTop", "ecp5_pll_params"]

#: Switch ports of the default reduced build (see docs/BOARDS.md for why not 4).
REDUCED_PORTS = 2


def reduced_isa(ports=REDUCED_PORTS):
    """The reduced configuration: 64-bit flits (``FabricParams.default_for(64, ports)``: 24-bit
    addresses, 4 KiB packets), 8 KiB of wave table per participant (2 slots) in 2 waves,
    4 descriptors, 2 sync resources."""
    fabric = FabricParams.default_for(flit_width=64, ports=ports)
    return IsaParams(fabric=fabric, capacity=8192, waves=2, descriptors=4, sync_resources=2)


#: Per-class receive-queue depth of each switch port, and ISA queue depth (the prototype: 256).
REDUCED_CREDITS = 64
REDUCED_ISA_DEPTH = 64
#: Core clock the build asks for (PLL output, and nextpnr's constraint). The reduced design reaches
#: about 23-24 MHz on this speed grade-6 part (docs/BOARDS.md), just short of the board's 25 MHz
#: oscillator, so it runs at 20 MHz. The prototype runs at 250 MHz on the XCVU13P.
DEFAULT_CLOCK_MHZ = 20.0


class ScinULX3S85FPlatform(ULX3S_85F_Platform):
    """ULX3S with an LFE5U-85F (speed grade 6), plus the harness pins on the ``gpio`` connector 0:
    ``scan_sin`` = GP0 (B11), ``scan_shift`` = GN0 (C11), ``scan_sout`` = GP1 (A10)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.add_resources([
            Resource("scan_sin", 0, Pins("0+", dir="i", conn=("gpio", 0)),
                     Attrs(IO_TYPE="LVCMOS33")),
            Resource("scan_shift", 0, Pins("0-", dir="i", conn=("gpio", 0)),
                     Attrs(IO_TYPE="LVCMOS33")),
            Resource("scan_sout", 0, Pins("1+", dir="o", conn=("gpio", 0)),
                     Attrs(IO_TYPE="LVCMOS33", DRIVE="4")),
        ])


def ecp5_pll_params(fin_mhz, fout_mhz):
    """EHXPLLL dividers for ``fout_mhz`` from ``fin_mhz``, found the way ``ecppll`` finds them
    (first smallest error over input and feedback dividers, output divider putting the VCO near
    600 MHz; PFD 3.125-400 MHz, VCO 400-800 MHz, output 10-400 MHz).

    Returns ``dict(clki_div, clkfb_div, clkop_div, clkop_cphase, fout_mhz, vco_mhz)``.

    Raises
    ------
    ValueError
        If no divider setting comes within 1% of ``fout_mhz``.
    """
    if (isinstance(fout_mhz, bool)
            or not (isinstance(fout_mhz, (int, float)) and 10 <= fout_mhz <= 400)):
        raise ValueError(f"clock must be between 10 and 400 MHz (the EHXPLLL's output range), "
                         f"not {fout_mhz!r}")
    best = None
    for ref in range(1, 129):
        fpfd = fin_mhz / ref
        if not 3.125 <= fpfd <= 400:
            continue
        for fb in range(1, 81):
            out = fin_mhz * fb / ref
            op = max(1, min(128, round(600 / out)))
            vco = out * op
            if not 400 <= vco <= 800:
                continue
            error = abs(out - fout_mhz)
            if best is None or error < best[0]:
                best = (error, ref, fb, op, out, vco)
    if best is None or best[0] > 0.01 * fout_mhz:
        raise ValueError(f"the ECP5 PLL cannot make {fout_mhz} MHz from {fin_mhz} MHz")
    _, ref, fb, op, out, vco = best
    # CPHASE: about 180 degrees, as ecppll sets it; the core clock's phase to the 25 MHz input
    # does not matter here (nothing crosses between them).
    return dict(clki_div=ref, clkfb_div=fb, clkop_div=op, clkop_cphase=op // 2 - 1,
                fout_mhz=out, vco_mhz=vco)


class Ulx3sSwitchTop(Elaboratable):
    """Top level of the ECP5 build: PLL, reset, :class:`ScanHarness` around
    :class:`~scin.hdl.scin_switch.ScinSwitch`.

    Pins: ``clk25`` (board oscillator), ``scan_sin``, ``scan_shift``, ``scan_sout``; ``led[0]``
    shows PLL lock, ``led[1]`` the signature bit.

    Parameters
    ----------
    clock_mhz : float
        Core clock (the PLL output and the timing constraint nextpnr works to).
    ports : int
        Switch ports (2 to 8) of the reduced configuration (:func:`reduced_isa`).
    credits, isa_depth : int
        As for :class:`~scin.hdl.scin_switch.ScinSwitch`.
    """

    def __init__(self, *, clock_mhz=DEFAULT_CLOCK_MHZ, ports=REDUCED_PORTS, credits=REDUCED_CREDITS,
                 isa_depth=REDUCED_ISA_DEPTH):
        check_int("ports", ports, 2, 8)
        self.pll = ecp5_pll_params(25.0, clock_mhz)
        self.clock_mhz = self.pll["fout_mhz"]
        self.isa_params = reduced_isa(ports)
        self.logic = ScinSwitch(self.isa_params, credits=credits, isa_depth=isa_depth)
        self.harness = ScanHarness(self.logic)

    def elaborate(self, platform):
        m = Module()
        p = self.pll
        m.submodules.clk25 = clk25 = io.Buffer("i", platform.request("clk25", 0, dir="-"))
        m.domains.sync = sync = ClockDomain("sync")
        clk = sync.clk
        locked = Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI="25", a_FREQUENCY_PIN_CLKOP=f"{p['fout_mhz']:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=p["clki_div"], p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p["clkop_div"],
            p_CLKOP_CPHASE=p["clkop_cphase"], p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=p["clkfb_div"],
            i_RST=0, i_STDBY=0, i_CLKI=clk25.i, i_CLKFB=clk,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=clk, o_LOCK=locked)
        # No FREQUENCY constraint of our own: nextpnr derives the core clock's from the 25 MHz
        # input's and the PLL dividers ("Derived frequency constraint ... for net clk").
        # Reset: synchronised to the core clock, then put on a global (DCCA) line. nextpnr-ecp5
        # promotes only clocks by itself, and the reset reaches every flip-flop of the design: on
        # general routing it congested the router for tens of minutes.
        m.domains.reset = reset = ClockDomain("reset")
        m.d.comb += reset.clk.eq(clk)
        m.submodules.reset_sync = ResetSynchronizer(~locked, domain="reset")
        m.submodules.reset_global = Instance("DCCA", i_CLKI=reset.rst, i_CE=1, o_CLKO=sync.rst)

        m.submodules.harness = h = self.harness
        m.submodules.sin = sin = io.Buffer("i", platform.request("scan_sin", 0, dir="-"))
        m.submodules.shift = shift = io.Buffer("i", platform.request("scan_shift", 0, dir="-"))
        m.submodules.sout = sout = io.Buffer("o", platform.request("scan_sout", 0, dir="-"))
        m.d.comb += [h.sin.eq(sin.i), h.shift.eq(shift.i), sout.o.eq(h.sout)]
        led0 = platform.request("led", 0)
        led1 = platform.request("led", 1)
        m.d.comb += [led0.o.eq(locked), led1.o.eq(h.sout)]
        return m

    def describe(self):
        """One line: what this build contains."""
        f = self.isa_params.fabric
        return (f"ScinSwitch: {f.ports}-port switch (queues {self.logic.credits} flits) + ISA "
                f"({f.flit_width}-bit flits, {self.isa_params.capacity // 1024} KiB wave table per "
                f"participant in {self.isa_params.waves} waves, {self.isa_params.descriptors} "
                f"descriptors); {self.harness.chain_length}-bit scan chain in, "
                f"{self.harness.observed_bits} output bits into a 32-bit signature; PLL "
                f"25 -> {self.clock_mhz:g} MHz")
