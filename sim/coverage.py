"""Functional coverage of the collective space: which kinds of collective a run has exercised.

Every collective falls in one bin of each *axis* (:data:`AXES`): its operation, dtype, flag
mode, size class, participant-set shape, in place or not, and fault class. Coverage is counted
per axis and per *cross* of the operation with each other axis (:data:`CROSSES`), the pairs in
which a bug of one operation's handling of a case would hide. Bins that cannot occur are left
out, each with its reason (:func:`excluded`): a barrier has no data, so no dtype, size or
placement; a fault class only goes with the operations the soak draws it for (a bad-descriptor
kind that is about shards needs a sharded operation). A collective whose descriptor is rejected
(a bad descriptor) moves no data either: it counts in the operation, flag mode, group and fault
axes only, so a data bin is filled only by a collective that read or wrote data. The full
seven-way cross (thousands of bins) is not counted: no run of a few dozen collectives could say
anything about it.

:func:`bins_of` says where one collective falls; :class:`Coverage` counts a run's collectives and
reports filled bins, hits and holes (:meth:`Coverage.as_dict`), as text (:func:`report_lines`)
or Markdown (:func:`report_markdown`). ``scin soak`` reports the coverage of what it ran and
checked. ``scin soak --nvls`` also counts its NVLS All-Reduces, in a :class:`Coverage` over
:data:`NVLS_AXES` (:func:`nvls_bins_of`) crossed with the dtype (:data:`NVLS_CROSSES`).
"""

from dataclasses import dataclass, field

from . import numerics


__all__ = ["AXES", "CROSSES", "PAGE_BYTES", "SHARDED", "size_class", "group_shape", "group_shapes",
           "bins_of", "excluded", "Coverage", "report_lines", "report_markdown", "NVLS_AXES",
           "NVLS_CROSSES", "nvls_bins_of"]

#: The 4 KiB page a packet may not cross: one wave-table slot, one max-size packet per rank.
PAGE_BYTES = 4096

#: The operations that run one phase per rank (docs/ISA.md, "How the ISA runs them").
SHARDED = ("reduce-scatter", "allgather")

#: Every axis but the fault class and its bins, in report order. The fault classes are the
#: run's (:class:`Coverage`'s ``faults``: for the soak, none, DECERR and each bad-descriptor kind).
AXES = {
    "op": numerics.OPS + ("barrier",),
    "dtype": numerics.DTYPES,
    "flag_mode": ("ordered", "acked"),
    "size": ("one_flit", "one_page", "pages", "wraps"),
    "group": ("pair", "all", "contiguous", "scattered"),
    "place": ("out_of_place", "in_place"),
}

#: The crosses counted: the operation with each other axis.
CROSSES = tuple(("op", axis) for axis in (*AXES, "fault") if axis != "op")

#: The axes of an NVLS All-Reduce (``scin soak --nvls``, :mod:`.nvls_soak`; the fault axis is
#: the run's: ``none``, or ``after_refused`` when a refused multicast access ran right before it
#: on one of its ports): dtype; group shape; size (each rank's shard: ``idle_rank`` when some rank
#: has none, ``one_flit``, ``one_packet``, ``packets``); ``page``, whether a shard crosses a 4 KiB
#: page (its packets cut there); ``window`` (``ld_reduce``s in flight); ``packet`` (the reduction
#: entry, or smaller); ``inputs`` (wide-range: the result depends on the arrival order; exact: it
#: does not); ``beside``, what ran on the other ports in the same step.
NVLS_AXES = {
    "dtype": ("fp16", "bf16"),
    "group": AXES["group"],
    "size": ("idle_rank", "one_flit", "one_packet", "packets"),
    "page": ("in_page", "crosses_page"),
    "window": ("1", "2_to_8", "9_to_16"),
    "packet": ("entry", "smaller"),
    "inputs": ("wide", "exact"),
    "beside": ("alone", "scin", "nvls"),
}

#: The NVLS crosses: the dtype (the reducer's format) with each other axis.
NVLS_CROSSES = tuple(("dtype", axis) for axis in (*NVLS_AXES, "fault") if axis != "dtype")

#: Axes a barrier, or a rejected descriptor, has no bin of (it moves no data).
_NO_DATA_AXES = ("dtype", "size", "place")

#: How many holes the text report names per axis or cross.
_HOLES_SHOWN = 5


def size_class(op, dtype, size, ranks, *, flit_bytes, capacity):
    """The size class of a data operation of ``ranks`` ranks and per-rank count ``size`` (bytes
    in the 16-bit form, the soak's ``size``; INT8 moves half as many bytes), from the rank's
    bytes per phase ``C`` (docs/ISA.md) and the wave table:

    * ``wraps``: the phases need more 4 KiB slots (at least ``ceil(C / 4 KiB)`` each; a sharded
      operation has one phase per rank) than one participant's wave table of ``capacity`` bytes
      holds, so slots are reused as their waves are freed (the wave regulation at work);
    * else ``one_flit`` (``C`` at most a flit), ``one_page`` (at most 4 KiB: one packet per rank
      and phase) or ``pages`` (several packets per phase).
    """
    if capacity < PAGE_BYTES or capacity % PAGE_BYTES:
        raise ValueError(f"capacity must be a positive multiple of {PAGE_BYTES} bytes, "
                         f"not {capacity!r}")
    chunk = size // 2 if dtype == "int8" else size
    phases = ranks if op in SHARDED else 1
    if phases * -(-chunk // PAGE_BYTES) > capacity // PAGE_BYTES:
        return "wraps"
    if chunk <= flit_bytes:
        return "one_flit"
    return "one_page" if chunk <= PAGE_BYTES else "pages"


def group_shape(members, endpoints):
    """``pair`` (two ports of more), ``all`` (every port), ``contiguous`` or ``scattered`` (a
    subset with or without gaps between its ports)."""
    members = sorted(members)
    if len(members) < 2 or members[-1] >= endpoints:
        raise ValueError(f"members must be two or more of the {endpoints} ports, not {members!r}")
    if len(members) == 2 and len(members) < endpoints:
        return "pair"
    if len(members) == endpoints:
        return "all"
    return "contiguous" if members[-1] - members[0] == len(members) - 1 else "scattered"


def group_shapes(endpoints):
    """The group shapes two or more of ``endpoints`` ports can form: only ``all`` of two, no
    ``contiguous`` or ``scattered`` subset (three or more ports, not all) of fewer than four."""
    if not isinstance(endpoints, int) or endpoints < 2:
        raise ValueError(f"endpoints must be an integer of at least 2, not {endpoints!r}")
    possible = {"all"} | ({"pair"} if endpoints > 2 else set()) | \
        ({"contiguous", "scattered"} if endpoints > 3 else set())
    return tuple(g for g in AXES["group"] if g in possible)


def bins_of(op, dtype, flag_mode, size, members, in_place, fault, bad_kind, *, endpoints,
            flit_bytes, capacity):
    """The bin of each axis for one collective (no entry for an axis that does not apply: a
    barrier's or a rejected descriptor's data axes)."""
    if op not in AXES["op"]:
        raise ValueError(f"op must be one of {AXES['op']}, not {op!r}")
    out = {"op": op, "flag_mode": flag_mode, "group": group_shape(members, endpoints),
           "fault": f"bad_desc:{bad_kind}" if fault == "bad_desc" else fault}
    if op != "barrier" and fault != "bad_desc":
        out.update(dtype=dtype, place="in_place" if in_place else "out_of_place",
                   size=size_class(op, dtype, size, len(members), flit_bytes=flit_bytes,
                                   capacity=capacity))
    return out


def nvls_bins_of(dtype, size, members, window, packet, offset, inputs, beside, after_refused, *,
                 endpoints, entry_bytes, flit_bytes):
    """The bin of each :data:`NVLS_AXES` axis (and the fault axis) for one NVLS All-Reduce of
    ``size`` bytes on ``members`` with its buffer ``offset`` bytes into a page (the shards of
    :func:`~scin.sim.nvls_allreduce.shards`)."""
    from .nvls_allreduce import shards
    cut = shards(size, len(members), flit_bytes)
    longest = max(nbytes for _, nbytes in cut)
    if min(nbytes for _, nbytes in cut) == 0:
        size_bin = "idle_rank"
    elif longest <= flit_bytes:
        size_bin = "one_flit"
    else:
        size_bin = "one_packet" if longest <= packet else "packets"
    crosses = any(nbytes and (offset + off) // PAGE_BYTES
                  != (offset + off + nbytes - 1) // PAGE_BYTES for off, nbytes in cut)
    return {"dtype": dtype, "group": group_shape(members, endpoints), "size": size_bin,
            "page": "crosses_page" if crosses else "in_page",
            "window": "1" if window == 1 else "2_to_8" if window <= 8 else "9_to_16",
            "packet": "entry" if packet == entry_bytes else "smaller", "inputs": inputs,
            "beside": beside, "fault": "after_refused" if after_refused else "none"}


def excluded(axis_a, bin_a, axis_b, bin_b, fault_ops):
    """Why the cross bin ``(bin_a, bin_b)`` cannot occur, or None if it can. ``fault_ops`` maps a
    fault class (``none``, ``decerr``, ``bad_desc``, and a bad-descriptor kind where it differs
    from ``bad_desc``) to the operations it is drawn with (the soak's ``FAULT_OPS``)."""
    if axis_a == "op" and bin_a == "barrier" and axis_b in _NO_DATA_AXES:
        return "a barrier moves no data"
    if axis_a == "op" and axis_b == "fault":
        fault, _, kind = bin_b.partition(":")
        if bin_a not in fault_ops.get(kind, fault_ops[fault]):
            return f"{bin_b} is not drawn with {bin_a}"
    return None


@dataclass
class Coverage:
    """The hits of a run, per axis bin and per cross bin.

    Parameters
    ----------
    faults : tuple of str
        The fault axis's bins: ``none``, ``decerr``, ``bad_desc:KIND`` for each kind.
    fault_ops : dict
        The operations each fault class is drawn with (for :func:`excluded`).
    endpoints : int or None
        The ports groups are drawn from: the group shapes they cannot form
        (:func:`group_shapes`) are excluded. None: every shape counts.
    space : dict or None
        The axes other than the fault axis (None: :data:`AXES`, the collectives of the ISA;
        :data:`NVLS_AXES` for NVLS All-Reduces).
    crosses : tuple
        The crosses counted (:data:`CROSSES`; :data:`NVLS_CROSSES` with :data:`NVLS_AXES`).
    """
    faults: tuple
    fault_ops: dict
    endpoints: int = None
    hits: dict = field(default_factory=dict)
    collectives: int = 0
    space: dict = None
    crosses: tuple = CROSSES

    @property
    def _space(self):
        return AXES if self.space is None else self.space

    @property
    def axes(self):
        """Every axis with the bins that can occur, the fault axis included."""
        space = self._space
        groups = space["group"] if self.endpoints is None else \
            tuple(g for g in space["group"] if g in group_shapes(self.endpoints))
        return {**space, "group": groups, "fault": tuple(self.faults)}

    def _axis_excluded(self, axis):
        return {b: f"{self.endpoints} endpoints form no {b} group"
                for b in self._space.get(axis, ()) if b not in self.axes[axis]}

    def add(self, bins):
        """Count one collective, given its :func:`bins_of`."""
        axes = self.axes
        for axis, b in bins.items():
            if b not in axes.get(axis, ()):
                raise ValueError(f"bins: {b!r} is not a bin of axis {axis!r}")
        self.collectives += 1
        for axis, b in bins.items():
            self.hits[(axis, b)] = self.hits.get((axis, b), 0) + 1
        for a, b in self.crosses:
            if a in bins and b in bins:
                key = ((a, bins[a]), (b, bins[b]))
                self.hits[key] = self.hits.get(key, 0) + 1

    def _cross_bins(self, a, b):
        axes = self.axes
        return [(x, y) for x in axes[a] for y in axes[b]
                if excluded(a, x, b, y, self.fault_ops) is None]

    def _excluded(self, a, b):
        axes = self.axes
        return {f"{x} x {y}": why for x in axes[a] for y in axes[b]
                if (why := excluded(a, x, b, y, self.fault_ops)) is not None}

    def as_dict(self):
        """The report (JSON-ready): ``collectives`` counted, ``filled`` and ``total`` bins over
        all axes and crosses and ``holes`` (their difference); per axis its ``filled``,
        ``total``, ``hits`` (collectives per bin, every bin), ``holes`` (the bins no
        collective reached) and ``excluded`` (each bin left out, with its reason); per cross the
        same, its bins named ``OP x BIN``."""
        report = {"collectives": self.collectives, "axes": {}, "crosses": {}}
        for axis, bins in self.axes.items():
            holes = [b for b in bins if (axis, b) not in self.hits]
            report["axes"][axis] = {"filled": len(bins) - len(holes), "total": len(bins),
                                    "hits": {b: self.hits.get((axis, b), 0) for b in bins},
                                    "holes": holes, "excluded": self._axis_excluded(axis)}
        for a, b in self.crosses:
            bins = self._cross_bins(a, b)
            hits = {f"{x} x {y}": self.hits.get(((a, x), (b, y)), 0) for x, y in bins}
            holes = [name for name, n in hits.items() if not n]
            report["crosses"][f"{a} x {b}"] = {"filled": len(bins) - len(holes),
                                               "total": len(bins), "hits": hits, "holes": holes,
                                               "excluded": self._excluded(a, b)}
        parts = list(report["axes"].values()) + list(report["crosses"].values())
        report["filled"] = sum(p["filled"] for p in parts)
        report["total"] = sum(p["total"] for p in parts)
        report["holes"] = report["total"] - report["filled"]
        return report

    def lines(self):
        """The report as text lines (:func:`report_lines`)."""
        return report_lines(self.as_dict())


def _percent(part):
    return f"{100 * part['filled'] / part['total']:.0f}%" if part["total"] else "-"


def report_lines(report):
    """A :meth:`Coverage.as_dict` report as text: the total, then one line per axis and per cross
    with up to five of its holes."""
    out = [f"functional coverage: {report['filled']} of {report['total']} bins "
           f"({_percent(report)}) over {report['collectives']} collectives"]
    for kind in ("axes", "crosses"):
        for name, part in report[kind].items():
            holes = part["holes"]
            more = f" (+{len(holes) - _HOLES_SHOWN} more)" if len(holes) > _HOLES_SHOWN else ""
            text = f"; holes: {', '.join(holes[:_HOLES_SHOWN])}{more}" if holes else ""
            out.append(f"  {name:20s} {part['filled']:3d} of {part['total']:3d}{text}")
    return out


def report_markdown(report, title="Functional coverage", note=None):
    """A :meth:`Coverage.as_dict` report as a Markdown section headed ``title``: ``note`` (a
    paragraph, if given), the total; per axis a table of hits per bin (a hole in bold); per cross
    its filled bins and every hole; then the excluded bins with their reasons."""
    out = [f"## {title}", "", *([note, ""] if note else []),
           f"{report['filled']} of {report['total']} bins filled ({_percent(report)}) by "
           f"{report['collectives']} collectives; {report['holes']} holes.", "",
           "| axis | filled | hits per bin |", "| --- | ---: | --- |"]
    for name, part in report["axes"].items():
        hits = ", ".join(f"{b} {n}" if n else f"**{b} 0**" for b, n in part["hits"].items())
        out.append(f"| {name} | {part['filled']} of {part['total']} | {hits} |")
    out += ["", "| cross | filled | holes |", "| --- | ---: | --- |"]
    for name, part in report["crosses"].items():
        holes = ", ".join(part["holes"]) or "none"
        out.append(f"| {name} | {part['filled']} of {part['total']} | {holes} |")
    out += ["", "Excluded bins (cannot occur):", ""]
    for name, part in [*report["axes"].items(), *report["crosses"].items()]:
        reasons = {}
        for b, why in part["excluded"].items():
            reasons.setdefault(why, []).append(b)
        out += [f"- {name}: {', '.join(bins)}: {why}" for why, bins in reasons.items()]
    return "\n".join(out) + "\n"
