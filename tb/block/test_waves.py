"""Waveforms in a window of cycles (sim/waves.py): FST on both simulators, written where the run
says, holding the window and nothing else. A small transport pair is recorded while its clock runs
and an input counts cycles; Verilator's FST is read back (pywellen, an FST and VCD reader of its
own) and checked against the same run recorded as VCD. The VCD-to-FST program and the VCD filter
are also checked on a synthetic trace."""

import re
import threading

import cocotb
import pytest
import pywellen
from cocotb.triggers import RisingEdge

from scin.hdl.packet import FabricParams
from scin.sim import waves as waves_mod
from scin.sim.runner import run_cocotb, verilog_for
from scin.sim.testbench.env import CLOCK_PERIOD_NS, cocotb_module, start
from scin.sim.tops import fabric
from scin.sim.waves import FstWindow, VcdWindow, Waves, fst_filter, parse_window

PARAMS = FabricParams(flit_width=64, addr_width=16, tag_width=8, max_payload=1024)
PS = round(CLOCK_PERIOD_NS * 1000)
#: The input the testbench counts cycles on: 65 bits, so the FST holds a value wider than a word.
COUNTER = "a_tx__1__payload"
TOP_BIT = 1 << 64


@cocotb.test()
async def run_clock(dut):
    """Reset, then 200 cycles of the clock, with :data:`COUNTER` set to the cycle's number (and
    its top bit) after each rising edge: something to record whose values are known."""
    await start(dut)
    getattr(dut, COUNTER.replace("payload", "valid")).value = 0
    for cycle in range(200):
        getattr(dut, COUNTER).value = TOP_BIT | cycle
        await RisingEdge(dut.clk)


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


def _through_fst(tmp_path, text, window, name="out.fst"):
    program, why = fst_filter()
    assert program is not None, why
    pipe, out = tmp_path / "p", tmp_path / name
    with FstWindow(pipe, out, window, program):
        writer = threading.Thread(target=lambda: pipe.write_text(text))
        writer.start()
        writer.join()
    return out


def _values(path):
    """``{full name: Signal}`` of the waveform at ``path`` (FST or VCD) and the times at which
    something changes in it."""
    wave = pywellen.Waveform(str(path))
    steps = set()
    wave.stream_changes(lambda time, _signal, _value: steps.add(time), list(wave.all_vars()))
    return {v.full_name: v.signal for v in wave.all_vars()}, sorted(steps)


WIDE_VCD = """$timescale 1ps $end
$scope module top $end
$var wire 1 ! clk $end
$var wire 70 " wide [69:0] $end
$var real 64 # r $end
$scope module inner $end
$var wire 70 " wide_too [69:0] $end
$upscope $end
$upscope $end
$enddefinitions $end
#0
0!
b11 "
r0.5 #
#3000
1!
b1000000000000000000000000000000000000000000000000000000000000000000101 "
#5000
0!
r2.25 #
#7000
1!
b0 "
#9000
0!
"""


def test_fst_window_holds_the_values_at_its_start_and_its_changes(tmp_path):
    """Cut between two time steps: the values of 3000 ps hold at 4000 ps; the changes of 5000 and
    7000 follow; 9000 is past the window. A 70-bit vector, a real and a second name of a
    signal come through."""
    signals, steps = _values(_through_fst(tmp_path, WIDE_VCD, Waves(1, 1) if PS == 4000
                                          else Waves(0, None)))
    if PS != 4000:
        return
    assert steps == [4000, 5000, 7000]
    wide = (1 << 69) | 5
    assert [signals["top.wide"].value_at(t) for t in steps] == [wide, wide, 0]
    assert [signals["top.inner.wide_too"].value_at(t) for t in steps] == [wide, wide, 0]
    assert [signals["top.clk"].value_at(t) for t in steps] == [1, 0, 1]
    assert [signals["top.r"].value_at(t) for t in steps] == [0.5, 2.25, 2.25]


def test_fst_window_from_a_time_step_to_the_end(tmp_path):
    """A window starting on a time step holds that step's changes; without an end it runs to
    the end of the trace."""
    signals, steps = _values(_through_fst(tmp_path, WIDE_VCD, Waves(0, None)))
    assert steps == [0, 3000, 5000, 7000, 9000]
    assert signals["top.wide"].value_at(0) == 3
    assert signals["top.clk"].value_at(9000) == 0


NS_VCD = """$date
   today
$end
$timescale
   1 ns
$end
$scope module top $end
$var wire 8 !! byte [7:0] $end
$var wire 1 %# bit $end
$upscope $end
$enddefinitions $end
#0
b101 !!
0%#
#3
b110 !!
#6
1%#
#9
b0 !!
"""


def test_fst_window_reads_blocks_over_lines_long_codes_and_other_timescales(tmp_path):
    """A header with blocks spread over lines, identifier codes of two characters and a unit of
    1 ns: the window (in ps) is converted to it, and the FST keeps it."""
    window = Waves(1, 1)
    first, end = window.window_ps
    signals, steps = _values(_through_fst(tmp_path, NS_VCD, window))
    wave = pywellen.Waveform(str(tmp_path / "out.fst"))
    assert (wave.timescale.factor, str(wave.timescale.unit)) == (1, "ns")
    times = [t for t in (0, 3, 6, 9) if first <= t * 1000 < end]
    assert steps == sorted({first // 1000, *times})
    assert signals["top.byte"].value_at(steps[0]) == (0b110 if first >= 3000 else 0b101)


def test_fst_window_lets_a_silent_writer_go(tmp_path):
    """A simulator that fails before opening the pipe does not hang the run, and no file is
    written."""
    program, why = fst_filter()
    assert program is not None, why
    with FstWindow(tmp_path / "p", tmp_path / "out.fst", Waves(), program):
        pass
    assert not (tmp_path / "out.fst").exists()


def test_fst_window_says_why_it_failed(tmp_path):
    with pytest.raises(RuntimeError, match="ended inside its header"):
        _through_fst(tmp_path, "$timescale 1ps $end\n$scope module top $end\n", Waves())


def _record(sim, tmp_path, window, name):
    top = "transport_pair"
    v = verilog_for(lambda: fabric.TransportPair(PARAMS, credits=4, latency=3), top,
                    f"{PARAMS!r} credits=4 latency=3", top_module=fabric)
    run_dir = tmp_path / name
    lines = []
    run_cocotb(verilog_path=v, top=top, test_module=cocotb_module(__file__), sim=sim,
               testcase="run_clock", waves=window, test_dir=run_dir, quiet=True,
               log=lines.append)
    said = [line for line in lines if line.startswith("recording")]
    assert len(said) == 1, lines
    path = run_dir / said[0].rsplit(" into ", 1)[1].rsplit("/", 1)[1]
    assert said[0].endswith(str(path)) and path.exists()
    return path


def test_waves_in_a_window(sim, tmp_path):
    whole = _record(sim, tmp_path, Waves(0, None), "whole")
    part = _record(sim, tmp_path, Waves(100, 20), "part")
    assert whole.suffix == part.suffix == ".fst"
    assert part.stat().st_size < whole.stat().st_size
    signals, steps = _values(part)
    # Every time step is inside the window, and the first is the window's start (its values);
    # Icarus's $dumpoff adds one at the window's end, where every signal turns x.
    assert steps[0] == 100 * PS
    assert steps[-1] < 120 * PS or (sim == "icarus" and steps[-2] < steps[-1] == 120 * PS)
    counter = signals[f"transport_pair.{COUNTER}"]
    counts = [counter.value_at(t) for t in range(100 * PS, 120 * PS, PS)]
    # One count a cycle, the top bit (beyond the first 64) set throughout.
    assert all(c & TOP_BIT for c in counts)
    assert [c - counts[0] for c in counts] == list(range(20))
    assert waves_mod.VIEWER


def test_verilator_fst_matches_its_vcd(tmp_path, monkeypatch, capfd):
    """The window in FST holds, at each of its time steps, the value of every signal of the
    whole run traced as VCD (the fallback where vcd_fst cannot be compiled, which says so)."""
    part = _record("verilator", tmp_path, Waves(100, 20), "part")
    monkeypatch.setattr(waves_mod, "fst_filter", lambda: (None, "a test asks for VCD"))
    whole = _record("verilator", tmp_path, Waves(0, None), "whole")
    assert whole.suffix == ".vcd"
    assert "Verilator records VCD, not FST: a test asks for VCD" in capfd.readouterr().err
    got, steps = _values(part)
    want, _ = _values(whole)
    assert set(got) == set(want) and len(got) > 50
    for name, signal in want.items():
        assert [got[name].value_at(t) for t in steps] == [signal.value_at(t) for t in steps], name
