"""PacketFilter: header checks, whole-packet drop of malformed packets, INC demux."""

from amaranth.hdl import Module, Signal, Mux
from amaranth.lib import wiring, data
from amaranth.lib.wiring import In, Out, connect, flipped

from ..lib import StreamRegister
from ..packet import MsgClass, Opcode, OPCODE_CLASS
from ..params import check_type
from ..transport.signature import check_params, packet_signature


__all__ = ["PacketFilter", "error_layout", "ERROR_KINDS"]

#: Kinds of malformed packet, in checking order (a packet is counted once, under the first kind).
ERROR_KINDS = ("bad_opcode", "bad_length", "bad_dst")


def error_layout(width=32):
    """Per-port error counters: ``bad_opcode``, ``bad_length``, ``bad_dst``, each ``width`` bits,
    wrapping."""
    return data.StructLayout({kind: width for kind in ERROR_KINDS})


class PacketFilter(wiring.Component):
    """Checks every packet of one message class and steers it to the ISA or the switch core.

    The header is the first flit after a ``last`` flit (or after reset). A packet is *malformed*,
    and dropped whole (every flit through its ``last``), when its header has

    * ``bad_opcode``: an opcode that is not an :class:`Opcode`, or one that does not travel in this
      class (``OPCODE_CLASS``), or a ``msg_class`` field other than this class;
    * ``bad_length``: a ``length`` over ``max_payload``, for the opcodes whose length is a byte
      count (all but ATOMIC_ADD, whose length is the addend);
    * ``bad_dst``: ``inc = 0`` and ``dst >= ports`` (ISA-bound packets are not routed by ``dst``).

    Framing never depends on the header: a packet ends at its ``last`` flit whatever its
    ``length`` says, so a bad header can never swallow a neighbouring packet. Good packets go to
    ``isa`` when ``inc = 1``, else to ``core``, flits unchanged and in order. With ``nvls``, an
    INC=0 packet for the NVLS engine (docs/NVLS.md) goes to ``nvls`` instead: in REQ and WRITE,
    one whose ``addr`` is a multicast address (bit ``addr_width - 1`` set), in RDATA and WRESP,
    one whose ``dst`` is the switch's own port (``params.switch_port``); ``dst`` is not checked
    for these.

    Both outputs are registered; a packet streams through at one flit per cycle, and a dropped one
    is consumed at one flit per cycle.

    Parameters
    ----------
    params : FabricParams
    msg_class : MsgClass
        The class this filter serves.
    nvls : bool
        Steer NVLS packets to ``nvls`` (default ``False``: no ``nvls`` output).

    Members
    -------
    i : In(packet_signature)
    isa : Out(packet_signature)
    core : Out(packet_signature)
    nvls : Out(packet_signature)
        Only with ``nvls``.
    error : Out(error_layout(1))
        One-cycle pulses, one per dropped packet (on its header flit).
    """

    def __init__(self, params, msg_class, *, nvls=False):
        self._params = check_params(params)
        if (isinstance(msg_class, bool)
                or msg_class not in [*MsgClass, *(c.value for c in MsgClass)]):
            names = ", ".join(f"{c.name} ({c.value})" for c in MsgClass)
            raise ValueError(f"msg_class must be a MsgClass or its value: {names}; "
                             f"not {msg_class!r}")
        self._msg_class = MsgClass(msg_class)
        self._nvls = check_type("nvls", nvls, bool)
        sig = packet_signature(params)
        members = {"i": In(sig), "isa": Out(sig), "core": Out(sig), "error": Out(error_layout(1))}
        if nvls:
            members["nvls"] = Out(sig)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        p = self._params
        layout = p.header_layout
        hdr = data.View(layout, self.i.payload.data[:layout.size])
        opcode = hdr.opcode.as_value()

        class_opcodes = [op for op, cls in OPCODE_CLASS.items() if cls == self._msg_class]
        opcode_ok = Signal()
        m.d.comb += opcode_ok.eq(
            (hdr.msg_class.as_value() == self._msg_class.value) &
            sum((opcode == op.value for op in class_opcodes), start=0).bool()
            if class_opcodes else 0)
        byte_count = [op for op in class_opcodes if op != Opcode.ATOMIC_ADD]
        counts_bytes = Signal()
        m.d.comb += counts_bytes.eq(
            sum((opcode == op.value for op in byte_count), start=0).bool() if byte_count else 0)
        length_ok = ~counts_bytes | (hdr.length <= p.max_payload)
        # An NVLS packet (docs/NVLS.md): a multimem request, or a response to the switch.
        nvls = Signal()
        if self._nvls:
            if self._msg_class in (MsgClass.REQ, MsgClass.WRITE):
                m.d.comb += nvls.eq(~hdr.inc & hdr.addr[-1])
            else:
                m.d.comb += nvls.eq(~hdr.inc & (hdr.dst == p.switch_port))
        dst_ok = hdr.inc | nvls | (hdr.dst < p.ports)

        bad_opcode, bad_length, bad_dst, bad = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [
            bad_opcode.eq(~opcode_ok),
            bad_length.eq(opcode_ok & ~length_ok),
            bad_dst.eq(opcode_ok & length_ok & ~dst_ok),
            bad.eq(bad_opcode | bad_length | bad_dst),
        ]

        in_packet = Signal()  # the flit on ``i`` is a payload flit, not a header
        drop = Signal()       # decisions taken at the header, held for the rest of the packet
        to_isa = Signal()
        to_nvls = Signal()
        cur_drop = Signal()
        cur_isa = Signal()
        cur_nvls = Signal()
        m.d.comb += [
            cur_drop.eq(bad),
            cur_isa.eq(hdr.inc),
        ]
        with m.If(in_packet):
            m.d.comb += [cur_drop.eq(drop), cur_isa.eq(to_isa)]
        if self._nvls:
            # Without NVLS there is no such state at all (not even one no reset reaches).
            m.d.comb += cur_nvls.eq(Mux(in_packet, to_nvls, nvls))

        # Each output is a register stage; the packet's route picks the one ``i`` waits for.
        outs = {"isa": self.isa, "core": self.core, **({"nvls": self.nvls} if self._nvls else {})}
        regs = {}
        for name, out in outs.items():
            reg = m.submodules[f"{name}_out"] = StreamRegister(p.flit_layout)
            connect(m, reg.o, flipped(out))
            m.d.comb += reg.i.payload.eq(self.i.payload)
            regs[name] = reg.i
        nvls_take = regs["nvls"].ready if self._nvls else 0
        with m.If(cur_drop):
            m.d.comb += self.i.ready.eq(1)
        with m.Elif(cur_isa):
            m.d.comb += self.i.ready.eq(regs["isa"].ready)
        with m.Elif(cur_nvls):
            m.d.comb += self.i.ready.eq(nvls_take)
        with m.Else():
            m.d.comb += self.i.ready.eq(regs["core"].ready)

        accept = self.i.valid & self.i.ready
        with m.If(accept):
            m.d.sync += in_packet.eq(~self.i.payload.last)
            with m.If(~in_packet):
                m.d.sync += [drop.eq(bad), to_isa.eq(hdr.inc)]
                if self._nvls:
                    m.d.sync += to_nvls.eq(nvls)
                m.d.comb += [
                    self.error.bad_opcode.eq(bad_opcode),
                    self.error.bad_length.eq(bad_length),
                    self.error.bad_dst.eq(bad_dst),
                ]
        keep = accept & ~cur_drop
        m.d.comb += [regs["isa"].valid.eq(keep & cur_isa),
                     regs["core"].valid.eq(keep & ~cur_isa & ~cur_nvls)]
        if self._nvls:
            m.d.comb += regs["nvls"].valid.eq(keep & ~cur_isa & cur_nvls)
        return m
