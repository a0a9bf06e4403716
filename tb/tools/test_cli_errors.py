"""Bad ``scin`` invocations, table-driven: each must exit with status 2 and one line on standard
error that names the option, with no traceback, before any work, so nothing is written: not in
the current folder, not in the commands' output root, not in the tracked docs/.

Every case runs in process in an empty temporary folder with the output root (``out/``) moved
into it; ``{file}`` in an argument is an existing file there, ``{dir}`` an existing folder."""

import os
import re

import pytest

from scin.scripts import options
from scin.scripts.cli import main
from scin.sim.toolchain import REPO_ROOT


#: ``(argv, option named in the error)``.
CASES = [
    # allreduce and collective: values, ranges, combinations, output paths
    (["allreduce", "--size", "-4KiB"], "--size"),
    (["allreduce", "--size", "4 parsecs"], "--size"),
    (["allreduce", "--seed", "-1"], "--seed"),
    (["allreduce", "--outstanding", "3"], "--outstanding"),
    (["allreduce", "--latency", "-5"], "--latency"),
    (["allreduce", "--mem-latency", "2"], "--mem-latency"),
    (["allreduce", "--gather-pairs"], "--gather-pairs"),
    (["allreduce", "--siz", "4KiB"], "--siz"),
    (["allreduce", "--endpoints", "9"], "--endpoints"),
    (["allreduce", "--endpoints", "four"], "--endpoints"),
    (["allreduce", "--capacity", "3KiB"], "--capacity"),
    (["allreduce", "--capacity", "12KiB"], "--capacity"),
    (["allreduce", "--push-capacity", "5"], "--push-capacity"),
    (["allreduce", "--replays", "0"], "--replays"),
    (["allreduce", "--trains", "0"], "--trains"),
    (["allreduce", "--trains", "9"], "--trains"),
    (["allreduce", "--dtype", "fp32"], "--dtype"),
    (["allreduce", "--save", "{file}"], "--save"),
    (["allreduce", "--save", "{file}/sub"], "--save"),
    (["allreduce", "--json", "{dir}"], "--json"),
    (["allreduce", "--json", "{file}/x.json"], "--json"),
    (["collective", "--op", "barrier", "--in-place"], "--in-place"),
    (["collective", "--op", "allreduce", "--root", "2"], "--root"),
    (["collective", "--op", "broadcast", "--root", "4"], "--root"),
    (["collective", "--op", "broadcast", "--root", "-1"], "--root"),
    (["collective", "--op", "nope"], "--op"),
    # the HDL commands
    (["verilog", "--ports", "100"], "--ports"),
    (["verilog", "--flit-width", "100"], "--flit-width"),
    (["verilog", "--block", "nonesuch"], "--block"),
    (["verilog", "--out", "{file}"], "--out"),
    (["package", "--freq-mhz", "0"], "--freq-mhz"),
    (["package", "--block", "nope"], "--block"),
    (["synth", "--target", "virtex2"], "--target"),
    (["synth", "--json", "{dir}"], "--json"),
    (["timing", "--block", "feeder", "--paths", "-1"], "--paths"),
    (["timing", "--block", "nope"], "--block"),
    (["lint", "--blok", "isa"], "--blok"),
    (["lint", "--block", "nope"], "--block"),
    (["synth", "--block", "nope"], "--block"),
    (["build", "--board", "vu13p-endpoint", "--port", "-1"], "--port"),
    (["build", "--board", "ulx3s-85f", "--seed", "-1"], "--seed"),
    (["build", "--board", "vu13p-endpoint", "--out", "{file}"], "--out"),
    (["prove", "--jobs", "0"], "--jobs"),
    (["prove", "--doc", "{dir}"], "--doc"),
    (["mutate", "--count", "0"], "--count"),
    (["mutate", "--min-score", "2"], "--min-score"),
    # studies and benches
    (["accuracy", "--seeds", "0"], "--seeds"),
    (["accuracy", "--tokens", "0"], "--tokens"),
    (["accuracy", "--endpoints", "2,32"], "--endpoints"),
    (["accuracy", "--hidden", "100"], "--hidden"),
    (["accuracy", "--out", "{file}"], "--out"),
    (["accuracy", "--out-dir", "{dir}"], "--out-dir"),
    (["soak", "--count", "0"], "--count"),
    (["soak", "--fault-rate", "2"], "--fault-rate"),
    (["soak", "--max-size", "-4KiB"], "--max-size"),
    (["soak", "--seeds", "0"], "--seeds"),
    (["soak", "--nvls", "--traffic-rate", "0.5"], "--traffic-rate"),
    (["soak", "--coverage-report", "{dir}"], "--coverage-report"),
    (["bench", "--seeds", "0"], "--seeds"),
    (["bench", "--out", "{file}"], "--out"),
    (["bench", "--doc", "{dir}"], "--doc"),
    (["bench", "--endpoint-counts", "8"], "--endpoint-counts"),
    (["bench", "--waves", "3"], "--waves"),
    (["bench", "--parts", "nope"], "--parts"),
    (["bench", "--sizes", "5"], "--sizes"),
    (["bench-push", "--sizes", "5"], "--sizes"),
    (["bench-push", "--push-capacity", "3"], "--push-capacity"),
    (["compare", "--sizes", "7"], "--sizes"),
    (["allreduce", "--size", "5"], "--size"),
    (["bench-push", "--latency", "2"], "--latency"),
    (["bench-push", "--seed", "-1"], "--seed"),
    (["bench-allreduce", "fp16:3B"], "cases"),
    (["bench-allreduce", "--seeds", "0"], "--seeds"),
    (["bench-port", "--credits", "0"], "--credits"),
    (["bench-port", "--runs", "0"], "--runs"),
    (["bench-port", "--no-write"], "--no-write"),
    (["compare", "--window", "17"], "--window"),
    (["compare", "--endpoints", "5"], "--endpoints"),
    (["study", "--hop-ns", "0"], "--hop-ns"),
    (["study", "--bench-csv", "{dir}/none.csv"], "--bench-csv"),
    (["study", "--out", "{file}"], "--out"),
    (["coverage", "--min", "101"], "--min"),
    (["coverage", "--out", "{file}"], "--out"),
    (["resources", "--block", "nope"], "--block"),
    (["resources", "--flits", "65"], "--flits"),
    (["resources", "--ports", "3"], "--ports"),
    (["resources", "--no-doc"], "--no-doc"),
    (["clean", "--bogus"], "--bogus"),
]


def _tree(root):
    """Every file under ``root`` with its size and modification time."""
    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            stat = os.stat(path)
            found[path] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty current folder holding the output root, one file and one folder."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (tmp_path / "a.txt").write_text("a file\n")
    (tmp_path / "folder").mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(options, "OUT_ROOT", tmp_path / "out")
    return tmp_path


def _status(argv):
    try:
        return main(argv)
    except SystemExit as exc:       # refused by argparse (an option's type, an unknown option)
        return exc.code


@pytest.mark.parametrize("argv, option", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_invocation_is_one_line_exit_2_and_writes_nothing(argv, option, workdir, capsys):
    argv = [a.format(file=workdir / "a.txt", dir=workdir / "folder") for a in argv]
    before, docs = _tree(workdir), _tree(REPO_ROOT / "docs")
    status = _status(argv)
    out, err = capsys.readouterr()
    assert status == 2, (status, err)
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert re.match(rf"scin {re.escape(argv[0])}: error: ", err), err
    assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", err), err
    assert "Traceback" not in err and "numpy" not in err.lower()
    assert _tree(workdir) == before, "a file was written"
    assert _tree(REPO_ROOT / "docs") == docs, "docs/ changed"


def test_there_are_at_least_forty_cases_across_the_commands():
    assert len(CASES) >= 40
    assert len({argv[0] for argv, _ in CASES}) >= 15
