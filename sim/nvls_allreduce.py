"""NCCL's NVLS All-Reduce as the accelerators run it on the RTL fabric, and its check.

The program of every rank (NCCL's NVLS kernel, docs/NVLS.md): a barrier (``multimem.red`` of 1 on a
multicast flag word, then polling the local copy until it reaches N), then its shard of the message,
``1/N`` of it in whole flits, as ``ld_reduce`` + ``st`` packets of at most ``packet`` bytes (default
the hardware's ``entry_bytes``; none across a 4 KiB boundary) with ``window`` ``ld_reduce``s in
flight (one LDRED_ST command per run of same-sized packets), then a second barrier (to 2N). The
buffer is reduced in place: each packet's ``st`` writes the reduction over the bytes it was read
from, in every member. The helpers (shards, packets, barriers, latency) serve the ReduceScatter and
AllGather programs too (:mod:`scin.sim.nvls_collectives`).

Latency follows docs/PERFORMANCE.md's rule for SCIN: from the cycle the last rank's first packet
(its first barrier ``red``) leaves its endpoint to the cycle the last rank sees the second
barrier complete.
"""

import itertools
from dataclasses import dataclass

import numpy as np

from . import numerics
from .nvls import nvls_reduce


__all__ = ["NvlsAllReduce", "program", "possible_results", "some_order", "golden", "exact_inputs",
           "run_nvls_allreduce",
           "shards", "packets", "barrier", "latency", "worst_status", "check_parameters",
           "check_packet", "page_up", "BARRIER_TAGS", "DATA_TAG", "MAX_WINDOW"]

#: The flag word's offset above the message (its own 4 KiB page).
_PAGE = 4096
#: Most ld_reduces in flight per rank: the accelerator kernel's slots at the default tag width
#: (:func:`~scin.hdl.endpoint.kernel.kernel_slots`).
MAX_WINDOW = 16
#: Command tags of the two barriers: (first ``red``, first poll, second ``red``, second poll).
#: The latency runs from the SENT of the first to the FLAG of the last.
BARRIER_TAGS = (1, 2, 4, 5)
#: Command tag of the data commands between the barriers.
DATA_TAG = 3


def page_up(nbytes):
    """``nbytes`` rounded up to whole 4 KiB pages (where the next buffer or flag page starts)."""
    return -(-nbytes // _PAGE) * _PAGE


def check_parameters(size, dtype, window, packet):
    """The checks every NVLS program makes of its configuration: ValueError naming the
    parameter. ``packet`` may be None (the hardware's ``entry_bytes``)."""
    from .nvls import DTYPES
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (NVLS reduces no other), "
                         f"not {dtype!r}")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0 or size % 2:
        raise ValueError(f"size must be a positive even number of bytes (elements x 2), "
                         f"not {size!r}")
    if not isinstance(window, int) or isinstance(window, bool) or not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"window must be 1 to {MAX_WINDOW} ld_reduces in flight, not {window!r}")
    if packet is not None and (not isinstance(packet, int) or isinstance(packet, bool)
                               or packet <= 0):
        raise ValueError(f"packet must be a positive number of bytes (or None: the hardware's "
                         f"entry_bytes), not {packet!r}")


def check_packet(packet, hw, flit_bytes, limit, what):
    """``packet`` (None: ``hw.entry_bytes``) checked against the hardware: whole flits, at most
    ``limit`` bytes (``what`` says whose limit); returns it."""
    packet = hw.entry_bytes if packet is None else packet
    if packet % flit_bytes or not flit_bytes <= packet <= limit:
        raise ValueError(f"packet must be whole {flit_bytes}-byte flits, at most {limit} bytes "
                         f"({what}), not {packet}")
    return packet


@dataclass(frozen=True)
class NvlsAllReduce:
    """One NVLS All-Reduce: ``size`` bytes of ``dtype`` (fp16 or bf16) on ``hw.endpoints`` ranks,
    ``window`` ld_reduces in flight per rank, ``packet`` bytes per ld_reduce (None: the
    hardware's ``entry_bytes``, the paper's packet). Bad values raise ValueError naming them."""
    size:   int
    dtype:  str = "fp16"
    window: int = 8
    packet: int | None = None

    def __post_init__(self):
        check_parameters(self.size, self.dtype, self.window, self.packet)

    def flag_addr(self):
        return page_up(self.size)


def shards(size, n, flit):
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


def packets(nbytes, packet, bases=(0,)):
    """``nbytes`` in packets of at most ``packet`` bytes, none crossing a 4 KiB boundary at any of
    the ``bases`` (the addresses the bytes are read from and written to: every endpoint's AXI
    bridge answers a burst across 4 KB with SLVERR, docs/ISA.md): ``[(offset, length, count)]``,
    runs of ``count`` same-sized packets from ``offset``, one accelerator command each. Greedy:
    each packet is as long as ``packet``, the rest and the next boundary allow, so buffers whose
    bases are multiples of ``packet`` (a divisor of 4 KiB) give the whole packets, then the rest."""
    runs, at = [], 0
    while at < nbytes:
        length = min([packet, nbytes - at] + [_PAGE - (b + at) % _PAGE for b in bases])
        if runs and runs[-1][1] == length and runs[-1][0] + runs[-1][1] * runs[-1][2] == at:
            runs[-1][2] += 1
        else:
            runs.append([at, length, 1])
        at += length
    return [tuple(r) for r in runs]


def barrier(second, mc_flag, flag, n, switch_port):
    """NCCL's NVLS barrier as two accelerator commands: a ``red`` of 1 on the multicast flag word
    ``mc_flag``, then polling the local copy ``flag`` until it reaches ``n`` (the first barrier)
    or ``2n`` (``second``). Tags :data:`BARRIER_TAGS`."""
    from ..hdl.endpoint.accelerator import AccOp
    red, poll = BARRIER_TAGS[2:] if second else BARRIER_TAGS[:2]
    return [dict(op=AccOp.RED, dst=switch_port, addr=mc_flag, length=1, tag=red),
            dict(op=AccOp.WAIT_FLAG, addr=flag, generation=(2 if second else 1) * n, tag=poll)]


def latency(events, ranks):
    """``(start, end)`` by docs/PERFORMANCE.md's rule: the cycle the last rank's first barrier
    ``red`` left its endpoint, the cycle the last rank saw the second barrier complete."""
    from ..hdl.endpoint.accelerator import EventKind
    start = max(e["cycle"] for r in ranks for e in events[r]
                if e["kind"] == EventKind.SENT.value and e["tag"] == BARRIER_TAGS[0])
    end = max(e["cycle"] for r in ranks for e in events[r]
              if e["kind"] == EventKind.FLAG.value and e["tag"] == BARRIER_TAGS[3])
    return start, end


def worst_status(events, ranks):
    """The worst status of every WRITE_DONE and KERNEL_DONE of ``ranks`` (0: all OK)."""
    from ..hdl.endpoint.accelerator import EventKind
    kinds = (EventKind.WRITE_DONE.value, EventKind.KERNEL_DONE.value)
    return max([e["status"] for r in ranks for e in events[r] if e["kind"] in kinds] + [0])


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
    packet = check_packet(cfg.packet, hw, flit_bytes, hw.entry_bytes, "the reduction entry")
    commands, expect = {}, {}
    for r, (off, nbytes) in zip(ranks, shards(cfg.size, n, flit_bytes)):
        cmds = barrier(False, mc + flag, flag, n, switch_port)
        for at, length, count in packets(nbytes, packet, bases=(off,)):
            cmds.append(dict(op=AccOp.LDRED_ST, dst=switch_port, addr=mc + off + at,
                             length=length, count=count, window=cfg.window, tag=DATA_TAG))
        cmds += barrier(True, mc + flag, flag, n, switch_port)
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


def some_order(inputs, dtype, offset, length, got):
    """Whether ``got`` (uint16 elements) is the reduction of ``inputs[:, offset:offset+length]``
    (bytes) in some arrival order: the check of one ld_reduce packet."""
    return bool((possible_results(inputs, dtype, offset, length) == got).all(axis=1).any())


def golden(op, dtype, inputs):
    """The golden model's result of every rank for ``inputs`` (uint16 bit patterns, one row per
    rank): uint16 rows in rank order."""
    typed = inputs.view(np.float16) if dtype == "fp16" else inputs
    return [np.asarray(res.out).view(np.uint16).reshape(-1)
            for res in numerics.collective(op, dtype, typed)]


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
    start, end = latency(ev, range(n))
    images = [np.frombuffer(out["images"][r], np.uint16) for r in range(n)]
    same = all(np.array_equal(images[0], im) for im in images[1:])
    if exact:
        want = golden("allreduce", cfg.dtype, inputs)[0]
        good = same and np.array_equal(images[0], want[:images[0].size])
    else:
        good = same and _each_packet_possible(inputs, images[0], cfg, hw, f.flit_bytes)
    status = worst_status(ev, range(n))
    return {"op": "allreduce", "algorithm": "nvls", "endpoints": n, "dtype": cfg.dtype,
            "size_bytes": cfg.size, "window": cfg.window, "cycles": end - start,
            "start": start, "end": end, "match": bool(good), "status": status,
            "nvls_counters": out["nvls_counters"], "switch_errors": out["switch_errors"],
            "wall_seconds": out["wall_seconds"], "run_dir": out["run_dir"]}


def _each_packet_possible(inputs, image, cfg, hw, flit):
    """Every ld_reduce packet of the result equals the golden model's for one arrival order."""
    packet = hw.entry_bytes if cfg.packet is None else cfg.packet
    for off, nbytes in shards(cfg.size, hw.endpoints, flit):
        for at, length, count in packets(nbytes, packet, bases=(off,)):
            for k in range(count):
                a = off + at + k * length
                got = image[a // 2:(a + length) // 2]
                if not some_order(inputs, cfg.dtype, a, length, got):
                    return False
    return True
