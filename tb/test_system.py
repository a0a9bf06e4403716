"""End-to-end regression of the 4-endpoint system: switch + ISA + endpoints + links, driven the way
``scin allreduce`` drives it (:func:`scin.sim.allreduce.run_allreduce`), every endpoint's result
compared bit for bit with the golden model.

Small cases run on both simulators, the BF16 and INT8 ones at 1 KiB on Icarus (``ICARUS_SMALL``:
it simulates the 256-bit system at a few dozen cycles per second while data moves, and a 4 KiB
case took 40 s there). Large ones (64 KiB and up) run on Verilator only: a 1 MiB All-Reduce
would take Icarus hours.
"""

import pytest

from scin.sim.allreduce import AllReduceConfig, run_allreduce
from scin.tb.simulators import needs_icarus


def check(report):
    bad = [e for e in report["per_endpoint"] if not e["match"]]
    assert report["match"], f"endpoints {bad} differ from the golden model (run in {report['run_dir']})"
    assert report["status"] == report["expected_status"], report
    assert all(e["flag_generation"] == report.get("replays", len(report["replay_cycles"]))
               for e in report["per_endpoint"]), report["per_endpoint"]
    assert report["counters"]["unknown_tags"] == 0, report["counters"]
    assert not any(report["switch_errors"]), report["switch_errors"]


#: The ISA sizing of ``scin soak`` (sim/soak.py's defaults).
SOAK_HARDWARE = dict(capacity=16384, outstanding=4)

SMALL = {
    "fp16_64B":      dict(dtype="fp16", size=64),
    "bf16_4KiB":     dict(dtype="bf16", size=4096),
    "int8_4KiB":     dict(dtype="int8", size=4096),
    "fp16_4KiB+64B": dict(dtype="fp16", size=4096 + 64),
}

#: Icarus's small cases: every dtype, one slot and two (4 KiB + 64 B: a slot is 4 KiB).
ICARUS_SMALL = {
    "fp16_64B":      SMALL["fp16_64B"],
    "bf16_1KiB":     dict(dtype="bf16", size=1024),
    "int8_1KiB":     dict(dtype="int8", size=1024),
    "fp16_4KiB+64B": SMALL["fp16_4KiB+64B"],
}

LARGE = {
    "fp16_64KiB":          dict(dtype="fp16", size=64 << 10),
    "bf16_64KiB":          dict(dtype="bf16", size=64 << 10),
    "int8_64KiB":          dict(dtype="int8", size=64 << 10),
    "fp16_1MiB":           dict(dtype="fp16", size=1 << 20),
    "int8_1MiB":           dict(dtype="int8", size=1 << 20),
    # 200 KiB + 64 B: neither a whole number of slots nor of waves.
    "fp16_odd_waves":      dict(dtype="fp16", size=200 * 1024 + 64),
    "fp16_replay_x3":      dict(dtype="fp16", size=16 << 10, replays=3),
    "fp16_acked_flags":    dict(dtype="fp16", size=16 << 10, flag_mode="acked"),
    # Reordering memories on the soak's hardware (4 slots in 4 waves, tb/test_soak.py), so the two
    # share one simulator build; a 64 KiB message is then wave-regulated through the table.
    "fp16_reorder_random": dict(dtype="fp16", size=64 << 10, reorder=True, seed=7, **SOAK_HARDWARE),
    "int8_reorder_random": dict(dtype="int8", size=64 << 10, reorder=True, seed=8, **SOAK_HARDWARE),
    "fp16_with_traffic":   dict(dtype="fp16", size=64 << 10, traffic=True),
}


@pytest.mark.parametrize("sim, case", [
    *[pytest.param("verilator", case, id=f"verilator-{case}") for case in SMALL],
    *[pytest.param("icarus", case, id=f"icarus-{case}", marks=needs_icarus) for case in ICARUS_SMALL]])
def test_system_small(sim, case):
    cases = SMALL if sim == "verilator" else ICARUS_SMALL
    report = run_allreduce(AllReduceConfig(sim=sim, **cases[case]), log=lambda *_: None)
    check(report)


@pytest.mark.slow
@pytest.mark.parametrize("case", LARGE)
def test_system_large(case):
    report = run_allreduce(AllReduceConfig(sim="verilator", **LARGE[case]), log=lambda *_: None)
    check(report)
    if LARGE[case].get("traffic"):
        assert report["traffic_intact"], "ordinary writes did not all arrive intact"


#: The rest of the collective set on the system (``scin collective``), on the default build:
#: shards that cross 4 KiB pages at their source (ReduceScatter) and destination (AllGather), in
#: place and out of place, roots other than rank 0, and a barrier. Verilator only: Icarus runs
#: every operation at the ISA level (tb/test_collectives.py), and the system takes it a minute
#: per kilobyte.
COLLECTIVES = {
    "reduce_scatter_int8_6KiB":      dict(op="reduce-scatter", dtype="int8", size=6 << 10),
    "reduce_scatter_fp16_in_place":  dict(op="reduce-scatter", dtype="fp16", size=20 << 10,
                                          in_place=True, flag_mode="acked"),
    "allgather_bf16_in_place":       dict(op="allgather", dtype="bf16", size=12 << 10 | 96,
                                          in_place=True),
    "allgather_int8_64KiB":          dict(op="allgather", dtype="int8", size=64 << 10),
    # Each rank's 4 scale bytes share a flit with the others' (at r * C / 32): the loader must
    # place them at their bytes, not at the flit's start (sim.allreduce.flit_loads).
    "allgather_int8_256B_in_place":  dict(op="allgather", dtype="int8", size=256, in_place=True),
    "broadcast_fp16_root3":          dict(op="broadcast", dtype="fp16", size=(64 << 10) + 64,
                                          root=3),
    "broadcast_int8_root1_in_place": dict(op="broadcast", dtype="int8", size=16 << 10, root=1,
                                          in_place=True),
    "reduce_bf16_root2":             dict(op="reduce", dtype="bf16", size=64 << 10, root=2),
    "barrier":                       dict(op="barrier", replays=3),
}


@pytest.mark.parametrize("case", COLLECTIVES)
def test_system_collective(case):
    """Bit for bit over every endpoint's whole buffer window: each rank holds its input, its
    result and nothing else."""
    report = run_allreduce(AllReduceConfig(sim="verilator", **COLLECTIVES[case]),
                           log=lambda *_: None)
    check(report)
    assert report["op"] == COLLECTIVES[case]["op"]
