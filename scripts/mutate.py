"""``scin mutate``: how many deliberate bugs in the HDL the tests notice (the mutation score).

Draws ``--count`` mutants (``scripts/mutation.py``: inverted comparisons, constants off by one,
dropped conditions, removed inversions, swapped enumeration values) spread over the HDL files of
:data:`~.mutation.TARGETS`, first checks that each file's tests pass on the unmutated tree (a
baseline that fails would make every mutant look killed), then runs each mutant's tests on a
scratch copy of the tree and reports killed, survived and timed-out mutants, the score
(killed + timed out over all that ran) and every survivor with its triage
(:data:`~.mutation.TRIAGE`, keyed by :attr:`~.mutation.Mutant.key`, or "not triaged"; a TRIAGE
entry that names no mutant of today's source stops the command before it runs anything, exit
status 2). ``--doc`` writes the report into
docs/VERIFICATION.md. Exit status 0 when the score reaches ``--min-score`` and every baseline
passed, 1 otherwise, 2 on bad options.
"""

import dataclasses
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from ..sim.toolchain import REPO_ROOT
from .docs_section import current_commit, rewrite_section
from .options import integer, json_file, out_file, real
from .outputs import emit_json


__all__ = ["add_arguments", "run", "report_markdown", "score"]


def add_arguments(p):
    """The options of ``scin mutate``."""
    p.add_argument("--count", type=integer(1), default=60, help="mutants to draw (default: 60)")
    p.add_argument("--seed", type=integer(0), default=1, help="seed of the draw (default: 1)")
    p.add_argument("--files", default=None,
                   help="comma-separated HDL files to mutate (default: every file with tests "
                        "listed in scripts/mutation.py's TARGETS)")
    p.add_argument("--jobs", type=integer(1), default=2, help="mutants run at once (default: 2)")
    p.add_argument("--timeout", type=integer(1), default=600,
                   help="seconds a mutant's tests may take before it counts as a hang "
                        "(default: 600)")
    p.add_argument("--min-score", type=real(0, 1), default=0.9,
                   help="exit 1 below this share of mutants killed (default: 0.9)")
    p.add_argument("--list", action="store_true",
                   help="list the drawn mutants and every file's number of sites, run nothing")
    p.add_argument("--json", type=json_file, nargs="?", const="-", default=None, metavar="FILE",
                   help="every outcome as JSON on standard output, or, with FILE, into FILE")
    p.add_argument("--from-json", metavar="FILE", default=None,
                   help="run nothing: report (and with --doc, write) the outcomes of an earlier "
                        "run's --json FILE, with today's triage")
    p.add_argument("--doc", type=out_file, nargs="?",
                   const=REPO_ROOT / "docs" / "VERIFICATION.md", default=None, metavar="FILE",
                   help="write the report into the 'mutation' section of this "
                                      "document (default when given: docs/VERIFICATION.md)")


def score(outcomes):
    """``(noticed, ran)``: mutants killed or timed out, and mutants that ran (errors left out)."""
    ran = [o for o in outcomes if o.status != "error"]
    return sum(o.status in ("killed", "timeout") for o in ran), len(ran)


def _line(o):
    m = o.mutant
    by = f"; by {o.failed[0]}" if o.failed else ""
    by += " (second tier)" if o.tier == 2 and o.status == "killed" else ""
    note = f"; {o.detail}" if o.detail and o.status != "killed" else ""
    return (f"{o.status:8} {m.file}:{m.line} {m.operator}: {m.before!r} -> {m.after!r} "
            f"({o.seconds:.1f} s{by}{note})")


def report_markdown(outcomes, args, seconds, triage, commit=None):
    """The ``mutation`` section of docs/VERIFICATION.md for ``outcomes`` (of a run at ``commit``,
    default the checked-out one)."""
    noticed, ran = score(outcomes)
    files = {}
    for o in outcomes:
        files.setdefault(o.mutant.file, []).append(o)
    lines = ["## Mutation score (`scin mutate`)", "",
             f"Command: `scin mutate --count {args.count} --seed {args.seed} --jobs {args.jobs} "
             f"--doc` (commit {commit or current_commit()}, {seconds:.0f} s "
             f"on {args.jobs} workers). "
             f"Score: **{noticed} of {ran} mutants noticed ({noticed / max(ran, 1):.1%})**"
             + (f"; {len(outcomes) - ran} could not run" if ran < len(outcomes) else "") + ".",
             "", "Each mutant runs its file's tests (first tier); one that survives them runs the "
                 "second tier too (Icarus simulations of the block in its system), and survives "
                 "only if it survives both.", "",
             "| file | first tier | second tier | mutants | killed (first tier) | killed (second) "
             "| timed out | survived |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    from .mutation import SECOND_TIER, TARGETS
    for f, group in files.items():
        count = {s: sum(o.status == s for o in group) for s in ("killed", "timeout", "survived")}
        second = sum(o.status == "killed" and o.tier == 2 for o in group)
        tier2 = f"`{' '.join(SECOND_TIER[f])}`" if f in SECOND_TIER else "-"
        lines.append(f"| `{f}` | `{' '.join(TARGETS[f])}` | {tier2} | {len(group)} | "
                     f"{count['killed'] - second} | {second} | {count['timeout']} | "
                     f"{count['survived']} |")
    survivors = [o for o in outcomes if o.status == "survived"]
    lines += ["", f"Survivors ({len(survivors)}), each triaged (`TRIAGE` in scripts/mutation.py):",
              ""]
    if survivors:
        lines += ["| mutant | change | triage |", "| --- | --- | --- |"]
        for o in survivors:
            m = o.mutant
            change = f"`{m.before}` -> `{m.after}`".replace("|", "\\|")
            reason = triage.get(m.key, "**not triaged**").replace("|", "\\|")
            lines.append(f"| `{m.file}:{m.line}` {m.operator} | {change} | {reason} |")
    else:
        lines.append("None.")
    return "\n".join(lines)


def run(args):
    """``scin mutate``: draw, check the baselines, run the mutants, report."""
    from . import mutation
    from .cli import CommandError
    if args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, not {args.jobs}")
    # A stale entry (its line edited) fails here, naming its file, scope and text.
    mutation.resolve_triage()
    if args.from_json:
        return _report_again(args, mutation)
    files = None if args.files is None else [f.strip() for f in args.files.split(",") if f.strip()]
    mutants = mutation.choose(args.count, args.seed, files)
    if args.list:
        for f in (files or mutation.TARGETS):
            print(f"{f}: {len(mutation.sites(f))} sites; tests: {' '.join(mutation.TARGETS[f])}")
        for m in mutants:
            print(f"{m.name}: {m.before!r} -> {m.after!r}\n  key {m.key}")
        return 0
    started = time.monotonic()
    involved = list(dict.fromkeys(m.file for m in mutants))
    print(f"scin mutate: {len(mutants)} mutants over {len(involved)} files (seed {args.seed}); "
          f"baselines first", flush=True)
    suites = {}
    for f in involved:
        suites.setdefault(tuple(mutation.TARGETS[f]), f)
        if f in mutation.SECOND_TIER:
            suites.setdefault(tuple(mutation.SECOND_TIER[f]), f)
    broken = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(mutation.run_tests, f, None, args.timeout, tests=list(tests)): tests
                   for tests, f in suites.items()}
        for future in as_completed(futures):
            status, seconds, failed, detail = future.result()
            tests = " ".join(futures[future])
            print(f"  baseline `{tests}`: {'passes' if status == 'survived' else status} "
                  f"({seconds:.1f} s){'' if status == 'survived' else '; ' + detail}", flush=True)
            if status != "survived":
                broken.append(tests)
    if broken:
        raise CommandError(f"these tests do not pass on the unmutated tree: {'; '.join(broken)}; "
                           f"fix them (or TARGETS/SECOND_TIER) before measuring mutants", status=1)
    outcomes = {}
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(mutation.run_mutant, m, args.timeout): m for m in mutants}
        for i, future in enumerate(as_completed(futures), 1):
            o = future.result()
            outcomes[o.mutant.name] = o
            noticed, ran = score(outcomes.values())
            print(f"[{i}/{len(mutants)}] {_line(o)} [score {noticed}/{ran}; "
                  f"{time.monotonic() - started:.0f} s]", flush=True)
    ordered = [outcomes[m.name] for m in mutants]
    seconds = time.monotonic() - started
    return _report(args, mutation, ordered, seconds, current_commit())


def _report_again(args, mutation):
    """``--from-json``: the outcomes of an earlier run, reported with today's triage."""
    with open(args.from_json) as f:
        saved = json.load(f)
    fields = {f.name for f in dataclasses.fields(mutation.Mutant)}
    ordered = [mutation.Outcome(mutation.Mutant(**{k: v for k, v in d.items() if k in fields}),
                                d["status"], d["seconds"], d["failed"], d["detail"],
                                d.get("tier", 1))
               for d in saved["mutants"]]
    args.count, args.seed = saved["count"], saved["seed"]
    args.jobs = saved.get("jobs", args.jobs)
    args.json = None
    return _report(args, mutation, ordered, saved["seconds"], saved.get("commit"))


def _report(args, mutation, ordered, seconds, commit):
    """Print the score and the survivors; write ``--json`` and ``--doc``; the exit status."""
    noticed, ran = score(ordered)
    share = noticed / max(ran, 1)
    survivors = [o for o in ordered if o.status == "survived"]
    print(f"scin mutate: {noticed} of {ran} mutants noticed ({share:.1%}), {len(survivors)} "
          f"survived, {len(ordered) - ran} could not run; {seconds:.0f} s")
    for o in survivors:
        reason = mutation.TRIAGE.get(o.mutant.key, "not triaged")
        print(f"  survived {o.mutant.name}: {o.mutant.before!r} -> {o.mutant.after!r} ({reason})"
              f"\n    key {o.mutant.key}")
    if args.json:
        text = json.dumps({"seed": args.seed, "count": args.count, "jobs": args.jobs,
                           "commit": commit, "noticed": noticed, "ran": ran,
                           "seconds": round(seconds, 1),
                           "mutants": [o.as_dict() for o in ordered]}, indent=1)
        emit_json(args.json, text)
    if args.doc:
        rewrite_section(args.doc, "mutation", report_markdown(ordered, args, seconds,
                                                              mutation.TRIAGE, commit),
                        title="Verification")
        print(f"wrote the mutation section of {args.doc}", file=sys.stderr)
    return 0 if share >= args.min_score else 1
