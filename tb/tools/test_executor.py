"""Sweeps on Dask (``scripts/executor.py``): the same CSV from a 2-worker local cluster as from
the serial run, a failed point reported while the others finish, and the options' errors.

The sweep compared is the cheapest real one: ``scin bench --parts op`` with a barrier and a 64 B
All-Reduce, whose system is the default configuration ``tb/system/test_system.py`` already builds on
Verilator (so in the suite the runs cost seconds, not a build).
"""

import argparse
import csv
import io

import pytest

from scin.scripts import executor
from scin.scripts.cli import main

#: Columns that differ between any two runs, on any executor: the timings, and the commit checked
#: out when each run started (a commit landing between the two runs of the test changes it).
TIMING = {"wall_s", "sim_cps", "commit"}


def read_rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, [{k: v for k, v in row.items() if k not in TIMING}
                                   for row in reader]


def test_bench_csv_is_the_same_on_a_local_cluster(tmp_path, capsys):
    sweep = ["bench", "--parts", "op", "--ops", "barrier,allreduce", "--op-sizes", "64B",
             "--no-hops"]
    csvs = {}
    for name, extra in (("serial", []), ("cluster", ["--jobs", "2"])):
        out = tmp_path / name
        out.mkdir()
        doc = out / "PERFORMANCE.md"
        doc.write_text("# Performance\n")
        code = main([*sweep, "--out", str(out), "--doc", str(doc), *extra])
        assert code == 0, capsys.readouterr().err
        csvs[name] = read_rows(out / "bench.csv")
    fields, rows = csvs["serial"]
    assert [r["op"] for r in rows] == ["barrier", "allreduce"]
    assert csvs["cluster"] == (fields, rows)


def square_or_fail(x):
    """A point for the executor: fails on 3 (module level, so a Dask worker can import it)."""
    if x == 3:
        raise ArithmeticError("three is not allowed")
    return x * x


def where(jobs):
    return argparse.Namespace(jobs=jobs, scheduler=None, cluster=None, cluster_option=[])


@pytest.mark.parametrize("jobs", [1, 2], ids=["serial", "local-cluster"])
def test_a_failed_point_is_reported_and_the_others_finish(jobs):
    done, failed = {}, {}
    stream = io.StringIO()
    n = executor.run_points(square_or_fail, [(x,) for x in range(6)], where(jobs),
                            lambda i, p, r: done.__setitem__(i, r),
                            lambda i, p, e: failed.__setitem__(i, e),
                            progress=executor.Progress(6, "test", stream))
    assert n == 1 and done == {i: i * i for i in range(6) if i != 3}
    assert list(failed) == [3] and isinstance(failed[3], ArithmeticError)
    assert "three is not allowed" in str(failed[3])


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_line_counts_done_failed_and_remaining():
    stream = Terminal()
    progress = executor.Progress(3, "scin bench", stream)
    progress.count(failed=False)
    progress.log(lambda text: stream.write(text + "\n"), "[1/3] a point")
    progress.count(failed=True)
    progress.close()
    text = stream.getvalue()
    assert "scin bench: 1 done, 0 failed, 2 remaining" in text
    assert "scin bench: 1 done, 1 failed, 1 remaining" in text
    assert "\r\x1b[K[1/3] a point\n" in text   # a log line clears the live line first


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "0"], "--jobs must be at least 1, not 0"),
    (["--scheduler", "tcp://h:8786", "--cluster", "slurm"], "exclude each other"),
    (["--scheduler", "h:8786"], "must be an address like tcp://HOST:PORT"),
    (["--cluster-option", "queue=short"], "--cluster-option needs --cluster"),
    (["--cluster", "pbs", "--cluster-option", "queue"], "takes KEY=VALUE, not 'queue'"),
])
def test_bad_executor_options_name_the_option(argv, message):
    parser = argparse.ArgumentParser()
    executor.add_arguments(parser, jobs_default=1)
    with pytest.raises(ValueError, match=message):
        executor.check_arguments(parser.parse_args(argv))


def test_describe_says_where_the_points_run():
    assert executor.describe(where(1)) == "one at a time, in this process"
    assert executor.describe(where(4)) == "on a local Dask cluster of 4 workers"
    slurm = argparse.Namespace(jobs=8, scheduler=None, cluster="slurm", cluster_option=[])
    assert executor.describe(slurm) == "on 8 slurm job(s) (dask-jobqueue)"
