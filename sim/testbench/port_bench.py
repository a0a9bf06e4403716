"""cocotb side of ``scin bench-port``: runs inside the simulator on ``PortBench``
(``sim/tops/fabric.py``); ``scripts/bench_port.py`` builds it, runs it and writes the report.

After ``warmup`` cycles with the traffic generators enabled, it reads the HDL's flit counters at
the start and the end of ``runs`` windows of ``window`` cycles (no per-cycle Python) and writes
the per-window counts to the JSON file ``out`` of the configuration.
"""

import json
from pathlib import Path

import cocotb

from .env import start, tb_config, read_int, wait_cycles


@cocotb.test()
async def bench_port(dut):
    cfg = tb_config()
    await start(dut)
    dut.enable.value = 1
    await wait_cycles(dut, cfg["warmup"])
    windows = []
    for _ in range(cfg["runs"]):
        c0, i0, k0 = read_int(dut.cycles), read_int(dut.isa_flits), read_int(dut.core_flits)
        await wait_cycles(dut, cfg["window"])
        c1, i1, k1 = read_int(dut.cycles), read_int(dut.isa_flits), read_int(dut.core_flits)
        windows.append({"cycles": c1 - c0, "isa": i1 - i0, "core": k1 - k0})
    assert read_int(dut.errors) == 0, "transport error or dropped packet during the benchmark"
    Path(cfg["out"]).write_text(json.dumps(windows))
