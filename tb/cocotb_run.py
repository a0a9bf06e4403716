"""Elaborate, build and run a cocotb bench in one call (shared by the block and system tests).

Every simulator test does the same three steps: the Verilog of a component (cached by its key,
:func:`~scin.sim.runner.verilog_for`), its simulator build (cached by what it compiles) and a run
of the cocotb tests of the test file itself (:func:`~scin.sim.runner.run_cocotb`).
:func:`run_block` is those steps; :func:`run_isa` the same for the ISA, which many files test.
"""

from scin.sim.runner import run_cocotb, verilog_for
from scin.sim.testbench.env import cocotb_module

__all__ = ["run_block", "run_isa"]


def run_block(test_file, sim, top, make, key, *, top_module=None, **run):
    """Run the cocotb tests of ``test_file`` (a test module's ``__file__``) on ``sim`` against
    ``make()`` elaborated as ``top``; ``key`` names its configuration (two equal keys share one
    Verilog and one build), ``top_module`` is the module of a simulation top outside ``hdl/``
    (:func:`~scin.sim.runner.verilog_for`), ``run`` the other arguments of
    :func:`~scin.sim.runner.run_cocotb` (``testcase``, ``config``, ...)."""
    path = verilog_for(make, top, key, top_module=top_module)
    return run_cocotb(verilog_path=path, top=top, test_module=cocotb_module(test_file), sim=sim,
                      **run)


def run_isa(test_file, sim, params, **run):
    """:func:`run_block` on the ISA of :class:`~scin.hdl.isa.IsaParams` ``params``."""
    from scin.hdl.isa import Isa
    return run_block(test_file, sim, "isa", lambda: Isa(params), repr(params), **run)
