"""Every block's generated Verilog is clean under `verilator --lint-only -Wall` (with the waivers
listed, each with its reason, in scripts/lint.py and docs/DEVELOPING.md) and passes Yosys
`check -assert` after `proc` (no multiple drivers, no used-but-undriven wire, no combinational
loop)."""

import pytest

from scin.hdl.packet import FabricParams
from scin.scripts.export import select_blocks
from scin.scripts.lint import lint_verilog, yosys_check
from scin.sim.runner import verilog_for


def _verilog(name):
    params = FabricParams()
    factory, _ = select_blocks([name])[name]
    return verilog_for(lambda: factory(params), name, repr(params))


@pytest.mark.parametrize("name", sorted(select_blocks()))
def test_block_lints_clean(name):
    ok, output = lint_verilog(_verilog(name), name)
    assert ok, output[-4000:]


@pytest.mark.parametrize("name", sorted(select_blocks()))
def test_block_passes_yosys_check(name):
    ok, output = yosys_check(_verilog(name), name)
    assert ok, output[-4000:]
