"""``scin coverage``: the line and toggle coverage report of ``hdl/`` from collected runs.

The data comes from a test run with ``SCIN_COVERAGE=1`` (``make coverage``): every Verilator run
leaves its counts in ``.build/coverage/`` (:mod:`scin.sim.hdl_coverage`). This command merges
them, maps them to the lines of ``hdl/`` and writes the Markdown report (``COVERAGE.md`` in
``out/coverage/`` or ``--out``; with ``--doc`` the tracked ``docs/COVERAGE.md``): the overall
share, a table per ``hdl/`` file, the files with no point and every uncovered line with its
reason (``docs/coverage-waivers.toml``, each waiver naming its line by file, scope and text,
:mod:`scin.sim.line_keys`; or "not reached by any test"). Exit status 0, or 1 below ``--min``;
2 on bad options, no data, or a waiver that names no line of the source.
"""

import sys
from pathlib import Path

from ..sim import hdl_coverage
from ..sim.toolchain import BUILD_ROOT, REPO_ROOT
from .docs_section import current_commit
from .options import default_out, json_file, out_dir, real
from .outputs import write_text

#: The tracked report ``scin coverage --doc`` writes.
COVERAGE_DOC = REPO_ROOT / "docs" / "COVERAGE.md"


__all__ = ["add_arguments", "run"]


def add_arguments(p):
    """The options of ``scin coverage``."""
    p.add_argument("--data", default=str(BUILD_ROOT / "coverage"), metavar="DIR",
                   help="the coverage data of the runs (default: .build/coverage, where "
                        "SCIN_COVERAGE=1 runs write it)")
    p.add_argument("--out", type=out_dir, default=default_out("coverage"), metavar="DIR",
                   help="folder of the Markdown report COVERAGE.md (default: out/coverage/)")
    p.add_argument("--doc", type=json_file, nargs="?", const=COVERAGE_DOC, default=None,
                   metavar="FILE",
                   help="write the report into the tracked docs/COVERAGE.md instead (or FILE; "
                        "'-': standard output)")
    p.add_argument("--waivers", default=str(hdl_coverage.WAIVERS_PATH), metavar="FILE",
                   help="reasons for uncovered lines, 'hdl/FILE::SCOPE::TEXT' = 'reason' under "
                        "[waivers] (default: docs/coverage-waivers.toml)")
    # Not --command: `args.command` is the name of the scin command (scripts/cli.py).
    p.add_argument("--collected-by", default="make coverage", metavar="TEXT",
                   help="the command that collected the data, quoted in the report "
                        "(default: 'make coverage')")
    p.add_argument("--note", action="append", default=[], metavar="TEXT",
                   help="a paragraph for the top of the report (what was run, how long it took); "
                        "repeatable")
    p.add_argument("--min", type=real(0, 100), default=None, metavar="PERCENT",
                   help="exit 1 when fewer than PERCENT of the instrumented hdl/ lines are covered "
                        "(default: report only)")


def run(args):
    """Merge the data, write the report, print the summary; see the module docstring."""
    target = args.doc if args.doc is not None else Path(args.out) / COVERAGE_DOC.name
    # The waivers first: a stale one stops the command before minutes of merging.
    waivers = hdl_coverage.load_waivers(Path(args.waivers))
    try:
        cov = hdl_coverage.collect(Path(args.data))
    except FileNotFoundError as exc:
        raise RuntimeError(str(exc)) from exc
    report = hdl_coverage.render_report(cov, waivers=waivers, command=args.collected_by,
                                        commit=current_commit(), notes=args.note)
    total = len(cov.lines)
    covered = sum(1 for hits in cov.lines.values() if hits)
    share = 100 * covered / total if total else 0.0
    if target == "-":
        sys.stdout.write(report)
    else:
        write_text(target, report)
        # The summary and the per-module table, as the report has them.
        lines = report.splitlines()
        start = lines.index("## Summary")
        end = lines.index("## `hdl/` files with no coverage point")
        print("\n".join(lines[start + 2:end]).rstrip())
        print(f"wrote {target}")
    if args.min is not None and share < args.min:
        print(f"scin coverage: {share:.1f} % of instrumented hdl/ lines covered, below "
              f"--min {args.min}", file=sys.stderr)
        return 1
    return 0
