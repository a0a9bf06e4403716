"""The analytic NVLS and ring models that `scin bench` sets beside the measured SCIN figures."""

import pytest

from scin.sim.models import LinkModel, nvls_cycles, ring_cycles, serialisation

LINK = LinkModel()


def test_serialisation_counts_one_header_per_4k_packet():
    assert serialisation(4096, LINK) == 128 + 1
    assert serialisation(4096 + 32, LINK) == 129 + 2
    assert serialisation(1 << 20, LINK) == 256 * 129


@pytest.mark.parametrize("n", [4, 8])
def test_nvls_large_message_efficiency_tends_to_n_over_n_plus_1(n):
    size = 1 << 30
    efficiency = size / (nvls_cycles(size, n, LINK) * LINK.flit_bytes)
    assert efficiency == pytest.approx(n / (n + 1) * 128 / 129, rel=1e-3)


def test_nvls_small_message_pays_two_barriers_and_six_hops():
    # 64 B: 2 barriers x 2 hops + 4-hop pull + 2-hop push = 10 one-way trips, one memory read.
    fixed = 10 * LINK.one_way_latency + LINK.mem_latency
    assert fixed < nvls_cycles(64, 4, LINK) < fixed + 10


@pytest.mark.parametrize("n", [4, 8])
def test_ring_has_2n_minus_2_dependent_steps(n):
    step = 2 * LINK.one_way_latency + LINK.mem_latency + serialisation(4096, LINK)
    assert ring_cycles(4096 * n, n, LINK) == 2 * (n - 1) * step


@pytest.mark.parametrize("call, message", [
    (lambda: nvls_cycles(4096, 1), "endpoints must be an integer of at least 2"),
    (lambda: ring_cycles(0, 4), "size must be positive"),
    (lambda: LinkModel(one_way_latency=0), "one_way_latency must be a positive integer"),
])
def test_bad_parameters(call, message):
    with pytest.raises(ValueError, match=message):
        call()
