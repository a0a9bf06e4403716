"""pytest fixtures shared by every testbench, and the order the suite runs in."""

import pytest

from scin.sim.runner import SIMULATORS
from scin.sim.toolchain import have_icarus


#: The longest tests of ``make test``, longest first (node-id prefixes; seconds measured on the
#: 2-core CI machine, docs/DEVELOPING.md "Suite time"). They run first so that they overlap the
#: many short tests instead of starting last and running alone: with ``--maxschedchunk 1`` each
#: xdist worker takes the next test in this order as it frees up (longest processing time first).
LONG_TESTS = [
    "tb/test_boards.py::test_ecp5_build_reports_utilisation_and_fmax",     # nextpnr, ~420-620 s
    "tb/test_soak.py::test_two_groups_of_four_on_eight_ports",            # 8-port system build
    "tb/test_system.py::test_system_large",                               # 4-port system builds
    "tb/test_soak.py::test_soak_short",
    "tb/test_faults.py::test_system_faults",
    "tb/test_isa.py::test_isa_allreduce[icarus-",
    "tb/test_isa.py::test_isa_",
    "tb/test_faults.py::",
]


def _rank(item):
    for rank, prefix in enumerate(LONG_TESTS):
        if item.nodeid.startswith(prefix):
            return rank
    return len(LONG_TESTS)


def pytest_collection_modifyitems(config, items):
    """Move the long tests to the front, longest first; the rest keep their order (``sort`` is
    stable)."""
    items.sort(key=_rank)


@pytest.fixture(params=SIMULATORS)
def sim(request):
    """Run a test once per simulator; Icarus runs are skipped, with the reason, where it is absent."""
    if request.param == "icarus" and not have_icarus():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed; `apt-get install iverilog`")
    return request.param

