"""Python stand-ins for the fabric around the ISA, for ISA-level testbenches.

:class:`EndpointModel` plays one switch port plus the endpoint behind it, at packet level: it
answers the ISA's reads from a byte array after a (random) latency, applies its writes and
acknowledges them, and sends arrivals. It is deliberately independent of the HDL endpoint so the
ISA is tested against a second opinion of the protocol.

Faults are injected per request with :meth:`EndpointModel.on_read` / :meth:`EndpointModel.on_write`
(an error status, a response held back or never sent, a duplicate, extra latency) and
:meth:`EndpointModel.send_stray` (a response nobody asked for).
"""

import cocotb
from cocotb.triggers import RisingEdge

from scin.hdl.codec import pack, unpack
from scin.hdl.isa import ReadKind, flag_layout, push_addr_layout
from scin.hdl.packet import MsgClass, Opcode, Status

from .streams import StreamSource, StreamSink
from .traffic import (make_packet, split_packets, header_of, flit, flit_data, is_last,
                      train_pieces)


__all__ = ["EndpointModel"]


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
        self.read_rules = []     # [(match, action)]: the first rule matching a READ is used once
        self.write_rules = []    # the same for WRITEs
        self.held = []           # (class, packet) kept back by a `hold` action, sent by release()
        self.reads_seen = []     # headers of every READ received
        self.writes_seen = []    # headers of every WRITE received
        self.faults = 0          # fault actions applied
        self.sticky = 0          # worst status of the WRITE_POSTEDs since the last answered WRITE
        self._seen = {c: 0 for c in self.from_isa}
        self._pending = []       # (due cycle, class, packet)
        self.cycle = 0
        cocotb.start_soon(self._run())

    def arrive(self, sync, tag=0):
        pkt = make_packet(self.params, opcode=Opcode.ATOMIC_ADD, inc=1, src=self.port,
                          dst=self.port, addr=sync, length=1, tag=tag)
        self.to_isa[MsgClass.REQ].send(*pkt)

    def push(self, isa_params, sync, data, scales=b"", *, offset=0):
        """Push mode (docs/ISA.md): write ``data`` (and first, for INT8, its block ``scales``)
        into sync resource ``sync``'s reserved space, as the switch port hands push WRITEs to the
        ISA: in the RDATA-class stream, a slot's worth (``max_payload`` bytes of data, or their
        scales) per WRITE, from byte ``offset`` of the input on (its scales from ``offset // 32``).
        """
        page = self.params.max_payload
        layout = push_addr_layout(isa_params)
        spage = isa_params.scale_bytes_per_slot
        for kind, raw, at, step in ((ReadKind.SCALE, scales, offset // 32, spage),
                                    (ReadKind.DATA, data, offset, page)):
            for k in range(0, len(raw), step):
                addr = pack(layout, offset=at + k, kind=kind, sync=sync)
                self.to_isa[MsgClass.RDATA].send(*self._data_packet(
                    Opcode.WRITE, {"tag": 0}, bytes(raw[k:k + step]), cls=MsgClass.WRITE,
                    addr=addr))

    def flag(self, addr):
        """The 32-bit flag word at ``addr`` (an integer of :func:`flag_layout`)."""
        return int.from_bytes(self.mem[addr:addr + 4], "little")

    def flag_fields(self, addr):
        """The flag word at ``addr`` as a dict (``generation``, ``status``, ``reserved``)."""
        return unpack(flag_layout(), self.flag(addr))

    def on_read(self, match, **action):
        """Inject a fault into the next READ whose header (a dict) satisfies ``match``.

        ``action`` keys: ``status`` (answer with this :class:`Status`; with ``payload=False`` a
        header-only response of length 0, as the AXI bridge answers a read it refuses, else the
        full length of zero bytes, as a DECERR burst returns), ``hold`` (keep the response back
        until :meth:`release`: with no release it never comes), ``dup`` (send it twice; with
        ``dup="hold"`` the copy is kept back until :meth:`release`), ``delay`` (extra cycles of
        latency), ``release`` (when this request arrives, send every held response at once)."""
        self.read_rules.append((match, action))

    def on_write(self, match, **action):
        """As :meth:`on_read`, for the WRITE_RESP of the next matching WRITE; with an error
        ``status`` the write does not change memory (as AXI DECERR/SLVERR). A matching
        ``WRITE_POSTED`` has no response: its ``status`` is reported by the next ``WRITE``'s
        (the worst of the two, docs/PROTOCOL.md) and the other actions do nothing."""
        self.write_rules.append((match, action))

    def release(self):
        """Send every held response now (in the order they were held)."""
        held, self.held = self.held, []
        for cls, pkt in held:
            self.to_isa[cls].send(*pkt)

    def send_stray(self, cls, tag):
        """Send a response with ``tag`` that no request asked for: a READ_RESP of one flit of
        payload (``cls`` RDATA) or a WRITE_RESP (``cls`` WRESP)."""
        if cls == MsgClass.RDATA:
            pkt = self._data_packet(Opcode.READ_RESP, {"tag": tag}, bytes(self.params.flit_bytes))
        else:
            pkt = make_packet(self.params, opcode=Opcode.WRITE_RESP, inc=1, src=self.port,
                              dst=self.port, tag=tag, status=Status.OK)
        self.to_isa[cls].send(*pkt)

    def _rule(self, rules, h):
        for k, (match, action) in enumerate(rules):
            if match(h):
                del rules[k]
                self.faults += 1
                return action
        return {}

    def _respond(self, cls, pkt, action):
        """Queue (or hold, duplicate, delay) the response ``pkt`` as ``action`` says."""
        if action.get("release"):
            self.release()
        due = self.cycle + self.rng.randint(*self.latency) + action.get("delay", 0)
        if action.get("hold"):
            self.held.append((cls, pkt))
        else:
            self._pending.append((due, cls, pkt))
        if action.get("dup") == "hold":
            self.held.append((cls, pkt))
        elif action.get("dup"):
            self._pending.append((due + self.rng.randint(*self.latency), cls, pkt))

    def _packets(self, cls):
        """The packets completed on ``cls`` since the last call. Only the flits received since
        then are looked at (splitting the whole history every cycle made long tests quadratic)."""
        sink = self.from_isa[cls]
        start = self._seen[cls]          # index of the first flit not yet in a returned packet
        pkts = split_packets(self.params, sink.items[start:])
        complete = [p for p in pkts if is_last(self.params, p[-1])]
        self._seen[cls] = start + sum(len(p) for p in complete)
        return complete

    def _read_pieces(self, h):
        """The reads a request header ``h`` asks for, as READ headers (dicts): ``h`` itself, or
        for a ``READ_WAVE`` of ``length`` flits one per piece of the range cut at every
        ``train_piece_bytes`` boundary of the address (docs/PROTOCOL.md): piece ``j`` has
        tag ``tag + j``, its own ``addr`` and ``length`` (its response carries that ``addr``,
        ``resp_addr``) and ``train`` = ``j``. Read rules and ``reads_seen`` see the pieces."""
        if h["opcode"] == Opcode.READ.value:
            return [h]
        assert h["opcode"] == Opcode.READ_WAVE.value, h
        assert h["length"] >= 1 and h["addr"] % self.params.flit_bytes == 0, h
        pieces = [dict(h, opcode=Opcode.READ.value, addr=addr, length=nbytes,
                       tag=(h["tag"] + j) % (1 << self.params.tag_width), train=j,
                       resp_addr=addr)
                  for j, (addr, nbytes) in enumerate(train_pieces(self.params, h["addr"],
                                                                  h["length"]))]
        return pieces

    def _payload(self, pkt, length):
        fb = self.params.flit_bytes
        raw = b"".join(flit_data(self.params, f).to_bytes(fb, "little") for f in pkt[1:])
        return raw[:length]

    async def _run(self):
        while True:
            await RisingEdge(self.dut.clk)
            self.cycle += 1
            for pkt in self._packets(MsgClass.REQ):
                h = header_of(self.params, pkt)
                assert h["inc"] == 1 and h["dst"] == self.port, h
                for piece in self._read_pieces(h):
                    self.reads_seen.append(piece)
                    action = self._rule(self.read_rules, piece)
                    status = action.get("status", Status.OK)
                    if status == Status.OK:
                        data = bytes(self.mem[piece["addr"]:piece["addr"] + piece["length"]])
                    else:
                        data = bytes(piece["length"] if action.get("payload", True) else 0)
                    resp = self._data_packet(Opcode.READ_RESP, piece, data, status,
                                             addr=piece.get("resp_addr", 0))
                    self._respond(MsgClass.RDATA, resp, action)
            for pkt in self._packets(MsgClass.WRITE):
                h = header_of(self.params, pkt)
                posted = h["opcode"] != Opcode.WRITE.value
                assert not posted or h["opcode"] == Opcode.WRITE_POSTED.value, h
                assert h["inc"] == 1, h
                data = self._payload(pkt, h["length"])
                assert len(data) == h["length"], (h, len(data))
                self.writes_seen.append(h)
                action = self._rule(self.write_rules, h)
                status = action.get("status", Status.OK)
                if status == Status.OK:
                    self.mem[h["addr"]:h["addr"] + h["length"]] = data
                self.writes += 1
                # A WRITE_POSTED is not answered: its failure waits for the next WRITE's answer.
                worst = max(Status(status).value, self.sticky)
                self.sticky = worst if posted else 0
                if posted and action.get("release"):
                    self.release()
                if not posted:
                    ack = make_packet(self.params, opcode=Opcode.WRITE_RESP, inc=1,
                                      src=self.port, dst=self.port, tag=h["tag"], status=worst)
                    self._respond(MsgClass.WRESP, ack, action)
            for pkt in self._packets(MsgClass.WRESP):
                self.acks.append(header_of(self.params, pkt))
            due = [x for x in self._pending if x[0] <= self.cycle]
            if due:
                self._pending = [x for x in self._pending if x[0] > self.cycle]
                # Responses of different requests may come back out of order.
                self.rng.shuffle(due)
                for _, cls, pkt in due:
                    self.to_isa[cls].send(*pkt)

    def _data_packet(self, opcode, req, data, status=Status.OK, cls=MsgClass.RDATA, addr=0):
        p = self.params
        header = p.pack_header(opcode=opcode.value, msg_class=cls.value, inc=1,
                               src=self.port, dst=self.port, tag=req["tag"], length=len(data),
                               status=Status(status).value, addr=addr)
        fb = p.flit_bytes
        words = [int.from_bytes(data[i:i + fb], "little") for i in range(0, len(data), fb)]
        flits = [header] + words
        return [flit(p, d, i == len(flits) - 1) for i, d in enumerate(flits)]
