"""Python stand-ins for the fabric around the ISA, for ISA-level testbenches.

:class:`EndpointModel` plays one switch port plus the endpoint behind it, at packet level: it
answers the ISA's reads from a byte array after a (random) latency, applies its writes and
acknowledges them, and sends arrivals. It is deliberately independent of the HDL endpoint so the
ISA is tested against a second opinion of the protocol.
"""

import cocotb
from cocotb.triggers import RisingEdge

from scin.hdl.packet import MsgClass, Opcode, Status
from scin.tb.common import StreamSource, StreamSink
from scin.tb.traffic import make_packet, split_packets, header_of, flit


__all__ = ["EndpointModel", "pack_descriptor", "desc_fields"]


def pack_descriptor(layout, **fields):
    """Pack a descriptor (or any flat struct) given as field name -> int."""
    value = 0
    for name, field in layout:
        v = int(getattr(fields.get(name, 0), "value", fields.get(name, 0)))
        assert 0 <= v < (1 << field.width), f"{name}={v} does not fit {field.width} bits"
        value |= v << field.offset
    return value


def desc_fields(layout, value):
    return {name: (value >> f.offset) & ((1 << f.width) - 1) for name, f in layout}


class EndpointModel:
    """One port: the ISA's rx/tx streams of that port, and a memory of ``size`` bytes."""

    def __init__(self, dut, params, port, size, rng, *, latency=(5, 40), pauses=None):
        self.dut, self.params, self.port, self.rng = dut, params, port, rng
        self.mem = bytearray(size)
        self.latency = latency
        self.writes = 0
        p = f"rx__{port}__"
        q = f"tx__{port}__"
        mk = lambda: pauses() if pauses else None
        self.to_isa = {c: StreamSource(dut, f"{p}{c.value}", mk()) for c in MsgClass}
        self.from_isa = {c: StreamSink(dut, f"{q}{c.value}", mk())
                         for c in (MsgClass.REQ, MsgClass.WRITE, MsgClass.WRESP)}
        self.acks = []
        self._seen = {c: 0 for c in self.from_isa}
        self._pending = []       # (due cycle, class, packet)
        self.cycle = 0
        cocotb.start_soon(self._run())

    def arrive(self, sync, tag=0):
        pkt = make_packet(self.params, opcode=Opcode.ATOMIC_ADD, inc=1, src=self.port,
                          dst=self.port, addr=sync, length=1, tag=tag)
        self.to_isa[MsgClass.REQ].send(*pkt)

    def flag(self, addr):
        return int.from_bytes(self.mem[addr:addr + 4], "little")

    def _packets(self, cls):
        sink = self.from_isa[cls]
        pkts = split_packets(self.params, sink.items)
        complete = [p for p in pkts if p[-1] >> self.params.flit_width & 1]
        new = complete[self._seen[cls]:]
        self._seen[cls] = len(complete)
        return new

    def _payload(self, pkt, length):
        fb, w = self.params.flit_bytes, self.params.flit_width
        raw = b"".join((f & ((1 << w) - 1)).to_bytes(fb, "little") for f in pkt[1:])
        return raw[:length]

    async def _run(self):
        while True:
            await RisingEdge(self.dut.clk)
            self.cycle += 1
            for pkt in self._packets(MsgClass.REQ):
                h = header_of(self.params, pkt)
                assert h["opcode"] == Opcode.READ.value, h
                assert h["inc"] == 1 and h["dst"] == self.port, h
                data = bytes(self.mem[h["addr"]:h["addr"] + h["length"]])
                resp = self._data_packet(Opcode.READ_RESP, h, data)
                self._pending.append((self.cycle + self.rng.randint(*self.latency), MsgClass.RDATA, resp))
            for pkt in self._packets(MsgClass.WRITE):
                h = header_of(self.params, pkt)
                assert h["opcode"] == Opcode.WRITE.value and h["inc"] == 1, h
                data = self._payload(pkt, h["length"])
                assert len(data) == h["length"], (h, len(data))
                self.mem[h["addr"]:h["addr"] + h["length"]] = data
                self.writes += 1
                ack = make_packet(self.params, opcode=Opcode.WRITE_RESP, inc=1, src=self.port,
                                  dst=self.port, tag=h["tag"], status=Status.OK)
                self._pending.append((self.cycle + self.rng.randint(*self.latency), MsgClass.WRESP, ack))
            for pkt in self._packets(MsgClass.WRESP):
                self.acks.append(header_of(self.params, pkt))
            due = [x for x in self._pending if x[0] <= self.cycle]
            if due:
                self._pending = [x for x in self._pending if x[0] > self.cycle]
                # Responses of different requests may come back out of order.
                self.rng.shuffle(due)
                for _, cls, pkt in due:
                    self.to_isa[cls].send(*pkt)

    def _data_packet(self, opcode, req, data):
        p = self.params
        header = p.pack_header(opcode=opcode.value, msg_class=MsgClass.RDATA.value, inc=1,
                               src=self.port, dst=self.port, tag=req["tag"], length=len(data),
                               status=Status.OK.value)
        fb = p.flit_bytes
        words = [int.from_bytes(data[i:i + fb], "little") for i in range(0, len(data), fb)]
        flits = [header] + words
        return [flit(p, d, i == len(flits) - 1) for i, d in enumerate(flits)]
