"""NVLS's and the ring's constants fitted to ``scin compare``'s measurements on the RTL fabric
(``docs/bench/compare.csv``), and the model checked against every row of it.

Both forms are the RTL's mechanism (:mod:`scin.sim.nvls_model`, :mod:`scin.sim.ring_model`);
only the four own-cycle constants of :data:`COMPARE_CONSTANTS` are fitted, by Gauss-Newton on
the relative differences; nothing is fitted per point.
"""

from dataclasses import replace

from .closed_forms import compare_model, compare_modelled

__all__ = ["COMPARE_CONSTANTS", "fit_compare", "validate_compare"]

#: The constants :func:`fit_compare` fits, with the nominal values of the event trace.
COMPARE_CONSTANTS = ("atomic_own", "nvls_own", "ring_slice_own", "ring_signal_own")
#: ``scin compare``'s algorithms: what each is in this model.

def fit_compare(rows, cal, source=""):
    """``cal`` with :data:`COMPARE_CONSTANTS` fitted to the NVLS and ring rows of ``scin
    compare`` (:func:`read_compare_csv`): least squares of the relative differences, by
    Gauss-Newton (the model is piecewise linear in the four). The rest of each form is the
    RTL's mechanism (hops, memory, packets, the engine's and the accelerator's cycles); nothing
    is fitted per point. Constants with no rows to fit them keep their value.

    Raises
    ------
    ValueError
        No NVLS or ring row to fit.
    """
    fitted = [r for r in rows if r["algorithm"] in ("nvls", "ring")]
    if not fitted:
        raise ValueError("the compare rows have no nvls or ring point to fit")
    used = {"atomic_own": True,
            "nvls_own": any(r["algorithm"] == "nvls" for r in fitted),
            "ring_slice_own": any(r["algorithm"] == "ring" for r in fitted),
            "ring_signal_own": any(r["algorithm"] == "ring" for r in fitted)}
    names = [k for k in COMPARE_CONSTANTS if used[k]]
    p = [float(getattr(cal, k)) for k in names]

    def residuals(values):
        c = replace(cal, **dict(zip(names, values)))
        return [(compare_model(r, c) - r["cycles"]) / r["cycles"] for r in fitted]

    for _ in range(20):
        r0 = residuals(p)
        # Forward differences of one cycle: the constants are cycles of the RTL.
        jac = []
        for k in range(len(p)):
            q = list(p)
            q[k] += 1.0
            jac.append([b - a for a, b in zip(r0, residuals(q))])
        normal = [[sum(x * y for x, y in zip(jac[i], jac[j])) for j in range(len(p))]
                  for i in range(len(p))]
        rhs = [-sum(x * y for x, y in zip(jac[i], r0)) for i in range(len(p))]
        step = _solve(normal, rhs)
        p = [a + b for a, b in zip(p, step)]
        if max(abs(x) for x in step) < 1e-3:
            break
    commits = list(dict.fromkeys(str(r.get("commit", "")) for r in rows if r.get("commit")))
    return replace(cal, **{k: round(v, 2) for k, v in zip(names, p)}, compare_source=source,
                   compare_commits=commits, compare_points=len(fitted))


def _solve(a, b):
    """``x`` with ``a x = b`` (a small symmetric system; a singular direction is left at 0)."""
    n = len(b)
    m = [row[:] + [v] for row, v in zip(a, b)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda i: abs(m[i][col]))
        if abs(m[pivot][col]) < 1e-18:
            continue
        m[col], m[pivot] = m[pivot], m[col]
        for i in range(n):
            if i != col:
                k = m[i][col] / m[col][col]
                m[i] = [x - k * y for x, y in zip(m[i], m[col])]
    return [m[i][n] / m[i][i] if abs(m[i][i]) >= 1e-18 else 0.0 for i in range(n)]


def validate_compare(rows, cal):
    """Model against RTL for every ``scin compare`` row: the row's keys plus ``model`` (cycles)
    and ``error_pct`` (model against measured, percent); both None for a row the model has no
    form for (SCIN INQ of another collective than the All-Reduce)."""
    out = []
    for r in rows:
        if not compare_modelled(r):
            out.append({**r, "model": None, "error_pct": None})
            continue
        model = compare_model(r, cal)
        out.append({**r, "model": model, "error_pct": 100 * (model - r["cycles"]) / r["cycles"]})
    return out


