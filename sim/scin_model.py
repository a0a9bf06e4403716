"""SCIN's closed forms: the time of a pull or push collective, fp16/bf16 or INT8, on a
:class:`~scin.sim.fabric_model.Fabric`, and its protocol ceiling.

The measured SCIN system is deterministic and its time is an affine function of the packets on
the busiest link (docs/PERFORMANCE.md): a fixed part (the one-way hops, the memory read and the
RTL's own cycles) plus, per 4 KiB packet, its payload flits, one header flit and one control flit
(the per-slot ``READ`` in and ``WRITE_RESP`` out sharing the data links). Push has no READ, no
READ_RESP and no memory read inside the measured interval and no wave regulation. The large-
message efficiency tends to the *protocol ceiling* ``P / (P + 1 + control)`` (``P`` payload
flits per packet). Times are in seconds.
"""

from .fabric_model import (MODES, RTL_FABRIC, busiest_link_shards, check_collective,
                           check_positive, control_flits_of, extra_levels, int8_slot_flits_of,
                           load_calibration, packet_flits, packets)

__all__ = ["scin_time", "protocol_ceiling", "push_link_flits"]


def protocol_ceiling(fabric, cal, dtype="fp16"):
    """The highest large-message efficiency SCIN's packet protocol allows on ``fabric``:
    payload flits over link flits per slot (int8: the FP16-equivalent payload, 2x)."""
    payload = fabric.packet_bytes // fabric.flit_bytes
    if dtype == "int8":
        return 2 * payload / int8_slot_flits_of(fabric, cal)
    return payload / (payload + 1 + control_flits_of(fabric, cal))


def scin_time(op, size, endpoints, fabric=RTL_FABRIC, cal=None, dtype="fp16", mode="pull",
              capacity=None, waves=8):
    """Seconds SCIN takes for one collective: last arrival leaving its endpoint to last
    completion flag seen (docs/PERFORMANCE.md's definition).

    Parameters
    ----------
    op : str
        One of :data:`OPS`.
    size : int
        Per-rank count in bytes, 16-bit form (NCCL's count; ReduceScatter ``recvcount``,
        AllGather ``sendcount``); INT8 moves half of it plus one FP16 scale per 64 elements.
    endpoints : int
        Participants (one per port of each plane).
    fabric : Fabric
    cal : Calibration
        Default: :func:`load_calibration`.
    dtype : str
        ``fp16``/``bf16`` or ``int8`` (INQ; All-Reduce only, as in the RTL).
    mode : str
        ``pull`` or ``push`` (each endpoint WRITEs its operand into the ISA's push space; no
        READ, READ_RESP or memory read in the interval, no wave regulation; calibrated from
        ``scin bench-push``).
    capacity, waves : int or None
        Wave table per participant (bytes) and outstanding waves; ``capacity=None`` assumes a
        table that covers the bandwidth-delay product (no wave gap).

    Pull All-Reduce (exact for the RTL)::

        T = 4 hop + mem + own(op, N) + sum over the busiest link's packets of
            (payload flits + 1 + control) + wave gaps

    Push All-Reduce (exact for every row of ``scin bench-push``)::

        T = 2 hop + (push_own + push_level x (ceil(log2 N) - 2)) c + the same packets' flits
    """
    cal = cal or load_calibration()
    check_collective(op, size, endpoints)
    if dtype not in ("fp16", "bf16", "int8"):
        raise ValueError(f"dtype must be fp16, bf16 or int8, not {dtype!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if dtype == "int8" and op != "allreduce":
        raise ValueError(f"int8 (INQ) is an All-Reduce mode, not one of {op!r}")
    if size % 2:
        raise ValueError(f"size must be an even number of bytes (elements x 2), not {size}")
    f, c = fabric, fabric.isa_cycle_s
    L, M = f.hop_s, f.mem_s
    if op == "barrier":
        return 2 * L + cal.own["barrier"] * c
    # Measured for the All-Reduce only (4 against 8 endpoints); applied to every data
    # operation, since all of them pass the round robins and the copies the datapath's FIFO.
    level = cal.level_cycles * extra_levels(endpoints)
    share = -(-size // f.planes)
    share += share % 2
    if dtype == "int8":
        if mode == "push":
            own = cal.push_int8_own + cal.push_level_cycles * extra_levels(endpoints)
            return 2 * L + own * c + push_link_flits(share, f, cal) * f.flit_s
        return _scin_int8(share, endpoints, f, cal, level, mode)
    control = control_flits_of(f, cal)
    shards = busiest_link_shards(op, endpoints)
    link = shards * packet_flits(share, f, control) * f.flit_s
    if mode == "push":
        # Push: the operand's WRITEs up (one hop; the endpoint read its operand before the
        # first one left, where the interval starts), the reduction, the result down with the
        # flag behind it (one hop). No READ, READ_RESP or memory read, and no wave table to
        # regulate. Other collectives than the All-Reduce (not measured pushed) save what the
        # All-Reduce saves of its own cycles.
        own = cal.own[op] - (cal.own["allreduce"] - cal.push_own) \
            + cal.push_level_cycles * extra_levels(endpoints)
        return 2 * L + own * c + link
    own = (cal.own[op] + level) * c
    fixed = 4 * L + M + own
    return fixed + link + _wave_gaps(share * shards, f, cal, capacity, waves, control)


def _scin_int8(share, endpoints, f, cal, level, mode):
    # INQ: a slot is packet_bytes of INT8 data (packet_bytes fp16-equivalent x 2) and its
    # scales. Slots before the last stream at int8_slot_flits each; the last crosses the ISA
    # store-and-forward (its data and scales in, then out), because the quantizer needs a
    # block's scale before the block leaves and the scales travel after the data.
    data = share // 2
    slot = f.packet_bytes
    n = max(1, -(-data // slot))
    last = data - (n - 1) * slot
    last_flits = -(-last // f.flit_bytes) + -(-(last // 32) // f.flit_bytes)
    link = ((n - 1) * int8_slot_flits_of(f, cal) + 2 * last_flits) * f.flit_s
    own = (cal.int8_own + level + (cal.int8_single_slot_cycles if n == 1 else 0)) \
        * f.isa_cycle_s
    return 4 * f.hop_s + f.mem_s + own + link


def push_link_flits(share, f, cal):
    """Link flits of an INT8 push All-Reduce of ``share`` bytes (16-bit form) beyond its fixed
    part: every slot's ``d`` data flits and twice its ``s`` scale flits (the block scales are not
    streamed under the data: ``scin bench-push`` adds 2 cycles per scale flit), and, for every
    slot but the last, its two packets' headers and control flits (the last slot's are in
    ``push_int8_own``). 140 flits per full 4 KiB INT8 slot."""
    data = share // 2
    slot = f.packet_bytes
    n = max(1, -(-data // slot))
    flits = 0
    for k in range(n):
        piece = min(slot, data - k * slot)
        flits += -(-piece // f.flit_bytes) + 2 * -(-(piece // 32) // f.flit_bytes)
    return flits + (n - 1) * 2 * (1 + control_flits_of(f, cal))


def _wave_gaps(moved, f, cal, capacity, waves, control):
    """Extra seconds of wave regulation: ``waves`` outstanding waves of ``capacity / waves``
    each; a wave's slots are re-issued a read round trip (``2 hop + mem + wave_gap_own``)
    after release, so each wave boundary costs ``max(0, (gap + w slot) / k - w slot)``."""
    if capacity is None:
        return 0.0
    check_positive("capacity", capacity, int)
    check_positive("waves", waves, int)
    per_wave = capacity // waves // f.packet_bytes
    if per_wave < 1:
        raise ValueError(f"capacity / waves must hold at least one {f.packet_bytes}-byte slot, "
                         f"not {capacity} / {waves}")
    slot = (f.packet_bytes // f.flit_bytes + 1 + control) * f.flit_s
    gap = 2 * f.hop_s + f.mem_s + cal.wave_gap_own * f.isa_cycle_s
    count = -(-packets(moved, f) // per_wave)
    excess = max(0.0, (gap + per_wave * slot) / waves - per_wave * slot)
    return (count - 1) * excess

