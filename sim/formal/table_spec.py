"""The specification's side of a wave table's packet reception, shared by the ``wave_table`` and
``push_table`` harnesses: which packet a port is storing, into which slot, and what ends it."""

from types import SimpleNamespace

from amaranth.hdl import Signal


__all__ = ["packet_registers", "receive"]


def packet_registers(i, slot_shape, slot_flits):
    """Port ``i``'s packet registers: ``in_body`` (a packet's header has been seen, not its
    last flit), ``keep`` (the packet is stored), its ``slot``, ``kind`` (scales) and the
    ``offset`` of its next payload flit."""
    return SimpleNamespace(in_body=Signal(name=f"spec_body{i}"), keep=Signal(name=f"spec_keep{i}"),
                           slot=Signal(slot_shape, name=f"spec_slot{i}"),
                           kind=Signal(name=f"spec_kind{i}"),
                           offset=Signal(range(slot_flits + 1), name=f"spec_offset{i}"))


def receive(m, i, rx, t, reg, hit, h_slot, is_scale, slot_flits):
    """One flit of port ``i``'s stream ``rx`` into the specification: a header (``hit``: the
    packet is taken, into slot ``h_slot``, scales when ``is_scale``) starts a packet, a stored
    packet's data flits count into ``t.count`` up to ``slot_flits``, and its last flit ends it
    (``t.data_done`` / ``t.scale_done`` set, ``t.expect_data`` / ``t.expect_scale`` cleared);
    ``t`` holds per slot and port arrays, ``reg`` the port's :func:`packet_registers`."""
    def end(s, k):
        with m.If(k):
            m.d.sync += [t.scale_done[s][i].eq(1), t.expect_scale[s][i].eq(0)]
        with m.Else():
            m.d.sync += [t.data_done[s][i].eq(1), t.expect_data[s][i].eq(0)]

    with m.If(rx.valid):
        m.d.sync += reg.in_body.eq(~rx.payload.last)
        with m.If(~reg.in_body):
            m.d.sync += [reg.keep.eq(hit), reg.slot.eq(h_slot), reg.kind.eq(is_scale),
                         reg.offset.eq(0)]
            with m.If(hit & rx.payload.last):
                end(h_slot, is_scale)
        with m.Elif(reg.keep):
            m.d.sync += reg.offset.eq(reg.offset + 1)
            with m.If(~reg.kind & (reg.offset < slot_flits)):
                m.d.sync += t.count[reg.slot][i].eq(reg.offset + 1)
            with m.If(rx.payload.last):
                end(reg.slot, reg.kind)
