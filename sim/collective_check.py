"""Checking one collective of a soak against the golden model's images, shared by the SCIN soak
(:mod:`.soak`) and the NVLS soak (:mod:`.nvls_soak`).

A collective is an entry of a soak plan's ``expected`` list (:func:`scin.sim.soak.make_plan`):
a dict with its number ``k``, ``op``, ``dtype``, ``size``, ``root``, ``in_place``, ``members``,
``fault`` and ``bad_kind``, its descriptor ``mode`` (and ``pushed`` for an AUTO), the ``window``
of memory it may write, the ``images`` the golden model says it leaves there, its ``buffers``,
its ``flag`` address, ``generation`` and ``want_status``.
"""

import numpy as np

from .allreduce import ROOTED_OPS


__all__ = ["describe", "mode_label", "expected_window", "check_collective", "outcome_table"]


def describe(e):
    """``reduce int8 4096 B, root 2, in place``: what collective ``e`` was."""
    text = "barrier" if e["op"] == "barrier" else f"{e['op']} {e['dtype']} {e['size']} B"
    if e["op"] in ROOTED_OPS:
        text += f", root {e['root']}"
    if e["in_place"]:
        text += ", in place"
    if e.get("mode", "pull") != "pull":
        text += f", {mode_label(e)}"
    if e["fault"] != "none":
        text += f", {e['fault']}" + (f":{e['bad_kind']}" if e["bad_kind"] else "")
    return text


def mode_label(e):
    """``pull``, ``push``, ``auto:push`` or ``auto:pull``: collective ``e``'s descriptor mode, an
    AUTO with what it resolved to."""
    mode = e.get("mode", "pull")
    if mode != "auto":
        return mode
    return "auto:push" if e["pushed"] else "auto:pull"


def expected_window(e, i):
    """The bytes collective ``e`` must leave in endpoint ``i``'s window, or None where they are
    not checked (a DECERR fault's members). A non-participant's window stays zero."""
    if i not in e["members"]:
        return bytes(e["window"][1] - e["window"][0])
    return e["images"][i]


def _where(e, addr):
    """``dst + 0x40``: the buffer of collective ``e`` that byte address ``addr`` lies in."""
    name, base = max(((n, b) for n, b in e["buffers"].items() if b <= addr), key=lambda x: x[1])
    return f"{name} + {addr - base:#x}"


def _window_failure(e, i, got, want):
    """The failure line for endpoint ``i``'s window ``got`` (bytes) that is not ``want``."""
    a, b = np.frombuffer(got, np.uint8), np.frombuffer(want, np.uint8)
    bad = np.flatnonzero(a != b)
    at = e["window"][0] + int(bad[0])
    return (f"collective {e['k']} ({describe(e)}) endpoint {i}: {len(bad)} bytes differ from the "
            f"golden model's image, first at {at:#x} ({_where(e, at)}): got {a[bad[:4]].tolist()}, "
            f"want {b[bad[:4]].tolist()}")


def _flag_good(e, word):
    """Whether a member's flag ``word`` (None: never seen) is what collective ``e`` must leave:
    the expected word exactly, or for DECERR the generation with ERROR among the status bits."""
    from ..hdl.codec import pack, unpack
    from ..hdl.isa import FlagStatus, flag_layout
    if e["fault"] != "decerr":
        return word == pack(flag_layout(), generation=e["generation"], status=e["want_status"])
    if word is None:
        return False
    w = unpack(flag_layout(), word)
    return w["generation"] == e["generation"] and bool(w["status"] & FlagStatus.ERROR.value)


def check_collective(e, flags, memories):
    """The failures of collective ``e`` (a list of lines, empty when it passed): every member's
    flag (``flags[(k, endpoint)]``, the word its completion event carried, and the word in
    memory) and window, every non-participant's flag and window untouched. ``memories``: each
    endpoint's memory as a byte array."""
    from ..hdl.codec import pack
    from ..hdl.isa import flag_layout
    failures = []
    lo, hi = e["window"]
    for i, mem in enumerate(memories):
        flag_word = int.from_bytes(mem[e["flag"]:e["flag"] + 4].tobytes(), "little")
        got = mem[lo:hi].tobytes()
        want = expected_window(e, i)
        if i not in e["members"]:
            # Isolation: a non-participant's flag and buffers are never touched.
            if flag_word or got != want:
                failures.append(f"collective {e['k']} wrote to non-participant {i}")
            continue
        # A descriptor without a barrier writes its ERROR flags at once: its members wait for
        # nothing (WAIT_FLAG cannot tell generation 0 from the zeroed word), so only the flag
        # word in memory is checked.
        seen = flag_word if e.get("no_barrier") else flags.get((e["k"], i))
        if not (_flag_good(e, seen) and _flag_good(e, flag_word)):
            want_flag = pack(flag_layout(), generation=e["generation"], status=e["want_status"])
            event = "no event (no barrier)" if e.get("no_barrier") else \
                f"flag {seen!r} in the event"
            failures.append(f"collective {e['k']} ({describe(e)}) endpoint {i}: {event}, "
                            f"{flag_word:#x} in memory, expected {want_flag:#x}")
        if want is not None and got != want:
            failures.append(_window_failure(e, i, got, want))
    return failures


def outcome_table(outcome):
    """``{label: {"ok": n, "FAILED": m}}`` from a Counter of ``(label, verdict)``."""
    table = {}
    for (label, verdict), count in outcome.items():
        table.setdefault(label, {"ok": 0, "FAILED": 0})[verdict] += count
    return table
