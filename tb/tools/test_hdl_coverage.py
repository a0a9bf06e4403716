"""Line and toggle coverage of ``hdl/`` (``sim/hdl_coverage.py``, ``scin coverage``, ``make
coverage``): the parser of Verilator's data, the mapping of Verilog branches back to Python lines
through the attributes of the annotated conversion, the waivers file and its line keys (which
survive edits above a waived line and go stale when the line itself changes), the report, and
that without ``SCIN_COVERAGE`` the runner builds exactly what it built before. No simulator runs
here.
"""

import hashlib
import importlib.util
import json
import shutil
import subprocess
import textwrap
import tomllib

import pytest

from scin.sim import hdl_coverage, line_keys, runner
from scin.sim.toolchain import REPO_ROOT, setup_environment


def point(count, **fields):
    """One line of a Verilator ``coverage.dat``."""
    body = "".join(f"\x01{key}\x02{value}" for key, value in fields.items())
    return f"C '{body}' {count}"


def test_parse_dat_reads_points_and_rejects_anything_else():
    text = "\n".join(["# SystemC::Coverage-3",
                      point(7, f="a.v", l=12, n=5, t="branch", page="v_branch/a", o="if", S="12-13",
                            h="TOP.a"),
                      point(0, f="a.v", l=4, t="toggle", page="v_toggle/a", o="x[1]:0->1")])
    points = hdl_coverage.parse_dat(text)
    assert points == [({"f": "a.v", "l": "12", "n": "5", "t": "branch", "page": "v_branch/a",
                        "o": "if", "S": "12-13", "h": "TOP.a"}, 7),
                      ({"f": "a.v", "l": "4", "t": "toggle", "page": "v_toggle/a",
                        "o": "x[1]:0->1"}, 0)]
    with pytest.raises(ValueError, match="line 2"):
        hdl_coverage.parse_dat("# SystemC::Coverage-3\nnot a point\n")


#: A block with every kind of branch: If/Elif/Else, an FSM (a ``casez``), a nested If, and a
#: Switch whose first case has no pattern (it never matches: Amaranth leaves it out of the RTLIL,
#: so the case after it is the switch's first).
BLOCK = '''\
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Block(wiring.Component):
    a: In(4)
    b: In(1)
    o: Out(4)
    p: Out(1)
    q: Out(2)

    def elaborate(self, platform):
        m = Module()
        r = Signal(4)
        with m.If(self.b):                 # IF
            m.d.sync += r.eq(self.a)       # IF_BODY
        with m.Elif(self.a == 3):          # ELIF
            m.d.sync += r.eq(r + 1)        # ELIF_BODY
        with m.Else():
            m.d.sync += r.eq(0)            # ELSE_BODY
        with m.FSM():
            with m.State("A"):             # STATE_A
                with m.If(self.b):         # NESTED
                    m.next = "B"
            with m.State("B"):             # STATE_B
                m.d.comb += self.p.eq(1)   # STATE_B_BODY
                m.next = "A"
        with m.Switch(self.a):
            with m.Case():                 # NEVER
                m.d.comb += self.q.eq(1)   # NEVER_BODY
            with m.Case(5):                # FIVE
                m.d.comb += self.q.eq(2)   # FIVE_BODY
        m.d.comb += self.o.eq(r ^ self.a)
        return m
'''


def line_of(tag):
    return next(i for i, line in enumerate(BLOCK.splitlines(), 1) if line.endswith(f"# {tag}"))


@pytest.fixture(scope="module")
def annotated(tmp_path_factory):
    """``(root, Verilog text)`` of :data:`BLOCK`, written as ``root/hdl/block.py`` and converted
    as the runner converts under ``SCIN_COVERAGE=1``."""
    from scin.hdl.toplevel import convert
    setup_environment()
    root = tmp_path_factory.mktemp("tree")
    (root / "hdl").mkdir()
    source = root / "hdl" / "block.py"
    source.write_text(BLOCK)
    spec = importlib.util.spec_from_file_location("coverage_block", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with hdl_coverage.annotated_conversion():
        text = convert(module.Block(), name="block", emit_src=True)
    return root, text


def verilog_line(text, pattern, nth=0):
    return [i for i, line in enumerate(text.splitlines(), 1) if pattern in line][nth]


def test_branches_map_to_their_python_lines(annotated):
    """Each ``if``/``else if``/``else`` and ``casez`` item of the Verilog maps to the Python
    line of its ``If``/``Elif``/``Else``/``State`` and the assignments under it."""
    root, text = annotated
    vmap = hdl_coverage.verilog_map(text, root)
    src = "hdl/block.py"
    if_line = verilog_line(text, "if (b) begin")
    elif_line = verilog_line(text, "end else if (")
    assert set(vmap.then[if_line]) == {(src, line_of("IF")), (src, line_of("IF_BODY"))}
    assert set(vmap.then[elif_line]) == {(src, line_of("ELIF")), (src, line_of("ELIF_BODY"))}
    assert (src, line_of("ELSE_BODY")) in vmap.otherwise[elif_line]
    cases = {tuple(sorted(v)) for v in vmap.then.values()}
    assert ((src, line_of("STATE_B")), (src, line_of("STATE_B_BODY"))) in cases
    assert any((src, line_of("NESTED")) in v for v in vmap.then.values())
    # A case whose only contents is a nested If still has its own line.
    assert ((src, line_of("STATE_A")),) in cases
    # The pattern-less case is not in the Verilog, and does not shift the one after it.
    assert ((src, line_of("FIVE")), (src, line_of("FIVE_BODY"))) in cases
    assert not any((src, line_of(tag)) in v for v in vmap.then.values()
                   for tag in ("NEVER", "NEVER_BODY"))
    # Declarations carry their src: the register r is declared on the line `r = Signal(4)`.
    assert [(src, line_of("IF") - 1)] in vmap.decl.values()
    # Nothing outside root/hdl (Amaranth's library, the standard library) is kept.
    assert all(path == src for locs in vmap.then.values() for path, _ in locs)


def _block(root):
    spec = importlib.util.spec_from_file_location("coverage_block", root / "hdl" / "block.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Block()


def test_annotation_adds_attributes_and_nothing_else(annotated):
    """The annotated RTLIL is Amaranth's own output with one ``scin_cases`` line before each
    switch and a ``scin_case`` line before each located case; every case of the block gets one
    (an Else only when assignments under it give it lines). The patches are undone after."""
    from amaranth.back import rtlil
    root, _ = annotated
    plain = rtlil.convert(_block(root), name="block", emit_src=True)
    with hdl_coverage.annotated_conversion():
        text = rtlil.convert(_block(root), name="block", emit_src=True)
    kept = [line for line in text.splitlines() if "scin_case" not in line]
    assert kept == plain.splitlines()
    lines = text.splitlines()
    switches = [i for i, line in enumerate(lines) if line.strip().startswith("switch ")]
    cases = [i for i, line in enumerate(lines) if line.strip().startswith("case")]
    assert switches and all("scin_cases" in lines[i - 1] for i in switches)
    assert all("scin_case " in lines[i - 1] for i in cases
               if lines[i].strip() != "case"), "a case with patterns and no location"
    assert "scin_case" not in rtlil.convert(_block(root), name="block", emit_src=True)


def test_an_emitter_of_another_shape_is_refused():
    """The annotation checks what it relies on: an assignment list whose assignments were not
    all seen going into the process is an error, not a wrong mapping."""
    from types import SimpleNamespace
    with pytest.raises(RuntimeError, match="no longer emits processes"):
        hdl_coverage.annotate_process(None, SimpleNamespace(assignments=[object()]), [object()])


def test_collect_merges_runs_by_python_line(annotated, tmp_path):
    """Two runs of one model (files named ``<top>-<build key>-<run>``, as the runner names
    them): a line is covered if either reached it; a branch no run took is uncovered; toggles
    count a bit only when it went both ways, over the runs."""
    root, text = annotated
    verilog = tmp_path / "block.v"
    verilog.write_text(text)
    if_line = verilog_line(text, "if (b) begin")
    elif_line = verilog_line(text, "end else if (")
    decl = next(line for line, locs in hdl_coverage.verilog_map(text, root).decl.items()
                if locs == [("hdl/block.py", line_of("IF") - 1)])
    data = tmp_path / "data"
    data.mkdir()
    common = dict(f=str(verilog), page="v_branch/block", h="TOP.block")
    (data / "block-0123-one.dat").write_text("\n".join([
        "# SystemC::Coverage-3",
        point(3, l=if_line, t="branch", o="if", **common),
        point(0, l=elif_line, t="branch", o="if", **common),
        point(0, l=elif_line, t="branch", o="else", **common),
        point(5, l=1, t="line", o="block", **common),
        point(1, f=str(verilog), l=decl, t="toggle", o="r[0]:0->1"),
        point(0, f=str(verilog), l=decl, t="toggle", o="r[0]:1->0"),
    ]) + "\n")
    (data / "block-0123-one.json").write_text(json.dumps({"test_module": "tb.one", "top": "block"}))
    (data / "block-0123-two.dat").write_text("\n".join([
        "# SystemC::Coverage-3",
        point(0, l=if_line, t="branch", o="if", **common),
        point(2, l=elif_line, t="branch", o="else", **common),
        point(1, f=str(verilog), l=decl, t="toggle", o="r[0]:1->0"),
        point(0, f=str(verilog), l=decl, t="toggle", o="r[1]:1->0"),
    ]) + "\n")
    cov = hdl_coverage.collect(data, root)
    src = "hdl/block.py"
    assert cov.lines[(src, line_of("IF"))] == 3
    assert cov.lines[(src, line_of("ELIF"))] == 0
    assert cov.lines[(src, line_of("ELSE_BODY"))] == 2
    assert cov.toggles[src] == [1, 2]              # r[0] both ways (over two runs), r[1] not
    assert sorted(cov.runs) == [("?", "?"), ("tb.one", "block")]
    with pytest.raises(FileNotFoundError, match="SCIN_COVERAGE=1"):
        hdl_coverage.collect(tmp_path / "empty", root)


def test_report_gives_each_uncovered_line_a_reason(tmp_path):
    (tmp_path / "hdl").mkdir()
    (tmp_path / "hdl" / "x.py").write_text("a\nwith m.If(never):\nwith m.If(rare):\n")
    cov = hdl_coverage.Coverage(lines={("hdl/x.py", 1): 4, ("hdl/x.py", 2): 0,
                                       ("hdl/x.py", 3): 0},
                                toggles={"hdl/x.py": [3, 4]}, runs=[("tb.t", "x")])
    report = hdl_coverage.render_report(
        cov, waivers={("hdl/x.py", 2): "a parameter never simulated"}, command="make coverage",
        commit="abc1234", root=tmp_path)
    assert "**1 of 3 instrumented `hdl/` lines covered: 33.3 %**" in report
    assert "| `hdl/x.py` | 3 | 1 | 33.3 | 1 | 4 | 75.0 |" in report
    assert "| `hdl/x.py:2` | `with m.If(never):` | a parameter never simulated |" in report
    assert "| `hdl/x.py:3` | `with m.If(rare):` | not reached by any test |" in report
    assert "`FILE::SCOPE::TEXT`" in report
    assert "abc1234" in report and "make coverage" in report


def test_waivers_name_existing_hdl_lines():
    """Every entry of docs/coverage-waivers.toml resolves to one non-blank line of an hdl/ file,
    with a reason (an entry whose line was edited fails here, naming its file, scope and text)."""
    waivers = hdl_coverage.load_waivers()
    keys = tomllib.loads(hdl_coverage.WAIVERS_PATH.read_text())["waivers"]
    assert len(waivers) == len(keys)            # no two keys name the same line
    for (path, line), reason in waivers.items():
        lines = (REPO_ROOT / path).read_text().splitlines()
        assert lines[line - 1].strip(), f"{path}:{line}: blank"
        assert reason


def test_waivers_file_errors_name_the_entry(tmp_path):
    bad = tmp_path / "w.toml"
    bad.write_text("[waivers]\n'sim/x.py::f::a = 1' = \"no\"\n")
    with pytest.raises(ValueError, match="sim/x.py, not a file under hdl/"):
        hdl_coverage.load_waivers(bad)
    bad.write_text('[waivers]\n"hdl/x.py:3" = "an old line-number key"\n')
    with pytest.raises(ValueError, match="'hdl/x.py:3' is not a line key"):
        hdl_coverage.load_waivers(bad)
    bad.write_text("[waivers]\n'hdl/transport/credit_rx.py::CreditRx.elaborate::"
                   "m.d.sync += self.overflow.eq(1)' = ' '\n")
    with pytest.raises(ValueError, match="no reason"):
        hdl_coverage.load_waivers(bad)


#: The waived lines of the credit receiver, as docs/coverage-waivers.toml names them.
CREDIT_RX = "hdl/transport/credit_rx.py"


def _credit_rx_copy(tmp_path):
    """A scratch root holding a copy of the credit receiver and a waivers file with its
    committed waivers; returns ``(root, waivers file, {key: line today})``."""
    root = tmp_path / "root"
    (root / CREDIT_RX).parent.mkdir(parents=True)
    shutil.copy(REPO_ROOT / CREDIT_RX, root / CREDIT_RX)
    committed = tomllib.loads(hdl_coverage.WAIVERS_PATH.read_text())["waivers"]
    mine = {k: v for k, v in committed.items() if k.startswith(CREDIT_RX + "::")}
    assert len(mine) == 2
    waivers = tmp_path / "waivers.toml"
    # TOML literal strings for the keys (no quote in them), JSON's escapes for the reasons.
    waivers.write_text("[waivers]\n" + "".join(f"'{k}' = {json.dumps(v)}\n"
                                                for k, v in mine.items()))
    index = line_keys.SourceIndex(REPO_ROOT)
    return root, waivers, {k: index.resolve(k) for k in mine}


def test_a_waiver_follows_its_line_when_lines_are_inserted_above(tmp_path):
    """Lines added above a waived line (at the top of the file and inside its scope) leave the
    waiver valid: it resolves to the line's new number, whose text is the waived one."""
    root, waivers, before = _credit_rx_copy(tmp_path)
    source = (root / CREDIT_RX).read_text().splitlines(keepends=True)
    first = min(before.values())
    indent = source[first - 1][:len(source[first - 1]) - len(source[first - 1].lstrip())]
    edited = (["# a new comment\n", "\n", "import os\n"] + source[:first - 1]
              + [f"{indent}pass   # a new statement in the waived line's scope\n",
                 f"{indent}# and a comment\n"] + source[first - 1:])
    (root / CREDIT_RX).write_text("".join(edited))
    resolved = hdl_coverage.load_waivers(waivers, root)
    assert sorted(line for _, line in resolved) == sorted(n + 5 for n in before.values())
    lines = (root / CREDIT_RX).read_text().splitlines()
    for key, old in before.items():
        assert lines[old + 5 - 1].strip() == line_keys.parse(key).text
    # And the old line number would now name another line: a line-number key would be wrong.
    assert lines[first - 1].strip() != line_keys.parse(next(iter(before))).text


def test_a_waiver_whose_line_was_edited_is_reported_stale(tmp_path):
    """Editing the waived line's text makes the waiver an error that names the file, the scope
    and the text it was given for (the reason may no longer hold), never a silent miss."""
    root, waivers, _ = _credit_rx_copy(tmp_path)
    text = (root / CREDIT_RX).read_text()
    assert text.count("with m.If(w_en & ~fifo.w_rdy):") == 1
    (root / CREDIT_RX).write_text(text.replace("with m.If(w_en & ~fifo.w_rdy):",
                                               "with m.If(w_en & ~fifo.w_rdy & ~self.halt):"))
    with pytest.raises(line_keys.StaleKey) as error:
        hdl_coverage.load_waivers(waivers, root)
    message = str(error.value)
    assert "1 waiver(s) name no line" in message
    assert CREDIT_RX in message and "CreditRx.elaborate" in message
    assert "'with m.If(w_en & ~fifo.w_rdy):'" in message
    # The file gone is stale too, not ignored.
    (root / CREDIT_RX).unlink()
    with pytest.raises(line_keys.StaleKey, match="2 waiver"):
        hdl_coverage.load_waivers(waivers, root)


SCOPED = textwrap.dedent('''\
    X = 1

    class Block:
        @property
        def width(self):
            return 1

        def elaborate(self, platform):
            m = Module()
            with m.If(a):
                m.d.sync += x.eq(0)
            with m.If(b):
                m.d.sync += x.eq(0)

            def helper(m):
                m.d.sync += x.eq(0)
            return m
    ''')


def test_line_keys_name_scope_text_and_occurrence(tmp_path):
    (tmp_path / "hdl").mkdir()
    (tmp_path / "hdl" / "b.py").write_text(SCOPED)
    index = line_keys.SourceIndex(tmp_path)
    keys = {n: str(index.key_of("hdl/b.py", n)) for n in (1, 4, 11, 13, 16)}
    assert keys == {1: "hdl/b.py::<module>::X = 1",
                    4: "hdl/b.py::Block.width::@property",
                    11: "hdl/b.py::Block.elaborate[1]::m.d.sync += x.eq(0)",
                    13: "hdl/b.py::Block.elaborate[2]::m.d.sync += x.eq(0)",
                    16: "hdl/b.py::Block.elaborate.helper::m.d.sync += x.eq(0)"}
    for n, key in keys.items():
        assert index.resolve(key) == n and str(line_keys.parse(key)) == key
    with pytest.raises(line_keys.StaleKey, match=r"ambiguous key .* \(lines 11, 13\); name one as"):
        index.resolve("hdl/b.py::Block.elaborate::m.d.sync += x.eq(0)")
    with pytest.raises(line_keys.StaleKey, match="only 2 line"):
        index.resolve("hdl/b.py::Block.elaborate[3]::m.d.sync += x.eq(0)")
    with pytest.raises(line_keys.StaleKey, match="no scope Block.gone"):
        index.resolve("hdl/b.py::Block.gone::m = Module()")
    with pytest.raises(ValueError, match="blank"):
        index.key_of("hdl/b.py", 2)
    # A key's text may hold '::' and end in ':'.
    assert line_keys.parse("hdl/b.py::f::a[::2]:").text == "a[::2]:"


def test_verilog_lines_are_scoped_by_module():
    index = line_keys.SourceIndex(REPO_ROOT)
    line = index.resolve('hdl/endpoint/sim_ram.v::scin_sim_ram::'
                         'if (!$value$plusargs("scin_dump_lo=%d", lo)) lo = 0;')
    key = index.key_of("hdl/endpoint/sim_ram.v", line)
    assert key.scope == "scin_sim_ram" and key.occurrence is None


def test_without_the_variable_builds_are_unchanged(monkeypatch):
    """Without SCIN_COVERAGE the Verilator flags are the ones every cached model was built with;
    with it, the coverage flags are added (so a coverage model has a key of its own)."""
    monkeypatch.delenv(hdl_coverage.ENV_VAR, raising=False)
    assert runner.build_flags("verilator") == [
        "-Wno-WIDTH", "-Wno-fatal", "-O3", "--x-assign", "fast", "--x-initial", "fast",
        "--no-timing"]
    assert runner.build_flags("icarus") == []
    monkeypatch.setenv(hdl_coverage.ENV_VAR, "0")
    assert "--coverage-line" not in runner.build_flags("verilator")
    monkeypatch.setenv(hdl_coverage.ENV_VAR, "1")
    assert runner.build_flags("verilator")[-2:] == ["--coverage-line", "--coverage-toggle"]
    assert runner.build_flags("icarus") == []
    monkeypatch.setenv(hdl_coverage.ENV_VAR, "yes")
    with pytest.raises(ValueError, match="SCIN_COVERAGE"):
        hdl_coverage.enabled()


def test_verilog_cache_key_is_unchanged_without_the_variable(monkeypatch, tmp_path):
    """Without SCIN_COVERAGE, verilog_for keys the Verilog by top, configuration and code of
    hdl/ exactly as before (no cached Verilog goes stale); with it, the key differs and the
    Verilog carries the branch attributes."""
    from amaranth.hdl import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import Out

    class Tiny(wiring.Component):
        o: Out(1)

        def elaborate(self, platform):
            m = Module()
            with m.If(self.o):
                m.d.sync += self.o.eq(0)
            return m

    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path)
    monkeypatch.delenv(hdl_coverage.ENV_VAR, raising=False)
    plain = runner.verilog_for(Tiny, "tiny", "k")
    key = hashlib.sha256(f"tiny\0k\0{runner.hdl_fingerprint()}".encode()).hexdigest()[:16]
    assert plain.name == f"tiny-{key}.v"
    assert "scin_cases" not in plain.read_text()
    monkeypatch.setenv(hdl_coverage.ENV_VAR, "1")
    annotated = runner.verilog_for(Tiny, "tiny", "k")
    assert annotated != plain and "scin_cases" in annotated.read_text()


def test_data_plusarg_keeps_each_run_apart(tmp_path):
    build_dir = tmp_path / "verilator" / "isa-0123456789abcdef"
    first = hdl_coverage.data_plusarg(tmp_path, "isa", build_dir, "tb.test_isa", "t1")
    second = hdl_coverage.data_plusarg(tmp_path, "isa", build_dir, "tb.test_isa", "t1")
    assert first != second and first.startswith("+verilator+coverage+file+")
    dat = first.removeprefix("+verilator+coverage+file+")
    assert dat.startswith(str(tmp_path / "coverage" / "isa-0123456789abcdef-"))
    side = json.loads((tmp_path / "coverage" / (dat.rsplit("/", 1)[1][:-4] + ".json")).read_text())
    assert side["test_module"] == "tb.test_isa" and side["build_dir"] == str(build_dir)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_coverage_runs_the_suite_with_coverage_then_the_report():
    out = subprocess.run(["make", "-n", "-C", str(REPO_ROOT), "coverage"], capture_output=True,
                         text=True, check=True).stdout
    assert "SCIN_COVERAGE=1" in out and "-k \"not icarus\"" in out
    assert "scin coverage" in out


def test_fold_sums_the_runs_of_a_model_and_keeps_a_stranger_apart(annotated, tmp_path):
    """The runner folds each finished run into its model's sum (a system's run writes 600 MB):
    runs with the same points are summed line by line and their files removed, each sidecar
    marked; a run whose points differ is left whole; an empty run (cut short) leaves nothing.
    :func:`collect` then gives what it gives on the unfolded files, and counts every run."""
    root, text = annotated
    verilog = tmp_path / "block.v"
    verilog.write_text(text)
    if_line = verilog_line(text, "if (b) begin")
    common = dict(f=str(verilog), page="v_branch/block", h="TOP.block")
    runs = {"one": [3, 0], "two": [0, 2], "three": [0, 1]}
    for data in ("folded", "apart"):
        (tmp_path / data).mkdir()
        for name, (if_hits, else_hits) in runs.items():
            (tmp_path / data / f"block-0123-{name}.dat").write_text("\n".join([
                "# SystemC::Coverage-3",
                point(if_hits, l=if_line, t="branch", o="if", **common),
                point(else_hits, l=if_line, t="branch", o="else", **common)]) + "\n")
            (tmp_path / data / f"block-0123-{name}.json").write_text(
                json.dumps({"test": f"tb/t.py::{name}", "top": "block"}))
    folded = tmp_path / "folded"
    # A run of another shape (not expected of one binary) and a run cut short.
    (folded / "block-0123-three.dat").write_text("# SystemC::Coverage-3\n" + point(
        7, l=if_line, t="branch", o="if", **common) + "\n")
    (folded / "block-0123-four.dat").write_text("")
    (folded / "block-0123-four.json").write_text(json.dumps({"test": "tb/t.py::four"}))
    merged = folded / f"block-0123-{hdl_coverage.MERGED}.dat"
    assert hdl_coverage.fold(folded / "block-0123-one.dat") == merged
    assert hdl_coverage.fold(folded / "block-0123-two.dat") == merged
    assert hdl_coverage.fold(folded / "block-0123-three.dat") == folded / "block-0123-three.dat"
    assert hdl_coverage.fold(folded / "block-0123-four.dat") is None
    assert sorted(f.name for f in folded.glob("*.dat")) == [
        "block-0123-merged.dat", "block-0123-three.dat"]
    assert not (folded / "block-0123-four.json").exists()
    assert [int(line.rsplit(" ", 1)[1]) for line in merged.read_text().splitlines()[1:]] == [3, 2]
    assert json.loads((folded / "block-0123-one.json").read_text())["folded_into"] == merged.name
    cov = hdl_coverage.collect(folded, root)
    (tmp_path / "apart" / "block-0123-three.dat").write_text((folded / "block-0123-three.dat")
                                                             .read_text())
    assert cov.lines == hdl_coverage.collect(tmp_path / "apart", root).lines
    assert cov.lines[("hdl/block.py", line_of("IF"))] == 10
    assert sorted(cov.runs) == [(f"tb/t.py::{n}", "block") for n in ("one", "three", "two")]


def test_scin_coverage_stops_on_a_stale_waiver_before_reading_data(tmp_path, capsys):
    """`scin coverage` checks the waivers first: a stale one is exit status 2 naming the line,
    even before it finds that there is no data to merge."""
    from scin.scripts.cli import main
    waivers = tmp_path / "w.toml"
    waivers.write_text("[waivers]\n'hdl/transport/credit_rx.py::CreditRx.elaborate::"
                       "with m.If(gone):' = \"a reason\"\n")
    assert main(["coverage", "--waivers", str(waivers), "--data", str(tmp_path / "none"),
                 "--doc", "-"]) == 2
    err = capsys.readouterr().err
    assert "CreditRx.elaborate" in err and "'with m.If(gone):'" in err
    assert "no coverage data" not in err
