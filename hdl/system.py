"""System: the N-port switch with its ISA, N endpoints and the links between them (simulation top).

This is the paper's FPGA prototype in one design: one switch (switch ports, switch core, ISA) and N
endpoints (AXI4 bridge, memory, accelerator stand-in), each joined to its switch port by a
full-duplex credit link.
"""

from dataclasses import dataclass, field

from amaranth.hdl import Module
from amaranth.lib import stream
from amaranth.lib.wiring import In, Out, connect, flipped

from .endpoint import Endpoint
from .endpoint.accelerator import command_layout, event_layout
from .endpoint.memory import MIN_LATENCY
from .isa import IsaParams
from .isa.instruction_buffer import load_layout
from .isa.wave_controller import counters_layout
from .nvls.params import NvlsParams, mc_load_layout, nvls_counters_layout
from .packet import NUM_CLASSES
from .paper import MEM_LATENCY, ONE_WAY_LATENCY
from .params import check_int, check_power_of_two, check_type
from .scin_switch import ScinSwitch
from .switch.filter import error_layout
from .transport import Link, TransportPort, TRANSPORT_LATENCY
from .transport.signature import ParamsComponent, check_credits


__all__ = ["SystemParams", "System"]


@dataclass(frozen=True)
class SystemParams:
    """Parameters of the simulated system. Defaults are the paper latency model
    (:mod:`scin.hdl.paper`).

    Parameters
    ----------
    isa : IsaParams
        The ISA (and, through ``isa.fabric``, the flit width and port count).
    one_way_latency : int
        Cycles from a flit entering an endpoint's transport queue to it leaving the switch port's
        receive queue: the link model's delay plus the transport RTL's own
        ``TRANSPORT_LATENCY``. Default :data:`~scin.hdl.paper.ONE_WAY_LATENCY`, the prototype's
        90 cycles (360 ns: 20 transport + 70 Aurora).
    mem_latency : int
        Endpoint memory read latency, AR handshake to first R beat. Default
        :data:`~scin.hdl.paper.MEM_LATENCY` (40 cycles = 160 ns).
    mem_size : int
        Bytes of memory per endpoint (a power of two).
    mem_sizes : tuple of int
        Per-endpoint memory sizes, overriding ``mem_size`` (empty: every endpoint has
        ``mem_size``). Buffers are symmetric, so a buffer that fits a larger endpoint runs off the
        end of a smaller one, whose memory then answers ``DECERR``: the fault tests use this.
    reorder : bool
        Endpoint memories answer reads with different IDs out of order.
    credits : int
        Per-class receive-queue depth of every transport port (flits).
    nvls : NvlsParams or None
        The NVLS engine beside the ISA (docs/NVLS.md), the baseline; ``nvls.fabric`` must be
        ``isa.fabric``. ``None`` (the default): the switch without it.
    ring_adder : bool
        Whether the endpoints' accelerators have the adder of NCCL's ring step (REDUCE_SEND with
        ``reduce``, :class:`~scin.hdl.endpoint.kernel.ReduceSend`). Only the ring baseline needs
        it, and it is over a quarter of the simulated system: a system without it elaborates,
        builds and simulates faster.
    """
    isa:             IsaParams = field(default_factory=IsaParams)
    one_way_latency: int = ONE_WAY_LATENCY
    mem_latency:     int = MEM_LATENCY
    mem_size:        int = 1 << 20
    mem_sizes:       tuple = ()
    reorder:         bool = False
    credits:         int = 256
    nvls:            object = None
    ring_adder:      bool = False

    def __post_init__(self):
        check_type("isa", self.isa, IsaParams)
        # The link model needs a delay of at least one cycle beyond the transport RTL's own.
        check_int("one_way_latency", self.one_way_latency, TRANSPORT_LATENCY + 1)
        check_int("mem_latency", self.mem_latency, MIN_LATENCY, 4096)
        check_power_of_two("mem_size", self.mem_size, 4096)
        if (not isinstance(self.mem_sizes, tuple)
                or self.mem_sizes and len(self.mem_sizes) != self.fabric.ports):
            raise ValueError(f"mem_sizes must be empty or a tuple of {self.fabric.ports} sizes, "
                             f"one per endpoint, not {self.mem_sizes!r}")
        for i, size in enumerate(self.mem_sizes):
            check_power_of_two(f"mem_sizes[{i}]", size, 4096)
        check_type("reorder", self.reorder, bool)
        check_type("ring_adder", self.ring_adder, bool)
        check_credits(self.credits)
        if self.nvls is not None:
            check_type("nvls", self.nvls, NvlsParams)
            if self.nvls.fabric != self.fabric:
                raise ValueError(f"nvls.fabric must be isa.fabric ({self.fabric}), "
                                 f"not {self.nvls.fabric}")

    @property
    def fabric(self):
        return self.isa.fabric

    def endpoint_mem_size(self, i):
        """Bytes of memory at endpoint ``i``."""
        return self.mem_sizes[i] if self.mem_sizes else self.mem_size

    @property
    def link_delay(self):
        """The link model's one-way delay: the one-way latency less the transport RTL's."""
        return self.one_way_latency - TRANSPORT_LATENCY


class System(ParamsComponent):
    """Switch (:class:`~scin.hdl.scin_switch.ScinSwitch`: switch ports, core, ISA) + N endpoints +
    N links.

    Hierarchy: ``switch`` (its ``switch`` and ``isa``), ``ep{i}``, ``transport{i}``, ``link{i}``.

    Members (``N = ports``; arrays are indexed by endpoint)
    -------
    load, dump_req, dump_data : arrays of each endpoint's memory backdoor
    cmd, events : arrays of each endpoint's accelerator command and event streams
    cycle : Out(32)
        The cycle counter every event is stamped with (all endpoints count from the same reset).
    isa_load : In(stream.Signature(load_layout))
        Descriptor loading into the ISA's instruction buffer.
    counters : Out(counters_layout)
        The ISA's performance and error counters.
    errors : Out(error_layout).array(N)
        Each switch port's bad-packet counters.
    rejected : Out(16).array(N)
        Each endpoint bridge's refused-request counter.
    mc_load, nvls_counters :
        Only with ``params.nvls``: the multicast table's write port and the NVLS engine's
        counters (:class:`~scin.hdl.scin_switch.ScinSwitch`).
    """

    def __init__(self, params=None):
        params = check_type("params", SystemParams() if params is None else params, SystemParams)
        self._params = params
        f = params.fabric
        n = f.ports
        # The memories are megabytes and only ever simulated: SimRam storage, whose file
        # backdoor is named ep0, ep1, ... (see hdl/endpoint/sim_ram.v).
        self._endpoints = [Endpoint(f, port=i, mem_size=params.endpoint_mem_size(i),
                                    latency=params.mem_latency,
                                    reorder=params.reorder, storage="sim", name=f"ep{i}",
                                    adder=params.ring_adder)
                           for i in range(n)]
        # The backdoor ports are as wide as the largest memory needs.
        ep = max(self._endpoints, key=lambda e: e.memory.size)
        nvls = {} if params.nvls is None else {
            "mc_load":       In(stream.Signature(mc_load_layout(params.nvls))),
            "nvls_counters": Out(nvls_counters_layout())}
        super().__init__({**nvls,
            "load":      In(stream.Signature(ep.load.payload.shape())).array(n),
            "dump_req":  In(stream.Signature(len(ep.dump_req.payload))).array(n),
            "dump_data": Out(stream.Signature(len(ep.dump_data.payload))).array(n),
            "cmd":       In(stream.Signature(command_layout(f))).array(n),
            "events":    Out(stream.Signature(event_layout(f))).array(n),
            "cycle":     Out(32),
            "isa_load":  In(stream.Signature(load_layout(params.isa))),
            "counters":  Out(counters_layout()),
            "errors":    Out(error_layout()).array(n),
            "rejected":  Out(16).array(n),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        m.submodules.switch = switch = ScinSwitch(p.isa, credits=p.credits, nvls=p.nvls)
        connect(m, flipped(self.isa_load), switch.load)
        if p.nvls is not None:
            connect(m, flipped(self.mc_load), switch.mc_load)
            m.d.comb += self.nvls_counters.eq(switch.nvls_counters)
        m.d.comb += self.counters.eq(switch.counters)
        for i in range(n):
            ep = m.submodules[f"ep{i}"] = self._endpoints[i]
            tp = m.submodules[f"transport{i}"] = TransportPort(f, credits=p.credits)
            link = m.submodules[f"link{i}"] = Link(f, p.link_delay)
            for c in range(NUM_CLASSES):
                connect(m, ep.tx[c], tp.tx[c])
                connect(m, tp.rx[c], ep.rx[c])
            connect(m, tp.link, link.a)
            connect(m, switch.link[i], link.b)
            # By hand rather than connect(): a smaller memory has a narrower word address.
            m.d.comb += [ep.load.valid.eq(self.load[i].valid), self.load[i].ready.eq(ep.load.ready),
                         ep.load.payload.addr.eq(self.load[i].payload.addr),
                         ep.load.payload.data.eq(self.load[i].payload.data),
                         ep.dump_req.valid.eq(self.dump_req[i].valid),
                         self.dump_req[i].ready.eq(ep.dump_req.ready),
                         ep.dump_req.payload.eq(self.dump_req[i].payload)]
            connect(m, ep.dump_data, flipped(self.dump_data[i]))
            connect(m, flipped(self.cmd[i]), ep.cmd)
            connect(m, ep.events, flipped(self.events[i]))
            m.d.comb += [self.errors[i].eq(switch.errors[i]), self.rejected[i].eq(ep.rejected)]
        m.d.comb += self.cycle.eq(self._endpoints[0].cycle)
        return m
