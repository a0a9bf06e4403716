"""The NVLS soak (`scin soak --nvls`, sim/nvls_soak.py): NVLS All-Reduces, SCIN collectives and
refused multicast accesses at the same time on one NVLS-enabled switch.

One short seeded soak on Verilator, on the system of tb/system/test_nvls.py (its build is reused),
whose own checks are the test; the plan's properties without simulation (drawn from the seed, the
parts of a step on disjoint ports, every bad-access kind, buffers and tags that do not collide);
and the checker itself: a perfect run passes, and each kind of wrong answer fails it.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

from scin.hdl.endpoint.accelerator import EventKind
from scin.hdl.packet import FabricParams, Status
from scin.sim.nvls_run import NvlsSystem
from scin.sim.nvls_soak import (BAD_KINDS, FLAG_PAGE, MEM_SIZE, hardware, make_nvls_plan,
                                verify_round)
from scin.sim.soak import SoakConfig, expected_window

F = FabricParams.default_for(ports=4)


def run(*argv):
    result = subprocess.run([sys.executable, "-m", "scin.scripts.cli", "soak", *argv],
                            capture_output=True, text=True, timeout=3000)
    return result.returncode, result.stdout, result.stderr


def test_nvls_soak_short():
    """24 collectives from seed 90 in three rounds (about 15 s once built): NVLS All-Reduces of
    pairs, three ports and all four, fp16 and bf16, wide-range and exact inputs, buffers across a
    page, beside SCIN collectives of every operation on the other ports; every kind of bad
    multicast access at least once, each refused and counted; SCIN faults (DECERR and bad
    descriptors) too. The system is tb/system/test_nvls.py's ``HW`` (``--in-order``)."""
    code, out, err = run("--nvls", "--count", "24", "--seed", "90", "--fault-rate", "0.3",
                         "--in-order", "--json")
    assert code in (0, 1), err[-3000:]
    s = json.loads(out)
    print(json.dumps({k: s[k] for k in ("outcomes", "ops", "rounds", "cycles", "wall_seconds",
                                        "nvls_counters")}))
    assert s["passed"], s["failures"]
    assert s["nvls"] and s["count"] == 24 and s["rounds"] >= 2
    assert sum(c["ok"] for c in s["ops"].values()) == 24
    outcomes = s["outcomes"]
    assert all(c["FAILED"] == 0 for c in outcomes.values())
    refused = {k.split(":", 1)[1]: c["ok"] for k, c in outcomes.items() if k.startswith("refused:")}
    assert set(refused) == set(BAD_KINDS), refused
    assert s["nvls_counters"]["refused"] == sum(refused.values())
    assert s["nvls_counters"]["stale_rdata"] == s["nvls_counters"]["stale_wresp"] == 0
    assert {"nvls:wide", "nvls:exact", "scin:none", "scin:decerr"} <= set(outcomes)
    assert any(k.startswith("scin:bad_desc:") for k in outcomes)
    assert s["ops"]["nvls-allreduce"]["ok"] >= 8 and len(s["ops"]) == 7, s["ops"]
    assert not any(s["switch_errors"]) and s["counters"]["timeouts"] == 0
    assert s["isolation_checks"] > 0
    # The plan the run drew (the CLI's defaults are SoakConfig's): NVLS beside SCIN in one step.
    _, _, expected = make_nvls_plan(SoakConfig(count=24, seed=90, fault_rate=0.3, reorder=False,
                                               nvls=True))
    entries = [e for r in expected for e in r if e["kind"] != "bad"]
    kinds = {e["k"]: e["kind"] for e in entries}
    assert any(e["kind"] == "nvls" and "scin" in {kinds[j] for j in e["step_with"]}
               for e in entries)
    cov = s["nvls_coverage"]
    assert cov["collectives"] == s["ops"]["nvls-allreduce"]["ok"]
    assert cov["axes"]["group"]["filled"] >= 3, cov["axes"]["group"]   # pair, three, all
    assert cov["axes"]["page"]["holes"] == [] and cov["axes"]["beside"]["holes"] == []
    assert s["coverage"]["collectives"] == 24 - cov["collectives"]


def test_soak_uses_the_nvls_test_hardware():
    """No new build: in order on four endpoints, the soak's system is tb/system/test_nvls.py's
    HW."""
    cfg = SoakConfig(nvls=True, reorder=False)
    assert hardware(cfg) == NvlsSystem(endpoints=4, mem_size=1 << 16, entries=8, acks=8)
    assert cfg.max_size == 4096


def _plan(**kw):
    return make_nvls_plan(SoakConfig(**{"nvls": True, "count": 40, "seed": 5, **kw}))


def test_plan_is_drawn_from_the_seed():
    a, b = _plan(), _plan()
    assert json.dumps(a[0], sort_keys=True) == json.dumps(b[0], sort_keys=True)
    assert a[1] == b[1]
    assert json.dumps(_plan(seed=6)[0], sort_keys=True) != json.dumps(a[0], sort_keys=True)
    assert sum(len(r["items"]) for r in a[0]["rounds"]) == 40


def _steps(expected):
    """Each step's collectives: ``{frozenset of k}`` -> entries."""
    steps = {}
    for r in expected:
        for e in r:
            if e["kind"] != "bad":
                steps.setdefault(frozenset([e["k"], *e["step_with"]]), []).append(e)
    return steps


def test_collectives_of_a_step_are_on_disjoint_ports_and_both_kinds_mix():
    _, _, expected = _plan(count=200)
    steps = _steps(expected)
    for step in steps.values():
        ports = [p for e in step for p in e["members"]]
        assert len(ports) == len(set(ports)), [(e["k"], e["members"]) for e in step]
        assert all(len(e["members"]) >= 2 for e in step)
        assert len(step) <= 2
    pairs = [{e["kind"] for e in step} for step in steps.values() if len(step) == 2]
    assert {"nvls", "scin"} in pairs and {"nvls"} in pairs and {"scin"} in pairs
    nvls = [e for r in expected for e in r if e["kind"] == "nvls"]
    assert {len(e["members"]) for e in nvls} == {2, 3, 4}
    assert {e["dtype"] for e in nvls} == {"fp16", "bf16"}
    assert {e["inputs"] for e in nvls} == {"wide", "exact"}
    assert min(e["window"] for e in nvls) == 1 and max(e["window"] for e in nvls) == 16
    assert all(e["size"] % 32 == 0 and 32 <= e["size"] <= 4096 for e in nvls)


def test_bad_accesses_are_present_each_kind_in_turn_and_refusable():
    """Every kind, in turn; each address outside every loaded group or running past one's end,
    or a length the engine refuses; each right before its port's collective of the step."""
    plan, _, expected = _plan(count=60, fault_rate=0.3)
    hw = hardware(SoakConfig(nvls=True))
    bad = [e for r in expected for e in r if e["kind"] == "bad"]
    assert [e["bad_kind"] for e in bad] == [BAD_KINDS[j % len(BAD_KINDS)] for j in range(len(bad))]
    assert len(bad) >= 2 * len(BAD_KINDS)
    for rnd, entries in zip(plan["rounds"], expected):
        groups = [(g["base"], g["base"] + g["size"]) for g in rnd["groups"]]
        assert len(groups) == hw.groups and all(g["size"] == MEM_SIZE for g in rnd["groups"])
        for e in (e for e in entries if e["kind"] == "bad"):
            size = 4 if e["op"] == "RED" else e["length"]
            hits = [lo <= e["addr"] and e["addr"] + size <= hi for lo, hi in groups]
            if e["bad_kind"].endswith(("_outside", "_past_end")):
                assert not any(hits), e
            else:
                assert any(hits) and (e["length"] == 0 or e["length"] % 32
                                      or e["length"] > hw.entry_bytes), e
            cmds = rnd["commands"][e["port"]]
            at = next(j for j, c in enumerate(cmds) if c["tag"] == e["tag"])
            assert cmds[at]["dst"] == F.switch_port and cmds[at]["addr"] >= F.multicast_base
            if e["before"] is not None:
                item = next(x for x in entries if x.get("k") == e["before"])
                assert e["port"] in item["members"]
                first = item["tags"][0]
                assert next(j for j, c in enumerate(cmds) if c["tag"] == first) > at


def test_rounds_fit_the_system():
    """Buffers below the flag page and apart, tags unique per port, one descriptor per sync
    resource, the events expected as many as the commands give, every NVLS packet whole flits of
    at most a reduction entry that crosses no 4 KiB boundary, and the packets covering the
    buffer once; every load inside its collective's buffers."""
    from scin.hdl.isa import check_descriptor
    from scin.sim.nvls_run import system_params
    plan, loads, expected = _plan(count=80, max_size=8192)
    params = system_params(hardware(SoakConfig(nvls=True)))
    for rnd, rnd_loads, entries in zip(plan["rounds"], loads, expected):
        spans = sorted((e["buf"], e["buf"] + e["size"]) if e["kind"] == "nvls" else e["window"]
                       for e in entries if e["kind"] != "bad")
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])) and spans[-1][1] <= FLAG_PAGE
        flags = [e["flag"] for e in entries if e["kind"] != "bad"]
        assert len(set(flags)) == len(flags) and all(FLAG_PAGE <= f < MEM_SIZE for f in flags)
        for port, cmds in rnd["commands"].items():
            tags = [c["tag"] for c in cmds]
            assert 0 < min(tags) and max(tags) < 1 << (F.tag_width - 1)
            assert rnd["expect"][port] == len(cmds)
        descs = rnd["descriptors"]
        assert [d["sync"] for d in descs] == list(range(len(descs))) and len(descs) <= 8
        for e in (e for e in entries if e["kind"] == "scin"):
            assert bool(check_descriptor(e["desc"], params.isa)) == (e["fault"] == "bad_desc")
        for e in (e for e in entries if e["kind"] == "nvls"):
            covered = np.zeros(e["size"], int)
            for a, length in e["packets"]:
                assert length % 32 == 0 and 32 <= length <= min(e["packet"], 1024)
                assert a // 4096 == (a + length - 1) // 4096, (a, length)
                covered[a - e["buf"]:a - e["buf"] + length] += 1
            assert (covered == 1).all()
            assert sum(e["ld_reduces"].values()) == len(e["packets"])
            g = rnd["groups"][e["group"]]
            assert g["members"] == sum(1 << p for p in e["members"]) and g["dtype"] == e["dtype"]
        for port, regions in rnd_loads.items():
            for a, raw in regions:
                assert any(lo <= a and a + len(raw) <= hi for lo, hi in spans), (port, a)


def _perfect(rnd, rnd_loads, entries, n=4):
    """What a correct run of round ``rnd`` returns (run_program's keys): the NVLS results in
    port order (an arrival order), the SCIN results of the golden model, every command's
    events."""
    from scin.hdl.codec import pack
    from scin.hdl.isa import flag_layout
    from scin.sim.nvls import nvls_reduce
    mem = [bytearray(MEM_SIZE) for _ in range(n)]
    for port, regions in rnd_loads.items():
        for a, raw in regions:
            mem[port][a:a + len(raw)] = raw
    events = {i: [] for i in range(n)}

    def event(port, kind, tag, status=0, value=0, length=0):
        events[port].append(dict(kind=kind.value, tag=tag, status=status, src=port, inc=0,
                                 length=length, value=value, cycle=100 + len(events[port])))

    refused = 0
    for e in entries:
        if e["kind"] == "nvls":
            result = nvls_reduce(e["input_data"], list(range(len(e["members"]))), e["dtype"])
            for i in e["members"]:
                mem[i][e["buf"]:e["buf"] + e["size"]] = result.astype("<u2").tobytes()
                mem[i][e["flag"]:e["flag"] + 4] = (2 * len(e["members"])).to_bytes(4, "little")
                red1, poll1, data, red2, poll2 = e["tags"]
                event(i, EventKind.WRITE_DONE, red1)
                event(i, EventKind.FLAG, poll1)
                for r in range(e["runs"][i]):
                    event(i, EventKind.KERNEL_DONE, data, value=e["ld_reduces"][i] if r == 0 else 0)
                event(i, EventKind.WRITE_DONE, red2)
                event(i, EventKind.FLAG, poll2)
        elif e["kind"] == "scin":
            word = pack(flag_layout(), generation=e["generation"], status=e["want_status"])
            lo, hi = e["window"]
            for i in e["members"]:
                image = expected_window(e, i)
                if image is not None:
                    mem[i][lo:hi] = image
                mem[i][e["flag"]:e["flag"] + 4] = word.to_bytes(4, "little")
                event(i, EventKind.WRITE_DONE, e["tags"][0])
                event(i, EventKind.FLAG, e["tags"][1], value=word)
        else:
            refused += 1
            kind = EventKind.READ_DONE if e["op"] == "READ_REMOTE" else EventKind.WRITE_DONE
            event(e["port"], kind, e["tag"], status=Status.DECERR.value)
    nv = [e for e in entries if e["kind"] == "nvls"]
    scin = [e for e in entries if e["kind"] == "scin"]
    packets = sum(len(e["packets"]) for e in nv)
    return {"events": events, "images": {i: bytes(m) for i, m in enumerate(mem)},
            "nvls_counters": {"ld_reduces": packets, "stores": packets,
                              "reds": sum(2 * len(e["members"]) for e in nv), "refused": refused,
                              "stale_rdata": 0, "stale_wresp": 0},
            "counters": {"collectives": len(scin), "timeouts": 0, "bad_arrivals": 0,
                         "dup_arrivals": 0, "bad_requests": 0,
                         "bad_descriptors": sum(e["fault"] == "bad_desc" for e in scin)},
            "switch_errors": [0] * n}


def _failures(rnd, entries, out):
    verdicts, own, _ = verify_round(rnd, entries, out)
    return [f for found in verdicts.values() for f in found] + own


def test_verify_passes_a_perfect_round_and_catches_each_wrong_answer():
    """The checker can fail: a flipped byte of an NVLS result in one member, a wide-range packet
    that no arrival order gives (the same in every member), a bad access answered OK, a byte
    written outside every collective, a refused count off by one, a SCIN result byte, a
    non-member's NVLS buffer written."""
    plan, loads, expected = _plan(count=40, fault_rate=0.3)
    j = next(j for j, r in enumerate(expected)
             if {"nvls", "scin", "bad"} <= {e["kind"] for e in r}
             and any(e["kind"] == "nvls" and e["inputs"] == "wide" and len(e["members"]) >= 3
                     and e["size"] >= 128 for e in r)
             and any(e["kind"] == "scin" and e["fault"] == "none" and e["op"] != "barrier"
                     for e in r)
             and any(e["kind"] == "nvls" and len(e["members"]) < 4 for e in r))
    rnd, entries = plan["rounds"][j], expected[j]
    perfect = _perfect(rnd, loads[j], entries)
    assert _failures(rnd, entries, perfect) == []

    def spoilt(change):
        out = json.loads(json.dumps({k: v for k, v in perfect.items() if k != "images"}))
        out["events"] = {int(i): evs for i, evs in out["events"].items()}
        out["images"] = {i: bytearray(m) for i, m in perfect["images"].items()}
        change(out)
        out["images"] = {i: bytes(m) for i, m in out["images"].items()}
        return _failures(rnd, entries, out)

    nv = next(e for e in entries if e["kind"] == "nvls" and e["inputs"] == "wide"
              and len(e["members"]) >= 3 and e["size"] >= 128)

    def flip(out):
        out["images"][nv["members"][-1]][nv["buf"] + 3] ^= 0x40
    found = spoilt(flip)
    assert len(found) == 1 and f"endpoint {nv['members'][-1]}: 1 bytes differ from endpoint " \
        f"{nv['members'][0]}'s result" in found[0], found

    def no_order(out):
        # Element 0 of the first packet in every member: the sum plus one ulp is no order's.
        for i in nv["members"]:
            out["images"][i][nv["buf"]] ^= 0x01
    found = spoilt(no_order)
    assert len(found) == 1 and "ld_reduce packets are no arrival order's reduction" in found[0]

    bad = next(e for e in entries if e["kind"] == "bad")

    def answered_ok(out):
        ev = next(x for x in out["events"][bad["port"]] if x["tag"] == bad["tag"])
        ev["status"] = Status.OK.value
    found = spoilt(answered_ok)
    assert len(found) == 1 and bad["bad_kind"] in found[0] and "DECERR" in found[0], found

    def stray(out):
        out["images"][0][FLAG_PAGE - 1] = 7
    found = spoilt(stray)
    assert found == [f"round {rnd['index']} endpoint 0: 1 bytes written outside every "
                     f"collective's buffers and flags, first at {FLAG_PAGE - 1:#x}"], found

    def miscounted(out):
        out["nvls_counters"]["refused"] += 1
    found = spoilt(miscounted)
    assert len(found) == 1 and "NVLS counters" in found[0], found

    sc = next(e for e in entries if e["kind"] == "scin" and e["fault"] == "none"
              and e["op"] != "barrier")

    def scin_byte(out):
        i = sc["members"][0]
        lo, hi = sc["window"]
        want = expected_window(sc, i)
        at = next(a for a in range(hi - lo) if want[a])        # a byte of its input or result
        out["images"][i][lo + at] ^= 0x10
    found = spoilt(scin_byte)
    assert len(found) == 1 and f"collective {sc['k']}" in found[0], found

    outside = next(e for e in entries if e["kind"] == "nvls" and len(e["members"]) < 4)
    other = next(i for i in range(4) if i not in outside["members"])

    def non_member(out):
        out["images"][other][outside["buf"]] = 1
    found = spoilt(non_member)
    assert found == [f"collective {outside['k']} wrote to non-member {other}"], found


@pytest.mark.parametrize("argv, message", [
    (["--nvls", "--max-size", "16KiB"], "max_size must be an integer between 64 and 8192"),
    (["--nvls", "--endpoints", "8", "--groups", "halves"], "groups must be 'random' with nvls"),
])
def test_bad_nvls_options(argv, message):
    code, _, err = run(*argv)
    assert code == 2 and message in err and "Traceback" not in err, err


def test_replay_command_carries_nvls():
    from scin.scripts.soak import build_parser, replay_command
    argv = ["--nvls", "--count", "24", "--seed", "7", "--fault-rate", "0.3", "--in-order"]
    line = replay_command(build_parser().parse_args(argv))
    assert line == "scin soak --count 24 --seed 7 --endpoints 4 --fault-rate 0.3 --in-order --nvls"
    assert build_parser().parse_args(line.split()[2:]) == build_parser().parse_args(argv)
