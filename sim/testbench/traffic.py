"""Packet-level helpers for the testbenches and models: build packets as flit payloads, split
received flits back into packets, and make seeded random traffic.

A flit payload on a packet stream is an integer laid out as ``params.flit_layout`` (``data``,
then ``last``); it is packed and unpacked only through :mod:`scin.hdl.codec`.
"""

from scin.hdl.codec import pack, unpack
from scin.hdl.packet import Opcode, MsgClass, OPCODE_CLASS, PAYLOAD_OPCODES


__all__ = ["flit", "flit_data", "is_last", "make_packet", "split_packets", "header_of",
           "random_packet", "train_pieces", "INTERESTING_LENGTHS", "CLASS_OPCODE"]

#: A representative opcode per class.
CLASS_OPCODE = {MsgClass.REQ: Opcode.READ, MsgClass.WRITE: Opcode.WRITE,
                MsgClass.RDATA: Opcode.READ_RESP, MsgClass.WRESP: Opcode.WRITE_RESP}


def INTERESTING_LENGTHS(params):
    """Payload lengths worth naming: empty, one byte, one flit, odd (37 B), flit+-1, the maximum."""
    fb = params.flit_bytes
    return sorted({0, 1, fb - 1, fb, fb + 1, 37, 2 * fb + 5, params.max_payload - 1,
                   params.max_payload})


def flit(params, data, last):
    """One flit payload: ``data`` (must fit in ``flit_width`` bits) and the ``last`` flag."""
    return pack(params.flit_layout, data=data, last=int(bool(last)))


def flit_data(params, item):
    """The ``data`` field of a flit payload."""
    return unpack(params.flit_layout, item)["data"]


def is_last(params, item):
    """Whether a flit payload ends its packet."""
    return bool(unpack(params.flit_layout, item)["last"])


def make_packet(params, *, opcode, length=0, payload_seed=0, msg_class=None, payload_flits=None,
                **fields):
    """A packet as a list of flit payloads. ``msg_class`` defaults to the opcode's class (pass a
    wrong one to make a malformed header); ``payload_flits`` defaults to what the length implies
    (so framing by ``last`` always holds). Payload bytes are a function of ``payload_seed``."""
    opcode_value = int(getattr(opcode, "value", opcode))
    if msg_class is None:
        msg_class = OPCODE_CLASS[Opcode(opcode_value)]
    header = params.pack_header(opcode=opcode_value, msg_class=msg_class, length=length, **fields)
    if payload_flits is None:
        payload_flits = params.payload_flits(opcode_value, length) \
            if opcode_value in {o.value for o in Opcode} else 0
    flits = [header]
    nbytes = length
    for k in range(payload_flits):
        take = min(params.flit_bytes, max(nbytes, 0))
        # Distinct, recognisable bytes; the unused tail of the last flit stays zero.
        word = int.from_bytes(bytes(((payload_seed * 131 + k * 37 + b) & 0xFF)
                                    for b in range(take)), "little")
        nbytes -= take
        flits.append(word)
    return [flit(params, d, i == len(flits) - 1) for i, d in enumerate(flits)]


def train_pieces(params, addr, flits):
    """The pieces a ``READ_WAVE`` of ``flits`` flits at ``addr`` is answered in (docs/PROTOCOL.md):
    ``(address, bytes)`` each, the range cut at every multiple of ``params.train_piece_bytes``;
    piece ``j``'s response carries the request's tag plus ``j``. The software twin of
    :class:`~scin.hdl.endpoint.read_train.ReadTrainSplitter` (for a good request)."""
    piece = params.train_piece_bytes
    out, end = [], addr + flits * params.flit_bytes
    while addr < end:
        stop = min(end, (addr // piece + 1) * piece)
        out.append((addr, stop - addr))
        addr = stop
    return out


def split_packets(params, items):
    """Split a list of received flit payloads into packets (lists of flits) at ``last`` flits;
    an unterminated tail is returned as a final partial packet."""
    packets, cur = [], []
    for item in items:
        cur.append(item)
        if is_last(params, item):
            packets.append(cur)
            cur = []
    if cur:
        packets.append(cur)
    return packets


def header_of(params, packet):
    """The header of a packet (a list of flit payloads) as a dict of integers. The header flit's
    bits above the header must be zero (the codec refuses a wider value)."""
    return unpack(params.header_layout, flit_data(params, packet[0]))


def random_packet(params, rng, msg_class, *, lengths=None, **fields):
    """A well-formed random packet of a class; payload classes draw their length from ``lengths``
    (default: :func:`INTERESTING_LENGTHS`)."""
    opcode = CLASS_OPCODE[MsgClass(msg_class)]
    if opcode in PAYLOAD_OPCODES:
        length = rng.choice(lengths or INTERESTING_LENGTHS(params))
    else:
        length = rng.randrange(0, params.max_payload + 1) if opcode == Opcode.READ else 0
    fields.setdefault("tag", rng.randrange(1 << params.tag_width))
    fields.setdefault("addr", rng.randrange(1 << params.addr_width))
    return make_packet(params, opcode=opcode, length=length, payload_seed=rng.randrange(1 << 16),
                       **fields)
