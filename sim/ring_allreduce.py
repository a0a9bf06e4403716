"""NCCL's ring All-Reduce as the accelerators run it on the RTL fabric, and its check.

The same fabric, endpoints and cycle counter as the NVLS All-Reduce
(:mod:`scin.sim.nvls_allreduce`), with no help from the switch: every packet is an ordinary unicast
WRITE or ATOMIC_ADD through the switch core, so SCIN, NVLS and ring can be compared cycle for cycle.

**Algorithm** (NCCL's ``runRing`` for All-Reduce, simple protocol). The message is cut into ``N``
chunks (whole flits, the first chunks one flit longer when it does not divide; a chunk may be
empty), each chunk into ``slices`` slices (NCCL's ``ALLREDUCE_CHUNKSTEPS / ALLREDUCE_SLICESTEPS =
2``), which is what lets the steps of neighbouring ranks overlap. Rank ``r`` sends to ``r + 1``
and receives from ``r - 1`` (mod ``N``), ``2(N - 1)`` steps:

* step 0: chunk ``r - 1``: its own data sent (``send``);
* steps ``k = 1 .. N - 2``: chunk ``r - 1 - k``: received partial sum plus its own data, sent
  (``recvReduceSend``);
* step ``N - 1``: chunk ``r``: the same, the sum being final: sent to the next rank's buffer and
  written over its own (``directRecvReduceCopySend``);
* steps ``N .. 2N - 3``: chunk ``r - (k - N + 1)``: the final chunk received into its buffer,
  forwarded (``directRecvCopySend``);
* step ``2N - 2``: chunk ``r + 1``: received (``directRecv``).

So chunk ``c`` is summed in ring order ``x[c+1] + x[c+2] + ... + x[c+N-1] + x[c]``, one correctly
rounded 16-bit add at a time (:func:`ring_golden`).

**Per slice**, as NCCL's simple protocol does it over NVLink (the sender writes into the
receiver's memory): the receiver waits for the slice (WAIT_FLAG on its *tail* word), one
REDUCE_SEND command reads the local data (and the received slice), adds, writes the result to the
next rank and fences (every WRITE acknowledged), then a RED (ATOMIC_ADD of 1, inc=0) on the next
rank's tail word signals it. Reduce-scatter slices land in a ring of ``slots`` staging slots
(NCCL's FIFO) in the receiver's memory; the receiver returns each slot with a RED on the
sender's *head* word once it has used it, and a sender waits (WAIT_FLAG on its head word) before
reusing a slot. All-gather slices are final and are written straight into the receiver's buffer.
Every slice of every step is signalled, empty ones included, as NCCL does (so the counts stay in
step); a REDUCE_SEND is issued only for a non-empty slice, in packets of at most ``max_payload``.

Memory of every rank: the message at 0, the tail and head words in the page after it
(:meth:`RingAllReduce.flag_addr`), the staging slots from the next page on.

**Latency**, the rule of :mod:`scin.sim.nvls_allreduce`: from the cycle the last rank's first
packet leaves its endpoint (every rank's first step sends at once) to the cycle the last rank sees
its final slice's flag.

Modelling limits: the accelerator reads its memory through one port (a reduction streams at most
one flit per two cycles) and writes it only through the switch (the final step's own copy is a
second WRITE, to its own port); see :class:`~scin.hdl.endpoint.kernel.ReduceSend`.
"""

from dataclasses import dataclass

import numpy as np


__all__ = ["RingAllReduce", "chunks", "slices", "layout", "program", "add16", "ring_golden",
           "ring_inputs", "run_ring_allreduce", "FINAL_TAG"]

_PAGE = 4096
#: Command tags: REDUCE_SEND, RED on the next rank's tail, RED on the previous rank's head,
#: WAIT_FLAG on the tail, WAIT_FLAG on the head, and the rank's last WAIT_FLAG (the end).
SEND_TAG, TAIL_RED_TAG, HEAD_RED_TAG, TAIL_WAIT_TAG, HEAD_WAIT_TAG, FINAL_TAG = 1, 2, 3, 4, 5, 6


@dataclass(frozen=True)
class RingAllReduce:
    """One ring All-Reduce: ``size`` bytes (even) of ``dtype`` (fp16 or bf16) on ``hw.endpoints``
    ranks, each chunk in ``slices`` slices, at most ``slots`` staging slots (of a slice each)
    per rank; more than ``slices``. The defaults are NCCL's: 2 slices per chunk
    (``ALLREDUCE_CHUNKSTEPS / ALLREDUCE_SLICESTEPS``), 4 slots (``NCCL_STEPS = 8`` FIFO steps of
    ``ALLREDUCE_SLICESTEPS = 2`` per slice)."""
    size:   int
    dtype:  str = "fp16"
    slices: int = 2
    slots:  int = 4

    def flag_addr(self):
        """The tail word (the head word is 64 bytes above), in the page after the message."""
        return -(-self.size // _PAGE) * _PAGE


def chunks(size, n, flit):
    """Each chunk's ``(offset, bytes)``: ``ceil(size / flit)`` flits cut in ``n`` runs, the first
    ones a flit longer when it does not divide, the last non-empty one ending at ``size``."""
    flits = -(-size // flit)
    base, extra = divmod(flits, n)
    out, at = [], 0
    for c in range(n):
        end = min(at + (base + (c < extra)) * flit, size)
        out.append((at, end - at))
        at = end
    return out


def slices(chunk, count, flit):
    """``count`` slices ``(offset, bytes)`` of ``chunk`` the same way (some may be empty)."""
    off, nbytes = chunk
    return [(off + o, b) for o, b in chunks(nbytes, count, flit)] if nbytes else \
        [(off, 0)] * count


def layout(cfg, hw, flit):
    """``(tail, head, stage, slot_bytes, slots)`` of every rank's memory; raises ValueError if
    ``slots`` (or what the memory holds past the message and its flags) is not above ``slices``
    (the ring would deadlock)."""
    n = hw.endpoints
    tail = cfg.flag_addr()
    stage = tail + _PAGE
    slot_bytes = max([b for c in chunks(cfg.size, n, flit) for _, b in slices(c, cfg.slices, flit)]
                     + [flit])
    slot_bytes = -(-slot_bytes // flit) * flit
    slots = min(cfg.slots, (hw.mem_size - stage) // slot_bytes)
    if slots <= cfg.slices:
        # A rank returns the slot of a slice once it has sent that slice on, ``slices`` sends
        # later, and that send may itself wait for a slot: with ``slots <= slices`` every rank
        # waits for the next one around the ring and none moves.
        raise ValueError(f"a {hw.mem_size}-byte memory with {cfg.size} bytes and its flags holds "
                         f"{slots} staging slots of {slot_bytes} bytes; the ring needs more than "
                         f"the {cfg.slices} slices of a chunk")
    return tail, tail + 64, stage, slot_bytes, slots


def program(cfg, hw, flit_bytes, max_payload):
    """``(commands, expect)`` for :func:`~scin.sim.nvls_run.run_program`: each rank's commands
    (module docstring) and its number of events other than SENT (one per command)."""
    from ..hdl.endpoint.accelerator import AccOp
    from ..hdl.isa.dtype import DType
    n, S = hw.endpoints, cfg.slices
    tail, head, stage, slot_bytes, slots = layout(cfg, hw, flit_bytes)
    parts = [slices(c, S, flit_bytes) for c in chunks(cfg.size, n, flit_bytes)]
    staged = (n - 1) * S            # slices each rank sends into the next rank's staging slots
    dtype = DType.BF16 if cfg.dtype == "bf16" else DType.FP16
    commands = {}
    for r in range(n):
        nxt, prv = (r + 1) % n, (r - 1) % n
        cmds, got, sent, used = [], 0, 0, 0

        def reduce_send(off, nbytes, **op):
            # Whole packets of max_payload, then the rest: length is per command.
            full, rest = divmod(nbytes, max_payload)
            for length, count, at in ((max_payload, full, off),
                                      (rest, 1, off + full * max_payload)):
                if count and length:
                    cmds.append(dict(op=AccOp.REDUCE_SEND, tag=SEND_TAG, dst=nxt, length=length,
                                     count=count, dtype=dtype, addr=at, **{
                                         k: v + at - off if k in ("addr2", "dest") else v
                                         for k, v in op.items()}))

        for step in range(2 * n - 1):
            if step < n:
                c = (r - 1 - step) % n
            else:
                c = (r - (step - n + 1)) % n if step < 2 * n - 2 else (r + 1) % n
            for s, (off, nbytes) in enumerate(parts[c]):
                if step:    # receive: wait for the previous rank's slice
                    got += 1
                    last = step == 2 * n - 2 and s == S - 1
                    cmds.append(dict(op=AccOp.WAIT_FLAG, addr=tail, generation=got & 0xFFFF,
                                     tag=FINAL_TAG if last else TAIL_WAIT_TAG))
                if step == 2 * n - 2:
                    continue
                slot_in = stage + used % slots * slot_bytes
                if step < n - 1:        # into the next rank's staging slot: wait until it is free
                    if sent >= slots:
                        cmds.append(dict(op=AccOp.WAIT_FLAG, addr=head, tag=HEAD_WAIT_TAG,
                                         generation=(sent - slots + 1) & 0xFFFF))
                    dest = stage + sent % slots * slot_bytes
                    sent += 1
                else:                   # final data: straight into the next rank's buffer
                    dest = off
                if nbytes:
                    if step == 0:
                        reduce_send(off, nbytes, dest=dest, reduce=0)
                    elif step < n:
                        reduce_send(off, nbytes, dest=dest, reduce=1, addr2=slot_in,
                                    local=int(step == n - 1))
                    else:
                        reduce_send(off, nbytes, dest=dest, reduce=0)
                cmds.append(dict(op=AccOp.RED, dst=nxt, addr=tail, length=1, tag=TAIL_RED_TAG))
                if 1 <= step <= n - 1:  # a staging slot used: return it if it will be reused
                    if used + slots < staged:
                        cmds.append(dict(op=AccOp.RED, dst=prv, addr=head, length=1,
                                         tag=HEAD_RED_TAG))
                    used += 1
        commands[r] = cmds
    return commands, {r: len(cmds) for r, cmds in commands.items()}


def add16(a, b, dtype):
    """Element-wise correctly rounded FP16/BF16 addition of two uint16 bit-pattern arrays (NCCL's
    ``__hadd2``): the exact sum rounded once to nearest even. FP16: the float64 sum of two FP16
    values is exact (their exponents span 40 bits), and NumPy rounds float64 to float16 directly.
    BF16: the float32 sum, then RNE to 16 bits by integer arithmetic (float32 has 24 >= 2 * 8 + 2
    bits, so that double rounding is innocuous). A NaN result is the canonical quiet NaN
    (0x7E00 / 0x7FC0), as the hardware gives."""
    a, b = np.asarray(a, np.uint16), np.asarray(b, np.uint16)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "fp16":
            s = (a.view(np.float16).astype(np.float64) + b.view(np.float16).astype(np.float64))
            out = s.astype(np.float16).view(np.uint16)
            return np.where(np.isnan(s), np.uint16(0x7E00), out)
        s = ((a.astype(np.uint32) << 16).view(np.float32)
             + (b.astype(np.uint32) << 16).view(np.float32))
        u = s.view(np.uint32).astype(np.uint64)
        out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        return np.where(np.isnan(s), np.uint16(0x7FC0), out)


def ring_golden(inputs, dtype, n, flit, size, order=None):
    """The result NCCL's ring gives for ``inputs`` (``n`` rows of uint16 bit patterns, ``size``
    bytes used): chunk ``c`` (:func:`chunks`) summed as ``((x[c+1] + x[c+2]) + ...) + x[c]``
    with :func:`add16`. ``order(c)`` replaces that rank order (a test's wrong order)."""
    out = np.zeros(size // 2, np.uint16)
    for c, (off, nbytes) in enumerate(chunks(size, n, flit)):
        cols = slice(off // 2, (off + nbytes) // 2)
        ranks = order(c) if order else [(c + k) % n for k in range(1, n + 1)]
        acc = inputs[ranks[0], cols]
        for q in ranks[1:]:
            acc = add16(acc, inputs[q, cols], dtype)
        out[cols] = acc
    return out


def ring_inputs(seed, n, size, dtype):
    """Random values of mixed magnitudes (``normal * 2**[-8, 8)``), so the order of the adds
    changes the result; finite, and far from overflow for any ``n`` up to 64."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, size // 2)) * 2.0 ** rng.integers(-8, 8, (n, size // 2)))
    if dtype == "fp16":
        return x.astype(np.float16).view(np.uint16)
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def run_ring_allreduce(cfg, hw, *, inputs=None, sim="verilator", seed=1, log=print):
    """Run one ring All-Reduce on ``hw`` (an :class:`~scin.sim.nvls_run.NvlsSystem`; the NVLS
    engine stays idle); return the report of
    :func:`~scin.sim.nvls_allreduce.run_nvls_allreduce` with ``algorithm: "ring"``: ``cycles``
    (module docstring), ``match`` (every rank's buffer equals :func:`ring_golden` bit for bit),
    ``status`` (the worst of every WRITE_DONE and KERNEL_DONE), the counters. ``inputs``: ``N``
    rows of ``size / 2`` uint16 patterns (default :func:`ring_inputs` of ``seed``)."""
    from ..hdl.endpoint.accelerator import EventKind
    from ..hdl.packet import FabricParams
    from .nvls_run import run_program
    if cfg.size <= 0 or cfg.size % 2:
        raise ValueError(f"size must be a positive even number of bytes, not {cfg.size!r}")
    f = FabricParams.default_for(flit_width=hw.flit_width, ports=hw.endpoints)
    n = hw.endpoints
    if inputs is None:
        inputs = ring_inputs(seed, n, cfg.size, cfg.dtype)
    commands, expect = program(cfg, hw, f.flit_bytes, f.max_payload)
    log(f"ring All-Reduce: {cfg}, {sum(expect.values())} commands, seed {seed}")
    loads = {r: [(0, inputs[r][:cfg.size // 2].tobytes())] for r in range(n)}
    budget = 200_000 + 100 * cfg.size // f.flit_bytes + 2000 * hw.one_way_latency
    out = run_program(hw, [], commands, expect, loads=loads, dump=(0, cfg.size), sim=sim,
                      seed=seed, timeout_cycles=budget, log=log)
    ev = out["events"]
    sent, flag = EventKind.SENT.value, EventKind.FLAG.value
    start = max(min(e["cycle"] for e in ev[r] if e["kind"] == sent) for r in range(n))
    end = max(e["cycle"] for r in range(n) for e in ev[r]
              if e["kind"] == flag and e["tag"] == FINAL_TAG)
    want = ring_golden(inputs, cfg.dtype, n, f.flit_bytes, cfg.size)
    images = [np.frombuffer(out["images"][r], np.uint16) for r in range(n)]
    bad = [r for r in range(n) if not np.array_equal(images[r], want)]
    status = max([e["status"] for r in range(n) for e in ev[r]
                  if e["kind"] in (EventKind.WRITE_DONE.value, EventKind.KERNEL_DONE.value)]
                 + [0])
    return {"op": "allreduce", "algorithm": "ring", "endpoints": n, "dtype": cfg.dtype,
            "size_bytes": cfg.size, "window": None, "slices": cfg.slices, "cycles": end - start,
            "start": start, "end": end, "match": not bad, "mismatched_ranks": bad,
            "status": status, "nvls_counters": out["nvls_counters"],
            "switch_errors": out["switch_errors"], "wall_seconds": out["wall_seconds"],
            "run_dir": out["run_dir"]}
