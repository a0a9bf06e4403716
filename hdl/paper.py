"""The paper's prototype constants and latency model, defined once.

Every default, help text and docstring on the host side that means "the paper's clock", "the
paper latency model" or "the prototype's flit" takes its number from here, so a change is made in
one place. ``hdl/`` holds it because every package may import ``hdl`` (``boards`` only ``hdl``).

Sources:

* The prototype (paper section V): one switch FPGA and four endpoint FPGAs (AMD XCVU13P-2), the
  fabric at 250 MHz, 32-byte (256-bit) flits, one flit per cycle per direction per link, packets
  of one header flit and at most 4 KiB of payload, and an endpoint-to-switch latency of about
  360 ns = 90 cycles (20 transport-layer cycles + 70 link/PHY cycles of Aurora).
* The paper latency model this project measures every headline figure at: that 90-cycle one-way
  latency (the link model's delay plus the transport RTL's own) and an endpoint memory read
  latency of 40 cycles (160 ns, DDR4-class behind an AXI interconnect) (docs/PROTOCOL.md, the paper
  latency model).
"""

from dataclasses import dataclass

__all__ = ["CLOCK_MHZ", "CLOCK_HZ", "CLOCK_PERIOD_NS", "FLIT_BYTES", "FLIT_WIDTH", "PORTS",
           "ONE_WAY_LATENCY", "TRANSPORT_CYCLES", "AURORA_CYCLES", "MEM_LATENCY",
           "LinkModel", "PAPER_LINK", "cycles_to_us"]

#: The prototype's fabric clock in MHz (paper section V): switch, ISA, links and endpoints.
CLOCK_MHZ = 250
#: :data:`CLOCK_MHZ` in Hz (``250e6``).
CLOCK_HZ = CLOCK_MHZ * 1e6
#: One cycle of :data:`CLOCK_HZ` in nanoseconds (4 ns; the XDC constraint's ``4.000``).
CLOCK_PERIOD_NS = 1000 // CLOCK_MHZ

#: Bytes per flit in the prototype (paper section V): 32 B, one flit per cycle per direction.
FLIT_BYTES = 32
#: :data:`FLIT_BYTES` in bits: the default ``flit_width`` of the paper's configuration.
FLIT_WIDTH = 8 * FLIT_BYTES
#: Endpoints (switch ports) of the prototype (paper section V): four endpoint FPGAs.
PORTS = 4

#: Transport-layer share of the prototype's one-way latency, in cycles (paper section V).
TRANSPORT_CYCLES = 20
#: Aurora link/PHY share of the prototype's one-way latency, in cycles (paper section V).
AURORA_CYCLES = 70
#: One-way endpoint-to-switch latency of the paper latency model, in cycles: 360 ns at 250 MHz
#: (paper section V: :data:`TRANSPORT_CYCLES` + :data:`AURORA_CYCLES`).
ONE_WAY_LATENCY = TRANSPORT_CYCLES + AURORA_CYCLES
#: Endpoint memory read latency of the paper latency model, AR handshake to first R beat, in
#: cycles: 160 ns at 250 MHz, a DDR4-class read behind an AXI interconnect.
MEM_LATENCY = 40


@dataclass(frozen=True)
class LinkModel:
    """The link parameters shared by the simulated system and the analytic models.

    Parameters
    ----------
    one_way_latency : int
        Cycles from an endpoint to the switch (or back), default :data:`ONE_WAY_LATENCY`.
    mem_latency : int
        Cycles of an endpoint memory read, default :data:`MEM_LATENCY`.
    flit_bytes : int
        Bytes per flit, default :data:`FLIT_BYTES`.

    Raises
    ------
    ValueError
        If a field is not a positive integer (the message names the field).
    """
    one_way_latency: int = ONE_WAY_LATENCY
    mem_latency:     int = MEM_LATENCY
    flit_bytes:      int = FLIT_BYTES

    def __post_init__(self):
        for name in ("one_way_latency", "mem_latency", "flit_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")

    def describe(self):
        """``"90-cycle one-way hops, 40-cycle memory reads, 32 B flits"`` for this link."""
        return (f"{self.one_way_latency}-cycle one-way hops, {self.mem_latency}-cycle memory "
                f"reads, {self.flit_bytes} B flits")


#: The paper latency model on the prototype's flit.
PAPER_LINK = LinkModel()


def cycles_to_us(cycles, clock_hz=CLOCK_HZ):
    """Microseconds that ``cycles`` take at ``clock_hz`` (default the prototype's 250 MHz)."""
    return cycles / clock_hz * 1e6
