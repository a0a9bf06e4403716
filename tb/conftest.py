"""pytest fixtures shared by every testbench."""

import pytest

from scin.sim.runner import SIMULATORS
from scin.sim.toolchain import have_icarus


@pytest.fixture(params=SIMULATORS)
def sim(request):
    """Run a test once per simulator; Icarus runs are skipped, with the reason, where it is absent."""
    if request.param == "icarus" and not have_icarus():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed; `apt-get install iverilog`")
    return request.param
