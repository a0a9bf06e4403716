"""Endpoint: AxiBridge + AxiMemory + Accelerator behind one per-class fabric interface."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ..packet import FabricParams, MsgClass, NUM_CLASSES
from ..paper import MEM_LATENCY
from ..params import check_type
from ..transport.signature import packet_signature
from .accelerator import Accelerator, command_layout, event_layout
from .bridge import AxiBridge
from .memory import AxiMemory


__all__ = ["Endpoint"]


class Endpoint(wiring.Component):
    """One endpoint of the fabric: accelerator memory behind an AXI bridge, plus the accelerator.

    The message classes split the traffic with no arbitration at all:

    ========== ======================== ========================
    class      ``rx`` (received) goes to ``tx`` (sent) comes from
    ========== ======================== ========================
    REQ        bridge (READ, ATOMIC_ADD) accelerator (READ, ATOMIC_ADD)
    WRITE      bridge                   accelerator
    RDATA      accelerator              bridge
    WRESP      accelerator              bridge
    ========== ======================== ========================

    ``tx``/``rx`` have the shape of the user side of a
    :class:`~scin.hdl.transport.port.TransportPort` (``tx`` here connects to its ``tx``, its ``rx``
    to ``rx`` here).

    Parameters
    ----------
    params : FabricParams
    port : int
        The switch port this endpoint sits on.
    mem_size : int
        Bytes of endpoint memory (a power of two).
    latency : int
        Memory read latency in cycles (AR to first R beat); default
        :data:`~scin.hdl.paper.MEM_LATENCY`, the paper latency model's 40.
    reorder : bool
        Let the memory answer reads with different IDs out of order.
    outstanding : int
        READs the bridge keeps in flight (also the memory's read-table size).
    storage, name : str
        The memory's storage and backdoor name (see :class:`AxiMemory`).
    adder : bool
        Whether the accelerator has the ring's adder (REDUCE_SEND with ``reduce``;
        :class:`~scin.hdl.endpoint.kernel.ReduceSend`).

    Members
    -------
    tx : Out(packet_signature(params)).array(NUM_CLASSES)
    rx : In(packet_signature(params)).array(NUM_CLASSES)
    load, dump_req, dump_data :
        The memory backdoor (see :class:`AxiMemory`).
    cmd : In(stream.Signature(command_layout(params)))
    events : Out(stream.Signature(event_layout(params)))
        The accelerator's command and event streams (see :class:`Accelerator`).
    cycle : Out(32)
        Free-running cycle counter (the clock of every event).
    dropped, rejected : Out(16)
        Bridge counters (see :class:`AxiBridge`).
    """

    def __init__(self, params, *, port=0, mem_size=1 << 16, latency=MEM_LATENCY, reorder=False,
                 outstanding=16, storage="memory", name="mem", adder=True):
        self._params = check_type("params", params, FabricParams)
        self.bridge = AxiBridge(params, port=port, outstanding=outstanding)
        self.memory = AxiMemory(self.bridge.axi_params, size=mem_size, latency=latency,
                                reorder=reorder, outstanding=outstanding,
                                seed=(0xACE1 ^ (port * 0x1F35)) & 0xFFFF or 1,
                                storage=storage, name=name)
        poll_bits = len(self.memory.poll.addr)
        self.accelerator = Accelerator(params, port=port, poll_addr_width=poll_bits, adder=adder)
        pkt = packet_signature(params)
        mem = self.memory
        super().__init__({
            "tx":        Out(pkt).array(NUM_CLASSES),
            "rx":        In(pkt).array(NUM_CLASSES),
            "load":      In(stream.Signature(mem.load.payload.shape())),
            "dump_req":  In(stream.Signature(len(mem.dump_req.payload))),
            "dump_data": Out(stream.Signature(len(mem.dump_data.payload))),
            "cmd":       In(stream.Signature(command_layout(params))),
            "events":    Out(stream.Signature(event_layout(params))),
            "cycle":     Out(32),
            "dropped":   Out(16),
            "rejected":  Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        bridge, mem, acc = self.bridge, self.memory, self.accelerator
        m.submodules.bridge, m.submodules.memory, m.submodules.accelerator = bridge, mem, acc
        connect(m, bridge.axi, mem.axi)
        connect(m, acc.poll, mem.poll)
        connect(m, flipped(self.load), mem.load)
        connect(m, flipped(self.dump_req), mem.dump_req)
        connect(m, mem.dump_data, flipped(self.dump_data))
        connect(m, flipped(self.cmd), acc.cmd)
        connect(m, acc.events, flipped(self.events))
        connect(m, flipped(self.rx[MsgClass.REQ.value]), bridge.req_in)
        connect(m, flipped(self.rx[MsgClass.WRITE.value]), bridge.write_in)
        connect(m, flipped(self.rx[MsgClass.RDATA.value]), acc.rdata_in)
        connect(m, flipped(self.rx[MsgClass.WRESP.value]), acc.wresp_in)
        connect(m, acc.req_out, flipped(self.tx[MsgClass.REQ.value]))
        connect(m, acc.write_out, flipped(self.tx[MsgClass.WRITE.value]))
        connect(m, bridge.rdata_out, flipped(self.tx[MsgClass.RDATA.value]))
        connect(m, bridge.wresp_out, flipped(self.tx[MsgClass.WRESP.value]))
        m.d.comb += [self.cycle.eq(acc.cycle), self.dropped.eq(bridge.dropped),
                     self.rejected.eq(bridge.rejected)]
        return m
