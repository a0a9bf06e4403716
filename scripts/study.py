"""``scin study``: the calibrated system model at NVLink-class scale and in LLM inference.

Reads the calibration (``docs/bench/calibration.json``, fitted from ``docs/bench/bench.csv`` and
``docs/bench/compare.csv`` by :func:`scin.sim.calibration.write_calibration`; ``--calibrate``
fits it again first) and writes the ``scale`` section of ``docs/SCALE.md`` (between its markers;
the file is created if missing): the validation of the model against every RTL point of both
CSVs (SCIN from ``scin bench``; SCIN, NVLS and ring from ``scin compare``), the parameters and
their sources, the scale tables (8 to 72 ports, 1 or 18 planes), the growth of SCIN's resources
with ports, and TTFT/TPOT over NVLS for six models at TP 4 and 8 (:mod:`scin.sim.llm`), with the
plots and CSVs under ``docs/scale/``. No RTL runs: the whole study takes seconds.
"""

import csv
import math
import sys
import time
from pathlib import Path

from ..hdl.paper import FLIT_BYTES, MEM_LATENCY
from ..sim import llm
from ..sim.bench_csv import read_bench_csv, read_compare_csv, read_push_csv
from ..sim.calibration import validate, write_calibration
from ..sim.closed_forms import collective_time
from ..sim.compare_fit import validate_compare
from ..sim.fabric_model import (CALIBRATION_PATH, COMPARE_PATH, NVLINK_ATOMIC_S, NVLINK_HOP_S,
                                NVLINK_ISA_HZ, NVLINK_MEM_S, PUSH_PATH, Fabric, bus_bandwidth,
                                load_calibration, nvlink_fabric, packet_flits, rtl_fabric)
from ..sim.nvls_model import (NVLS_BARRIER_OWN, NVLS_ISSUE_CYCLES, NVLS_PACKET_BYTES,
                              NVLS_REQUEST_CYCLES, NVLS_SEQUENCER_CYCLES, NVLS_WINDOW,
                              nvls_ceiling, nvls_time)
from ..sim.ring_model import RING_SLICES
from ..sim.scin_model import protocol_ceiling, scin_time
from ..sim.toolchain import REPO_ROOT
from .docs_section import current_commit, rewrite_section
from .options import add_out_doc, doc_folder, doc_target, real
from .outputs import replacing
from .plotting import finish, pyplot, series_style

SECTION = "scale"
#: The tracked document and folder ``scin study --doc`` writes.
SCALE_DOC = REPO_ROOT / "docs" / "SCALE.md"
SCALE_FOLDER = REPO_ROOT / "docs" / "scale"
TITLE = "Scale: from the RTL to NVLink-class planes and LLM inference"
PORTS = (8, 16, 32, 72)
PLANES = (1, 18)
SIZES = (8 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20)
PLOT_SIZES = [1 << k for k in range(10, 31)]
SYSTEMS = ("scin", "scin-push", "scin-inq", "nvls", "ring")
SYSTEM_NAMES = {"scin": "SCIN pull", "scin-push": "SCIN push", "scin-inq": "SCIN INQ (int8)",
                "scin-inq-push": "SCIN INQ push", "nvls": "NVLS", "ring": "ring"}
BATCHES = (1, 2, 4, 8, 16, 32, 64)
PROMPTS = (512, 1024, 2048, 4096, 8192)
TPS = (4, 8)
HOP_SWEEP_NS = (100, 360, 600)
WAVES = (1, 2, 4, 8, 16)
PAPER = {"ttft": 1.42, "tpot": 1.12, "decode_fraction": 0.19}
#: The ISA and datapath synthesized at 4 and 8 ports (256-bit flits), docs/RESOURCES.md.
RESOURCES_CSV = REPO_ROOT / "docs" / "resources" / "resources.csv"


def hgx_h200(hop_s=NVLINK_HOP_S, mem_s=NVLINK_MEM_S):
    """The LLM study's fabric: an 8-GPU HGX H200, NVLink 4 (450 GB/s per direction per GPU)
    through 4 NVSwitch chips, taken as 4 equal planes (the 18 links split 5/4/4/5); GPUs as
    endpoints and an NVLS engine serving every port at once, as :func:`nvlink_fabric`."""
    return Fabric("HGX H200: NVLink 4, 450 GB/s per direction, 4 NVSwitch planes", 450e9, hop_s,
                  mem_s, NVLINK_ISA_HZ, planes=4, atomic_s=NVLINK_ATOMIC_S, gpu_endpoints=True,
                  nvls_per_port=True)


def _us(s):
    return f"{s * 1e6:,.2f}"


def _size(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def _table(head, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(head) - 1)
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


# --- sections -------------------------------------------------------------------------------------

def validation_section(cal, bench_csv):
    rows = validate(read_bench_csv(bench_csv), cal)
    worst = max(rows, key=lambda r: abs(r["error_pct"]))
    worst_cur = max(rows, key=lambda r: abs(r["error_current_pct"]))
    body = []
    for r in rows:
        op = r["op"] + (":in-place" if r.get("in_place") else "")
        body.append([r["part"], op, r["dtype"], r["size"], r["endpoints"],
                     f"{r['capacity'] // 1024} KiB / {r['waves']}", r.get("commit", ""),
                     f"{r['cycles']:,.0f}", f"{r['model']:,.0f}", f"{r['error_pct']:+.2f}",
                     f"{r['model_current']:,.0f}", f"{r['error_current_pct']:+.2f}"])
    n8 = [r for r in rows if r["endpoints"] == 8]
    text = [
        "## Validation: the model against every RTL point", "",
        f"Every row of `{cal.source}` ({len(rows)} points, commits {', '.join(cal.commits)}): "
        "4 and 8 endpoints, fp16 and int8, 64 B to 16 MiB, 1 to 16 waves, 16 to 128 KiB tables, "
        "and the whole collective set. *model*: the closed form with the fixed part fitted to "
        "the row's own commit (the RTL changed by a few cycles between the sweeps' commits, "
        "docs/PERFORMANCE.md); *current*: the scale model's constants (the newest commit, "
        f"{cal.own_commit}), as `scin_time` computes them for the RTL fabric.", "",
        f"- **Largest difference, model: {worst['error_pct']:+.2f}%** "
        f"({worst['dtype']} {worst['size']} B, {worst['cycles']:.0f} measured against "
        f"{worst['model']:.0f}). The form costs every INT8 slot but the last at the streaming "
        "rate and the last store-and-forward, with one constant fitted to the one-slot and "
        "one to the longer messages; the two-slot message sits 3 cycles above the longer "
        "ones' constant (where the RTL spends them was not traced hop by hop: the trace "
        "takes fp16 only). Every other point is exact to the cycle.",
        f"- **Largest difference, current constants: {worst_cur['error_current_pct']:+.2f}%** "
        f"({worst_cur['part']} {worst_cur['dtype']} {worst_cur['size']} B at "
        f"{worst_cur['endpoints']} endpoints). The 8-endpoint rows were measured at commit "
        f"{n8[0]['commit'] if n8 else '-'}, before the datapath lost 7 and then 2 cycles of "
        "latency (docs/PERFORMANCE.md): their fixed part is 9 cycles over the current one, "
        "which is "
        "2% of the smallest message's 456 cycles and nothing at 1 MiB. The size and waves rows "
        "(commit 272b855) are 2 cycles over it for the same reason.", "",
        _table(["part", "op", "dtype", "size (B)", "N", "table / waves", "commit", "RTL cycles",
                "model", "error %", "current", "error %"], body,
               ["---"] * 3 + ["---:"] * 2 + ["---"] * 2 + ["---:"] * 5)]
    return "\n".join(text), rows


#: Side runs of the NVLS All-Reduce with other windows than scin compare's 8 (N = 4, the RTL of
#: commit 0c056f3, the paper latency model: `scin compare --endpoints 4 --algorithms nvls
#: --window W`), to show the window mechanism: {(size, window): cycles}. Not in compare.csv.
WINDOW_RUNS = {(262144, 1): 31482, (262144, 2): 21470, (262144, 4): 12817, (262144, 6): 12538,
               (262144, 8): 12490, (262144, 12): 12404, (262144, 16): 12356,
               (1048576, 8): 45872, (1048576, 16): 45539}


def _worst(rows):
    return max(rows, key=lambda r: abs(r["error_pct"])) if rows else None


def push_section(cal, push_csv):
    """The model against every row of ``scin bench-push``'s CSV (pull and push), with what the
    hop-table push form used before this calibration gave."""
    f = rtl_fabric(cal)
    c = f.isa_cycle_s
    body, worst, moved = [], 0, []
    for r in read_push_csv(push_csv):
        n, size, dtype, mode = int(r["endpoints"]), int(r["size"]), r["dtype"], r["mode"]
        model = f.cycles(scin_time("allreduce", size, n, f, cal, dtype, mode=mode))
        old = ""
        if mode == "push":
            worst = max(worst, abs(model - r["cycles"]))
            if dtype != "int8":
                # The hop-table form this calibration replaced: 2L + M + (own - 10) c + pk(S) t.
                levels = max(0, (n - 1).bit_length() - 2)
                prev = f.cycles(2 * f.hop_s + f.mem_s + (cal.own["allreduce"] + cal.level_cycles
                                                         * levels - 10) * c
                                + packet_flits(size, f, cal.control_flits) * f.flit_s)
                old = str(prev)
                moved.append(model - prev)
        body.append([n, dtype, _size(size), mode, r["cycles"], model,
                     f"{model - r['cycles']:+d}", old])
    text = ["## Validation against `scin bench-push`", "",
            f"Every row of `{push_csv.name}` (`scin bench-push`, commit(s) "
            f"{', '.join(cal.push_commits) or '-'}; All-Reduce, paper latency model) against "
            f"the model. Push rows: the calibrated push form, **largest difference {worst} "
            "cycle(s)**. Pull rows: the pull form of `scin bench`, which those runs exceed by "
            "1 cycle (the push space's packet arbiter in front of the read-response queue, "
            "docs/PERFORMANCE.md) and, for INT8 from 16 KiB, by 2-4 cycles (the INT8 rows of "
            "`bench.csv` are of an older commit). `before` is the hop-table push form this "
            "calibration replaced (`2L + M + (own - 10) c + pk(S) t`; fp16 only: its INT8 form "
            f"also stored the last slot); the push figures moved by {min(moved, default=0):+d} "
            f"to {max(moved, default=0):+d} cycles. Push is faster than pull at every row, "
            "measured and modelled (no crossover up to the 32 KiB push space).", "",
            _table(["N", "dtype", "size", "mode", "RTL (cycles)", "model", "model - RTL",
                    "before"], body, ["---:", "---", "---:", "---", "---:", "---:", "---:",
                                      "---:"])]
    return "\n".join(text)


def compare_section(cal, compare_csv):
    """The model against every row of ``scin compare``'s CSV: the table, a summary per
    algorithm and endpoint count, the window side runs, and what the largest differences are."""
    rows = validate_compare(read_compare_csv(compare_csv), cal)
    costed = [r for r in rows if r["model"] is not None]
    groups = {}
    for r in costed:
        groups.setdefault((r["algorithm"], r.get("op", "allreduce"), int(r["endpoints"])),
                          []).append(r)
    summary = []
    for (alg, op, n), sel in sorted(groups.items()):
        w = _worst(sel)
        within2 = sum(abs(r["error_pct"]) <= 2 for r in sel)
        summary.append([alg, op, n, len(sel), f"{w['error_pct']:+.2f}% ({_size(int(w['size']))})",
                        f"{sum(abs(r['error_pct']) for r in sel) / len(sel):.2f}%",
                        f"{within2} / {len(sel)}"])
    body = []
    for r in rows:
        window = r.get("window", "") if r["algorithm"] == "nvls" else ""
        body.append([r["algorithm"], r.get("op", "allreduce"), r["endpoints"], f"{int(r['size'])}",
                     window, r.get("commit", ""), f"{r['cycles']:,.0f}",
                     "-" if r["model"] is None else f"{r['model']:,.0f}",
                     "-" if r["error_pct"] is None else f"{r['error_pct']:+.2f}"])
    f = rtl_fabric(cal)
    side, side_error = [], {}
    for (size, window), cycles in sorted(WINDOW_RUNS.items()):
        model = nvls_time("allreduce", size, 4, f, cal, window=window) * f.isa_clock_hz
        side_error[size, window] = 100 * (model - cycles) / cycles
        side.append([_size(size), window, f"{cycles:,}", f"{model:,.0f}",
                     f"{side_error[size, window]:+.2f}"])
    nvls = [r for r in costed if r["algorithm"] == "nvls"]
    ring = [r for r in costed if r["algorithm"] == "ring"]
    n4 = [r for r in nvls if int(r["endpoints"]) == 4 and int(r["size"]) >= 1 << 20]
    others = [r for r in nvls if r not in n4]
    fitted = [r for r in costed if r["algorithm"] in ("nvls", "ring")]
    text = [
        "## Validation against `scin compare`: SCIN, NVLS and ring on one RTL fabric", "",
        f"Every row of `{cal.compare_source or 'docs/bench/compare.csv'}` ({len(rows)} points, "
        f"commit{'s' if len(cal.compare_commits) > 1 else ''} "
        f"{', '.join(cal.compare_commits) or '-'}): each a simulation of the RTL checked bit for "
        "bit (docs/COMPARISON.md). *model*: SCIN from the calibrated form above (`scin_time`), "
        "NVLS from `nvls_time` with the row's window, the ring from `ring_time`, on the same "
        f"fabric ({cal.one_way_latency}-cycle hops, {cal.mem_latency}-cycle memory, "
        f"{cal.flit_bytes} B flits); NVLS's and the ring's four own-cycle "
        f"constants (calibration above) are fitted to these {len(fitted)} NVLS and ring points, "
        "everything else in their forms is the RTL's mechanism.", "",
        _table(["algorithm", "op", "N", "points", "largest difference", "mean abs. difference",
                "within 2%"], summary, ["---", "---", "---:", "---:", "---:", "---:", "---:"]),
        ""]
    if ring:
        w = _worst(ring)
        text.append(f"- **Ring: largest difference {w['error_pct']:+.2f}%** "
                    f"({_size(int(w['size']))} "
                    f"at N = {w['endpoints']}). The ranks' programs are followed command by "
                    "command, so the fences, the flags' atomic adds and the empty slices of a "
                    "64 B message cost what they cost in the RTL; large messages are the slices' "
                    "serialization (a copy 129 flit times per 4 KiB, an addition 256: the "
                    "accelerator's one local read port; the last reduction 384: its result is "
                    "also written to itself through the switch).")
    if others:
        w = _worst(others)
        text.append(f"- **NVLS, all but N = 4 from 1 MiB: largest difference "
                    f"{w['error_pct']:+.2f}%** ({_size(int(w['size']))} at N = {w['endpoints']}).")
    if n4:
        w = _worst(n4)
        text.append(
            f"- **NVLS at N = 4 from 1 MiB: {min(r['error_pct'] for r in n4):+.2f}% to "
            f"{max(r['error_pct'] for r in n4):+.2f}%**, the model faster. It costs the "
            "data phase at the links' rate, and at N = 4 the RTL stays 2% under it: 8 "
            "`ld_reduce`s in flight per rank (32 in all) only just cover the loaded round trip "
            "(32 x 42.5 = 1,360 cycles), and the ranks do not share the engine evenly: in every "
            "run rank 0 finishes its shard first (KERNEL_DONE 8.7% before the others at 16 MiB, "
            "the event trace of the run), and the other three end it with 24 `ld_reduce`s in "
            "flight, which no longer cover it. At N = 8 (64 in flight) the links' rate is "
            "reached to 0.1%. The side runs below (not in the CSV) show the window: with 16 in "
            f"flight the RTL meets the model at 256 KiB ({side_error[262144, 16]:+.2f}%; the "
            f"rank-0 lead still costs {abs(side_error[1048576, 16]):.2f}% at 1 MiB); with one, the "
            "data phase is one round trip per packet, as the model says "
            f"({side_error[262144, 1]:+.2f}%); between 2 and 8 the window and the links "
            "interact (a `ld_reduce` waits in the request unit behind other ranks' `st`s), and "
            "the model, which takes the larger of the two bounds, is faster than the RTL "
            f"({side_error[262144, 2]:+.1f}% at 2, {side_error[262144, 4]:+.1f}% at 4).")
    text += ["", "NVLS All-Reduce at N = 4 against its window (side runs of `scin compare "
             "--endpoints 4 --algorithms nvls --window W`, commit 0c056f3; not in the CSV):", "",
             _table(["size", "window", "RTL cycles", "model", "error %"], side), "",
             _table(["algorithm", "op", "N", "size (B)", "window", "commit", "RTL cycles",
                     "model", "error %"], body,
                    ["---", "---", "---:", "---:", "---:", "---", "---:", "---:", "---:"])]
    return "\n".join(text), rows


def calibration_section(cal):
    rows = [
        ["per-packet link cost, fp16", f"{cal.flit_bytes and cal.packet_bytes // cal.flit_bytes} "
         f"payload + 1 header + **{cal.control_flits}** control flit(s) = "
         f"{cal.packet_bytes // cal.flit_bytes + 1 + cal.control_flits} cycles",
         "slope of the fp16 All-Reduce, 4 KiB to 16 MiB"],
        ["per-slot link cost, int8 INQ", f"**{cal.int8_slot_flits}** cycles per 4 KiB INT8 slot "
         "(8 KiB FP16-equivalent)", "slope of the int8 All-Reduce, 8 KiB to 16 MiB"],
        ["own cycles (4 endpoints)", ", ".join(f"{k} **{v:g}**" for k, v in cal.own.items()),
         f"fixed part - 4 hops - memory read (barrier: - 2 hops), commit {cal.own_commit}"],
        ["own cycles, int8", f"**{cal.int8_own:g}** (+{cal.int8_single_slot_cycles:g} for a "
         "one-slot message)",
         "int8 rows, moved by the fp16 All-Reduce's change since their commit"],
        ["per adder level", f"**{cal.level_cycles:g}** cycles",
         "8 against 4 endpoints, same commit"],
        ["wave gap", f"2 hops + memory + **{cal.wave_gap_own:g}** cycles",
         "the one-wave run (64 KiB table)"],
        ["own cycles per hop", ", ".join(f"{k} {v}" for k, v in cal.hop_own.items()),
         "hop table of docs/PERFORMANCE.md (not in the CSV)"],
        ["push own cycles (4 endpoints)", f"fp16 **{cal.push_own:g}**, int8 "
         f"**{cal.push_int8_own:g}**; per adder level **{cal.push_level_cycles:g}**",
         f"push rows of `{cal.push_source or '-'}` ({cal.push_points} points): measured - 2 "
         "hops - link flits; 8 against 4 endpoints"],
        ["atomic add at an endpoint's memory", f"memory read + **{cal.atomic_own:g}** cycles, "
         "one at a time", f"NVLS and ring rows of `{cal.compare_source or '-'}` (the N "
         "barrier adds at every member, the ring's flags)"],
        ["NVLS own cycles", f"**{cal.nvls_own:g}** (both barriers and the data phase; of them "
         f"{NVLS_BARRIER_OWN} per barrier and {NVLS_ISSUE_CYCLES} per command issue from the "
         "event trace)", f"NVLS rows of `{cal.compare_source or '-'}`"],
        ["ring own cycles", f"slice **{cal.ring_slice_own:g}** (the fence beyond 4 hops), flag "
         f"**{cal.ring_signal_own:g}** (beyond 2 hops and the atomic add)",
         f"ring rows of `{cal.compare_source or '-'}`"],
        ["link of the measurements", f"{cal.one_way_latency}-cycle one-way hops, "
         f"{cal.mem_latency}-cycle memory reads, {cal.flit_bytes} B flits at {cal.clock_mhz} MHz, "
         f"{cal.packet_bytes} B packets", "the paper latency model of `scin bench`"],
    ]
    return "\n".join([
        "## Calibration (`docs/bench/calibration.json`)", "",
        f"Fitted by `scin.sim.calibration.write_calibration` from `{cal.source}` and, for "
        f"NVLS and the ring, `{cal.compare_source or '-'}` ({cal.compare_points} points, "
        "`fit_compare`: least squares of the relative differences over four own-cycle "
        "constants) (`scin study --calibrate`; the RTL benches call the same function). Cycles "
        "are the ISA's.", "",
        _table(["constant", "value", "fitted from"], rows, ["---", "---", "---"])])


def forms_section():
    return "\n".join([
        "## The closed forms (`scin.sim.scin_model`, `nvls_model`, `ring_model`)", "",
        "Hop `L` (one way, endpoint to switch), memory read `M`, ISA cycle `c`, flit time `t` on "
        "one plane's link, `P` payload flits per 4 KiB packet, `k` control flits per packet "
        "(1 today), `own`, `level` as calibrated; `S` is one plane's share of the per-rank "
        "message (`ceil(S / planes)`), `pk(S)` its packets' link flits (payload + 1 + `k` each).",
        "",
        "- SCIN pull (calibrated): `T = 4L + M + (own(op) + level x (ceil(log2 N) - 2)) c + "
        "shards x pk(S) t + wave gaps`, shards = N for ReduceScatter and AllGather, else 1; a "
        "wave boundary costs `max(0, (G + w slot) / waves - w slot)`, `G = 2L + M + gap c`, `w` "
        "slots per wave.",
        "- SCIN INQ (calibrated): `T = 4L + M + (own_int8 + level...) c + (n - 1) slot8 t + "
        "2 (d + s) t`: `n` INT8 slots, the last one's `d` data and `s` scale flits "
        "store-and-forward.",
        "- SCIN push (calibrated against `scin bench-push`): `T = 2L + (push_own + push_level x "
        "(ceil(log2 N) - 2)) c + shards x pk(S) t`: the operand's WRITEs up, the reduction, the "
        "result and its flag down; no READ, READ_RESP or memory read inside the interval (the "
        "endpoint reads its operand before its first push WRITE leaves, where the interval "
        "starts) and no wave gaps. INQ push: `T = 2L + (push_int8_own + push_level x ...) c + "
        "(sum over slots of d + 2 s + (n - 1) 2 (1 + k)) t` (the block scales cost 2 flit times "
        "each). Other collectives than the All-Reduce (not measured pushed): their pull own "
        "cycles less the All-Reduce's saving (`own(allreduce) - push_own`). Until this "
        "calibration push was modelled from the hop table as `2L + M + (own - 10) c + pk(S) t`: "
        f"it counted the endpoint's memory read ({MEM_LATENCY} cycles on the RTL fabric) that the "
        "measured push interval does not contain and saved 10 own cycles where the RTL saves 8, 38 "
        "cycles too many at every size (fp16 N = 4: 252/378/768 modelled against 214/340/730 "
        "measured at 64 B/4 KiB/16 KiB).",
        "- NVLS (calibrated against `scin compare`; NCCL's NVLS kernel on the RTL's NVLS "
        "engine, docs/NVLS.md): `T = (2L + b + N a) + D + (2L + b + a + (R - 1) max(0, a - d)) "
        "+ 2 i`. Two barriers: every rank's `red` is an atomic add `a` at every member, served "
        "one at a time (memory read + `atomic_own` on the RTL's AXI bridge); the second "
        "barrier's adds come as the `R` ranks with data finish, `d` apart. `D` = the last "
        "rank's data phase: the first 1 KiB packet's chain (`ld_reduce` 4 hops + memory, the "
        "engine's reducer `2 + 4 (N - 1)` cycles, `st` and its acknowledgement 4 hops: 8 hops "
        "in all) then every other packet of every rank at the largest of the links' rate "
        "(per packet of `f` payload flits, `(f + 2)(N + 1)/N` flits on a member's link: the "
        "`st` to everyone, the read request, and its own results' detour), the engine's "
        f"(RTL: one request unit, {NVLS_REQUEST_CYCLES} cycles a request + a flit per payload "
        f"flit; one sequencer, {NVLS_SEQUENCER_CYCLES} + `f` cycles an entry) and the window "
        "(`W` `ld_reduce`s per rank over their round trip). One packet per rank: `d` apart "
        "instead. 12 one-way hops on the critical path against SCIN's 4. ReduceScatter "
        "(`ld_reduce` only), AllGather (`st` only), Reduce and Broadcast (one rank's) are the "
        "same form with their packets.",
        f"- ring (calibrated against `scin compare`; NCCL's simple protocol, "
        f"sim/ring_allreduce.py): `N` chunks of {RING_SLICES} slices, `2 (N - 1)` steps "
        "(ReduceScatter, AllGather `N - 1`; Broadcast and Reduce a pipelined chain). A slice "
        "is a fenced REDUCE_SEND, `4L + s + body` (the WRITEs out, the acknowledgements "
        "back), then a flag to the next rank, seen `2L + a + g` later; a rank waits for its "
        "neighbour's flag and for staging slots. The programs are followed command by command "
        "(a max-plus recurrence, exact for empty or unequal slices). `body`: a copy one flit "
        "time per flit plus a header per 4 KiB; on the RTL an addition two per result flit "
        "(the accelerator's one local read port) and the All-Reduce's last reduction three "
        "(its sum also written to itself through the switch); GPUs at the link's rate.",
        "- Protocol ceiling (SCIN's efficiency bound): `P / (P + 1 + k)` = 128/130 = 0.985 "
        "today, 128/129 = 0.992 with wave-level requests and acknowledgements; INT8 "
        "`2 P / slot8` = 256/136 = 1.882. NVLS's: `f / ((f + 2)(N + 1)/N)` = 0.753 at N = 4, "
        "0.837 at N = 8 (1 KiB packets of 32 B flits)."])


def fabric_section(hop_s, mem_s):
    rows = [
        ["NVLink 4 bandwidth", "25 GB/s per link and direction, 18 links per GPU: 450 GB/s per "
         "direction (900 GB/s total)", "NVIDIA H100 and H200 datasheets (NVLink 900 GB/s)"],
        ["NVLink 5 bandwidth", "50 GB/s per link and direction, 18 links: 900 GB/s per direction "
         "(1.8 TB/s total)", "NVIDIA GB200 NVL72 and Blackwell datasheets (NVLink 1.8 TB/s)"],
        ["NVL72 planes", "18 NVLink Switch chips (9 trays x 2), 72 ports each: one link from "
         "every GPU to every chip, so 18 planes of 72 ports", "NVIDIA GB200 NVL72 (1,296 links / "
         "18 chips = 72 ports)"],
        ["HGX H200 planes", "4 NVSwitch chips; the 18 links split 5/4/4/5, modelled as 4 equal "
         "planes", "NVIDIA HGX H200 / DGX H100 system architecture"],
        ["one-way hop", f"{hop_s * 1e9:.0f} ns", "the SCIN prototype's measured endpoint-to-switch "
         "latency (paper section V); NVIDIA publishes none for NVLink. Swept below"],
        ["memory read", f"{mem_s * 1e9:.0f} ns", "assumption (HBM load latency order)"],
        ["ISA clock", f"{NVLINK_ISA_HZ / 1e9:.1f} GHz", "assumption (an ASIC ISA; its own "
         "cycles are the RTL's, calibrated)"],
        ["packets", f"4 KiB payload, {FLIT_BYTES} B flits, 1 header + 1 control flit per packet",
         "this "
         "RTL's protocol, calibrated; the paper's simulated system had 360 GB/s payload of its "
         "links, a heavier header overhead than ours"],
        ["NVLS packets and window", f"{NVLS_PACKET_BYTES} B `ld_reduce` and `st` packets; as "
         "many `ld_reduce`s in flight as the round trip needs", "the RTL's and the paper's "
         f"reduction entry; NCCL's kernel keeps a warp's worth in flight (`scin compare` runs "
         f"{NVLS_WINDOW} per rank, which the validation uses)"],
        ["NVLS engine", "one request unit and one reduction sequencer per port", "assumption "
         "(an NVSwitch serves its ports at once); the RTL's engine has one of each for the "
         "switch, which would hold NVLS to one 1 KiB packet per 6 ISA cycles + 32 flit times"],
        ["GPU endpoints", f"ring additions at the link's rate, results stored locally; atomic "
         f"adds {NVLINK_ATOMIC_S * 1e9:g} ns each, one at a time per word", "assumption (a "
         "GPU's HBM outruns its NVLink; a same-address atomic at its L2); the RTL's "
         "accelerator model reads through one port and its bridge takes a memory read per "
         "atomic, which stay in the RTL fabric's model"],
    ]
    return "\n".join(["## NVLink-class parameters", "",
                      _table(["parameter", "value", "source"], rows, ["---", "---", "---"])])


def scale_section(cal, hop_s, mem_s, plot_dir, rel, ports=PORTS, planes_list=PLANES):
    big, nmax = max(planes_list), max(ports)
    text = [f"## Scale: {min(ports)} to {nmax} ports, {' or '.join(map(str, planes_list))} "
            "plane(s)", "",
            "NVLink 5 links (50 GB/s per direction each). One plane: every GPU has one link to "
            "one switch of N ports. P planes (18: NVL72-class): every message split P ways, one "
            "ISA per plane. All-Reduce latency in microseconds (`size` per rank); speedups over "
            "NVLS. **SCIN pull and INQ are the calibrated forms; NVLS and ring the forms "
            "calibrated against `scin compare`, with GPUs for endpoints and an NVLS engine per "
            "port (NVLink-class parameters); push is the form calibrated against `scin "
            "bench-push`.**", ""]
    csv_rows = []
    for planes in planes_list:
        f = nvlink_fabric(5, planes, hop_s=hop_s, mem_s=mem_s)
        body = []
        for n in ports:
            for size in SIZES:
                t = {s: collective_time(s, "allreduce", size, n, f, cal) for s in SYSTEMS}
                body.append([n, _size(size)] + [_us(t[s]) for s in SYSTEMS]
                            + [f"{t['nvls'] / t['scin']:.2f}", f"{t['nvls'] / t['scin-push']:.2f}",
                               f"{t['nvls'] / t['scin-inq']:.2f}",
                               f"{bus_bandwidth('allreduce', size, n, t['scin']) / 1e9:.0f}",
                               f"{bus_bandwidth('allreduce', size, n, t['nvls']) / 1e9:.0f}"])
                csv_rows.append({"planes": planes, "ports": n, "size": size,
                                 **{f"{s}_us": round(t[s] * 1e6, 4) for s in SYSTEMS}})
        text += [f"### {planes} plane{'s' if planes > 1 else ''} "
                 f"({planes * 50} GB/s per GPU and direction)", "",
                 _table(["N", "size"] + [SYSTEM_NAMES[s] for s in SYSTEMS]
                        + ["pull / NVLS", "push / NVLS", "INQ / NVLS", "SCIN busbw GB/s",
                           "NVLS busbw GB/s"], body), ""]
    fbig = nvlink_fabric(5, big, hop_s=hop_s, mem_s=mem_s)
    link = fbig.link_bytes_per_s
    ceil = protocol_ceiling(fbig, cal)
    text += [f"Limits ({big} plane(s)): SCIN's algorithm bandwidth tends to the protocol ceiling "
             f"{ceil:.4f} x {link / 1e9:.0f} GB/s = {ceil * link / 1e9:.0f} GB/s at every N "
             f"(bus bandwidth `2 (N-1)/N` of it); NVLS's to `f / ((f + 2)(N + 1)/N)` of the "
             f"link ({NVLS_PACKET_BYTES} B packets: a header and a read request or "
             "acknowledgement per packet, and the detour of its own results): "
             + ", ".join(f"N = {n}: {nvls_ceiling(fbig, n) * link / 1e9:.0f} GB/s "
                         f"({ceil / nvls_ceiling(fbig, n):.3f}x below SCIN)" for n in ports)
             + f". The ring's latency grows with `4 (N - 1)` fenced slices ({RING_SLICES} per "
             "step, 4 hops each), which is why it falls far behind at many ports for small "
             "messages.", ""]
    # The other collectives at the most ports and planes.
    body = []
    for op in ("reduce-scatter", "allgather", "broadcast", "reduce"):
        for size in (8 << 10, 1 << 20, 16 << 20):
            s = collective_time("scin", op, size, nmax, fbig, cal)
            nv = collective_time("nvls", op, size, nmax, fbig, cal)
            r = collective_time("ring", op, size, nmax, fbig, cal)
            body.append([op, _size(size), _us(s), _us(nv), _us(r), f"{nv / s:.2f}", f"{r / s:.2f}"])
    text += [f"### The other collectives ({nmax} ports, {big} plane(s))", "",
             "Per-rank count `size` (NCCL's `recvcount` / `sendcount`); SCIN from the calibrated "
             "op constants; NVLS and ring from the All-Reduce's calibrated forms with their own "
             "packets (NVLS: ReduceScatter its `ld_reduce`s, AllGather its `st`s, Reduce and "
             "Broadcast one rank's; ring: `N - 1` steps, Broadcast and Reduce a chain).", "",
             _table(["op", "size", "SCIN (us)", "NVLS (us)", "ring (us)", "NVLS / SCIN",
                     "ring / SCIN"], body), ""]
    text += [wave_section(cal, hop_s, mem_s), ""]
    plots = _scale_plots(cal, hop_s, mem_s, plot_dir, ports, big)
    text += [f"![{p}]({rel}/{p})" for p in plots]
    return "\n".join(text), csv_rows


def wave_section(cal, hop_s, mem_s, size=16 << 20, n=8):
    """Efficiency against outstanding waves and wave-table capacity on one NVLink 5 link."""
    f = nvlink_fabric(5, 1, hop_s=hop_s, mem_s=mem_s)
    body = []
    for cap in (64 << 10, 96 << 10, 128 << 10):
        row = [f"{cap >> 10} KiB"]
        for k in WAVES:
            if cap // k < f.packet_bytes:
                row.append("-")
                continue
            t = scin_time("allreduce", size, n, f, cal, capacity=cap, waves=k)
            row.append(f"{size / (t * f.link_bytes_per_s):.3f}")
        body.append(row)
    return "\n".join([
        "### Wave regulation at NVLink 5", "",
        f"Efficiency of a {_size(size)} All-Reduce at {n} ports on one 50 GB/s link against the "
        "wave-table capacity per participant and the outstanding waves (the calibrated wave "
        "gap: a read's round trip plus its serialisation must be in flight; '-': a wave "
        "smaller than one 4 KiB slot). The paper: without multiple waves about 2/3 of the "
        "bandwidth, 16 waves enough, 96 KB per wave table reached peak bandwidth in its "
        "simulated system.", "",
        _table(["table"] + [f"{k} wave{'s' if k > 1 else ''}" for k in WAVES], body)])


def _scale_plots(cal, hop_s, mem_s, out, ports, planes):
    """latency.png and bandwidth.png of the modelled NVLink fabric; returns their names."""
    f = nvlink_fabric(5, planes, hop_s=hop_s, mem_s=mem_s)

    def t(system, x, n):
        return collective_time(system, "allreduce", x, n, f, cal)

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, n in zip(axes, (min(ports), max(ports))):
        for k, s in enumerate(SYSTEMS):
            ax.plot(PLOT_SIZES, [t(s, x, n) * 1e6 for x in PLOT_SIZES], label=SYSTEM_NAMES[s],
                    **series_style(k))
        ax.set(xscale="log", yscale="log", xlabel="size per rank (bytes)", ylabel="latency (us)",
               title=f"{n} ports")
    finish(fig, list(axes), out / "latency.png", kind="modelled",
           title=f"All-Reduce latency, {planes} NVLink 5 plane(s), modelled")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, n in enumerate(ports):
        for k, (s, name) in enumerate((("scin", "SCIN"), ("nvls", "NVLS"))):
            axes[0].plot(PLOT_SIZES, [bus_bandwidth("allreduce", x, n, t(s, x, n)) / 1e9
                                      for x in PLOT_SIZES], label=f"{name}, N={n}",
                         **series_style(2 * i + k))
        for k, (s, name) in enumerate((("scin", "pull"), ("scin-inq", "INQ"))):
            axes[1].plot(PLOT_SIZES, [t("nvls", x, n) / t(s, x, n) for x in PLOT_SIZES],
                         label=f"{name}, N={n}", **series_style(2 * i + k))
    axes[0].set(xscale="log", xlabel="size per rank (bytes)", ylabel="bus bandwidth (GB/s)",
                title="bus bandwidth")
    axes[1].set(xscale="log", xlabel="size per rank (bytes)", ylabel="speedup over NVLS",
                title="SCIN over NVLS")
    finish(fig, list(axes), out / "bandwidth.png", kind="modelled", legend_columns=2,
           title=f"All-Reduce bandwidth, {planes} NVLink 5 plane(s), modelled")
    return ["latency.png", "bandwidth.png"]


def resources_section(cal, hop_s, mem_s, ports=PORTS):
    rows = list(csv.DictReader(open(RESOURCES_CSV))) if RESOURCES_CSV.exists() else []
    isa = {int(r["ports"]): r for r in rows if r["block"] == "isa" and r["flit_width"] == "256"}
    text = ["## SCIN's resources against ports", ""]
    if 4 not in isa or 8 not in isa:
        return "\n".join(text + ["docs/resources/resources.csv has no 4- and 8-port ISA point."])
    f = nvlink_fabric(5, 18, hop_s=hop_s, mem_s=mem_s)
    slot = (f.packet_bytes // f.flit_bytes + 1 + cal.control_flits) * f.flit_s
    gap = 2 * f.hop_s + f.mem_s + cal.wave_gap_own * f.isa_cycle_s
    # Slots in flight per participant to keep a plane's link busy: a read's round trip plus
    # its own serialisation, in whole 4 KiB slots, and one more so that release and re-issue
    # overlap.
    bdp_slots = math.ceil((gap + slot) / slot) + 1
    body = []
    for n in sorted({4, 8, *ports}):
        est = {k: float(isa[4][k]) + (float(isa[8][k]) - float(isa[4][k])) * (n - 4) / 4
               for k in ("lut", "ff", "bram36", "dsp")}
        kind = "measured" if n in isa else "extrapolated"
        body.append([n, kind] + [f"{est[k]:,.0f}" for k in ("lut", "ff", "dsp")]
                    + [f"{est['bram36']:,.1f}",
                       f"{bdp_slots * 4 * n:,.0f} KiB"])
    text += [f"The ISA synthesized with Yosys at 4 and 8 ports (256-bit flits; docs/RESOURCES.md: "
             f"LUT {int(isa[4]['lut']):,} -> {int(isa[8]['lut']):,}, DSP {isa[4]['dsp']} -> "
             f"{isa[8]['dsp']}, BRAM36 {isa[4]['bram36']} -> {isa[8]['bram36']}) grows by "
             "one datapath input, one wave table and one port interface per participant; the "
             "rows beyond 8 extend that per-port step linearly (the RTL's exact adder tree is "
             "fixed for N <= 8, so a wider tree is one more level per doubling on top, which "
             "the level cost of the timing model already counts). The last column is the wave "
             "table one plane's ISA needs at NVLink 5 to keep its link busy: a read's round trip "
             f"({gap * 1e9:.0f} ns) plus one slot ({slot * 1e9:.0f} ns at 50 GB/s) in flight per "
             f"participant, {bdp_slots} slots of 4 KiB each (the paper's simulated system "
             "reached peak bandwidth with 96 KB per wave table).", "",
             _table(["ports", "", "LUT", "FF", "DSP", "BRAM36",
                     "wave table at NVLink 5 (all participants)"],
                    body, ["---:", "---"] + ["---:"] * 5)]
    return "\n".join(text)


def llm_rows(cal, fabric):
    """Every (model, TP, batch, prompt) point: compute and All-Reduce seconds for NVLS, SCIN
    pull and SCIN INQ, TTFT and TPOT."""
    def ar(system):
        return lambda size, n, inq: collective_time(system, "allreduce", size, n, fabric, cal)
    out = []
    for model in llm.MODELS.values():
        for tp in TPS:
            for batch in BATCHES:
                for prompt in PROMPTS:
                    row = {"model": model.name, "tp": tp, "batch": batch, "prompt": prompt}
                    for phase, fn in (("ttft", llm.ttft), ("tpot", llm.tpot)):
                        for system in ("nvls", "scin", "scin-inq"):
                            r = fn(model, tp, batch, prompt, ar(system))
                            key = f"{phase}_{system.replace('-', '_')}"
                            row[f"{key}_ms"] = r["total_s"] * 1e3
                            row[f"{key}_ar_fraction"] = r["allreduce_fraction"]
                        row[f"{phase}_ar_bytes"] = r["allreduce_bytes"]
                        row[f"{phase}_speedup"] = row[f"{phase}_nvls_ms"] / row[f"{phase}_scin_ms"]
                        row[f"{phase}_speedup_inq"] = row[f"{phase}_nvls_ms"] \
                            / row[f"{phase}_scin_inq_ms"]
                    out.append(row)
    return out


def llm_section(cal, hop_s, mem_s, plot_dir, rel):
    fabric = hgx_h200(hop_s, mem_s)
    rows = llm_rows(cal, fabric)
    gpu = llm.H200
    models = _table(["model", "layers", "hidden", "FFN", "heads / KV heads", "experts",
                     "config"],
                    [[m.name, m.layers, m.hidden, m.ffn, f"{m.heads} / {m.kv_heads}",
                      f"{m.experts} (top {m.experts_per_token})" if m.experts > 1 else "-",
                      m.source] for m in llm.MODELS.values()],
                    ["---"] + ["---:"] * 5 + ["---"])
    summary = []
    for name in llm.MODELS:
        for tp in TPS:
            sel = [r for r in rows if r["model"] == name and r["tp"] == tp]

            def best(key):
                r = max(sel, key=lambda r: r[key])
                return f"{r[key]:.3f} ({r['batch']} x {r['prompt']})"
            fr = [r["tpot_nvls_ar_fraction"] for r in sel]
            summary.append([name, tp, best("ttft_speedup"), best("ttft_speedup_inq"),
                            best("tpot_speedup"), best("tpot_speedup_inq"),
                            f"{min(fr):.1%} - {max(fr):.1%}"])
    detail = []
    for r in rows:
        if r["batch"] in (1, 8, 64) and r["prompt"] in (512, 2048, 8192):
            detail.append([r["model"], r["tp"], r["batch"], r["prompt"],
                           f"{r['ttft_nvls_ms']:,.1f}", f"{r['ttft_speedup']:.3f}",
                           f"{r['ttft_speedup_inq']:.3f}", f"{r['tpot_nvls_ms']:.3f}",
                           f"{r['tpot_speedup']:.3f}", f"{r['tpot_speedup_inq']:.3f}",
                           f"{r['tpot_nvls_ar_fraction']:.1%}"])
    paper_rows = [r for r in rows if r["model"] in llm.PAPER_MODELS and r["tp"] == 8]
    mx = {k: max(r[k] for r in paper_rows) for k in ("ttft_speedup", "ttft_speedup_inq",
                                                     "tpot_speedup", "tpot_speedup_inq",
                                                     "tpot_nvls_ar_fraction",
                                                     "ttft_nvls_ar_fraction")}
    compare = _table(["figure", "paper (Fig. 10, section VI)", "here: paper's models, TP 8, "
                      "max over batch 1-64, prompts 512-8k"], [
        ["TTFT speedup over NVLS", f"up to {PAPER['ttft']}x",
         f"{mx['ttft_speedup']:.3f}x pull, {mx['ttft_speedup_inq']:.3f}x INQ"],
        ["TPOT speedup over NVLS", f"up to {PAPER['tpot']}x",
         f"{mx['tpot_speedup']:.3f}x pull, {mx['tpot_speedup_inq']:.3f}x INQ"],
        ["decode time in All-Reduce (NVLS, TP 8)", f"up to {PAPER['decode_fraction']:.0%} "
         "(H200, TensorRT-LLM, FP8)", f"up to {mx['tpot_nvls_ar_fraction']:.1%}"],
        ["prefill time in All-Reduce (NVLS, TP 8)", "up to 49% (same profile)",
         f"up to {mx['ttft_nvls_ar_fraction']:.1%}"]], ["---", "---", "---"])
    # Sensitivity to the hop latency.
    sens = []
    for ns in HOP_SWEEP_NS:
        sub = [r for r in llm_rows(cal, hgx_h200(ns * 1e-9, mem_s))
               if r["model"] in llm.PAPER_MODELS and r["tp"] == 8]
        sens.append([f"{ns} ns", f"{max(r['ttft_speedup'] for r in sub):.3f}",
                     f"{max(r['ttft_speedup_inq'] for r in sub):.3f}",
                     f"{max(r['tpot_speedup'] for r in sub):.3f}",
                     f"{max(r['tpot_speedup_inq'] for r in sub):.3f}",
                     f"{max(r['tpot_nvls_ar_fraction'] for r in sub):.1%}"])
    fractions = []
    for name in llm.MODELS:
        for tp in TPS:
            sel = {r["batch"]: r for r in rows if r["model"] == name and r["tp"] == tp
                   and r["prompt"] == 2048}
            fractions.append([name, tp] + [f"{sel[b]['tpot_nvls_ar_fraction']:.1%}"
                                           for b in BATCHES])
    plot = _llm_plot(rows, plot_dir)
    dec = [r for r in rows if r["tp"] == 8 and r["model"] in llm.PAPER_MODELS]
    b1 = max(dec, key=lambda r: r["tpot_speedup"])
    bt = max(dec, key=lambda r: r["ttft_speedup_inq"])
    dec_sizes = (min(r["tpot_ar_bytes"] for r in rows), max(r["tpot_ar_bytes"] for r in rows))
    pre_sizes = (min(r["ttft_ar_bytes"] for r in rows), max(r["ttft_ar_bytes"] for r in rows))
    ar_small = collective_time("nvls", "allreduce", dec_sizes[0], 8, fabric, cal) \
        / collective_time("scin", "allreduce", dec_sizes[0], 8, fabric, cal)
    sens_rows = sens
    inq_big = collective_time("nvls", "allreduce", pre_sizes[1], 8, fabric, cal) \
        / collective_time("scin-inq", "allreduce", pre_sizes[1], 8, fabric, cal)
    bw_ratio = protocol_ceiling(fabric, cal) / nvls_ceiling(fabric, 8)
    text = [
        "## LLM inference: TTFT and TPOT over NVLS", "",
        "Two All-Reduces per layer of `tokens x hidden x 2` bytes (INT8 INQ moves "
        f"{llm.INQ_RATIO:.3f} of that), on the critical path, not overlapped; the All-Reduce "
        f"time from the model above on the **{fabric.name}** fabric (hop "
        f"{hop_s * 1e9:.0f} ns, memory {mem_s * 1e9:.0f} ns); TP 4 is one 4-GPU group of the "
        "8-GPU system. TTFT is the prefill of `batch` prompts; TPOT one decode step at context "
        "= prompt. Compute is a roofline of one GPU: per layer `max(FLOPs / (peak x "
        f"{gpu.flops_efficiency:.0%}), bytes / (HBM x {gpu.hbm_efficiency:.0%}))` with "
        f"{gpu.name}: {gpu.peak_flops / 1e12:.0f} TFLOPS dense BF16, "
        f"{gpu.hbm_bytes_per_s / 1e12:.1f} TB/s HBM3e ({gpu.source}); the 70% and 80% achieved "
        "fractions are assumptions, not measurements. FLOPs per layer: `2 x tokens x (attention "
        "+ MLP parameters) / TP` (MoE: the token's 2 experts) + attention `4 x tokens x context "
        "x hidden / TP` (prefill: causal, context / 2); bytes: the layer's weights (BF16) / TP "
        "(MoE: the experts any token picked), the KV cache and the activations. The LM head is "
        "counted; norms, rotary embeddings, sampling and launch gaps are not.", "",
        models, "", "### Best speedup per model and TP (batch x prompt where it occurs)", "",
        _table(["model", "TP", "TTFT pull", "TTFT INQ", "TPOT pull", "TPOT INQ",
                "decode in All-Reduce (NVLS)"], summary), "",
        "### Against the paper", "", compare, "",
        "Why they differ:",
        f"- **TPOT.** Decode All-Reduces are {_size(dec_sizes[0])} to {_size(dec_sizes[1])} "
        "(batch 1 to 64): latency-bound, where SCIN's 4 one-way hops against NVLS's 12 (two "
        "barriers of 2, the `ld_reduce`'s 4, the `st`'s and its acknowledgement's 4) make "
        f"the All-Reduce about {ar_small:.2f}x faster (TP 8, {_size(dec_sizes[0])}). The "
        f"largest TPOT gain, {b1['tpot_speedup']:.3f}x ({b1['model']}, batch {b1['batch']}, "
        f"context {b1['prompt']}), comes with {b1['tpot_nvls_ar_fraction']:.1%} of its NVLS "
        f"decode step in All-Reduces, {b1['tpot_nvls_ar_fraction'] / PAPER['decode_fraction']:.1f}"
        "x the paper's measured 19%: the roofline leaves out "
        "every non-GEMM kernel, launch gap and the sampler, so its compute is shorter, and "
        f"the {NVLINK_HOP_S * 1e9:.0f} ns hop is the FPGA prototype's (Aurora), likely slower than "
        "an NVLink hop. "
        f"At a 100 ns hop the largest fraction is {sens_rows[0][5]} and the largest TPOT "
        f"gain {sens_rows[0][3]}x, next to the paper's 19% and 1.12x. The paper's pair obeys "
        "Amdahl's law with an All-Reduce about 2.3x faster (1 / (0.81 + 0.19 / 2.3) = 1.12), "
        "close to the ratio here.",
        f"- **TTFT.** Prefill All-Reduces are {_size(pre_sizes[0])} to {_size(pre_sizes[1])}. "
        f"The largest gain is at the smallest prefill ({bt['model']}, batch {bt['batch']}, "
        f"prompt {bt['prompt']}: {bt['ttft_speedup']:.3f}x pull, "
        f"{bt['ttft_speedup_inq']:.3f}x INQ), where the All-Reduce still carries latency; "
        "beyond it the roofline's compute grows in proportion to the tokens, as the "
        "All-Reduce does, so the speedup settles at the bandwidth ratio: NVLS's 1 KiB packets "
        f"and `(N + 1) / N` detour ({bw_ratio:.3f} at N = 8) unquantized, {inq_big:.2f}x with "
        f"INQ at {_size(pre_sizes[1])}, "
        "diluted by the compute. "
        "The paper's TTFT gain grows with the batch because its GPUs' utilization grows with "
        "the batch (communication then takes a larger share, 49% in its profile); a roofline "
        "at a fixed 70% of peak has no such ramp. The paper's NVLS also lost bandwidth to "
        "multicast congestion in the crossbar (its 1.34x large-message speedup against "
        f"{bw_ratio:.3f} here), which this model does not have. The paper does not say whether its "
        f"1.42x is quantized; here INQ reaches {mx['ttft_speedup_inq']:.3f}x.",
        "- **Mixtral-8x7B** gains less than the dense models of its hidden size: its two "
        "experts per token (and, in decode, the weights of every expert the batch picks) make "
        "each layer's compute longer for the same All-Reduce, as the paper says.",
        "", "### Decode time in All-Reduce (NVLS, context 2k; every prompt in "
        "`docs/scale/llm.csv`)", "",
        _table(["model", "TP"] + [f"batch {b}" for b in BATCHES], fractions), "",
        "The share falls with the batch where the KV cache is large against the weights "
        "(LLaMA-2-7B and 13B, as many KV heads as heads; Llama-3-8B more slowly), rises "
        "slightly for the 70B models (8 KV heads against 64: a small cache, while the "
        "All-Reduce, 16 KiB per sequence, grows faster than their weight reads), and for "
        "Mixtral falls steeply from batch 1 to 8 as the batch picks more of the 8 experts' "
        "weights. It is larger at TP 8 than at TP 4: each GPU reads half the weights while "
        "the All-Reduce keeps its size.",
        "", "### Sensitivity to the hop latency (paper's models, TP 8, max over the grid)", "",
        _table(["one-way hop", "TTFT pull", "TTFT INQ", "TPOT pull", "TPOT INQ",
                "decode in All-Reduce (NVLS)"], sens), "",
        "### Detail (batch 1, 8, 64; prompts 512, 2k, 8k; every point in `docs/scale/llm.csv`)",
        "", _table(["model", "TP", "batch", "prompt", "TTFT NVLS (ms)", "TTFT pull", "TTFT INQ",
                    "TPOT NVLS (ms)", "TPOT pull", "TPOT INQ", "decode in AR (NVLS)"], detail),
        "", f"![{plot}]({rel}/{plot})"]
    return "\n".join(text), rows


def _llm_plot(rows, out):
    """llm.png: modelled TTFT and TPOT speedups against the batch, one style per model."""
    fig, axes = pyplot().subplots(1, 2, figsize=(11, 4.2))
    for k, name in enumerate(llm.MODELS):
        sel = [r for r in rows if r["model"] == name and r["tp"] == 8 and r["prompt"] == 2048]
        axes[0].plot(BATCHES, [r["ttft_speedup_inq"] for r in sel], label=name,
                     **series_style(k))
        axes[1].plot(BATCHES, [r["tpot_speedup"] for r in sel], label=name, **series_style(k))
    axes[0].axhline(PAPER["ttft"], color="k", ls="--", lw=0.8, label="paper: up to 1.42x")
    axes[1].axhline(PAPER["tpot"], color="k", ls="--", lw=0.8, label="paper: up to 1.12x")
    axes[0].set(xscale="log", xlabel="batch", ylabel="TTFT speedup over NVLS",
                title="TTFT, SCIN INQ, TP 8, prompt 2k")
    axes[1].set(xscale="log", xlabel="batch", ylabel="TPOT speedup over NVLS",
                title="TPOT, SCIN pull, TP 8, context 2k")
    finish(fig, list(axes), out / "llm.png", kind="modelled",
           title="LLM inference speedup of SCIN over NVLS, modelled")
    return "llm.png"


def _write_csv(rows, path):
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()})


def _counts(text, option, least):
    try:
        values = tuple(sorted({int(v) for v in text.split(",") if v}))
    except ValueError:
        values = ()
    if not values or values[0] < least:
        raise ValueError(f"{option} must be comma-separated integers of at least {least}, "
                         f"not {text!r}")
    return values


# --- the command ----------------------------------------------------------------------------------

def add_arguments(p):
    """The options of ``scin study``."""
    p.add_argument("--calibrate", action="store_true",
                   help="fit the calibration to --bench-csv and --compare-csv first and write "
                        "it to --calibration, else calibration.json in the --out folder (with "
                        "--doc: docs/bench/calibration.json), then use it")
    p.add_argument("--bench-csv", default=str(REPO_ROOT / "docs" / "bench" / "bench.csv"),
                   help="the RTL measurements (`scin bench`; default: docs/bench/bench.csv)")
    p.add_argument("--compare-csv", default=str(COMPARE_PATH),
                   help="SCIN, NVLS and ring measured on the RTL (`scin compare`; default: "
                        "docs/bench/compare.csv), which NVLS and the ring are fitted to")
    p.add_argument("--calibration", type=Path, default=None, metavar="FILE",
                   help="the fitted constants (default: docs/bench/calibration.json)")
    add_out_doc(p, "study", SCALE_FOLDER, SCALE_DOC)
    p.add_argument("--ports", default=",".join(map(str, PORTS)),
                   help="ports per plane of the scale tables (default: %(default)s)")
    p.add_argument("--planes", default=",".join(map(str, PLANES)),
                   help="plane counts of the scale tables (default: %(default)s; 18 is "
                        "NVL72-class)")
    p.add_argument("--hop-ns", type=real(positive=True), default=NVLINK_HOP_S * 1e9,
                   help="one-way GPU-to-switch latency of the NVLink-class fabrics, ns "
                        "(default: %(default)g, the SCIN prototype's)")
    p.add_argument("--mem-ns", type=real(positive=True), default=NVLINK_MEM_S * 1e9,
                   help="GPU memory read latency, ns (default: %(default)g, an assumption)")


def run(args):
    """``scin study``: (re)fit if asked, then write the section of docs/SCALE.md, its plots
    and CSVs."""
    started = time.monotonic()
    ports, planes = _counts(args.ports, "--ports", 2), _counts(args.planes, "--planes", 1)
    for option in ("bench_csv",) + (("compare_csv",) if args.calibrate else ()):
        if not Path(getattr(args, option)).is_file():
            raise ValueError(f"argument --{option.replace('_', '-')}: no such file "
                             f"{getattr(args, option)!r}")
    out = doc_folder(args, "study", SCALE_FOLDER)
    if args.calibrate:
        calibration = args.calibration or (CALIBRATION_PATH if args.doc is not None
                                           else out / CALIBRATION_PATH.name)
        compare = args.compare_csv if Path(args.compare_csv).exists() else None
        cal = write_calibration(args.bench_csv, calibration, compare_csv=compare)
        print(f"wrote {calibration} (fitted to {args.bench_csv}"
              f"{' and ' + compare if compare else ''})")
    else:
        cal = load_calibration(args.calibration or CALIBRATION_PATH)
    hop_s, mem_s = args.hop_ns * 1e-9, args.mem_ns * 1e-9
    doc = doc_target(args, "study", SCALE_DOC)
    out.mkdir(parents=True, exist_ok=True)
    try:
        rel = out.resolve().relative_to(doc.resolve().parent).as_posix()
    except ValueError:
        rel = out.resolve().as_posix()
    validation, vrows = validation_section(cal, args.bench_csv)
    compare_path = Path(args.compare_csv)
    if compare_path.exists():
        compared, crows = compare_section(cal, compare_path)
    else:
        compared, crows = (f"## Validation against `scin compare`\n\n{compare_path} does not "
                           "exist: run `scin compare` for NVLS and ring points."), []
    push_path = Path(args.bench_csv).with_name(PUSH_PATH.name)
    pushed = push_section(cal, push_path) if push_path.exists() else (
        f"## Validation against `scin bench-push`\n\n{push_path} does not exist: run `scin "
        "bench-push` for push points.")
    scale, scale_rows = scale_section(cal, hop_s, mem_s, out, rel, ports, planes)
    llm_text, lrows = llm_section(cal, hop_s, mem_s, out, rel)
    _write_csv(scale_rows, out / "scale.csv")
    _write_csv(lrows, out / "llm.csv")
    _write_csv([{k: r[k] for k in ("part", "op", "in_place", "dtype", "size", "endpoints",
                                   "capacity", "waves", "commit", "cycles", "model",
                                   "error_pct", "model_current", "error_current_pct")}
                for r in vrows], out / "validation.csv")
    if crows:
        _write_csv([{k: r.get(k, "") for k in ("algorithm", "op", "dtype", "endpoints", "size",
                                               "window", "commit", "cycles", "model",
                                               "error_pct")}
                    for r in crows], out / "compare_validation.csv")
    worst = max(abs(r["error_pct"]) for r in vrows)
    costed = [r for r in crows if r["error_pct"] is not None]
    by_alg = {alg: max([abs(r["error_pct"]) for r in costed if r["algorithm"] == alg],
                       default=None) for alg in ("nvls", "ring")}
    fitted_note = {alg: (f"compare.csv, mechanism forms with 4 fitted own-cycle constants; "
                         f"within {by_alg[alg]:.2f}% of "
                         f"{sum(r['algorithm'] == alg for r in costed)} "
                         "points" if by_alg[alg] is not None else "no compare.csv point")
                   for alg in by_alg}
    status = [
        ["SCIN pull All-Reduce, ReduceScatter, AllGather, Broadcast, Reduce, barrier (fp16/bf16)",
         "**calibrated** from RTL", "bench.csv; exact at every measured point"],
        ["SCIN INQ (int8) All-Reduce", "**calibrated** from RTL",
         f"bench.csv; within {worst:.2f}%"],
        ["4 -> 8 endpoints", "**calibrated**", "one level of the adder tree"],
        ["beyond 8 ports (16, 32, 72)", "extrapolated", "one level per doubling (the RTL "
         "takes at most 8)"],
        ["NVLink-class link, hop and memory latencies, planes", "stated parameters",
         "section NVLink-class parameters"],
        ["SCIN push All-Reduce (fp16 and int8, 4 and 8 endpoints)", "**calibrated** from RTL",
         "push.csv (`scin bench-push`); exact at every measured point"],
        ["SCIN push of the other collectives", "modelled", "the All-Reduce's push saving on "
         "their calibrated pull cycles"],
        ["NVLS All-Reduce (RTL fabric)", "**calibrated** from RTL", fitted_note["nvls"]],
        ["ring All-Reduce (RTL fabric)", "**calibrated** from RTL", fitted_note["ring"]],
        ["NVLS and ring ReduceScatter, AllGather, Broadcast, Reduce", "modelled",
         "the All-Reduce's calibrated forms and constants with their own packets"],
        ["NVLS and ring on NVLink-class fabrics", "extrapolated", "the calibrated forms with "
         "GPUs for endpoints and an NVLS engine per port (section NVLink-class parameters)"],
        ["LLM compute (roofline H200)", "**modelled only**", "published configs, datasheet"],
    ]
    head = [
        f"Command: `scin study{' ' + ' '.join(args.argv) if getattr(args, 'argv', None) else ''}` "
        f"(commit {current_commit()}; no RTL run: the model is closed-form, calibrated from "
        f"`{cal.source}` at commits {', '.join(cal.commits)} and `{cal.compare_source or '-'}` "
        f"at commit{'s' if len(cal.compare_commits) > 1 else ''} "
        f"{', '.join(cal.compare_commits) or '-'} and `{cal.push_source or '-'}` at "
        f"{', '.join(cal.push_commits) or '-'}). Times are modelled unless the "
        "validation table says *RTL*. The model is `scin.sim.closed_forms` (closed forms and "
        "the calibration) and `scin.sim.llm` (the inference roofline).", "",
        "## What is calibrated and what is modelled", "",
        _table(["figure", "status", "from"], status, ["---", "---", "---"])]
    elapsed = time.monotonic() - started
    text = "\n\n".join(["\n".join(head), forms_section(), calibration_section(cal), validation,
                        compared, pushed, fabric_section(hop_s, mem_s), scale,
                        resources_section(cal, hop_s, mem_s, ports),
                        llm_text]) + "\n"
    text = text.replace("(commit", f"({elapsed:.1f} s, commit", 1)
    rewrite_section(doc, SECTION, text.rstrip("\n"), title=TITLE)
    print(f"wrote {doc}, {out}/latency.png, bandwidth.png, llm.png, scale.csv, llm.csv, "
          f"validation.csv{', compare_validation.csv' if crows else ''} ({elapsed:.1f} s); "
          f"model against RTL: {len(vrows)} points, largest difference {worst:.2f}%")
    if costed:
        parts = []
        for alg in ("scin-fp16", "scin-int8", "nvls", "ring"):
            for n in sorted({int(r["endpoints"]) for r in costed if r["algorithm"] == alg}):
                sel = [abs(r["error_pct"]) for r in costed
                       if r["algorithm"] == alg and int(r["endpoints"]) == n]
                parts.append(f"{alg} N={n} {max(sel):.2f}%")
        print(f"model against RTL compare: {len(costed)} points, largest difference "
              f"{max(abs(r['error_pct']) for r in costed):.2f}% ({'; '.join(parts)})")
    return 0


def main(argv=None):
    """``python -m scin.scripts.study``: the same as ``scin study``."""
    from .cli import main
    return main(["study", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
