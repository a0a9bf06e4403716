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


class _Soak:
    """The state of one soak: the flags seen, the ordinary writes sent and acknowledged, and the
    steps that move them (an endpoint working through a batch, a batch, the final drain)."""

    def __init__(self, dut, run):
        self.dut, self.run = dut, run
        f = run.params.fabric
        self.n = f.ports
        self.cl, self.el = command_layout(f), event_layout(f)
        # Collective k's arrival and flag wait carry tag k mod tag_mask; ordinary writes carry
        # the largest command tag, so their acknowledgements are told apart from the arrivals'.
        # Command tags leave the top tag bit clear: responses with it set belong to the NVLS
        # kernel.
        self.tag_mask = command_tag_mask(f)
        self.traffic_tag = self.tag_mask
        self.flags = {}               # k -> {endpoint: flag word}
        self.writes_done = [0] * self.n
        self.writes_sent = [0] * self.n
        self.budget = run.plan["timeout_cycles"]

    def drain(self, i):
        """Move endpoint i's events into flags / write counts."""
        events = self.run.events[i]
        while events.items:
            ev = unpack(self.el, events.items.pop(0))
            if ev["kind"] == EventKind.FLAG.value:
                self.flags.setdefault(ev["tag"], {})[i] = ev["value"]
            elif ev["kind"] == EventKind.WRITE_DONE.value and ev["tag"] == self.traffic_tag:
                self.writes_done[i] += 1

    def send(self, i, c):
        """Endpoint i's commands for collective ``c``: its arrival or pushes, then its writes."""
        cmds, sp, cl, tag = self.run.cmds[i], self.run.params, self.cl, c["k"] % self.tag_mask
        if c.get("pushed"):
            cmds.send(*(pack(cl, cmd) for cmd in push_commands(sp.isa, c["desc"], i, tag)))
        elif not c.get("no_barrier"):
            cmds.send(pack(cl, op=AccOp.ARRIVE, addr=c["desc"]["sync"], length=1, tag=tag))
        for t in c["traffic"]:
            if t["src"] == i:
                cmds.send(pack(cl, op=AccOp.WRITE_REMOTE, dst=t["dst"], addr=t["addr"],
                               length=t["length"], seed=t["seed"], tag=self.traffic_tag))
                self.writes_sent[i] += 1

    async def wait_flag(self, i, c):
        """Endpoint i waits for collective ``c``'s completion flag, then files it under k."""
        k, tag = c["k"], c["k"] % self.tag_mask
        self.run.cmds[i].send(pack(self.cl, op=AccOp.WAIT_FLAG, addr=c["desc"]["flag_addr"],
                                   generation=c["generation"], tag=tag))
        waited = 0
        while i not in self.flags.get(tag, {}):
            await wait_cycles(self.dut, STEP)
            self.drain(i)
            waited += STEP
            if waited > self.budget:
                raise AssertionError(
                    f"collective {k}: endpoint {i} saw no completion flag after {self.budget} "
                    f"cycles (flags so far {self.flags.get(tag)}; ISA counters "
                    f"{counters(self.dut)})")
        # The flag seen belongs to this collective: keep it under k (tags can wrap).
        self.flags.setdefault(("k", k), {})[i] = self.flags[tag].pop(i)

    async def endpoint(self, i, batch):
        """Endpoint i through ``batch``: stall, arrive or push, write, wait for the flag."""
        for c in batch:
            if i not in c["members"]:
                continue
            stall = c["stalls"][str(i)]     # JSON keys are strings
            if stall:
                await wait_cycles(self.dut, stall)
            self.send(i, c)
            if not c.get("no_barrier"):
                await self.wait_flag(i, c)

    def flags_by_k(self):
        return {str(k[1]): v for k, v in self.flags.items() if isinstance(k, tuple)}

    async def batch(self, b, batch, done_before):
        """Load ``batch`` into the ISA, run every endpoint through it and wait until the ISA has
        completed ``done_before`` descriptors in all (flags written and acknowledged; one without
        a barrier has no member waiting for it) before the next program replaces it."""
        run, dut = self.run, self.dut
        (run.run_dir / "progress.json").write_text(json.dumps({
            "batch": b, "collectives": [c["k"] for c in batch],
            "flags_seen": self.flags_by_k()}))
        load_program(run.isa_load, run.params.isa, [c["desc"] for c in batch])
        await run.isa_load.wait_idle()
        tasks = [cocotb.start_soon(self.endpoint(i, batch)) for i in range(self.n)]
        for t in tasks:
            await t
        waited = 0
        while counters(dut)["collectives"] < done_before:
            await wait_cycles(dut, STEP)
            waited += STEP
            if waited > self.budget:
                raise AssertionError(f"batch {b}: {counters(dut)['collectives']} of {done_before} "
                                     f"descriptors completed after {self.budget} cycles; ISA "
                                     f"counters {counters(dut)}")

    async def writes_acknowledged(self):
        """Wait until every ordinary write is acknowledged (before the memories are dumped)."""
        waited = 0
        while any(self.writes_done[i] < self.writes_sent[i] for i in range(self.n)):
            await wait_cycles(self.dut, STEP)
            for i in range(self.n):
                self.drain(i)
            waited += STEP
            if waited > self.budget:
                raise AssertionError(f"ordinary writes unacknowledged after {self.budget} cycles: "
                                     f"sent {self.writes_sent}, acknowledged {self.writes_done}")


@cocotb.test()
async def soak(dut):
    s = _Soak(dut, await start_system(dut))
    plan, sp, n = s.run.plan, s.run.params, s.n
    collectives, per = plan["collectives"], plan["sync_resources"]
    batches = [collectives[b:b + per] for b in range(0, len(collectives), per)]
    done_before = 0
    for b, batch in enumerate(batches):
        done_before += len(batch)
        await s.batch(b, batch, done_before)
        dut._log.info("batch %d of %d done (collectives %d-%d)", b + 1, len(batches),
                      batch[0]["k"], batch[-1]["k"])
    await s.writes_acknowledged()
    await wait_cycles(dut, 4 * sp.one_way_latency)
    (s.run.run_dir / "soak.json").write_text(json.dumps({
        "flags": s.flags_by_k(),
        "cycles": int(get_sim_time("ns") // CLOCK_PERIOD_NS),
        "counters": counters(dut),
        "switch_errors": switch_errors(dut, n),
        "writes": {"sent": s.writes_sent, "acknowledged": s.writes_done},
    }, indent=1))
