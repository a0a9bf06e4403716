"""The closed-form system model of SCIN, NVLS and ring collectives, calibrated from the RTL: one
entry point over the three forms, and the model of one ``scin compare`` row.

Every form is closed (the ring's a max-plus recurrence over its ranks' commands) and calibrated
against the RTL's measurements (docs/SCALE.md shows each point against the model): SCIN in
:mod:`scin.sim.scin_model`, NVLS in :mod:`scin.sim.nvls_model`, the ring in
:mod:`scin.sim.ring_model`, on the fabrics and calibration of :mod:`scin.sim.fabric_model`. The
measured system is deterministic and these forms reproduce it to the cycle or within the
stated tolerance, so no event-driven simulation is used.

Units: a :class:`~scin.sim.fabric_model.Fabric` states its link in bytes per second and seconds;
every time the forms return is in **seconds**. ``Fabric.cycles`` converts to the ISA's clock for
the RTL fabric.
"""

from .fabric_model import RTL_FABRIC, load_calibration, rtl_fabric
from .nvls_model import NVLS_WINDOW, nvls_time
from .ring_model import ring_time
from .scin_model import scin_time

__all__ = ["collective_time", "compare_model", "compare_modelled", "COMPARE_ALGORITHMS"]

#: ``scin compare``'s algorithms: what each is in this model.
COMPARE_ALGORITHMS = ("scin-fp16", "scin-int8", "nvls", "ring")


def collective_time(system, op, size, endpoints, fabric=RTL_FABRIC, cal=None, dtype="fp16"):
    """One entry point for tables: ``system`` is ``scin`` (pull), ``scin-push``, ``scin-inq``
    (pull, INT8), ``scin-inq-push``, ``nvls`` or ``ring``."""
    cal = cal or load_calibration()
    if system in ("scin", "scin-push"):
        return scin_time(op, size, endpoints, fabric, cal, dtype,
                         "push" if system == "scin-push" else "pull")
    if system in ("scin-inq", "scin-inq-push"):
        return scin_time(op, size, endpoints, fabric, cal, "int8",
                         "push" if system.endswith("push") else "pull")
    if system == "nvls":
        return nvls_time(op, size, endpoints, fabric, cal)
    if system == "ring":
        return ring_time(op, size, endpoints, fabric, cal)
    raise ValueError(f"system must be scin, scin-push, scin-inq, scin-inq-push, nvls or ring, "
                     f"not {system!r}")


# --- calibration from the bench CSV ------------------------------------------------------------
def compare_model(row, cal):
    """The modelled cycles of one ``scin compare`` row on the RTL fabric of ``cal``: SCIN rows
    from :func:`scin_time` (the calibrated form), NVLS from :func:`nvls_time` with the row's
    window, ring from :func:`ring_time`."""
    f = rtl_fabric(cal)
    op, size, n = row.get("op", "allreduce"), int(row["size"]), int(row["endpoints"])
    algorithm = row["algorithm"]
    if algorithm == "nvls":
        window = row.get("window")
        t = nvls_time(op, size, n, f, cal, window=int(window) if window else NVLS_WINDOW)
    elif algorithm == "ring":
        t = ring_time(op, size, n, f, cal)
    elif algorithm in ("scin-fp16", "scin-int8"):
        t = scin_time(op, size, n, f, cal, algorithm.split("-")[1])
    else:
        raise ValueError(f"algorithm must be one of {', '.join(COMPARE_ALGORITHMS)}, "
                         f"not {algorithm!r}")
    return t * f.isa_clock_hz

def compare_modelled(row):
    """Whether the model has a form for a ``scin compare`` row (not for SCIN INQ of another
    collective than the All-Reduce)."""
    return not (row["algorithm"] == "scin-int8" and row.get("op", "allreduce") != "allreduce")
