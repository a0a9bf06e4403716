"""Which simulators a parametrized testbench runs on."""

import pytest

from scin.sim.toolchain import have_icarus


#: Why an Icarus test skips on a machine without Icarus (the ``sim`` fixture says the same).
ICARUS_MISSING = "Icarus Verilog (iverilog, vvp) is not installed; `apt-get install iverilog`"

#: Mark for a test parameter that needs Icarus.
needs_icarus = pytest.mark.skipif(not have_icarus(), reason=ICARUS_MISSING)


def sim_params(cases, icarus_cases):
    """``(sim, case)`` parameters: every case on Verilator, those in ``icarus_cases`` on Icarus too
    (a case left out is too long for Icarus; the test says why). Icarus entries skip, with the
    reason, where Icarus is absent; no Verilator-only case appears as a skipped Icarus test."""
    params = [pytest.param("verilator", case, id=f"verilator-{case}") for case in cases]
    params += [pytest.param("icarus", case, id=f"icarus-{case}", marks=needs_icarus)
               for case in cases if case in icarus_cases]
    return params
