"""The simulation environment of every cocotb test: clock and reset, the configuration the runner
passed, seeded randomness, reading a signal as an integer, and a test module's importable name.

Randomness comes from :func:`tb_rng`, which logs its seed so a failure can be replayed with
``SCIN_SEED=<seed>``.
"""

import json
import os
import random
from pathlib import Path

from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer
from cocotb.types import Logic
from cocotb.utils import get_sim_steps, get_sim_time

# The prototype's fabric clock period: re-exported for the benches that turn time into cycles.
from ...hdl.paper import CLOCK_PERIOD_NS
from ..progress import note_cycles


__all__ = ["CLOCK_PERIOD_NS", "tb_config", "tb_rng", "start", "wait_cycles", "report_progress",
           "read_int", "cocotb_module"]

#: The folder holding hdl/, sim/, tb/, ...: each is a subpackage of ``scin`` (pyproject.toml).
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
#: Where :func:`wait_cycles` notes the cycle reached (:func:`report_progress`), or None.
_progress_dir = None


def tb_config():
    """The configuration the pytest runner passed in ``SCIN_TB_CONFIG`` (a dict)."""
    return json.loads(os.environ.get("SCIN_TB_CONFIG", "{}"))


def tb_rng(dut, salt=""):
    """A :class:`random.Random` seeded from ``SCIN_SEED`` (or cocotb's random seed), logged."""
    base = os.environ.get("SCIN_SEED") or os.environ.get("COCOTB_RANDOM_SEED") or "1"
    seed = f"{base}:{salt}" if salt else base
    dut._log.info("random seed %r (replay with SCIN_SEED=%s)", seed, base)
    return random.Random(seed)


async def start(dut, reset_cycles=4):
    """Start the prototype's fabric clock (:data:`~scin.hdl.paper.CLOCK_PERIOD_NS`) on ``clk`` and
    hold ``rst`` for ``reset_cycles`` cycles.

    The clock is cocotb's GPI clock (toggled in C by the simulator interface): the Python clock
    runs two Python callbacks per cycle, which a long simulation spends most of its time in."""
    # Low for the first half period: a rising edge at time 0 would come before the simulator's
    # initial values and the drivers made before this call (cocotbext-axi's) have settled, and
    # a monitor sampling at it would read Z.
    Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns", impl="gpi").start(start_high=False)
    dut.rst.value = 1
    # Edge by edge: the clock's first rising edge counts as the first of the reset.
    await ClockCycles(dut.clk, reset_cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


async def wait_cycles(dut, n):
    """Wait for the ``n``-th rising edge of ``dut.clk`` from now (none for ``n`` = 0), like
    ``ClockCycles(dut.clk, n)`` but with one timer and one edge instead of a Python callback per
    edge. The clock must be the one :func:`start` runs (high from each rising edge to the next
    falling one).

    The timer ends half a period away from any rising edge, so the edge awaited after it is the
    ``n``-th whatever order the simulator runs callbacks of one time step in: called while ``clk``
    is high (from the rising edge to the falling one), it ends ``n - 1`` periods and a half later;
    called while ``clk`` is low, ``n - 1`` periods later."""
    if n < 0:
        raise ValueError(f"wait_cycles: n must be at least 0, not {n}")
    if n == 0:
        return
    period = get_sim_steps(CLOCK_PERIOD_NS, "ns")
    steps = (n - 1) * period + (period // 2 if int(dut.clk.value) else 0)
    if steps:
        await Timer(steps, unit="step")
    await RisingEdge(dut.clk)
    if _progress_dir is not None:
        note_cycles(_progress_dir, get_sim_time("ns") // CLOCK_PERIOD_NS)


def report_progress(run_dir):
    """Make every later :func:`wait_cycles` note the cycle reached in ``run_dir`` (at most every
    two seconds of wall time; :func:`scin.sim.progress.note_cycles`), for the CLI to show."""
    global _progress_dir
    _progress_dir = run_dir


def read_int(handle):
    """The value of a signal as an unsigned integer; fails loudly on X or Z."""
    value = handle.value
    if not value.is_resolvable:
        raise AssertionError(f"{handle._name} is {value} (X or Z)")
    return int(value) if isinstance(value, Logic) else value.to_unsigned()


def cocotb_module(file):
    """The importable name of a module file of the package (``scin.tb.test_isa`` for
    ``tb/block/test_isa.py``), for ``run_cocotb``: pytest may import a test file under another
    name."""
    parts = Path(file).resolve().relative_to(_PACKAGE_ROOT).with_suffix("").parts
    return ".".join(("scin", *parts))
