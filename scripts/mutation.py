"""Mutation testing of the HDL: the mutants, and how each one is run against the tests.

A *mutant* is one small change to one line of ``hdl/`` (:class:`Mutant`), of one of the kinds in
:data:`OPERATORS`. :func:`sites` finds every place a file can be mutated, inside the code that
builds hardware only (``elaborate`` and the helpers that take the module ``m``, and the enumerations
that encode headers and opcodes), never in parameter checks or docstrings. :func:`choose` draws a
seeded sample spread over the files. :func:`run_mutant` copies the source tree into a scratch
directory, applies the mutant there and runs the file's tests (:data:`TARGETS`) against the copy,
then, if the mutant survived them, the slower simulations of the block in its system
(:data:`SECOND_TIER`), so the work tree is never touched and several mutants can run at once.

A mutant is **killed** when its tests fail (an elaboration error counts: the tests ran the mutated
code and noticed), **survives** when they pass, and **times out** when they run past the limit
(counted as killed: a hang is noticed, but listed apart).

A surviving mutant that was looked at has its reason in :data:`TRIAGE`, keyed by
:attr:`Mutant.key`: the line's key of :mod:`scin.sim.line_keys` (file, scope and text, so that
edits elsewhere in the file leave it valid) and which change on that line.
:func:`resolve_triage` finds each entry's mutant in today's source and fails, naming the file,
scope and text, on an entry that names none.
"""

import ast
import dataclasses
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, asdict
from pathlib import Path

from ..sim.line_keys import SourceIndex, StaleKey, parse
from ..sim.toolchain import BUILD_ROOT, REPO_ROOT


__all__ = ["Mutant", "Outcome", "OPERATORS", "TARGETS", "SECOND_TIER", "TRIAGE", "sites",
           "resolve_triage", "choose", "overlay", "run_tests", "run_mutant"]

#: The kinds of mutation, with what each does.
OPERATORS = {
    "compare": "a comparison inverted (== and !=, < and >=, <= and >)",
    "off_by_one": "an integer constant in an arithmetic or comparison operand moved by one (not "
                  "in a signal's shape, Signal(range(...)))",
    "drop_condition": "one operand of a & or | dropped, or an If/Elif condition made always true",
    "invert": "a ~ removed",
    "swap_enum": "two neighbouring values of an enumeration swapped",
}

#: The HDL files mutated, each with the tests that exercise it (pytest arguments, run from the
#: copy's root). Only tests that need no Verilator build: Amaranth's simulator, Icarus and the
#: formal checks, so that a mutant takes seconds, not a build.
TARGETS = {
    "hdl/isa/feeder.py": ["tb/unit/test_isa_blocks.py", "-k", "feeder"],
    "hdl/isa/copy_path.py": ["tb/unit/test_isa_blocks.py", "-k", "feeder"],
    "hdl/isa/writeback.py": ["tb/unit/test_isa_blocks.py", "-k", "write"],
    "hdl/isa/read_issuer.py": ["tb/unit/test_isa_blocks.py", "-k", "read_issuer or segments"],
    "hdl/isa/wave_table.py": ["tb/unit/test_isa_blocks.py", "-k", "wave_table"],
    "hdl/isa/table_manager.py": ["tb/unit/test_isa_blocks.py", "-k", "table_manager"],
    "hdl/isa/barrier.py": ["tb/unit/test_isa_blocks.py", "tb/block/test_formal.py", "-k",
                           "barrier and not cover"],
    "hdl/isa/instruction_buffer.py": ["tb/unit/test_isa_blocks.py", "-k", "instruction_buffer"],
    "hdl/isa/descriptor.py": ["tb/unit/test_isa_blocks.py", "tb/unit/test_isa_descriptor.py", "-k",
                              "descriptor or watchdog"],
    "hdl/transport/credit_tx.py": ["tb/block/test_formal.py", "tb/block/test_transport.py", "-k",
                                   "credit_link and not cover or icarus and credits4"],
    "hdl/transport/credit_rx.py": ["tb/block/test_formal.py", "tb/block/test_transport.py", "-k",
                                   "credit_link and not cover or icarus and credits4"],
    "hdl/transport/round_robin.py": ["tb/block/test_formal.py", "-k",
                                     "packet_arbiter and not cover"],
    "hdl/switch/arbiter.py": ["tb/block/test_formal.py", "-k", "packet_arbiter and not cover"],
    "hdl/switch/filter.py": ["tb/block/test_switch_port.py", "-k", "icarus and not round_robin"],
}

#: What a mutant that survives its file's tests runs next: the ISA's and the transport's own
#: simulations on Icarus (a build per mutant, so slower), the tests that notice what a block's
#: unit tests cannot, e.g. a flush that no unit test raises. A mutant survives only if it
#: survives both.
_ISA_SYSTEM = ["tb/block/test_isa.py", "tb/block/test_faults.py", "-k",
               "icarus and (fp16_64B or fp16_subset or bad_input or bad_arrivals or isa_faults)"]
SECOND_TIER = {
    **{f: _ISA_SYSTEM for f in TARGETS if f.startswith("hdl/isa/")},
    "hdl/transport/credit_tx.py": ["tb/block/test_transport.py", "-k", "icarus"],
    "hdl/transport/credit_rx.py": ["tb/block/test_transport.py", "-k", "icarus"],
    "hdl/transport/round_robin.py": ["tb/block/test_switch_port.py", "-k", "icarus"],
    "hdl/switch/arbiter.py": ["tb/block/test_switch_port.py", "-k", "icarus"],
}

#: Surviving mutants that were looked at, by :attr:`Mutant.key` (``FILE::SCOPE::TEXT`` of the
#: line, then ``::OPERATOR@COLUMN``, the column counted from the line's first non-blank
#: character, and ``/variant``), each with why it survives: an equivalent mutant (no behaviour
#: changes) says why; a real gap names the test that now covers it (then the mutant no longer
#: survives and its entry can go). `scin mutate --list` prints every drawn mutant's key.
TRIAGE = {
    "hdl/isa/writeback.py::WriteBack._header_state::"
    "out.push.eq(can & ~flush), tags.start.eq(out.can_start & ~flush & ~posted),"
    "::drop_condition@41/1":
        "equivalent: a header state under flush then pulses the write tags' `start`, which only "
        "advances the tag sequence by one, since `flush` frees every entry after `start` marks "
        "one (WriteTags gives the flush the last word); tags must only be unique in their window, "
        "so a skipped number changes nothing a port or a test can see",
    "hdl/switch/arbiter.py::PacketArbiter.elaborate::"
    "with m.If(~locked):"
    "::drop_condition@10":
        "equivalent: the round-robin pointer `last` is then also written on a packet's later "
        "flits, but while a packet is in progress the granted input is its owner, which `last` "
        "already holds from the packet's first flit (the formal invariant `pointer_is_owner` "
        "proves it), so the write changes nothing",
    "hdl/isa/wave_table.py::WaveTable._port::"
    "slot_ok = (tag.slot < slots) if slots < (1 << p.slot_bits) else Const(1)"
    "::compare@11":
        "equivalent: dead code for every legal configuration; `tag.slot < slots` is built only "
        "when `slots` does not fill `slot_bits`, but `capacity` and `max_payload` are both powers "
        "of two (IsaParams checks it), so `slots` always does and the check is the constant 1",
    "hdl/isa/wave_table.py::WaveTable._port::"
    "slot_ok = (tag.slot < slots) if slots < (1 << p.slot_bits) else Const(1)"
    "::compare@32":
        "equivalent: the inverted choice builds `tag.slot < slots` where the constant 1 was, and "
        "since `slots` always fills `slot_bits` (see the entry above) every `tag.slot` is below it",
    "hdl/isa/instruction_buffer.py::InstructionBuffer.elaborate::"
    "with m.Elif(prog.advance & (here < r)):"
    "::drop_condition@12/1":
        "equivalent: without the guard, an advance at a slot with no sync resource writes "
        "`cur[here]` with `here` one past the array, and Amaranth drops an assignment through an "
        "out-of-range Array index (no case of its switch matches); "
        "`test_instruction_buffer_advance_without_a_resource_moves_no_turn` now states the "
        "contract and passes with and without the guard",
    "hdl/transport/round_robin.py::round_robin::"
    "for off in reversed(range(1, n + 1)):"
    "::off_by_one@33":
        "equivalent: the search loop gains an offset n + 1, which names the same input as offset "
        "1 and is assigned before it, so offset 1's assignment still wins",
    "hdl/isa/writeback.py::WriteBack._data_state::"
    "with m.If(dp.valid & ~out.room):"
    "::drop_condition@10/1":
        "a gap (`stall_tx` also counted cycles with no data waiting), now killed by "
        "`test_write_back_counts_stall_tx_only_while_data_waits`",
    "hdl/isa/barrier.py::BarrierManager.elaborate::"
    "requests = [self.req[i].valid & ~in_body[i] & (~ack_full[i] | self.ack[i].ready)"
    "::drop_condition@47/1":
        "a gap (a header taken only every other cycle when acks drain), now killed by "
        "`test_barrier_takes_a_header_every_cycle_while_acks_are_taken`",
    "hdl/isa/writeback.py::WriteBack.elaborate::"
    "go = Mux(flush, out.room, squeue.r_rdy & out.room)"
    "::drop_condition@26/1":
        "a gap (INT8 scale flits pushed into a full output and lost), now killed by "
        "`test_write_back_holds_int8_scales_until_the_output_has_room`",
    "hdl/isa/read_issuer.py::ReadIssuer.elaborate::"
    "m.d.sync += c.stall_slot.eq(c.stall_slot + 1)"
    "::off_by_one@43":
        "a gap (`stall_slot` counted by two), now killed by "
        "`test_read_issuer_counts_each_cycle_without_a_free_slot_once`",
}

_SWAPPED_COMPARE = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt,
                    ast.LtE: ast.Gt, ast.Gt: ast.LtE}


@dataclass(frozen=True)
class Mutant:
    """One change to one file: the source text from ``(line, col)`` to ``(end_line, end_col)``
    (1-based lines, 0-based columns, as :mod:`ast` gives them) becomes ``after``.

    ``before`` is the text replaced, kept to check the mutant still applies and for the report.
    ``key`` names the mutant in a way that edits elsewhere in its file leave valid (:func:`sites`
    sets it; :data:`TRIAGE` is keyed by it): ``FILE::SCOPE::TEXT`` of its first line
    (:mod:`scin.sim.line_keys`), then ``::OPERATOR@COLUMN`` with the column counted from the
    line's first non-blank character, and ``/variant`` as in :attr:`name`."""
    file: str
    operator: str
    line: int
    col: int
    end_line: int
    end_col: int
    before: str
    after: str
    variant: int = 0
    key: str = ""

    @property
    def name(self):
        """``file:line:col:operator``, and ``/variant`` for the second and later mutants of one
        kind at one place (``a & b`` gives ``(a)``, ``(b)``, and in an ``m.If`` also ``1``):
        unique within a file."""
        return (f"{self.file}:{self.line}:{self.col}:{self.operator}"
                + (f"/{self.variant}" if self.variant else ""))

    def apply(self, source):
        """``source`` with the change made. Raises :class:`ValueError` if the text at the
        mutant's place is not ``before`` (the file changed since the sites were found)."""
        begin = _offset(source, self.line, self.col)
        end = _offset(source, self.end_line, self.end_col)
        if source[begin:end] != self.before:
            raise ValueError(f"{self.name}: expected {self.before!r} there, found "
                             f"{source[begin:end]!r}")
        return source[:begin] + self.after + source[end:]


def _offset(source, line, col):
    """The index into ``source`` of ``(line, col)``: a 1-based line and, as :mod:`ast` counts
    them, a column in UTF-8 bytes."""
    lines = source.splitlines(keepends=True)
    before = sum(len(text) for text in lines[:line - 1])
    return before + len(lines[line - 1].encode()[:col].decode(errors="ignore"))


@dataclass
class Outcome:
    """What the tests made of one mutant: ``status`` is ``killed``, ``survived``, ``timeout`` or
    ``error`` (the mutant could not be applied or the tests could not start); ``failed`` names
    the first failing tests, ``seconds`` the run's wall time, ``tier`` the tests that decided
    it (1: the file's :data:`TARGETS`, 2: its :data:`SECOND_TIER` as well)."""
    mutant: Mutant
    status: str
    seconds: float
    failed: list
    detail: str = ""
    tier: int = 1

    def as_dict(self):
        return {**asdict(self.mutant), "name": self.mutant.name, "status": self.status,
                "seconds": round(self.seconds, 1), "failed": self.failed, "detail": self.detail,
                "tier": self.tier}


def _segment(source, node):
    return ast.get_source_segment(source, node)


def _mutant(path, source, node, operator, after):
    before = _segment(source, node)
    if before is None or before == after:
        return None
    return Mutant(path, operator, node.lineno, node.col_offset, node.end_lineno,
                  node.end_col_offset, before, after)


def _shape_nodes(tree):
    """The nodes inside a ``Signal(range(...))``: a signal's shape, not its behaviour. Moving
    such a bound by one almost never changes the width (``range(4097)`` and ``range(4098)`` are
    both 13 bits), so its mutants would be equivalent ones, not tests of the tests."""
    inside = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "Signal" and node.args
                and isinstance(node.args[0], ast.Call)
                and isinstance(node.args[0].func, ast.Name) and node.args[0].func.id == "range"):
            inside |= {id(n) for n in ast.walk(node.args[0])}
    return inside


def _node_mutants(path, source, node, shapes=frozenset()):
    """Every mutant of one expression node (not of its children); none of a constant in
    ``shapes`` (ids of the nodes that declare signal shapes)."""
    out = []
    if (isinstance(node, ast.Compare) and len(node.ops) == 1
            and type(node.ops[0]) in _SWAPPED_COMPARE):
        swapped = ast.Compare(node.left, [_SWAPPED_COMPARE[type(node.ops[0])]()], node.comparators)
        out.append(_mutant(path, source, node, "compare", ast.unparse(swapped)))
    operands = []
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        operands = [node.right]
    elif isinstance(node, ast.Compare) and len(node.comparators) == 1:
        operands = [node.comparators[0]]
    for operand in operands:
        if (isinstance(operand, ast.Constant) and type(operand.value) is int
                and id(operand) not in shapes):
            out.append(_mutant(path, source, operand, "off_by_one", str(operand.value + 1)))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        for kept in (node.left, node.right):
            out.append(_mutant(path, source, node, "drop_condition",
                               f"({_segment(source, kept)})"))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("If", "Elif") and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "m" and len(node.args) == 1):
        out.append(_mutant(path, source, node.args[0], "drop_condition", "1"))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        out.append(_mutant(path, source, node, "invert", f"({_segment(source, node.operand)})"))
    return [m for m in out if m is not None]


def _enum_mutants(path, source, cls):
    """Swaps of neighbouring integer values in an ``Enum`` class body."""
    members = [stmt for stmt in cls.body if isinstance(stmt, ast.Assign)
               and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int]
    out = []
    for a, b in zip(members, members[1:]):
        # One mutant spanning both values, so that it swaps them in one edit.
        begin = _offset(source, a.value.lineno, a.value.col_offset)
        end = _offset(source, b.value.end_lineno, b.value.end_col_offset)
        first, second = _segment(source, a.value), _segment(source, b.value)
        before = source[begin:end]
        middle = before[len(first):len(before) - len(second)]
        out.append(Mutant(path, "swap_enum", a.value.lineno, a.value.col_offset,
                          b.value.end_lineno, b.value.end_col_offset, before,
                          second + middle + first))
    return out


def _is_hardware_function(fn):
    names = [a.arg for a in fn.args.args + fn.args.kwonlyargs]
    return fn.name == "elaborate" or "m" in names


def sites(path, root=REPO_ROOT):
    """Every :class:`Mutant` of the file ``path`` (relative to ``root``), in source order."""
    source = (Path(root) / path).read_text()
    tree = ast.parse(source)
    shapes = _shape_nodes(tree)
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and _is_hardware_function(node)):
            for stmt in node.body:
                for child in ast.walk(stmt):
                    out += _node_mutants(path, source, child, shapes)
        elif isinstance(node, ast.ClassDef) and any("Enum" in ast.unparse(b) for b in node.bases):
            out += _enum_mutants(path, source, node)
    unique = {(m.line, m.col, m.operator, m.after): m for m in out}
    ordered = sorted(unique.values(), key=lambda m: (m.line, m.col, m.operator, m.after))
    numbered, seen = [], {}
    index, lines = SourceIndex(root), source.splitlines()
    for m in ordered:
        where = (m.line, m.col, m.operator)
        seen[where] = seen.get(where, -1) + 1
        numbered.append(dataclasses.replace(
            m, variant=seen[where], key=_key(index, path, lines, m, seen[where])))
    return numbered


def _key(index, path, lines, m, variant):
    """:attr:`Mutant.key` of ``m`` (``lines``: its file's text) with ``variant``."""
    text = lines[m.line - 1]
    column = len(text.encode()[:m.col].decode(errors="ignore")) - (len(text) - len(text.lstrip()))
    return (f"{index.key_of(path, m.line)}::{m.operator}@{column}"
            + (f"/{variant}" if variant else ""))


def resolve_triage(triage=None, root=REPO_ROOT):
    """Each :data:`TRIAGE` entry's (default; or ``triage``'s) mutant in the source under
    ``root``: ``{key: Mutant}``, the mutant's line numbers today's. Raises
    :class:`~scin.sim.line_keys.StaleKey` (a ``ValueError``) listing every entry that names no
    mutant, with its file, scope and text: its line was edited or left its scope, or the line no
    longer has that change; the triage is then to be looked at again, not dropped silently."""
    triage = TRIAGE if triage is None else triage
    index, found, stale, pools = SourceIndex(root), {}, [], {}
    for key in triage:
        line_key, _, change = key.rpartition("::")
        try:
            where = parse(line_key)
            index.resolve(where)
        except (StaleKey, ValueError) as error:
            stale.append(f"triage {key!r}: {error}")
            continue
        if where.file not in pools:
            pools[where.file] = {m.key: m for m in sites(where.file, root)}
        if key in pools[where.file]:
            found[key] = pools[where.file][key]
        else:
            stale.append(f"triage {key!r}: the line is there ({where.describe()}) but has no "
                         f"mutant {change!r}; mutants of that line: "
                         + ", ".join(k.rpartition("::")[2] for k in pools[where.file]
                                     if k.rpartition("::")[0] == line_key))
    if stale:
        raise StaleKey(f"{len(stale)} TRIAGE entries name no mutant of today's source:\n  "
                       + "\n  ".join(stale))
    return found


def choose(count, seed, files=None, root=REPO_ROOT):
    """``count`` mutants drawn with ``seed``, spread over ``files`` (default: every file of
    :data:`TARGETS`): the files take turns, and each turn draws one of the file's sites at
    random, so every file gets about ``count / len(files)`` mutants whatever its size.

    Raises :class:`ValueError` for a file that is not in :data:`TARGETS` (it has no tests to run)
    or a ``count`` below 1."""
    files = list(TARGETS) if files is None else list(files)
    unknown = [f for f in files if f not in TARGETS]
    if unknown:
        raise ValueError(f"no tests are listed for {', '.join(unknown)}; files: "
                         f"{', '.join(TARGETS)}")
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    rng = random.Random(seed)
    pools = {f: sites(f, root) for f in files}
    for pool in pools.values():
        rng.shuffle(pool)
    chosen = []
    while len(chosen) < count and any(pools.values()):
        for f in files:
            if pools[f] and len(chosen) < count:
                chosen.append(pools[f].pop())
    return chosen


_COPIED = ("hdl", "sim", "tb", "scripts", "boards", "docs", "pyproject.toml")


def overlay(mutant, root=REPO_ROOT):
    """A scratch copy of the source tree with ``mutant`` applied (none: the tree as it is);
    returns ``(directory, pythonpath)``. ``pythonpath`` holds a package ``scin`` whose parts point
    into the copy, so that ``import scin.hdl`` in a process started with it imports the copy's
    code, ahead of the editable install of the work tree."""
    scratch = Path(tempfile.mkdtemp(prefix="scin-mutant-"))
    root = Path(root)
    try:
        for name in _COPIED:
            src = root / name
            if src.is_dir():
                shutil.copytree(src, scratch / name, ignore=shutil.ignore_patterns("__pycache__"))
            elif src.exists():
                shutil.copy2(src, scratch / name)
        if mutant is not None:
            target = scratch / mutant.file
            target.write_text(mutant.apply(target.read_text()))
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    package = scratch / "_import" / "scin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for part in ("hdl", "sim", "tb", "scripts", "boards"):
        (package / part).symlink_to(scratch / part, target_is_directory=True)
    return scratch, str(scratch / "_import")


def _failed_tests(output):
    """The first five failed test ids of pytest's summary (``FAILED tb/x.py::test - ...``; not
    the simulators' own log lines that also start with ``ERROR``)."""
    ids = [line.split()[1] for line in output.splitlines()
           if line.startswith(("FAILED ", "ERROR ")) and len(line.split()) > 1]
    return [i for i in ids if i.startswith("tb/")][:5]


def run_tests(file, mutant=None, timeout=600, root=REPO_ROOT, tests=None):
    """Run the tests of ``file`` (``tests``, pytest arguments; default: its :data:`TARGETS`
    entry) on a scratch copy of the tree with ``mutant``
    applied (none: the baseline, which must pass for the file's mutants to mean anything);
    return ``(status, seconds, failed tests, detail)`` with the statuses of :class:`Outcome`,
    ``killed`` meaning the tests failed. The builds are cached in the work tree's build
    directory: they are keyed by the code they build, so a mutant's never stands in for the
    real design's."""
    start = time.monotonic()
    try:
        scratch, pythonpath = overlay(mutant, root)
    except ValueError as error:
        return "error", time.monotonic() - start, [], str(error)
    env = dict(os.environ, PYTHONPATH=pythonpath, SCIN_BUILD_DIR=str(BUILD_ROOT),
               PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=",
           *(TARGETS[file] if tests is None else tests)]
    try:
        result = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True,
                                timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, [], f"tests ran past {timeout} s"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.monotonic() - start
    output = result.stdout + result.stderr
    tail = ([line for line in output.strip().splitlines() if line.strip()][-1:]
            or ["no output"])[0]
    if result.returncode == 0:
        return "survived", seconds, [], tail
    # 1: a test failed; 2: collection failed (the mutated code does not import or elaborate).
    if result.returncode in (1, 2):
        return "killed", seconds, _failed_tests(output), tail
    # 5: no test selected (a bad entry in TARGETS); anything else: pytest itself failed.
    return "error", seconds, [], f"pytest exit {result.returncode}: {tail}"


def run_mutant(mutant, timeout=600, root=REPO_ROOT):
    """Run ``mutant``'s tests, and its :data:`SECOND_TIER` if it survives them; return its
    :class:`Outcome` (``tier`` 1 or 2: the tests that decided it)."""
    status, seconds, failed, detail = run_tests(mutant.file, mutant, timeout, root)
    tier = 1
    if status == "survived" and mutant.file in SECOND_TIER:
        tier = 2
        status, more, failed, detail = run_tests(mutant.file, mutant, timeout, root,
                                                 SECOND_TIER[mutant.file])
        seconds += more
    return Outcome(mutant, status, seconds, failed, "" if status == "killed" else detail, tier)
