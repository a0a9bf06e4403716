"""The ISA's descriptor, flag and tag formats: docs/ISA.md against the layouts; parameter checks;
the software descriptor check."""

import re
from pathlib import Path

import pytest

from scin.hdl import isa as d
from scin.hdl.codec import pack, unpack
from scin.hdl.packet import FabricParams, flag_layout, FlagStatus
from scin.sim.toolchain import REPO_ROOT


def _tables(doc=Path("ISA.md")):
    tables, current = {}, None
    for line in (REPO_ROOT / "docs" / doc).read_text().splitlines():
        if line.startswith("|"):
            cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            if current is None:
                current = tables.setdefault(tuple(cells[:3]), [])
            elif not re.fullmatch(r"-+", cells[0]):
                current.append(cells)
        else:
            current = None
    return tables


def _layout_rows(layout):
    return [(name, field.offset, field.width) for name, field in layout]


def test_descriptor_table_matches_layout():
    rows = _tables()[("field", "lsb", "bits")]
    # The first field table is the descriptor's, the flag's follows it in the same form.
    documented = [(r[0], int(r[1]), int(r[2])) for r in rows]
    desc_rows = _layout_rows(d.descriptor_layout())
    flag_rows = _layout_rows(flag_layout())
    assert documented == desc_rows + flag_rows


def test_flag_is_protocol():
    # One definition, in hdl/packet.py; the ISA re-exports it.
    assert d.flag_layout is flag_layout and d.FlagStatus is FlagStatus


def test_status_bits_match_enum():
    rows = _tables()[("status bit", "value", "meaning")]
    assert {r[0]: int(r[1]) for r in rows} == {f.name: f.value for f in FlagStatus}


@pytest.mark.parametrize("enum", [d.Op, d.DType, d.FlagMode, d.ReadKind, d.PushMode],
                         ids=lambda e: e.__name__)
def test_encodings_match_the_doc(enum):
    """Every encoding docs/ISA.md lists ("`Op`: 1 ALLREDUCE, 2 REDUCE_SCATTER, ...") is the
    enumeration's: the encodings are the software interface, and swapping two values in the
    code would otherwise pass every test (the codec and the RTL share the enum), as
    `scin mutate` showed."""
    text = (REPO_ROOT / "docs" / "ISA.md").read_text()
    found = re.search(rf"`{enum.__name__}`: ([^|]*)\|", text)    # to the end of the cell
    assert found, f"docs/ISA.md lists no encodings of {enum.__name__}"
    documented = {name: int(value) for value, name in
                  re.findall(r"\b(\d+) ([A-Z][A-Z_0-9]*)\b", found.group(1))}
    assert documented == {member.name: member.value for member in enum}


def test_counter_table_matches_layout():
    rows = next(v for k, v in _tables().items() if k[0] == "counter")
    assert [r[0] for r in rows] == [name for name, _ in d.counters_layout()]


@pytest.mark.parametrize("which, layout", [
    ("read tag field", d.read_tag_layout),
    ("write tag field", d.write_tag_layout),
])
def test_tag_tables_match_layouts(which, layout):
    # docs/ISA.md gives the tags for the default parameters (16-bit tags, 8 slots).
    params = d.IsaParams()
    rows = _tables()[(which, "lsb", "bits")]
    assert [(r[0], int(r[1]), int(r[2])) for r in rows] == _layout_rows(layout(params))
    assert layout(params).size == params.fabric.tag_width


@pytest.mark.parametrize("fabric, capacity", [
    (FabricParams(), 32768),                                   # 8 slots: 3 slot bits
    (FabricParams(), 4096),                                    # 1 slot: still 1 slot bit
    (FabricParams(tag_width=10), 8192),                        # the narrowest legal tags
    (FabricParams.default_for(flit_width=64), 8192),       # 13-bit tags
])
def test_tag_layouts_fill_the_tag(fabric, capacity):
    p = d.IsaParams(fabric=fabric, capacity=capacity, waves=1)
    rt, wt = d.read_tag_layout(p), d.write_tag_layout(p)
    assert rt.size == wt.size == fabric.tag_width
    assert rt["slot"].width == p.slot_bits and rt["seq"].width == p.read_seq_bits
    assert wt["index"].width == d.WRITE_TAG_BITS and wt["seq"].width == p.write_seq_bits


GOOD = dict(op=d.Op.ALLREDUCE.value, dtype=0, sync=0, participants=0b1111, elements=2048,
            src_addr=0, dst_addr=0x10000, flag_addr=0x20000)


@pytest.mark.parametrize("change, reason", [
    (dict(op=0), "op 0 is not implemented"),
    (dict(op=7), "op 7 is not implemented"),
    (dict(op=d.Op.BROADCAST.value, root=4), "root 4 is not a rank of the 4 participants"),
    (dict(op=d.Op.REDUCE.value, participants=0b0101, root=2), "root 2 is not a rank of the 2"),
    # A shard must be whole flits (so every rank's shard starts on a flit): 24 FP16 = 48 bytes.
    (dict(op=d.Op.REDUCE_SCATTER.value, elements=24),
     "REDUCE_SCATTER shard of 24 elements is not a whole number of 32-byte flits"),
    (dict(op=d.Op.ALLGATHER.value, elements=8), "ALLGATHER shard of 8 elements"),
    (dict(op=d.Op.ALLGATHER.value, dtype=2, elements=128, src_addr=0x10000, src_scale_addr=0x100,
          dst_scale_addr=0x200), "INT8 in place needs the scales in place too"),
    (dict(participants=0), "participant set is empty"),
    (dict(participants=0b10001), "names ports beyond 3"),
    (dict(sync=8), "sync resource 8 is out of range"),
    (dict(elements=0), "length is zero"),
    (dict(elements=1 << 29), "exceeds the maximum"),
    (dict(dtype=2, elements=100), "not a whole number of 64-element blocks"),
    (dict(src_addr=0x11), "src_addr 0x11 is not 4096-byte aligned"),
    # Flit-aligned is not enough: a 4 KiB packet from here would cross a 4 KB boundary.
    (dict(dst_addr=0x10020), "dst_addr 0x10020 is not 4096-byte aligned"),
    (dict(dtype=2, elements=128, src_scale_addr=0x20040),
     "src_scale_addr 0x20040 is not 128-byte aligned"),
    (dict(flag_addr=0x2), "flag_addr 0x2 is not 4-byte aligned"),
    (dict(dtype=3), "dtype 3 is unknown"),
    (dict(mode=3), "mode 3 is unknown"),
    (dict(mode=d.PushMode.PUSH.value), "sync resource 0 has no push space (push_resources = 0)"),
])
def test_check_descriptor_names_the_problem(change, reason):
    params = d.IsaParams()
    assert check_ok(params)
    problems = check_descriptor_with(params, change)
    assert any(reason in p for p in problems), problems


def check_ok(params):
    return d.check_descriptor(GOOD, params) == []


def check_descriptor_with(params, change):
    return d.check_descriptor({**GOOD, **change}, params)


@pytest.mark.parametrize("kwargs, message", [
    (dict(capacity=3000),
     r"^capacity must be a power of two multiple of max_payload \(4096 bytes\), not 3000$"),
    (dict(capacity=32768, waves=3),
     r"^waves must divide the 8 slots of the wave table \(1 to 8\), not 3$"),
    (dict(waves=16), r"^waves must divide the 8 slots"),
    (dict(descriptors=0), r"^descriptors must be an integer between 1 and 256, not 0$"),
    (dict(sync_resources=300), r"^sync_resources must be an integer between 1 and 256, not 300$"),
    (dict(max_elements=0), r"^max_elements must be an integer between 1 and 4294967295, not 0$"),
    (dict(timeout=100),
     r"^timeout must be 0 \(no watchdog\) or between 256 and 2\*\*32-1 cycles, not 100$"),
    (dict(timeout=1 << 32), r"^timeout must be 0 \(no watchdog\) or between 256"),
    (dict(fabric=FabricParams(tag_width=8)),
     r"^tag_width 8 is too narrow for 8 slots: read and write tags need 9 bits"),
    # The datapath reduces 2 to 8 inputs: a bigger switch is refused here, naming the fabric's
    # ports, not at elaboration naming the datapath's n_inputs.
    (dict(fabric=FabricParams(ports=16)),
     r"^fabric\.ports must be an integer between 2 and 8, not 16$"),
    (dict(fabric=FabricParams(ports=9)),
     r"^fabric\.ports must be an integer between 2 and 8, not 9$"),
    (dict(fabric=FabricParams(ports=17, port_bits=5)),
     r"^fabric\.ports must be an integer between 2 and 8, not 17$"),
])
def test_bad_isa_parameters_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        d.IsaParams(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(capacity="32K"), r"^capacity must be an integer, not '32K'$"),
    (dict(max_elements=2.5), r"^max_elements must be an integer, not 2\.5$"),
    (dict(waves=2.0), r"^waves must be an integer, not 2\.0$"),
    (dict(descriptors=True), r"^descriptors must be an integer, not True$"),
    (dict(timeout=2048.0), r"^timeout must be an integer, not 2048\.0$"),
    (dict(fabric=256), r"^fabric must be a FabricParams, not 256$"),
    (dict(gather_pairs=1), r"^gather_pairs must be a bool, not 1$"),
])
def test_isa_parameters_of_the_wrong_type_are_rejected(kwargs, message):
    with pytest.raises(TypeError, match=message):
        d.IsaParams(**kwargs)


def test_the_largest_isa_is_accepted():
    p = d.IsaParams(fabric=FabricParams(ports=8))
    assert p.fabric.ports == 8


def test_watchdog_can_be_disabled_and_tags_have_sequence_bits():
    assert d.IsaParams(timeout=0).timeout == 0
    assert d.IsaParams().timeout == 1 << 16
    p = d.IsaParams()                      # 16-bit tags, 8 slots
    assert (p.read_seq_bits, p.write_seq_bits) == (12, 11)
    # The issue number is kept modulo 2**read_seq_bits; the layout puts slot, kind, seq LSB first
    # (slot lowest: a READ_WAVE train's responses carry the request's tag plus 0, 1, ...).
    tag = d.read_tag(p, slot=5, kind=d.ReadKind.SCALE, seq=(1 << 12) + 3)
    assert tag == 3 << 4 | 1 << 3 | 5
    assert unpack(d.read_tag_layout(p), tag) == {"kind": 1, "slot": 5, "seq": 3}
    assert d.read_tag(p, slot=5, kind=0, seq=3) + 2 == d.read_tag(p, slot=7, kind=0, seq=3)
    assert d.write_tag(p, (1 << 16) + (7 << 5) + 9) == pack(d.write_tag_layout(p), index=9, seq=7)
    with pytest.raises(ValueError, match="field slot = 8 does not fit in 3 bits"):
        d.read_tag(p, slot=8, kind=0, seq=0)


PUSH = d.IsaParams(push_resources=2, push_capacity=8192)


@pytest.mark.parametrize("change, reason", [
    (dict(mode=1, sync=2), "sync resource 2 has no push space (push_resources = 2)"),
    (dict(mode=1, elements=4097),
     "8194 bytes per participant exceed the push space (push_capacity = 8192)"),
    (dict(mode=1, op=d.Op.BARRIER.value), "BARRIER cannot be pushed"),
    # A ReduceScatter pushes its N shards: 4 x 1024 x 2 bytes fit, 4 x 1025 x 2 do not.
    (dict(mode=1, op=d.Op.REDUCE_SCATTER.value, elements=1025),
     "8200 bytes per participant exceed"),
])
def test_push_descriptors_that_cannot_push_are_bad(change, reason):
    assert check_ok(PUSH) and d.check_descriptor({**GOOD, "mode": 1}, PUSH) == []
    problems = check_descriptor_with(PUSH, change)
    assert any(reason in p for p in problems), problems


@pytest.mark.parametrize("change, mode", [
    (dict(mode=0), d.PushMode.PULL),
    (dict(mode=1), d.PushMode.PUSH),
    (dict(mode=2, elements=4096), d.PushMode.PUSH),          # 8 KiB: the whole space
    (dict(mode=2, elements=4097), d.PushMode.PULL),          # one element more
    (dict(mode=2, sync=2), d.PushMode.PULL),                 # no push space there
    (dict(mode=2, op=d.Op.BARRIER.value), d.PushMode.PULL),
    (dict(mode=2, op=d.Op.ALLGATHER.value), d.PushMode.PUSH),
    (dict(mode=2, op=d.Op.BROADCAST.value), d.PushMode.PUSH),
    (dict(mode=2, op=d.Op.REDUCE.value), d.PushMode.PUSH),
    (dict(mode=2, op=d.Op.REDUCE_SCATTER.value, elements=1024), d.PushMode.PUSH),
    (dict(mode=2, op=d.Op.REDUCE_SCATTER.value, elements=1025), d.PushMode.PULL),
])
def test_auto_pushes_what_it_can_under_the_threshold(change, mode):
    assert d.push_mode({**GOOD, **change}, PUSH) == mode
    low = d.IsaParams(push_resources=2, push_capacity=8192, push_threshold=1024)
    assert d.push_mode({**GOOD, "mode": 2, "elements": 512}, low) == d.PushMode.PUSH
    assert d.push_mode({**GOOD, "mode": 2, "elements": 513}, low) == d.PushMode.PULL


def test_push_address_table_matches_layout():
    rows = next(v for k, v in _tables(Path("PROTOCOL.md")).items() if k[0] == "push address field")
    layout = _layout_rows(d.push_addr_layout(d.IsaParams()))
    assert [(r[0], int(r[1])) for r in rows] == [(n, o) for n, o, _ in layout]
    assert [int(r[2].split()[0]) for r in rows] == [w for _, _, w in layout]


@pytest.mark.parametrize("kwargs, message", [
    (dict(push_resources=9), r"^push_resources must be an integer between 0 and 8, not 9$"),
    (dict(push_resources=1, push_capacity=5000),
     r"^push_capacity must be a multiple of max_payload \(4096 bytes\)"),
    (dict(push_resources=1, push_threshold=20000),
     r"^push_threshold must be an integer between 0 and 16384, not 20000$"),
])
def test_bad_push_parameters_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        d.IsaParams(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    # A train fills at most every slot, and its length (in flits) passes the switch's check.
    (dict(read_train=0), r"^read_train must be an integer between 1 and 8, not 0$"),
    (dict(read_train=9), r"^read_train must be an integer between 1 and 8, not 9$"),
    (dict(capacity=1 << 18, read_train=33),
     r"^read_train must be an integer between 1 and 32, not 33$"),
    (dict(write_train=65), r"^write_train must be an integer between 1 and 64, not 65$"),
])
def test_bad_train_parameters_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        d.IsaParams(**kwargs)


def test_read_trains_need_pieces_of_one_slot():
    """With 64-bit flits a READ_WAVE is answered in 2 KiB pieces (256-beat AXI bursts), half a
    4 KiB slot: the ISA refuses read trains there rather than mis-place the second halves."""
    f64 = FabricParams.default_for(flit_width=64)
    assert f64.train_piece_bytes == 2048 and FabricParams().train_piece_bytes == 4096
    with pytest.raises(ValueError, match=r"^read_train needs READ_WAVE pieces of one slot, but "
                                         r"this fabric cuts trains into 2048-byte pieces"):
        d.IsaParams(fabric=f64, capacity=8192, waves=2, read_train=2)
    assert d.IsaParams(fabric=f64, capacity=8192, waves=2, write_train=2).write_train == 2
