"""The formal properties (`scin prove`): one test per check, so that every proof, every set of
covers and every deliberately broken variant runs in CI; and the flow's own guards.

A check's result is cached in ``.build/formal/`` by what was solved (sim/formal/prover.py), so a run
after a change of neither the harness nor the block costs no solver time.
"""

import re

import pytest
from amaranth.hdl import Fragment, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from scin.scripts.cli import main
from scin.sim.formal import Properties, prover
from scin.sim.toolchain import REPO_ROOT


CHECKS = prover.checks()

@pytest.mark.parametrize("check", CHECKS, ids=[c.name for c in CHECKS])
def test_property(check):
    """The check gives its expected result: a proof ``proved``, covers ``reached``, a broken
    variant ``failed`` on one of the properties it targets."""
    res = prover.run_check(check)
    assert res.ok, (f"{check.name}: {res.status}, expected {check.expect}"
                    f"{' on ' + ', '.join(check.must_fail) if check.must_fail else ''}; "
                    f"failed: {res.failed}; {res.detail} (work directory {res.workdir})")
    assert res.asserts or check.engine == "cover", "a proof with nothing asserted"


def test_every_set_has_a_proof_covers_and_a_reason_for_its_depth():
    for s in prover.PROPERTY_SETS:
        mine = [c for c in CHECKS if c.set == s.name]
        assert [c.expect for c in mine[:2]] == ["proved", "reached"], s.name
        assert len(mine) == 2 + len(s.broken)
        assert all(c.expect == "failed" and c.must_fail for c in mine[2:])
    # The blocks with broken variants: each block under proof has one.
    broken_blocks = {s.harness for s in prover.PROPERTY_SETS if s.broken}
    assert broken_blocks == {s.harness for s in prover.PROPERTY_SETS}


def test_every_stream_contract_block_has_a_broken_variant_that_runs():
    """Every block of the stream-contract harness has a broken variant, and ``scin prove`` runs
    each of them (every ``broken`` tie of ``BLOCKS`` is a variant of the block's set)."""
    from scin.sim.formal.stream_contracts import BLOCKS
    sets = {dict(s.params)["block"]: s for s in prover.PROPERTY_SETS
            if s.harness == "StreamContractHarness"}
    assert set(sets) == set(BLOCKS)
    for block, spec in BLOCKS.items():
        assert spec["broken"], f"{block} has no broken variant"
        assert set(spec["broken"]) == set(sets[block].broken), block


def test_unknown_names_are_refused_with_the_way_to_list_them():
    with pytest.raises(ValueError, match="no property set or check named 'nope'.*--list"):
        prover.select(["nope"])
    assert [c.name for c in prover.select(["barrier:cover"])] == ["barrier:cover"]
    assert {c.set for c in prover.select(["credit_link"])} == {"credit_link"}


def test_property_names_are_checked():
    props = Properties()
    m = Module()
    with pytest.raises(ValueError, match="no spaces"):
        props.spec(m, "two words", Signal())
    props.spec(m, "ok_name", Signal())
    with pytest.raises(ValueError, match="both as spec and cover"):
        props.cover(m, "ok_name", Signal())
    Fragment.get(m, None)  # elaborated: Amaranth warns of a Module never used


class _Contradiction(wiring.Component):
    """A harness whose assumptions cannot both hold: a proof on it proves nothing."""

    def __init__(self):
        self.properties = Properties()
        super().__init__({"x": In(1)})

    def elaborate(self, platform):
        m = Module()
        self.properties.assume(m, "x_high", self.x)
        self.properties.assume(m, "x_low", ~self.x)
        self.properties.spec(m, "anything", self.x)
        self.properties.cover(m, "x_seen", self.x)
        return m


def test_contradictory_assumptions_are_reported_vacuous(monkeypatch):
    """The guards against a proof that proves nothing: smtbmc's ``--presat`` finds that no trace
    meets the assumptions, and the proof is ``vacuous``, not ``proved``; and the set's covers
    cannot be reached (smtbmc's cover mode does not report the contradiction itself, so the
    cover check fails as ``unreached``)."""
    import scin.sim.formal as harnesses
    monkeypatch.setattr(harnesses, "_Contradiction", _Contradiction, raising=False)
    base = dict(set="vacuous", block="test", harness="_Contradiction", params=())
    proof = prover.Check("vacuous", engine="bmc", depth=3, expect="proved", **base)
    cover = prover.Check("vacuous:cover", engine="cover", depth=3, expect="reached", **base)
    res = prover.run_check(proof, fresh=True)
    assert res.status == "vacuous" and not res.ok, res
    res = prover.run_check(cover, fresh=True)
    assert res.status == "unreached" and res.failed == ["x_seen"] and not res.ok, res


def test_scin_prove_lists_every_check(capsys):
    assert main(["prove", "--list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == [c.name for c in CHECKS]


def test_scin_prove_runs_and_tabulates_one_set(capsys):
    """The command's table: a row per property of the proof, per cover, per broken variant
    (the packet arbiter's checks solve in about a second each, and are cached after)."""
    assert main(["prove", "--only", "packet_arbiter_n2", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "bounded_wait" in out and "unbounded" in out and "reached at cycle" in out
    assert "2 of 2 checks as expected" in out


def test_the_doc_names_every_property_set():
    """docs/VERIFICATION.md's table of property sets has one row per set, in order."""
    text = (REPO_ROOT / "docs" / "VERIFICATION.md").read_text()
    table = text[text.index("| set |"):].split("\n\n")[0]
    rows = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert rows == [s.name for s in prover.PROPERTY_SETS]


def test_every_json_key_is_in_the_cli_doc():
    text = (REPO_ROOT / "docs" / "CLI.md").read_text()
    section = text[text.index("\n## `scin prove`") + 1:]      # the section, not the options table
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    named = set(re.findall(r"`(\w+)`", section))
    keys = set(prover.result_dict(prover.Result("c", "proved", True, 0.0)))
    assert keys | {"passed", "seconds", "checks"} <= named, sorted(keys - named)


def test_a_timeout_kills_the_solver_too(tmp_path, monkeypatch):
    """smtbmc runs z3 as a child: a timeout must end both (a killed smtbmc once left z3 solving
    for 20 minutes)."""
    import os
    import time
    tool = tmp_path / "fake-smtbmc"
    tool.write_text("#!/bin/sh\nsleep 60 &\necho $! > solver.pid\nwait\n")
    tool.chmod(0o755)
    monkeypatch.setattr(prover, "tool", lambda name, env: str(tool))
    monkeypatch.setattr(prover, "TIMEOUT", 1)
    status, log, seconds = prover.smtbmc(tmp_path, "bmc1", [], dict(os.environ))
    assert status == "TIMEOUT" and seconds < 30
    pid = int((tmp_path / "solver.pid").read_text())
    for _ in range(50):                 # the kill is asynchronous; a zombie counts as gone
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split()[2] == "Z":
                    break
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the solver outlived its timeout")
