"""The randomised soak (`scin soak`): a short one on each simulator, plus its plan and its options.

The soak's own checks are the test: every good collective of every operation bit-exact over its
whole buffers, every fault flagged ERROR, every non-participant untouched, every ordinary write
intact (sim/soak.py). The checker is tested too: a perfect run passes, and a byte written where
the operation gives a rank nothing fails it.
"""

import json
import subprocess
import sys
from collections import Counter

import pytest

from scin.sim import numerics
from scin.sim.soak import (SoakConfig, make_plan, verify, expected_window, OPS,
                           BAD_DESC_KINDS, FAULT_OPS, PUSH_BAD_KINDS, PUSHABLE)


def run(*argv):
    result = subprocess.run([sys.executable, "-m", "scin.scripts.cli", "soak", *argv],
                            capture_output=True, text=True, timeout=3000)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.parametrize("sim, count, max_size, seed, ops, modes", [
    # Seed 64 draws every operation good, each data operation in place too, a Broadcast from
    # root 2 and a Reduce to root 1, DECERR and four kinds of bad descriptor (misaligned, root
    # not a rank, zero length, shard not whole flits), and every descriptor mode: pushed
    # All-Reduces, a Reduce, a ReduceScatter (PUSH) and an AllGather (AUTO), AUTO pulling, and
    # two PUSH AllGathers that cannot push (no space; too large).
    pytest.param("verilator", 24, "32KiB", 64, set(OPS), {"pull", "push", "auto:push",
                                                          "auto:pull"}, id="verilator-24-32KiB"),
    # Icarus is about 50x slower on the system: fewer and smaller collectives (6 of them took
    # 353 s on the 2-core CI machine). With seed 4 these three still mix the dtypes and the ops (a
    # Broadcast from root 1, an in-place ReduceScatter, a DECERR fault) with groups that leave
    # endpoints out (the isolation check), and the descriptor modes (the Broadcast pushed, AUTO).
    pytest.param("icarus", 3, "2KiB", 4, {"broadcast", "allreduce", "reduce-scatter"},
                 {"pull", "auto:push"}, id="icarus-3-2KiB"),
])
def test_soak_short(sim, count, max_size, seed, ops, modes):
    from scin.sim.runner import have_icarus
    if sim == "icarus" and not have_icarus():
        pytest.skip("Icarus Verilog is not installed (apt-get install iverilog)")
    code, out, err = run("--count", str(count), "--seed", str(seed), "--sim", sim,
                         "--max-size", max_size, "--fault-rate", "0.3", "--json")
    assert code in (0, 1), err[-3000:]
    summary = json.loads(out)
    print(json.dumps({k: summary[k] for k in ("outcomes", "ops", "modes", "pushed",
                                              "ordinary_writes", "cycles", "wall_seconds")}))
    assert summary["passed"], summary["failures"]
    assert sum(c["ok"] for c in summary["outcomes"].values()) == count
    assert sum(c["ok"] for c in summary["ops"].values()) == count and set(summary["ops"]) == ops
    assert sum(c["ok"] for c in summary["modes"].values()) == count, summary["modes"]
    assert set(summary["modes"]) == modes and summary["pushed"] > 0, summary["modes"]
    # verify checked the counters: no push WRITE dropped, every descriptor completed once.
    assert summary["counters"]["bad_pushes"] == 0
    assert summary["counters"]["collectives"] >= count
    # The isolation check ran: some collective left an endpoint out, and its memory was looked at.
    assert summary["isolation_checks"] > 0, summary
    # The functional coverage counts what ran and was checked: every collective once per axis
    # it has, every operation drawn in its bin.
    cov = summary["coverage"]
    assert cov["collectives"] == count and cov["axes"]["op"]["filled"] == len(ops), cov
    assert {op: n for op, n in cov["axes"]["op"]["hits"].items() if n} == \
        {op: c["ok"] for op, c in summary["ops"].items()}
    assert sum(cov["axes"]["fault"]["hits"].values()) == count
    assert 0 < cov["filled"] <= cov["total"] and cov["holes"] == cov["total"] - cov["filled"]


def test_two_groups_of_four_on_eight_ports():
    """The paper's two-TP4 partitioning: groups {0-3} and {4-7} alternate in the program, each
    working through its own collectives with random stalls while the other runs, raced by ordinary
    traffic; every collective of both groups bit-exact (or correctly flagged), none lost. Seed 4
    draws, among them, an in-place fp16 AllGather of 4 KiB per rank that the ISA runs in pairs of
    ranks (the soak's ISA has ``gather_pairs``) on four of the eight ports.
    Verilator only: an 8-endpoint system is too slow on Icarus for a useful number of
    collectives."""
    code, out, err = run("--count", "16", "--seed", "4", "--endpoints", "8", "--groups", "halves",
                         "--max-size", "16KiB", "--json")
    assert code in (0, 1), err[-3000:]
    summary = json.loads(out)
    print(json.dumps({k: summary[k] for k in ("outcomes", "ops", "paired", "ordinary_writes",
                                              "cycles", "wall_seconds")}))
    assert summary["passed"], summary["failures"]
    assert sum(c["ok"] for c in summary["outcomes"].values()) == 16
    # Each of the 16 collectives leaves the other group's four endpoints out.
    assert summary["isolation_checks"] == 16 * 4, summary
    # The two groups ran different operations side by side: the plan the run drew (the CLI's
    # defaults are SoakConfig's) pairs collective 2m on {0-3} with 2m + 1 on {4-7}.
    expected = make_plan(SoakConfig(count=16, seed=4, endpoints=8, groups="halves",
                                    max_size=16 << 10))[2]
    pairs = [(a["op"], b["op"]) for a, b in zip(expected[::2], expected[1::2])]
    assert all(a != b for a, b in pairs), pairs
    assert sum(c["ok"] for c in summary["ops"].values()) == 16 and len(summary["ops"]) >= 4, summary
    assert summary["paired"] == sum(bool(e["paired"]) for e in expected) == 1, summary["paired"]


def test_plan_is_seeded_and_mixes_classes():
    cfg = SoakConfig(count=60, seed=9, max_size=16 << 10)
    a, b = make_plan(cfg), make_plan(cfg)
    assert json.dumps(a[0], sort_keys=True) == json.dumps(b[0], sort_keys=True)
    faults = {e["fault"] for e in a[2]}
    assert faults == {"none", "decerr", "bad_desc"}
    assert {e["dtype"] for e in a[2]} == {"fp16", "bf16", "int8"}
    # Every operation, every data operation in place and not, roots other than 0.
    assert {e["op"] for e in a[2]} == set(OPS)
    assert {(e["op"], e["in_place"]) for e in a[2] if e["op"] != "barrier"} == \
        {(op, p) for op in numerics.OPS for p in (False, True)}
    assert any(e["root"] for e in a[2] if e["op"] in ("broadcast", "reduce"))
    assert all(e["root"] == 0 for e in a[2] if e["op"] not in ("broadcast", "reduce"))
    assert any(len(e["members"]) < 4 for e in a[2])
    assert any(c["traffic"] for c in a[0]["collectives"])
    assert any(t.get("overwrites") for c in a[0]["collectives"] for t in c["traffic"])
    halves = make_plan(SoakConfig(count=6, seed=9, endpoints=8, groups="halves"))[2]
    assert [e["members"] for e in halves] == [[0, 1, 2, 3], [4, 5, 6, 7]] * 3
    # The two groups' concurrent collectives (2m and 2m + 1) are different operations.
    halves = make_plan(SoakConfig(count=40, seed=9, endpoints=8, groups="halves",
                                  max_size=8 << 10))[2]
    assert all(x["op"] != y["op"] for x, y in zip(halves[::2], halves[1::2]))


def test_plan_sizes_and_buffers_follow_the_isa():
    """Shards of whole flits (INT8: whole blocks), ReduceScatter and AllGather buffers within
    max_size, in place with the scales in place, and every collective's window after the last."""
    from scin.hdl.isa import Op
    plan, _, expected = make_plan(SoakConfig(count=60, seed=4, max_size=8 << 10, fault_rate=0))
    end = 0
    for c, e in zip(plan["collectives"], expected):
        d, n = c["desc"], len(e["members"])
        assert Op(d["op"]).name.lower().replace("_", "-") == e["op"] and d["root"] == e["root"]
        nbytes = d["elements"] * (1 if e["dtype"] == "int8" else 2)
        if e["dtype"] == "int8":
            assert d["elements"] % 64 == 0
        if e["op"] in ("reduce-scatter", "allgather"):
            assert nbytes % 32 == 0 and n * e["size"] <= 8 << 10, e
        assert (d["src_addr"] == d["dst_addr"]) == e["in_place"] == \
            (d["src_scale_addr"] == d["dst_scale_addr"])
        assert e["window"][0] == end and d["src_addr"] == end
        end = e["window"][1]


def test_every_bad_descriptor_kind_is_drawn_with_an_op_it_spoils():
    """The kinds in turn, each with an operation it applies to, and each a descriptor the ISA's
    check refuses (make_plan asserts that too); barriers get the kinds that spoil a barrier."""
    from scin.hdl.isa import check_descriptor
    cfg = SoakConfig(count=60, seed=19, fault_rate=1, max_size=4 << 10)
    plan, _, expected = make_plan(cfg)
    isa = cfg.system().params().isa
    bad = [(c, e) for c, e in zip(plan["collectives"], expected) if e["fault"] == "bad_desc"]
    # Every collective drawn with a fault: none drawn good, so none a PUSH that cannot push.
    assert not any(e["bad_kind"] in PUSH_BAD_KINDS for _, e in bad)
    assert [e["bad_kind"] for _, e in bad] == \
        [BAD_DESC_KINDS[j % len(BAD_DESC_KINDS)] for j in range(len(bad))]
    assert len(bad) >= 2 * len(BAD_DESC_KINDS), len(bad)
    for c, e in bad:
        assert e["op"] in FAULT_OPS.get(e["bad_kind"], numerics.OPS), e
        assert check_descriptor(c["desc"], isa), (e["bad_kind"], c["desc"])
    assert all(e["op"] != "barrier" for e in expected if e["fault"] == "decerr")
    # Seed 19 spoils a barrier both ways a barrier can be spoilt.
    assert {e["bad_kind"] for e in expected if e["op"] == "barrier"} == {"absent_port", "bad_op"}


def _batches(plan, expected, per=8):
    return [list(zip(plan["collectives"][b:b + per], expected[b:b + per]))
            for b in range(0, len(expected), per)]


def test_plan_draws_every_mode_and_pushes_only_where_the_isa_takes_it():
    """Every descriptor mode, with AUTO resolved both ways; each pushed collective a good one of
    an operation that can be pushed, on sync resource 0 (the push resource) within the push
    space, push_mode saying so; two pushed collectives share resource 0 in a batch only when
    the later one's members all took part in the earlier one (they have seen its flag, and the
    space is free, before they push), and nothing else takes resource 0 before them; every
    faulty descriptor with a barrier pulled; the PUSH descriptors that cannot push in turn, each
    refused for its push reason, with generation 0 (no barrier, no generation)."""
    from scin.hdl.isa import PushMode, check_descriptor, push_mode
    from scin.sim.collective_check import mode_label
    # Seed 62: every operation is pushed somewhere, two pushes share resource 0 in a batch, and
    # the one PUSH that cannot push for its operation (a barrier's: barriers are a twelfth of
    # the draw) comes up.
    cfg = SoakConfig(count=60, seed=62, fault_rate=0.5, max_size=16 << 10)
    plan, _, expected = make_plan(cfg)
    isa = cfg.system().params().isa
    assert isa.push_resources == 1 and isa.push_capacity == plan["hw"]["push_capacity"] == 16 << 10
    assert {mode_label(e) for e in expected} == {"pull", "push", "auto:push", "auto:pull"}
    assert {e["op"] for e in expected if e["pushed"]} == set(PUSHABLE)
    for c, e in zip(plan["collectives"], expected):
        d = c["desc"]
        assert PushMode(d["mode"]).name.lower() == e["mode"] and c["pushed"] == e["pushed"]
        assert e["pushed"] == (e["fault"] == "none" and push_mode(d, isa) == PushMode.PUSH)
        if e["pushed"]:
            n = len(e["members"]) if e["op"] == "reduce-scatter" else 1
            assert d["sync"] == 0 and e["op"] in PUSHABLE and not check_descriptor(d, isa)
            assert n * d["elements"] * (1 if e["dtype"] == "int8" else 2) <= isa.push_capacity
        elif e["no_barrier"]:
            reasons = check_descriptor(d, isa)
            assert d["mode"] == PushMode.PUSH.value and e["generation"] == c["generation"] == 0
            assert e["bad_kind"] in PUSH_BAD_KINDS and e["op"] in FAULT_OPS[e["bad_kind"]]
            assert "push" in reasons[-1], reasons
        else:
            assert push_mode(d, isa) == PushMode.PULL
    kinds = [e["bad_kind"] for e in expected if e["no_barrier"]]
    assert set(kinds) == set(PUSH_BAD_KINDS), kinds
    for batch in _batches(plan, expected):
        syncs = [c["desc"]["sync"] for c, _ in batch]
        assert all(syncs.count(s) == 1 for s in syncs if s), syncs
        zero = [(c, e) for c, e in batch if c["desc"]["sync"] == 0]
        for j, (c, e) in enumerate(zero):
            if j < len(zero) - 1:
                assert e["pushed"], "only pushed collectives are followed on resource 0"
            if j:
                assert e["pushed"] or e["no_barrier"]
                if e["pushed"]:
                    assert all(set(e["members"]) <= set(f["members"]) for _, f in zero[:j])
    assert any(sum(e["pushed"] for c, e in batch if c["desc"]["sync"] == 0) > 1
               for batch in _batches(plan, expected)), "no batch with two pushes on resource 0"


def test_push_mode_leaves_the_rest_of_the_draw_as_it_was():
    """The modes come from a stream of their own: without push space (``push_capacity=0``,
    resource ``k mod 8`` as before push mode) a seed draws the same collectives, inputs, stalls
    and traffic; with it only a collective drawn good may become a PUSH that cannot push."""
    a_plan, a_images, a = make_plan(SoakConfig(count=40, seed=7, fault_rate=0.3,
                                               push_capacity=0))
    b_plan, b_images, b = make_plan(SoakConfig(count=40, seed=7, fault_rate=0.3))
    assert [c["desc"]["sync"] for c in a_plan["collectives"]] == [k % 8 for k in range(40)]
    assert not any(e["pushed"] or e["no_barrier"] for e in a) and "push_capacity" not in a_plan
    assert a_images == b_images
    for (ca, ea), (cb, eb) in zip(zip(a_plan["collectives"], a), zip(b_plan["collectives"], b)):
        for key in ("op", "dtype", "size", "root", "in_place", "members", "window", "inputs"):
            assert ea[key] == eb[key], (ea["k"], key)
        assert (ca["stalls"], ca["traffic"]) == (cb["stalls"], cb["traffic"])
        assert (ea["fault"], ea["bad_kind"]) == (eb["fault"], eb["bad_kind"]) or \
            (ea["fault"] == "none" and eb["bad_kind"] in PUSH_BAD_KINDS)


def test_images_load_whole_flits_with_every_input_at_its_place():
    """The load images are whole flits at flit addresses (the loader's unit), and loading them
    leaves each member's window with exactly its inputs, also where two ranks' regions share a
    flit: an in-place INT8 AllGather's 4-byte scale shards (seed 3 draws one of 4 ranks, 128 B)."""
    import numpy as np
    plan, images, expected = make_plan(SoakConfig(count=40, seed=3, max_size=8 << 10))
    assert any(e["op"] == "allgather" and e["in_place"] and e["dtype"] == "int8"
               and e["size"] == 128 and len(e["members"]) == 4 for e in expected)
    for i in range(4):
        mem = np.zeros(4 << 20, np.uint8)
        for addr, raw in images[i]:
            assert addr % 32 == 0 and len(raw) % 32 == 0, (addr, len(raw))
            mem[addr:addr + len(raw)] = np.frombuffer(raw, np.uint8)
        for e in expected:
            lo, hi = e["window"]
            want = bytearray(hi - lo)
            for a, raw in e["inputs"].get(i, []):
                want[a:a + len(raw)] = raw
            assert mem[lo:hi].tobytes() == bytes(want), (e["k"], i)


def _perfect_run(expected, n=4):
    """Memories and flags as a correct run of ``expected`` leaves them (DECERR windows: zero)."""
    import numpy as np
    from scin.hdl.codec import pack
    from scin.hdl.isa import flag_layout
    mem = [np.zeros(4 << 20, np.uint8) for _ in range(n)]
    flags = {}
    for e in expected:
        lo, hi = e["window"]
        for i in e["members"]:
            image = expected_window(e, i)
            if image is not None:
                mem[i][lo:hi] = np.frombuffer(image, np.uint8)
            word = pack(flag_layout(), generation=e["generation"], status=e["want_status"])
            mem[i][e["flag"]:e["flag"] + 4] = np.frombuffer(word.to_bytes(4, "little"), np.uint8)
            flags.setdefault(str(e["k"]), {})[str(i)] = word
    return mem, {"flags": flags}


def _first(expected, op, in_place=False):
    return next(e for e in expected if e["op"] == op and e["in_place"] == in_place)


def test_verify_catches_a_wrong_result_and_bytes_where_a_rank_gets_nothing():
    """The checker itself can fail: corrupt one byte of a result; write one byte into a Reduce's
    non-root destination and past a ReduceScatter rank's shard (the operation gives them nothing);
    write to a non-member's flag and buffers (the plan's seed is chosen so that it has those
    collectives and one that leaves an endpoint out)."""
    plan, images, expected = make_plan(SoakConfig(count=10, seed=2, fault_rate=0, traffic_rate=0))
    mem, result = _perfect_run(expected)
    summary = verify(expected, plan, result, mem)
    assert summary["passed"], summary["failures"]
    assert sum(c["ok"] for c in summary["ops"].values()) == len(expected)

    def fails_at(i, addr, what):
        old = mem[i][addr]
        mem[i][addr] ^= 0x5A
        failures = verify(expected, plan, result, mem)["failures"]
        mem[i][addr] = old
        assert len(failures) == 1 and f"endpoint {i}: 1 bytes differ from the golden model's " \
            f"image, first at {addr:#x} ({what})" in failures[0], failures
        return failures[0]

    e = _first(expected, "allreduce")
    fails_at(e["members"][0], e["buffers"]["dst"], "dst + 0x0")
    e = _first(expected, "reduce")
    non_root = e["members"][(e["root"] + 1) % len(e["members"])]
    assert "reduce" in fails_at(non_root, e["buffers"]["dst"] + 6, "dst + 0x6")
    e = _first(expected, "reduce-scatter")
    shard = e["size"] // (2 if e["dtype"] == "int8" else 1)
    fails_at(e["members"][-1], e["buffers"]["dst"] + shard, f"dst + {shard:#x}")

    partial = [e for e in expected if len(e["members"]) < 4]
    assert partial, "the plan must have a collective with a non-participant (pick another seed)"
    assert summary["isolation_checks"] == sum(4 - len(e["members"]) for e in expected) > 0
    e = partial[0]
    outsider = next(i for i in range(4) if i not in e["members"])
    for where in (e["flag"], e["buffers"]["dst"], e["window"][1] - 1):
        mem[outsider][where] = 1
        failures = verify(expected, plan, result, mem)["failures"]
        assert failures == [f"collective {e['k']} wrote to non-participant {outsider}"], failures
        mem[outsider][where] = 0


def test_verify_bad_descriptor_leaves_inputs_only_and_barrier_flags():
    """A bad descriptor's window must hold its inputs and nothing else, and a barrier's flag its
    generation with OK status."""
    from scin.hdl.codec import pack
    from scin.hdl.isa import FlagStatus, flag_layout
    plan, images, expected = make_plan(SoakConfig(count=60, seed=6, fault_rate=1, traffic_rate=0,
                                                  max_size=4 << 10))
    mem, result = _perfect_run(expected)
    assert verify(expected, plan, result, mem)["passed"]
    e = next(e for e in expected if e["bad_kind"] == "root_not_a_rank" and not e["in_place"])
    i = e["members"][0]
    mem[i][e["buffers"]["dst"]] = 1
    failures = verify(expected, plan, result, mem)["failures"]
    assert len(failures) == 1 and "root_not_a_rank" in failures[0], failures
    mem[i][e["buffers"]["dst"]] = 0
    plan, images, expected = make_plan(SoakConfig(count=60, seed=9, max_size=16 << 10,
                                                  traffic_rate=0))
    mem, result = _perfect_run(expected)
    e = next(e for e in expected if e["op"] == "barrier" and e["fault"] == "none")
    assert e["want_status"] == 0
    i = e["members"][0]
    word = pack(flag_layout(), generation=e["generation"], status=FlagStatus.ERROR.value)
    result["flags"][str(e["k"])][str(i)] = word
    failures = verify(expected, plan, result, mem)["failures"]
    from scin.sim.collective_check import describe
    assert describe(e).startswith("barrier"), describe(e)
    assert failures == [f"collective {e['k']} ({describe(e)}) endpoint {i}: flag {word} in the "
                        f"event, {e['generation']:#x} in memory, expected {e['generation']:#x}"], \
        failures


def test_verify_push_faults_by_their_flag_word_and_the_counters():
    """A PUSH that cannot push has no member waiting (no event): its flag word in memory must
    be ERROR of generation 0, and a zero word (never written) fails it. The ISA's counters are
    checked when the result has them: a dropped push WRITE, or a descriptor completed twice,
    fails the soak."""
    from scin.hdl.codec import pack
    from scin.hdl.isa import FlagStatus, flag_layout
    plan, _, expected = make_plan(SoakConfig(count=60, seed=4, fault_rate=0.5,
                                             max_size=16 << 10, traffic_rate=0))
    mem, result = _perfect_run(expected)
    e = next(e for e in expected if e["no_barrier"])
    for i in e["members"]:
        del result["flags"][str(e["k"])][str(i)]      # no WAIT_FLAG: no event
    bad = sum(x["fault"] == "bad_desc" for x in expected)
    result["counters"] = {"collectives": 60, "bad_descriptors": bad, "timeouts": 0,
                          "bad_pushes": 0, "bad_arrivals": 0, "dup_arrivals": 0, "slots": 99}
    summary = verify(expected, plan, result, mem)
    assert summary["passed"], summary["failures"]
    assert summary["modes"] == {m: {"ok": n, "FAILED": 0} for m, n in
                                Counter(_label(x) for x in expected).items()}
    assert summary["pushed"] == sum(x["pushed"] for x in expected) > 0
    i = e["members"][0]
    assert int.from_bytes(mem[i][e["flag"]:e["flag"] + 4].tobytes(), "little") == \
        pack(flag_layout(), generation=0, status=FlagStatus.ERROR.value)
    mem[i][e["flag"]:e["flag"] + 4] = 0
    failures = verify(expected, plan, result, mem)["failures"]
    assert len(failures) == 1 and f"collective {e['k']} (" in failures[0] and \
        f"{e['bad_kind']}) endpoint {i}: no event (no barrier), 0x0 in memory, expected " \
        f"0x40000" in failures[0], \
        failures
    mem, result2 = _perfect_run(expected)
    for name, value in (("bad_pushes", 1), ("collectives", 61), ("bad_descriptors", bad - 1)):
        failures = verify(expected, plan, {**result2, "counters": {**result["counters"],
                                                                   name: value}}, mem)["failures"]
        assert failures == [f"ISA counter {name} is {value}, expected "
                            f"{result['counters'][name]}"], failures


def _label(e):
    from scin.sim.collective_check import mode_label
    return mode_label(e)


@pytest.mark.parametrize("argv, message", [
    (["--count", "0"], "argument --count: must be an integer from 1 to 10000"),
    (["--endpoints", "9"], "argument --endpoints: must be an integer from 2 to 8"),
    (["--fault-rate", "2"], "argument --fault-rate: must be a number at least 0 and at most 1"),
    (["--endpoints", "3", "--groups", "halves"], "needs an even number of endpoints"),
    (["--count", "400", "--max-size", "256KiB"], "do not fit"),
])
def test_bad_options(argv, message):
    code, _, err = run(*argv)
    assert code == 2 and message in err and "Traceback" not in err, err


def test_replay_command_carries_every_option_that_shapes_the_draw():
    """The replay line printed at the end must reproduce the run: the seed, and every non-default
    option that changes what is drawn (a replay without ``--groups halves`` draws other groups)."""
    from scin.scripts.soak import build_parser, replay_command
    argv = ["--count", "16", "--seed", "5", "--endpoints", "8", "--groups", "halves",
            "--max-size", "16KiB", "--fault-rate", "0.3", "--in-order"]
    line = replay_command(build_parser().parse_args(argv))
    assert line == ("scin soak --count 16 --seed 5 --endpoints 8 --fault-rate 0.3 "
                    "--max-size 16KiB --groups halves --in-order")
    assert build_parser().parse_args(line.split()[2:]) == build_parser().parse_args(argv)
    assert replay_command(build_parser().parse_args([])) == \
        "scin soak --count 20 --seed 1 --endpoints 4"
