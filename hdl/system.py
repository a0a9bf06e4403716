"""System: the N-port switch with its ISA, N endpoints and the links between them (simulation top).

This is the paper's FPGA prototype in one design: one switch (switch ports, switch core, ISA) and N
endpoints (AXI4 bridge, memory, accelerator stand-in), each joined to its switch port by a
full-duplex credit link.
"""

from dataclasses import dataclass, field

from amaranth.hdl import Module, Cat
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out, connect, flipped

from .endpoint import Endpoint
from .endpoint.accelerator import command_layout, event_layout
from .isa.descriptor import IsaParams
from .isa.instruction_buffer import load_layout
from .isa.isa import Isa
from .isa.wave_controller import counters_layout
from .packet import NUM_CLASSES
from .switch import Switch
from .switch.filter import error_layout
from .transport import Link, TransportPort, TRANSPORT_LATENCY


__all__ = ["SystemParams", "System"]


@dataclass(frozen=True)
class SystemParams:
    """Parameters of the simulated system. Defaults are the paper latency model.

    Parameters
    ----------
    isa : IsaParams
        The ISA (and, through ``isa.fabric``, the flit width and port count).
    one_way_latency : int
        Cycles from a flit entering an endpoint's transport queue to it leaving the switch port's
        receive queue: the link model's delay plus the transport RTL's own
        ``TRANSPORT_LATENCY``. 90 cycles (360 ns) is the prototype's (20 transport + 70 Aurora).
    mem_latency : int
        Endpoint memory read latency, AR handshake to first R beat (40 cycles = 160 ns).
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
    """
    isa:             IsaParams = field(default_factory=IsaParams)
    one_way_latency: int = 90
    mem_latency:     int = 40
    mem_size:        int = 1 << 20
    mem_sizes:       tuple = ()
    reorder:         bool = False
    credits:         int = 256

    def __post_init__(self):
        if not isinstance(self.isa, IsaParams):
            raise TypeError(f"isa must be an IsaParams, not {self.isa!r}")
        if not isinstance(self.one_way_latency, int) or self.one_way_latency <= TRANSPORT_LATENCY:
            raise ValueError(f"one_way_latency must be an integer above the transport's own "
                             f"{TRANSPORT_LATENCY} cycles, not {self.one_way_latency!r}")
        if not isinstance(self.mem_sizes, tuple) or self.mem_sizes and len(self.mem_sizes) != self.fabric.ports:
            raise ValueError(f"mem_sizes must be empty or a tuple of {self.fabric.ports} sizes, one per "
                             f"endpoint, not {self.mem_sizes!r}")
        for size in (self.mem_size, *self.mem_sizes):
            if not isinstance(size, int) or size < 4096 or size & (size - 1):
                raise ValueError(f"mem_size must be a power of two of at least 4096 bytes, not {size!r}")

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


class System(wiring.Component):
    """Switch + ISA + N endpoints + N links.

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
    """

    def __init__(self, params=None):
        params = SystemParams() if params is None else params
        if not isinstance(params, SystemParams):
            raise TypeError(f"params must be a SystemParams, not {params!r}")
        self._params = params
        f = params.fabric
        n = f.ports
        # The memories are megabytes and only ever simulated: SimRam storage, whose file
        # backdoor is named ep0, ep1, ... (see hdl/endpoint/sim_ram.v).
        self._endpoints = [Endpoint(f, port=i, mem_size=params.endpoint_mem_size(i),
                                    latency=params.mem_latency,
                                    reorder=params.reorder, storage="sim", name=f"ep{i}")
                           for i in range(n)]
        # The backdoor ports are as wide as the largest memory needs.
        ep = max(self._endpoints, key=lambda e: e.memory.size)
        super().__init__({
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

    @property
    def params(self):
        return self._params

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        m.submodules.switch = switch = Switch(f, credits=p.credits)
        m.submodules.isa = isa = Isa(p.isa)
        connect(m, flipped(self.isa_load), isa.load)
        m.d.comb += self.counters.eq(isa.counters)
        for i in range(n):
            for c in range(NUM_CLASSES):
                connect(m, switch.isa_rx[i][c], isa.rx[i][c])
                connect(m, isa.tx[i][c], switch.isa_tx[i][c])
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
