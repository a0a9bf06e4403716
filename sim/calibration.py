"""The calibration: the RTL's own cycles fitted to the benches' measurements, written to
``docs/bench/calibration.json``, and the model checked against every measured row.

What is calibrated and what is modelled
----------------------------------------
* **Calibrated from ``scin bench``** (:func:`fit_calibration`, ``docs/bench/bench.csv``): the
  per-packet control flits (fp16 and int8 slots), the RTL's own cycles of every operation at 4
  endpoints, the cycles each added level of the adder tree costs, the wave-regulation gap, the
  barrier and the INT8 store-and-forward constant. SCIN pull (fp16/bf16, INT8 INQ),
  ReduceScatter, AllGather, Broadcast, Reduce and the barrier are these calibrated forms.
* **Calibrated from ``scin compare``** (:func:`scin.sim.compare_fit.fit_compare`,
  ``docs/bench/compare.csv``): NVLS (NCCL's NVLS kernel on the switch's NVLS engine) and the
  ring (NCCL's simple protocol on the accelerator model), both measured cycle for cycle on the
  same RTL fabric. Their forms are the RTL's mechanism and only four own-cycle constants are
  fitted; ReduceScatter, AllGather, Broadcast and Reduce of NVLS and the ring are the same
  mechanism with their own packets (modelled, not measured here).
* **Calibrated from ``scin bench-push``** (:func:`fit_push`, ``docs/bench/push.csv``): SCIN
  *push* (each participant WRITEs its operand into the ISA's push space). Its form is the RTL's
  mechanism: the operand's one hop up, the reduction, the result's hop down with the flag behind
  it; no READ, no READ_RESP and no memory read inside the measured interval (the endpoint reads
  its operand before its first push WRITE leaves, where ``scin bench-push`` starts the clock), no
  wave regulation. Three own-cycle constants are fitted (``push_own``, ``push_int8_own``,
  ``push_level_cycles``); the form meets every push row to the cycle. Push of the other
  collectives (not measured) is the All-Reduce's saving applied to their own calibrated pull
  cycles.
"""

import math
import statistics
from dataclasses import replace
from pathlib import Path

from ..hdl.paper import CLOCK_MHZ, FLIT_BYTES, MEM_LATENCY, ONE_WAY_LATENCY
from .bench_csv import read_bench_csv, read_compare_csv, read_push_csv
from .compare_fit import fit_compare
from .fabric_model import (CALIBRATION_PATH, OPS, Calibration, Fabric, busiest_link_shards,
                           control_flits_of, extra_levels, packet_flits, packets, rtl_fabric)
from .scin_model import push_link_flits, scin_time

__all__ = ["fit_calibration", "fit_push", "write_calibration", "validate"]


def _per_slot_protocol(rows):
    """The rows the model is fitted to and checked against: the sweeps of the paper's per-slot
    protocol, not ``scin bench --parts trains`` (a study of the wave-level requests, whose
    per-slot rows repeat the size sweep's points at another commit), nor the op sweep's
    AllGathers in pairs of ranks (``gather_pairs``, not the paper's configuration)."""
    return [r for r in rows if r["part"] != "trains" and not r.get("gather_pairs")]


def _variable_cycles(row, f, control, int8_slot):
    """The size-dependent cycles of a measured row under the calibrated form (RTL fabric)."""
    op, size, n = row["op"], int(row["size"]), int(row["endpoints"])
    if op == "barrier":
        return 0
    if row["dtype"] == "int8":
        data = size // 2
        slots = max(1, -(-data // f.packet_bytes))
        last = data - (slots - 1) * f.packet_bytes
        last_flits = -(-last // f.flit_bytes) + -(-(last // 32) // f.flit_bytes)
        return (slots - 1) * int8_slot + 2 * last_flits
    return busiest_link_shards(op, n) * packet_flits(size, f, control)


def _wave_count_excess(row, f, control, gap_cycles):
    """Wave-boundary cycles of a measured row given the gap (cycles), as in _wave_gaps."""
    if row["dtype"] == "int8" or row["op"] == "barrier":
        return 0.0
    k, cap = int(row.get("waves", 8)), int(row.get("capacity", 32768))
    per_wave = cap // k // f.packet_bytes
    slot = f.packet_bytes // f.flit_bytes + 1 + control
    moved = busiest_link_shards(row["op"], int(row["endpoints"])) * int(row["size"])
    count = -(-packets(moved, f) // per_wave)
    return (count - 1) * max(0.0, (gap_cycles + per_wave * slot) / k - per_wave * slot)


def _slope(points):
    """Least-squares slope of (x, y) points."""
    xs, ys = zip(*points)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    if not den:
        raise ValueError("calibration needs at least two message sizes of one configuration")
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den


def fit_calibration(rows, source="", one_way_latency=ONE_WAY_LATENCY, mem_latency=MEM_LATENCY,
                    flit_bytes=FLIT_BYTES, clock_mhz=CLOCK_MHZ, packet_bytes=4096, compare=None,
                    compare_source="", push=None, push_source=""):
    """Fit a :class:`Calibration` to measured ``rows`` (``read_bench_csv``) taken on a link of
    the given latencies (cycles), flit, clock and packet size (default: the paper's,
    :mod:`scin.hdl.paper`), and its NVLS and ring constants to the
    ``scin compare`` rows ``compare`` (:func:`~scin.sim.bench_csv.read_compare_csv`; None:
    the nominal values).

    The per-packet link cost is the slope of cycles against packets of the fp16 (and int8)
    All-Reduce rows of 4 KiB and more, rounded to whole flits (a link moves whole flits). Then,
    for each (commit, op, in_place, dtype, endpoints), the fixed part is the median of cycles
    less the size-dependent part. The per-level cost is the difference of 8 and 4 endpoints at
    one commit; the wave gap comes from the one-wave rows. NVLS and ring:
    :func:`~scin.sim.compare_fit.fit_compare`.
    """
    f = Fabric("fit", link_bytes_per_s=flit_bytes * clock_mhz * 1e6,
               hop_s=one_way_latency / (clock_mhz * 1e6), mem_s=mem_latency / (clock_mhz * 1e6),
               isa_clock_hz=clock_mhz * 1e6, flit_bytes=flit_bytes, packet_bytes=packet_bytes)
    rows = _per_slot_protocol(rows)
    control, int8_slot = _slot_flits(rows, f)
    groups, singles = _fixed_groups(rows, f, control, int8_slot)
    fixed = {k: statistics.median(v) for k, v in groups.items()}
    wave_gap_own = _wave_gap_own(rows, fixed, f, control, int8_slot, one_way_latency,
                                 mem_latency)
    hops4 = 4 * one_way_latency + mem_latency
    own, own_commit = _own_cycles(rows, fixed, one_way_latency, hops4)
    int8_own, int8_single = _int8_own(fixed, singles, own, hops4)
    commits = list(dict.fromkeys(str(r.get("commit", "")) for r in rows))
    cal = Calibration(
        control_flits=control, int8_slot_flits=int8_slot,
        own={k: round(v, 3) for k, v in sorted(own.items())}, int8_own=round(int8_own, 3),
        level_cycles=round(_level_cycles(fixed), 3), wave_gap_own=round(wave_gap_own, 3),
        int8_single_slot_cycles=round(int8_single, 3), own_commit=own_commit,
        groups=[{"commit": k[0], "op": k[1], "in_place": k[2], "dtype": k[3], "endpoints": k[4],
                 "fixed_cycles": round(v, 3), "points": len(groups[k])}
                for k, v in sorted(fixed.items())],
        source=source, commits=commits, one_way_latency=one_way_latency,
        mem_latency=mem_latency, flit_bytes=flit_bytes, clock_mhz=clock_mhz,
        packet_bytes=packet_bytes)
    cal = fit_compare(compare, cal, compare_source) if compare else cal
    return fit_push(push, cal, push_source) if push else cal


def _slot_flits(rows, f):
    """``(control, int8_slot)``: the control flits per fp16 packet and the link flits per INT8
    slot, from the slope of cycles against slots of the steady All-Reduce rows of the size
    sweep (rounded to whole flits: a link moves whole flits)."""
    payload = f.packet_bytes // f.flit_bytes
    steady = [r for r in rows if r["op"] == "allreduce" and r.get("waves", 8) >= 2]

    def slot_cost(dtype, per_slot_bytes):
        pts = [(int(r["size"]) // per_slot_bytes, r["cycles"]) for r in steady
               if r["dtype"] == dtype and int(r["size"]) >= per_slot_bytes
               and int(r["size"]) % per_slot_bytes == 0 and r["part"] == "size"]
        return _slope(pts) if len({p[0] for p in pts}) >= 2 else None

    fp16_slot = slot_cost("fp16", f.packet_bytes)
    if fp16_slot is None:
        raise ValueError("calibration needs fp16 All-Reduce rows of at least two sizes that are "
                         "multiples of the packet size (part 'size')")
    control = round(fp16_slot) - payload - 1
    int8_slot_raw = slot_cost("int8", 2 * f.packet_bytes)
    int8_slot = round(int8_slot_raw) if int8_slot_raw is not None else \
        payload + -(-(f.packet_bytes // 32) // f.flit_bytes) + 2 * (1 + control)
    return control, int8_slot


def _group_key(r):
    """The configuration a row's fixed part belongs to: (commit, op, in_place, dtype,
    endpoints)."""
    return (str(r.get("commit", "")), r["op"], int(r.get("in_place", 0)), r["dtype"],
            int(r["endpoints"]))


def _fixed_of(row, f, control, int8_slot, gap_cycles):
    """A row's measured cycles less its size-dependent part and its wave-boundary cycles."""
    return row["cycles"] - _variable_cycles(row, f, control, int8_slot) \
        - _wave_count_excess(row, f, control, gap_cycles)


def _fixed_groups(rows, f, control, int8_slot):
    """``(groups, singles)``: each configuration's fixed parts (without the wave gap) of its
    rows whose waves overlap (>= 2), and of its one-slot INT8 rows apart."""
    groups, singles = {}, {}
    for r in rows:
        if r["dtype"] == "int8" and int(r["size"]) // 2 <= f.packet_bytes:
            singles.setdefault(_group_key(r), []).append(_fixed_of(r, f, control, int8_slot, 0.0))
        elif r.get("waves", 8) >= 2:
            groups.setdefault(_group_key(r), []).append(_fixed_of(r, f, control, int8_slot, 0.0))
    return groups, singles


def _wave_gap_own(rows, fixed, f, control, int8_slot, one_way_latency, mem_latency):
    """A wave's re-issue gap less a read round trip: the median over the one-wave rows of their
    excess over their own configuration's ``fixed`` part per wave boundary."""
    gaps = []
    for r in rows:
        if r.get("waves", 8) == 1 and _group_key(r) in fixed:
            per_wave = int(r["capacity"]) // f.packet_bytes
            count = -(-packets(int(r["size"]), f) // per_wave)
            if count > 1:
                excess = _fixed_of(r, f, control, int8_slot, 0.0) - fixed[_group_key(r)]
                gaps.append(excess / (count - 1))
    gap = statistics.median(gaps) if gaps else 2 * one_way_latency + mem_latency
    return gap - 2 * one_way_latency - mem_latency


def _level_cycles(fixed):
    """The cost of an adder-tree level: 8 endpoints against 4 at the same commit, op and
    dtype (median; 0 without such pairs)."""
    levels = []
    for (commit, op, ip, dtype, n), v in fixed.items():
        other = fixed.get((commit, op, ip, dtype, 4))
        if n > 4 and other is not None:
            levels.append((v - other) / (math.ceil(math.log2(n)) - 2))
    return statistics.median(levels) if levels else 0.0


def _own_cycles(rows, fixed, one_way_latency, hops4):
    """``(own, own_commit)``: every op's own cycles at 4 endpoints, each from its newest
    measurement (the op sweep's commit where the op has rows there, else the last commit the
    CSV lists for it), and the All-Reduce's commit."""
    newest = {}
    for r in rows:
        if int(r["endpoints"]) == 4 and not int(r.get("in_place", 0)) \
                and r["dtype"] in ("fp16", "bf16") and r.get("waves", 8) >= 2:
            if r["part"] == "op" or newest.get(r["op"], ("", False))[1] is False:
                newest[r["op"]] = (str(r.get("commit", "")), r["part"] == "op")
    own = {}
    for op, (commit, _) in newest.items():
        base = 2 * one_way_latency if op == "barrier" else hops4
        own[op] = fixed[(commit, op, 0, "fp16", 4)] - base
    missing = [op for op in OPS if op not in own]
    if missing:
        raise ValueError(f"calibration needs 4-endpoint fp16 rows of {', '.join(missing)}")
    return own, newest.get("allreduce", ("", False))[0]


def _int8_own(fixed, singles, own, hops4):
    """``(int8_own, int8_single)``: the INT8 All-Reduce's own cycles at 4 endpoints and what a
    one-slot INT8 All-Reduce takes over that form."""
    int8 = [v for (c, op, ip, d, n), v in fixed.items() if d == "int8" and n == 4]
    if not int8:
        raise ValueError("calibration needs 4-endpoint int8 All-Reduce rows")
    # The INT8 rows are of an older commit than the op sweep; carry the fp16 All-Reduce's
    # change between the two commits over to them (the datapath's latency moved both).
    int8_commit = next(c for (c, op, ip, d, n) in fixed if d == "int8")
    drift = own["allreduce"] - (fixed.get((int8_commit, "allreduce", 0, "fp16", 4), own["allreduce"]
                                          + hops4) - hops4)
    int8_own = statistics.median(int8) - hops4 + drift
    single = [statistics.median(v) - fixed[k] for k, v in singles.items() if k in fixed]
    return int8_own, statistics.median(single) if single else 0.0


def fit_push(rows, cal, source=""):
    """``cal`` with the push constants fitted to the push rows of ``scin bench-push``
    (:func:`read_push_csv`): ``push_own`` and ``push_int8_own`` are the medians over the
    4-endpoint rows of the measured cycles less 2 hops and the link flits (fp16: the packets'
    :func:`packet_flits`; int8: :func:`push_link_flits`), ``push_level_cycles`` the median of
    8 against 4 endpoints per added level. Constants without rows keep their value.

    Raises
    ------
    ValueError
        No push row to fit.
    """
    pushed = [r for r in rows if r["mode"] == "push"]
    if not pushed:
        raise ValueError("the push rows have no push-mode point to fit")
    f = rtl_fabric(cal)
    hops = 2 * cal.one_way_latency

    def link(r):
        share = int(r["size"])
        if r["dtype"] == "int8":
            return push_link_flits(share, f, cal)
        return packet_flits(share, f, control_flits_of(f, cal))

    own = {"fp16": [], "int8": []}
    at4 = {}
    for r in pushed:
        dtype = "int8" if r["dtype"] == "int8" else "fp16"
        if int(r["endpoints"]) == 4:
            own[dtype].append(r["cycles"] - hops - link(r))
            at4[(dtype, int(r["size"]))] = r["cycles"]
    levels = [(r["cycles"] - at4[(d, int(r["size"]))]) / extra_levels(int(r["endpoints"]))
              for r in pushed
              for d in ["int8" if r["dtype"] == "int8" else "fp16"]
              if int(r["endpoints"]) > 4 and (d, int(r["size"])) in at4]
    update = {}
    if own["fp16"]:
        update["push_own"] = round(statistics.median(own["fp16"]), 3)
    if own["int8"]:
        update["push_int8_own"] = round(statistics.median(own["int8"]), 3)
    if levels:
        update["push_level_cycles"] = round(statistics.median(levels), 3)
    commits = list(dict.fromkeys(str(r.get("commit", "")) for r in pushed if r.get("commit")))
    return replace(cal, **update, push_source=source, push_commits=commits,
                   push_points=len(pushed))

def _source_name(path, out):
    """``path`` relative to the tree that holds ``out``'s docs/bench/ (the calibration's usual
    place), else as given."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path(out).resolve().parents[2]).as_posix()
    except (ValueError, IndexError):
        return path.as_posix()


def write_calibration(bench_csv, out=CALIBRATION_PATH, compare_csv=None, push_csv=None):
    """Fit the calibration to ``bench_csv``, ``compare_csv`` and ``push_csv`` (None: the
    ``compare.csv`` / ``push.csv`` beside ``bench_csv``, if there is one) and write it as JSON
    to ``out``; return it. The RTL benches call this after writing their CSV (``scin study
    --calibrate`` does the same)."""
    bench_csv = Path(bench_csv)
    if compare_csv is None:
        compare_csv = bench_csv.with_name("compare.csv")
        compare_csv = compare_csv if compare_csv.exists() else None
    if push_csv is None:
        push_csv = bench_csv.with_name("push.csv")
        push_csv = push_csv if push_csv.exists() else None
    compare = read_compare_csv(compare_csv) if compare_csv is not None else None
    push = read_push_csv(push_csv) if push_csv is not None else None
    cal = fit_calibration(read_bench_csv(bench_csv), source=_source_name(bench_csv, out),
                          compare=compare,
                          compare_source=_source_name(compare_csv, out) if compare else "",
                          push=push, push_source=_source_name(push_csv, out) if push else "")
    Path(out).write_text(cal.to_json())
    return cal


def validate(rows, cal):
    """Model against RTL for every row of the per-slot protocol's sweeps (not ``scin bench
    --parts trains``): a list of dicts with the row's keys, ``model`` (cycles,
    from its own commit's fixed part), ``model_current`` (from the scale model's constants:
    :func:`scin_time` on :func:`rtl_fabric` of ``cal``) and their errors in percent.

    Raises
    ------
    ValueError
        A row whose (commit, op, dtype, endpoints) the calibration was not fitted to.
    """
    f = rtl_fabric(cal)
    gap = 2 * cal.one_way_latency + cal.mem_latency + cal.wave_gap_own
    fixed = {(g["commit"], g["op"], g["in_place"], g["dtype"], g["endpoints"]): g["fixed_cycles"]
             for g in cal.groups}
    out = []
    for r in _per_slot_protocol(rows):
        key = (str(r.get("commit", "")), r["op"], int(r.get("in_place", 0)), r["dtype"],
               int(r["endpoints"]))
        if key not in fixed:
            raise ValueError(f"the calibration has no fixed part for {r['op']} {r['dtype']} at "
                             f"{r['endpoints']} endpoints, commit {key[0]}: run `scin study "
                             f"--calibrate` after `scin bench`")
        single = r["dtype"] == "int8" and int(r["size"]) // 2 <= cal.packet_bytes
        model = fixed[key] + _variable_cycles(r, f, cal.control_flits, cal.int8_slot_flits) \
            + _wave_count_excess(r, f, cal.control_flits, gap) \
            + (cal.int8_single_slot_cycles if single else 0)
        current = f.cycles(scin_time(r["op"], int(r["size"]), int(r["endpoints"]), f, cal,
                                     r["dtype"], capacity=int(r.get("capacity", 32768)),
                                     waves=int(r.get("waves", 8))))
        out.append({**r, "model": model, "model_current": current,
                    "error_pct": 100 * (model - r["cycles"]) / r["cycles"],
                    "error_current_pct": 100 * (current - r["cycles"]) / r["cycles"]})
    return out
