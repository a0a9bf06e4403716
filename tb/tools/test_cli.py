"""The `scin` command: help, parameter errors, outputs, run folders, Verilog export, synthesis
JSON."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scin.scripts.cli import COMMANDS, CommandError, main


def run(*argv):
    """Run `scin` in a subprocess (as a user would) and return (exit code, stdout, stderr)."""
    result = subprocess.run([sys.executable, "-m", "scin.scripts.cli", *argv],
                            capture_output=True, text=True, timeout=1800)
    return result.returncode, result.stdout, result.stderr


def test_help_lists_every_command():
    """`scin --help` (the installed entry point's module, in a subprocess) lists every registered
    command with its one-line help."""
    code, out, _ = run("--help")
    assert code == 0
    assert len(COMMANDS) >= 11
    listed = re.sub(r"\s+", "", out)    # argparse re-flows the lines (and breaks at hyphens)
    for name, command in COMMANDS.items():
        assert re.search(rf"^    {re.escape(name)}\b", out, re.M), name
        assert re.sub(r"\s+", "", command.help) in listed, name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_answers_help(name, capsys):
    """`scin NAME --help` works for every registered command: it imports the command's module,
    adds its options and prints its usage and description."""
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert out.startswith(f"usage: scin {name} ")
    assert re.sub(r"\s+", "", COMMANDS[name].description) in re.sub(r"\s+", "", out)
    assert "--help" in out


def test_every_command_is_in_the_cli_doc():
    """docs/CLI.md's command table has one row per registered command, and no other."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "CLI.md").read_text()
    table = text[text.index("## Commands"):]
    table = table[:table.index("\n## ", 1)]
    rows = re.findall(r"^\| `scin ([a-z-]+)` \| `(\w+)` \|", table, re.M)
    assert rows == [(name, command.module) for name, command in COMMANDS.items()]


def test_unknown_command_is_a_usage_error():
    code, out, err = run("nonesuch")
    assert code == 2 and out == ""
    assert err.splitlines()[-1].startswith(
        "scin: error: argument COMMAND: invalid choice: 'nonesuch'")
    assert "Traceback" not in err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_rejects_a_bad_option_in_one_line(name, capsys):
    """An unknown option: one error line naming the command and the option, exit status 2, for
    every registered command."""
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--no-such-option", "1"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert re.fullmatch(rf"scin {re.escape(name)}: error: unrecognized arguments: "
                        rf"--no-such-option( 1)? \(see scin {re.escape(name)} --help\)\n", err)


def test_bad_option_value_is_one_line():
    code, out, err = run("allreduce", "--endpoints", "four")
    assert code == 2 and out == ""
    assert err == ("scin allreduce: error: argument --endpoints: must be an integer from 2 to 8, "
                   "not 'four' (see scin allreduce --help)\n")


def test_abbreviations_are_refused(capsys):
    """``--siz`` is not ``--size``: a prefix of an option is an unknown option."""
    with pytest.raises(SystemExit) as exit_info:
        main(["allreduce", "--siz", "4KiB"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --siz 4KiB" in capsys.readouterr().err


def test_version_comes_from_the_package_metadata(capsys):
    from importlib.metadata import version
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"scin {version('scin')}\n"


@pytest.mark.parametrize("exc, status, line", [
    (ValueError("bad value"), 2, "scin soak: error: bad value"),
    (RuntimeError("tool failed"), 2, "scin soak: error: tool failed"),
    (CommandError("wrong result", status=1), 1, "scin soak: error: wrong result"),
    (KeyboardInterrupt(), 130, "scin soak: interrupted"),
])
def test_registry_turns_failures_into_one_line_and_a_status(exc, status, line, monkeypatch, capsys):
    """Every command's run goes through the registry's error handling (here: soak's, replaced)."""
    from scin.scripts import soak

    def fail(args):
        assert args.argv == ["--count", "3"] and args.count == 3
        raise exc
    monkeypatch.setattr(soak, "run", fail)
    assert main(["soak", "--count", "3"]) == status
    assert capsys.readouterr().err == line + "\n"


def test_a_missing_option_is_one_line(capsys):
    assert main(["build"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("scin build: error: --board is required; "
                                               "valid boards: ")


@pytest.mark.parametrize("flit_width, flit_bytes", [(64, 8), (128, 16), (256, 32), (512, 64)])
def test_efficiency_uses_the_configured_flit_width(flit_width, flit_bytes):
    """Efficiency = size / (cycles x flit bytes of the configured fabric): a 64-bit-flit run moves
    8 bytes per cycle, not 32; the modelled link and the hop floor use the same width."""
    from scin.scripts.bench import efficiency, link_limit, link_model
    from scin.scripts.bench_allreduce import hop_floor
    from scin.sim.allreduce import CollectiveConfig
    cfg = CollectiveConfig.from_fields(size=4096, flit_width=flit_width)
    assert efficiency(cfg, 4096 // flit_bytes) == 1.0
    assert efficiency(cfg, 1000) == 4096 / (1000 * flit_bytes)
    assert link_model(cfg).flit_bytes == flit_bytes
    payload = 4096 // flit_bytes
    assert link_limit(link_model(cfg)) == (payload, payload / (payload + 1))
    assert hop_floor(90, 40, 4096, flit_bytes) == 4 * 90 + 40 + 4096 // flit_bytes + 1


def test_rewrite_section_replaces_only_its_section(tmp_path):
    from scin.scripts.docs_section import rewrite_section
    doc = tmp_path / "docs" / "PERF.md"
    assert rewrite_section(doc, "bench", "table 1", title="Perf") == \
        "<!-- bench:begin -->\ntable 1\n<!-- bench:end -->"
    assert doc.read_text() == "# Perf\n\n<!-- bench:begin -->\ntable 1\n<!-- bench:end -->\n"
    doc.write_text("# Perf\n\nintro\n\n<!-- bench:begin -->\nold\n<!-- bench:end -->\n\nnotes\n")
    rewrite_section(doc, "hops", "hop table")
    rewrite_section(doc, "bench", "table 2")
    assert doc.read_text() == ("# Perf\n\nintro\n\n"
                               "<!-- bench:begin -->\ntable 2\n<!-- bench:end -->\n\nnotes\n\n"
                               "<!-- hops:begin -->\nhop table\n<!-- hops:end -->\n")


@pytest.mark.parametrize("text", ["<!-- bench:begin -->\nno end\n",
                                  "<!-- bench:end -->\n<!-- bench:begin -->\n"])
def test_rewrite_section_refuses_unpaired_markers(tmp_path, text):
    from scin.scripts.docs_section import rewrite_section
    doc = tmp_path / "doc.md"
    doc.write_text(text)
    with pytest.raises(ValueError, match="'bench' section's markers are unpaired or out of order"):
        rewrite_section(doc, "bench", "new")
    assert doc.read_text() == text


def test_current_commit(tmp_path):
    from scin.scripts.docs_section import current_commit
    assert re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", current_commit())
    assert current_commit(cwd=tmp_path) == "unknown"


@pytest.mark.parametrize("argv, message", [
    (["allreduce", "--size", "3B"], "argument --size: must be an even number of bytes"),
    (["allreduce", "--size", "4 parsecs"],
     "argument --size: must be an even number of bytes with an optional unit"),
    (["allreduce", "--dtype", "int8", "--size", "64B"], "int8 needs whole 64-element blocks"),
    (["allreduce", "--endpoints", "9"], "argument --endpoints: must be an integer from 2 to 8"),
    (["allreduce", "--outstanding", "3"], "argument --outstanding: must divide the 8 slots"),
    (["verilog", "--out", "/tmp/x", "--block", "nonesuch"], "argument --block: invalid choice"),
    (["collective", "--op", "broadcast", "--root", "4"],
     "argument --root: must be a rank from 0 to 3, not 4"),
    (["collective", "--op", "allgather", "--root", "1"],
     "argument --root: applies to --op broadcast and reduce only, not allgather"),
    (["collective", "--op", "reduce-scatter", "--size", "48B"],
     "REDUCE_SCATTER shard of 24 elements is not a whole number of 32-byte flits"),
    (["collective", "--op", "barrier", "--in-place"], "a barrier moves no data"),
    (["collective", "--op", "allgather", "--size", "2KiB", "--trace", "--sim", "icarus"],
     "buffers are at most 4 KiB per rank"),
])
def test_bad_parameters_give_one_line_errors(argv, message, capsys):
    try:
        status = main(argv)
    except SystemExit as exc:       # an option's type refused the value (argparse)
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_verilog_writes_source_and_port_description(tmp_path):
    code, out, err = run("verilog", "--out", str(tmp_path), "--block", "credit_tx")
    assert code == 0, err
    assert "module credit_tx" in (tmp_path / "credit_tx.v").read_text()
    ports = json.loads((tmp_path / "credit_tx.ports.json").read_text())
    assert ports["top"] == "credit_tx" and ports["clock"] == "clk" and ports["reset"] == "rst"
    names = {p["name"]: p for p in ports["ports"]}
    assert names["clk"]["direction"] == "input" and names["clk"]["width"] == 1
    assert names["tx__payload"]["width"] == 256 + 1 + 2   # flit data, last, message class
    assert all(p["direction"] in ("input", "output") for p in ports["ports"])
    assert ports["params"]["flit_width"] == 256
    # Again, from the cache: the component is only described, and Amaranth says nothing of it.
    code, out, err = run("verilog", "--out", str(tmp_path), "--block", "credit_tx")
    assert code == 0 and "UnusedElaboratable" not in err, err


def test_synth_json_has_documented_keys():
    code, out, err = run("synth", "--target", "ice40", "--json", "--block", "credit_tx")
    assert code == 0, err
    report = json.loads(out)
    assert report["target"] == "ice40"
    assert set(report["modules"]) == {"credit_tx"}
    assert set(report["modules"]["credit_tx"]) == {"lut", "ff", "bram36", "dsp"}
    assert report["total"]["lut"] == report["modules"]["credit_tx"]["lut"] > 0


def test_synth_by_module_splits_the_hierarchy():
    """--by-module: one row per Amaranth submodule (its own cells), and they add up to the total;
    other targets are refused."""
    code, out, err = run("synth", "--json", "--by-module", "--block", "transport_port",
                         "--flit-width", "64")
    assert code == 0, err
    report = json.loads(out)
    assert report["flattened"] is False
    modules = report["modules"]
    assert {"transport_port", "transport_port.ctx", "transport_port.crx"} <= set(modules)
    assert any(name.startswith("transport_port.crx.queue") for name in modules)
    assert modules["transport_port.ctx"]["lut"] > 0
    for key in ("lut", "ff", "bram36", "dsp"):
        assert report["total"][key] == sum(r[key] for r in modules.values())
    code, out, err = run("synth", "--by-module", "--target", "ice40", "--block", "credit_tx")
    assert code != 0 and "--by-module is for --target xcup" in err


class _FakeYosysError(Exception):
    pass


def _fake_synth_one(block, ports, flit_width, target, cached_only=False):
    if block == "switch":
        raise _FakeYosysError("yosys exited with status 1")
    return {"block": block, "ports": ports, "flit_width": flit_width, "lut": 10, "ff": 20,
            "bram36": 0, "dsp": 0, "seconds": 0, "note": ""}


def test_resources_reports_a_failed_point_and_finishes_the_others(monkeypatch, capsys, tmp_path):
    """One point failing (here: a Yosys error while converting the switch) is reported with its
    name and the error; the other points still finish; nothing is written and the exit code is 2."""
    from scin.scripts import resources
    monkeypatch.setattr(resources, "_synth_one", _fake_synth_one)
    code = resources.main(["--paper", "--jobs", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "error: switch at 4 ports, 256-bit flits: _FakeYosysError: yosys exited" in err
    assert "[2/3] " in err and "1 point(s) failed (switch 4x256)" in err
    assert not (tmp_path / "RESOURCES.md").exists()


def test_allreduce_json_save_and_waves(tmp_path):
    """The main job's documented outputs: the JSON keys, the --save arrays (int8 with scales) and a
    waveform file whose path is reported. On Icarus, the smallest int8 message (one block)."""
    from scin.sim.runner import have_icarus
    if not have_icarus():
        pytest.skip("Icarus Verilog is not installed (apt-get install iverilog)")
    np = pytest.importorskip("numpy")
    code, out, err = run("allreduce", "--sim", "icarus", "--dtype", "int8", "--size", "128B",
                         "--seed", "5", "--json", "--save", str(tmp_path), "--waves")
    assert code == 0, err
    report = json.loads(out)
    for key in ("match", "endpoints", "dtype", "size_bytes", "elements", "cycles", "latency_us",
                "efficiency", "status"):
        assert key in report, key
    assert report["match"] is True and report["status"] == 0
    assert (report["dtype"], report["size_bytes"], report["elements"]) == ("int8", 128, 64)
    assert report["waveform"] and Path(report["waveform"]).stat().st_size > 0
    for i in range(4):
        q_in, q_out = np.load(tmp_path / f"ep{i}_in.npy"), np.load(tmp_path / f"ep{i}_out.npy")
        s_in, s_out = (np.load(tmp_path / f"ep{i}_in_scales.npy"),
                       np.load(tmp_path / f"ep{i}_out_scales.npy"))
        assert (q_in.dtype, q_in.shape, q_out.dtype, q_out.shape) == \
            (np.int8, (64,), np.int8, (64,))
        assert (s_in.dtype, s_in.shape, s_out.dtype) == (np.float16, (1,), np.float16)
    # Every endpoint holds the same result.
    assert all((np.load(tmp_path / f"ep{i}_out.npy") == q_out).all() for i in range(4))


def test_collective_json_and_save(tmp_path):
    """`scin collective`: the documented keys (op, root, in_place, bound_cycles), and --save's
    arrays for an in-place AllGather (each rank's result buffer holds all four shards). On Icarus,
    one flit per rank."""
    from scin.sim.runner import have_icarus
    if not have_icarus():
        pytest.skip("Icarus Verilog is not installed (apt-get install iverilog)")
    np = pytest.importorskip("numpy")
    code, out, err = run("collective", "--op", "allgather", "--in-place", "--sim", "icarus",
                         "--dtype", "bf16", "--size", "32B", "--json", "--save", str(tmp_path))
    assert code == 0, err
    report = json.loads(out)
    assert (report["op"], report["root"], report["in_place"], report["match"]) == \
        ("allgather", 0, True, True)
    # In place, each rank receives the other three shards: a bound of 3 x 32 B over 32 B/cycle.
    assert report["bound_cycles"] == 3 and report["efficiency"] == 3 / report["cycles"]
    ins = [np.load(tmp_path / f"ep{i}_in.npy") for i in range(4)]
    for i in range(4):
        out_i = np.load(tmp_path / f"ep{i}_out.npy")
        assert (out_i.dtype, out_i.shape) == (np.uint16, (64,))
        assert (out_i == np.concatenate(ins)).all()


def test_reduce_scatter_trace_follows_the_last_shard():
    """`--trace` of an operation with several packets per link (ReduceScatter: N shards up each
    one): the hops still add up to the latency, none beats its one-packet floor, and the path
    ends at the rank the last phase writes (rank 3)."""
    from scin.sim.runner import have_icarus
    from scin.sim.trace import HOP_NAMES
    if not have_icarus():
        pytest.skip("Icarus Verilog is not installed (apt-get install iverilog)")
    code, out, err = run("collective", "--op", "reduce-scatter", "--sim", "icarus", "--size", "64B",
                         "--trace", "--json")
    assert code == 0, err
    report = json.loads(out)
    hops = report["hops"]
    assert [h["hop"] for h in hops] == [name for name, _ in HOP_NAMES]
    assert sum(h["cycles"] for h in hops) == report["cycles"]
    assert sum(h["floor"] for h in hops) == 4 * 90 + 40 + 2 + 1
    assert all(h["cycles"] >= h["floor"] for h in hops), hops
    assert {h["hop"]: h["port"] for h in hops}["result write"] == 3


def test_allreduce_trace_breaks_the_latency_down_hop_by_hop():
    """`--trace`: the hops add up to the measured latency, their floors to the hop floor of the
    latency model (4 one-way trips + memory + one packet), and no hop beats its floor."""
    from scin.sim.runner import have_icarus
    from scin.scripts.bench_allreduce import hop_floor
    from scin.sim.trace import HOP_NAMES
    if not have_icarus():
        pytest.skip("Icarus Verilog is not installed (apt-get install iverilog)")
    code, out, err = run("allreduce", "--sim", "icarus", "--size", "256B", "--trace", "--json")
    assert code == 0, err
    report = json.loads(out)
    hops = report["hops"]
    assert [h["hop"] for h in hops] == [name for name, _ in HOP_NAMES]
    assert sum(h["cycles"] for h in hops) == report["cycles"]
    assert sum(h["floor"] for h in hops) == hop_floor(90, 40, 256, 32)
    assert all(h["cycles"] >= h["floor"] for h in hops), hops
    code, _, err = run("allreduce", "--size", "256B", "--trace")
    assert code == 2 and "trace needs the icarus simulator" in err and "Traceback" not in err


def test_bench_dry_run_lists_the_sweep_and_rejects_bad_parts():
    code, out, err = run("bench", "--dry-run", "--parts", "size,waves", "--dtypes", "fp16",
                         "--sizes", "4KiB,1MiB", "--waves", "1,16")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 4 and lines[0].startswith("[1/4]") and "'outstanding': 16" in lines[-1]
    code, _, err = run("bench", "--parts", "speed")
    assert code == 2 and "unknown part(s) speed" in err


def test_bench_op_part_lists_every_case_and_its_hop_trace():
    code, out, err = run("bench", "--dry-run", "--parts", "op", "--ops",
                         "allgather:in-place,reduce,barrier", "--op-sizes", "64B,1MiB",
                         "--root", "2")
    assert code == 0, err
    lines = out.splitlines()
    # Two sizes of each data op, one barrier, then one hop trace per case.
    assert [line.split("]")[0] for line in lines] == [f"[{k}/5" for k in range(1, 6)] + \
        [f"[hops {k}/3" for k in range(1, 4)]
    assert "'op': 'allgather', 'in_place': True" in lines[0] and "'root': 2" in lines[2]
    assert lines[5].endswith("allgather:in-place 64 B, icarus, traced")
    assert "reduce (root 2)" in lines[6]
    for bad in ("allgather:inplace", "scan", "barrier:in-place", "reduce:in-place:pairs",
                "allgather:pairs"):
        code, _, err = run("bench", "--dry-run", "--parts", "op", "--ops", bad)
        assert code == 2 and f"--ops: {bad!r} is not an operation" in err, err


def test_bench_pairs_case_builds_the_isa_with_gather_pairs_and_traces_nothing():
    """``allgather:in-place:pairs`` is the in-place AllGather on an ISA with ``gather_pairs``
    (its rows say so); it has no hop trace (pairs need whole 4 KiB pages)."""
    code, out, err = run("bench", "--dry-run", "--parts", "op", "--ops",
                         "allgather:in-place,allgather:in-place:pairs", "--op-sizes", "1MiB")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 3 and lines[2].startswith("[hops 1/1]"), lines
    assert "'gather_pairs': False" in lines[0] and "'gather_pairs': True" in lines[1], lines


def test_bench_efficiency_is_against_each_operations_bound():
    from scin.scripts.bench import efficiency
    from scin.sim.allreduce import CollectiveConfig
    assert efficiency(CollectiveConfig(size=1 << 20), 33718) == (1 << 20) / (33718 * 32)
    assert efficiency(CollectiveConfig(op="reduce-scatter", size=1 << 18), 33718) == \
        (1 << 20) / (33718 * 32)
    assert efficiency(CollectiveConfig(op="allgather", in_place=True, size=1 << 18), 100) == \
        3 * (1 << 18) / (100 * 32)
    assert efficiency(CollectiveConfig(op="barrier"), 197) is None


def test_bench_reads_a_csv_from_before_the_op_axis_as_allreduce_rows(tmp_path):
    from scin.scripts.bench import read_csv, merge_rows
    path = tmp_path / "bench.csv"
    path.write_text("part,dtype,size,endpoints,capacity,waves,cycles\nsize,fp16,64,4,32768,8,442\n")
    old = read_csv(path)
    assert old[0]["op"] == "allreduce" and old[0]["in_place"] == 0 and old[0]["cycles"] == 442
    new = [dict(old[0], part="op", cycles=442), dict(old[0], cycles=441)]
    merged = merge_rows(old, new)
    # The size row is redone by the new size row; the op row is a row of its own.
    assert [(r["part"], r["cycles"]) for r in merged] == [("size", 441), ("op", 442)]


def test_an_output_is_replaced_whole_or_not_at_all(tmp_path):
    """``replacing``: a failure while writing leaves the previous file and no temporary file."""
    from scin.scripts.outputs import replacing, write_text
    target = tmp_path / "t.csv"
    write_text(target, "old\n")
    with pytest.raises(RuntimeError):
        with replacing(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["t.csv"]
    write_text(target, "new\n")
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["t.csv"]


def test_old_run_folders_are_pruned_to_the_newest(tmp_path):
    """``prune_runs``: the newest ``keep`` folders stay, and so does any changed recently."""
    from scin.sim.system_run import prune_runs
    now = time.time()
    for k in range(5):
        (tmp_path / f"run{k}").mkdir()
        os.utime(tmp_path / f"run{k}", (now - 7200 + k, now - 7200 + k))
    removed = prune_runs(keep=2, min_age=3600, root=tmp_path)
    assert sorted(p.name for p in removed) == ["run0", "run1", "run2"]
    assert sorted(os.listdir(tmp_path)) == ["run3", "run4"]
    (tmp_path / "fresh").mkdir()
    assert sorted(p.name for p in prune_runs(keep=0, min_age=3600, root=tmp_path)) == \
        ["run3", "run4"]
    assert os.listdir(tmp_path) == ["fresh"]


def test_a_passing_run_folder_is_removed_unless_kept(tmp_path, monkeypatch, capsys):
    """`scin allreduce` removes a passing run's folder; `--keep` keeps it (the simulation is
    replaced by a report naming a folder of a stand-in runs root)."""
    import scin.sim.allreduce as sim_allreduce
    from scin.sim import system_run
    monkeypatch.setattr(system_run, "RUNS_ROOT", tmp_path)

    def fake_run(cfg, save=None, waves=False, log=print):
        run_dir = tmp_path / f"allreduce-{len(os.listdir(tmp_path))}"
        run_dir.mkdir()
        return {"match": True, "status": 0, "expected_status": 0, "run_dir": str(run_dir)}
    monkeypatch.setattr(sim_allreduce, "run_allreduce", fake_run)
    assert main(["allreduce", "--json"]) == 0
    assert os.listdir(tmp_path) == []
    assert main(["allreduce", "--json", "--keep"]) == 0
    assert os.listdir(tmp_path) == ["allreduce-0"]


def test_clean_removes_runs_and_outputs_and_keeps_the_models(tmp_path):
    """`scin clean` on a stand-in build folder: runs/ and out/ go, every model folder stays."""
    build, out = tmp_path / ".build", tmp_path / "out"
    for folder in ("runs/allreduce-1", "verilator/system-1", "icarus/system-1", "verilog",
                   "synth/x"):
        (build / folder).mkdir(parents=True)
        (build / folder / "file").write_text("x" * 100)
    (out / "bench").mkdir(parents=True)
    (out / "bench" / "bench.csv").write_text("a\n")
    env = {**os.environ, "SCIN_BUILD_DIR": str(build), "SCIN_OUT_DIR": str(out)}
    scin = [sys.executable, "-m", "scin.scripts.cli"]
    dry = subprocess.run([*scin, "clean", "--dry-run"], env=env, capture_output=True, text=True)
    assert dry.returncode == 0 and "would remove" in dry.stdout and (build / "runs").exists()
    done = subprocess.run([*scin, "clean"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not (build / "runs").exists() and not out.exists()
    assert sorted(os.listdir(build)) == ["icarus", "synth", "verilator", "verilog"]
    assert (build / "verilator" / "system-1" / "file").exists()
