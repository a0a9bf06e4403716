"""The packet format: docs/PROTOCOL.md against hdl/packet.py, parameter checks, software packing."""

import re

import pytest

from scin.hdl.packet import FabricParams, MsgClass, Opcode, OPCODE_CLASS, PAYLOAD_OPCODES, Status
from scin.sim.toolchain import REPO_ROOT


def _doc_tables():
    """Every markdown table of PROTOCOL.md, keyed by its header row's first cell."""
    tables, current = {}, None
    for line in (REPO_ROOT / "docs" / "PROTOCOL.md").read_text().splitlines():
        if line.startswith("|"):
            cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            if current is None:
                current = tables.setdefault(cells[0], [])
            elif not re.fullmatch(r"-+", cells[0]):
                current.append(cells)
        else:
            current = None
    return tables


def test_header_table_matches_layout():
    rows = _doc_tables()["field"]
    layout = FabricParams().header_layout
    expected = [(name, field.offset, field.offset + field.width - 1, field.width)
                for name, field in layout]
    documented = [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows]
    assert documented == expected


def test_opcode_table_matches_enum():
    rows = _doc_tables()["opcode"]
    documented = {r[0]: (int(r[1]), r[2], r[3] != "none") for r in rows}
    expected = {op.name: (op.value, OPCODE_CLASS[op].name, op in PAYLOAD_OPCODES) for op in Opcode}
    assert documented == expected


def test_class_and_status_tables_match_enums():
    tables = _doc_tables()
    assert {r[0]: int(r[1]) for r in tables["class"]} == {c.name: c.value for c in MsgClass}
    assert {r[0]: int(r[1]) for r in tables["status"]} == {s.name: s.value for s in Status}


def test_pack_unpack_round_trip():
    p = FabricParams()
    fields = dict(opcode=Opcode.WRITE.value, msg_class=MsgClass.WRITE.value, inc=1, status=0,
                  src=3, dst=2, length=4096, tag=0xBEEF, addr=(1 << 48) - 32)
    assert p.unpack_header(p.pack_header(**fields)) == fields


def test_payload_flits():
    p = FabricParams()
    assert p.payload_flits(Opcode.WRITE, 0) == 0
    assert p.payload_flits(Opcode.WRITE, 1) == 1
    assert p.payload_flits(Opcode.READ_RESP, 37) == 2
    assert p.payload_flits(Opcode.WRITE, 4096) == 128
    assert p.payload_flits(Opcode.READ, 4096) == 0
    assert p.max_packet_flits == 129


@pytest.mark.parametrize("kwargs, message", [
    (dict(flit_width=96), r"flit_width must be 64, 128, 256 or 512, not 96"),
    (dict(ports=1), r"ports must be an integer between 2 and 16, not 1"),
    (dict(ports=17), r"ports must be an integer between 2 and 16, not 17"),
    (dict(max_payload=100),
     r"max_payload must be a multiple of the flit size \(32 bytes\), not 100"),
    (dict(flit_width=64), r"the header needs 95 bits and does not fit in a 64-bit flit"),
    (dict(addr_width=8), r"addr_width must be an integer between 16 and 64, not 8"),
])
def test_bad_parameters_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FabricParams(**kwargs)


def test_non_integer_parameter_is_rejected():
    with pytest.raises(TypeError, match=r"tag_width must be an integer, not '16'"):
        FabricParams(tag_width="16")


def test_small_flit_configuration_fits():
    p = FabricParams(flit_width=64, port_bits=3, tag_width=10, addr_width=24, ports=8)
    assert p.header_layout.size <= 64


def test_pack_header_rejects_overflowing_field():
    with pytest.raises(ValueError, match=r"^field dst = 16 does not fit in 4 bits$"):
        FabricParams().pack_header(dst=16)
