"""``scin.hdl.codec``: pack and unpack every layout of the design, from the layout itself.

The reference is Amaranth's own constant of a layout (``layout.const(fields)``): whatever the
codec packs must be the bits the hardware sees for the same fields, for every struct, array,
enum and signed member, nested or not. Values that do not fit, unknown fields and non-integer
values are errors with messages naming the field.
"""

import enum as py_enum
import random

import numpy as np
import pytest
from amaranth.hdl import Const, Shape
from amaranth.lib import data

from scin.hdl.codec import field_mask, layout_width, pack, unpack
from scin.hdl.endpoint.accelerator import command_layout, event_layout
from scin.hdl.endpoint.axi import AxiParams
from scin.hdl.isa.datapath.common import input_layout, output_layout, sum_layout
from scin.hdl.isa import IsaParams, descriptor_layout, flag_layout
from scin.hdl.isa import load_layout
from scin.hdl.isa.read_issuer import job_layout, message_layout
from scin.hdl.isa import counters_layout
from scin.hdl.isa.wave_table import arm_layout
from scin.hdl.isa.writeback import flag_request_layout
from scin.hdl.packet import FabricParams, Opcode, Status
from scin.hdl.switch.filter import error_layout


FABRIC = FabricParams()
ISA = IsaParams(fabric=FABRIC)
AXI = AxiParams(data_width=256, addr_width=48, id_width=4, user_width=1)

#: Every StructLayout the design defines at module level (the ones built inside an elaborate()
#: are private to their block), with the parameters the tests and the CLI use.
LAYOUTS = {
    "header": FABRIC.header_layout,
    "flit": FABRIC.flit_layout,
    "link (nested struct + enum)": FABRIC.link_layout,
    "descriptor": descriptor_layout(),
    "flag": flag_layout(),
    "load (nested descriptor)": load_layout(ISA),
    "counters": counters_layout(),
    "command": command_layout(FABRIC),
    "event": event_layout(FABRIC),
    "switch errors": error_layout(),
    "datapath input (arrays)": input_layout(4, 256),
    "datapath output": output_layout(256),
    "datapath sum (signed array)": sum_layout(256),
    "wave-table arm": arm_layout(ISA),
    "read-issuer message": message_layout(ISA),
    "read-issuer job": job_layout(ISA),
    "flag request (nested flag)": flag_request_layout(ISA),
    "AXI AW/AR": AXI.ax_layout,
    "AXI W": AXI.w_layout,
    "AXI B": AXI.b_layout,
    "AXI R": AXI.r_layout,
}


def _is_enum(shape):
    return isinstance(shape, py_enum.EnumMeta)


def random_fields(layout, rng):
    """Random legal fields for ``layout``: nested dicts and lists, enum members for enum fields
    (when the enum has members that fit), signed values for signed fields."""
    if isinstance(layout, data.ArrayLayout):
        items = [(str(i), layout.elem_shape) for i in range(layout.length)]
    else:
        items = [(name, f.shape) for name, f in layout]
    out = {}
    for name, shape in items:
        if isinstance(shape, data.Layout):
            out[name] = random_fields(shape, rng)
        elif _is_enum(shape):
            out[name] = rng.choice(list(shape))
        else:
            s = Shape.cast(shape)
            lo = -(1 << (s.width - 1)) if s.signed else 0
            out[name] = rng.randrange(lo, lo + (1 << s.width))
    if isinstance(layout, data.ArrayLayout):
        return [out[str(i)] for i in range(layout.length)]
    return out


def _plain(fields):
    """``fields`` with enum members replaced by their values (what unpack returns)."""
    if isinstance(fields, dict):
        return {k: _plain(v) for k, v in fields.items()}
    if isinstance(fields, list):
        return [_plain(v) for v in fields]
    return fields.value if isinstance(fields, py_enum.Enum) else fields


@pytest.mark.parametrize("name", LAYOUTS)
def test_round_trip_of_every_layout(name):
    layout = LAYOUTS[name]
    rng = random.Random(name)
    for _ in range(20):
        fields = random_fields(layout, rng)
        value = pack(layout, fields)
        # The bits the hardware sees for the same fields.
        assert value == Const.cast(layout.const(fields)).value, name
        assert 0 <= value < 1 << layout_width(layout)
        assert unpack(layout, value, nested=True) == _plain(fields)
        # The flat form (one integer per top-level field) packs back to the same value.
        assert pack(layout, unpack(layout, value)) == value
    # All ones and all zeros: every bit of the layout belongs to exactly one field.
    ones = (1 << layout.size) - 1
    assert pack(layout, unpack(layout, ones)) == ones
    assert pack(layout) == 0 and all(v == 0 for v in unpack(layout, 0).values())


def test_missing_fields_are_zero_and_keywords_mix_with_a_dict():
    layout = FABRIC.header_layout
    a = pack(layout, {"opcode": Opcode.WRITE}, length=3)
    assert a == pack(layout, opcode=Opcode.WRITE.value, length=3)
    off, width = field_mask(layout, "length")
    assert a >> off & ((1 << width) - 1) == 3
    assert unpack(layout, a)["tag"] == 0


def test_nested_member_as_one_integer():
    layout = load_layout(ISA)
    desc = pack(descriptor_layout(), elements=64, sync=3)
    value = pack(layout, index=1, last=1, desc=desc)
    assert unpack(layout, value)["desc"] == desc
    assert unpack(layout, value, nested=True)["desc"]["elements"] == 64


def test_signed_fields_come_back_signed():
    layout = sum_layout(64)
    sums = [-1, 2, -(1 << 40), 7, 0, -3, 5, 1]
    value = pack(layout, sum=sums)
    assert unpack(layout, value, nested=True)["sum"] == sums


def test_numpy_integers_are_accepted():
    assert pack(flag_layout(), generation=np.uint16(7), status=np.int64(4)) == 7 | 4 << 16


@pytest.mark.parametrize("fields, message", [
    ({"dst": 16}, r"^field dst = 16 does not fit in 4 bits$"),
    ({"length": -1}, r"^field length = -1 does not fit in \d+ bits$"),
    ({"msg_class": 4}, r"^field msg_class = 4 does not fit in 2 bits$"),
])
def test_overflow_is_an_error_not_a_truncation(fields, message):
    with pytest.raises(ValueError, match=message):
        pack(FABRIC.header_layout, fields)


def test_overflow_in_a_nested_or_signed_field_names_the_path():
    with pytest.raises(ValueError, match=r"^field desc\.sync = 256 does not fit in 8 bits$"):
        pack(load_layout(ISA), desc={"sync": 256})
    with pytest.raises(ValueError, match=r"^field sum\.1 = -\d+ does not fit in \d+ signed bits$"):
        pack(sum_layout(64), sum=[0, -(1 << 60)])
    with pytest.raises(ValueError, match=r"^field data has 4 elements, not 5$"):
        pack(input_layout(4, 64), data=[0] * 5)


def test_unknown_field_is_an_error():
    with pytest.raises(ValueError, match=r"^unknown field\(s\): \['colour'\]; the layout has "
                                         r"\['generation', 'status', 'reserved'\]$"):
        pack(flag_layout(), colour=1)
    with pytest.raises(ValueError, match=r"^unknown field\(s\) of desc: \['size'\]"):
        pack(load_layout(ISA), desc={"size": 1})


@pytest.mark.parametrize("value", [1.0, 2.5, np.float16(1), "3", None])
def test_a_non_integer_is_refused(value):
    with pytest.raises(TypeError, match=r"^field generation must be an integer or an enum member, "
                                        r"not "):
        pack(flag_layout(), generation=value)


def test_unpack_refuses_a_value_wider_than_the_layout():
    with pytest.raises(ValueError, match=r"^value 0x100000000 does not fit in the 32-bit layout$"):
        unpack(flag_layout(), 1 << 32)
    with pytest.raises(ValueError, match=r"^value -0x1 does not fit in the 32-bit layout$"):
        unpack(flag_layout(), -1)


def test_header_methods_are_the_codec():
    fields = dict(opcode=Opcode.READ_RESP.value, msg_class=2, inc=1, status=Status.DECERR.value,
                  src=3, dst=5, length=100, tag=0x1F, addr=0x1234)
    assert FABRIC.pack_header(**fields) == pack(FABRIC.header_layout, fields)
    assert FABRIC.unpack_header(FABRIC.pack_header(**fields)) == fields
