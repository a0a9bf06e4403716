"""Waveforms in a window of cycles (sim/waves.py): FST on Icarus, VCD on Verilator, written where
the run says, holding the window and nothing else. A small transport pair is recorded while its
clock runs; the VCD filter is also checked on a synthetic trace."""

import re
import threading

import cocotb
import pytest

from scin.hdl.packet import FabricParams
from scin.sim import waves as waves_mod
from scin.sim.runner import run_cocotb, verilog_for
from scin.sim.testbench.env import CLOCK_PERIOD_NS, cocotb_module, start, wait_cycles
from scin.sim.tops import fabric
from scin.sim.waves import VcdWindow, Waves, parse_window

PARAMS = FabricParams(flit_width=64, addr_width=16, tag_width=8, max_payload=1024)
PS = round(CLOCK_PERIOD_NS * 1000)


@cocotb.test()
async def run_clock(dut):
    """Reset, then 200 cycles of the clock: something to record."""
    await start(dut)
    await wait_cycles(dut, 200)


def test_parse_window():
    assert parse_window("100:300") == Waves(100, 200)
    assert parse_window("100:") == Waves(100, None)
    assert parse_window(":50") == Waves(0, 50)
    for bad in ("100", "a:b", "300:100", "-5:10"):
        with pytest.raises(ValueError):
            parse_window(bad)
    assert Waves(5, 10).describe() == "cycles 5 to 14"


VCD = """$timescale 1ps $end
$scope module top $end
$var wire 1 ! clk $end
$var wire 4 " cnt [3:0] $end
$upscope $end
$enddefinitions $end
#0
$dumpvars
0!
b0000 "
$end
#2000
1!
b0001 "
#4000
0!
#6000
1!
b0010 "
#8000
0!
#10000
1!
b0011 "
"""


def _through_pipe(tmp_path, text, window):
    pipe, out = tmp_path / "p", tmp_path / "out.vcd"
    with VcdWindow(pipe, out, window):
        def write():
            with open(pipe, "w") as f:
                f.write(text)
        writer = threading.Thread(target=write)
        writer.start()
        writer.join()
    return out.read_text()


def test_vcd_window_keeps_the_header_the_start_values_and_the_window(tmp_path):
    window = Waves(1, 2)          # with a 4 ns cycle: 4000 ps to 12000 ps
    window = Waves(0, 1) if PS != 4000 else window
    out = _through_pipe(tmp_path, VCD, window)
    first, end = window.window_ps
    head, body = out.split("$enddefinitions $end\n")
    assert "$var wire 4 \" cnt" in head
    times = [int(t) for t in re.findall(r"^#(\d+)$", body, re.M)]
    assert times and all(first <= t < end for t in times)
    if PS == 4000:
        assert body.startswith("#4000\n$dumpvars\n1!\nb0001 \"\n$end\n")


def test_vcd_window_lets_a_silent_writer_go(tmp_path):
    """A simulator that fails before opening the pipe does not hang the run."""
    with VcdWindow(tmp_path / "p", tmp_path / "out.vcd", Waves()):
        pass
    assert (tmp_path / "out.vcd").read_text() == ""


def _record(sim, tmp_path, window):
    top = "transport_pair"
    v = verilog_for(lambda: fabric.TransportPair(PARAMS, credits=4, latency=3), top,
                    f"{PARAMS!r} credits=4 latency=3", top_module=fabric)
    run_dir = tmp_path / f"run-{window.start}"
    lines = []
    run_cocotb(verilog_path=v, top=top, test_module=cocotb_module(__file__), sim=sim,
               testcase="run_clock", waves=window, test_dir=run_dir, quiet=True,
               log=lines.append)
    path = window.path(run_dir, top, sim)
    assert any(str(path) in line and "recording" in line for line in lines)
    return path


def test_waves_in_a_window(sim, tmp_path):
    whole = _record(sim, tmp_path, Waves(0, None))
    part = _record(sim, tmp_path, Waves(100, 20))
    assert whole.suffix == (".fst" if sim == "icarus" else ".vcd")
    assert part.stat().st_size < whole.stat().st_size
    if sim == "verilator":
        body = part.read_text().split("$enddefinitions")[1]
        times = [int(t) for t in re.findall(r"^#(\d+)$", body, re.M)]
        assert times and min(times) >= 100 * PS and max(times) < 120 * PS
    else:
        assert part.read_bytes()[:1] == b"\x00"      # an FST file starts with its header block
    assert waves_mod.VIEWER
