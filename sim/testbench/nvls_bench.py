"""cocotb side of :func:`scin.sim.nvls_run.run_program`: the system with the NVLS engine, driven by
a plan of accelerator commands.

Loads the multicast table, queues every endpoint's commands at once (they run from the same
cycle), collects every event until each endpoint has reported the number of non-SENT events the
plan expects, and writes ``events.json`` (events, the engine's and the ISA's counters, the switch
ports' error words). Python looks at the design every few dozen cycles; the event cycles come from
the HDL.
"""

import json
from pathlib import Path

import cocotb

from scin.hdl.codec import unpack
from scin.hdl.endpoint.accelerator import EventKind, event_layout
from scin.hdl.nvls.params import nvls_counters_layout

from ..system_config import SystemConfig
from .env import tb_config, start, read_int, report_progress, wait_cycles
from .isa_program import load_program
from .system_env import accelerator_streams, counters, switch_errors
from .streams import StreamSource


@cocotb.test()
async def nvls_program(dut):
    plan = tb_config()
    params = SystemConfig.from_json(plan["hw"]).params()
    n = params.fabric.ports
    cmds, events, isa_load = accelerator_streams(dut, n)
    mc_load = StreamSource(dut, "mc_load")
    report_progress(plan["run_dir"])
    await start(dut)
    mc_load.send(*plan["mc_load"])
    if plan["descriptors"]:
        load_program(isa_load, params.isa, plan["descriptors"])
    await mc_load.wait_idle()
    await isa_load.wait_idle()

    el = event_layout(params.fabric)
    expect = {int(i): k for i, k in plan["expect"].items()}
    for i, words in plan["commands"].items():
        cmds[int(i)].send(*words)
    got = {i: [] for i in range(n)}
    done = {i: 0 for i in range(n)}
    step = 32
    budget = plan["timeout_cycles"]
    for cycle in range(0, budget, step):
        await wait_cycles(dut, step)
        for i in range(n):
            while events[i].items:
                ev = unpack(el, events[i].items.pop(0))
                got[i].append(ev)
                done[i] += ev["kind"] != EventKind.SENT.value
        if all(done[i] >= k for i, k in expect.items()):
            break
        if cycle % 100_000 < step and cycle:
            dut._log.info("cycle %d: events %s of %s", cycle, done, expect)
    else:
        raise AssertionError(f"only {done} of the expected events {expect} after {budget} cycles; "
                             f"NVLS counters {nvls_counters(dut)}")
    # Let stray responses settle so the counters are final.
    await wait_cycles(dut, 4 * params.one_way_latency)
    (Path(plan["run_dir"]) / "events.json").write_text(json.dumps({
        "events": got, "nvls_counters": nvls_counters(dut), "counters": counters(dut),
        "switch_errors": switch_errors(dut, n)}, indent=1))


def nvls_counters(dut):
    return unpack(nvls_counters_layout(), read_int(dut.nvls_counters))
