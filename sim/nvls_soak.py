"""``scin soak --nvls``: the randomised soak on a switch with the NVLS engine beside the ISA.

:func:`make_nvls_plan` draws ``count`` collectives from one seed, in *steps*: each step puts one
or two collectives on disjoint sets of ports, so that they run at the same time on the one switch:

* an **NVLS All-Reduce** (NCCL's NVLS kernel, :mod:`scin.sim.nvls_allreduce`: barrier, each rank
  ``ld_reduce`` + ``st`` of its shard, barrier) of a random group of two or more ports (a
  multicast group of the round, drawn new or reused), fp16 or bf16 (the group's), a random size
  in whole flits up to ``max_size``, a random window (1 to 16 ``ld_reduce`` in flight), a random
  packet (whole flits up to the reduction entry), a buffer at a random flit of its page (so
  packets are cut at 4 KiB boundaries), with wide-range inputs (the result depends on the
  arrival order) or exact ones (it does not);
* a **SCIN collective** through the ISA, drawn as ``scin soak`` draws one
  (:func:`scin.sim.soak.draw_collective`, :func:`scin.sim.soak.collective_entry`: any
  operation, dtype, root, in place or not, flag mode, DECERR or a bad descriptor) on the ports
  the step leaves;

and, with ``fault_rate`` per port and step, a **bad multicast access** right before the port's
collective of the step (or alone, on a port the step leaves idle): an ``ld_reduce`` outside every
multicast group, past its group's end, of a length that is not whole flits, longer than the
reduction entry or zero; an ``st`` or a ``red`` outside every group or past its group's end
(:data:`BAD_KINDS`, in turn). Each must be refused (``DECERR``, an ``ld_reduce`` header-only),
counted in ``nvls_counters['refused']``, write nothing anywhere, and leave the next collective of
its port exact.

The system is the NVLS-enabled one of ``tb/system/test_nvls.py`` (64 KiB memories, 8 reduction
entries, 8 acknowledgement entries, :func:`hardware`), so the soak reuses its build. Steps are
packed into *rounds*: one simulation each (:func:`~scin.sim.nvls_run.run_program`), with up to
``groups`` multicast groups (each mapping every member's whole memory), one ISA descriptor per sync
resource, its buffers in the 60 KiB below the flag page. Every port runs its commands in the
round's step order, so the collectives of a step overlap and those of consecutive steps on other
ports too.

:func:`verify_round` checks everything a round left, bit for bit: each NVLS result the same in
every member, each ``ld_reduce`` packet the golden model's reduction in one arrival order of the
members (all ``N!`` tried, as :mod:`scin.sim.nvls_allreduce` checks; exact inputs: the exact sum
rounded once, SCIN's golden model), every barrier flag at ``2N``; each SCIN collective as
``scin soak`` checks it (:func:`scin.sim.collective_check.check_collective`); every command's events
(statuses, counts); a non-member's buffers and flags untouched; every byte of every memory that
no collective owns still zero; the engine's counters (``refused`` = the bad accesses,
``ld_reduces``, ``stores``, ``reds`` as drawn, no stale response), the ISA's (``collectives``,
``bad_descriptors``, no timeout) and no switch port error.
"""

import enum
import math
import random
import time
from collections import Counter

import numpy as np

from ..hdl.paper import FLIT_BYTES
from . import numerics
from .system_run import flit_loads
from .coverage import Coverage
from .nvls_allreduce import (MAX_WINDOW, barrier, exact_inputs, golden, packets, page_up,
                             shards, some_order)
from .collective_check import check_collective, outcome_table
from .collective_check import describe as describe_collective
from .soak import OPS, collective_entry, collectives_coverage, draw_collective


__all__ = ["hardware", "make_nvls_plan", "run_nvls_soak", "verify_round", "nvls_coverage",
           "BAD_KINDS", "MEM_SIZE"]

#: The memories of tb/system/test_nvls.py's system, whose build the soak reuses.
MEM_SIZE = 1 << 16
_PAGE = 4096
#: The top page holds every flag word of a round (NVLS barrier counters and SCIN flags), one
#: per flit; the buffers lie below.
FLAG_PAGE = MEM_SIZE - _PAGE
#: Multicast group ``g`` starts at ``multicast_base + g * GROUP_STRIDE`` and maps every member's
#: whole memory (``local`` 0, ``MEM_SIZE`` bytes): the gap behind it is outside every group.
GROUP_STRIDE = 1 << 20
#: The bad multicast accesses, drawn in turn (each refused by the engine, docs/NVLS.md).
BAD_KINDS = ("ld_reduce_outside", "ld_reduce_past_end", "ld_reduce_partial_flit",
             "ld_reduce_too_long", "ld_reduce_zero_length", "st_outside", "st_past_end",
             "red_outside", "red_past_end")
#: Share of steps whose first collective is an NVLS All-Reduce (the rest: a SCIN one).
NVLS_SHARE = 0.6
#: Wide-range inputs make the result depend on the arrival order, whose N! orders the check
#: tries per packet: above this many ranks only exact inputs are drawn.
WIDE_MAX_RANKS = 5


def hardware(cfg):
    """The :class:`~scin.sim.nvls_run.NvlsSystem` of the NVLS soak of ``cfg`` (a
    :class:`~scin.sim.soak.SoakConfig`): with four endpoints and responses in order, exactly
    tb/system/test_nvls.py's ``HW``."""
    from .nvls_run import NvlsSystem
    return NvlsSystem(endpoints=cfg.endpoints, mem_size=MEM_SIZE, entries=8, acks=8,
                      reorder=cfg.reorder, capacity=cfg.capacity, outstanding=cfg.waves)


def _plain(cmd):
    """A command dict with enum members as their values (JSON-ready)."""
    return {k: v.value if isinstance(v, enum.Enum) else v for k, v in cmd.items()}


class _Round:
    """One simulation being filled: its multicast groups, buffers, flags, tags, ISA program,
    every port's commands and loads, and the expected entries of what it runs."""

    def __init__(self, index, n):
        self.index = index
        self.groups = []                 # table entry g: (members tuple, dtype)
        self.page = 0                    # next free 4 KiB page of the buffers
        self.flags = 0                   # flag slots used
        self.tag = 0                     # last command tag used
        self.descriptors = []            # descriptor j on sync resource j
        self.commands = {i: [] for i in range(n)}
        self.loads = {i: [] for i in range(n)}
        self.entries = []                # NVLS, SCIN and bad-access entries, in placing order

    def fits(self, pages, groups, scin, tags, flags, *, max_groups, sync_resources, max_tag):
        return (self.page + pages <= FLAG_PAGE // _PAGE
                and len(self.groups) + len(set(groups) - set(self.groups)) <= max_groups
                and len(self.descriptors) + scin <= sync_resources
                and self.tag + tags <= max_tag and (self.flags + flags) * 32 <= _PAGE)

    def take_pages(self, nbytes):
        addr = self.page * _PAGE
        self.page += page_up(nbytes) // _PAGE
        return addr

    def take_flag(self):
        self.flags += 1
        return FLAG_PAGE + 32 * (self.flags - 1)

    def take_tags(self, k):
        self.tag += k
        return list(range(self.tag - k + 1, self.tag + 1))

    def group(self, key):
        if key not in self.groups:
            self.groups.append(key)
        return self.groups.index(key)


def compact_layout(shape):
    """A SCIN collective's buffers packed into whole pages (the 64 KiB memories hold a few per
    round): data buffers page-aligned (the ISA's rule), INT8 scales after them, aligned to 128
    bytes; ``flag`` is the window's size in bytes (the keys of
    :func:`~scin.sim.allreduce.memory_map`)."""
    shards = max(shape.shards_in, shape.shards_out)
    region = page_up(max(shards * shape.data_bytes, 1))
    sregion = -(-shards * shape.scale_bytes // 128) * 128
    if shape.in_place:
        return {"src": 0, "dst": 0, "src_scales": region, "dst_scales": region,
                "flag": page_up(region + sregion)}
    return {"src": 0, "dst": region, "src_scales": 2 * region, "dst_scales": 2 * region + sregion,
            "flag": page_up(2 * region + 2 * sregion)}


def _members(rng, rnd, kind, avail, size):
    """``(members, dtype)`` of a part on the ports ``avail``: an NVLS All-Reduce reuses one of the
    round's multicast groups that fits half of the time, else a new one (random ports and dtype);
    a SCIN collective's dtype is drawn with it (None here)."""
    if kind == "nvls":
        reusable = [g for g in rnd.groups if set(g[0]) <= set(avail)]
        if reusable and rng.random() < 0.5:
            return rng.choice(reusable)
        return tuple(sorted(rng.sample(avail, size))), rng.choice(("fp16", "bf16"))
    return tuple(sorted(rng.sample(avail, size))), None


def _draw_parts(cfg, rng, rnd):
    """A step's collectives: ``[(kind, members, dtype)]`` on disjoint ports; the first on two or
    more ports (mostly leaving two or more for a second), the second, when there is room, mostly
    of the other kind."""
    n = cfg.endpoints
    ports = list(range(n))
    first = "nvls" if rng.random() < NVLS_SHARE else "scin"
    size = rng.randint(2, n - 2) if n >= 4 and rng.random() < 0.5 else rng.randint(2, n)
    parts = [(first, *_members(rng, rnd, first, ports, size))]
    rest = [p for p in ports if p not in parts[0][1]]
    if len(rest) >= 2:
        other = "scin" if first == "nvls" else "nvls"
        second = rng.choices((other, first, None), (0.6, 0.25, 0.15))[0]
        if second:
            parts.append((second, *_members(rng, rnd, second, rest, rng.randint(2, len(rest)))))
    return parts


def _draw_nvls(cfg, rng, members, dtype, hw, flit):
    """An NVLS All-Reduce's shape: size (whole flits, log-uniform-ish up to ``max_size``), window,
    packet, the buffer's flit offset in its page, the kind of inputs and their seed."""
    flits = max(1, cfg.max_size // flit)
    size = flit * min(flits, rng.randint(1, 1 << rng.randint(0, int(math.log2(flits)))))
    packet = hw.entry_bytes if rng.random() < 0.5 else flit * rng.randint(1, hw.entry_bytes // flit)
    # The buffer's place in its page: at its start, anywhere, or across the page's end (some
    # rank's packets are then cut at the 4 KiB boundary).
    place = rng.random()
    offset = 0 if place < 0.4 or size == flit else \
        flit * rng.randint(1, _PAGE // flit - 1) if place < 0.7 else \
        _PAGE - flit * rng.randint(1, min(size, _PAGE) // flit - 1)
    inputs = "exact" if len(members) > WIDE_MAX_RANKS or rng.random() < 1 / 3 else "wide"
    return {"members": list(members), "dtype": dtype, "size": size,
            "window": rng.randint(1, MAX_WINDOW), "packet": packet, "offset": offset,
            "inputs": inputs, "seed": rng.getrandbits(32)}


def _draw_bad(rng, kind, hw, f):
    """A bad multicast access of ``kind``: ``(accelerator op name, addr, length, seed)``."""
    flit, entry = f.flit_bytes, hw.entry_bytes
    base = f.multicast_base + rng.randrange(hw.groups) * GROUP_STRIDE
    inside = base + _PAGE * rng.randrange(FLAG_PAGE // _PAGE)
    outside = base + MEM_SIZE + flit * rng.randrange(64)        # between two groups
    short = flit * rng.randint(1, 4)
    past_end = base + MEM_SIZE - short
    seed = rng.getrandbits(16)
    return {
        "ld_reduce_outside": ("READ_REMOTE", outside, flit * rng.randint(1, entry // flit)),
        "ld_reduce_past_end": ("READ_REMOTE", past_end, short + flit * rng.randint(1, 4)),
        "ld_reduce_partial_flit": ("READ_REMOTE", inside, flit * rng.randrange(entry // flit)
                                   + rng.randint(1, flit - 1)),
        "ld_reduce_too_long": ("READ_REMOTE", inside,
                               entry + flit * rng.randint(1, (f.max_payload - entry) // flit)),
        "ld_reduce_zero_length": ("READ_REMOTE", inside, 0),
        "st_outside": ("WRITE_REMOTE", outside, flit * rng.randint(1, 32)),
        "st_past_end": ("WRITE_REMOTE", past_end, short + flit * rng.randint(1, 4)),
        "red_outside": ("RED", outside, 1),
        # The word's last two bytes lie past the group's end.
        "red_past_end": ("RED", base + MEM_SIZE - 2, 1),
    }[kind] + (seed,)


def _wide_inputs(seed, n, size, dtype):
    """Inputs of mixed magnitudes (2**-8 to 2**8 times a Gaussian), so the FP32 accumulation
    order changes result bits: uint16 patterns, one row per rank."""
    g = np.random.default_rng(seed)
    e = size // 2
    x = g.standard_normal((n, e)) * 2.0 ** g.integers(-8, 8, (n, e))
    data, _ = numerics.encode(dtype, x)
    return np.asarray(data).view(np.uint16).reshape(n, e)


def _place_nvls(rnd, k, s, hw, f):
    """Put NVLS All-Reduce ``k`` of shape ``s`` into round ``rnd``: its multicast group, buffer,
    flag word, tags, every member's commands and loads; returns its expected entry."""
    from ..hdl.endpoint.accelerator import AccOp
    members, n, size, flit = s["members"], len(s["members"]), s["size"], f.flit_bytes
    g = rnd.group((tuple(members), s["dtype"]))
    mc = f.multicast_base + g * GROUP_STRIDE          # multicast address of local byte 0
    buf = rnd.take_pages(s["offset"] + size) + s["offset"]
    flag = rnd.take_flag()
    tags = rnd.take_tags(5)         # first red, first poll, data, second red, second poll
    inputs = (exact_inputs if s["inputs"] == "exact" else _wide_inputs)(s["seed"], n, size,
                                                                       s["dtype"])
    pkts, runs, ld_reduces = [], {}, {}
    for r, (port, (off, nbytes)) in enumerate(zip(members, shards(size, n, flit))):
        first = barrier(False, mc + flag, flag, n, f.switch_port)
        second = barrier(True, mc + flag, flag, n, f.switch_port)
        cmds = [dict(c, tag=t) for c, t in zip(first, tags[:2])]
        cuts = packets(nbytes, s["packet"], bases=(buf + off,))
        for at, length, count in cuts:
            cmds.append(dict(op=AccOp.LDRED_ST, dst=f.switch_port, addr=mc + buf + off + at,
                             length=length, count=count, window=s["window"], tag=tags[2]))
            pkts += [(buf + off + at + j * length, length) for j in range(count)]
        cmds += [dict(c, tag=t) for c, t in zip(second, tags[3:])]
        rnd.commands[port] += [_plain(c) for c in cmds]
        rnd.loads[port].append((buf, inputs[r].tobytes()))
        runs[port] = len(cuts)
        ld_reduces[port] = sum(count for _, _, count in cuts)
    return {"k": k, "kind": "nvls", "round": rnd.index, "op": "nvls-allreduce", **s,
            "group": g, "buf": buf, "flag": flag, "tags": tags, "packets": pkts, "runs": runs,
            "ld_reduces": ld_reduces, "input_data": inputs}


def _place_scin(rnd, rng, k, drawn, isa, f):
    """Put SCIN collective ``k`` (``drawn``: :func:`~scin.sim.soak.draw_collective`'s) into round
    ``rnd``: its buffers, flag, the next sync resource, its descriptor, arrivals and flag waits;
    returns its expected entry (:func:`~scin.sim.soak.collective_entry`'s, plus round and tags)."""
    from ..hdl.endpoint.accelerator import AccOp
    members, fault, kind, shape = drawn
    layout = compact_layout(shape)
    addr = rnd.take_pages(layout["flag"])
    flag, sync = rnd.take_flag(), len(rnd.descriptors)
    desc, entry, loads = collective_entry(rng, k, isa, members, fault, kind, shape, layout, addr,
                                          flag=flag, sync=sync, generation=1)
    tags = rnd.take_tags(2)
    for j, port in enumerate(members):
        rnd.commands[port] += [
            _plain(dict(op=AccOp.ARRIVE, addr=sync, length=1, tag=tags[0])),
            _plain(dict(op=AccOp.WAIT_FLAG, addr=flag, generation=1, tag=tags[1]))]
        rnd.loads[port] += flit_loads(loads[j], layout["flag"], f.flit_bytes, base=addr)
    rnd.descriptors.append(desc)
    entry.update(kind="scin", round=rnd.index, tags=tags, desc=desc)
    return entry


def _close(rnd, rng, n, hw, f):
    """The round as :func:`~scin.sim.nvls_run.run_program` takes it. Every multicast table entry
    is loaded (those no All-Reduce used with random members), so a past-the-end access always
    meets a group's end."""
    while len(rnd.groups) < hw.groups:
        rnd.groups.append((tuple(sorted(rng.sample(range(n), rng.randint(2, n)))),
                           rng.choice(("fp16", "bf16"))))
    groups = [{"index": g, "base": f.multicast_base + g * GROUP_STRIDE, "size": MEM_SIZE,
               "local": 0, "members": sum(1 << p for p in members), "dtype": dtype}
              for g, (members, dtype) in enumerate(rnd.groups)]
    commands = {p: cmds for p, cmds in rnd.commands.items() if cmds}
    # Every accelerator command the soak uses reports exactly one event other than SENT (ARRIVE,
    # RED, WRITE_REMOTE: WRITE_DONE; READ_REMOTE: READ_DONE; WAIT_FLAG: FLAG; LDRED_ST:
    # KERNEL_DONE), the run's end is every port's last.
    expect = {p: len(cmds) for p, cmds in commands.items()}
    return {"index": rnd.index, "groups": groups, "commands": commands, "expect": expect,
            "descriptors": rnd.descriptors,
            "items": [e["k"] for e in rnd.entries if e["kind"] != "bad"],
            "bad": sum(e["kind"] == "bad" for e in rnd.entries)}


def make_nvls_plan(cfg):
    """Draw an NVLS soak of :class:`~scin.sim.soak.SoakConfig` ``cfg`` (``cfg.nvls``). Returns
    ``(plan, loads, expected)``: ``plan["rounds"]``, each what
    :func:`~scin.sim.nvls_run.run_program` takes (``groups``, ``commands``, ``expect``,
    ``descriptors``) with its ``items`` (the collectives' ``k``) and ``bad`` (bad accesses);
    ``loads[r]``, round ``r``'s ``{port: [(byte address, bytes)]}``; ``expected[r]``, round
    ``r``'s entries in placing order: ``kind`` ``nvls`` (an NVLS All-Reduce), ``scin`` (a SCIN
    collective, :func:`~scin.sim.soak.collective_entry`'s entry) or ``bad`` (a bad multicast
    access, with the ``before`` collective on its port). The same seed draws the same plan."""
    from ..hdl.endpoint.accelerator import AccOp, command_tag_mask
    from .nvls_run import system_params
    if not cfg.nvls:
        raise ValueError("make_nvls_plan needs an NVLS soak configuration (nvls=True)")
    hw = hardware(cfg)
    params = system_params(hw)
    f, isa, n = params.fabric, params.isa, cfg.endpoints
    limits = dict(max_groups=hw.groups, sync_resources=isa.sync_resources,
                  max_tag=command_tag_mask(f))
    rng = random.Random(cfg.seed)
    rounds, rnd = [], _Round(0, n)
    k = bad_count = scin_bad = 0
    while k < cfg.count:
        parts = _draw_parts(cfg, rng, rnd)[:cfg.count - k]
        shapes = []
        for j, (kind, members, dtype) in enumerate(parts):
            if kind == "nvls":
                shapes.append(_draw_nvls(cfg, rng, members, dtype, hw, f.flit_bytes))
            else:
                drawn = draw_collective(cfg, rng, k + j, isa, scin_bad, None, members)
                scin_bad += drawn[1] == "bad_desc"
                shapes.append(drawn)
        bad = []
        for port in range(n):
            if rng.random() < cfg.fault_rate:
                kind = BAD_KINDS[bad_count % len(BAD_KINDS)]
                bad.append((port, kind, _draw_bad(rng, kind, hw, f)))
                bad_count += 1
        pages = sum(page_up(s["offset"] + s["size"]) if isinstance(s, dict) else
                    compact_layout(s[3])["flag"] for s in shapes) // _PAGE
        need = dict(pages=pages, groups=[(tuple(s["members"]), s["dtype"]) for s in shapes
                                         if isinstance(s, dict)],
                    scin=sum(not isinstance(s, dict) for s in shapes),
                    tags=5 * len(shapes) + len(bad), flags=len(shapes))
        if not rnd.fits(**need, **limits):
            rounds.append(rnd)
            rnd = _Round(len(rounds), n)
            assert rnd.fits(**need, **limits), need
        # The bad accesses first: each runs right before its port's collective of the step.
        owner = {p: k + j for j, s in enumerate(shapes)
                 for p in (s["members"] if isinstance(s, dict) else s[0])}
        for port, kind, (op, addr, length, seed) in bad:
            tag = rnd.take_tags(1)[0]
            rnd.commands[port].append(_plain(dict(op=AccOp[op], dst=f.switch_port, addr=addr,
                                                  length=length, seed=seed, tag=tag)))
            rnd.entries.append({"kind": "bad", "round": rnd.index, "bad_kind": kind,
                                "port": port, "op": op, "addr": addr, "length": length,
                                "tag": tag, "before": owner.get(port)})
        for j, s in enumerate(shapes):
            rnd.entries.append(_place_nvls(rnd, k + j, s, hw, f) if isinstance(s, dict) else
                               _place_scin(rnd, rng, k + j, s, isa, f))
        for e in rnd.entries[-len(shapes):]:
            e["step_with"] = [k + j for j in range(len(shapes)) if k + j != e["k"]]
        k += len(shapes)
    rounds.append(rnd)
    closed = [_close(r, rng, n, hw, f) for r in rounds]
    plan = {"hw": hw.system().to_json(), "seed": cfg.seed, "count": cfg.count, "rounds": closed}
    return plan, [r.loads for r in rounds], [r.entries for r in rounds]


def _events(out, n):
    """``{port: {tag: [event]}}`` of a run's non-SENT events."""
    from ..hdl.endpoint.accelerator import EventKind
    ev = {i: {} for i in range(n)}
    for i, evs in out["events"].items():
        for e in evs:
            if e["kind"] != EventKind.SENT.value:
                ev[int(i)].setdefault(e["tag"], []).append(e)
    return ev


def _describe_nvls(e):
    return (f"NVLS all-reduce {e['dtype']} {e['size']} B, ranks {e['members']}, window "
            f"{e['window']}, packet {e['packet']} B, buffer {e['buf']:#x}, {e['inputs']} inputs")


def describe(e):
    """One line saying what entry ``e`` was."""
    if e["kind"] == "nvls":
        return _describe_nvls(e)
    if e["kind"] == "scin":
        return f"SCIN {describe_collective(e)}, ranks {e['members']}"
    return (f"bad access {e['bad_kind']} from port {e['port']} ({e['op']} {e['addr']:#x}, "
            f"{e['length']} B)")


def _check_events(e, ev, port, wants):
    """Failures of ``port``'s events for ``wants``: ``[(tag, EventKind, count)]``, every one with
    status OK."""
    out = []
    for tag, kind, count in wants:
        got = ev[port].get(tag, [])
        if len(got) != count or any(x["kind"] != kind.value or x["status"] for x in got):
            out.append(f"collective {e['k']} ({describe(e)}) endpoint {port}: events of "
                       f"tag {tag} {[(x['kind'], x['status']) for x in got]}, expected {count} "
                       f"{kind.name} with status OK")
    return out


def _check_nvls(e, ev, mem, claimed):
    """The failures of NVLS All-Reduce entry ``e``."""
    from ..hdl.endpoint.accelerator import EventKind
    failures = []
    lo, hi, flag, n = e["buf"], e["buf"] + e["size"], e["flag"], len(e["members"])
    what = f"collective {e['k']} ({describe(e)})"
    red1, poll1, data, red2, poll2 = e["tags"]
    for i, m in enumerate(mem):
        claimed[i][lo:hi] = claimed[i][flag:flag + 4] = True
        word = int.from_bytes(m[flag:flag + 4].tobytes(), "little")
        if i not in e["members"]:
            if word or m[lo:hi].any():
                failures.append(f"collective {e['k']} wrote to non-member {i}")
            continue
        failures += _check_events(e, ev, i, [
            (red1, EventKind.WRITE_DONE, 1), (poll1, EventKind.FLAG, 1),
            (data, EventKind.KERNEL_DONE, e["runs"][i]), (red2, EventKind.WRITE_DONE, 1),
            (poll2, EventKind.FLAG, 1)])
        acked = sum(x["value"] for x in ev[i].get(data, []))
        if acked != e["ld_reduces"][i]:
            failures.append(f"{what} endpoint {i}: {acked} st acknowledged, expected "
                            f"{e['ld_reduces'][i]}")
        if word != 2 * n:
            failures.append(f"{what} endpoint {i}: barrier flag {word}, expected {2 * n}")
    first = e["members"][0]
    result = mem[first][lo:hi]
    for i in e["members"][1:]:
        if not np.array_equal(mem[i][lo:hi], result):
            bad = np.flatnonzero(mem[i][lo:hi] != result)
            failures.append(f"{what} endpoint {i}: {len(bad)} bytes differ from endpoint "
                            f"{first}'s result, first at {lo + int(bad[0]):#x}")
    got = result.view(np.uint16)
    inputs, dtype = e["input_data"], e["dtype"]
    if e["inputs"] == "exact":
        want = golden("allreduce", dtype, inputs)[0]
        bad = np.flatnonzero(got != want)
        if len(bad):
            at = lo + 2 * int(bad[0])
            failures.append(f"{what}: {len(bad)} elements differ from the exact sum rounded "
                            f"once (the golden model), first at {at:#x}: got "
                            f"{int(got[bad[0]]):#06x}, want {int(want[bad[0]]):#06x}")
    else:
        wrong = [(a, length) for a, length in e["packets"]
                 if not some_order(inputs, dtype, a - lo, length,
                                   got[(a - lo) // 2:(a - lo + length) // 2])]
        if wrong:
            failures.append(f"{what}: {len(wrong)} of {len(e['packets'])} ld_reduce packets are "
                            f"no arrival order's reduction (golden model, all {math.factorial(n)} "
                            f"orders tried), first at {wrong[0][0]:#x} ({wrong[0][1]} B)")
    return failures


def _check_scin(e, ev, mem, claimed):
    """The failures of SCIN collective entry ``e`` (its events, then ``scin soak``'s check)."""
    from ..hdl.endpoint.accelerator import EventKind
    lo, hi = e["window"]
    for c in claimed:
        c[lo:hi] = c[e["flag"]:e["flag"] + 4] = True
    arrive, poll = e["tags"]
    failures, flags = [], {}
    for i in e["members"]:
        failures += _check_events(e, ev, i, [(arrive, EventKind.WRITE_DONE, 1)])
        seen = [x for x in ev[i].get(poll, []) if x["kind"] == EventKind.FLAG.value]
        if len(seen) == 1 and len(ev[i][poll]) == 1:
            flags[(e["k"], i)] = seen[0]["value"]
    return failures + check_collective(e, flags, mem)


def _check_bad(e, ev):
    """The failures of bad access ``e``: refused, DECERR (an ld_reduce: header-only)."""
    from ..hdl.endpoint.accelerator import EventKind
    from ..hdl.packet import Status
    kind = EventKind.READ_DONE if e["op"] == "READ_REMOTE" else EventKind.WRITE_DONE
    got = ev[e["port"]].get(e["tag"], [])
    if len(got) == 1 and got[0]["kind"] == kind.value and got[0]["status"] == Status.DECERR.value \
            and (kind != EventKind.READ_DONE or got[0]["length"] == 0):
        return []
    return [f"{describe(e)} (round {e['round']}): answered {got}, expected one {kind.name} with "
            f"DECERR{' and no data' if kind == EventKind.READ_DONE else ''}"]


def verify_round(rnd, entries, out):
    """Check round ``rnd`` (a plan round) from :func:`~scin.sim.nvls_run.run_program`'s ``out``
    (whose ``images`` are every endpoint's whole memory). Returns ``(verdicts, failures,
    isolation_checks)``: ``verdicts`` maps each entry's index in ``entries`` to its failures,
    ``failures`` are the round's own (stray bytes, events no command asked for, counters)."""
    n = len(out["images"])
    mem = [np.frombuffer(out["images"][i], np.uint8) for i in range(n)]
    ev = _events(out, n)
    claimed = [np.zeros(len(m), bool) for m in mem]
    verdicts, isolation = {}, 0
    for j, e in enumerate(entries):
        if e["kind"] == "nvls":
            verdicts[j] = _check_nvls(e, ev, mem, claimed)
        elif e["kind"] == "scin":
            verdicts[j] = _check_scin(e, ev, mem, claimed)
        else:
            verdicts[j] = _check_bad(e, ev)
        if e["kind"] != "bad":
            isolation += n - len(e["members"])
    failures = []
    where = f"round {rnd['index']}"
    # Every byte no collective owns is still zero: nothing refused, nothing of one collective
    # landed elsewhere.
    for i, (m, c) in enumerate(zip(mem, claimed)):
        stray = np.flatnonzero(m.astype(bool) & ~c)
        if len(stray):
            failures.append(f"{where} endpoint {i}: {len(stray)} bytes written outside every "
                            f"collective's buffers and flags, first at {int(stray[0]):#x}")
    owned = {(i, c["tag"]) for i, cmds in rnd["commands"].items() for c in cmds}
    extra = sorted((i, t) for i in ev for t in ev[i] if (i, t) not in owned)
    if extra:
        failures.append(f"{where}: events no command asked for (endpoint, tag): {extra[:8]}")
    nv = [e for e in entries if e["kind"] == "nvls"]
    scin = [e for e in entries if e["kind"] == "scin"]
    want = {"refused": sum(e["kind"] == "bad" for e in entries),
            "ld_reduces": sum(sum(e["ld_reduces"].values()) for e in nv),
            "stores": sum(sum(e["ld_reduces"].values()) for e in nv),
            "reds": sum(2 * len(e["members"]) for e in nv), "stale_rdata": 0, "stale_wresp": 0}
    got = {k: out["nvls_counters"][k] for k in want}
    if got != want:
        failures.append(f"{where}: NVLS counters {got}, expected {want}")
    want = {"collectives": len(scin),
            "bad_descriptors": sum(e["fault"] == "bad_desc" for e in scin), "bad_arrivals": 0,
            "dup_arrivals": 0, "bad_requests": 0, "timeouts": 0}
    got = {k: out["counters"][k] for k in want}
    if got != want:
        failures.append(f"{where}: ISA counters {got}, expected {want}")
    if any(out["switch_errors"]):
        failures.append(f"{where}: switch port errors {out['switch_errors']}")
    return verdicts, failures, isolation


def _label(e):
    """The outcome class of an entry."""
    if e["kind"] == "nvls":
        return f"nvls:{e['inputs']}"
    if e["kind"] == "bad":
        return f"refused:{e['bad_kind']}"
    return "scin:" + (e["fault"] if e["fault"] != "bad_desc" else f"bad_desc:{e['bad_kind']}")


def nvls_coverage(expected, endpoints, entry_bytes, flit_bytes=FLIT_BYTES):
    """The functional coverage of the NVLS All-Reduces of a plan (``expected``, every round's
    entries): :class:`~scin.sim.coverage.Coverage` over :data:`~scin.sim.coverage.NVLS_AXES`, the
    fault axis saying whether a refused access ran right before it on one of its ports."""
    from .coverage import NVLS_AXES, NVLS_CROSSES, nvls_bins_of
    cov = Coverage(("none", "after_refused"), {}, endpoints, space=NVLS_AXES,
                   crosses=NVLS_CROSSES)
    for entries in expected:
        after = {e["before"] for e in entries if e["kind"] == "bad"}
        kinds = {e["k"]: e["kind"] for e in entries if e["kind"] != "bad"}
        for e in entries:
            if e["kind"] != "nvls":
                continue
            beside = {kinds[j] for j in e["step_with"]}
            cov.add(nvls_bins_of(e["dtype"], e["size"], e["members"], e["window"], e["packet"],
                                 e["offset"], e["inputs"],
                                 "scin" if "scin" in beside else "nvls" if beside else "alone",
                                 e["k"] in after, endpoints=endpoints, entry_bytes=entry_bytes,
                                 flit_bytes=flit_bytes))
    return cov


def run_nvls_soak(cfg, log=print):
    """Run the NVLS soak of ``cfg``: every round, checked as it ends, with one progress line per
    collective; return the summary (docs/CLI.md, ``scin soak --json``; docs/RELIABILITY.md).

    Raises RuntimeError if a round's simulation does not complete (naming the round and its
    collectives)."""
    from .nvls_run import McGroup, run_program, system_params
    plan, loads, expected = make_nvls_plan(cfg)
    hw = hardware(cfg)
    params = system_params(hw)
    n = cfg.endpoints
    rounds = plan["rounds"]
    started = time.monotonic()
    log(f"NVLS soak: {cfg.count} collectives in {len(rounds)} rounds, seed {cfg.seed}, {n} "
        f"endpoints, {cfg.sim}; building or reusing the NVLS system ...")
    outcome, by_op = Counter(), Counter()
    failures, run_dirs = [], []
    isolation = cycles = 0
    counters, nvls_counters, switch_errors = Counter(), Counter(), [0] * n
    for rnd, rnd_loads, entries in zip(rounds, loads, expected):
        t0 = time.monotonic()
        groups = [McGroup(**g) for g in rnd["groups"]]
        try:
            out = run_program(hw, groups, rnd["commands"], rnd["expect"], loads=rnd_loads,
                              dump=(0, MEM_SIZE), descriptors=rnd["descriptors"], sim=cfg.sim,
                              seed=cfg.seed, timeout_cycles=400_000, log=log)
        except RuntimeError as exc:
            raise RuntimeError(f"round {rnd['index']} (collectives {rnd['items']}) did not "
                               f"complete: {exc}") from exc
        run_dirs.append(out["run_dir"])
        verdicts, own, iso = verify_round(rnd, entries, out)
        isolation += iso
        end = max([e["cycle"] for evs in out["events"].values() for e in evs] + [0])
        cycles += end
        counters.update(out["counters"])
        nvls_counters.update(out["nvls_counters"])
        switch_errors = [a + b for a, b in zip(switch_errors, out["switch_errors"])]
        failures += own
        for j, e in enumerate(entries):
            found = verdicts[j]
            failures += found
            verdict = "FAILED" if found else "ok"
            outcome[(_label(e), verdict)] += 1
            if e["kind"] != "bad":
                by_op[(e["op"], verdict)] += 1
                log(f"  [{e['k'] + 1}/{cfg.count}] collective {e['k']} (round "
                    f"{rnd['index'] + 1} of {len(rounds)}): {describe(e)}: {verdict}")
        log(f"round {rnd['index'] + 1} of {len(rounds)}: {len(rnd['items'])} collectives, "
            f"{rnd['bad']} bad accesses ({out['nvls_counters']['refused']} refused), {end} cycles, "
            f"{time.monotonic() - t0:.1f} s{'' if not own else ': ' + '; '.join(own)}")
    ops = outcome_table(by_op)
    order = ("nvls-allreduce",) + OPS
    scin = [(e["desc"], e) for entries in expected for e in entries if e["kind"] == "scin"]
    return {"passed": not failures, "nvls": True,
            "outcomes": dict(sorted(outcome_table(outcome).items())),
            "ops": {op: ops[op] for op in order if op in ops},
            "ordinary_writes": 0, "ordinary_writes_intact": 0,
            "isolation_checks": isolation, "failures": failures[:50],
            "seed": cfg.seed, "count": cfg.count, "endpoints": n, "sim": cfg.sim,
            "rounds": len(rounds), "cycles": cycles,
            "wall_seconds": round(time.monotonic() - started, 1),
            "run_dir": run_dirs[0], "run_dirs": run_dirs,
            "counters": dict(counters), "nvls_counters": dict(nvls_counters),
            "switch_errors": switch_errors,
            "coverage": collectives_coverage(scin, endpoints=n, flit_bytes=params.fabric.flit_bytes,
                                             capacity=cfg.capacity).as_dict(),
            "nvls_coverage": nvls_coverage(expected, n, hw.entry_bytes,
                                           params.fabric.flit_bytes).as_dict()}
