"""Board-specific logic around the project's blocks, plus the synthesis harness of the open build.

The switch FPGA holds :class:`~scin.hdl.scin_switch.ScinSwitch` (switch ports, switch core, ISA)
as it is; the boards instantiate it directly.

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

from ..hdl.catalog import DEFAULT_CREDITS
from ..hdl.endpoint.accelerator import Accelerator, command_layout, event_layout
from ..hdl.endpoint.axi import axi_signature, poll_signature
from ..hdl.endpoint.bridge import AxiBridge
from ..hdl.packet import FabricParams, MsgClass
from ..hdl.params import check_int, check_type
from ..hdl.transport import TransportPort
from ..hdl.transport.signature import check_credits, link_end_signature


__all__ = ["EndpointLogic", "ScanHarness", "port_values"]


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
        params = check_type("params", FabricParams() if params is None else params, FabricParams)
        self._params = params
        self._port = check_int("port", port, 0, params.ports - 1)
        self._credits = check_credits(credits)
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
        self._dut = check_type("dut", dut, wiring.Component)
        self._width = check_int("width", width, 8, 64)
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
