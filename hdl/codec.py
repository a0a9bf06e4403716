"""One software codec for every ``data.Layout`` of the design.

Headers, descriptors, completion flags, tags, accelerator commands and events, counters: each is a
``data.StructLayout`` (or an ``ArrayLayout`` inside one). Models, testbenches, the CLI and the
benchmarks pack and unpack them only through :func:`pack` and :func:`unpack`, which read the field
offsets and widths from the layout itself, so a field moved or widened in the HDL is moved or
widened in Python at the same time.

A value that does not fit its field is an error (:class:`ValueError` naming the field), never
silently truncated.
"""

import enum as py_enum
import operator

from amaranth.hdl import Shape, ShapeCastable
from amaranth.lib import data


__all__ = ["pack", "unpack", "field_mask", "layout_width"]


def layout_width(layout):
    """Width in bits of ``layout`` (a ``data.Layout``, enum or shape)."""
    return Shape.cast(layout).width


def field_mask(layout, name):
    """``(offset, width)`` of the top-level field ``name`` of a struct layout."""
    field = _layout(layout)[name]
    return field.offset, Shape.cast(field.shape).width


def _layout(layout):
    if isinstance(layout, data.Layout):
        return layout
    cast = data.Layout.cast(layout)
    return cast


def _member_shape(shape):
    """The ``data.Layout`` of a nested shape, or None for a plain or enum shape."""
    if isinstance(shape, data.Layout):
        return shape
    if isinstance(shape, ShapeCastable) and not isinstance(shape, py_enum.EnumMeta):
        try:
            return data.Layout.cast(shape)
        except TypeError:
            return None
    return None


def _encode_leaf(path, shape, value):
    if isinstance(value, py_enum.Enum):
        value = value.value
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int):
        try:
            value = operator.index(value)   # numpy integers; never a float
        except TypeError:
            raise TypeError(f"field {path} must be an integer or an enum member, not {value!r}") \
                from None
    s = Shape.cast(shape)
    lo, hi = (-(1 << (s.width - 1)), 1 << (s.width - 1)) if s.signed else (0, 1 << s.width)
    if not lo <= value < hi:
        kind = "signed " if s.signed else ""
        raise ValueError(f"field {path} = {value} does not fit in {s.width} {kind}bits")
    return value & ((1 << s.width) - 1)


def _encode(path, layout, fields):
    if isinstance(layout, data.ArrayLayout):
        items = list(fields)
        if len(items) > layout.length:
            raise ValueError(f"field {path} has {layout.length} elements, not {len(items)}")
        fields = {str(i): v for i, v in enumerate(items)}
    else:
        fields = {str(k): v for k, v in fields.items()}
    members = [(str(name), f) for name, f in layout]
    names = [name for name, _ in members]
    unknown = set(fields) - set(names)
    if unknown:
        where = f" of {path}" if path else ""
        raise ValueError(f"unknown field(s){where}: {sorted(unknown)}; the layout has {names}")
    value = 0
    for name, f in members:
        if name not in fields:
            continue
        v = fields[name]
        full = f"{path}.{name}" if path else name
        sub = _member_shape(f.shape)
        if sub is not None and isinstance(v, (dict, list, tuple)):
            v = _encode(full, sub, v)
        else:
            v = _encode_leaf(full, f.shape, v)
        value |= v << f.offset
    return value


def pack(layout, fields=None, /, **kwargs):
    """Pack ``fields`` into the integer value of ``layout``.

    Fields may be given as a dict, as keyword arguments, or both. A missing field is zero. A nested
    struct or array field takes a dict (or a sequence for an array) or an integer for the whole
    member. Enum fields take the member or its value.

    Raises
    ------
    ValueError
        If a field name is not in the layout, or a value does not fit its field.
    TypeError
        If a value is neither an integer nor an enum member.
    """
    fields = dict(fields or {}, **kwargs)
    layout = _layout(layout)
    return _encode("", layout, fields)


def unpack(layout, value, *, nested=False):
    """Unpack the integer ``value`` of ``layout`` into a dict of plain integers.

    With ``nested=True``, struct and array members become dicts and lists in turn; otherwise each
    top-level field is one integer. Signed fields come back signed.

    Raises
    ------
    ValueError
        If ``value`` is negative or wider than the layout.
    """
    layout = _layout(layout)
    value = int(value)
    if not 0 <= value < (1 << layout.size):
        raise ValueError(f"value {value:#x} does not fit in the {layout.size}-bit layout")
    return _decode(layout, value, nested)


def _decode_leaf(shape, value):
    s = Shape.cast(shape)
    value &= (1 << s.width) - 1
    if s.signed and value >> (s.width - 1):
        value -= 1 << s.width
    return value


def _decode(layout, value, nested):
    out = {}
    for name, f in layout:
        v = value >> f.offset
        sub = _member_shape(f.shape)
        if nested and sub is not None:
            out[name] = _decode(sub, v & ((1 << sub.size) - 1), nested)
        else:
            out[name] = _decode_leaf(f.shape, v)
    if isinstance(layout, data.ArrayLayout):
        return [out[i] for i in range(layout.length)]
    return out
