"""Parameter validation shared by every block: one wording for every message.

Each check names the parameter as the user passed it (``"isa.capacity"``, ``"credits"``), so an
error raised at construction points at the argument to change, never at an internal one.
"""

from amaranth.hdl import Shape


__all__ = ["check_int", "check_choice", "check_type", "check_power_of_two", "check_shape"]


def check_type(name, value, cls):
    """Raise :class:`TypeError` unless ``value`` is an instance of ``cls``; return ``value``."""
    if not isinstance(value, cls):
        what = cls.__name__ if isinstance(cls, type) else " or ".join(c.__name__ for c in cls)
        article = "an" if what[:1].lower() in "aeiou" else "a"
        raise TypeError(f"{name} must be {article} {what}, not {value!r}")
    return value


def check_int(name, value, lo=None, hi=None):
    """Check that ``value`` is an integer (not a bool) with ``lo <= value <= hi``.

    Raises
    ------
    TypeError
        If ``value`` is not an ``int`` (``2.5``, ``"32K"`` and ``True`` are refused).
    ValueError
        If ``value`` is out of range.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if hi is None:
            rng = f">= {lo}"
        elif lo is None:
            rng = f"<= {hi}"
        else:
            rng = f"between {lo} and {hi}"
        raise ValueError(f"{name} must be an integer {rng}, not {value!r}")
    return value


def check_power_of_two(name, value, lo=1, hi=None):
    """:func:`check_int`, and a power of two."""
    check_int(name, value, lo, hi)
    if value & (value - 1):
        raise ValueError(f"{name} must be a power of two, not {value!r}")
    return value


def check_choice(name, value, choices):
    """Raise :class:`ValueError` unless ``value`` is one of ``choices``; return ``value``."""
    if isinstance(value, bool) or value not in choices:
        names = [repr(c) if isinstance(c, str) else str(c) for c in choices]
        listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        raise ValueError(f"{name} must be {listed}, not {value!r}")
    return value


def check_shape(name, value):
    """Raise :class:`TypeError` unless ``value`` is a payload shape (a width, a ``Shape``, a data
    layout or another shape-castable; not a bool); return ``value``."""
    try:
        Shape.cast(value)
        ok = not isinstance(value, bool)
    except TypeError:
        ok = False
    if not ok:
        raise TypeError(f"{name} must be a width, a Shape or a data layout, not {value!r}")
    return value
