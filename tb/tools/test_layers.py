"""The layering of the code, checked on its syntax trees (docs/DEVELOPING.md, "Where things live").

* The packages import only downward: ``hdl`` <- ``sim`` <- ``tb`` and ``scripts``; ``boards`` <-
  ``hdl`` (:data:`ALLOWED`).
* No import cycle between modules, at module level (what runs when a module is imported).
* No private name (one leading underscore) taken from another module, sub-packages included:
  ``from x import _y``, or ``x._y`` where ``x`` is an imported scin module.
* ``hdl/`` holds the synthesizable design only: it imports no verification code (test and
  simulation frameworks, Amaranth's simulator and formal statements; the formal harnesses live in
  ``sim/formal/``, the simulation tops in ``sim/tops/``, and ``hdl`` -> ``sim`` is an upward
  import).
* No test file (``tb/test_*.py``) imports another: shared code is in helper modules of ``tb/``.

Every ``.py`` file of the five packages is parsed with :mod:`ast` (nothing is imported, so a
module that only imports upward inside a function is caught too) and each import, absolute
(``scin.tb.common``) or relative (``..tb.common``, resolved against the file's package), is
resolved to a dotted module name. A failure names the file, the line and what is wrong. Each
check is shown to fail on a synthetic tree in ``tmp_path``.
"""

import ast
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
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
    (tmp_path / "hdl" / "big.py").write_text(
        f"class Big:\n    def elaborate(self, platform):\n{body}")
    assert long_elaborates(tmp_path) == [
        f"hdl/big.py:2: Big.elaborate is {MAX_ELABORATE_LINES + 1} lines"]


# --- The module graph: cycles, private names, verification code in hdl/, test files ---------------

def module_of(path, root=ROOT):
    """``scin.sim.formal`` for ``<root>/sim/formal/__init__.py``, ``scin.sim.runner`` for
    ``<root>/sim/runner.py``: the dotted name a file is imported as."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["scin", *parts])


def modules(root=ROOT):
    """Every module of the five packages: ``{dotted name: path}``."""
    return {module_of(p, root): p for p in _files(root)}


def _resolve(node, path, root):
    """The dotted module an ``ImportFrom`` names, relative imports resolved (``None`` for an
    ``Import``)."""
    if not node.level:
        return node.module
    package = _package_of(path, root)
    if node.level > len(package) + 1:
        raise ValueError(f"{path}: line {node.lineno}: relative import beyond scin")
    base = ["scin", *package[:len(package) + 1 - node.level]]
    return ".".join(base + ([node.module] if node.module else []))


def _top_level(tree):
    """The statements that run when the module is imported: the module's own, and those inside
    its top-level ``if``/``try``/``with`` blocks and class bodies (not function bodies)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                todo += getattr(node, field, [])
            for handler in getattr(node, "handlers", []):
                todo += handler.body


def imports(path, known, root=ROOT, top_level=False):
    """``(line, module, name)`` of every import of a scin module in one file: ``name`` is what
    ``from module import name`` takes (``None`` for ``import module``). A name that is itself a
    module of ``known`` (``from scin.sim import formal``) is reported as that module, with
    ``name`` ``None``. With ``top_level``, only the imports that run when the file is imported."""
    tree = ast.parse(path.read_text())
    nodes = _top_level(tree) if top_level else ast.walk(tree)
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names if a.name.startswith("scin.")]
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node, path, root)
            if not (module or "").startswith("scin"):
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                out.append((node.lineno, sub, None) if sub in known
                           else (node.lineno, module, alias.name))
    return out


def import_cycles(root=ROOT):
    """Every cycle of module-level imports between the modules of the five packages, each as
    ``"a -> b -> a"`` (one report per cycle, starting at its smallest module)."""
    known = modules(root)
    graph = {name: sorted({m for _, m, _ in imports(path, known, root, top_level=True)
                           if m in known and m != name})
             for name, path in known.items()}
    cycles, done = set(), set()

    def walk(node, stack, on_stack):
        for nxt in graph[node]:
            if nxt in on_stack:
                cycle = stack[stack.index(nxt):]
                first = cycle.index(min(cycle))
                cycle = cycle[first:] + cycle[:first]
                cycles.add(" -> ".join(cycle + [cycle[0]]))
            elif nxt not in done:
                stack.append(nxt)
                on_stack.add(nxt)
                walk(nxt, stack, on_stack)
                on_stack.discard(stack.pop())
        done.add(node)

    for start in sorted(graph):
        if start not in done:
            walk(start, [start], {start})
    return sorted(cycles)


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(path, root=ROOT, known=None):
    """``"file:line: module._name"`` for every private name (one leading underscore) this file
    takes from another scin module: ``from module import _name``, or ``alias._name`` where
    ``alias`` is an imported scin module."""
    known = modules(root) if known is None else known
    own = module_of(path, root)
    rel = path.relative_to(root)
    found = [f"{rel}:{line}: {module}.{name}" for line, module, name in imports(path, known, root)
             if name and _private(name) and module != own]
    tree = ast.parse(path.read_text())
    bound = {}                          # local name -> the scin module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("scin."):
                    bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else "scin"
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node, path, root)
            for a in node.names:
                if f"{module}.{a.name}" in known:
                    bound[a.asname or a.name] = f"{module}.{a.name}"
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        chain, value = [], node.value
        while isinstance(value, ast.Attribute):
            chain.insert(0, value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            module = ".".join([bound[value.id], *chain])
            if module in known and module != own:
                found.append(f"{rel}:{node.lineno}: {module}.{node.attr}")
    return found


#: What ``hdl/`` must not import: test and simulation frameworks, and Amaranth's simulator and
#: formal statements (a block that needs them is verification code: sim/formal/, sim/tops/).
VERIFICATION_MODULES = ("cocotb", "cocotb_tools", "pytest", "hypothesis", "amaranth.sim")
VERIFICATION_NAMES = {"amaranth.hdl": {"Assert", "Assume", "Cover", "Initial"},
                      "amaranth.hdl._ast": {"Assert", "Assume", "Cover", "Initial", "Property"}}


def verification_imports(path, root=ROOT):
    """``"file:line: module[.name]"`` for every import of verification code in one ``hdl/`` file
    (the upward imports to ``sim``/``tb`` are :func:`violations`' to report)."""
    rel = path.relative_to(root)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [(node.module, a.name) for a in node.names]
        else:
            continue
        for module, name in names:
            if any(module == v or module.startswith(v + ".") for v in VERIFICATION_MODULES):
                found.append(f"{rel}:{node.lineno}: {module}")
            elif name in VERIFICATION_NAMES.get(module, ()):
                found.append(f"{rel}:{node.lineno}: {module}.{name}")
    return found


def imports_of_test_files(path, root=ROOT, known=None):
    """``"file:line: module"`` for every test file a ``tb/`` test file imports (shared code
    belongs in a helper module of ``tb/`` whose name does not start with ``test_``)."""
    known = modules(root) if known is None else known
    if not path.name.startswith("test_"):
        return []
    found = [f"{path.relative_to(root)}:{line}: {module}"
             for line, module, _ in imports(path, known, root)
             if module in known and known[module].name.startswith("test_")
             and known[module] != path]
    return list(dict.fromkeys(found))      # one report per line and module


def test_no_import_cycles():
    assert import_cycles() == []


#: Private names still taken across modules, each with the reason it cannot be renamed yet.
PRIVATE_PENDING = {}


def test_no_private_name_is_imported():
    known = modules()
    found = [v for f in _files() for v in private_imports(f, known=known)]
    bad = [v for v in found if v.split(": ")[1] not in PRIVATE_PENDING.get(v.split(":")[0], ())]
    pending = {(f, name) for f, names in PRIVATE_PENDING.items() for name in names}
    # A pending entry that no longer occurs is stale: the allowance must go with the name.
    assert pending <= {(v.split(":")[0], v.split(": ")[1]) for v in found}, "stale PRIVATE_PENDING"
    assert not bad, "private names used across modules:\n" + "\n".join(bad)


def test_hdl_imports_no_verification_code():
    bad = [v for f in sorted((ROOT / "hdl").rglob("*.py")) for v in verification_imports(f)]
    assert not bad, "verification code in hdl/:\n" + "\n".join(bad)


def test_no_test_file_imports_another():
    known = modules()
    bad = [v for f in sorted((ROOT / "tb").rglob("test_*.py"))
           for v in imports_of_test_files(f, known=known)]
    assert not bad, "test files importing test files:\n" + "\n".join(bad)


def _tree(tmp_path, files):
    """A synthetic tree under ``tmp_path``: ``{"sim/a.py": source}``, packages made on the way."""
    for rel, source in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir(exist_ok=True)
    return tmp_path


def test_an_import_cycle_is_caught(tmp_path):
    root = _tree(tmp_path, {
        "sim/a.py": "import json\nfrom . import b\n",
        "sim/b.py": "from .c import run\n",
        "sim/c.py": "from scin.sim.a import x\n",
        # Imports inside a function run later: no cycle.
        "sim/d.py": "def f():\n    from . import e\n",
        "sim/e.py": "from .d import f\n",
        "sim/pkg/__init__.py": "from .inner import y\n",
        "sim/pkg/inner.py": "from .. import pkg\n",
    })
    assert import_cycles(root) == ["scin.sim.a -> scin.sim.b -> scin.sim.c -> scin.sim.a",
                                   "scin.sim.pkg -> scin.sim.pkg.inner -> scin.sim.pkg"]


def test_a_private_import_is_caught(tmp_path):
    root = _tree(tmp_path, {
        "sim/a.py": "_x = 1\ny = _x\n",
        "sim/sub/__init__.py": "",
        "sim/sub/b.py": "from ..a import _x, y\nfrom scin.sim import a\n"
                        "import scin.sim.a as alias\nimport scin.sim.a\n"
                        "z = a._x + alias._x + scin.sim.a._x + a.y + alias.__name__\n",
        "tb/c.py": "from scin.sim.sub.b import z as _z\nfrom scin.sim.sub import b\nw = b._x\n",
    })
    known = modules(root)
    assert private_imports(root / "sim/a.py", root, known) == []
    assert private_imports(root / "sim/sub/b.py", root, known) == [
        "sim/sub/b.py:1: scin.sim.a._x", "sim/sub/b.py:5: scin.sim.a._x",
        "sim/sub/b.py:5: scin.sim.a._x", "sim/sub/b.py:5: scin.sim.a._x"]
    assert private_imports(root / "tb/c.py", root, known) == ["tb/c.py:3: scin.sim.sub.b._x"]


def test_verification_code_in_hdl_is_caught(tmp_path):
    root = _tree(tmp_path, {"hdl/x.py": "from amaranth.hdl import Module, Assert\nimport cocotb\n"
                                        "from amaranth.sim import Simulator\n"
                                        "from amaranth.lib import stream\n"
                                        "from scin.sim.formal import Properties\n"})
    assert verification_imports(root / "hdl/x.py", root) == [
        "hdl/x.py:1: amaranth.hdl.Assert", "hdl/x.py:2: cocotb", "hdl/x.py:3: amaranth.sim"]
    # The import of sim/ is an upward import, reported as such.
    assert violations(root / "hdl/x.py", root) == [
        "hdl/x.py:5: hdl -> sim (scin.sim.formal)"]


def test_a_test_file_importing_another_is_caught(tmp_path):
    root = _tree(tmp_path, {"tb/test_a.py": "X = 1\n",
                            "tb/helpers.py": "Y = 2\n",
                            "tb/test_b.py": "from .helpers import Y\nfrom .test_a import X\n"
                                            "def f():\n    import scin.tb.test_a\n",
                            "tb/helpers2.py": "from .test_a import X\n"})
    known = modules(root)
    assert imports_of_test_files(root / "tb/test_b.py", root, known) == [
        "tb/test_b.py:2: scin.tb.test_a", "tb/test_b.py:4: scin.tb.test_a"]
    assert imports_of_test_files(root / "tb/helpers2.py", root, known) == []
