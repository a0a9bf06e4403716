"""Formal harness of the SwitchCore: routing by ``dst``, whole packets per output, per class."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...hdl.packet import FabricParams, MsgClass, NUM_CLASSES
from ...hdl.params import check_choice, check_int
from ...hdl.switch.core import SwitchCore
from ...hdl.transport import packet_signature
from .properties import check_broken, OpenBlock, Properties, stream_contract


__all__ = ["SwitchCoreHarness"]


class SwitchCoreHarness(wiring.Component):
    """:class:`~scin.hdl.switch.core.SwitchCore` of ``ports`` ports, with the properties of one
    message class.

    The environment offers packets on every input of class ``msg_class`` (keeping the stream
    contract; any ``dst``, including ones that name no port, any lengths) and takes every output
    with any ``ready`` pattern; the inputs of the other classes stay idle (the classes are
    separate copies of the same logic). The harness frames each input by its transfers and holds
    its packet's ``dst``.

    Specification (per input ``s`` and output ``d`` of the class):

    * ``routes_by_dst``: a flit taken from input ``s`` of a packet whose header named ``d`` is
      on output ``d``, unchanged, in the next cycle.
    * ``nothing_made_up``: an output register is loaded only with a flit taken for it.
    * ``bad_dst_discarded``: a packet whose ``dst`` names no port is consumed at one flit per
      cycle (and, by ``nothing_made_up``, reaches no output).
    * ``whole_packets_per_output``: once an output has taken a packet's first flit from an
      input, it takes from no other input until that packet's ``last`` flit.
    * ``o{d}_contract``: each output keeps the stream contract.

    Invariants (read inside the core): each input's framing and held ``dst``, and each output
    arbiter's lock, owner and round-robin pointer, equal the harness's.

    Covers: ``crossed`` (two packets cross, input 0 to output 1 and input 1 to output 0, in the
    same cycle), ``contended`` (two inputs want one output in the same cycle), ``u_turn`` (a
    packet goes back out of its own port), ``bad_dst_dropped``.

    Parameters
    ----------
    ports : int
        Switch ports (3 leaves ``dst`` values that name no port).
    msg_class : str
        The class checked (a :class:`MsgClass` name).
    invariants : bool
        State the invariants (for k-induction); broken variants leave them out.
    broken : None or str
        A deliberately broken variant (:meth:`OpenBlock.tie`): ``"dst_not_held"``, input 0's
        held ``dst`` tied to 0, so the payload of a packet for another port (or for none) goes to
        port 0 (``routes_by_dst``, ``nothing_made_up`` or ``bad_dst_discarded`` must fail).

    Members
    -------
    i : In(packet_signature).array(ports, NUM_CLASSES)
    o : Out(packet_signature).array(ports, NUM_CLASSES)
    """

    BROKEN = ("dst_not_held",)

    def __init__(self, *, ports=3, msg_class="REQ", invariants=True, broken=None):
        check_int("ports", ports, 2, 4)
        check_choice("msg_class", msg_class, tuple(c.name for c in MsgClass))
        check_broken(broken, self.BROKEN)
        self._fabric = FabricParams.default_for(64, ports=ports)
        self._cls = MsgClass[msg_class]
        self._broken = broken
        self.properties = Properties(invariants=invariants)
        sig = packet_signature(self._fabric)
        super().__init__({"i": In(sig).array(ports, NUM_CLASSES),
                          "o": Out(sig).array(ports, NUM_CLASSES)})

    def elaborate(self, platform):
        m = Module()
        p, f = self.properties, self._fabric
        n, c, layout = f.ports, self._cls.value, f.header_layout
        cls = self._cls.name.lower()
        co = self._attach(m, platform)
        ins = [self.i[s][c] for s in range(n)]
        outs = [self.o[d][c] for d in range(n)]

        # Per input: framing, the packet's dst, and where this cycle's flit goes.
        xfer, dst, in_pkt = [], [], []
        to = [[Signal(name=f"to{s}_{d}") for d in range(n)] for s in range(n)]
        dropped = []
        for s, i in enumerate(ins):
            hdr = data.View(layout, i.payload.data[:layout.size])
            x = i.valid & i.ready
            pkt, held = Signal(name=f"in_pkt{s}"), Signal(f.port_bits, name=f"dst_held{s}")
            with m.If(x):
                m.d.sync += pkt.eq(~i.payload.last)
                with m.If(~pkt):
                    m.d.sync += held.eq(hdr.dst)
            cur = Signal(f.port_bits, name=f"dst{s}")
            m.d.comb += cur.eq(Mux(pkt, held, hdr.dst))
            for d in range(n):
                m.d.comb += to[s][d].eq(x & (cur == d))
            bad = Signal(name=f"bad_dst{s}")
            m.d.comb += bad.eq(cur >= n)
            p.spec(m, "bad_dst_discarded", ~(i.valid & bad) | i.ready)
            dropped.append(x & bad)
            xfer.append(x)
            dst.append(cur)
            in_pkt.append(pkt)
            p.invariant(m, "framing_matches", co.probe(f"in_packet_{cls}_{s}") == pkt)
            p.invariant(m, "dst_matches", co.probe(f"dst_{cls}_{s}") == held)

        # Per output: what was taken for it last cycle, and its packet lock.
        for d, o in enumerate(outs):
            was_to = Signal(n, name=f"was_to{d}")
            was_flits = [Signal.like(ins[s].payload, name=f"was_flit{d}_{s}") for s in range(n)]
            was_take = Signal(name=f"was_take{d}")
            m.d.sync += [was_to.eq(Cat(to[s][d] for s in range(n))),
                         was_take.eq(o.ready | ~o.valid)]
            m.d.sync += [was_flits[s].eq(ins[s].payload) for s in range(n)]
            for s in range(n):
                p.spec(m, "routes_by_dst", ~was_to[s] | (
                    o.valid & (o.payload.as_value() == was_flits[s].as_value())))
            loaded = was_take & o.valid
            p.spec(m, "nothing_made_up", ~loaded | was_to.any())
            busy, owner = Signal(name=f"busy{d}"), Signal(range(n), name=f"owner{d}")
            for s in range(n):
                with m.If(to[s][d]):
                    m.d.sync += [busy.eq(~ins[s].payload.last), owner.eq(s)]
                p.spec(m, "whole_packets_per_output", ~(busy & to[s][d]) | (owner == s))
            for s in range(n):
                for t in range(s + 1, n):
                    p.spec(m, "whole_packets_per_output", ~(to[s][d] & to[t][d]))
            arb = f"arb_{cls}_{d}"
            p.invariant(m, "arbiters_match", (co.probe(f"{arb}.locked") == busy)
                        & (co.probe(f"{arb}.owner") == owner) & (co.probe(f"{arb}.last") == owner)
                        & (owner < n))

        # Covers.
        p.cover(m, "crossed", to[0][1] & to[1][0])
        p.cover(m, "contended", ins[0].valid & ins[1].valid & (dst[0] == dst[1]) & (dst[0] < n)
                & ~in_pkt[0] & ~in_pkt[1])
        p.cover(m, "u_turn", to[1][1] & ins[1].payload.last)
        p.cover(m, "bad_dst_dropped", Cat(dropped).any())
        return m

    def _attach(self, m, platform):
        """The core (with the broken variant's tie, if any), its ports joined to the harness's;
        assumed: the other message classes idle; the stream contract on the checked class's
        streams. Returns the open block."""
        p, f = self.properties, self._fabric
        n, c, cls = f.ports, self._cls.value, self._cls.name.lower()
        core = SwitchCore(f)
        m.submodules.core = co = OpenBlock(core, platform)
        if self._broken == "dst_not_held":
            co.tie(f"dst_{cls}_0", 0)
        for s in range(n):
            for k in range(NUM_CLASSES):
                connect(m, flipped(self.i[s][k]), core.i[s][k])
                connect(m, core.o[s][k], flipped(self.o[s][k]))
                if k != c:
                    p.assume(m, "other_classes_idle", ~self.i[s][k].valid)
        for s in range(n):
            stream_contract(m, p, self.i[s][c], f"i{s}", drives="environment")
        for d in range(n):
            stream_contract(m, p, self.o[d][c], f"o{d}", drives="block")
        return co
