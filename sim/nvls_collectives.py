"""NCCL's NVLS ReduceScatter and AllGather as the accelerators run them on the RTL fabric, and
their checks: the two other collectives of NCCL's NVLS algorithm beside the All-Reduce
(:mod:`scin.sim.nvls_allreduce`, whose barriers, packets and latency rule they share).

Semantics are NCCL's (:func:`scin.sim.numerics.collective`); ``size`` is NCCL's ``count`` in
bytes (16-bit elements x 2), as ``scin collective`` takes it: ReduceScatter's ``recvcount`` (each
rank's input is ``N`` shards of ``size`` bytes, rank ``i`` of the group receives the reduction of
everyone's shard ``i``), AllGather's ``sendcount`` (rank ``i`` supplies one shard, every rank
receives all ``N`` in rank order). The group is the ports ``ranks`` (default every endpoint), rank
``i`` being ``ranks[i]``.

Memory of every member (symmetric, as NCCL's registered buffers): the multicast buffer of ``N x
size`` bytes at 0 (ReduceScatter: the input; AllGather: the output), the rank's other buffer
(ReduceScatter: its output; AllGather: its input shard) from the next 4 KiB page on, the barrier
flag word in the page after it; one multicast group maps the whole span (``local`` 0).

The program of rank ``i``, between the All-Reduce's two barriers (``multimem.red`` of 1 on the
multicast flag word, then polling the local copy until it reaches ``N``, then ``2N``):

* **ReduceScatter** (``ld_reduce`` only): LDRED_COPY of shard ``i``, ``count`` ld_reduce READs of
  ``packet`` bytes at the multicast address ``i x size + k x packet`` with ``window`` in flight,
  each result written by an ordinary WRITE to the rank's own port at its output buffer (a shorter
  last packet as a command of its own). KERNEL_DONE, once every WRITE is acknowledged, is the
  fence before the next command and the second barrier.
* **AllGather** (``st`` only): REDUCE_SEND without reduction (a bit-exact copy) of the rank's
  input shard, as WRITEs of ``packet`` bytes to the switch's own port at the multicast address
  ``i x size + k x packet``: ``multimem.st``, which the NVLS engine writes to every member, the
  rank included, and acknowledges once all have. ``st`` is posted, so there is no ``window``: the
  switch's ack table (``NvlsParams.acks``) bounds the stores in flight. Its KERNEL_DONE (every
  WRITE acknowledged) is the fence.

``size`` must be whole flits (``ld_reduce`` reads and the copy's WRITEs are flit-aligned), and
``packet`` (default: the hardware's ``entry_bytes``) whole flits of at most ``entry_bytes``
(ReduceScatter, an ld_reduce) or ``max_payload`` (AllGather, a WRITE). No packet crosses a 4 KiB
boundary of a member's memory (every endpoint bridge answers such a burst with SLVERR): where a
shard's packets would, they are cut there, each run of same-sized packets one command
(:func:`~scin.sim.nvls_allreduce.packets`); with ``size`` a multiple of ``packet`` or below 4 KiB
nothing is cut. Bad values raise ValueError naming the parameter.

**Check.** Every endpoint's whole window (both buffers and the flag page) is compared with what
it must hold: its inputs unchanged, zeros elsewhere, a member's flag word at ``2N``, and its
result: AllGather's bit for bit (a copy); ReduceScatter's, by default with inputs whose FP32
accumulation is exact in any order (:func:`~scin.sim.nvls_allreduce.exact_inputs`), bit for bit
against the golden model; with given ``inputs``, every ``ld_reduce`` packet equal to the golden
model of some arrival order of the members (all ``N!`` tried), as for the All-Reduce.
Non-members' memories must be untouched.

**Latency**, the All-Reduce's rule (docs/NVLS.md): from the cycle the last rank's first barrier
``red`` leaves its endpoint to the cycle the last rank sees the second barrier complete.

Modelling limit: the accelerator writes its own memory only through the switch, so a
ReduceScatter result crosses the rank's link both ways as a WRITE (a GPU stores it locally): one
shard more on each link, on top of the ``N`` shards the ld_reduces take up the link.
"""

from dataclasses import dataclass

import numpy as np

from .nvls_allreduce import (DATA_TAG, barrier, check_packet, check_parameters, exact_inputs,
                             golden, latency, packets, page_up, some_order, worst_status)


__all__ = ["OPS", "NvlsCollective", "layout", "program", "make_inputs", "check_images",
           "run_nvls_collective", "member_loads"]

#: The operations of this module, by the names ``scin collective`` uses.
OPS = ("reduce-scatter", "allgather")


@dataclass(frozen=True)
class NvlsCollective:
    """One NVLS ReduceScatter or AllGather (``op``): ``size`` bytes per shard (NCCL's count x
    2) of ``dtype`` (fp16 or bf16), ``window`` ld_reduces in flight per rank (ReduceScatter;
    AllGather has none), ``packet`` bytes per ld_reduce or st (None: ``entry_bytes``)."""
    op:     str
    size:   int
    dtype:  str = "fp16"
    window: int = 8
    packet: int | None = None

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"op must be one of {', '.join(OPS)} (the All-Reduce is "
                             f"sim/nvls_allreduce.py's), not {self.op!r}")
        check_parameters(self.size, self.dtype, self.window, self.packet)


def layout(cfg, n):
    """``(other, flag)``: the byte addresses of the rank's other buffer (ReduceScatter: output;
    AllGather: input) and of the flag word; the multicast buffer is ``n x size`` bytes at 0."""
    other = page_up(n * cfg.size)
    return other, page_up(other + cfg.size)


def _check(cfg, hw, ranks, flit_bytes):
    """The hardware-dependent checks: ranks, size in whole flits, packet, memory."""
    from ..hdl.packet import FabricParams
    if len(set(ranks)) != len(ranks) or len(ranks) < 2 or \
            any(not isinstance(r, (int, np.integer)) or isinstance(r, bool)
                or not 0 <= r < hw.endpoints for r in ranks):
        raise ValueError(f"ranks must be at least two distinct ports of 0 to {hw.endpoints - 1}, "
                         f"not {ranks!r}")
    if cfg.size % flit_bytes:
        raise ValueError(f"size must be whole {flit_bytes}-byte flits for NVLS {cfg.op} "
                         f"(flit-aligned ld_reduces and stores), not {cfg.size}")
    if cfg.op == "reduce-scatter":
        packet = check_packet(cfg.packet, hw, flit_bytes, hw.entry_bytes, "the reduction entry")
    else:
        max_payload = FabricParams.default_for(flit_width=hw.flit_width,
                                               ports=hw.endpoints).max_payload
        packet = check_packet(cfg.packet, hw, flit_bytes, max_payload, "the largest WRITE")
    _, flag = layout(cfg, len(ranks))
    if flag + flit_bytes > hw.mem_size:
        raise ValueError(f"size: {len(ranks)} shards of {cfg.size} bytes, the other buffer and "
                         f"the flag page need {flag + flit_bytes} bytes of each memory, more than "
                         f"mem_size ({hw.mem_size})")
    return packet


def _bases(cfg, i, other):
    """The member-local addresses rank ``i``'s packets go through an endpoint's AXI bridge at,
    which no packet may cross a 4 KiB boundary of: ReduceScatter reads shard ``i`` everywhere and
    writes its own output; AllGather's stores write shard ``i`` everywhere (its input is read
    through the accelerator's own memory port, which has no such rule)."""
    return (i * cfg.size, other) if cfg.op == "reduce-scatter" else (i * cfg.size,)


def program(cfg, hw, multicast_base, switch_port, flit_bytes, ranks=None):
    """``(groups, commands, expect)`` for :func:`~scin.sim.nvls_run.run_program`: the ports in
    ``ranks`` (default: every endpoint) are the group, in rank order (module docstring)."""
    from ..hdl.endpoint.accelerator import AccOp
    from ..hdl.isa.dtype import DType
    from .nvls_run import McGroup
    ranks = list(range(hw.endpoints)) if ranks is None else list(ranks)
    packet = _check(cfg, hw, ranks, flit_bytes)
    n = len(ranks)
    other, flag = layout(cfg, n)
    mc = multicast_base
    groups = [McGroup(0, mc, flag + flit_bytes, 0, sum(1 << int(p) for p in ranks), cfg.dtype)]
    dtype = DType.BF16 if cfg.dtype == "bf16" else DType.FP16
    commands, expect = {}, {}
    for i, r in enumerate(ranks):
        cmds = barrier(False, mc + flag, flag, n, switch_port)
        for at, length, count in packets(cfg.size, packet, _bases(cfg, i, other)):
            shard = mc + i * cfg.size + at
            if cfg.op == "reduce-scatter":
                cmds.append(dict(op=AccOp.LDRED_COPY, dst=r, addr=shard, dest=other + at,
                                 length=length, count=count, window=cfg.window, tag=DATA_TAG))
            else:
                cmds.append(dict(op=AccOp.REDUCE_SEND, dst=switch_port, addr=other + at,
                                 dest=shard, length=length, count=count, reduce=0, local=0,
                                 dtype=dtype, tag=DATA_TAG))
        cmds += barrier(True, mc + flag, flag, n, switch_port)
        commands[r] = cmds
        # Two red answers, two flags, one KERNEL_DONE per data command.
        expect[r] = 4 + sum(c["tag"] == DATA_TAG for c in cmds)
    return groups, commands, expect


def make_inputs(cfg, n, seed):
    """Every rank's input, ``n`` rows of uint16 bit patterns in rank order: ReduceScatter ``n x
    size / 2`` elements whose FP32 accumulation is exact in any order
    (:func:`~scin.sim.nvls_allreduce.exact_inputs`); AllGather ``size / 2`` uniformly random
    patterns (NaNs, infinities, subnormals and signed zeros included: a copy keeps them all)."""
    if cfg.op == "reduce-scatter":
        return exact_inputs(seed, n, n * cfg.size, cfg.dtype)
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 16, (n, cfg.size // 2), dtype=np.uint16)


def member_loads(cfg, ranks, endpoints, inputs, background):
    """``{port: [(byte address, bytes)]}``: every member's input at its place; every non-member
    holds ``background`` rows (one per port) at the same places, which must stay untouched."""
    other, _ = layout(cfg, len(ranks))
    at = 0 if cfg.op == "reduce-scatter" else other
    rows = {p: background[p] for p in range(endpoints)}
    rows.update({p: inputs[i] for i, p in enumerate(ranks)})
    return {p: [(at, np.ascontiguousarray(rows[p]).tobytes())] for p in range(endpoints)}


def check_images(cfg, ranks, endpoints, inputs, loads, images, packet, exact=True):
    """The ports whose window (``images[port]``: bytes from 0) differs from what it must hold
    (module docstring). ``exact``: ReduceScatter results bit for bit against the golden model;
    else each packet the golden model of some arrival order."""
    n = len(ranks)
    other, flag = layout(cfg, n)
    results = golden(cfg.op, cfg.dtype, inputs)
    bad = []
    for p in range(endpoints):
        got = np.frombuffer(images[p], np.uint8)
        want = np.zeros(got.size, np.uint8)
        for addr, raw in loads.get(p, []):
            want[addr:addr + len(raw)] = np.frombuffer(raw, np.uint8)
        ok = True
        if p in ranks:
            i = ranks.index(p)
            want[flag:flag + 4] = np.frombuffer((2 * n).to_bytes(4, "little"), np.uint8)
            res = results[i].view(np.uint8)
            at = other if cfg.op == "reduce-scatter" else 0
            if cfg.op == "reduce-scatter" and not exact:
                mine = got[at:at + res.size].view(np.uint16)
                ok = all(some_order(inputs, cfg.dtype, i * cfg.size + k, length,
                                    mine[k // 2:(k + length) // 2])
                         for start, length, count in packets(cfg.size, packet,
                                                             _bases(cfg, i, other))
                         for k in range(start, start + length * count, length))
                res = got[at:at + res.size]     # checked above; the rest bit for bit below
            want[at:at + res.size] = res
        if not (ok and np.array_equal(got, want)):
            bad.append(p)
    return bad


def run_nvls_collective(cfg, hw, *, inputs=None, ranks=None, sim="verilator", seed=1,
                        log=print):
    """Run one NVLS ReduceScatter or AllGather (``cfg``) on ``hw`` (an
    :class:`~scin.sim.nvls_run.NvlsSystem`) with the group ``ranks`` (default every endpoint);
    return a report: ``cycles`` (the latency, module docstring), ``match`` (every endpoint's
    window as it must be), ``mismatched_ports``, ``status`` (the worst of every WRITE_DONE and
    KERNEL_DONE), the counters. ``inputs``: the members' inputs as :func:`make_inputs` gives
    them (default :func:`make_inputs` of ``seed``; given ReduceScatter inputs are checked per
    packet against every arrival order)."""
    from ..hdl.packet import FabricParams
    from .nvls_run import run_program
    f = FabricParams.default_for(flit_width=hw.flit_width, ports=hw.endpoints)
    ranks = list(range(hw.endpoints)) if ranks is None else list(ranks)
    groups, commands, expect = program(cfg, hw, f.multicast_base, f.switch_port, f.flit_bytes,
                                       ranks)
    ranks = [int(r) for r in ranks]
    packet = hw.entry_bytes if cfg.packet is None else cfg.packet
    n = len(ranks)
    exact = inputs is None
    default = make_inputs(cfg, n, seed)
    if exact:
        inputs = default
    inputs = np.asarray(inputs)
    if inputs.shape != default.shape or inputs.dtype != np.uint16:
        raise ValueError(f"inputs must be uint16 bit patterns of shape {default.shape} (one row "
                         f"per rank), not {inputs.dtype} {inputs.shape}")
    rng = np.random.default_rng(seed + 1)
    background = rng.integers(0, 1 << 16, (hw.endpoints, default.shape[1]), dtype=np.uint16)
    loads = member_loads(cfg, ranks, hw.endpoints, inputs, background)
    _, flag = layout(cfg, n)
    log(f"NVLS {cfg.op}: {cfg}, ranks {ranks}, seed {seed}")
    budget = 40 * n * cfg.size // f.flit_bytes + 400 * hw.one_way_latency + 50_000
    out = run_program(hw, groups, commands, expect, loads=loads, dump=(0, flag + f.flit_bytes),
                      sim=sim, seed=seed, timeout_cycles=budget, log=log)
    ev = out["events"]
    start, end = latency(ev, ranks)
    bad = check_images(cfg, ranks, hw.endpoints, inputs, loads, out["images"], packet,
                       exact=exact)
    return {"op": cfg.op, "algorithm": "nvls", "endpoints": n, "ranks": ranks,
            "dtype": cfg.dtype, "size_bytes": cfg.size,
            "window": cfg.window if cfg.op == "reduce-scatter" else None, "packet": packet,
            "cycles": end - start, "start": start, "end": end, "match": not bad,
            "mismatched_ports": bad, "status": worst_status(ev, ranks),
            "nvls_counters": out["nvls_counters"], "switch_errors": out["switch_errors"],
            "wall_seconds": out["wall_seconds"], "run_dir": out["run_dir"]}
