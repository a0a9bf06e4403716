"""``scin prove``: every formal property of the project, proved or checked, with a table.

Runs the checks of :data:`scin.sim.formal.prover.PROPERTY_SETS` (the harnesses of ``sim/formal/``):
for each property set its proof (k-induction, unbounded, or a bounded model check of a stated
depth), its covers (each must be reached: the assumptions leave the interesting behaviour possible)
and its deliberately broken variants (each must fail one of the properties it targets). One line per
check as it ends, then one row per property. Results are cached in ``.build/formal/`` by what was
solved (the harness's RTLIL, the engine, the depth and the tools' versions); ``--fresh`` solves
again. Exit status 0 when every check has its expected result, 1 otherwise, 2 on bad options.
docs/VERIFICATION.md says what each property means and why each depth is enough.
"""

import json
import sys
import time

from ..sim.toolchain import REPO_ROOT
from .docs_section import current_commit, rewrite_section
from .options import integer, json_file, out_file
from .outputs import emit_json


__all__ = ["add_arguments", "run", "property_rows", "times_markdown"]


def add_arguments(p):
    """The options of ``scin prove``."""
    p.add_argument("--only", default=None, metavar="NAME[,NAME]",
                   help="property sets or checks to run (a set's name runs its proof, covers and "
                        "broken variants; `SET:cover`, `SET:VARIANT` one check); default: all")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("--jobs", type=integer(1), default=2, help="solver runs at once (default: 2)")
    p.add_argument("--fresh", action="store_true",
                   help="solve again, ignoring results cached in .build/formal/")
    p.add_argument("--doc", type=out_file, nargs="?",
                   const=REPO_ROOT / "docs" / "VERIFICATION.md", default=None, metavar="FILE",
                   help="write the checks' results and seconds into the 'prove-times' section "
                        "of FILE (default when given: docs/VERIFICATION.md)")
    p.add_argument("--json", type=json_file, nargs="?", const="-", default=None, metavar="FILE",
                   help="every result as JSON on standard output instead of the table, or, "
                        "with FILE, into FILE")


def _properties(check, cache={}):
    """The :class:`~scin.sim.formal.Properties` of ``check``'s harness, as its elaboration
    records them (the names exist only once ``elaborate`` has run)."""
    from amaranth.hdl import Fragment
    key = (check.harness, check.params)
    if key not in cache:
        harness = check.build()
        Fragment.get(harness, None)
        cache[key] = harness.properties
    return cache[key]


def property_rows(selected, results):
    """The table's rows, ``(property, set, engine, depth, result, seconds)``: one per property
    of each proof (its specification and invariants, read from the harness), one per cover and
    one per broken variant (its result and the properties it broke)."""
    rows = []
    by_name = {r.check: r for r in results}
    for check in selected:
        res = by_name[check.name]
        verdict = res.status if res.ok else f"{res.status} (expected {check.expect})"
        if check.engine == "cover":
            props = _properties(check)
            for name in props.of_kind("cover"):
                reached = res.reached.get(name)
                text = f"reached at cycle {reached}" if reached is not None else verdict
                rows.append((name, check.set, "cover", check.depth_text, text, res.seconds))
        elif check.expect == "failed":
            broke = ", ".join(res.failed) or "nothing"
            rows.append((f"broken: {check.name.split(':', 1)[1]}", check.set, check.engine,
                         check.depth_text, f"{verdict}: {broke}", res.seconds))
        else:
            props = _properties(check)
            for kind in ("spec", "invariant"):
                for name in props.of_kind(kind):
                    label = name if kind == "spec" else f"{name} (invariant)"
                    failed = name in res.failed
                    text = "failed" if failed else verdict
                    rows.append((label, check.set, check.engine, check.depth_text, text,
                                 res.seconds))
    return rows


def _table(rows):
    head = ("property", "set", "engine", "depth", "result", "s")
    cells = [head] + [(a, b, c, d, e, f"{s:.1f}") for a, b, c, d, e, s in rows]
    widths = [max(len(str(r[i])) for r in cells) for i in range(len(head))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()
                     for r in cells)


def times_markdown(results, selected, args, wall):
    """The ``prove-times`` section: one row per check with its result and solver seconds."""
    by_name = {r.check: r for r in results}
    solver = sum(r.seconds for r in results)
    fresh = " --fresh" if args.fresh else ""
    lines = [f"Command: `scin prove{fresh} --jobs {args.jobs} --doc` (commit {current_commit()}, "
             f"{wall:.0f} s wall, {solver:.0f} s of solver time on the shared 2-core machine"
             f"{'' if args.fresh else '; cached results count their original seconds'}).", "",
             "| check | engine | depth | expected | result | s |",
             "| --- | --- | --- | --- | --- | ---: |"]
    for c in selected:
        r = by_name[c.name]
        result = r.status + (f" ({', '.join(r.failed)})" if r.failed and c.expect == "failed"
                             else "")
        lines.append(f"| `{c.name}` | {c.engine} | {c.depth_text} | {c.expect} | "
                     f"{result if r.ok else '**' + result + '**'} | {r.seconds:.1f} |")
    return "\n".join(lines)


def run(args):
    """``scin prove``: run the selected checks and report."""
    from ..sim.formal import prover
    names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else []
    selected = prover.select(names)
    if args.list:
        for c in selected:
            expect = {"proved": "must be proved", "reached": "covers must be reached",
                      "failed": "must fail"}[c.expect]
            expect += f" on {', '.join(c.must_fail)}" if c.must_fail else ""
            print(f"{c.name:32} {c.block:42} {c.engine:11} depth {c.depth_text:9} {expect}")
        return 0
    quiet = args.json == "-"
    log = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if quiet else print
    log(f"scin prove: {len(selected)} checks, {args.jobs} at a time"
        f"{' (fresh)' if args.fresh else ''}", flush=True)
    started = time.monotonic()
    done = []

    def progress(res):
        done.append(res)
        mark = "ok  " if res.ok else "FAIL"
        cached = ", cached" if res.cached else ""
        log(f"[{len(done)}/{len(selected)}] {mark} {res.check}: {res.status} "
            f"({res.seconds:.1f} s{cached}){': ' + res.detail if res.detail else ''}", flush=True)

    results = prover.run_checks(selected, jobs=args.jobs, fresh=args.fresh, progress=progress)
    wall = time.monotonic() - started
    bad = [r for r in results if not r.ok]
    if args.json:
        text = json.dumps({"checks": [prover.result_dict(r) for r in results],
                           "passed": not bad, "seconds": round(wall, 1)}, indent=1)
        emit_json(args.json, text)
    if args.doc:
        rewrite_section(args.doc, "prove-times", times_markdown(results, selected, args, wall),
                        title="Verification")
        log(f"wrote the prove-times section of {args.doc}")
    if not quiet:
        print()
        print(_table(property_rows(selected, results)))
        solver = sum(r.seconds for r in results)
        print(f"\nscin prove: {len(results) - len(bad)} of {len(results)} checks as expected; "
              f"{solver:.1f} s of solver time, {wall:.1f} s wall")
        for r in bad:
            print(f"  FAILED {r.check}: {r.status}: {r.detail}")
    return 0 if not bad else 1
