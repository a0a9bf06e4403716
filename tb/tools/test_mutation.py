"""The mutation tool (scripts/mutation.py, `scin mutate`): its operators, its draw, and that a
mutant really runs the tests on mutated code (a known bug is killed, the unmutated tree passes),
and that the triage, keyed by scope and line text, survives edits above a triaged line and goes
stale when the line itself changes."""

import argparse
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from scin.scripts import mutation
from scin.scripts.mutate import report_markdown, score
from scin.scripts.mutation import Mutant, Outcome, choose, sites
from scin.sim.line_keys import StaleKey
from scin.sim.toolchain import REPO_ROOT


SOURCE = textwrap.dedent('''\
    import enum

    class Op(enum.Enum, shape=2):
        A = 0
        B = 1  # the second

    class Block:
        def __init__(self, n):
            if n < 1:
                raise ValueError(n)

        def elaborate(self, platform):
            m = Module()
            with m.If(a & ~b):
                m.d.sync += x.eq(y + 1)
            with m.Elif(c == 3):
                pass
            k = Signal(range(n + 1))
            return m
    ''')


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "hdl").mkdir()
    (tmp_path / "hdl" / "block.py").write_text(SOURCE)
    return tmp_path


def _changes(tree):
    return {(m.operator, m.before, m.after) for m in sites("hdl/block.py", root=tree)}


def test_every_operator_makes_its_change(tree):
    changes = _changes(tree)
    expected = {
        ("drop_condition", "a & ~b", "(a)"),
        ("drop_condition", "a & ~b", "(~b)"),
        ("drop_condition", "a & ~b", "1"),
        ("invert", "~b", "(b)"),
        ("off_by_one", "1", "2"),
        ("compare", "c == 3", "c != 3"),
        ("off_by_one", "3", "4"),
        ("drop_condition", "c == 3", "1"),
        ("swap_enum", "0\n    B = 1", "1\n    B = 0"),
    }
    assert changes == expected


def test_mutant_names_are_unique_within_a_file(tree):
    names = [m.name for m in sites("hdl/block.py", root=tree)]
    assert len(names) == len(set(names))
    assert "hdl/block.py:14:18:drop_condition/2" in names    # a & ~b: (a), (~b), 1
    keys = [m.key for m in sites("hdl/block.py", root=tree)]
    assert len(keys) == len(set(keys)) == len(names)
    # The column is counted from the line's first non-blank character: `a & ~b` starts at 10.
    assert "hdl/block.py::Block.elaborate::with m.If(a & ~b):::drop_condition@10/2" in keys
    assert "hdl/block.py::Op::A = 0::swap_enum@4" in keys


def test_parameter_checks_and_signal_shapes_are_not_mutated(tree):
    # `n < 1` in __init__ is a parameter check, `range(n + 1)` a signal's shape, not hardware.
    befores = [before for _, before, _ in _changes(tree)]
    assert not any("n < 1" in b for b in befores)
    assert sum(b == "1" for b in befores) == 1            # y + 1 only, not n + 1


def test_a_mutant_applies_where_it_was_found_and_only_there(tree):
    m = next(m for m in sites("hdl/block.py", root=tree) if m.operator == "compare")
    mutated = m.apply(SOURCE)
    assert mutated.replace("c != 3", "c == 3") == SOURCE
    with pytest.raises(ValueError, match="expected 'c == 3'"):
        m.apply(SOURCE.replace("c == 3", "c == 4"))


def test_the_draw_is_seeded_and_spread_over_files():
    first = choose(12, seed=5)
    assert first == choose(12, seed=5)
    assert first != choose(12, seed=6)
    assert len({m.name for m in first}) == 12
    # Twelve draws over more than twelve files: no file twice before every file once.
    assert len({m.file for m in first}) == 12


def test_bad_draws_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="no tests are listed for hdl/nowhere.py"):
        choose(3, 1, files=["hdl/nowhere.py"])
    with pytest.raises(ValueError, match="count must be at least 1"):
        choose(0, 1)


def test_every_target_has_sites_and_every_triage_names_a_current_mutant():
    every = {m.name for f in mutation.TARGETS for m in sites(f)}
    for f in mutation.TARGETS:
        assert any(name.startswith(f + ":") for name in every), f
    found = mutation.resolve_triage()       # raises StaleKey, naming each entry that is stale
    assert set(found) == set(mutation.TRIAGE)
    assert all(m.key == key for key, m in found.items())


#: The triaged arbiter mutant: `~locked` made 1 (an equivalent mutant).
ARBITER = "hdl/switch/arbiter.py"
ARBITER_LINE = "with m.If(~locked):"


def _arbiter_copy(tmp_path):
    """A scratch root with a copy of the arbiter, and its TRIAGE entry (key, reason)."""
    (tmp_path / ARBITER).parent.mkdir(parents=True)
    shutil.copy(REPO_ROOT / ARBITER, tmp_path / ARBITER)
    [entry] = [(k, v) for k, v in mutation.TRIAGE.items() if k.startswith(ARBITER + "::")]
    assert f"::{ARBITER_LINE}::" in entry[0]
    return entry


def test_a_triage_entry_follows_its_line_when_lines_are_inserted_above(tmp_path):
    """Lines added above a triaged mutant's line, in the file and in the same function, leave
    its entry valid: it names the same change, on the line's new number."""
    key, reason = _arbiter_copy(tmp_path)
    before = mutation.resolve_triage({key: reason}, REPO_ROOT)[key]
    source = (tmp_path / ARBITER).read_text().splitlines(keepends=True)
    at = before.line - 1
    indent = source[at][:len(source[at]) - len(source[at].lstrip())]
    edited = (["# a new comment\n", "import os\n"] + source[:at]
              + [f"{indent}# why the next line\n"] + source[at:])
    (tmp_path / ARBITER).write_text("".join(edited))
    after = mutation.resolve_triage({key: reason}, tmp_path)[key]
    assert after.line == before.line + 3
    assert (after.operator, after.before, after.after) == (before.operator, before.before,
                                                           before.after)
    assert after.apply((tmp_path / ARBITER).read_text()).splitlines()[after.line - 1].strip() \
        == "with m.If(1):"
    # By its old name (file:line:col:op) the entry would now name another line or nothing.
    assert before.name not in {m.name for m in sites(ARBITER, root=tmp_path)}


def test_a_triage_entry_whose_line_was_edited_is_reported_stale(tmp_path):
    """Editing the triaged line's text makes the entry an error naming file, scope and text."""
    key, reason = _arbiter_copy(tmp_path)
    text = (tmp_path / ARBITER).read_text()
    assert text.count(ARBITER_LINE) == 1
    (tmp_path / ARBITER).write_text(text.replace(ARBITER_LINE, "with m.If(~locked & ~hold):"))
    with pytest.raises(StaleKey) as error:
        mutation.resolve_triage({key: reason}, tmp_path)
    message = str(error.value)
    assert "1 TRIAGE entries name no mutant" in message
    assert ARBITER in message and "PacketArbiter.elaborate" in message
    assert repr(ARBITER_LINE) in message
    # The line intact but no longer holding that change: stale too, with the line's mutants.
    line_key, _, _ = key.rpartition("::")
    with pytest.raises(StaleKey, match="has no mutant 'invert@3'"):
        mutation.resolve_triage({f"{line_key}::invert@3": reason}, REPO_ROOT)


def test_a_known_bug_is_killed_and_the_unmutated_tree_passes():
    """Runs the feeder's tests twice on scratch copies of the tree: as it is (they pass), and
    with the feeder issuing flits whether or not it has a job (they must fail). This is what
    makes every other mutant's verdict mean something: the tests really import the copy."""
    status, _, _, detail = mutation.run_tests("hdl/isa/feeder.py")
    assert status == "survived", detail
    bug = next(m for m in sites("hdl/isa/feeder.py")
               if m.operator == "drop_condition" and m.before == "active & have"
               and m.after == "(have)")
    outcome = mutation.run_mutant(bug)
    assert outcome.status == "killed", outcome
    assert outcome.failed and "test_feeder" in outcome.failed[0]


def test_score_and_report_list_every_survivor_with_its_triage():
    m = Mutant("hdl/isa/feeder.py", "invert", 3, 4, 3, 6, "~a", "(a)",
               key="hdl/isa/feeder.py::Feeder.elaborate::x = ~a::invert@4")
    outcomes = [Outcome(m, "survived", 1.0, []),
                Outcome(m, "killed", 1.0, ["t"]),
                Outcome(m, "timeout", 1.0, []),
                Outcome(m, "error", 1.0, [])]
    assert score(outcomes) == (2, 3)
    args = argparse.Namespace(count=4, seed=1, jobs=2)
    text = report_markdown(outcomes, args, 10.0, {m.key: "equivalent: why"})
    assert "2 of 3 mutants noticed (66.7%)" in text
    assert "equivalent: why" in text
    assert "not triaged" in report_markdown(outcomes, args, 10.0, {})


def test_every_json_key_is_in_the_cli_doc():
    """docs/CLI.md's `scin mutate` section names every key of a mutant's JSON object."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "CLI.md").read_text()
    section = text[text.index("\n## `scin mutate`") + 1:]     # the section, not the options table
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    named = set(re.findall(r"`(\w+)`", section))
    m = Mutant("hdl/isa/feeder.py", "invert", 3, 4, 3, 6, "~a", "(a)")
    keys = set(Outcome(m, "killed", 1.0, []).as_dict())
    assert keys <= named, sorted(keys - named)
    assert {"seed", "count", "jobs", "commit", "noticed", "ran", "seconds", "mutants"} <= named


def test_an_earlier_run_is_reported_again_with_todays_triage(tmp_path, monkeypatch, capsys):
    from scin.scripts.cli import main
    m = Mutant("hdl/isa/feeder.py", "invert", 3, 4, 3, 6, "~a", "(a)",
               key="hdl/isa/feeder.py::Feeder.elaborate::x = ~a::invert@4")
    saved = {"seed": 4, "count": 2, "jobs": 2, "commit": "abc1234", "noticed": 1, "ran": 2,
             "seconds": 12.0, "mutants": [Outcome(m, "survived", 1.0, []).as_dict(),
                                          Outcome(m, "killed", 1.0, ["t"], "", 2).as_dict()]}
    (tmp_path / "run.json").write_text(__import__("json").dumps(saved))
    monkeypatch.setitem(mutation.TRIAGE, m.key, "equivalent: because")
    monkeypatch.setattr(mutation, "resolve_triage", lambda *a, **k: {})
    doc = tmp_path / "V.md"
    status = main(["mutate", "--from-json", str(tmp_path / "run.json"), "--doc", str(doc)])
    assert status == 1                                  # 50% is under the default 0.9
    text = doc.read_text()
    assert "commit abc1234" in text and "--seed 4" in text and "1 of 2 mutants noticed" in text
    assert "equivalent: because" in text
    assert "(equivalent: because)" in capsys.readouterr().out


def test_scin_mutate_stops_on_a_stale_triage_entry(monkeypatch, capsys):
    """A TRIAGE entry that names no mutant stops `scin mutate` before it draws or runs anything,
    with exit status 2 and the entry's file, scope and text."""
    from scin.scripts.cli import main
    stale = "hdl/switch/arbiter.py::PacketArbiter.elaborate::with m.If(gone):::compare@10"
    monkeypatch.setitem(mutation.TRIAGE, stale, "equivalent: once")
    assert main(["mutate", "--list", "--count", "1"]) == 2
    err = capsys.readouterr().err
    assert "PacketArbiter.elaborate" in err and "'with m.If(gone):'" in err
