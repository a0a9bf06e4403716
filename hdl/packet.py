"""Packet format of the SCIN fabric: flits, headers, opcodes, message classes.

Every block of the fabric (links, switch port, switch core, ISA, endpoints) imports its layouts from
here, and so do the testbenches, so a field is never sliced out of raw bits in two places.
``docs/PROTOCOL.md`` carries the bit-level table; ``tb/unit/test_packet.py`` checks that table
against the layouts built here.

A *packet* is one header flit followed by ``payload_flits(length)`` payload flits. The header sits
in the low bits of its flit; the rest of the header flit is zero. Payload byte ``k`` of a packet is
byte ``k % flit_bytes`` (little-endian: byte 0 in bits 0-7) of payload flit ``k // flit_bytes``; the
unused bytes of a short last flit are zero. On every stream a flit travels with a ``last`` bit that
marks the final flit of its packet, so framing never depends on a header being well formed.
"""

from dataclasses import dataclass

from amaranth.hdl import unsigned
from amaranth.lib import data, enum
from amaranth.utils import bits_for, ceil_log2

from .paper import FLIT_WIDTH, PORTS


__all__ = ["MsgClass", "Opcode", "Status", "FabricParams", "OPCODE_CLASS", "NUM_CLASSES"]


class MsgClass(enum.Enum, shape=2):
    """Message class. Each class has its own queue and its own credits on every link, so a stalled
    class (say, requests waiting for a busy memory) can never block another (the responses that
    would unblock it). This is the usual protocol-deadlock rule of UALink/AXI-like transports."""
    REQ   = 0  #: requests without payload: reads, atomics
    WRITE = 1  #: write requests with their data
    RDATA = 2  #: read responses with their data
    WRESP = 3  #: write and atomic responses, without payload


NUM_CLASSES = len(MsgClass)


class Opcode(enum.Enum, shape=4):
    """Packet opcode. Encodings not listed here are *unknown*: a switch port drops such a packet
    whole and counts it."""
    READ       = 1  #: read ``length`` bytes at ``addr``; header only; answered by READ_RESP
    WRITE      = 2  #: write the payload (``length`` bytes) at ``addr``; answered by WRITE_RESP
    READ_RESP  = 3  #: read data (``length`` bytes) for the request with the same ``tag``
    WRITE_RESP = 4  #: completion of a WRITE or ATOMIC_ADD with the same ``tag``
    ATOMIC_ADD = 5  #: add ``length`` to the 32-bit word at ``addr`` (arrival flags); header only
    #: read ``length`` *flits* at ``addr``; header only; answered by a train of READ_RESPs, one
    #: per piece of the range cut at the 4 KB (max-payload) boundaries, tags ``tag + j``
    READ_WAVE  = 6
    #: as WRITE, but answered by nothing: a failure is reported by the next WRITE's WRITE_RESP
    WRITE_POSTED = 7


#: The message class every opcode travels in. A header whose class disagrees is malformed.
OPCODE_CLASS = {
    Opcode.READ:       MsgClass.REQ,
    Opcode.ATOMIC_ADD: MsgClass.REQ,
    Opcode.READ_WAVE:  MsgClass.REQ,
    Opcode.WRITE:      MsgClass.WRITE,
    Opcode.WRITE_POSTED: MsgClass.WRITE,
    Opcode.READ_RESP:  MsgClass.RDATA,
    Opcode.WRITE_RESP: MsgClass.WRESP,
}

#: Opcodes whose packets carry ``payload_flits(length)`` payload flits; the others are header only.
PAYLOAD_OPCODES = frozenset({Opcode.WRITE, Opcode.WRITE_POSTED, Opcode.READ_RESP})


class Status(enum.Enum, shape=3):
    """Response status, carried in the header of READ_RESP and WRITE_RESP (AXI ``resp`` values in
    the low two bits)."""
    OK     = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


@dataclass(frozen=True)
class FabricParams:
    """Parameters shared by every block of one fabric instance.

    Parameters
    ----------
    flit_width : int
        Bits per flit: 64, 128, 256 (the prototype's 32-byte flit) or 512.
    ports : int
        Switch ports, 2 to 2**port_bits.
    port_bits : int
        Width of the ``src`` and ``dst`` header fields.
    addr_width : int
        Width of the byte address field.
    tag_width : int
        Width of the ``tag`` field. The ISA encodes (wave-table entry, packet offset) in it, so it
        must name every packet the ISA can have outstanding.
    max_payload : int
        Largest payload in bytes (4096 = one 128-flit AXI burst at 256-bit flits); a multiple of the
        flit size.

    Raises
    ------
    ValueError
        If a parameter is out of range, or if the header does not fit in one flit.
    """
    flit_width:  int = FLIT_WIDTH
    ports:       int = PORTS
    port_bits:   int = 4
    addr_width:  int = 48
    tag_width:   int = 16
    max_payload: int = 4096

    def __post_init__(self):
        from .params import check_choice, check_int
        check_choice("flit_width", self.flit_width, (64, 128, 256, 512))
        check_int("port_bits", self.port_bits, 1, 8)
        check_int("ports", self.ports, 2, 1 << self.port_bits)
        check_int("addr_width", self.addr_width, 16, 64)
        check_int("tag_width", self.tag_width, 1, 32)
        check_int("max_payload", self.max_payload, self.flit_bytes, 1 << 16)
        if self.max_payload % self.flit_bytes:
            raise ValueError(f"max_payload must be a multiple of the flit size "
                             f"({self.flit_bytes} bytes), not {self.max_payload!r}")
        if self.header_layout.size > self.flit_width:
            raise ValueError(f"the header needs {self.header_layout.size} bits and does not fit "
                             f"in a {self.flit_width}-bit flit; reduce addr_width, tag_width or "
                             f"port_bits")

    @classmethod
    def default_for(cls, flit_width=FLIT_WIDTH, ports=PORTS):
        """Sensible parameters for a flit width and port count: the prototype's field widths
        where they fit, narrower address and tag fields for 64-bit flits so the header fits."""
        port_bits = max(4, ceil_log2(ports)) if flit_width > 64 else max(1, ceil_log2(ports))
        if flit_width == 64:
            return cls(flit_width=64, ports=ports, port_bits=port_bits, addr_width=24,
                       tag_width=17 - 2 * port_bits, max_payload=4096)
        return cls(flit_width=flit_width, ports=ports, port_bits=port_bits)

    @property
    def flit_bytes(self):
        return self.flit_width // 8

    @property
    def max_payload_flits(self):
        return self.max_payload // self.flit_bytes

    @property
    def max_packet_flits(self):
        return 1 + self.max_payload_flits

    @property
    def length_width(self):
        """Width of the ``length`` field: enough for ``max_payload`` itself."""
        return bits_for(self.max_payload)

    @property
    def switch_port(self):
        """The switch's own fabric address, ``2**port_bits - 1``: the ``src`` of what the NVLS
        engine sends and the ``dst`` of the responses it collects (docs/NVLS.md). NVLS mode needs
        ``ports < 2**port_bits`` so that no endpoint has this number."""
        return (1 << self.port_bits) - 1

    @property
    def multicast_base(self):
        """The first multicast address: ``addr`` bit ``addr_width - 1`` set. An INC=0 READ,
        WRITE or ATOMIC_ADD to an address at or above it is an NVLS multimem access
        (docs/NVLS.md)."""
        return 1 << (self.addr_width - 1)

    @property
    def train_piece_bytes(self):
        """The pieces a ``READ_WAVE`` is answered in (docs/PROTOCOL.md): its range is cut at every
        multiple of this many bytes of the address, the largest power of two not above
        ``max_payload``, 4096 (the AXI 4 KB boundary) and 256 flits (the longest AXI4 burst):
        4096 from 128-bit flits up with the default ``max_payload``, 2048 with 64-bit flits."""
        limit = min(self.max_payload, 4096, 256 * self.flit_bytes)
        return 1 << (limit.bit_length() - 1)

    @property
    def header_layout(self):
        """The header, as a :class:`data.StructLayout`, LSB first."""
        return data.StructLayout({
            "opcode":    Opcode,
            "msg_class": MsgClass,
            "inc":       1,
            "status":    Status,
            "src":       self.port_bits,
            "dst":       self.port_bits,
            "length":    self.length_width,
            "tag":       self.tag_width,
            "addr":      self.addr_width,
        })

    @property
    def flit_layout(self):
        """One flit on a packet stream: ``data`` plus ``last`` (final flit of its packet)."""
        return data.StructLayout({"data": unsigned(self.flit_width), "last": 1})

    @property
    def link_layout(self):
        """One flit on a link: the flit and the message class (virtual channel) it travels in."""
        return data.StructLayout({"flit": self.flit_layout, "msg_class": MsgClass})

    def header_flit(self, header, last):
        """A header as a flit-stream payload value (``data`` = header, zero-extended; ``last``)."""
        from amaranth.hdl import Cat, Const, Value
        header = Value.cast(header)
        if isinstance(last, int):
            last = Const(last, 1)
        return Cat(header, Const(0, self.flit_width - len(header)), last)

    def payload_flits(self, opcode, length):
        """Number of payload flits after the header (Python-side helper for models and tests)."""
        if Opcode(opcode) not in PAYLOAD_OPCODES:
            return 0
        return -(-length // self.flit_bytes)

    # -- software packing, for models, testbenches and the CLI -----------------------------------

    def pack_header(self, **fields):
        """Return a header as an integer (the value of the header flit's ``data``).

        Fields not given are zero. Enum fields take the enum member or its value. A thin name for
        :func:`scin.hdl.codec.pack` of :attr:`header_layout`: an unknown field or a value that
        does not fit is a ``ValueError``.
        """
        from .codec import pack
        return pack(self.header_layout, fields)

    def unpack_header(self, value):
        """Inverse of :meth:`pack_header`: a dict of plain integers (:func:`scin.hdl.codec.unpack`;
        bits set above the header are a ``ValueError``)."""
        from .codec import unpack
        return unpack(self.header_layout, value)

    @property
    def port_index_width(self):
        return ceil_log2(self.ports) or 1


# -- completion flag ------------------------------------------------------------------------------
# The word the ISA writes to every participant's memory at the end of a collective, and that the
# accelerators poll: part of the protocol between switch and endpoints, like the header above.
# ``docs/ISA.md`` (Completion flag) carries its table; ``tb/unit/test_isa_descriptor.py`` checks it.

__all__ += ["FlagStatus", "flag_layout"]


class FlagStatus(enum.Flag, shape=8):
    """Status bits of a completion flag; 0 means the result is correct and complete."""
    OVERFLOW = 1  #: some result overflowed (+-Inf) or an INT8 output scale saturated
    INVALID  = 2  #: some input was NaN/Inf, or an INT8 input scale was negative or non-finite
    ERROR    = 4  #: bad descriptor, or an AXI error on a read or a write
    TIMEOUT  = 8  #: the watchdog ended the collective: some response never came


def flag_layout():
    """The 32-bit completion flag word, little-endian in the endpoint's memory. ``generation``
    counts the completed barriers of the descriptor's sync resource (1 for the first run);
    ``status`` holds :class:`FlagStatus` bits (0: the result is correct and complete)."""
    return data.StructLayout({"generation": 16, "status": 8, "reserved": 8})
