"""Every block's generated Verilog is clean under `verilator --lint-only -Wall` (with the waivers
listed, each with its reason, in scripts/lint.py and docs/DEVELOPING.md)."""

import pytest

from scin.hdl.packet import FabricParams
from scin.scripts.export import select_blocks
from scin.scripts.lint import lint_verilog
from scin.sim.runner import verilog_for


@pytest.mark.parametrize("name", sorted(select_blocks()))
def test_block_lints_clean(name):
    params = FabricParams()
    factory, _ = select_blocks([name])[name]
    path = verilog_for(lambda: factory(params), name, repr(params))
    ok, output = lint_verilog(path, name)
    assert ok, output[-4000:]
