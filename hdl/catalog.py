# amaranth: UnusedElaboratable=no
"""Every top-level block that ``scin verilog`` writes out, with a one-line description.

``BLOCKS[name] = (factory, description)``; ``factory(params: FabricParams)`` returns the component
with the project's default parameters for everything but ``params``. A component made here
may only be described (its ports), not elaborated, when its Verilog is cached: the first line
silences Amaranth's warning for the components made in this file, and only those. Convert with
:func:`scin.hdl.toplevel.convert` (plain ``verilog.convert`` rejects the constant ``ready`` of
credit links).
"""

from .paper import AURORA_CYCLES, MEM_LATENCY
from .transport import CreditTx, CreditRx, Link, TransportPort
from .switch import SwitchPort, SwitchCore, Switch


__all__ = ["BLOCKS", "SIMULATION_ONLY", "DEFAULT_CREDITS", "DEFAULT_LINK_LATENCY",
           "DEFAULT_ISA_DEPTH"]

#: Per-class receive-queue depth and initial credits: covers the 145-cycle credit round trip of a
#: 70-cycle link (``credits_for_full_rate(70)``) with margin, so one class alone can fill the link.
DEFAULT_CREDITS = 256
#: One-way link latency of the prototype's Aurora link, in cycles.
DEFAULT_LINK_LATENCY = AURORA_CYCLES
#: Depth of each ISA RX and TX queue, in flits.
DEFAULT_ISA_DEPTH = 256

BLOCKS = {
    "credit_tx": (lambda p: CreditTx(p, DEFAULT_CREDITS),
                  "per-class credit counters and flit-level class mux onto a link"),
    "credit_rx": (lambda p: CreditRx(p, DEFAULT_CREDITS),
                  "per-class receive queues (block RAM) returning credits"),
    "link": (lambda p: Link(p, DEFAULT_LINK_LATENCY),
             f"full-duplex link model, {DEFAULT_LINK_LATENCY}-cycle one-way latency (simulation "
             "model)"),
    "transport_port": (lambda p: TransportPort(p, DEFAULT_CREDITS),
                       "one end of a credit link: CreditTx + CreditRx"),
    "switch_port": (lambda p: SwitchPort(p, DEFAULT_CREDITS, DEFAULT_ISA_DEPTH),
                    "switch port: transport, header checks, INC demux, ISA queues, TX arbiters"),
    "switch_core": (lambda p: SwitchCore(p),
                    "crossbar between switch ports by destination, per message class"),
    "switch": (lambda p: Switch(p, DEFAULT_CREDITS, DEFAULT_ISA_DEPTH),
               "N-port switch: switch ports + core, ISA streams exposed"),
    "datapath": (lambda p: _datapath(p),
                 "ISA arithmetic: dequantize -> N-input tree reduce -> quantize (FP16, BF16, INT8 "
                 "INQ), one flit per cycle; N = ports (2 to 8)"),
    "isa": (lambda p: _isa(p),
            "In-Switch Accelerator: instruction buffer, barrier manager, wave controller, wave "
            "tables (block RAM), datapath, multicast write-back"),
    "scin_switch": (lambda p: _scin_switch(p),
                    "the paper's switch (Fig. 4): switch ports + core + ISA, link ends, descriptor "
                    "port and counters outside (what the switch FPGA holds)"),
    "nvls_engine": (lambda p: _nvls_engine(p),
                    "NVLS baseline (docs/NVLS.md): multicast table, ld_reduce/st/red fan-out, "
                    "reduction table, FP32 arrival-order reducer, ack table"),
    "axi_memory": (lambda p: _endpoint_block(p, "memory"),
                   f"AXI4 slave memory model, 64 KiB, {MEM_LATENCY}-cycle read latency (simulation "
                   "model)"),
    "axi_bridge": (lambda p: _endpoint_block(p, "bridge"),
                   "endpoint protocol translation: packets <-> AXI4 master"),
    "accelerator": (lambda p: _endpoint_block(p, "accelerator"),
                    "accelerator stand-in: arrivals, ordinary reads/writes, flag polling"),
    "endpoint": (lambda p: _endpoint_block(p, "endpoint"),
                 "endpoint: AXI bridge + memory + accelerator (simulation model)"),
    "system": (lambda p: _system(p),
               "switch + ISA + N endpoints + links, paper latency model (simulation model)"),
}

#: Blocks that exist for simulation only (models of links and memories, and tops that contain
#: them): `scin synth` leaves them out unless asked by name.
SIMULATION_ONLY = frozenset({"link", "axi_memory", "endpoint", "system"})


def _isa(params):
    from .isa import IsaParams
    from .isa.isa import Isa
    return Isa(IsaParams(fabric=params))


def _scin_switch(params):
    from .isa import IsaParams
    from .scin_switch import ScinSwitch
    return ScinSwitch(IsaParams(fabric=params), credits=DEFAULT_CREDITS,
                      isa_depth=DEFAULT_ISA_DEPTH)


def _nvls_engine(params):
    from .nvls.engine import NvlsEngine
    from .nvls.params import NvlsParams
    return NvlsEngine(NvlsParams(fabric=params))


def _endpoint_block(params, which):
    from .endpoint import AxiBridge, AxiMemory, Accelerator, Endpoint
    if which == "bridge":
        return AxiBridge(params)
    if which == "memory":
        return AxiMemory(AxiBridge(params).axi_params, size=1 << 16, latency=MEM_LATENCY)
    if which == "accelerator":
        return Accelerator(params, poll_addr_width=11)
    return Endpoint(params)


def _system(params):
    from .isa import IsaParams
    from .system import System, SystemParams
    return System(SystemParams(isa=IsaParams(fabric=params), mem_size=1 << 16))


def _datapath(params):
    from .isa.datapath import Datapath
    return Datapath(n_inputs=params.ports, flit_width=params.flit_width)
