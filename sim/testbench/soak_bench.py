"""cocotb side of ``scin soak``: runs the plan of :mod:`scin.sim.soak` inside the simulator.

The collectives run in batches of up to ``sync_resources`` descriptors: the batch is loaded into
the ISA (each descriptor on the sync resource the plan gives it), then every endpoint works
through the batch in program order: for each collective it belongs to, it stalls for its drawn
number of cycles, arrives (or, for a pushed collective, pushes its input into the ISA's space:
:func:`~scin.sim.push_program.push_commands`), sends its ordinary writes (which race the
collective through the switch) and waits for its completion flag. A PUSH descriptor that cannot
push has no barrier (its ERROR flags come at once): its members only send their ordinary writes.
A batch ends when every endpoint is through it and the ISA has completed each of its descriptors
(``collectives``), so every flag is written before the next program is loaded. Python sleeps
between looks at the event streams, so the per-cycle work stays in the HDL. The flags seen, the
cycle count and the ISA counters go to ``soak.json``; the state at the start of each batch goes
to ``progress.json``, so a hang names the collectives it stopped at.
"""

import json

import cocotb
from cocotb.utils import get_sim_time

from scin.hdl.codec import pack, unpack
from scin.hdl.endpoint.accelerator import (AccOp, EventKind, command_layout, command_tag_mask,
                                           event_layout)

from ..push_program import push_commands
from .env import CLOCK_PERIOD_NS, wait_cycles
from .isa_program import load_program
from .system_env import start_system, counters, switch_errors

STEP = 32


@cocotb.test()
async def soak(dut):
    run = await start_system(dut)
    plan, sp, run_dir = run.plan, run.params, run.run_dir
    cmds, events, isa_load = run.cmds, run.events, run.isa_load
    f = sp.fabric
    n = f.ports

    cl, el = command_layout(f), event_layout(f)
    # Collective k's arrival and flag wait carry tag k mod tag_mask; ordinary writes carry the
    # largest command tag, so their acknowledgements are told apart from the arrivals'. Command
    # tags leave the top tag bit clear: responses with it set belong to the NVLS kernel.
    tag_mask = command_tag_mask(f)
    TRAFFIC_TAG = tag_mask
    flags = {}               # k -> {endpoint: flag word}
    writes_done = [0] * n
    writes_sent = [0] * n
    budget = plan["timeout_cycles"]

    def drain(i):
        """Move endpoint i's events into flags / write counts; return the FLAG tags seen."""
        seen = []
        while events[i].items:
            ev = unpack(el, events[i].items.pop(0))
            if ev["kind"] == EventKind.FLAG.value:
                seen.append(ev["tag"])
                flags.setdefault(ev["tag"], {})[i] = ev["value"]
            elif ev["kind"] == EventKind.WRITE_DONE.value and ev["tag"] == TRAFFIC_TAG:
                writes_done[i] += 1
        return seen

    async def endpoint(i, batch):
        for c in batch:
            if i not in c["members"]:
                continue
            k, desc = c["k"], c["desc"]
            stall = c["stalls"][str(i)]     # JSON keys are strings
            if stall:
                await wait_cycles(dut, stall)
            if c.get("pushed"):
                cmds[i].send(*(pack(cl, cmd) for cmd in push_commands(sp.isa, desc, i,
                                                                       k % tag_mask)))
            elif not c.get("no_barrier"):
                cmds[i].send(pack(cl, op=AccOp.ARRIVE, addr=desc["sync"], length=1,
                                  tag=k % tag_mask))
            for t in c["traffic"]:
                if t["src"] == i:
                    cmds[i].send(pack(cl, op=AccOp.WRITE_REMOTE, dst=t["dst"], addr=t["addr"],
                                      length=t["length"], seed=t["seed"], tag=TRAFFIC_TAG))
                    writes_sent[i] += 1
            if c.get("no_barrier"):
                continue
            cmds[i].send(pack(cl, op=AccOp.WAIT_FLAG, addr=desc["flag_addr"],
                              generation=c["generation"], tag=k % tag_mask))
            waited = 0
            while i not in flags.get(k % tag_mask, {}):
                await wait_cycles(dut, STEP)
                drain(i)
                waited += STEP
                if waited > budget:
                    raise AssertionError(
                        f"collective {k}: endpoint {i} saw no completion flag "
                        f"after {budget} cycles "
                        f"(flags so far {flags.get(k % tag_mask)}; ISA counters {counters(dut)})")
            # The flag seen belongs to this collective: keep it under k (tags can wrap).
            flags.setdefault(("k", k), {})[i] = flags[k % tag_mask].pop(i)

    collectives = plan["collectives"]
    per = plan["sync_resources"]
    batches = [collectives[b:b + per] for b in range(0, len(collectives), per)]
    done_before = 0
    for b, batch in enumerate(batches):
        (run_dir / "progress.json").write_text(json.dumps({
            "batch": b, "collectives": [c["k"] for c in batch],
            "flags_seen": {str(k[1]): v for k, v in flags.items() if isinstance(k, tuple)}}))
        load_program(isa_load, sp.isa, [c["desc"] for c in batch])
        await isa_load.wait_idle()
        tasks = [cocotb.start_soon(endpoint(i, batch)) for i in range(n)]
        for t in tasks:
            await t
        # Every descriptor of the batch completed (flags written and acknowledged; a descriptor
        # without a barrier has no member waiting for it) before the next program replaces it.
        done_before += len(batch)
        waited = 0
        while counters(dut)["collectives"] < done_before:
            await wait_cycles(dut, STEP)
            waited += STEP
            if waited > budget:
                raise AssertionError(f"batch {b}: {counters(dut)['collectives']} of {done_before} "
                                     f"descriptors completed after {budget} cycles; ISA counters "
                                     f"{counters(dut)}")
        dut._log.info("batch %d of %d done (collectives %d-%d)", b + 1, len(batches),
                      batch[0]["k"], batch[-1]["k"])

    # Every ordinary write must be acknowledged before the memories are dumped.
    waited = 0
    while any(writes_done[i] < writes_sent[i] for i in range(n)):
        await wait_cycles(dut, STEP)
        for i in range(n):
            drain(i)
        waited += STEP
        if waited > budget:
            raise AssertionError(f"ordinary writes unacknowledged after {budget} cycles: sent "
                                 f"{writes_sent}, acknowledged {writes_done}")
    await wait_cycles(dut, 4 * sp.one_way_latency)
    (run_dir / "soak.json").write_text(json.dumps({
        "flags": {str(k[1]): v for k, v in flags.items() if isinstance(k, tuple)},
        "cycles": int(get_sim_time("ns") // CLOCK_PERIOD_NS),
        "counters": counters(dut),
        "switch_errors": switch_errors(dut, n),
        "writes": {"sent": writes_sent, "acknowledged": writes_done},
    }, indent=1))
