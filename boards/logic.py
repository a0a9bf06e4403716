"""The project's logic as the two FPGA roles hold it, plus the synthesis harness of the open build.

* :class:`SwitchIsa`: what the switch FPGA holds: the N-port :class:`~scin.hdl.switch.Switch` and
  the :class:`~scin.hdl.isa.isa.Isa`, wired exactly as in :class:`~scin.hdl.system.System`, with
  each port's link end, the ISA's descriptor port and every counter on the outside.
* :class:`EndpointLogic`: what an endpoint FPGA holds besides its memory and PHY: a
  :class:`~scin.hdl.transport.TransportPort`, the :class:`~scin.hdl.endpoint.AxiBridge` (AXI4
  manager towards the memory) and the :class:`~scin.hdl.endpoint.accelerator.Accelerator`
  stand-in, wired as in :class:`~scin.hdl.endpoint.Endpoint` but with the memory outside.
* :class:`ScanHarness`: drives every input of a component from a scan chain on one pin and
  compacts every output into a signature register on another, so a build on a small board keeps
  all of the component's logic (nothing is constant, nothing is unobserved) with three pins.
"""

from amaranth.hdl import Module, Signal, Cat, Const, Value, ValueCastable
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out, connect, flipped

from ..hdl.catalog import DEFAULT_CREDITS, DEFAULT_ISA_DEPTH
from ..hdl.endpoint.accelerator import Accelerator, command_layout, event_layout
from ..hdl.endpoint.axi import axi_signature, poll_signature
from ..hdl.endpoint.bridge import AxiBridge
from ..hdl.isa.descriptor import IsaParams
from ..hdl.isa.instruction_buffer import load_layout
from ..hdl.isa.isa import Isa
from ..hdl.isa.wave_controller import counters_layout
from ..hdl.packet import FabricParams, MsgClass, NUM_CLASSES
from ..hdl.switch import Switch
from ..hdl.switch.filter import error_layout
from ..hdl.transport import TransportPort
from ..hdl.transport.signature import link_end_signature


__all__ = ["SwitchIsa", "EndpointLogic", "ScanHarness", "port_values"]


def _check_int(name, value, lo, hi=None):
    if not isinstance(value, int) or isinstance(value, bool) or value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise ValueError(f"{name} must be an integer {rng}, not {value!r}")
    return value


class SwitchIsa(wiring.Component):
    """The switch FPGA's logic: switch ports, switch core and ISA (paper Fig. 4).

    Parameters
    ----------
    isa : IsaParams
        The ISA; ``isa.fabric`` sets the flit width and the port count.
    credits : int
        Per-class receive-queue depth of every switch port (the peers must start with as many
        credits).
    isa_depth : int
        Depth of every ISA RX and TX queue, in flits.

    Members (``N = isa.fabric.ports``)
    -------
    link : Out(link_end_signature).array(N)
        Port ``p``'s link end, towards endpoint ``p`` (through the board's link PHY).
    load : In(stream.Signature(load_layout))
        Descriptor loading into the ISA's instruction buffer.
    counters : Out(counters_layout)
        The ISA's performance and error counters.
    errors : Out(error_layout).array(N)
        Each switch port's dropped-packet counters.
    overflow, credit_error : Out(N)
        Sticky transport error flags, one bit per port.
    """

    def __init__(self, isa=None, *, credits=DEFAULT_CREDITS, isa_depth=DEFAULT_ISA_DEPTH):
        isa = IsaParams() if isa is None else isa
        if not isinstance(isa, IsaParams):
            raise TypeError(f"isa must be an IsaParams, not {isa!r}")
        self._isa_params = isa
        self._credits = _check_int("credits", credits, 2)
        self._isa_depth = _check_int("isa_depth", isa_depth, 2)
        f = isa.fabric
        n = f.ports
        super().__init__({
            "link":         Out(link_end_signature(f)).array(n),
            "load":         In(stream.Signature(load_layout(isa))),
            "counters":     Out(counters_layout()),
            "errors":       Out(error_layout()).array(n),
            "overflow":     Out(n),
            "credit_error": Out(n),
        })

    @property
    def isa_params(self):
        return self._isa_params

    @property
    def fabric(self):
        return self._isa_params.fabric

    @property
    def credits(self):
        return self._credits

    @property
    def isa_depth(self):
        return self._isa_depth

    def elaborate(self, platform):
        m = Module()
        f = self.fabric
        m.submodules.switch = switch = Switch(f, credits=self._credits, isa_depth=self._isa_depth)
        m.submodules.isa = isa = Isa(self._isa_params)
        connect(m, flipped(self.load), isa.load)
        m.d.comb += [
            self.counters.eq(isa.counters),
            self.overflow.eq(switch.overflow),
            self.credit_error.eq(switch.credit_error),
        ]
        for p in range(f.ports):
            for c in range(NUM_CLASSES):
                connect(m, switch.isa_rx[p][c], isa.rx[p][c])
                connect(m, isa.tx[p][c], switch.isa_tx[p][c])
            connect(m, switch.link[p], flipped(self.link[p]))
            m.d.comb += self.errors[p].eq(switch.errors[p])
        return m


class EndpointLogic(wiring.Component):
    """An endpoint FPGA's logic between its link PHY and its memory.

    The link end goes to the board's PHY; the AXI4 manager port (the bridge's: flit-wide data,
    ``axuser[0]`` = INC, writes in order on ID 0) goes to the board's memory controller; the
    accelerator stand-in's command, event and flag-poll ports go to the board's host controller.
    Message classes are split as in :class:`~scin.hdl.endpoint.Endpoint`.

    Parameters
    ----------
    params : FabricParams
    port : int
        The switch port this endpoint is cabled to (``src`` of everything it sends).
    credits : int
        Per-class receive-queue depth (must equal the switch port's).
    outstanding : int
        READs the bridge keeps in flight.
    poll_addr_width : int
        Width of the flag-poll word index (the poll port reads ``flit_width``-bit words).

    Members
    -------
    link : Out(link_end_signature(params))
    axi : Out(axi_signature(bridge axi params))
    cmd : In(stream.Signature(command_layout(params)))
    events : Out(stream.Signature(event_layout(params)))
    poll : Out(poll_signature(poll_addr_width, flit_width))
    dropped, rejected : Out(16)
        Bridge counters.
    overflow, credit_error : Out(1)
        Sticky transport error flags.
    """

    def __init__(self, params=None, *, port=0, credits=DEFAULT_CREDITS, outstanding=16,
                 poll_addr_width=16):
        params = FabricParams() if params is None else params
        if not isinstance(params, FabricParams):
            raise TypeError(f"params must be a FabricParams, not {params!r}")
        self._params = params
        self._port = _check_int("port", port, 0, params.ports - 1)
        self._credits = _check_int("credits", credits, 2)
        self.bridge = AxiBridge(params, port=port, outstanding=outstanding)
        self.accelerator = Accelerator(params, port=port, poll_addr_width=poll_addr_width)
        super().__init__({
            "link":         Out(link_end_signature(params)),
            "axi":          Out(axi_signature(self.bridge.axi_params)),
            "cmd":          In(stream.Signature(command_layout(params))),
            "events":       Out(stream.Signature(event_layout(params))),
            "poll":         Out(poll_signature(poll_addr_width, params.flit_width)),
            "dropped":      Out(16),
            "rejected":     Out(16),
            "overflow":     Out(1),
            "credit_error": Out(1),
        })

    @property
    def params(self):
        return self._params

    @property
    def port(self):
        return self._port

    @property
    def axi_params(self):
        return self.bridge.axi_params

    def elaborate(self, platform):
        m = Module()
        bridge, acc = self.bridge, self.accelerator
        m.submodules.bridge, m.submodules.accelerator = bridge, acc
        m.submodules.transport = tp = TransportPort(self._params, credits=self._credits)
        REQ, WRITE, RDATA, WRESP = (c.value for c in MsgClass)
        connect(m, tp.link, flipped(self.link))
        connect(m, bridge.axi, flipped(self.axi))
        connect(m, flipped(self.cmd), acc.cmd)
        connect(m, acc.events, flipped(self.events))
        connect(m, acc.poll, flipped(self.poll))
        connect(m, tp.rx[REQ], bridge.req_in)
        connect(m, tp.rx[WRITE], bridge.write_in)
        connect(m, tp.rx[RDATA], acc.rdata_in)
        connect(m, tp.rx[WRESP], acc.wresp_in)
        connect(m, acc.req_out, tp.tx[REQ])
        connect(m, acc.write_out, tp.tx[WRITE])
        connect(m, bridge.rdata_out, tp.tx[RDATA])
        connect(m, bridge.wresp_out, tp.tx[WRESP])
        m.d.comb += [
            self.dropped.eq(bridge.dropped), self.rejected.eq(bridge.rejected),
            self.overflow.eq(tp.overflow), self.credit_error.eq(tp.credit_error),
        ]
        return m


def port_values(component):
    """``(inputs, outputs)``: the component's non-constant port values, as lists of
    ``(name, Value)``, in signature order, split by direction as the component sees them."""
    inputs, outputs = [], []
    for path, member, value in component.signature.flatten(component):
        if isinstance(value, ValueCastable):
            value = value.as_value()
        if isinstance(value, Const) or not isinstance(value, Value):
            continue   # the constant ready/valid of always_ready/always_valid streams
        name = "__".join(map(str, path))
        (inputs if member.flow == In else outputs).append((name, value))
    return inputs, outputs


class ScanHarness(wiring.Component):
    """Three-pin synthesis harness around a component (``dut``).

    Every input bit of ``dut`` is one flip-flop of a scan chain: while ``shift`` is high the chain
    moves by one bit per cycle, ``sin`` entering at bit 0. Every output bit of ``dut`` is folded
    (XOR of ``width``-bit chunks) into a ``width``-bit signature register (a MISR: rotate left and
    add the folded outputs every cycle), whose bit 0 is ``sout``. So every input is controllable
    and every output observable from the pins, and synthesis can neither treat an input as
    constant nor drop logic as unobserved. This is a test harness, not a link: the chain does not
    frame flits and the signature does not carry them.

    Parameters
    ----------
    dut : wiring.Component
        Elaborated as the submodule ``dut``; its clock domain is the harness's.
    width : int
        Signature width (8 to 64).

    Members
    -------
    sin, shift : In(1)
    sout : Out(1)
    """

    def __init__(self, dut, *, width=32):
        if not isinstance(dut, wiring.Component):
            raise TypeError(f"dut must be a wiring.Component, not {dut!r}")
        self._dut = dut
        self._width = _check_int("width", width, 8, 64)
        self._inputs, self._outputs = port_values(dut)
        if not self._outputs:
            raise ValueError("dut has no outputs: a harness would observe nothing")
        super().__init__({"sin": In(1), "shift": In(1), "sout": Out(1)})

    @property
    def dut(self):
        return self._dut

    @property
    def chain_length(self):
        """Flip-flops in the scan chain: the dut's input bits."""
        return sum(len(v) for _, v in self._inputs)

    @property
    def observed_bits(self):
        """Output bits folded into the signature."""
        return sum(len(v) for _, v in self._outputs)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self._dut
        w = self._width
        if self._inputs:
            chain = Signal(self.chain_length)
            with m.If(self.shift):
                m.d.sync += chain.eq(Cat(self.sin, chain[:-1]))
            offset = 0
            for _, value in self._inputs:
                m.d.comb += value.eq(chain[offset:offset + len(value)])
                offset += len(value)
        observed = Cat(*(v for _, v in self._outputs))
        fold = Const(0, w)
        for start in range(0, len(observed), w):
            fold = fold ^ observed[start:start + w]
        misr = Signal(w)
        m.d.sync += misr.eq(Cat(misr[-1], misr[:-1]) ^ fold)
        m.d.comb += self.sout.eq(misr[0])
        return m
