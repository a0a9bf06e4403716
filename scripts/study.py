"""``scin study``: the calibrated system model at NVLink-class scale and in LLM inference.

Reads the calibration (``docs/bench/calibration.json``, fitted from ``docs/bench/bench.csv`` and
``docs/bench/compare.csv`` by :func:`scin.sim.calibration.write_calibration`; ``--calibrate``
fits it again first) and writes the generated sections of ``docs/SCALE.md``, each between its
own markers (:data:`SECTIONS`; a file without them gets them appended): the validation of the
model against every RTL point of the bench CSVs, the calibration, the scale tables (8 to 72
ports, 1 or 18 planes), the growth of SCIN's resources with ports, and TTFT/TPOT over NVLS for
six models at TP 4 and 8 (:mod:`scin.sim.llm`), with the plots and CSVs under ``docs/scale/``.
Every section is tables, figure links and one provenance line; the explanations are the page's
hand-written text. No RTL runs: the whole study takes seconds.
"""

import csv
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..hdl.paper import FLIT_BYTES
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

#: The tracked document and folder ``scin study --doc`` writes.
SCALE_DOC = REPO_ROOT / "docs" / "SCALE.md"
SCALE_FOLDER = REPO_ROOT / "docs" / "scale"
TITLE = "Scale: from the RTL to NVLink-class planes and LLM inference"
#: The generated sections of docs/SCALE.md, in page order (a new file gets them in this order).
SECTIONS = ("scale-status", "scale-calibration", "scale-validation", "scale-compare",
            "scale-window", "scale-compare-rows", "scale-push", "scale-fabric", "scale-tables",
            "scale-ceilings", "scale-collectives", "scale-waves", "scale-plots",
            "scale-resources", "llm-parameters", "llm-models", "llm-best", "llm-paper",
            "llm-figures", "llm-fractions", "llm-sensitivity", "llm-detail", "llm-plot")
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
#: The paper's figures the LLM study is set against (Fig. 10 and section VI).
PAPER = {"ttft": 1.42, "tpot": 1.12, "decode_fraction": 0.19, "prefill_fraction": 0.49}
#: The ISA and datapath synthesized at 4 and 8 ports (256-bit flits), docs/RESOURCES.md.
RESOURCES_CSV = REPO_ROOT / "docs" / "resources" / "resources.csv"
#: Side runs of the NVLS All-Reduce with other windows than ``scin compare``'s default
#: (``scin compare --endpoints 4 --algorithms nvls --window W``): not in compare.csv.
WINDOW_CSV = REPO_ROOT / "docs" / "bench" / "nvls_window.csv"


@dataclass(frozen=True)
class Study:
    """What every section of one ``scin study`` run shares."""
    cal: object
    hop_s: float
    mem_s: float
    out: Path
    rel: str
    ports: tuple
    planes: tuple
    command: str
    commit: str


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


def _provenance(ctx, *facts):
    """The line above a generated table: the command, the commit and what the table depends
    on."""
    return f"*`{ctx.command}`, commit {ctx.commit}" + "".join(f"; {f}" for f in facts) + ".*"


def _commits(commits):
    return ", ".join(commits) or "-"


def _worst(rows, key="error_pct"):
    return max(rows, key=lambda r: abs(r[key])) if rows else None


# --- validation against the RTL -------------------------------------------------------------------

def status_section(ctx, vrows, crows, push_rows):
    """How closely each calibrated figure meets the RTL: points and largest difference per
    source CSV (which figure is calibrated and which modelled is the page's text)."""
    cal = ctx.cal
    costed = [r for r in crows if r["error_pct"] is not None]

    def largest(values, unit="%"):
        return f"{max(values, key=abs):+.2f}{unit}" if values else "-"
    body = []
    for name, dtype in (("SCIN pull, every collective (fp16)", "fp16"),
                        ("SCIN INQ (int8) All-Reduce", "int8")):
        sel = [r["error_pct"] for r in vrows if r["dtype"] == dtype]
        body.append([name, f"`{cal.source}`", len(sel), largest(sel)])
    push = [r["model"] - r["cycles"] for r in push_rows if r["mode"] == "push"]
    body.append(["SCIN push All-Reduce", f"`{cal.push_source or '-'}`", len(push),
                 f"{max(push, key=abs, default=0):+d} cycles" if push else "-"])
    for name, alg in (("NVLS (RTL fabric)", "nvls"), ("ring (RTL fabric)", "ring")):
        sel = [r["error_pct"] for r in costed if r["algorithm"] == alg]
        body.append([name, f"`{cal.compare_source or '-'}`", len(sel), largest(sel)])
    line = _provenance(ctx, f"no RTL run: calibrated from `{cal.source}` at commits "
                       f"{_commits(cal.commits)}, `{cal.compare_source or '-'}` at "
                       f"{_commits(cal.compare_commits)} and `{cal.push_source or '-'}` at "
                       f"{_commits(cal.push_commits)}")
    return "\n".join([line, "", _table(["figure", "measured in", "RTL points",
                                        "largest difference"], body,
                                       ["---", "---", "---:", "---:"])])


def calibration_section(ctx):
    """The fitted constants and what each is fitted from, and the RTL's structural ones."""
    cal = ctx.cal
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
        ["NVLS engine and ring (not fitted)", f"request unit {NVLS_REQUEST_CYCLES} cycles a "
         f"request + a flit per payload flit; sequencer {NVLS_SEQUENCER_CYCLES} + `f` cycles an "
         f"entry; {RING_SLICES} ring slices per chunk", "the RTL (`scin.sim.nvls_model`, "
         "`scin.sim.ring_model`)"],
        ["link of the measurements", f"{cal.one_way_latency}-cycle one-way hops, "
         f"{cal.mem_latency}-cycle memory reads, {cal.flit_bytes} B flits at {cal.clock_mhz} MHz, "
         f"{cal.packet_bytes} B packets", "the paper latency model of `scin bench`"],
    ]
    line = _provenance(ctx, f"fitted by `scin.sim.calibration.write_calibration` from "
                       f"`{cal.source}` and `{cal.compare_source or '-'}` "
                       f"({cal.compare_points} points)")
    return "\n".join([line, "", _table(["constant", "value", "fitted from"], rows,
                                       ["---", "---", "---"])])


def validation_section(ctx, bench_csv):
    """The model against every row of ``scin bench``'s CSV; returns ``(text, rows)``."""
    cal = ctx.cal
    rows = validate(read_bench_csv(bench_csv), cal)
    worst, cur = _worst(rows), _worst(rows, "error_current_pct")
    body = []
    for r in rows:
        op = r["op"] + (":in-place" if r.get("in_place") else "")
        body.append([r["part"], op, r["dtype"], r["size"], r["endpoints"],
                     f"{r['capacity'] // 1024} KiB / {r['waves']}", r.get("commit", ""),
                     f"{r['cycles']:,.0f}", f"{r['model']:,.0f}", f"{r['error_pct']:+.2f}",
                     f"{r['model_current']:,.0f}", f"{r['error_current_pct']:+.2f}"])

    def at(r):
        return f"{r['part']} {r['dtype']} {r['size']} B, N = {r['endpoints']}, {r.get('commit')}"
    largest = [["*model* (the row's commit)", f"{worst['error_pct']:+.2f}%", at(worst),
                f"{worst['cycles']:.0f}", f"{worst['model']:.0f}"],
               [f"*current* (commit {cal.own_commit})", f"{cur['error_current_pct']:+.2f}%",
                at(cur), f"{cur['cycles']:.0f}", f"{cur['model_current']:.0f}"]]
    text = [_provenance(ctx, f"every row of `{cal.source}` ({len(rows)} points, commits "
                        f"{_commits(cal.commits)})"), "",
            _table(["constants", "largest difference", "at", "RTL cycles", "model"], largest,
                   ["---", "---:", "---", "---:", "---:"]), "",
            _table(["part", "op", "dtype", "size (B)", "N", "table / waves", "commit",
                    "RTL cycles", "model", "error %", "current", "error %"], body,
                   ["---"] * 3 + ["---:"] * 2 + ["---"] * 2 + ["---:"] * 5)]
    return "\n".join(text), rows


def _compare_summary(costed):
    """Per algorithm, op and endpoint count: points, largest and mean difference."""
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
    return _table(["algorithm", "op", "N", "points", "largest difference",
                   "mean abs. difference", "within 2%"], summary,
                  ["---", "---", "---:", "---:", "---:", "---:", "---:"])


def _compare_largest(costed):
    """The ring's and NVLS's largest differences, NVLS at N = 4 from 1 MiB apart."""
    nvls = [r for r in costed if r["algorithm"] == "nvls"]
    n4 = [r for r in nvls if int(r["endpoints"]) == 4 and int(r["size"]) >= 1 << 20]
    groups = (("ring", [r for r in costed if r["algorithm"] == "ring"]),
              ("NVLS, all but N = 4 from 1 MiB", [r for r in nvls if r not in n4]),
              ("NVLS at N = 4 from 1 MiB", n4))
    body = []
    for name, sel in groups:
        if sel:
            w = _worst(sel)
            body.append([name, len(sel), f"{min(r['error_pct'] for r in sel):+.2f}% to "
                         f"{max(r['error_pct'] for r in sel):+.2f}%", f"{w['error_pct']:+.2f}%",
                         f"{_size(int(w['size']))} at N = {w['endpoints']}"])
    return _table(["points", "count", "range", "largest difference", "at"], body,
                  ["---", "---:", "---:", "---:", "---"])


def window_section(ctx, path=WINDOW_CSV):
    """The NVLS All-Reduce against its window: the side runs of ``path`` and the model."""
    if not path.exists():
        return f"{path.name} does not exist: no side runs of the NVLS window."
    f = rtl_fabric(ctx.cal)
    runs = sorted(csv.DictReader(open(path)), key=lambda r: (int(r["size"]), int(r["window"])))
    body = []
    for r in runs:
        size, window, cycles = int(r["size"]), int(r["window"]), int(r["cycles"])
        model = nvls_time("allreduce", size, int(r["endpoints"]), f, ctx.cal,
                          window=window) * f.isa_clock_hz
        body.append([_size(size), window, f"{cycles:,}", f"{model:,.0f}",
                     f"{100 * (model - cycles) / cycles:+.2f}"])
    line = _provenance(ctx, f"side runs of `scin compare --endpoints "
                       f"{_commits(sorted({r['endpoints'] for r in runs}))} --algorithms nvls "
                       f"--window W` in `docs/bench/{path.name}`, commit "
                       f"{_commits(sorted({r['commit'] for r in runs}))} (not in compare.csv)")
    return "\n".join([line, "", _table(["size", "window", "RTL cycles", "model", "error %"],
                                       body)])


def compare_sections(ctx, compare_csv):
    """The model against every row of ``scin compare``'s CSV: ``(sections, rows)``, the
    sections a summary per algorithm and endpoint count with the largest differences, the window
    side runs, and every row."""
    cal = ctx.cal
    if not Path(compare_csv).exists():
        missing = f"{compare_csv} does not exist: run `scin compare` for NVLS and ring points."
        return [("scale-compare", missing), ("scale-window", window_section(ctx)),
                ("scale-compare-rows", "-")], []
    rows = validate_compare(read_compare_csv(compare_csv), cal)
    costed = [r for r in rows if r["model"] is not None]
    body = []
    for r in rows:
        window = r.get("window", "") if r["algorithm"] == "nvls" else ""
        body.append([r["algorithm"], r.get("op", "allreduce"), r["endpoints"], f"{int(r['size'])}",
                     window, r.get("commit", ""), f"{r['cycles']:,.0f}",
                     "-" if r["model"] is None else f"{r['model']:,.0f}",
                     "-" if r["error_pct"] is None else f"{r['error_pct']:+.2f}"])
    fitted = sum(r["algorithm"] in ("nvls", "ring") for r in costed)
    line = _provenance(ctx, f"every row of `{cal.compare_source or 'docs/bench/compare.csv'}` "
                       f"({len(rows)} points, commits {_commits(cal.compare_commits)}) on the RTL "
                       f"fabric ({cal.one_way_latency}-cycle hops, {cal.mem_latency}-cycle memory, "
                       f"{cal.flit_bytes} B flits); NVLS's and the ring's constants fitted to "
                       f"{fitted} points")
    summary = "\n".join([line, "", _compare_summary(costed), "", _compare_largest(costed)])
    every = _table(["algorithm", "op", "N", "size (B)", "window", "commit", "RTL cycles",
                    "model", "error %"], body,
                   ["---", "---", "---:", "---:", "---:", "---", "---:", "---:", "---:"])
    return [("scale-compare", summary), ("scale-window", window_section(ctx)),
            ("scale-compare-rows", every)], rows


def push_section(ctx, push_csv):
    """The model against every row of ``scin bench-push``'s CSV (pull and push), with what the
    hop-table push form used before this calibration gave: ``(text, rows)``, each row with its
    ``model`` cycles."""
    cal = ctx.cal
    if not push_csv.exists():
        return f"{push_csv} does not exist: run `scin bench-push` for push points.", []
    rows = read_push_csv(push_csv)
    f = rtl_fabric(cal)
    c = f.isa_cycle_s
    body, worst, moved = [], 0, []
    for r in rows:
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
        r["model"] = model
        body.append([n, dtype, _size(size), mode, r["cycles"], model,
                     f"{model - r['cycles']:+d}", old])
    line = _provenance(ctx, f"every row of `{push_csv.name}` (`scin bench-push`, commits "
                       f"{_commits(cal.push_commits)}); push rows: largest difference {worst} "
                       f"cycle(s); `before` to the model: {min(moved, default=0):+d} to "
                       f"{max(moved, default=0):+d} cycles")
    return "\n".join([line, "", _table(["N", "dtype", "size", "mode", "RTL (cycles)", "model",
                                        "model - RTL", "before"], body,
                                       ["---:", "---", "---:", "---", "---:", "---:", "---:",
                                        "---:"])]), rows


# --- NVLink-class scale ---------------------------------------------------------------------------

def fabric_section(ctx):
    """The NVLink-class parameters the options and the model set (the datasheet figures and
    the assumptions behind them are the page's text)."""
    rows = [
        ["one-way hop", f"{ctx.hop_s * 1e9:.0f} ns", "`--hop-ns`"],
        ["memory read", f"{ctx.mem_s * 1e9:.0f} ns", "`--mem-ns`"],
        ["ISA clock", f"{NVLINK_ISA_HZ / 1e9:.1f} GHz", "`NVLINK_ISA_HZ`"],
        ["packets", f"4 KiB payload, {FLIT_BYTES} B flits, 1 header + "
         f"{ctx.cal.control_flits} control flit per packet", "the calibration"],
        ["NVLS packets and window", f"{NVLS_PACKET_BYTES} B `ld_reduce` and `st` packets; "
         f"`scin compare` runs {NVLS_WINDOW} in flight per rank", "`scin.sim.nvls_model`"],
        ["GPU atomic add", f"{NVLINK_ATOMIC_S * 1e9:g} ns each, one at a time per word",
         "`NVLINK_ATOMIC_S`"],
    ]
    line = _provenance(ctx, f"`--hop-ns {ctx.hop_s * 1e9:g}`, `--mem-ns {ctx.mem_s * 1e9:g}`")
    return "\n".join([line, "", _table(["parameter", "value", "set by"], rows,
                                       ["---", "---", "---"])])


def _scale_params(ctx):
    return (f"NVLink 5, {_commits(map(str, ctx.ports))} ports, "
            f"{_commits(map(str, ctx.planes))} plane(s), hop {ctx.hop_s * 1e9:g} ns, memory "
            f"{ctx.mem_s * 1e9:g} ns")


def scale_tables(ctx):
    """All-Reduce latency of every system at every port count, size and plane count:
    ``(text, csv rows)``."""
    text, csv_rows = [_provenance(ctx, _scale_params(ctx)), ""], []
    for planes in ctx.planes:
        f = nvlink_fabric(5, planes, hop_s=ctx.hop_s, mem_s=ctx.mem_s)
        body = []
        for n in ctx.ports:
            for size in SIZES:
                t = {s: collective_time(s, "allreduce", size, n, f, ctx.cal) for s in SYSTEMS}
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
    return "\n".join(text).rstrip("\n"), csv_rows


def ceilings_section(ctx):
    """SCIN's and NVLS's bandwidth limits on the most planes, per port count."""
    planes = max(ctx.planes)
    f = nvlink_fabric(5, planes, hop_s=ctx.hop_s, mem_s=ctx.mem_s)
    link, ceil = f.link_bytes_per_s, protocol_ceiling(f, ctx.cal)
    body = [[n, f"{ceil:.4f}", f"{ceil * link / 1e9:.0f}", f"{nvls_ceiling(f, n):.4f}",
             f"{nvls_ceiling(f, n) * link / 1e9:.0f}", f"{ceil / nvls_ceiling(f, n):.3f}"]
            for n in ctx.ports]
    line = _provenance(ctx, f"{planes} plane(s), {link / 1e9:.0f} GB/s per GPU and direction, "
                       f"{NVLS_PACKET_BYTES} B NVLS packets")
    return "\n".join([line, "", _table(["N", "SCIN ceiling", "SCIN GB/s", "NVLS ceiling",
                                        "NVLS GB/s", "SCIN / NVLS"], body)])


def collectives_section(ctx):
    """The other collectives at the most ports and planes."""
    nmax, big = max(ctx.ports), max(ctx.planes)
    f = nvlink_fabric(5, big, hop_s=ctx.hop_s, mem_s=ctx.mem_s)
    body = []
    for op in ("reduce-scatter", "allgather", "broadcast", "reduce"):
        for size in (8 << 10, 1 << 20, 16 << 20):
            s = collective_time("scin", op, size, nmax, f, ctx.cal)
            nv = collective_time("nvls", op, size, nmax, f, ctx.cal)
            r = collective_time("ring", op, size, nmax, f, ctx.cal)
            body.append([op, _size(size), _us(s), _us(nv), _us(r), f"{nv / s:.2f}", f"{r / s:.2f}"])
    return "\n".join([_provenance(ctx, f"{nmax} ports, {big} plane(s)"), "",
                      _table(["op", "size", "SCIN (us)", "NVLS (us)", "ring (us)", "NVLS / SCIN",
                              "ring / SCIN"], body)])


def wave_section(ctx, size=16 << 20, n=8):
    """Efficiency against outstanding waves and wave-table capacity on one NVLink 5 link."""
    f = nvlink_fabric(5, 1, hop_s=ctx.hop_s, mem_s=ctx.mem_s)
    body = []
    for cap in (64 << 10, 96 << 10, 128 << 10):
        row = [f"{cap >> 10} KiB"]
        for k in WAVES:
            if cap // k < f.packet_bytes:
                row.append("-")
                continue
            t = scin_time("allreduce", size, n, f, ctx.cal, capacity=cap, waves=k)
            row.append(f"{size / (t * f.link_bytes_per_s):.3f}")
        body.append(row)
    line = _provenance(ctx, f"a {_size(size)} All-Reduce at {n} ports on one "
                       f"{f.link_bytes_per_s / 1e9:.0f} GB/s link")
    return "\n".join([line, "", _table(["table"] + [f"{k} wave{'s' if k > 1 else ''}"
                                                    for k in WAVES], body)])


def scale_plots(ctx):
    """latency.png and bandwidth.png of the modelled NVLink fabric; returns their links."""
    planes, ports = max(ctx.planes), ctx.ports
    f = nvlink_fabric(5, planes, hop_s=ctx.hop_s, mem_s=ctx.mem_s)

    def t(system, x, n):
        return collective_time(system, "allreduce", x, n, f, ctx.cal)

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, n in zip(axes, (min(ports), max(ports))):
        for k, s in enumerate(SYSTEMS):
            ax.plot(PLOT_SIZES, [t(s, x, n) * 1e6 for x in PLOT_SIZES], label=SYSTEM_NAMES[s],
                    **series_style(k))
        ax.set(xscale="log", yscale="log", xlabel="size per rank (bytes)", ylabel="latency (us)",
               title=f"{n} ports")
    finish(fig, list(axes), ctx.out / "latency.png", kind="modelled",
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
    finish(fig, list(axes), ctx.out / "bandwidth.png", kind="modelled", legend_columns=2,
           title=f"All-Reduce bandwidth, {planes} NVLink 5 plane(s), modelled")
    return "\n".join(f"![{p}]({ctx.rel}/{p})" for p in ("latency.png", "bandwidth.png"))


def resources_section(ctx):
    """The ISA's resources at 4 and 8 ports (docs/resources/resources.csv) extended per port,
    and the wave table one plane's ISA needs at NVLink 5."""
    rows = list(csv.DictReader(open(RESOURCES_CSV))) if RESOURCES_CSV.exists() else []
    isa = {int(r["ports"]): r for r in rows if r["block"] == "isa" and r["flit_width"] == "256"}
    if 4 not in isa or 8 not in isa:
        return "docs/resources/resources.csv has no 4- and 8-port ISA point."
    f = nvlink_fabric(5, 18, hop_s=ctx.hop_s, mem_s=ctx.mem_s)
    slot = (f.packet_bytes // f.flit_bytes + 1 + ctx.cal.control_flits) * f.flit_s
    gap = 2 * f.hop_s + f.mem_s + ctx.cal.wave_gap_own * f.isa_cycle_s
    # Slots in flight per participant to keep a plane's link busy: a read's round trip plus
    # its own serialisation, in whole 4 KiB slots, and one more so that release and re-issue
    # overlap.
    bdp_slots = math.ceil((gap + slot) / slot) + 1
    body = []
    for n in sorted({4, 8, *ctx.ports}):
        est = {k: float(isa[4][k]) + (float(isa[8][k]) - float(isa[4][k])) * (n - 4) / 4
               for k in ("lut", "ff", "bram36", "dsp")}
        kind = "measured" if n in isa else "extrapolated"
        body.append([n, kind] + [f"{est[k]:,.0f}" for k in ("lut", "ff", "dsp")]
                    + [f"{est['bram36']:,.1f}", f"{bdp_slots * 4 * n:,.0f} KiB"])
    line = _provenance(ctx, f"`{RESOURCES_CSV.relative_to(REPO_ROOT).as_posix()}` (Yosys, "
                       f"256-bit flits); wave table: a read's round trip ({gap * 1e9:.0f} ns) "
                       f"plus one slot ({slot * 1e9:.0f} ns at "
                       f"{f.link_bytes_per_s / f.planes / 1e9:.0f} GB/s) in flight per "
                       f"participant, {bdp_slots} slots of 4 KiB")
    return "\n".join([line, "", _table(["ports", "", "LUT", "FF", "DSP", "BRAM36",
                                        "wave table at NVLink 5 (all participants)"],
                                       body, ["---:", "---"] + ["---:"] * 5)])


# --- LLM inference --------------------------------------------------------------------------------

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


def _paper_rows(rows):
    """The rows set against the paper: its models at TP 8."""
    return [r for r in rows if r["model"] in llm.PAPER_MODELS and r["tp"] == 8]


def _llm_parameters(ctx, fabric):
    gpu = llm.H200
    rows = [["fabric", fabric.name], ["one-way hop", f"{ctx.hop_s * 1e9:.0f} ns"],
            ["memory read", f"{ctx.mem_s * 1e9:.0f} ns"],
            ["GPU", f"{gpu.name}: {gpu.peak_flops / 1e12:.0f} TFLOPS dense BF16, "
             f"{gpu.hbm_bytes_per_s / 1e12:.1f} TB/s HBM3e ({gpu.source})"],
            ["achieved fraction of peak FLOPs", f"{gpu.flops_efficiency:.0%} (assumption)"],
            ["achieved fraction of HBM bandwidth", f"{gpu.hbm_efficiency:.0%} (assumption)"],
            ["INT8 INQ bytes per FP16 byte", f"{llm.INQ_RATIO:.3f}"]]
    return _table(["parameter", "value"], rows, ["---", "---"])


def _llm_models():
    return _table(["model", "layers", "hidden", "FFN", "heads / KV heads", "experts", "config"],
                  [[m.name, m.layers, m.hidden, m.ffn, f"{m.heads} / {m.kv_heads}",
                    f"{m.experts} (top {m.experts_per_token})" if m.experts > 1 else "-",
                    m.source] for m in llm.MODELS.values()],
                  ["---"] + ["---:"] * 5 + ["---"])


def _llm_best(rows):
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
    return _table(["model", "TP", "TTFT pull", "TTFT INQ", "TPOT pull", "TPOT INQ",
                   "decode in All-Reduce (NVLS)"], summary)


def _llm_paper(rows):
    mx = {k: max(r[k] for r in _paper_rows(rows))
          for k in ("ttft_speedup", "ttft_speedup_inq", "tpot_speedup", "tpot_speedup_inq",
                    "tpot_nvls_ar_fraction", "ttft_nvls_ar_fraction")}
    return _table(["figure", "paper (Fig. 10, section VI)", "here: paper's models, TP 8, "
                   "max over batch 1-64, prompts 512-8k"], [
        ["TTFT speedup over NVLS", f"up to {PAPER['ttft']}x",
         f"{mx['ttft_speedup']:.3f}x pull, {mx['ttft_speedup_inq']:.3f}x INQ"],
        ["TPOT speedup over NVLS", f"up to {PAPER['tpot']}x",
         f"{mx['tpot_speedup']:.3f}x pull, {mx['tpot_speedup_inq']:.3f}x INQ"],
        ["decode time in All-Reduce (NVLS, TP 8)", f"up to {PAPER['decode_fraction']:.0%} "
         "(H200, TensorRT-LLM, FP8)", f"up to {mx['tpot_nvls_ar_fraction']:.1%}"],
        ["prefill time in All-Reduce (NVLS, TP 8)",
         f"up to {PAPER['prefill_fraction']:.0%} (same profile)",
         f"up to {mx['ttft_nvls_ar_fraction']:.1%}"]], ["---", "---", "---"])


def _llm_figures(ctx, rows, fabric):
    """The figures the explanation of the comparison with the paper quotes."""
    cal, dec = ctx.cal, _paper_rows(rows)
    b1 = max(dec, key=lambda r: r["tpot_speedup"])
    bt = max(dec, key=lambda r: r["ttft_speedup_inq"])
    dec_sizes = (min(r["tpot_ar_bytes"] for r in rows), max(r["tpot_ar_bytes"] for r in rows))
    pre_sizes = (min(r["ttft_ar_bytes"] for r in rows), max(r["ttft_ar_bytes"] for r in rows))

    def ratio(system, size):
        return collective_time("nvls", "allreduce", size, 8, fabric, cal) \
            / collective_time(system, "allreduce", size, 8, fabric, cal)
    body = [
        ["decode All-Reduce per GPU (batch 1 to 64)",
         f"{_size(dec_sizes[0])} to {_size(dec_sizes[1])}"],
        [f"NVLS / SCIN pull All-Reduce time, TP 8, {_size(dec_sizes[0])}",
         f"{ratio('scin', dec_sizes[0]):.2f}"],
        ["largest TPOT gain (model, batch, context)",
         f"{b1['tpot_speedup']:.3f}x ({b1['model']}, {b1['batch']}, {b1['prompt']})"],
        ["its NVLS decode step in All-Reduce (against the paper's)",
         f"{b1['tpot_nvls_ar_fraction']:.1%} "
         f"({b1['tpot_nvls_ar_fraction'] / PAPER['decode_fraction']:.1f}x)"],
        ["prefill All-Reduce per GPU", f"{_size(pre_sizes[0])} to {_size(pre_sizes[1])}"],
        ["largest TTFT gain (model, batch, prompt)",
         f"{bt['ttft_speedup']:.3f}x pull, {bt['ttft_speedup_inq']:.3f}x INQ "
         f"({bt['model']}, {bt['batch']}, {bt['prompt']})"],
        ["protocol ceilings SCIN / NVLS at N = 8",
         f"{protocol_ceiling(fabric, cal) / nvls_ceiling(fabric, 8):.3f}"],
        [f"NVLS / SCIN INQ All-Reduce time, TP 8, {_size(pre_sizes[1])}",
         f"{ratio('scin-inq', pre_sizes[1]):.2f}"],
    ]
    return _table(["figure", "value"], body, ["---", "---:"])


def _llm_fractions(rows):
    fractions = []
    for name in llm.MODELS:
        for tp in TPS:
            sel = {r["batch"]: r for r in rows if r["model"] == name and r["tp"] == tp
                   and r["prompt"] == 2048}
            fractions.append([name, tp] + [f"{sel[b]['tpot_nvls_ar_fraction']:.1%}"
                                           for b in BATCHES])
    return _table(["model", "TP"] + [f"batch {b}" for b in BATCHES], fractions)


def _llm_sensitivity(ctx):
    sens = []
    for ns in HOP_SWEEP_NS:
        sub = _paper_rows(llm_rows(ctx.cal, hgx_h200(ns * 1e-9, ctx.mem_s)))
        sens.append([f"{ns} ns", f"{max(r['ttft_speedup'] for r in sub):.3f}",
                     f"{max(r['ttft_speedup_inq'] for r in sub):.3f}",
                     f"{max(r['tpot_speedup'] for r in sub):.3f}",
                     f"{max(r['tpot_speedup_inq'] for r in sub):.3f}",
                     f"{max(r['tpot_nvls_ar_fraction'] for r in sub):.1%}"])
    return _table(["one-way hop", "TTFT pull", "TTFT INQ", "TPOT pull", "TPOT INQ",
                   "decode in All-Reduce (NVLS)"], sens)


def _llm_detail(rows):
    detail = [[r["model"], r["tp"], r["batch"], r["prompt"], f"{r['ttft_nvls_ms']:,.1f}",
               f"{r['ttft_speedup']:.3f}", f"{r['ttft_speedup_inq']:.3f}",
               f"{r['tpot_nvls_ms']:.3f}", f"{r['tpot_speedup']:.3f}",
               f"{r['tpot_speedup_inq']:.3f}", f"{r['tpot_nvls_ar_fraction']:.1%}"]
              for r in rows if r["batch"] in (1, 8, 64) and r["prompt"] in (512, 2048, 8192)]
    return _table(["model", "TP", "batch", "prompt", "TTFT NVLS (ms)", "TTFT pull", "TTFT INQ",
                   "TPOT NVLS (ms)", "TPOT pull", "TPOT INQ", "decode in AR (NVLS)"], detail)


def llm_sections(ctx):
    """TTFT and TPOT over NVLS on the HGX H200 fabric: ``(sections, rows)``."""
    fabric = hgx_h200(ctx.hop_s, ctx.mem_s)
    rows = llm_rows(ctx.cal, fabric)
    grid = (f"{len(llm.MODELS)} models, TP {_commits(map(str, TPS))}, batch "
            f"{BATCHES[0]}-{BATCHES[-1]}, prompt {PROMPTS[0]}-{PROMPTS[-1]}")
    return [("llm-parameters", "\n".join([_provenance(ctx, grid), "",
                                          _llm_parameters(ctx, fabric)])),
            ("llm-models", _llm_models()),
            ("llm-best", _llm_best(rows)),
            ("llm-paper", _llm_paper(rows)),
            ("llm-figures", _llm_figures(ctx, rows, fabric)),
            ("llm-fractions", _llm_fractions(rows)),
            ("llm-sensitivity", _llm_sensitivity(ctx)),
            ("llm-detail", _llm_detail(rows)),
            ("llm-plot", f"![{_llm_plot(rows, ctx.out)}]({ctx.rel}/llm.png)")], rows


def _llm_plot(rows, out):
    """llm.png: modelled TTFT and TPOT speedups against the batch, one style per model."""
    fig, axes = pyplot().subplots(1, 2, figsize=(11, 4.2))
    for k, name in enumerate(llm.MODELS):
        sel = [r for r in rows if r["model"] == name and r["tp"] == 8 and r["prompt"] == 2048]
        axes[0].plot(BATCHES, [r["ttft_speedup_inq"] for r in sel], label=name,
                     **series_style(k))
        axes[1].plot(BATCHES, [r["tpot_speedup"] for r in sel], label=name, **series_style(k))
    axes[0].axhline(PAPER["ttft"], color="k", ls="--", lw=0.8,
                    label=f"paper: up to {PAPER['ttft']}x")
    axes[1].axhline(PAPER["tpot"], color="k", ls="--", lw=0.8,
                    label=f"paper: up to {PAPER['tpot']}x")
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

def _calibration(args, out):
    """The calibration: fitted and written first with ``--calibrate``, else loaded."""
    if not args.calibrate:
        return load_calibration(args.calibration or CALIBRATION_PATH)
    calibration = args.calibration or (CALIBRATION_PATH if args.doc is not None
                                       else out / CALIBRATION_PATH.name)
    compare = args.compare_csv if Path(args.compare_csv).exists() else None
    cal = write_calibration(args.bench_csv, calibration, compare_csv=compare)
    print(f"wrote {calibration} (fitted to {args.bench_csv}"
          f"{' and ' + compare if compare else ''})")
    return cal


def _study(args):
    """Check the options (before any work), fit or load the calibration: the :class:`Study`
    and the document to write."""
    ports, planes = _counts(args.ports, "--ports", 2), _counts(args.planes, "--planes", 1)
    for option in ("bench_csv",) + (("compare_csv",) if args.calibrate else ()):
        if not Path(getattr(args, option)).is_file():
            raise ValueError(f"argument --{option.replace('_', '-')}: no such file "
                             f"{getattr(args, option)!r}")
    out = doc_folder(args, "study", SCALE_FOLDER)
    out.mkdir(parents=True, exist_ok=True)
    cal = _calibration(args, out)
    doc = doc_target(args, "study", SCALE_DOC)
    try:
        rel = out.resolve().relative_to(doc.resolve().parent).as_posix()
    except ValueError:
        rel = out.resolve().as_posix()
    argv = getattr(args, "argv", None)
    command = "scin study" + (" " + " ".join(argv) if argv else "")
    return Study(cal, args.hop_ns * 1e-9, args.mem_ns * 1e-9, out, rel, ports, planes, command,
                 current_commit()), doc


def _sections(ctx, args):
    """Every generated section, ``{name: text}`` in the order of :data:`SECTIONS`, and the rows
    of the CSVs."""
    validation, vrows = validation_section(ctx, args.bench_csv)
    compared, crows = compare_sections(ctx, Path(args.compare_csv))
    tables, scale_rows = scale_tables(ctx)
    llm_text, lrows = llm_sections(ctx)
    pushed, prows = push_section(ctx, Path(args.bench_csv).with_name(PUSH_PATH.name))
    sections = dict([("scale-status", status_section(ctx, vrows, crows, prows)),
                     ("scale-calibration", calibration_section(ctx)),
                     ("scale-validation", validation), *compared, ("scale-push", pushed),
                     ("scale-fabric", fabric_section(ctx)), ("scale-tables", tables),
                     ("scale-ceilings", ceilings_section(ctx)),
                     ("scale-collectives", collectives_section(ctx)),
                     ("scale-waves", wave_section(ctx)), ("scale-plots", scale_plots(ctx)),
                     ("scale-resources", resources_section(ctx)), *llm_text])
    return sections, vrows, crows, scale_rows, lrows


def _write_csvs(out, vrows, crows, scale_rows, lrows):
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


def _report(doc, out, vrows, crows, elapsed):
    """The two summary lines on stdout: the files written and the largest differences."""
    worst = max(abs(r["error_pct"]) for r in vrows)
    print(f"wrote {doc}, {out}/latency.png, bandwidth.png, llm.png, scale.csv, llm.csv, "
          f"validation.csv{', compare_validation.csv' if crows else ''} ({elapsed:.1f} s); "
          f"model against RTL: {len(vrows)} points, largest difference {worst:.2f}%")
    costed = [r for r in crows if r["error_pct"] is not None]
    if costed:
        parts = []
        for alg in ("scin-fp16", "scin-int8", "nvls", "ring"):
            for n in sorted({int(r["endpoints"]) for r in costed if r["algorithm"] == alg}):
                sel = [abs(r["error_pct"]) for r in costed
                       if r["algorithm"] == alg and int(r["endpoints"]) == n]
                parts.append(f"{alg} N={n} {max(sel):.2f}%")
        print(f"model against RTL compare: {len(costed)} points, largest difference "
              f"{max(abs(r['error_pct']) for r in costed):.2f}% ({'; '.join(parts)})")


def run(args):
    """``scin study``: (re)fit if asked, then write the generated sections of docs/SCALE.md,
    their plots and CSVs."""
    started = time.monotonic()
    ctx, doc = _study(args)
    sections, vrows, crows, scale_rows, lrows = _sections(ctx, args)
    _write_csvs(ctx.out, vrows, crows, scale_rows, lrows)
    for name, text in sections.items():
        rewrite_section(doc, name, text, title=TITLE)
    _report(doc, ctx.out, vrows, crows, time.monotonic() - started)
    return 0


def main(argv=None):
    """``python -m scin.scripts.study``: the same as ``scin study``."""
    from .cli import main
    return main(["study", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
