"""SimRam: the simulation-only storage of the endpoint memory model, backed by ``sim_ram.v``."""

from pathlib import Path

from amaranth.hdl import ClockSignal, Instance, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2


__all__ = ["SimRam", "SIM_RAM_VERILOG", "SIM_RAM_MODULE", "READ_PORTS"]

#: The hand-written Verilog module every ``SimRam`` instantiates; simulators and exporters must
#: add this file to the sources of any design whose Verilog names :data:`SIM_RAM_MODULE`.
SIM_RAM_VERILOG = Path(__file__).with_name("sim_ram.v")
SIM_RAM_MODULE = "scin_sim_ram"
READ_PORTS = 3


class SimRam(wiring.Component):
    """``depth`` words of ``width`` bits: one write port with byte enables and three read ports.

    Contract (the same as an ``amaranth.lib.memory.Memory`` with a ``granularity=8`` write port
    and three synchronous, non-transparent read ports): a write with ``w_en`` bit ``b`` set stores
    byte ``b`` of ``w_data`` at ``w_addr`` at the clock edge; a read port with ``en`` high presents
    the word at ``addr`` one cycle later and holds it while ``en`` is low; a read of the address
    being written in the same cycle returns the old word. The memory starts all zero.

    It is **simulation only**: the storage is the behavioural module :data:`SIM_RAM_MODULE` in
    :data:`SIM_RAM_VERILOG`, which also has a file backdoor (``$readmemh`` at time 0 and
    ``$writememh`` at the end of the simulation, selected by plusargs named after ``name``; see the
    Verilog file). Use it where a memory is megabytes large and only ever simulated: a
    ``lib.memory.Memory`` of that size puts an initialiser line per word into the generated
    Verilog.

    Members
    -------
    w_addr, w_data, w_en : In
    read : Out(...).array(3), each ``{addr: In, en: In (init 1), data: Out}``
    """

    def __init__(self, *, width, depth, name):
        if not isinstance(width, int) or width <= 0 or width % 8:
            raise ValueError(f"width must be a positive multiple of 8 bits, not {width!r}")
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two of at least 2, not {depth!r}")
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"name must be an identifier (it names the backdoor plusargs), "
                             f"not {name!r}")
        self._width, self._depth, self._name = width, depth, name
        abits = exact_log2(depth)
        read = wiring.Signature({"addr": In(abits), "en": In(1, init=1), "data": Out(width)})
        super().__init__({
            "w_addr": In(abits),
            "w_data": In(width),
            "w_en":   In(width // 8),
            "read":   Out(read).array(READ_PORTS),
        })

    @property
    def name(self):
        return self._name

    def elaborate(self, platform):
        m = Module()
        ports = {}
        for i, port in enumerate(self.read):
            ports.update({f"i_r{i}_addr": port.addr, f"i_r{i}_en": port.en,
                          f"o_r{i}_data": port.data})
        m.submodules.storage = Instance(
            SIM_RAM_MODULE,
            p_WIDTH=self._width, p_DEPTH=self._depth, p_ABITS=exact_log2(self._depth),
            p_NAME=self._name,
            i_clk=ClockSignal(), i_w_addr=self.w_addr, i_w_data=self.w_data, i_w_en=self.w_en,
            **ports)
        return m
