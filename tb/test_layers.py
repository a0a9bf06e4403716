"""The packages import only downward: ``hdl`` <- ``sim`` <- ``tb`` and ``scripts``; ``boards`` <- ``hdl``.

Every ``.py`` file of the five packages is parsed with :mod:`ast` (nothing is imported, so a
module that only imports upward inside a function is caught too) and each import, absolute
(``scin.tb.common``) or relative (``..tb.common``, resolved against the file's package), is
checked against :data:`ALLOWED`. A failure names the file, the line and the edge.
"""

import ast
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hdl", "sim", "tb", "scripts", "boards")

#: What each package may import from the scin packages (besides itself). docs/DEVELOPING.md,
#: "Where things live", states the same map.
ALLOWED = {
    "hdl":     set(),
    "boards":  {"hdl"},
    "sim":     {"hdl"},
    "tb":      {"hdl", "sim", "boards", "scripts"},
    "scripts": {"hdl", "sim", "boards"},
}


def _package_of(path, root):
    """``("sim", "testbench")`` for ``<root>/sim/testbench/x.py``: the package the file is in."""
    return path.relative_to(root).parts[:-1]


def imported_packages(source, package):
    """``(line, dotted module)`` of every import in ``source``, a module of ``package`` (a tuple
    of folder names, e.g. ``("sim", "testbench")``), relative imports resolved to ``scin.``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # Level 1 is the file's own package, each further dot one package up.
                if node.level > len(package) + 1:
                    raise ValueError(f"line {node.lineno}: relative import beyond scin")
                base = ["scin", *package[:len(package) + 1 - node.level]]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            out.append((node.lineno, name))
    return out


def violations(path, root=ROOT):
    """The upward imports of one file, as ``"file:line: a -> b (name)"`` strings."""
    package = _package_of(path, root)
    own = package[0]
    found = []
    for line, name in imported_packages(path.read_text(), package):
        parts = name.split(".")
        if parts[0] != "scin" or len(parts) < 2:
            continue
        target = parts[1]
        if target != own and target not in ALLOWED[own]:
            found.append(f"{path.relative_to(root)}:{line}: {own} -> {target} ({name})")
    return found


def _files(root=ROOT):
    return sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))


def test_imports_go_only_downward():
    files = _files()
    assert len(files) > 50, f"found only {len(files)} files under {ROOT}: wrong root?"
    bad = [v for f in files for v in violations(f)]
    assert not bad, "imports that go upward:\n" + "\n".join(bad)


def test_every_package_imports_some_scin_module():
    """The walk sees real imports (a parser that found none would pass the test above)."""
    seen = {pkg: 0 for pkg in PACKAGES}
    for f in _files():
        package = _package_of(f, ROOT)
        seen[package[0]] += sum(name.startswith("scin.") for _, name in
                                imported_packages(f.read_text(), package))
    assert all(seen.values()), seen


@pytest.mark.parametrize("package, source, line, edge", [
    ("sim", "from scin.tb.common import start\n", 3, "sim -> tb (scin.tb.common)"),
    ("sim", "def f():\n    from ..tb import common\n", 4, "sim -> tb (scin.tb)"),
    ("sim/testbench", "from ...scripts.cli import main\n", 3, "sim -> scripts (scin.scripts.cli)"),
    ("hdl", "import scin.sim.numerics\n", 3, "hdl -> sim (scin.sim.numerics)"),
    ("hdl/isa", "from ...boards import logic\n", 3, "hdl -> boards (scin.boards)"),
    ("boards", "from ..sim import numerics\n", 3, "boards -> sim (scin.sim)"),
    ("sim", "from scin.boards.logic import SwitchIsa\n", 3, "sim -> boards (scin.boards.logic)"),
    ("scripts", "from scin.tb import conftest\n", 3, "scripts -> tb (scin.tb)"),
])
def test_a_bad_file_is_caught(tmp_path, package, source, line, edge):
    """The check can fail: a synthetic file with one upward import is reported, with its line."""
    path = tmp_path / package / "bad.py"
    path.parent.mkdir(parents=True)
    path.write_text("import json\n\n" + source)
    assert violations(path, root=tmp_path) == [f"{Path(package) / 'bad.py'}:{line}: {edge}"]


def test_downward_and_sibling_imports_pass(tmp_path):
    path = tmp_path / "sim" / "testbench" / "good.py"
    path.parent.mkdir(parents=True)
    path.write_text("from ...hdl.packet import Opcode\nfrom .. import numerics\nfrom . import env\n"
                    "import scin.hdl.codec\n")
    assert violations(path, root=tmp_path) == []


#: The longest an ``elaborate()`` may be (lines, decorators excluded); a longer one is split into
#: sub-components or named helpers (docs/DEVELOPING.md, "Where things live").
MAX_ELABORATE_LINES = 120


def long_elaborates(root=ROOT, limit=MAX_ELABORATE_LINES):
    """``"file:line: Class.elaborate is N lines"`` for every ``elaborate()`` in ``hdl/`` and
    ``boards/`` longer than ``limit``."""
    found = []
    for package in ("hdl", "boards"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ClassDef):
                    continue
                for f in node.body:
                    if isinstance(f, ast.FunctionDef) and f.name == "elaborate":
                        length = f.end_lineno - f.lineno + 1
                        if length > limit:
                            found.append(f"{path.relative_to(root)}:{f.lineno}: "
                                         f"{node.name}.elaborate is {length} lines")
    return found


def test_no_elaborate_is_long():
    assert long_elaborates() == []


def test_a_long_elaborate_is_found(tmp_path):
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_ELABORATE_LINES))
    (tmp_path / "hdl").mkdir()
    (tmp_path / "boards").mkdir()
    (tmp_path / "hdl" / "big.py").write_text(f"class Big:\n    def elaborate(self, platform):\n{body}")
    assert long_elaborates(tmp_path) == [f"hdl/big.py:2: Big.elaborate is {MAX_ELABORATE_LINES + 1} lines"]
