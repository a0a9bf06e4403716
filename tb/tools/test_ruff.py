"""The Python tree is clean under ruff, run as a developer runs it (`ruff check .` at the repository
root, configured by pyproject.toml's [tool.ruff]), with the ruff version pyproject.toml pins."""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from scin.sim.toolchain import REPO_ROOT

# The ruff of this environment: the one installed next to the running Python.
RUFF = Path(sys.executable).with_name("ruff")

# Files not cleaned yet, whose problems are allowed for now. The set only shrinks: a listed file
# that is clean (or gone) fails the test, so it must leave the list when it is fixed.
TODO = frozenset()


def ruff_problems(*args, cwd=REPO_ROOT):
    """Run `ruff check ARGS` in `cwd`; return its problems as `(path, "path:row:col: CODE text")`
    pairs, path relative to `cwd`."""
    if not RUFF.exists():
        pytest.fail(f"{RUFF} is missing: install the test extra (pip install -e '.[test]')")
    run = subprocess.run([RUFF, "check", "--output-format", "json", *args], cwd=cwd,
                         capture_output=True, text=True)
    if run.returncode not in (0, 1):                    # 2: ruff itself failed (bad config, ...)
        pytest.fail(f"ruff failed ({run.returncode}):\n{run.stderr}")
    problems = []
    for p in json.loads(run.stdout):
        path = Path(p["filename"]).resolve().relative_to(Path(cwd).resolve()).as_posix()
        row, col = p["location"]["row"], p["location"]["column"]
        problems.append((path, f"{path}:{row}:{col}: {p['code']} {p['message']}"))
    return sorted(problems)


def complaints(problems, todo):
    """What is wrong with `problems` given the allowed `todo` files: problems in other files, and
    listed files that have none left."""
    dirty = {path for path, _ in problems}
    wrong = [line for path, line in problems if path not in todo]
    wrong += [f"{path}: no ruff problem left (or gone); remove it from TODO in "
              f"tb/tools/test_ruff.py"
              for path in sorted(todo - dirty)]
    return wrong


def test_ruff_is_the_pinned_version():
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    pins = [d for d in extras["optional-dependencies"]["test"] if d.startswith("ruff==")]
    assert len(pins) == 1, "pyproject.toml's test extra pins ruff once"
    version = subprocess.run([RUFF, "--version"], capture_output=True, text=True).stdout.split()
    assert version == ["ruff", pins[0].removeprefix("ruff==")]


def test_tree_is_clean():
    wrong = complaints(ruff_problems("."), TODO)
    assert not wrong, "ruff check . (configured in pyproject.toml):\n" + "\n".join(wrong)


def test_a_bad_file_is_caught(tmp_path):
    """The project's configuration flags a line of 101 columns (not one of 100), an unused import,
    trailing whitespace and a pre-3.11 spelling; and the TODO rules catch each kind of slip."""
    bad = tmp_path / "bad.py"
    bad.write_text("\n".join([
        "import os",
        "from typing import Optional",
        "",
        "",
        "def f(x: Optional[int]) -> int:",
        "    return 1 ",
        "",
        "",
        "A = " + "1" * 96,                        # 100 columns: allowed
        "B = " + "1" * 97,                        # 101 columns: too long
        "",
    ]))
    problems = ruff_problems("--config", REPO_ROOT / "pyproject.toml", bad.name, cwd=tmp_path)
    codes = sorted((int(line.split(":")[1]), line.split()[1]) for _, line in problems)
    assert codes == [(1, "F401"), (5, "UP045"), (6, "W291"), (10, "E501")], problems
    assert len(complaints(problems, frozenset())) == len(problems)
    assert complaints(problems, frozenset({"bad.py"})) == []
    assert complaints(problems, frozenset({"bad.py", "fixed.py"})) == [
        "fixed.py: no ruff problem left (or gone); remove it from TODO in tb/tools/test_ruff.py"]
