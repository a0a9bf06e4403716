"""pytest fixtures shared by every testbench, and the order the suite runs in."""

import pytest

from scin.sim.runner import SIMULATORS
from scin.sim.toolchain import have_icarus
from scin.tb.simulators import ICARUS_MISSING


#: The longest tests of ``make test``, longest first (node-id prefixes; seconds measured on the
#: 2-core CI machine, docs/DEVELOPING.md "Suite time"). They run first so that they overlap the
#: many short tests instead of starting last and running alone: with ``--maxschedchunk 1`` each
#: xdist worker takes the next test in this order as it frees up (longest processing time first).
LONG_TESTS = [
    "tb/system/test_soak.py::test_two_groups_of_four_on_eight_ports",        # 8-port system
    "tb/system/test_nvls.py::test_reordered_responses_change_nvls_bits_not_scins",  # NVLS builds
    "tb/system/test_nvls.py::test_ld_reduce_st_and_refusals[verilator]",  # NVLS system build
    "tb/system/test_system.py::test_system_large",                               # two system builds
    "tb/system/test_soak.py::test_soak_short",
    "tb/block/test_faults.py::test_system_faults",
    "tb/block/test_datapath.py::test_datapath[icarus-",
    # six tops packaged and linted
    "tb/tools/test_package.py",
    "tb/block/test_formal.py::test_property[credit_link_l3:cover]",            # ~50-60 s
    "tb/block/test_formal.py::test_property[contract_bridge]",                 # bmc to 10, ~40-80 s
    "tb/block/test_formal.py::test_property[write_tags]",                      # k-induction, ~33 s
    "tb/block/test_formal.py::test_property[credit_order]",                    # bmc to 12, ~21-32 s
    "tb/tools/test_lint.py::test_block_lints_clean[system]",
    "tb/tools/test_lint.py::test_block_passes_yosys_check[system]",
]


#: What ``make quick`` leaves out besides :data:`LONG_TESTS` (node-id prefixes): the tests that run
#: the whole simulated system (each builds or shares a multi-minute Verilator model of it) and the
#: mutation run. ``make test`` runs them all (the whole-flow tests, marked ``flow``, run apart).
SYSTEM_TESTS = [
    "tb/system/test_system.py::test_system_",
    "tb/system/test_soak.py::test_soak_short",
    "tb/system/test_nvls.py::test_",
    "tb/system/test_nvls_soak.py::test_nvls_soak_short",
    "tb/system/test_nvls_collectives.py::test_nvls_collective[",
    "tb/system/test_ring.py::test_ring",
    "tb/block/test_faults.py::test_system",
    "tb/block/test_collectives.py::test_",
    "tb/block/test_push.py::test_",
    "tb/tools/test_cli.py::test_allreduce_",
    "tb/tools/test_cli.py::test_collective_json",
    "tb/tools/test_cli.py::test_reduce_scatter_trace",
    "tb/tools/test_coverage.py::test_the_soak_cli",
    "tb/tools/test_timing.py::test_datapath_block_meets_budget",
    "tb/tools/test_mutation.py::test_a_known_bug_is_killed",
]


def _slow(item):
    """Whether ``make quick`` leaves ``item`` out (it is marked ``slow``)."""
    return (item.get_closest_marker("slow") is not None
            or any(item.nodeid.startswith(p) for p in LONG_TESTS + SYSTEM_TESTS))


def _rank(item):
    for rank, prefix in enumerate(LONG_TESTS):
        if item.nodeid.startswith(prefix):
            return rank
    return len(LONG_TESTS)


def _interleaved_by_file(items):
    """``items`` taken one file at a time in turn (the first test of each file, then the second of
    each, ...), each file's tests in their own order. Neighbouring tests then rarely need the same
    simulator model, so two workers do not both start on one model that is not built yet, one of
    them waiting for the other's build instead of building or running something else."""
    files = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    queues = list(files.values())
    out = []
    for k in range(max(map(len, queues), default=0)):
        out += [q[k] for q in queues if k < len(q)]
    return out


def pytest_collection_modifyitems(config, items):
    """Move the long tests to the front, longest first; then the rest, interleaved by file
    (:func:`_interleaved_by_file`)."""
    for item in items:
        if _slow(item):
            item.add_marker(pytest.mark.slow)
    items.sort(key=_rank)
    long = [item for item in items if _rank(item) < len(LONG_TESTS)]
    items[len(long):] = _interleaved_by_file(items[len(long):])


@pytest.fixture(params=SIMULATORS)
def sim(request):
    """Run a test once per simulator; Icarus runs are skipped, with the reason, where it is
    absent."""
    if request.param == "icarus" and not have_icarus():
        pytest.skip(ICARUS_MISSING)
    return request.param
