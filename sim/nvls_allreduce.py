"""NCCL's NVLS All-Reduce as the accelerators run it on the RTL fabric, and its check.

The program of every rank (NCCL's NVLS kernel, docs/NVLS.md): a barrier (``multimem.red`` of 1 on
a multicast flag word, then polling the local copy until it reaches N), then its shard of the
message, ``1/N`` of it in whole flits, as ``ld_reduce`` + ``st`` packets of at most
``entry_bytes`` with ``window`` ``ld_reduce``s in flight (one LDRED_ST command per run of
same-sized packets), then a second barrier (to 2N). The buffer is reduced in place: each packet's
``st`` writes the reduction over the bytes it was read from, in every member.

Latency follows docs/PERFORMANCE.md's rule for SCIN: from the cycle the last rank's first packet
(its first barrier ``red``) leaves its endpoint to the cycle the last rank sees the second
barrier complete.
"""

import itertools
from dataclasses import dataclass

import numpy as np

from . import numerics
from .nvls import nvls_reduce


__all__ = ["NvlsAllReduce", "program", "possible_results", "exact_inputs", "run_nvls_allreduce"]

#: The flag word's offset above the message (its own 4 KiB page).
_PAGE = 4096


@dataclass(frozen=True)
class NvlsAllReduce:
    """One NVLS All-Reduce: ``size`` bytes of ``dtype`` (fp16 or bf16) on ``hw.endpoints`` ranks,
    ``window`` ld_reduces in flight per rank."""
    size:   int
    dtype:  str = "fp16"
    window: int = 8

    def flag_addr(self):
        return -(-self.size // _PAGE) * _PAGE


def _shards(size, n, flit):
    """Each rank's ``(offset, bytes)``: the message cut in ``n`` runs of whole flits, the first
    ranks taking one flit more when it does not divide (an empty shard for a rank past the end)."""
    flits = -(-size // flit)
    base, extra = divmod(flits, n)
    out, at = [], 0
    for r in range(n):
        k = (base + (r < extra)) * flit
        out.append((at, k))
        at += k
    return out


def program(cfg, hw, multicast_base, switch_port, flit_bytes, ranks=None):
    """``(groups, commands, expect)`` for :func:`~scin.sim.nvls_run.run_program`: the ports in
    ``ranks`` (default: every endpoint) are the group, in rank order."""
    from ..hdl.endpoint.accelerator import AccOp
    from .nvls_run import McGroup
    ranks = list(range(hw.endpoints)) if ranks is None else list(ranks)
    n = len(ranks)
    flag = cfg.flag_addr()
    mc = multicast_base
    groups = [McGroup(0, mc, flag + flit_bytes, 0, sum(1 << p for p in ranks), cfg.dtype)]
    commands, expect = {}, {}
    for r, (off, nbytes) in zip(ranks, _shards(cfg.size, n, flit_bytes)):
        cmds = [dict(op=AccOp.RED, dst=switch_port, addr=mc + flag, length=1, tag=1),
                dict(op=AccOp.WAIT_FLAG, addr=flag, generation=n, tag=2)]
        at = off
        full, rest = divmod(nbytes, hw.entry_bytes)
        for length, count in ((hw.entry_bytes, full), (rest, 1 if rest else 0)):
            if count:
                cmds.append(dict(op=AccOp.LDRED_ST, dst=switch_port, addr=mc + at, length=length,
                                 count=count, window=cfg.window, tag=3))
                at += length * count
        cmds += [dict(op=AccOp.RED, dst=switch_port, addr=mc + flag, length=1, tag=4),
                 dict(op=AccOp.WAIT_FLAG, addr=flag, generation=2 * n, tag=5)]
        commands[r] = cmds
        # Two red answers, two flags, one KERNEL_DONE per LDRED_ST.
        expect[r] = 4 + sum(c["op"] == AccOp.LDRED_ST for c in cmds)
    return groups, commands, expect


def exact_inputs(seed, n, size, dtype):
    """Inputs whose FP32 accumulation is exact in any order (magnitudes in [1/16, 16) or zero,
    so every partial sum of up to 16 of them is a multiple of 2**-14 below 2**8): NVLS's result
    is then the exact sum rounded once, SCIN's golden model, whatever the arrival order."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(1 / 16, 16, (n, size // 2)) * rng.choice([-1, 1], (n, size // 2))
    x[rng.random((n, size // 2)) < 0.05] = 0
    data, _ = numerics.encode(dtype, x)
    return np.asarray(data).view(np.uint16).reshape(n, -1)


def possible_results(inputs, dtype, offset, length):
    """Every order's reduction of ``inputs[:, offset:offset+length]`` (bytes), as rows."""
    cols = slice(offset // 2, (offset + length) // 2)
    rows = [inputs[m, cols] for m in range(inputs.shape[0])]
    return np.stack([nvls_reduce(rows, list(o), dtype)
                     for o in itertools.permutations(range(len(rows)))])


def run_nvls_allreduce(cfg, hw, *, inputs=None, sim="verilator", seed=1, log=print):
    """Run one NVLS All-Reduce; return a report: ``cycles``, ``match`` (every rank's buffer is
    the same, and every packet is the golden model's for some arrival order or, with
    ``inputs=None`` (:func:`exact_inputs`), exactly the exact sum rounded once), the counters."""
    from ..hdl.packet import FabricParams
    from .nvls_run import run_program
    f = FabricParams.default_for(flit_width=hw.flit_width, ports=hw.endpoints)
    n = hw.endpoints
    exact = inputs is None
    if exact:
        inputs = exact_inputs(seed, n, -(-cfg.size // 2) * 2, cfg.dtype)
    groups, commands, expect = program(cfg, hw, f.multicast_base, f.switch_port, f.flit_bytes)
    loads = {r: [(0, inputs[r].tobytes())] for r in range(n)}
    budget = 40 * cfg.size // f.flit_bytes + 400 * hw.one_way_latency + 50_000
    out = run_program(hw, groups, commands, expect, loads=loads, dump=(0, cfg.size), sim=sim,
                      seed=seed, timeout_cycles=budget, log=log)
    ev = out["events"]
    start = max(e["cycle"] for r in range(n) for e in ev[r] if e["kind"] == 0 and e["tag"] == 1)
    end = max(e["cycle"] for r in range(n) for e in ev[r] if e["kind"] == 3 and e["tag"] == 5)
    images = [np.frombuffer(out["images"][r], np.uint16) for r in range(n)]
    same = all(np.array_equal(images[0], im) for im in images[1:])
    if exact:
        typed = inputs.view(np.float16) if cfg.dtype == "fp16" else inputs
        want = np.asarray(numerics.collective("allreduce", cfg.dtype, typed)[0].out).view(np.uint16)
        good = same and np.array_equal(images[0], want.reshape(-1)[:images[0].size])
    else:
        good = same and _each_packet_possible(inputs, images[0], cfg, hw, f.flit_bytes)
    status = max([e["status"] for r in range(n) for e in ev[r] if e["kind"] in (2, 4)] + [0])
    return {"op": "allreduce", "algorithm": "nvls", "endpoints": n, "dtype": cfg.dtype,
            "size_bytes": cfg.size, "window": cfg.window, "cycles": end - start,
            "start": start, "end": end, "match": bool(good), "status": status,
            "nvls_counters": out["nvls_counters"], "switch_errors": out["switch_errors"],
            "wall_seconds": out["wall_seconds"], "run_dir": out["run_dir"]}


def _each_packet_possible(inputs, image, cfg, hw, flit):
    """Every ld_reduce packet of the result equals the golden model's for one arrival order."""
    for off, nbytes in _shards(cfg.size, hw.endpoints, flit):
        for at in range(off, off + nbytes, hw.entry_bytes):
            length = min(hw.entry_bytes, off + nbytes - at)
            got = image[at // 2:(at + length) // 2]
            if not (possible_results(inputs, cfg.dtype, at, length) == got).all(axis=1).any():
                return False
    return True
