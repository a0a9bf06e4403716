"""Functional coverage of the collective space: which kinds of collective a run has exercised.

Every collective falls in one bin of each *axis* (:data:`AXES`): its operation, dtype, flag
mode, size class, participant-set shape, in place or not, and fault class. Coverage is counted
per axis and per *cross* of the operation with each other axis (:data:`CROSSES`), the pairs in
which a bug of one operation's handling of a case would hide. Bins that cannot occur are left
out, each with its reason (:func:`excluded`): a barrier has no data, so no dtype, size or
placement; a fault class only goes with the operations the soak draws it for (a bad-descriptor
kind that is about shards needs a sharded operation). The full seven-way cross (thousands of
bins) is not counted: no run of a few dozen collectives could say anything about it.

:func:`bins_of` says where one collective falls; :class:`Coverage` counts a run's collectives and
reports filled bins and holes. ``scin soak`` reports the coverage of what it ran and checked.
"""

from dataclasses import dataclass, field

from . import numerics


__all__ = ["AXES", "CROSSES", "PAGE_BYTES", "size_class", "group_shape", "bins_of", "excluded",
           "Coverage", "report_lines"]

#: The 4 KiB page a packet may not cross (the ISA's slot size at the default configuration).
PAGE_BYTES = 4096

#: Every axis but the fault class and its bins, in report order. The fault classes are the
#: run's (:class:`Coverage`'s ``faults``: for the soak, none, DECERR and each bad-descriptor kind).
AXES = {
    "op": numerics.OPS + ("barrier",),
    "dtype": numerics.DTYPES,
    "flag_mode": ("ordered", "acked"),
    "size": ("one_flit", "one_page", "pages"),
    "group": ("pair", "all", "contiguous", "scattered"),
    "place": ("out_of_place", "in_place"),
}

#: The crosses counted: the operation with each other axis.
CROSSES = tuple(("op", axis) for axis in (*AXES, "fault") if axis != "op")

#: Axes a barrier has no bin of (it moves no data).
_NO_DATA_AXES = ("dtype", "size", "place")


def size_class(size, flit_bytes):
    """``one_flit`` (at most a flit per rank), ``one_page`` (at most 4 KiB: one slot, one packet
    per rank) or ``pages`` (several slots, the wave table's regulation at work), by the per-rank
    count in its 16-bit form."""
    if size <= flit_bytes:
        return "one_flit"
    return "one_page" if size <= PAGE_BYTES else "pages"


def group_shape(members, endpoints):
    """``pair`` (two ports), ``all`` (every port), ``contiguous`` or ``scattered`` (a subset with
    or without gaps between its ports)."""
    members = sorted(members)
    if len(members) == 2 and len(members) < endpoints:
        return "pair"
    if len(members) == endpoints:
        return "all"
    return "contiguous" if members[-1] - members[0] == len(members) - 1 else "scattered"


def bins_of(op, dtype, flag_mode, size, members, in_place, fault, bad_kind, *, endpoints,
            flit_bytes):
    """The bin of each axis for one collective (no entry for an axis that does not apply)."""
    out = {"op": op, "flag_mode": flag_mode, "group": group_shape(members, endpoints),
           "fault": f"bad_desc:{bad_kind}" if fault == "bad_desc" else fault}
    if op != "barrier":
        out.update(dtype=dtype, size=size_class(size, flit_bytes),
                   place="in_place" if in_place else "out_of_place")
    return out


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
    """
    faults: tuple
    fault_ops: dict
    hits: dict = field(default_factory=dict)

    @property
    def axes(self):
        """Every axis with its bins, the fault axis included."""
        return {**AXES, "fault": tuple(self.faults)}

    def add(self, bins):
        """Count one collective, given its :func:`bins_of`."""
        for axis, b in bins.items():
            self.hits[(axis, b)] = self.hits.get((axis, b), 0) + 1
        for a, b in CROSSES:
            if a in bins and b in bins:
                key = ((a, bins[a]), (b, bins[b]))
                self.hits[key] = self.hits.get(key, 0) + 1

    def _cross_bins(self, a, b):
        axes = self.axes
        return [(x, y) for x in axes[a] for y in axes[b]
                if excluded(a, x, b, y, self.fault_ops) is None]

    def as_dict(self):
        """``filled`` and ``total`` bins over all axes and crosses, and per axis and cross its
        ``filled``, ``total`` and ``holes`` (the bins no collective reached)."""
        report = {"axes": {}, "crosses": {}}
        for axis, bins in self.axes.items():
            holes = [b for b in bins if (axis, b) not in self.hits]
            report["axes"][axis] = {"filled": len(bins) - len(holes), "total": len(bins),
                                    "holes": holes}
        for a, b in CROSSES:
            bins = self._cross_bins(a, b)
            holes = [f"{x} x {y}" for x, y in bins if ((a, x), (b, y)) not in self.hits]
            report["crosses"][f"{a} x {b}"] = {"filled": len(bins) - len(holes),
                                               "total": len(bins), "holes": holes}
        parts = list(report["axes"].values()) + list(report["crosses"].values())
        report["filled"] = sum(p["filled"] for p in parts)
        report["total"] = sum(p["total"] for p in parts)
        return report

    def lines(self):
        """The report as text lines (:func:`report_lines`)."""
        return report_lines(self.as_dict())


def report_lines(report):
    """A :meth:`Coverage.as_dict` report as text: the total, then one line per axis and per cross
    with up to five of its holes."""
    out = [f"functional coverage: {report['filled']} of {report['total']} bins"]
    for kind in ("axes", "crosses"):
        for name, part in report[kind].items():
            holes = part["holes"]
            more = f" (+{len(holes) - 5} more)" if len(holes) > 5 else ""
            text = f"; holes: {', '.join(holes[:5])}{more}" if holes else ""
            out.append(f"  {name:20s} {part['filled']:3d} of {part['total']:3d}{text}")
    return out
