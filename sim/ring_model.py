"""The ring's closed form: NCCL's ring (simple protocol) through the switch, as
sim/ring_allreduce.py runs the All-Reduce on the RTL fabric and ``scin compare`` measures it.

The ranks' programs (:func:`_ring_program`) are followed event by event, a max-plus recurrence
over at most ``N x 4N`` commands (:class:`_RingSchedule`); a command's cost is the RTL's
mechanism (hops, packets, the accelerator's adder and read port, atomics one at a time) and the
accelerator's command gaps (:data:`RING_GAPS`). Two own-cycle constants
(``Calibration.ring_slice_own``, ``ring_signal_own``) are fitted by
:func:`scin.sim.compare_fit.fit_compare`. Times are in seconds.
"""

import math

from .fabric_model import RTL_FABRIC, atomic_seconds, check_collective, load_calibration

__all__ = ["ring_time", "RING_SLICES", "RING_SLOTS", "RING_GAPS", "RING_ADDER_CYCLES"]

#: ALLREDUCE_SLICESTEPS``) and staging slots per rank (``NCCL_STEPS / ALLREDUCE_SLICESTEPS``).
RING_SLICES = 2
RING_SLOTS = 4
#: The accelerator's command processor: cycles from one event of a rank's program to the next
#: (``done``: a REDUCE_SEND's last acknowledgement; ``flag``: a WAIT_FLAG satisfied; ``red``: a
#: posted flag sent) when nothing else waits, from the event trace of the ring runs (SENT,
#: FLAG and KERNEL_DONE cycles). REDUCE_SEND's adder is a two-member NvlsReducer: 2 + 4 cycles
#: before its first sum.
RING_GAPS = {("done", "red"): 5, ("done", "send"): 5, ("done", "wait"): 2,
             ("flag", "red"): 3, ("flag", "send"): 5, ("flag", "wait"): 3,
             ("red", "red"): 3, ("red", "send"): 4, ("red", "wait"): 2,
             ("start", "red"): 0, ("start", "send"): 0, ("start", "wait"): 2}
RING_ADDER_CYCLES = 6


def _ring_program(op, share, n, flit, slices=RING_SLICES, slots=RING_SLOTS):
    """Every rank's commands, as sim/ring_allreduce.py issues them for the All-Reduce and NCCL's
    ring runs the other collectives (rank ``r`` sends to ``r + 1`` and receives from ``r - 1``):

    * ``("wait", stream, k)``: until the ``k``-th flag of ``stream`` (``"tail"``: a slice
      received; ``"head"``: a staging slot returned) has been added to this rank's memory;
    * ``("send", kind, bytes)``: a REDUCE_SEND, fenced: ``copy``, ``reduce`` (plus the slice
      received), ``reduce+local`` (and the sum over its own data too), ``copy+local``,
      ``local-reduce`` (the sum to its own memory only);
    * ``("red", stream)``: a flag to the next rank (``tail``) or a slot back to the previous
      one (``head``), posted.
    """
    def cut(nbytes):
        return _split_flits(nbytes, slices, flit) if nbytes else [0] * slices

    if op == "allreduce":
        chunk = [cut(b) for b in _split_flits(share, n, flit)]
        return [_ring_allreduce_rank(r, n, chunk, slots, (n - 1) * slices) for r in range(n)]
    if op in ("reduce-scatter", "allgather"):
        # Chunks of ``share`` bytes (NCCL's recvcount / sendcount), N - 1 steps each way.
        pieces = cut(share)
        return [_ring_shard_rank(op, r, n, pieces, slots, (n - 1) * slices) for r in range(n)]
    # Broadcast from rank 0 along 0 -> 1 -> ... -> N-1, Reduce to rank 0 along 1 -> ... -> 0:
    # the buffer in N chunks of slices (the All-Reduce's granularity), pipelined down the chain.
    pieces = [p for b in _split_flits(share, n, flit) for p in cut(b)]
    order = list(range(n)) if op == "broadcast" else [(k + 1) % n for k in range(n)]
    position = {rank: k for k, rank in enumerate(order)}
    return [_ring_chain_rank(op, position[r], n, pieces, slots) for r in range(n)]


def _split_flits(nbytes, pieces, flit):
    """``nbytes`` in ``pieces`` runs of whole flits, the first ones a flit longer."""
    base, extra = divmod(-(-nbytes // flit), pieces)
    out, at = [], 0
    for k in range(pieces):
        end = min(at + (base + (k < extra)) * flit, nbytes)
        out.append(end - at)
        at = end
    return out


class _Commands:
    """One rank's command list as it is written: ``got`` slices received, ``sent`` staging
    slots taken at the next rank, ``used`` slots of this rank's staging returned (of ``staged``
    in all; the last ``slots`` are never returned)."""

    def __init__(self, slots, staged):
        self.cmds, self.got, self.sent, self.used = [], 0, 0, 0
        self.slots, self.staged = slots, staged

    def receive(self):
        """Wait for the previous rank's flag of the next slice."""
        self.got += 1
        self.cmds.append(("wait", "tail", self.got))

    def take_slot(self):
        """Take a staging slot at the next rank, waiting for it to come back once all are out."""
        if self.sent >= self.slots:
            self.cmds.append(("wait", "head", self.sent - self.slots + 1))
        self.sent += 1

    def send(self, kind, nbytes):
        """A REDUCE_SEND of ``nbytes`` (none for an empty slice)."""
        if nbytes:
            self.cmds.append(("send", kind, nbytes))

    def flag(self):
        """Flag the slice to the next rank."""
        self.cmds.append(("red", "tail"))

    def return_slot(self):
        """Give a staging slot back to the previous rank, unless it is never needed again."""
        if self.used + self.slots < self.staged:
            self.cmds.append(("red", "head"))
        self.used += 1


def _ring_allreduce_rank(r, n, chunk, slots, staged):
    """Rank ``r``'s All-Reduce commands: ``2 N - 1`` steps over the slices of ``chunk``."""
    rank = _Commands(slots, staged)
    for step in range(2 * n - 1):
        if step < n:
            c = (r - 1 - step) % n
        else:
            c = (r - (step - n + 1)) % n if step < 2 * n - 2 else (r + 1) % n
        for nbytes in chunk[c]:
            if step:
                rank.receive()
            if step == 2 * n - 2:
                continue
            if step < n - 1:
                rank.take_slot()
            rank.send("copy" if step == 0 or step >= n else
                      "reduce+local" if step == n - 1 else "reduce", nbytes)
            rank.flag()
            if 1 <= step <= n - 1:
                rank.return_slot()
    return rank.cmds


def _ring_shard_rank(op, r, n, pieces, slots, staged):
    """Rank ``r``'s ReduceScatter or AllGather commands: ``N`` steps over ``pieces``."""
    rank = _Commands(slots, staged)
    for step in range(n):
        for nbytes in pieces:
            if step:
                rank.receive()
            if op == "allgather":
                if step < n - 1:
                    rank.send("copy+local" if step == 0 else "copy", nbytes)
                    rank.flag()
                continue
            if step < n - 1:
                rank.take_slot()
                rank.send("copy" if step == 0 else "reduce", nbytes)
                rank.flag()
            else:
                rank.send("local-reduce", nbytes)
            if step >= 1:
                rank.return_slot()
    return rank.cmds


def _ring_chain_rank(op, k, n, pieces, slots):
    """The commands of the rank at position ``k`` of a Broadcast's or Reduce's chain."""
    rank = _Commands(slots, len(pieces))
    for nbytes in pieces:
        if k:
            rank.receive()
        if k == n - 1:
            if op == "reduce":
                rank.send("local-reduce", nbytes)
        else:
            if op == "reduce":
                rank.take_slot()
            rank.send("copy" if op == "broadcast" or not k else "reduce", nbytes)
            rank.flag()
        if op == "reduce" and k:
            rank.return_slot()
    return rank.cmds


def _ring_send(kind, nbytes, f, cal):
    """``(seconds, link flits)`` of one REDUCE_SEND's packets before its fence, and whether it
    crosses the link (a local-only one does not on a GPU)."""
    t, c = f.flit_s, f.isa_cycle_s
    full, rest = divmod(nbytes, f.packet_bytes)
    data = -(-nbytes // f.flit_bytes)
    link = data + full + (1 if rest else 0)           # payload and a header per packet
    adder = RING_ADDER_CYCLES * c
    if f.gpu_endpoints:
        # A GPU adds at the link's rate and stores its own copy locally.
        return (data * t if kind == "local-reduce" else link * t), link
    if kind == "copy":
        return link * t, link
    if kind == "copy+local":
        return 2 * link * t, link
    if kind in ("reduce", "local-reduce"):
        # One local read port: two reads per result flit; the header rides in the gap.
        return 2 * data * t + adder, link
    # reduce+local: each packet's sums to the next rank, then sent again to itself.
    return 3 * data * t + adder, link


def ring_time(op, size, endpoints, fabric=RTL_FABRIC, cal=None):
    """Seconds NCCL's ring takes through the switch (simple protocol), as sim/ring_allreduce.py
    runs the All-Reduce on the RTL fabric (calibrated against ``scin compare``): from the first
    packet to the last rank seeing its last slice's flag.

    The message (All-Reduce) is cut in ``N`` chunks of ``RING_SLICES`` slices; ``2 (N - 1)``
    steps (ReduceScatter and AllGather ``N - 1``; Broadcast and Reduce a chain of ``N - 1``
    ranks, pipelined slice by slice). A slice is one REDUCE_SEND, fenced (every WRITE
    acknowledged), then a flag (an atomic add) on the next rank's memory::

        slice = 4L + s + max(body, hold + link flits)   (hold: only behind a flag to that memory)
        flag seen = sent + 2L + a + g

    ``body`` is the slice's packets: a copy one flit per flit time plus a header per 4 KiB; the
    accelerator's addition two flit times per result flit (one local read port), and the final
    reduction of the All-Reduce sends its result again to its own memory, through the switch
    (GPUs, ``gpu_endpoints``: all at the link's rate, local copies local). A WRITE right behind a
    flag to the same memory waits for the atomic's read (the bridge holds writes meanwhile). A
    rank waits for the previous rank's flag of a slice and, reusing a staging slot, for the
    next rank to have returned it; the rest is the accelerator's command cycles
    (:data:`RING_GAPS`). ``s``, ``g`` and the atomic are calibrated. The ranks' programs are
    followed event by event (a max-plus recurrence over at most ``N x 4N`` commands), so
    empty and unequal slices of small messages cost what they cost in the RTL.
    """
    cal = cal or load_calibration()
    check_collective(op, size, endpoints)
    if op == "barrier":
        raise ValueError("a ring has no barrier of its own; use op='allreduce' of one element")
    programs = _ring_program(op, -(-size // fabric.planes), endpoints, fabric.flit_bytes)
    return _RingSchedule(programs, fabric, cal).run()


#: A rank's last event, the row of :data:`RING_GAPS` the next command's gap is taken from.
_EVENTS = ("start", "done", "flag", "red")


class _RingSchedule:
    """The ranks' ``programs`` followed event by event on fabric ``f`` with calibration ``cal``:
    each rank runs until it waits for a flag not yet seen; :meth:`run` repeats over the ranks
    until none moves and returns when the last rank finished (seconds)."""

    def __init__(self, programs, f, cal):
        c = f.isa_cycle_s
        self.programs, self.f, self.n = programs, f, len(programs)
        self.a = atomic_seconds(f, cal)
        self.hold = max(0.0, self.a - cal.atomic_own * c)
        # To the atomic's start at the receiver.
        self.signal = 2 * f.hop_s + self.a + cal.ring_signal_own * c - self.a
        # Gaps by (previous event, next command), in seconds.
        self.gap = [[RING_GAPS[(e, k)] * c for k in ("wait", "send", "red")] for e in _EVENTS]
        self.cal, self.base, self.sends = cal, cal.ring_slice_own * c, {}
        self.tail = [[] for _ in range(self.n)]         # when each flag became visible at rank r
        self.head = [[] for _ in range(self.n)]
        self.now = [0.0] * self.n
        self.last = [0] * self.n                        # index of the last event in _EVENTS
        self.last_flag = [-math.inf] * self.n           # when rank r last flagged rank r + 1
        self.pc = [0] * self.n

    def run(self):
        moved = True
        while moved:
            moved = False
            for r in range(self.n):
                moved |= self._advance(r)
        if any(self.pc[r] < len(self.programs[r]) for r in range(self.n)):
            raise RuntimeError("ring schedule deadlocked (a staging slot never returned)")
        return max(self.now)

    def _advance(self, r):
        """Run rank ``r`` up to its first unmet wait; whether it moved."""
        cmds, k, clock, prev = self.programs[r], self.pc[r], self.now[r], self.last[r]
        while k < len(cmds):
            cmd = cmds[k]
            if cmd[0] == "wait":
                flags = self.tail[r] if cmd[1] == "tail" else self.head[r]
                if len(flags) < cmd[2]:
                    break
                clock, prev = max(clock + self.gap[prev][0], flags[cmd[2] - 1]), 2
            elif cmd[0] == "send":
                clock, prev = self._send(r, cmd[1], cmd[2], clock + self.gap[prev][1]), 1
            else:
                clock, prev = self._flag(r, cmd[1], clock + self.gap[prev][2]), 3
            k += 1
        if k == self.pc[r]:
            return False
        self.pc[r], self.now[r], self.last[r] = k, clock, prev
        return True

    def _send(self, r, kind, nbytes, start):
        """When rank ``r``'s REDUCE_SEND of ``nbytes`` started at ``start`` is fenced."""
        f = self.f
        key = (kind, nbytes)
        if key not in self.sends:
            body, link = _ring_send(kind, nbytes, f, self.cal)
            local = kind == "local-reduce"
            hops = 0.0 if local and f.gpu_endpoints else 4 * f.hop_s
            self.sends[key] = (body, link * f.flit_s, hops + self.base, local)
        body, link, fixed, local = self.sends[key]
        if not local and start - self.last_flag[r] < self.a:
            # Right behind its flag to the same memory: the WRITEs wait for the atomic's read
            # there, then drain at the link's rate.
            body = max(body, self.hold + link)
        return start + fixed + body

    def _flag(self, r, stream, clock):
        """Rank ``r`` posts a flag of ``stream`` at ``clock``; returns ``clock``."""
        if stream == "tail":
            self.last_flag[r] = clock
            flags = self.tail[(r + 1) % self.n]
        else:
            flags = self.head[(r - 1) % self.n]
        # Flags from one sender reach a memory in order; each waits for the one before it (the
        # bridge serves atomics one at a time).
        flags.append(max(clock + self.signal, flags[-1] if flags else 0.0) + self.a)
        return clock
