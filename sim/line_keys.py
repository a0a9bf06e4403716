"""Keys that name one source line of ``hdl/`` and survive edits elsewhere in its file.

The coverage waivers (``docs/coverage-waivers.toml``, :mod:`.hdl_coverage`) and the mutation
triage (``TRIAGE`` in ``scripts/mutation.py``) attach a reason to a line. A line number moves
whenever a line is added or removed above it; a :class:`LineKey` names the line instead by

* its file, relative to the repository root (``hdl/isa/writeback.py``);
* its *scope*: the qualified name of the innermost class or function around it in a Python file
  (``Writeback.elaborate``, ``Writeback.elaborate.helper`` for a nested function,
  ``<module>`` outside any), or the Verilog module around it in a ``.v`` file;
* its text, stripped of leading and trailing white space;
* when that text occurs on more than one line of the same scope, which of them (1-based, in
  file order).

Written out (:meth:`LineKey.__str__`, :func:`parse`) a key is ``FILE::SCOPE::TEXT``, or
``FILE::SCOPE[N]::TEXT`` for the N-th of several lines with the same text in the scope. Neither
a path nor a scope holds ``::``, so the text after the second ``::`` is the text, whatever it
holds.

A key *resolves* (:meth:`SourceIndex.resolve`) to the one line with its scope and text; it does
not when its file is gone, its scope is gone, its text no longer occurs there (the waived line
was edited: the reason may no longer hold), its text occurs more than once and the key names no
occurrence (a copy of the line appeared: which one is meant?), or the occurrence named is past
the last. Each is a :class:`StaleKey`, naming the file, scope and text, never a silent miss.
Editing a line's text, or moving it to another scope, makes its key stale on purpose: someone
must look again at whether the reason still holds.
"""

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from .toolchain import REPO_ROOT


__all__ = ["MODULE_SCOPE", "LineKey", "StaleKey", "parse", "SourceIndex", "key_of"]

#: The scope of a line of a Python file outside every class and function.
MODULE_SCOPE = "<module>"

_SCOPE = re.compile(r"^(?P<scope>[^\[\]:]+)(\[(?P<n>[1-9][0-9]*)\])?$")
_VERILOG_MODULE = re.compile(r"^\s*(?:macro)?module\s+(\w+)")


class StaleKey(ValueError):
    """A :class:`LineKey` that names no line of today's source (see the module docstring)."""


@dataclass(frozen=True)
class LineKey:
    """One line of a source file, by file, scope, stripped text and, among lines of the same
    scope and text, ``occurrence`` (1-based; ``None`` when the text occurs once)."""
    file: str
    scope: str
    text: str
    occurrence: int = None

    def __str__(self):
        n = f"[{self.occurrence}]" if self.occurrence is not None else ""
        return f"{self.file}::{self.scope}{n}::{self.text}"

    def describe(self):
        """The key for an error message: file, scope and text spelled out."""
        n = f" (occurrence {self.occurrence})" if self.occurrence is not None else ""
        return f"file {self.file}, scope {self.scope}, line text {self.text!r}{n}"


def parse(text):
    """The :class:`LineKey` written as ``text`` (``FILE::SCOPE::TEXT`` or
    ``FILE::SCOPE[N]::TEXT``). Raises ``ValueError`` naming ``text`` when it is not one."""
    file, sep1, rest = text.partition("::")
    scope, sep2, line = rest.partition("::")
    match = _SCOPE.match(scope.strip())
    if not (sep1 and sep2 and file.strip() and line.strip() and match):
        raise ValueError(f"{text!r} is not a line key 'FILE::SCOPE::TEXT' or "
                         f"'FILE::SCOPE[N]::TEXT'")
    n = match.group("n")
    return LineKey(file.strip(), match.group("scope"), line.strip(), int(n) if n else None)


def _python_scopes(source):
    """The innermost scope of each line of Python ``source`` (index 0: line 1). A decorator's
    lines belong to what it decorates."""
    lines = source.splitlines()
    scopes = [MODULE_SCOPE] * len(lines)

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}.{child.name}" if prefix else child.name
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                for i in range(first - 1, child.end_lineno):
                    scopes[i] = name
                visit(child, name)
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return scopes


def _verilog_scopes(source):
    """The Verilog module around each line of ``source`` (the file name's scope outside)."""
    scopes, current = [], MODULE_SCOPE
    for line in source.splitlines():
        match = _VERILOG_MODULE.match(line)
        if match:
            current = match.group(1)
        scopes.append(current)
        if line.strip().startswith("endmodule"):
            current = MODULE_SCOPE
    return scopes


class SourceIndex:
    """The lines of the source files under ``root`` by scope and text, each file read once."""

    def __init__(self, root=REPO_ROOT):
        self.root = Path(root)
        self._files = {}

    def _file(self, file):
        """``(texts, scopes, where)`` of ``file``: its stripped lines, their scopes, and
        ``(scope, text) -> [line numbers]``; ``None`` when there is no such file."""
        if file not in self._files:
            path = self.root / file
            if not path.is_file():
                self._files[file] = None
            else:
                source = path.read_text()
                texts = [line.strip() for line in source.splitlines()]
                scopes = (_verilog_scopes(source) if path.suffix in (".v", ".sv")
                          else _python_scopes(source))
                where = {}
                for number, (scope, text) in enumerate(zip(scopes, texts), 1):
                    if text:
                        where.setdefault((scope, text), []).append(number)
                self._files[file] = texts, scopes, where
        return self._files[file]

    def key_of(self, file, line):
        """The :class:`LineKey` of line ``line`` (1-based) of ``file``. Raises ``ValueError`` for
        a missing file, a line past its end or a blank line."""
        data = self._file(file)
        if data is None:
            raise ValueError(f"{file}: no such file under {self.root}")
        texts, scopes, where = data
        if not 1 <= line <= len(texts) or not texts[line - 1]:
            raise ValueError(f"{file}:{line}: blank or past the end of the file")
        scope, text = scopes[line - 1], texts[line - 1]
        same = where[(scope, text)]
        return LineKey(file, scope, text, same.index(line) + 1 if len(same) > 1 else None)

    def resolve(self, key):
        """The line number ``key`` (a :class:`LineKey` or its text) names today. Raises
        :class:`StaleKey` naming the file, scope and text when it names none or several."""
        key = parse(key) if isinstance(key, str) else key
        data = self._file(key.file)
        if data is None:
            raise StaleKey(f"stale key {str(key)!r}: no file {key.file} ({key.describe()})")
        _, scopes, where = data
        if key.scope not in scopes:
            raise StaleKey(f"stale key {str(key)!r}: no scope {key.scope} in {key.file} "
                           f"({key.describe()})")
        lines = where.get((key.scope, key.text), [])
        if not lines:
            raise StaleKey(f"stale key {str(key)!r}: no line of {key.scope} in {key.file} reads "
                           f"{key.text!r} (edited or moved?) ({key.describe()})")
        if key.occurrence is None and len(lines) > 1:
            raise StaleKey(f"ambiguous key {str(key)!r}: {len(lines)} lines of {key.scope} in "
                           f"{key.file} read {key.text!r} (lines {', '.join(map(str, lines))}); "
                           f"name one as {key.file}::{key.scope}[N]::{key.text}")
        n = key.occurrence or 1
        if n > len(lines):
            raise StaleKey(f"stale key {str(key)!r}: only {len(lines)} line(s) of {key.scope} "
                           f"in {key.file} read {key.text!r} ({key.describe()})")
        return lines[n - 1]


def key_of(file, line, root=REPO_ROOT):
    """The :class:`LineKey` of line ``line`` of ``file`` under ``root``
    (:meth:`SourceIndex.key_of`)."""
    return SourceIndex(root).key_of(file, line)
