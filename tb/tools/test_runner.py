"""The simulator build cache of ``sim/runner.py``: a build is keyed by what the simulator compiles
(the simulation Verilog, extra sources, toplevel, simulator and version, flags), not by the Python
that produced it. A tiny counter stands in for a real block, so nothing here needs a big build."""

import hashlib
import importlib.util

import cocotb
import pytest
from cocotb.triggers import ClockCycles

from scin.sim import hdl_coverage, runner
from scin.sim.testbench.env import start, read_int, tb_config, cocotb_module


#: A component written out as a module of its own, so a test can edit its comments.
COUNTER = '''\
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out


class Counter(wiring.Component):
    """Counts up by {step} every cycle. {comment}"""
    count: Out(8)

    def elaborate(self, platform):
        m = Module()
        # {comment}
        m.d.sync += self.count.eq(self.count + {step})
        return m
'''


def counter_verilog(tmp_path, step, comment):
    """Write the counter's source, import it and convert it with :func:`runner.verilog_for`,
    keyed (as ``hdl/`` is) by the hash of that source: a comment change is a new first-level
    entry, i.e. a new Verilog file."""
    source = COUNTER.format(step=step, comment=comment)
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    path = tmp_path / f"counter_{digest}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"counter_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return runner.verilog_for(module.Counter, "counter", digest)


@pytest.fixture
def build_root(tmp_path, monkeypatch):
    """A build tree of the test's own, so the first build here is always a real one, and the
    normal builds' caching (under ``make coverage`` the Verilog carries source lines, so a
    comment moves it, and coverage models are built apart: tb/tools/test_hdl_coverage.py)."""
    root = tmp_path / "build"
    monkeypatch.setattr(runner, "BUILD_ROOT", root)
    monkeypatch.delenv(hdl_coverage.ENV_VAR, raising=False)
    return root


def key_of(verilog, sim="verilator", flags=None, waves=False, version="v1"):
    flags = runner.build_flags(sim) if flags is None else flags
    return runner.build_key(sim, "counter", runner.simulation_sources(verilog, "counter"), flags,
                            waves=waves, version=version)


def test_key_follows_the_verilog_not_the_python(tmp_path, build_root):
    plain = counter_verilog(tmp_path, 1, "First wording.")
    reworded = counter_verilog(tmp_path, 1, "Second wording, longer.")
    other = counter_verilog(tmp_path, 3, "First wording.")
    # The comment change made a new Verilog file with the same text ...
    assert plain != reworded and plain.read_text() == reworded.read_text()
    # ... so the build key is the same: nothing recompiles.
    assert key_of(plain) == key_of(reworded)
    # A different design, a changed flag, tracing, another simulator version, another simulator
    # or another toplevel each get a build of their own.
    assert key_of(other) != key_of(plain)
    assert key_of(plain, flags=runner.build_flags("verilator") + ["-DEXTRA"]) != key_of(plain)
    assert key_of(plain, flags=runner.build_flags("verilator")[1:]) != key_of(plain)
    assert key_of(plain, waves=True) != key_of(plain)
    assert key_of(plain, version="v2") != key_of(plain)
    assert key_of(plain, sim="icarus") != key_of(plain)
    sources = runner.simulation_sources(plain, "counter")
    assert runner.build_key("verilator", "other", sources, [], version="v1") != \
        runner.build_key("verilator", "counter", sources, [], version="v1")


def test_verilog_cache_ignores_comments_and_docstrings_not_code():
    """The first-level key (:func:`runner.hdl_fingerprint`) hashes each ``hdl/`` file through
    :func:`runner.code_digest`: rewording a comment or a docstring, or re-indenting a call, keeps
    the converted Verilog; a change of code, of a name or of an ordinary string does not."""
    source = COUNTER.format(step=1, comment="First wording.")
    same = [COUNTER.format(step=1, comment="Another wording, longer."),
            '"""A module docstring."""\n' + source,
            source.replace("m = Module()", "m = Module()  # the module").replace("\n\n\n", "\n\n")]
    other = [COUNTER.format(step=2, comment="First wording."),
             source.replace("count: Out(8)", "total: Out(8)").replace("self.count", "self.total"),
             source.replace("m = Module()", "m = Module()\n        name = 'a string'")]
    digest = runner.code_digest(source)
    assert [runner.code_digest(s) for s in same] == [digest] * len(same)
    assert all(runner.code_digest(s) != digest for s in other)
    assert len(runner.hdl_fingerprint()) == 64


def test_key_covers_extra_sources_and_the_sim_variant(tmp_path, build_root):
    plain = counter_verilog(tmp_path, 1, "x")
    flags = runner.build_flags("verilator")
    sources = runner.simulation_sources(plain, "counter")
    # What is hashed is the simulation variant, the text the simulator reads.
    assert sources[0] == ("counter.v", runner.sim_variant(plain.read_text()))
    key = runner.build_key("verilator", "counter", sources, flags, version="v1")
    with_extra = sources + [("extra.v", "module extra; endmodule\n")]
    changed_extra = sources + [("extra.v", "module extra; wire w; endmodule\n")]
    assert runner.build_key("verilator", "counter", with_extra, flags, version="v1") != key
    assert runner.build_key("verilator", "counter", with_extra, flags, version="v1") != \
        runner.build_key("verilator", "counter", changed_extra, flags, version="v1")



def test_a_proof_edit_keeps_the_design_key_and_a_top_edit_changes_its_own(tmp_path):
    """The first-level key covers what a model is elaborated from: ``hdl/`` for a design top,
    and for a simulation top (sim/tops/) its own module as well. A proof (sim/formal/) is
    neither: an edit of it re-elaborates nothing; an edit of a simulation top re-elaborates the
    models built on it, and an edit of ``hdl/`` every model."""
    files = {"hdl/block.py": "X = 1\n", "hdl/catalog.py": "TOPS = []\n",
             "sim/formal/proof.py": "P = 1\n", "sim/tops/harness.py": "H = 1\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    harness = tmp_path / "sim" / "tops" / "harness.py"

    def keys():
        design = runner.hdl_digest(tmp_path)
        return (runner.verilog_key("block", "cfg", design),
                runner.verilog_key("harness", "cfg", design, runner.source_digest(harness)))

    block_key, harness_key = keys()
    assert runner.hdl_sources(tmp_path) == [tmp_path / "hdl" / "block.py"]
    (tmp_path / "sim" / "formal" / "proof.py").write_text("P = 2  # a stronger property\n")
    assert keys() == (block_key, harness_key)
    harness.write_text("H = 22\n")
    assert keys()[0] == block_key and keys()[1] != harness_key
    harness_key = keys()[1]
    (tmp_path / "hdl" / "block.py").write_text("X = 33\n")
    assert keys()[0] != block_key and keys()[1] != harness_key


def test_a_simulation_top_brings_its_module_into_the_key(build_root):
    """A top defined outside ``hdl/`` is refused without ``top_module`` (its edits would keep
    stale Verilog), and converted with it; the real tree's design key hashes nothing outside
    ``hdl/``."""
    from scin.hdl.packet import FabricParams
    from scin.sim.tops import fabric
    make = lambda: fabric.TransportPair(FabricParams(), credits=4, latency=2)
    with pytest.raises(ValueError, match="top_module=scin.sim.tops.fabric"):
        runner.verilog_for(make, "pair_top", "c4 l2")
    path = runner.verilog_for(make, "pair_top", "c4 l2", top_module=fabric)
    assert "module pair_top" in path.read_text()
    assert all(p.is_relative_to(runner.REPO_ROOT / "hdl") for p in runner.hdl_sources())
    assert not (runner.REPO_ROOT / "hdl" / "formal").exists()

@cocotb.test()
async def counter_counts(dut):
    """The counter adds its step every cycle (so the reused build is the right one)."""
    step = tb_config()["step"]
    await start(dut)
    first = read_int(dut.count)
    await ClockCycles(dut.clk, 5)
    assert read_int(dut.count) == (first + 5 * step) % 256


def test_comment_change_reuses_the_build(sim, tmp_path, build_root, monkeypatch):
    """A real (tiny) build on each simulator: the first run builds, a run on the Verilog of the
    comment-edited source builds nothing and runs in the same build directory."""
    from cocotb_tools.runner import Runner
    builds = []
    real_build = Runner.build

    def counting_build(self, *args, **kwargs):
        builds.append(kwargs["build_dir"])
        return real_build(self, *args, **kwargs)

    monkeypatch.setattr(Runner, "build", counting_build)
    for comment in ("First wording.", "Second wording."):
        verilog = counter_verilog(tmp_path, 1, comment)
        runner.run_cocotb(verilog_path=verilog, top="counter", test_module=cocotb_module(__file__),
                          sim=sim, testcase="counter_counts", config={"step": 1}, quiet=True)
    key = runner.build_key(sim, "counter", runner.simulation_sources(verilog, "counter"),
                           runner.build_flags(sim))
    assert builds == [runner.build_dir_for(sim, "counter", key)]
    assert (builds[0] / "built").exists() and (builds[0] / "src" / "counter.v").exists()


def test_runtime_objects_are_compiled_once_per_configuration(tmp_path, build_root):
    """Two different models built the same way: the first compiles Verilator's runtime objects and
    stores them, the second reuses them (``make`` leaves them alone), and both run correctly. A
    build with tracing is configured differently, so it compiles its own."""
    logs = []
    for step, waves in ((1, False), (3, False), (3, True)):
        verilog = counter_verilog(tmp_path, step, "x")
        runner.run_cocotb(verilog_path=verilog, top="counter", test_module=cocotb_module(__file__),
                          sim="verilator", testcase="counter_counts", config={"step": step},
                          waves=waves, quiet=True)
        key = runner.build_key("verilator", "counter",
                               runner.simulation_sources(verilog, "counter"),
                               runner.build_flags("verilator"), waves=waves)
        logs.append((runner.build_dir_for("verilator", "counter", key) / "build.log").read_text())
    names = ["verilated.o", "verilated_vpi.o", "verilated_threads.o"]
    assert "compiled here" in logs[0] and all(f"-o {n} " in logs[0] for n in names)
    assert "reused " + ", ".join(names) in logs[1]
    assert not any(f"-o {n} " in logs[1] for n in names), "make compiled a reused object again"
    assert "compiled here" in logs[2]
    stored = sorted(p.name for p in (build_root / "verilator").glob("runtime-*"))
    assert len(stored) == 2
    assert all((build_root / "verilator" / s / "stored").exists() for s in stored)
