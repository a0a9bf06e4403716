"""cocotb side of ``scin allreduce``: runs inside the simulator, driven by files.

:mod:`scin.sim.allreduce` writes each endpoint's memory image as a ``$readmemh`` file and passes
a JSON plan in ``SCIN_TB_CONFIG``; the simulator loads the images at time 0 and dumps the result
regions when it ends (plusargs of ``hdl/endpoint/sim_ram.v``). This test loads the descriptor into
the ISA, makes every accelerator arrive at the barrier in the same cycle, waits for every
completion flag and writes ``timing.json``. Python touches the design only at the edges: the
All-Reduce itself runs in HDL, and Python looks at it every few dozen cycles.

With ``SCIN_BARE_CYCLES=N`` in the environment (``scin bench-sim``), Python does not look at all
for the first ``N`` cycles of each generation: one timer, so the simulator runs the model alone,
the measure of the bare model's speed. Results are checked as usual.
"""

import json
import os

import cocotb

from scin.hdl.codec import pack, unpack
from scin.hdl.endpoint.accelerator import AccOp, EventKind, command_layout, event_layout

from ..allreduce import traffic_seed
from ..push_program import push_commands
from .env import read_int, wait_cycles
from .isa_program import load_program
from .system_env import start_system, counters, switch_errors


def _start_generation(run, parts, generation):
    """Every participant arrives (or, in push mode, starts pushing its input) in the same cycle,
    then waits for its flag. With ordinary traffic, each endpoint also floods the next one with
    writes through the switch core between its arrival and its wait, so they race the collective
    on every link (the latency measured then includes that contention)."""
    plan, sp, cmds = run.plan, run.params, run.cmds
    cl, desc, n = command_layout(sp.fabric), plan["descriptor"], sp.fabric.ports
    for i in parts:
        if plan["pushed"]:
            cmds[i].send(*(pack(cl, c) for c in push_commands(sp.isa, desc, i, generation)))
        else:
            cmds[i].send(pack(cl, op=AccOp.ARRIVE, addr=desc["sync"], length=1, tag=generation))
    if plan["traffic"] and generation == 1:
        for i in range(n):
            for k in range(plan["traffic_bytes"] // 4096):
                cmds[i].send(pack(cl, op=AccOp.WRITE_REMOTE, dst=(i + 1) % n,
                                  addr=plan["scratch_addr"] + 4096 * k, length=4096,
                                  seed=traffic_seed(i, k), tag=0x100 + k))
    for i in parts:
        cmds[i].send(pack(cl, op=AccOp.WAIT_FLAG, addr=desc["flag_addr"], generation=generation))


async def _await_flags(dut, run, parts, generation):
    """Look at the event streams every 32 cycles until every participant's flag is seen and
    every command is done; ``(flags, sent)``: the FLAG event and the first SENT cycle of each
    participant. The cycle stamps come from the HDL, so Python only needs to look now and then."""
    el, events, cmds = event_layout(run.params.fabric), run.events, run.cmds
    flags, sent = {}, {}
    budget = run.plan["timeout_cycles"]
    bare = int(os.environ.get("SCIN_BARE_CYCLES", "0"))
    if bare:
        await wait_cycles(dut, bare)
    step = 32
    for cycle in range(0, budget, step):
        await wait_cycles(dut, step)
        for i in parts:
            while events[i].items:
                ev = unpack(el, events[i].items.pop(0))
                if ev["kind"] == EventKind.SENT.value and ev["tag"] == generation:
                    # The arrival left the endpoint; pushing, its first WRITE (the first SENT of
                    # the generation: docs/PERFORMANCE.md).
                    sent.setdefault(i, ev["cycle"])
                elif ev["kind"] == EventKind.FLAG.value:
                    flags[i] = ev
        if len(flags) == len(parts) and all(c.idle for c in cmds):
            return flags, sent
        if cycle % 100_000 < step and cycle:
            dut._log.info("cycle %d: %d of %d flags seen; ISA counters %s", cycle, len(flags),
                          len(parts), counters(dut))
    raise AssertionError(f"generation {generation}: only {len(flags)} of {len(parts)} "
                         f"completion flags after {budget} cycles; ISA counters {counters(dut)}")


@cocotb.test()
async def allreduce(dut):
    run = await start_system(dut)
    plan, sp, run_dir = run.plan, run.params, run.run_dir
    n = sp.fabric.ports

    # The program: one descriptor, replayed `replays` times.
    load_program(run.isa_load, sp.isa, [plan["descriptor"]])
    await run.isa_load.wait_idle()

    records = []
    if plan.get("trace"):
        from ..trace import trace_packets
        cocotb.start_soon(trace_packets(dut, sp.fabric, records))

    desc = plan["descriptor"]
    parts = [i for i in range(n) if desc["participants"] >> i & 1]
    timings = []
    for generation in range(1, plan["replays"] + 1):
        for e in run.events:
            e.items.clear()
        _start_generation(run, parts, generation)
        flags, sent = await _await_flags(dut, run, parts, generation)
        start_cycle = max(sent.values())
        end_cycle = max(ev["cycle"] for ev in flags.values())
        timings.append({
            "generation": generation, "start": start_cycle, "end": end_cycle,
            "cycles": end_cycle - start_cycle,
            "flags": {i: ev["value"] for i, ev in flags.items()},
            "flag_cycles": {i: ev["cycle"] - start_cycle for i, ev in flags.items()},
        })
        dut._log.info("generation %d: %d cycles", generation, end_cycle - start_cycle)
        # Let the last flag writes' acknowledgements settle so the counters are final.
        await wait_cycles(dut, 4 * sp.one_way_latency)

    (run_dir / "timing.json").write_text(json.dumps({
        "replays": timings, "counters": counters(dut),
        "switch_errors": switch_errors(dut, n),
        "rejected": [read_int(getattr(dut, f"rejected__{i}")) for i in range(n)],
        "trace": records,
    }, indent=1))
