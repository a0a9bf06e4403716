"""docs/CLI.md against the argparse definitions of every ``scin`` command: each command's table in
"Options of every command" lists exactly its options (every one documented, none stale), and no
option named anywhere on the page is one that no command has."""

import argparse
import re
from pathlib import Path

import pytest

from scin.scripts.cli import COMMANDS, build_parser


CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "CLI.md"

#: Options the page names that belong to other tools (Verilator, pytest) or show a refusal.
FOREIGN = {"--lint-only", "--maxschedchunk", "--siz"}


def _command_parsers():
    parser = build_parser(load=tuple(COMMANDS))
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices


def _options(parser):
    """The option strings and positional names of ``parser`` (help left out)."""
    names = set()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names.update(action.option_strings or [action.dest])
    return names


def _documented():
    """``{command: set of options}`` from the tables of "Options of every command"."""
    text = CLI_DOC.read_text()
    start = text.index("\n## Options of every command")
    section = text[start:text.index("\n## ", start + 1)]
    tables = {}
    for block in re.split(r"^### ", section, flags=re.M)[1:]:
        name = re.match(r"`scin ([a-z-]+)`", block).group(1)
        cells = re.findall(r"^\| (.+?) \| ", block, re.M)[2:]       # after the header row
        found = set()
        for cell in cells:
            if cell == "every option of `scin allreduce`":
                found |= {"*allreduce"}
            found.update(re.findall(r"`(--[a-z0-9-]+)`", cell))
            found.update(re.findall(r"`([a-z_]+)` \(positional\)", cell))
        assert name not in tables, f"two tables for scin {name}"
        tables[name] = found
    return tables


def test_every_command_has_an_options_table():
    assert list(_documented()) == list(COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_option_is_documented_and_none_is_stale(name):
    _, parsers = _command_parsers()
    documented = _documented()[name]
    if "*allreduce" in documented:
        documented = (documented - {"*allreduce"}) | _options(parsers["allreduce"])
    actual = _options(parsers[name])
    assert not actual - documented, f"scin {name}: undocumented {sorted(actual - documented)}"
    assert not documented - actual, f"scin {name}: stale {sorted(documented - actual)}"


def test_no_option_on_the_page_is_unknown():
    """An option named anywhere on the page belongs to some command (or to ``scin`` itself)."""
    top, parsers = _command_parsers()
    known = (set().union(*(_options(p) for p in parsers.values())) | _options(top) | {"--help"}
             | FOREIGN)
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", CLI_DOC.read_text()))
    assert not named - known, f"options no command has: {sorted(named - known)}"
