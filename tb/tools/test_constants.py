"""The paper's clock, flit and latency model are written once, in ``hdl/paper.py``.

Every ``.py`` file of ``hdl``, ``sim``, ``scripts`` and ``boards`` (but ``hdl/paper.py``) is parsed
with :mod:`ast` and three kinds of literal are refused in code (comments and docstrings may state
the numbers as prose):

* a paper value bound to a name that says what it is: a parameter default, a keyword argument,
  an assignment or dataclass field, a dict entry, or an ``add_argument`` option's ``default``
  whose name matches a latency (``= 90``, ``= 40``, ``= 70``), a clock (``= 250``, ``= 250e6``),
  a clock period (``= 4``) or a flit (``= 32``, ``= 256``);
* the clock or its period as a float anywhere (``250e6``, ``4e-9``, ``90 / 250e6`` written out);
* a string (f-string parts included) saying ``250 MHz``, ``90-cycle``, ``40-cycle``,
  ``70-cycle``, ``360 ns`` or ``160 ns``: a help text or report must format the constant.

A finding names the file, the line and what to use instead.
"""

import ast
import re
from pathlib import Path

import pytest

from scin.hdl import paper


ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("hdl", "sim", "scripts", "boards")
CONSTANTS_MODULE = Path("hdl/paper.py")

#: Files allowed to keep a literal, with the reason; an entry that no longer matches anything is
#: an error, so the list only shrinks.
ALLOWED = {}

#: ``(name pattern, paper values, constant to use)``: a value bound to a matching name.
NAMED = [
    (re.compile(r"latency|link_delay", re.I),
     {paper.ONE_WAY_LATENCY, paper.MEM_LATENCY, paper.AURORA_CYCLES},
     "ONE_WAY_LATENCY, MEM_LATENCY or AURORA_CYCLES"),
    (re.compile(r"clock|freq|mhz|(^|_)hz$", re.I), {paper.CLOCK_MHZ, paper.CLOCK_HZ},
     "CLOCK_MHZ or CLOCK_HZ"),
    (re.compile(r"period_ns", re.I), {paper.CLOCK_PERIOD_NS}, "CLOCK_PERIOD_NS"),
    (re.compile(r"flit_bytes|flit_width", re.I), {paper.FLIT_BYTES, paper.FLIT_WIDTH},
     "FLIT_BYTES or FLIT_WIDTH"),
]
#: Floats that are the clock or a latency at the clock, whatever they are bound to.
CLOCK_FLOATS = {paper.CLOCK_HZ, 1 / paper.CLOCK_HZ, paper.ONE_WAY_LATENCY / paper.CLOCK_HZ,
                paper.MEM_LATENCY / paper.CLOCK_HZ}
#: Prose of the constants in a string that code builds (help texts, reports, descriptions).
_HOP_NS, _MEM_NS = (c * paper.CLOCK_PERIOD_NS for c in (paper.ONE_WAY_LATENCY, paper.MEM_LATENCY))
PROSE = re.compile(rf"\b{paper.CLOCK_MHZ} ?MHz|\b({paper.ONE_WAY_LATENCY}|{paper.MEM_LATENCY}|"
                   rf"{paper.AURORA_CYCLES})-cycle\b|\b({_HOP_NS}|{_MEM_NS}) ns\b")


def _number(node):
    """The value of a numeric literal node (``-x`` included), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _number(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def _named(name, node):
    """What to use instead, if ``node`` is a paper value and ``name`` says which one."""
    value = _number(node)
    if value is None or not name:
        return None
    for pattern, values, use in NAMED:
        if pattern.search(name) and value in values:
            return f"{name} = {value!r}: use hdl.paper's {use}"
    return None


def _bindings(tree):
    """``(name, value node)`` of every default, keyword, assignment, dict entry and argparse
    option default in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            positional = a.posonlyargs + a.args
            yield from zip((p.arg for p in positional[len(positional) - len(a.defaults):]),
                           a.defaults)
            yield from ((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
        elif isinstance(node, ast.Call):
            yield from ((k.arg, k.value) for k in node.keywords if k.arg)
            option = next((a.value for a in node.args if isinstance(a, ast.Constant)
                           and isinstance(a.value, str) and a.value.startswith("--")), None)
            if option:
                yield from ((option.lstrip("-").replace("-", "_"), k.value)
                            for k in node.keywords if k.arg == "default")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                name = t.id if isinstance(t, ast.Name) else getattr(t, "attr", None)
                yield name, node.value
        elif isinstance(node, ast.Dict):
            yield from ((k.value, v) for k, v in zip(node.keys, node.values)
                        if isinstance(k, ast.Constant) and isinstance(k.value, str))


def _docstrings(tree):
    """The ids of the docstring nodes of ``tree`` (prose, not code)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def findings(source, name="<source>"):
    """``"name:line: what"`` for every paper literal in the Python ``source``."""
    tree = ast.parse(source)
    found, named = [], set()
    for key, value in _bindings(tree):
        what = _named(key, value)
        if what:
            found.append((value.lineno, what))
            named.add(id(value))
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if id(node) in named:
            continue
        if isinstance(node, ast.Constant) and type(node.value) is float \
                and any(abs(node.value - c) <= 1e-9 * abs(c) for c in CLOCK_FLOATS):
            found.append((node.lineno, f"{node.value!r}: use hdl.paper's CLOCK_HZ (and the "
                                       f"latencies in cycles)"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings and PROSE.search(node.value):
            found.append((node.lineno, f"{PROSE.search(node.value).group(0)!r} in a string: "
                                       f"format hdl.paper's constant"))
    return sorted({f"{name}:{line}: {what}" for line, what in found})


def tree_findings(root=ROOT, allowed=ALLOWED):
    """The findings of every source file under ``root`` but the constants module and the
    ``allowed`` files (paths relative to ``root``)."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if rel != CONSTANTS_MODULE and str(rel) not in allowed:
                found += findings(path.read_text(), str(rel))
    return found


def test_the_tree_writes_the_paper_constants_once():
    found = tree_findings()
    assert not found, "paper constants written as literals:\n" + "\n".join(found)


def test_allowed_files_still_need_it():
    stale = [rel for rel in ALLOWED if not findings((ROOT / rel).read_text(), rel)]
    assert not stale, f"no longer need an exception, remove from ALLOWED: {stale}"


@pytest.mark.parametrize("source, expected", [
    ("def f(x, one_way_latency=90):\n    pass\n", "one_way_latency = 90"),
    ("def f(*, mem_latency=40):\n    pass\n", "mem_latency = 40"),
    ("class C:\n    mem_latency: int = 40\n", "mem_latency = 40"),
    ("run(cfg, latency=90)\n", "latency = 90"),
    ("DEFAULT_LINK_LATENCY = 70\n", "DEFAULT_LINK_LATENCY = 70"),
    ("plan = {'one_way_latency': 90}\n", "one_way_latency = 90"),
    ("p.add_argument('--latency', type=int, default=90)\n", "latency = 90"),
    ("p.add_argument('--freq-mhz', type=float, default=250)\n", "freq_mhz = 250"),
    ("FABRIC_CLOCK_HZ = 250e6\n", "FABRIC_CLOCK_HZ = 250000000.0"),
    ("CLOCK_PERIOD_NS = 4\n", "CLOCK_PERIOD_NS = 4"),
    ("def g(flit_width=256):\n    pass\n", "flit_width = 256"),
    ("hop_s = 90 / 250e6\n", "250000000.0: use hdl.paper's CLOCK_HZ"),
    ("t = cycles * 4e-9\n", "4e-09: use hdl.paper's CLOCK_HZ"),
    ("help_text = 'latency (us at 250 MHz)'\n", "'250 MHz' in a string"),
    ("x = f'{n} cycles at 250 MHz'\n", "'250 MHz' in a string"),
    ("h = 'one-way latency (default: 90 = 360 ns)'\n", "'360 ns' in a string"),
    ("s = 'the 90-cycle hops'\n", "'90-cycle' in a string"),
])
def test_a_literal_is_caught(source, expected):
    found = findings(source, "bad.py")
    assert len(found) == 1 and expected in found[0], found
    assert found[0].startswith("bad.py:")


@pytest.mark.parametrize("source", [
    '"""Docstrings may say 250 MHz and 90-cycle hops."""\n',
    "def f():\n    '''At 250 MHz, a 40-cycle read.'''\n",
    "# a comment: 250 MHz, latency = 90\n",
    "from scin.hdl.paper import ONE_WAY_LATENCY\n"
    "def f(one_way_latency=ONE_WAY_LATENCY):\n    pass\n",
    "reset_cycles = 4\nx = 40.0 * y\nlatency = (5, 40)\nports = 4\n",
    "t = seconds * 1e9\nscale = 32\nwords = 256\n",
])
def test_prose_and_unrelated_numbers_pass(source):
    assert findings(source) == []


def test_a_file_in_the_tree_is_caught(tmp_path):
    """The tree scan reads every package and exempts only the constants module and ALLOWED."""
    for package in PACKAGES:
        (tmp_path / package / "sub").mkdir(parents=True)
    (tmp_path / "hdl" / "paper.py").write_text("CLOCK_HZ = 250e6\n")
    (tmp_path / "boards" / "sub" / "ok.py").write_text("from ..hdl.paper import CLOCK_HZ\n")
    (tmp_path / "scripts" / "bad.py").write_text(
        "def add(p):\n    p.add_argument('--mem-latency', type=int, default=40)\n")
    (tmp_path / "sim" / "sub" / "bad.py").write_text("PERIOD_S = 4e-9\n")
    assert tree_findings(tmp_path, allowed={}) == [
        "sim/sub/bad.py:1: 4e-09: use hdl.paper's CLOCK_HZ (and the latencies in cycles)",
        "scripts/bad.py:2: mem_latency = 40: use hdl.paper's ONE_WAY_LATENCY, MEM_LATENCY or "
        "AURORA_CYCLES"]
    assert tree_findings(tmp_path, allowed={"scripts/bad.py", "sim/sub/bad.py"}) == []
