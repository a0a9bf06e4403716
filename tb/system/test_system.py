"""End-to-end regression of the 4-endpoint system: switch + ISA + endpoints + links, driven the way
``scin allreduce`` drives it (:func:`scin.sim.allreduce.run_allreduce`), every endpoint's result
compared bit for bit with the golden model.

Small cases run on both simulators, the BF16 and INT8 ones at 1 KiB on Icarus (``ICARUS_SMALL``:
it simulates the 256-bit system at a few dozen cycles per second while data moves, and a 4 KiB
case took 40 s there). Large ones (64 KiB and up) run on Verilator only: a 1 MiB All-Reduce
would take Icarus hours. Push mode (docs/ISA.md, Push mode) runs on the soak's hardware, which
has push space, so it adds no simulator build (``test_push_cases_share_the_soak_build``).
"""

import pytest

from scin.sim.allreduce import CollectiveConfig, run_allreduce
from scin.sim.soak import SoakConfig
from scin.tb.simulators import needs_icarus


def check(report):
    bad = [e for e in report["per_endpoint"] if not e["match"]]
    assert report["match"], \
        f"endpoints {bad} differ from the golden model (run in {report['run_dir']})"
    assert report["status"] == report["expected_status"], report
    assert all(e["flag_generation"] == report.get("replays", len(report["replay_cycles"]))
               for e in report["per_endpoint"]), report["per_endpoint"]
    assert report["counters"]["unknown_tags"] == 0, report["counters"]
    assert not any(report["switch_errors"]), report["switch_errors"]


#: The hardware of ``scin soak`` (sim/soak.py's defaults): a 16 KiB wave table in 4 waves,
#: reordered memory responses, one push resource of 16 KiB per participant, trains of 2 slots,
#: in-place AllGathers of whole pages in pairs of ranks (``gather_pairs``).
#: A case on it shares the soak's simulator build.
SOAK_HARDWARE = {k: SoakConfig().system().to_json()[k]
                 for k in ("capacity", "outstanding", "reorder", "push_capacity", "trains",
                           "gather_pairs")}

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
    # Reordering memories on the soak's hardware (4 slots in 4 waves, tb/system/test_soak.py), so
    # the two share one simulator build; a 64 KiB message is then wave-regulated through the table.
    "fp16_reorder_random": dict(dtype="fp16", size=64 << 10, seed=7, **SOAK_HARDWARE),
    "int8_reorder_random": dict(dtype="int8", size=64 << 10, seed=8, **SOAK_HARDWARE),
    "fp16_with_traffic":   dict(dtype="fp16", size=64 << 10, traffic=True),
}


#: Push mode end to end: ``(configuration, pushed)``, every case on the soak's hardware (reordered
#: memories; a push never reads them). AUTO pushes up to the threshold (the push space, 16 KiB per
#: participant) and pulls above it. Icarus runs its own sizes (``ICARUS_PUSH``).
PUSH = {
    "push_fp16_64B":          (dict(dtype="fp16", size=64, mode="push"), True),
    "push_bf16_4KiB":         (dict(dtype="bf16", size=4096, mode="push", seed=2), True),
    "push_int8_4KiB":         (dict(dtype="int8", size=4096, mode="push", seed=3), True),
    # Two slots per participant (4 KiB + 64 B), to root 2 only.
    "push_reduce_root2":      (dict(op="reduce", root=2, dtype="fp16", size=4096 + 64,
                                    mode="push", seed=4), True),
    "auto_push_16KiB":        (dict(dtype="fp16", size=16 << 10, mode="auto", seed=5), True),
    "auto_pull_16KiB+64B":    (dict(dtype="bf16", size=(16 << 10) + 64, mode="auto", seed=6),
                               False),
    # The space handed back and pushed again, generation after generation (two slots each).
    "push_replay_x3":         (dict(dtype="fp16", size=4096 + 64, mode="push", replays=3,
                                    seed=7), True),
    # Ordinary writes racing the pushes through the same links and switch ports.
    "push_with_traffic":      (dict(dtype="bf16", size=8192, mode="push", traffic=True,
                                    seed=8), True),
}

#: Icarus's push cases: 1 KiB where Verilator moves 4 KiB or more; no AUTO over the threshold
#: (16 KiB per participant: minutes on Icarus) and no ordinary traffic (64 KiB per endpoint).
ICARUS_PUSH = {
    "push_fp16_64B":          PUSH["push_fp16_64B"],
    "push_bf16_1KiB":         (dict(dtype="bf16", size=1024, mode="push", seed=2), True),
    "push_int8_1KiB":         (dict(dtype="int8", size=1024, mode="push", seed=3), True),
    "push_reduce_root2":      (dict(op="reduce", root=2, dtype="fp16", size=1024, mode="push",
                                    seed=4), True),
    "auto_push_1KiB":         (dict(dtype="bf16", size=1024, mode="auto", seed=5), True),
    "push_replay_x3":         (dict(dtype="fp16", size=64, mode="push", replays=3, seed=7), True),
}


def test_push_cases_share_the_soak_build():
    """Every case on ``SOAK_HARDWARE`` (push, AUTO, the reordering ones and the paired
    AllGathers) builds the very system ``scin soak`` builds (the same parameters, so the same
    Verilog and simulator model; the 8-endpoint one, ``scin soak --endpoints 8``'s): push mode and
    the pairs add no build to the suite."""
    soak = SoakConfig().system()
    cases = [{**c, **SOAK_HARDWARE}
             for c, _ in (*PUSH.values(), *ICARUS_PUSH.values(), *PAIRED.values())] + \
        [LARGE["fp16_reorder_random"], LARGE["int8_reorder_random"]]
    soak8 = SoakConfig(endpoints=8).system()
    for case in cases:
        cfg = CollectiveConfig.from_fields(**case)
        assert cfg.system() == (soak8 if cfg.endpoints == 8 else soak), case


@pytest.mark.parametrize("sim, case", [
    *[pytest.param("verilator", case, id=f"verilator-{case}") for case in PUSH],
    *[pytest.param("icarus", case, id=f"icarus-{case}", marks=needs_icarus)
      for case in ICARUS_PUSH]])
def test_system_push(sim, case):
    """Pushed collectives bit for bit: participants write their inputs into the ISA's space with
    posted WRITEs (REDUCE_SEND push) instead of arriving; the ISA sends no READ (``slots`` stays
    0), drops no push WRITE (``bad_pushes``), and every flag is the golden model's. AUTO pushes
    under the threshold and pulls over it."""
    config, pushed = (PUSH if sim == "verilator" else ICARUS_PUSH)[case]
    report = run_allreduce(CollectiveConfig.from_fields(sim=sim, **config, **SOAK_HARDWARE),
                           log=lambda *_: None)
    check(report)
    c = report["counters"]
    print({k: report[k] for k in ("op", "mode", "pushed", "cycles", "replay_cycles")},
          {k: c[k] for k in ("slots", "bad_pushes", "collectives", "bad_descriptors")})
    assert report["mode"] == config["mode"] and report["pushed"] == pushed, report
    assert c["bad_pushes"] == 0 and c["bad_descriptors"] == 0, c
    assert c["collectives"] == config.get("replays", 1), c
    # Pushed: no READ at the ISA's initiative, so no wave-table slot issued; pulled: slots.
    assert (c["slots"] == 0) == pushed, c
    if config.get("traffic"):
        assert report["traffic_intact"], "ordinary writes did not all arrive intact"


@pytest.mark.parametrize("sim, case", [
    *[pytest.param("verilator", case, id=f"verilator-{case}") for case in SMALL],
    *[pytest.param("icarus", case, id=f"icarus-{case}", marks=needs_icarus)
      for case in ICARUS_SMALL]])
def test_system_small(sim, case):
    cases = SMALL if sim == "verilator" else ICARUS_SMALL
    report = run_allreduce(CollectiveConfig.from_fields(
        sim=sim, **cases[case]), log=lambda *_: None)
    check(report)


@pytest.mark.slow
@pytest.mark.parametrize("case", LARGE)
def test_system_large(case):
    report = run_allreduce(CollectiveConfig.from_fields(
        sim="verilator", **LARGE[case]), log=lambda *_: None)
    check(report)
    if LARGE[case].get("traffic"):
        assert report["traffic_intact"], "ordinary writes did not all arrive intact"


#: The rest of the collective set on the system (``scin collective``), on the default build:
#: shards that cross 4 KiB pages at their source (ReduceScatter) and destination (AllGather), in
#: place and out of place, roots other than rank 0, and a barrier. Verilator only: Icarus runs
#: every operation at the ISA level (tb/block/test_collectives.py), and the system takes it a minute
#: per kilobyte.
COLLECTIVES = {
    "reduce_scatter_int8_6KiB":      dict(op="reduce-scatter", dtype="int8", size=6 << 10),
    "reduce_scatter_fp16_in_place":  dict(op="reduce-scatter", dtype="fp16", size=20 << 10,
                                          in_place=True, flag_mode="acked"),
    "allgather_bf16_in_place":       dict(op="allgather", dtype="bf16", size=12 << 10 | 96,
                                          in_place=True),
    "allgather_int8_64KiB":          dict(op="allgather", dtype="int8", size=64 << 10),
    # Each rank's 4 scale bytes share a flit with the others' (at r * C / 32): the loader must
    # place them at their bytes, not at the flit's start (sim.system_run.flit_loads).
    "allgather_int8_256B_in_place":  dict(op="allgather", dtype="int8", size=256, in_place=True),
    "broadcast_fp16_root3":          dict(op="broadcast", dtype="fp16", size=(64 << 10) + 64,
                                          root=3),
    "broadcast_int8_root1_in_place": dict(op="broadcast", dtype="int8", size=16 << 10, root=1,
                                          in_place=True),
    "reduce_bf16_root2":             dict(op="reduce", dtype="bf16", size=64 << 10, root=2),
    "barrier":                       dict(op="barrier", replays=3),
}


#: In-place AllGathers on the soak's hardware (``gather_pairs``, reordered memories): whole pages
#: run in pairs of ranks, ``N - 1`` phases (checked by the slots issued); a shard that is not
#: whole pages runs one phase per rank. ``(configuration, slots)``.
PAIRED = {
    "allgather_fp16_in_place_pairs":  (dict(op="allgather", dtype="fp16", size=8 << 10,
                                            in_place=True, seed=3), 3 * 2),
    "allgather_bf16_in_place_unpaired": (dict(op="allgather", dtype="bf16", size=(4 << 10) + 64,
                                              in_place=True, seed=4), 4 * 2),
    # All eight ranks of the 8-endpoint soak's build (tb/system/test_soak.py): 7 phases of one slot.
    "allgather_fp16_in_place_pairs_8": (dict(op="allgather", dtype="fp16", size=4 << 10,
                                             in_place=True, endpoints=8, seed=5), 7),
}


@pytest.mark.parametrize("case", PAIRED)
def test_system_allgather_in_pairs(case):
    """Bit for bit as :func:`test_system_collective`, and the phases the ISA ran."""
    config, slots = PAIRED[case]
    report = run_allreduce(CollectiveConfig.from_fields(sim="verilator", **config, **SOAK_HARDWARE),
                           log=lambda *_: None)
    check(report)
    assert report["params"]["gather_pairs"] is True
    assert report["counters"]["slots"] == slots, report["counters"]


@pytest.mark.parametrize("case", COLLECTIVES)
def test_system_collective(case):
    """Bit for bit over every endpoint's whole buffer window: each rank holds its input, its
    result and nothing else."""
    report = run_allreduce(CollectiveConfig.from_fields(sim="verilator", **COLLECTIVES[case]),
                           log=lambda *_: None)
    check(report)
    assert report["op"] == COLLECTIVES[case]["op"]
