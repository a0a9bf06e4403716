"""The `scin` command: help, parameter errors, Verilog export, synthesis JSON."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scin.scripts.cli import main


def run(*argv):
    """Run `scin` in a subprocess (as a user would) and return (exit code, stdout, stderr)."""
    result = subprocess.run([sys.executable, "-m", "scin.scripts.cli", *argv],
                            capture_output=True, text=True, timeout=1800)
    return result.returncode, result.stdout, result.stderr


def test_help_lists_every_command():
    code, out, _ = run("--help")
    assert code == 0
    for command in ("allreduce", "verilog", "synth", "lint"):
        assert command in out


@pytest.mark.parametrize("argv, message", [
    (["allreduce", "--size", "3B"], "size must be a positive even number of bytes"),
    (["allreduce", "--size", "4 parsecs"], "size must be a number of bytes with an optional unit"),
    (["allreduce", "--dtype", "int8", "--size", "64B"], "int8 needs whole 64-element blocks"),
    (["allreduce", "--endpoints", "9"], "endpoints must be between 2 and 8"),
    (["allreduce", "--outstanding", "3"], "waves must divide the 8 slots"),
    (["verilog", "--out", "/tmp/x", "--block", "nonesuch"], "unknown block"),
])
def test_bad_parameters_give_one_line_errors(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


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
        assert (q_in.dtype, q_in.shape, q_out.dtype, q_out.shape) == (np.int8, (64,), np.int8, (64,))
        assert (s_in.dtype, s_in.shape, s_out.dtype) == (np.float16, (1,), np.float16)
    # Every endpoint holds the same result.
    assert all((np.load(tmp_path / f"ep{i}_out.npy") == q_out).all() for i in range(4))


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
    assert sum(h["floor"] for h in hops) == hop_floor(90, 40, 256)
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
