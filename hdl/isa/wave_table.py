"""WaveTable: every participant's wave table (block RAM) and the read responses that fill it."""

from amaranth.hdl import Module, Signal, Array, Mux, Cat, Const
from amaranth.lib import wiring, stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..codec import pack
from ..packet import Opcode, Status
from ..transport import packet_signature
from ..params import check_type
from .descriptor import IsaParams, ReadKind, read_tag_layout
from .interfaces import (arm_layout, block_counters_layout, RunControl, ReadStatus,
                         WaveTableRead)


__all__ = ["WaveTable", "arm_layout", "read_tag"]


def read_tag(params, slot, kind, seq):
    """The tag (an integer) of the read request for ``slot``'s ``kind`` packet (:class:`ReadKind`),
    issued as the slot's issue number ``seq`` (kept modulo ``2**read_seq_bits``), packed with
    :func:`~.descriptor.read_tag_layout`."""
    return pack(read_tag_layout(params), kind=ReadKind(kind), slot=slot,
                seq=seq & ((1 << params.read_seq_bits) - 1))


class WaveTable(wiring.Component):
    """Per-participant data and scale tables, written by read responses in any order.

    The table of port ``p`` holds ``slots`` slots of ``slot_flits`` data flits and
    ``scale_flits_per_slot`` scale flits, in ``lib.memory.Memory`` (block RAM). A read response's
    tag names its place: ``tag = slot << 1 | kind`` (:func:`read_tag`), so responses from different
    participants and slots may arrive in any order and are written straight where they belong.

    Arming a slot (``arm``, pulse) declares which ports' data (and, for INT8, scale) packets it
    expects, the issue number their tags carry (``seq``), and clears its progress; the rest of a
    packet still being stored into the slot (a response longer than a slot) is dropped. Each
    expected response is accepted once: a response whose opcode is not ``READ_RESP``, whose slot does not
    exist, whose ``seq`` is not the slot's current issue number (a late response) or whose (slot,
    kind, port) is not expected (unknown tag, or a duplicate) is dropped whole and counted in
    ``counters.unknown_tags``. A response with a non-``OK`` status is stored (its data is whatever
    came) and sets the sticky ``status.error`` (cleared by ``run.clear_error``).

    Progress is per flit, so the feeder can start reducing a slot before it is complete
    (cut-through): for ``rd.slot``, ``rd.avail[p]`` is the number of data flits of port ``p``
    already written (``slot_flits`` once the response has ended: a short or failed response can
    never stall the feeder) and ``rd.scales_done[p]`` says port ``p``'s scale packet has ended.

    Reads are synchronous: ``rd.data[p]`` / ``rd.scale[p]`` show the flits at (``rd.slot``,
    ``rd.flit`` / ``rd.scale_flit``) of the previous cycle in which ``rd.en`` was high, and hold
    while ``rd.en`` is low.

    Members
    -------
    rdata : In(packet_signature).array(ports)
        The ISA's RDATA-class receive stream of each port (never back-pressured).
    arm : In(stream.Signature(arm_layout, always_ready=True))
    rd : In(WaveTableRead)
        The feeder's read port.
    run : In(RunControl)
        ``flush`` disarms every slot (the rest of a packet being received is dropped);
        ``clear_error`` clears ``status.error``.
    status : Out(ReadStatus)
        ``error``: sticky non-``OK`` response; ``progress``: a response flit was accepted.
    counters : Out(unknown_tags)
    """

    def __init__(self, params):
        self._params = check_type("params", params, IsaParams)
        f = params.fabric
        super().__init__({
            "rdata":    In(packet_signature(f)).array(f.ports),
            "arm":      In(stream.Signature(arm_layout(params), always_ready=True)),
            "rd":       In(WaveTableRead(params)),
            "run":      In(RunControl(params)),
            "status":   Out(ReadStatus()),
            "counters": Out(block_counters_layout("unknown_tags")),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        f = p.fabric
        n = f.ports
        slots, sf, ssf = p.slots, p.slot_flits, p.scale_flits_per_slot
        hdr_layout = f.header_layout

        def per_slot(name, shape):
            return Array(Array(Signal(shape, name=f"{name}_s{s}_p{i}") for i in range(n))
                         for s in range(slots))
        count = per_slot("count", range(sf + 1))
        data_done = per_slot("data_done", 1)
        scale_done = per_slot("scale_done", 1)
        expect_data = per_slot("expect_data", 1)
        expect_scale = per_slot("expect_scale", 1)
        slot_seq = Array(Signal(p.read_seq_bits, name=f"seq_s{s}") for s in range(slots))

        rd, flush = self.rd, self.run.flush
        with m.If(self.run.clear_error):
            m.d.sync += self.status.error.eq(0)

        unknown_terms = []
        progress_terms = []
        receiving = []                                # per port: (keep, slot this cycle)
        for i in range(n):
            m.submodules[f"data{i}"] = dmem = Memory(shape=f.flit_width, depth=slots * sf, init=[])
            m.submodules[f"scale{i}"] = smem = Memory(shape=f.flit_width, depth=slots * ssf, init=[])
            dwr, swr = dmem.write_port(), smem.write_port()
            drd, srd = dmem.read_port(), smem.read_port()
            m.d.comb += [
                drd.addr.eq(rd.slot * sf + rd.flit), drd.en.eq(rd.en),
                srd.addr.eq(rd.slot * ssf + rd.scale_flit), srd.en.eq(rd.en),
                rd.data[i].eq(drd.data), rd.scale[i].eq(srd.data),
                rd.avail[i].eq(Mux(data_done[rd.slot][i], sf, count[rd.slot][i])),
                rd.scales_done[i].eq(scale_done[rd.slot][i]),
            ]

            rx = self.rdata[i]
            m.d.comb += rx.ready.eq(1)  # a wave table never pushes back: it has room by construction
            in_body = Signal(name=f"in_body{i}")
            keep = Signal(name=f"keep{i}")            # the current packet is being stored
            slot = Signal(p.slot_bits, name=f"slot{i}")
            kind = Signal(name=f"kind{i}")
            offset = Signal(range(sf + 1), name=f"offset{i}")

            hdr = Signal(hdr_layout, name=f"hdr{i}")
            m.d.comb += hdr.eq(rx.payload.data[:hdr_layout.size])
            tag = read_tag_layout(p)(hdr.tag)
            h_slot, h_seq = tag.slot, tag.seq
            h_kind = tag.kind == ReadKind.SCALE
            slot_ok = (h_slot < slots) if slots < (1 << p.slot_bits) else Const(1)
            h_known = Signal(name=f"known{i}")
            m.d.comb += h_known.eq((hdr.opcode == Opcode.READ_RESP) & slot_ok & ~flush
                                   & (h_seq == slot_seq[h_slot])
                                   & Mux(h_kind, expect_scale[h_slot][i], expect_data[h_slot][i]))

            def finish(s, k):
                with m.If(k):
                    m.d.sync += [scale_done[s][i].eq(1), expect_scale[s][i].eq(0)]
                with m.Else():
                    m.d.sync += [data_done[s][i].eq(1), expect_data[s][i].eq(0)]

            with m.If(rx.valid):
                m.d.sync += in_body.eq(~rx.payload.last)
                with m.If(~in_body):
                    m.d.sync += [keep.eq(h_known), slot.eq(h_slot), kind.eq(h_kind), offset.eq(0)]
                    with m.If(h_known):
                        with m.If(hdr.status != Status.OK):
                            m.d.sync += self.status.error.eq(1)
                        with m.If(rx.payload.last):
                            finish(h_slot, h_kind)
                with m.Elif(keep):
                    in_range = Mux(kind, offset < ssf, offset < sf)
                    m.d.comb += [
                        dwr.addr.eq(slot * sf + offset), dwr.data.eq(rx.payload.data),
                        dwr.en.eq(in_range & ~kind),
                        swr.addr.eq(slot * ssf + offset), swr.data.eq(rx.payload.data),
                        swr.en.eq(in_range & kind),
                    ]
                    m.d.sync += offset.eq(offset + 1)
                    with m.If(~kind & in_range):
                        m.d.sync += count[slot][i].eq(offset + 1)
                    with m.If(rx.payload.last):
                        finish(slot, kind)
            with m.If(flush):
                # Abort: drop the rest of the packet being received (framing goes on above).
                m.d.sync += keep.eq(0)
            receiving.append((keep, Mux(rx.valid & ~in_body, h_slot, slot)))
            unknown_terms.append(rx.valid & ~in_body & ~h_known)
            progress_terms.append(rx.valid & Mux(in_body, keep & ~flush, h_known))

        unknown_tags = self.counters.unknown_tags
        m.d.sync += unknown_tags.eq(unknown_tags + sum(unknown_terms))
        m.d.comb += self.status.progress.eq(Cat(progress_terms).any())

        with m.If(self.arm.valid):
            s = self.arm.payload.slot
            for i in range(n):
                want = self.arm.payload.mask[i]
                m.d.sync += [
                    count[s][i].eq(0),
                    data_done[s][i].eq(~want),
                    scale_done[s][i].eq(~(want & self.arm.payload.scales)),
                    expect_data[s][i].eq(want),
                    expect_scale[s][i].eq(want & self.arm.payload.scales),
                ]
                # A fresh start: drop the rest of a response longer than a slot, whose `last`
                # would end the new use (docs/VERIFICATION.md, what the flow found).
                keep, slot_now = receiving[i]
                with m.If(slot_now == s):
                    m.d.sync += keep.eq(0)
            m.d.sync += slot_seq[s].eq(self.arm.payload.seq)
        with m.If(flush):
            # After the arming above, so a flush wins (the issuer does not arm while flushing).
            for s in range(slots):
                for i in range(n):
                    m.d.sync += [expect_data[s][i].eq(0), expect_scale[s][i].eq(0)]
        return m
