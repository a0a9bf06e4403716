"""Formal harness of the switch port's PacketFilter: header checks, whole-packet drop, INC demux."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...hdl.packet import FabricParams, MsgClass, Opcode, OPCODE_CLASS
from ...hdl.params import check_choice, check_int
from ...hdl.switch.filter import PacketFilter, error_layout
from ...hdl.transport import packet_signature
from .properties import check_broken, OpenBlock, Properties, stream_contract


__all__ = ["PacketFilterHarness"]


class PacketFilterHarness(wiring.Component):
    """:class:`~scin.hdl.switch.filter.PacketFilter` of one message class, with its properties.

    The environment offers any flits on ``i`` (keeping the stream contract: any headers, good or
    malformed, any packet lengths whatever the header's ``length`` says, any idle cycles) and
    takes each output with any ``ready`` pattern. The harness frames the input by its transfers
    alone (a *header* is the first flit after a ``last`` flit, or after reset) and classifies each
    header by the block's contract, written out here on its own: ``bad_opcode`` (an opcode that
    does not travel in this class, or a ``msg_class`` field that is not this class),
    ``bad_length`` (``length > max_payload`` for an opcode whose length counts bytes, all but
    ``ATOMIC_ADD``), ``bad_dst`` (``inc = 0`` and ``dst >= ports``), the first that applies. A
    packet is *dropped* when its header is malformed; a good one is bound to ``isa`` when its
    header's ``inc`` is 1, else to ``core``.

    Specification:

    * ``errors_count_bad_headers``: the ``error`` pulses are exactly the header's kind, in the
      cycle its header is taken, and zero in every other cycle: each malformed packet is counted
      once, under its first kind, and nothing else is.
    * ``bad_packet_dropped_whole``: no flit of a dropped packet, header through ``last``, reaches
      either output (the cycle after it is taken, neither output register has been loaded).
    * ``demux_by_inc``: every flit of a good packet is on the output its header's ``inc`` names,
      unchanged, in the cycle after it is taken: a good packet passes whole, in order, to the
      right side, also right after a malformed one.
    * ``nothing_made_up``: an output register is loaded only with a flit of a good packet bound
      to it (nothing duplicated, nothing sent to the other side).
    * ``flow_control``: ``i.ready`` is 1 for a flit of a dropped packet (a malformed packet is
      consumed at one flit per cycle, whatever the outputs do), and for a good packet's flit is
      exactly "its output register is empty or being emptied".
    * ``isa_contract``, ``core_contract``: each output keeps the stream contract.

    Invariants (read inside the filter): its framing register and its per-packet drop and
    destination registers equal the harness's.

    Covers: ``dropped_bad_opcode``, ``dropped_bad_length``, ``dropped_bad_dst`` (a header of
    each kind counted), ``dropped_with_payload`` (a payload flit of a dropped packet consumed),
    ``good_after_bad`` (the last flit of a good packet of two flits or more, right after a
    dropped packet, forwarded), ``isa_receives_packet``, ``core_receives_packet`` (a packet's
    ``last`` flit delivered on each output).

    Parameters
    ----------
    msg_class : str
        The class the filter serves (a :class:`MsgClass` name).
    ports : int
        Switch ports: 3 (the default) leaves ``dst`` values that name no port, so ``bad_dst``
        can happen (with 2, the 1-bit ``dst`` always names a port).
    invariants : bool
        State the invariants (for k-induction); broken variants leave them out.
    broken : None or str
        A deliberately broken variant (:meth:`OpenBlock.tie`): ``"drop_not_held"``, the per-packet
        drop register tied to 0, so a malformed packet's payload flits are forwarded
        (``bad_packet_dropped_whole`` or ``flow_control`` must fail: which one the solver trips
        first depends on the opcode table); ``"length_unchecked"``, the filter's "this
        opcode's length counts bytes" decision tied to 0, so no length is checked
        (``errors_count_bad_headers`` must fail); ``"framing_lost"``, the
        in-packet register tied to 0, so every flit is checked as a header
        (``errors_count_bad_headers``, ``flow_control`` or ``demux_by_inc`` must fail);
        ``"inc_not_held"``, the per-packet destination register tied to 0, so the payload of an
        INC=1 packet is steered to the core (``demux_by_inc`` or ``flow_control``, which sees the
        payload flit wait on the wrong output, must fail).

    Members
    -------
    i : In(packet_signature)
    isa : Out(packet_signature)
    core : Out(packet_signature)
    error : Out(error_layout(1))
    """

    BROKEN = ("drop_not_held", "length_unchecked", "framing_lost", "inc_not_held")

    def __init__(self, *, msg_class="REQ", ports=3, invariants=True, broken=None):
        check_choice("msg_class", msg_class, tuple(c.name for c in MsgClass))
        check_int("ports", ports, 2, 8)
        check_broken(broken, self.BROKEN)
        self._fabric = FabricParams.default_for(64, ports=ports)
        self._cls = MsgClass[msg_class]
        self._broken = broken
        self.properties = Properties(invariants=invariants)
        pkt = packet_signature(self._fabric)
        super().__init__({"i": In(pkt), "isa": Out(pkt), "core": Out(pkt),
                          "error": Out(error_layout(1))})

    def elaborate(self, platform):
        m = Module()
        p, f = self.properties, self._fabric
        fo = self._attach(m, platform)

        i = self.i
        kinds = self._classify(m)
        bad = kinds.any()
        hdr_inc = data.View(f.header_layout, i.payload.data[:f.header_layout.size]).inc

        # The harness's framing: the packet in progress, its drop decision and its side.
        xfer = i.valid & i.ready
        in_pkt, drop, to_isa = Signal(), Signal(), Signal()
        with m.If(xfer):
            m.d.sync += in_pkt.eq(~i.payload.last)
            with m.If(~in_pkt):
                m.d.sync += [drop.eq(bad), to_isa.eq(hdr_inc)]
        cur_drop, cur_isa = Signal(), Signal()
        m.d.comb += [cur_drop.eq(Mux(in_pkt, drop, bad)), cur_isa.eq(Mux(in_pkt, to_isa, hdr_inc))]

        err = Cat(self.error.bad_opcode, self.error.bad_length, self.error.bad_dst)
        p.spec(m, "errors_count_bad_headers", err == Mux(xfer & ~in_pkt, kinds, 0))

        isa_take = self.isa.ready | ~self.isa.valid
        core_take = self.core.ready | ~self.core.valid
        p.spec(m, "flow_control",
               ~i.valid | (i.ready == (cur_drop | Mux(cur_isa, isa_take, core_take))))

        # What was taken last cycle, and whether each output register could be loaded then.
        fwd_isa, fwd_core, dropped = Signal(), Signal(), Signal()
        m.d.comb += [fwd_isa.eq(xfer & ~cur_drop & cur_isa),
                     fwd_core.eq(xfer & ~cur_drop & ~cur_isa),
                     dropped.eq(xfer & cur_drop)]
        was_isa, was_core, was_dropped = Signal(), Signal(), Signal()
        was_flit = Signal.like(i.payload)
        was_isa_take, was_core_take = Signal(), Signal()
        m.d.sync += [was_isa.eq(fwd_isa), was_core.eq(fwd_core), was_dropped.eq(dropped),
                     was_flit.eq(i.payload), was_isa_take.eq(isa_take),
                     was_core_take.eq(core_take)]
        # An output register was loaded last cycle: it could take a flit then, and is valid now.
        loaded_isa = was_isa_take & self.isa.valid
        loaded_core = was_core_take & self.core.valid
        p.spec(m, "bad_packet_dropped_whole", ~was_dropped | ~(loaded_isa | loaded_core))
        for out, was in ((self.isa, was_isa), (self.core, was_core)):
            p.spec(m, "demux_by_inc",
                   ~was | (out.valid & (out.payload.as_value() == was_flit.as_value())))
        p.spec(m, "nothing_made_up", ~loaded_isa | was_isa)
        p.spec(m, "nothing_made_up", ~loaded_core | was_core)

        p.invariant(m, "framing_matches", fo.probe("in_packet") == in_pkt)
        p.invariant(m, "decisions_match",
                    (fo.probe("drop") == drop) & (fo.probe("to_isa") == to_isa))

        # Covers.
        p.cover(m, "dropped_bad_opcode", self.error.bad_opcode)
        p.cover(m, "dropped_bad_length", self.error.bad_length)
        p.cover(m, "dropped_bad_dst", self.error.bad_dst)
        p.cover(m, "dropped_with_payload", dropped & in_pkt)
        after_bad = Signal()     # the packet in progress came right after a dropped one
        with m.If(xfer & ~in_pkt):
            m.d.sync += after_bad.eq(drop)
        p.cover(m, "good_after_bad", (fwd_isa | fwd_core) & in_pkt & after_bad & i.payload.last)
        p.cover(m, "isa_receives_packet", self.isa.valid & self.isa.ready & self.isa.payload.last)
        p.cover(m, "core_receives_packet",
                self.core.valid & self.core.ready & self.core.payload.last)
        return m

    def _attach(self, m, platform):
        """The filter (with the broken variant's register tied to 0, if any), its ports joined to
        the harness's, and the stream contract on each of its streams. Returns the open block."""
        p = self.properties
        flt = PacketFilter(self._fabric, self._cls)
        m.submodules.filter = fo = OpenBlock(flt, platform)
        broken_register = {"drop_not_held": "drop", "length_unchecked": "counts_bytes",
                           "framing_lost": "in_packet", "inc_not_held": "to_isa"}
        if self._broken:
            fo.tie(broken_register[self._broken], 0)
        connect(m, flipped(self.i), flt.i)
        connect(m, flt.isa, flipped(self.isa))
        connect(m, flt.core, flipped(self.core))
        m.d.comb += self.error.eq(flt.error)
        stream_contract(m, p, self.i, "i", drives="environment")
        stream_contract(m, p, self.isa, "isa", drives="block")
        stream_contract(m, p, self.core, "core", drives="block")
        return fo

    def _classify(self, m):
        """The kind of the flit on ``i`` read as a header: (bad_opcode, bad_length, bad_dst), at
        most one of them set."""
        f, cls = self._fabric, self._cls
        hdr = data.View(f.header_layout, self.i.payload.data[:f.header_layout.size])
        ops = [op for op, c in OPCODE_CLASS.items() if c == cls]
        byte_ops = [op for op in ops if op != Opcode.ATOMIC_ADD]
        known = Signal()
        counts_bytes = Signal()
        m.d.comb += [
            known.eq((hdr.msg_class == cls)
                     & (Cat(hdr.opcode == op for op in ops).any() if ops else Const(0))),
            counts_bytes.eq(Cat(hdr.opcode == op for op in byte_ops).any() if byte_ops
                            else Const(0)),
        ]
        too_long = counts_bytes & (hdr.length > f.max_payload)
        no_port = ~hdr.inc & (hdr.dst >= f.ports)
        kinds = Signal(3)
        m.d.comb += kinds.eq(Cat(~known, known & too_long, known & ~too_long & no_port))
        return kinds
