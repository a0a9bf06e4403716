"""Line and toggle coverage of ``hdl/``: Verilator's coverage points mapped back to Python lines.

``SCIN_COVERAGE=1`` in the environment (:func:`enabled`) changes three things in
:mod:`scin.sim.runner`, and nothing without it:

* Verilog is converted with Amaranth's source locations (``emit_src=True``) and, through
  :func:`annotated_conversion`, with the location of every branch: Amaranth puts none on the
  ``switch``/``case`` rules of a process, so a covered ``if`` of the Verilog could not be traced
  to the ``with m.If(...)`` that made it. Each switch gets a ``scin_cases`` attribute (the
  locations of every case, in order, ``;`` between cases, ``|`` between locations of one case:
  the ``If``/``Elif``/``Case``/``State`` line and every assignment written directly under it)
  and each case a ``scin_case`` attribute. Yosys prints the first before an ``if`` or ``casez``
  and the second, as a comment, before a ``casez`` item. The Verilog cache key then includes the
  raw text of ``hdl/`` (:func:`source_fingerprint`): line numbers are part of the output.
* Verilator builds add :data:`COVERAGE_FLAGS` (part of the build key: coverage models are built
  and cached apart from the normal ones).
* Each Verilator run writes its counts to ``.build/coverage/<top>-<build key>-<run>.dat``
  (:func:`data_plusarg`, Verilator's ``+verilator+coverage+file+``), beside a ``.json`` naming
  the pytest test (when there is one), the cocotb module and the build directory. When the run
  ends the runner folds its counts into its model's running sum (:func:`fold`): a system's
  run writes 600 MB. A run cut short before Verilator writes leaves an empty file, which
  :func:`fold` and :func:`collect` skip.

:func:`collect` merges those files: a branch point (Verilator's ``if``, ``else``, ``elsif``,
``case``) is mapped, through the attributes above, to the ``hdl/`` lines of its branch; a
Python line is *instrumented* if some point maps to it and *covered* if one of those points
was hit in some run. Block points (an ``always`` block as a whole) are left out: every block
runs at time 0, so they say nothing. Lines of hand-written Verilog in ``hdl/`` (``sim_ram.v``)
are their own lines. Toggle points are mapped by the ``src`` attribute of the signal's
declaration; internal wires without one are counted apart. :func:`render_report` writes the
Markdown report (``scin coverage``, ``docs/COVERAGE.md``), with each uncovered line's reason
from :data:`WAIVERS_PATH` or "not reached by any test". A waiver names its line by file, scope and
text (:mod:`.line_keys`), not by number, so that an edit above it does not move it; it is
resolved to today's line number when loaded (:func:`load_waivers`), and one that names no line
stops the report.
"""

import contextlib
import hashlib
import itertools
import json
import os
import re
import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .line_keys import SourceIndex, StaleKey, parse
from .toolchain import REPO_ROOT, file_lock


__all__ = ["ENV_VAR", "DATA_PLUSARG", "MERGED", "COVERAGE_FLAGS", "WAIVERS_PATH", "enabled",
           "source_fingerprint", "annotated_conversion", "data_plusarg", "fold", "parse_dat",
           "verilog_map", "collect", "load_waivers", "Coverage", "render_report",
           "annotate_process"]

#: The environment variable that turns coverage builds on (``1``) or off (unset, empty, ``0``).
ENV_VAR = "SCIN_COVERAGE"
#: Verilator's plusarg naming the file a run writes its counts to.
DATA_PLUSARG = "+verilator+coverage+file+"
#: The suffix of a model's summed runs, ``<top>-<build key>-merged.dat`` (:func:`fold`).
MERGED = "merged"
#: What a Verilator build adds under coverage.
COVERAGE_FLAGS = ["--coverage-line", "--coverage-toggle"]
#: The committed reasons for lines no test reaches: ``'hdl/FILE::SCOPE::TEXT' = "reason"``
#: under ``[waivers]`` (:mod:`.line_keys`).
WAIVERS_PATH = REPO_ROOT / "docs" / "coverage-waivers.toml"
#: Verilator's branch points; ``block`` (a whole ``always``) and ``toggle`` are handled apart.
BRANCH_KINDS = ("if", "else", "elsif", "case")


def enabled():
    """Whether ``SCIN_COVERAGE`` asks for coverage builds. Raises ``ValueError`` on a value other
    than unset, empty, ``0`` or ``1`` (a typo must not silently measure nothing)."""
    value = os.environ.get(ENV_VAR, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"{ENV_VAR} must be 1 (coverage builds) or 0/unset, not {value!r}")
    return value == "1"


#: Bump when :func:`annotated_conversion` writes its attributes differently: part of
#: :func:`source_fingerprint`, so Verilog converted the old way is not reused.
ANNOTATION_SCHEME = 2


def source_fingerprint(root=REPO_ROOT):
    """A hash of the raw text of every file under ``root/hdl`` and of :data:`ANNOTATION_SCHEME`:
    with source locations in the Verilog, a line moved by a comment changes the output, which
    the code digest of :func:`scin.sim.runner.hdl_fingerprint` ignores."""
    digest = hashlib.sha256(f"scheme {ANNOTATION_SCHEME}\0".encode())
    hdl = Path(root) / "hdl"
    for path in sorted([*hdl.rglob("*.py"), *hdl.rglob("*.v")]):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


# --- Conversion with the location of every branch ----------------------------------------------

def _loc(src_loc):
    return None if src_loc is None else f"{src_loc[0]}:{src_loc[1]}"


def _attr_text(locs):
    return "|".join(dict.fromkeys(loc for loc in locs if loc))


#: While an assignment list is emitted, its last entry is the list of the containers (a process
#: or a case of Amaranth's RTLIL builder) that received each assignment, in order; empty
#: otherwise.
_TARGETS = []


def _recording(original):
    """``original`` (``Process.assign`` or ``Case.assign`` of Amaranth's RTLIL builder), also
    noting which container each assignment went into while an assignment list is emitted."""
    def assign(self, lhs, rhs):
        if _TARGETS:
            _TARGETS[-1].append(self)
        return original(self, lhs, rhs)
    return assign


def _emit_assignment_list(self, cell_idx, cell):
    """Amaranth's own ``ModuleEmitter.emit_assignment_list``, run unchanged and watched: the
    containers its assignments go into are recorded (:func:`_recording`), then
    :func:`annotate_process` puts the locations of every case on the process it made."""
    targets = []
    _TARGETS.append(targets)
    try:
        _ORIGINAL["emit_assignment_list"](self, cell_idx, cell)
    finally:
        _TARGETS.pop()
    annotate_process(self.netlist, cell, targets)


class _EmitterChanged(RuntimeError):
    def __init__(self, what):
        super().__init__(f"Amaranth's RTLIL emitter no longer emits processes as "
                         f"sim/hdl_coverage.py expects ({what}); the coverage mapping would be "
                         f"wrong")


def annotate_process(netlist, cell, targets):
    """Set ``scin_cases`` on every switch and ``scin_locs`` on every case of the process just
    emitted for the assignment list ``cell``.

    What is relied on (and checked; :class:`_EmitterChanged` otherwise): the process's first
    assignment is the list's default, then every assignment of ``cell.assignments`` is made
    once, in order, into the case whose condition it has (the process itself for an
    unconditional one); a switch stands for one ``PriorityMatch`` cell of the netlist, and its
    cases for that cell's inputs in order, less the inputs whose ``Matches`` cell has no pattern
    (a case that can never match, which RTLIL cannot express: Amaranth drops it)."""
    if not targets or len(targets) != len(cell.assignments) + 1:
        raise _EmitterChanged(f"{len(targets)} assignments made for a list of "
                              f"{len(cell.assignments)} and a default")
    process, direct = targets[0], {}
    for container, assignment in zip(targets[1:], cell.assignments):
        direct.setdefault(id(container), []).append(assignment)
    from amaranth.back import rtlil
    for item in process.contents:
        if isinstance(item, rtlil.Switch):
            _annotate_switch(netlist, item, direct)


def _annotate_switch(netlist, switch, direct):
    """Annotate ``switch`` and the switches nested in its cases (see :func:`annotate_process`;
    ``direct`` maps a case's ``id`` to the assignments made directly into it). Returns the
    index of the switch's ``PriorityMatch`` cell."""
    from amaranth.back import rtlil
    from amaranth.hdl import _nir
    always = _nir.Net.from_const(1)
    # Each case's condition: the one its own assignments carry, or the enable of a switch
    # nested in it (a case with neither, `with m.If(x): pass`, is placed by position below).
    conds = []
    for case in switch.cases:
        nested = [_annotate_switch(netlist, item, direct) for item in case.contents
                  if isinstance(item, rtlil.Switch)]
        mine = direct.get(id(case), [])
        if any(a.cond != mine[0].cond for a in mine):
            raise _EmitterChanged("one case holds assignments of two conditions")
        conds.append(mine[0].cond if mine else netlist.cells[nested[0]].en if nested else None)
    known = [cond for cond in conds if cond is not None]
    if not known:
        raise _EmitterChanged("a switch with no assignment under it")
    index = known[0].cell
    priority = netlist.cells[index]
    if not isinstance(priority, _nir.PriorityMatch):
        raise _EmitterChanged("a case condition that is not a PriorityMatch output")
    kept = [bit for bit, net in enumerate(priority.inputs)
            if net == always or netlist.cells[net.cell].patterns]
    if len(kept) != len(switch.cases) or any(
            cond is not None and cond != _nir.Net.from_cell(index, bit)
            for cond, bit in zip(conds, kept)):
        raise _EmitterChanged("the cases of a switch are not its PriorityMatch inputs")
    switch.scin_cases = []
    for case, bit in zip(switch.cases, kept):
        net = priority.inputs[bit]
        # An Else has no Matches cell to give its line: its assignments' lines stand for it.
        locs = [] if net == always else [_loc(netlist.cells[net.cell].src_loc)]
        case.scin_locs = locs + [_loc(a.src_loc) for a in direct.get(id(case), [])]
        switch.scin_cases.append(_attr_text(case.scin_locs))
    return index


def _switch_emit(self, line):
    cases = getattr(self, "scin_cases", None)
    if cases is not None:
        line(f'attribute \\scin_cases "{";".join(cases)}"')
    _ORIGINAL["Switch.emit"](self, line)


def _case_emit(self, line):
    locs = getattr(self, "scin_locs", None)
    if locs:
        line(f'attribute \\scin_case "{_attr_text(locs)}"')
    _ORIGINAL["Case.emit"](self, line)


_ORIGINAL = {}


@contextlib.contextmanager
def annotated_conversion():
    """Within this block Amaranth's RTLIL back end writes the ``scin_cases``/``scin_case``
    attributes (module docstring). Amaranth's emitter runs as it is; around it, the project's
    code records where each assignment goes and reads each case's location from the netlist
    (:func:`annotate_process`), and the attributes are written just before the ``switch`` and
    ``case`` lines that Amaranth writes. Written against Amaranth 0.5's back end (its builder
    classes and netlist cells); raises ``RuntimeError`` on another version, or when the emitted
    processes do not have the shape :func:`annotate_process` checks, rather than mapping
    coverage wrongly."""
    import amaranth
    from amaranth.back import rtlil
    if not amaranth.__version__.startswith("0.5."):
        raise RuntimeError(f"coverage conversion is written for Amaranth 0.5, found "
                           f"{amaranth.__version__}; update scin/sim/hdl_coverage.py")
    patched = {"emit_assignment_list": (rtlil.ModuleEmitter, _emit_assignment_list),
               "Switch.emit": (rtlil.Switch, _switch_emit),
               "Case.emit": (rtlil.Case, _case_emit),
               "Process.assign": (rtlil.Process, None), "Case.assign": (rtlil.Case, None)}
    saved = {}
    for key, (cls, replacement) in patched.items():
        attr = key.rpartition(".")[2]
        saved[key] = getattr(cls, attr)
        _ORIGINAL.setdefault(key, saved[key])
        setattr(cls, attr, replacement or _recording(saved[key]))
    try:
        yield
    finally:
        for key, (cls, _) in patched.items():
            setattr(cls, key.rpartition(".")[2], saved[key])


# --- Runs --------------------------------------------------------------------------------------

def data_plusarg(build_root, top, build_dir, test_module, testcase=None):
    """The plusarg that makes one Verilator run write its coverage to a file of its own under
    ``build_root/coverage/`` (kept after the run, whatever happens to its test directory), and
    that file's sidecar (``.json``: test module and case, build directory, Verilog)."""
    out = Path(build_root) / "coverage"
    out.mkdir(parents=True, exist_ok=True)
    name = f"{top}-{Path(build_dir).name.rsplit('-', 1)[-1]}-{uuid.uuid4().hex[:12]}"
    # The pytest test that made the run, when there is one (test_module is often a shared bench).
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0] or None
    (out / f"{name}.json").write_text(json.dumps({
        "top": top, "test": test, "test_module": test_module, "testcase": testcase,
        "build_dir": str(build_dir)}, indent=1))
    return f"{DATA_PLUSARG}{out / (name + '.dat')}"


class _NotSamePoints(Exception):
    pass


def fold(dat):
    """Add one finished run's counts (``<top>-<build key>-<run>.dat``, :func:`data_plusarg`) to
    its model's ``<top>-<build key>-merged.dat`` and remove the run's file; its sidecar stays,
    the record of the run. Returns the file that now holds the counts, or ``None`` when the run
    wrote none (cut short before Verilator writes), whose sidecar is removed too.

    Why: a 4-endpoint system's run writes 2.9 million points, 600 MB, and the suite makes
    hundreds of runs, more than a disk holds. The runs of one model (one binary) list the same
    points in the same order, so they are summed line by line, each point's text compared; a
    run whose points differ (not expected) is left apart, whole, and :func:`collect` sums it by
    the points' text."""
    dat = Path(dat)
    if not dat.exists() or not dat.stat().st_size:
        dat.unlink(missing_ok=True)
        dat.with_suffix(".json").unlink(missing_ok=True)
        return None
    merged = dat.with_name(f"{dat.stem.rpartition('-')[0]}-{MERGED}.dat")
    with file_lock(merged.with_suffix(".lock")):
        if not merged.exists():
            _mark_folded(dat, merged)
            os.replace(dat, merged)
            return merged
        tmp = merged.with_suffix(".tmp")
        try:
            with open(merged) as total, open(dat) as run, open(tmp, "w") as out:
                for a, b in itertools.zip_longest(total, run):
                    if a is None or b is None:
                        raise _NotSamePoints
                    key, _, count = a.rstrip("\n").rpartition(" ")
                    key_b, _, count_b = b.rstrip("\n").rpartition(" ")
                    if key != key_b:
                        raise _NotSamePoints
                    out.write(f"{key} {int(count) + int(count_b)}\n" if a.startswith("C '") else a)
        except _NotSamePoints:
            tmp.unlink()
            return dat
        _mark_folded(dat, merged)
        os.replace(tmp, merged)
        dat.unlink()
    return merged


def _mark_folded(dat, into):
    """Note in ``dat``'s sidecar that its counts are now in ``into``."""
    side = Path(dat).with_suffix(".json")
    meta = json.loads(side.read_text()) if side.exists() else {}
    side.write_text(json.dumps({**meta, "folded_into": Path(into).name}, indent=1))


# --- Verilator's coverage.dat ------------------------------------------------------------------

_POINT = re.compile(r"^C '(.*)' (\d+)$")


def _fields(point):
    """The fields of one point's text ``C '<fields>'`` (count left off)."""
    fields = {}
    for item in point[3:-1].split("\x01")[1:]:
        key, _, value = item.partition("\x02")
        fields[key] = value
    return fields


def parse_dat(text):
    """The points of one Verilator ``coverage.dat`` (``SystemC::Coverage-3``): a list of
    ``(fields, count)``, ``fields`` a dict of Verilator's keys (``f`` file, ``l`` line, ``t``
    type, ``o`` comment, ``page``, ``S`` lines, ``h`` hierarchy, ...). Raises ``ValueError``
    naming the line on anything else."""
    points = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        match = _POINT.match(line)
        if not match:
            raise ValueError(f"coverage data line {number} is not a point: {line[:80]!r}")
        points.append((_fields(f"C '{match.group(1)}'"), int(match.group(2))))
    return points


# --- Verilog lines to hdl/ lines ---------------------------------------------------------------

_ATTR = re.compile(r'^(\s*)\(\* (\w+) = "([^"]*)" \*\)$')
_COMMENT_ATTR = re.compile(r'^(\s*)/\* scin_case = "([^"]*)" \*/$')


def _hdl_locs(text, root):
    """``"file:line|file:line"`` to the ``(hdl-relative path, line)`` pairs under ``root/hdl``
    (locations in Amaranth's library, the standard library or tests are dropped)."""
    out = []
    hdl = str(Path(root) / "hdl") + os.sep
    for loc in filter(None, text.split("|")):
        file, _, line = loc.rpartition(":")
        # Only this tree's hdl/ (Amaranth's own amaranth/hdl/ is not ours).
        if file.startswith(hdl) and line.isdigit():
            out.append((file[len(str(root)) + 1:], int(line)))
    return out


@dataclass
class VerilogMap:
    """What each line of one generated Verilog file maps to in ``hdl/``.

    ``then`` : Verilog line of an ``if``/``else if``/``casez`` item -> hdl lines of that branch;
    ``otherwise`` : Verilog line of an ``if`` -> hdl lines of its ``else`` (an ``m.Else()``);
    ``decl`` : Verilog line of a signal declaration -> its hdl line (from ``src``)."""
    then: dict = field(default_factory=dict)
    otherwise: dict = field(default_factory=dict)
    decl: dict = field(default_factory=dict)


def _if_chain(lines, start, indent, cases, root, vmap):
    """Map the chain ``if ... end else if ... end else ... end`` whose ``if`` is at ``start``
    (0-based) and indentation ``indent`` to ``cases`` (one location text per case, in order)."""
    k = 0
    header = start
    vmap.then[start + 1] = _hdl_locs(cases[0], root) if cases else []
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if not line.startswith(indent) or line[len(indent):len(indent) + 1] == " ":
            continue
        rest = line[len(indent):]
        if rest.startswith("end else if ("):
            k += 1
            header = i
            if k < len(cases):
                vmap.then[i + 1] = _hdl_locs(cases[k], root)
        elif rest.startswith("end else begin"):
            k += 1
            if k < len(cases):
                vmap.otherwise[header + 1] = _hdl_locs(cases[k], root)
        elif rest.startswith("end"):
            return


def verilog_map(text, root=REPO_ROOT):
    """The :class:`VerilogMap` of Verilog ``text`` converted under :func:`annotated_conversion`
    (line numbers 1-based, as Verilator's ``l``). ``root`` is the tree whose ``hdl/`` counts."""
    vmap = VerilogMap()
    lines = text.splitlines()
    pending_case = None
    for i, line in enumerate(lines):
        attr = _ATTR.match(line)
        if attr:
            indent, name, value = attr.groups()
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if name == "scin_cases" and nxt.startswith(indent + "if ("):
                _if_chain(lines, i + 1, indent, value.split(";"), root, vmap)
            elif name == "src":
                # A declaration may carry several attributes; the src is on one of the lines
                # right above it.
                for j in range(i + 1, min(i + 4, len(lines))):
                    if not lines[j].lstrip().startswith("(*"):
                        if re.match(r"\s*(input|output|inout|reg|wire)\b", lines[j]):
                            vmap.decl[j + 1] = _hdl_locs(value, root)
                        break
            continue
        comment = _COMMENT_ATTR.match(line)
        if comment:
            pending_case = comment.group(2)
            continue
        if pending_case is not None:
            vmap.then[i + 1] = _hdl_locs(pending_case, root)
            pending_case = None
    return vmap


# --- Merging the runs --------------------------------------------------------------------------

@dataclass
class Coverage:
    """Merged coverage of ``hdl/``.

    ``lines`` : ``(path, line) -> hits`` of every instrumented hdl line (0: never reached);
    ``toggles`` : ``path -> [bits toggled both ways, bits]`` of signals declared in that file;
    ``unattributed_toggles`` : the same for signals with no hdl location (Yosys's temporaries);
    ``runs`` : ``[(test module, top)]`` of every data file read; ``tops`` : the builds seen."""
    lines: dict = field(default_factory=dict)
    toggles: dict = field(default_factory=dict)
    unattributed_toggles: list = field(default_factory=lambda: [0, 0])
    runs: list = field(default_factory=list)
    tops: set = field(default_factory=set)


def _hand_written(path, root):
    """The hdl-relative path of a hand-written Verilog source of ``hdl/`` (``sim_ram.v``) that
    ``path`` (a build's copy) stands for, or None."""
    name = Path(path).name
    for candidate in (Path(root) / "hdl").rglob(name):
        if candidate.suffix == ".v":
            return str(candidate.relative_to(root))
    return None


def _lines_of(spec):
    """Verilator's ``S`` field (``"33,38-39"``) as line numbers."""
    out = []
    for part in filter(None, spec.split(",")):
        low, _, high = part.partition("-")
        out += range(int(low), int(high or low) + 1)
    return out


def collect(data_dir, root=REPO_ROOT):
    """Merge every ``*.dat`` under ``data_dir`` into a :class:`Coverage`. Raises
    ``FileNotFoundError`` when there is none (``make coverage`` makes them)."""
    data_dir = Path(data_dir)
    # An empty file is a run that ended before Verilator wrote its counts (interrupted).
    files = sorted(f for f in data_dir.glob("*.dat") if f.stat().st_size)
    if not files:
        raise FileNotFoundError(f"no coverage data in {data_dir}: run the tests with "
                                f"{ENV_VAR}=1 first (make coverage)")
    cov = Coverage()
    # A run's file is named <top>-<build key>-<run>.dat, and the runner folds it into the
    # model's <top>-<build key>-merged.dat (:func:`fold`): each model's files are summed by the
    # text of their points, then each point decoded once, one model at a time. A run is recorded
    # by its sidecar (.json), whose data may have been folded; a data file without one (neither
    # a sum nor a run the runner made) counts as a run of its own.
    models = {}
    for dat in files:
        models.setdefault(dat.stem.rpartition("-")[0] or dat.stem, []).append(dat)
    runs = [dat.with_suffix(".json") for dat in files if not dat.stem.endswith(f"-{MERGED}")]
    runs += [side for side in data_dir.glob("*.json")
             if "folded_into" in json.loads(side.read_text())]
    for side in sorted(runs):
        meta = json.loads(side.read_text()) if side.exists() else {}
        cov.runs.append((meta.get("test") or meta.get("test_module", "?"), meta.get("top", "?")))
    for group in models.values():
        _collect_model(group, root, cov)
    return cov


def _collect_model(files, root, cov):
    """Add the runs ``files`` of one model to ``cov`` (see :func:`collect`)."""
    maps = {}
    toggle_bits = {}   # (verilog file, line, bit name) -> ([0->1 hit, 1->0 hit], hdl file)
    merged = {}
    for dat in files:
        with open(dat) as f:
            for number, line in enumerate(f, 1):
                if line.startswith("C '"):
                    key, _, count = line.rstrip("\n").rpartition(" ")
                    merged[key] = merged.get(key, 0) + int(count)
                elif line.strip() and not line.startswith("#"):
                    raise ValueError(f"{dat}: line {number} is not a coverage point: "
                                     f"{line[:80]!r}")
    for text, count in merged.items():
        fields = _fields(text)
        vfile = fields.get("f", "")
        kind = fields.get("o", "") if fields.get("t") != "toggle" else "toggle"
        hand = _hand_written(vfile, root) if vfile not in maps else None
        if vfile not in maps:
            if hand:
                maps[vfile] = hand
            else:
                path = Path(vfile)
                maps[vfile] = verilog_map(path.read_text(), root) if path.exists() else None
                if maps[vfile] is not None:
                    cov.tops.add(path.parent.parent.name)   # the build directory: one model
        vmap = maps[vfile]
        if vmap is None:
            continue
        line = int(fields.get("l", 0))
        if kind == "toggle":
            name, _, direction = fields.get("o", "").rpartition(":")
            locs = ([(vmap, line)] if isinstance(vmap, str)
                    else vmap.decl.get(line, []))
            hdl_file = locs[0][0] if locs else None
            entry = toggle_bits.setdefault((vfile, line, name), [[False, False], hdl_file])
            entry[0][0 if direction == "0->1" else 1] |= count > 0
            continue
        if isinstance(vmap, str):   # hand-written Verilog: its lines are hdl lines
            if kind == "block" or kind in BRANCH_KINDS:
                for vline in _lines_of(fields.get("S", "")):
                    loc = (vmap, vline)
                    cov.lines[loc] = cov.lines.get(loc, 0) + count
            continue
        if kind not in BRANCH_KINDS:
            continue
        table = vmap.otherwise if kind == "else" else vmap.then
        for loc in table.get(line, []):
            cov.lines[loc] = cov.lines.get(loc, 0) + count
    for (both, hdl_file) in toggle_bits.values():
        bucket = cov.toggles.setdefault(hdl_file, [0, 0]) if hdl_file else cov.unattributed_toggles
        bucket[0] += all(both)
        bucket[1] += 1


# --- Waivers and the report --------------------------------------------------------------------

def load_waivers(path=WAIVERS_PATH, root=REPO_ROOT):
    """The waivers file resolved against the sources under ``root``: ``{(path, line): reason}``
    with today's line numbers. Raises ``ValueError`` naming a key that is not a line key
    (``'hdl/FILE::SCOPE::TEXT'``, :mod:`.line_keys`) of a file under ``hdl/``, or a reason that
    is empty; and :class:`~.line_keys.StaleKey` (a ``ValueError``) listing every key that names
    no line today (its file, scope and text), so that a waiver whose line was edited is found,
    never silently dropped."""
    path = Path(path)
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text()).get("waivers", {})
    index = SourceIndex(root)
    out, stale = {}, []
    for text, reason in data.items():
        try:
            key = parse(text)
        except ValueError as error:
            raise ValueError(f"{path}: waiver key {error}") from None
        if not key.file.startswith("hdl/"):
            raise ValueError(f"{path}: waiver key {text!r} names {key.file}, not a file under hdl/")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"{path}: waiver {text!r} has no reason")
        try:
            out[(key.file, index.resolve(key))] = reason.strip()
        except StaleKey as error:
            stale.append(str(error))
    if stale:
        raise StaleKey(f"{path}: {len(stale)} waiver(s) name no line of today's source:\n  "
                       + "\n  ".join(stale))
    return out


def _pct(num, den):
    return f"{100 * num / den:.1f}" if den else "-"


def render_report(cov, *, waivers, command, commit, notes=(), root=REPO_ROOT):
    """The Markdown report of ``cov``: the overall figure, a table per ``hdl/`` file (lines
    instrumented, covered, %, waived, toggle %), the files of ``hdl/`` with no coverage point,
    and every uncovered line with its source text and its reason (the waiver's, or "not reached
    by any test"). ``notes`` are paragraphs put under the heading (what was run)."""
    files = sorted({path for path, _ in cov.lines} | {p for p in cov.toggles})
    total = sum(1 for hits in cov.lines.values())
    covered = sum(1 for hits in cov.lines.values() if hits)
    waived = sum(1 for key, hits in cov.lines.items() if not hits and key in waivers)
    tog = [sum(v[0] for v in cov.toggles.values()), sum(v[1] for v in cov.toggles.values())]
    out = ["# Line and toggle coverage of `hdl/`", "",
           f"Generated by `scin coverage` at commit {commit}; the data from `{command}`.", ""]
    for note in notes:
        out += [note, ""]
    out += ["What is measured: Verilator's branch points (each `if`, `else`, `else if` and "
            "`case` item of the generated Verilog), each mapped to the `hdl/` lines of its branch: "
            "the `with m.If(...)`/`Elif`/`Case`/`State` line and the assignments written directly "
            "under it (sim/hdl_coverage.py). An `hdl/` line is *instrumented* when a branch point "
            "of some model maps to it, *covered* when one of those points was reached in some run. "
            "Lines outside any branch (unconditional `m.d.comb`/`m.d.sync` statements, "
            "elaboration-time Python such as parameter checks) have no point and are not counted; "
            "toggle coverage covers their signals (a bit counts when it went 0->1 and 1->0 in some "
            "run of its model; each model's bits are counted apart, so a block in several models "
            "counts once per model). A synchronous signal's reset is a branch too (an "
            "`if (rst)` located at the signal's declaration), so a `Signal(...)` line of a "
            "register counts, covered once reset is applied. Only Verilator runs are measured: "
            "Icarus has no "
            "coverage, and the tests that run in Amaranth's Python simulator (most ISA block tests "
            "of `tb/unit/test_isa_blocks.py`, parts of `tb/block/test_transport.py`) add nothing "
            "here.", ""]
    modules = {}
    for test, _ in cov.runs:
        label = test.split("::")[0]
        modules[label] = modules.get(label, 0) + 1
    out += ["Simulator runs per test file (or per cocotb module, for runs that recorded no pytest "
            "test): " + ", ".join(f"`{m}` {n}" for m, n in sorted(modules.items())) + "."]
    out += ["", "## Summary", "",
            f"**{covered} of {total} instrumented `hdl/` lines covered: {_pct(covered, total)} %** "
            f"({waived} of the {total - covered} others waived with a reason; with them counted "
            f"as covered, {_pct(covered + waived, total)} %). Toggle coverage of the signals "
            f"declared in `hdl/`: {tog[0]} of {tog[1]} bits toggled both ways "
            f"({_pct(*tog)} %); Yosys's internal wires, which have no `hdl/` line: "
            f"{cov.unattributed_toggles[0]} of {cov.unattributed_toggles[1]} "
            f"({_pct(*cov.unattributed_toggles)} %).", "",
            f"{len(cov.runs)} simulator runs, {len(cov.tops)} distinct Verilator models.", "",
            "## Per module", "",
            "| module | lines | covered | % | waived | toggle bits | toggle % |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for path in files:
        mine = {line: hits for (p, line), hits in cov.lines.items() if p == path}
        n, c = len(mine), sum(1 for h in mine.values() if h)
        w = sum(1 for line, h in mine.items() if not h and (path, line) in waivers)
        t = cov.toggles.get(path, [0, 0])
        out.append(f"| `{path}` | {n} | {c} | {_pct(c, n)} | {w} | {t[1]} | {_pct(*t)} |")
    hdl = Path(root) / "hdl"
    seen = set(files)
    missing = sorted(str(p.relative_to(root)) for p in [*hdl.rglob("*.py"), *hdl.rglob("*.v")]
                     if str(p.relative_to(root)) not in seen and p.name != "__init__.py")
    out += ["", "## `hdl/` files with no coverage point", "",
            "No Verilator model of the run contains hardware from these files (or they hold no "
            "hardware: layouts, parameters, codecs, formal harnesses):", "",
            ", ".join(f"`{m}`" for m in missing) or "none", "",
            "## Uncovered lines", "",
            "Each line is shown by its number at the commit above. A reason "
            "comes from `docs/coverage-waivers.toml`, which names each line by file, scope "
            "(class and function, or Verilog module) and text, `FILE::SCOPE::TEXT` "
            "(sim/line_keys.py), so that edits elsewhere in the file do not move it; a waiver "
            "that names no line of the source stops the report.", ""]
    out += _uncovered_rows(cov, waivers, root)
    return "\n".join(out) + "\n"


def _uncovered_rows(cov, waivers, root):
    """The report's table of uncovered lines (or "None."): each with its source text at ``root``
    and its waiver's reason, or "not reached by any test"."""
    uncovered = sorted(key for key, hits in cov.lines.items() if not hits)
    if not uncovered:
        return ["None."]
    out = ["| line | source | reason |", "| --- | --- | --- |"]
    texts = {}
    for path, line in uncovered:
        if path not in texts:
            source = Path(root) / path
            texts[path] = source.read_text().splitlines() if source.exists() else []
        text = texts[path][line - 1].strip() if line <= len(texts[path]) else "?"
        text = text.replace("|", "\\|").replace("`", "'")
        reason = waivers.get((path, line), "not reached by any test")
        out.append(f"| `{path}:{line}` | `{text}` | {reason} |")
    return out
