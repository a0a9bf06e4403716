"""Where a sweep's independent points run: here, on a local Dask cluster, on an existing Dask
cluster, or on Slurm, PBS or LSF through dask-jobqueue. Shared by ``scin bench``, ``scin
resources`` and ``scin soak --seeds`` (:func:`add_arguments`, :func:`run_points`).

A *point* is a tuple of arguments of a module-level function (so a Dask worker can import it by
name); it must not depend on another point. :func:`run_points` calls the function on every point
and hands each outcome, as it arrives, to ``on_done(index, point, result)`` or
``on_failed(index, point, exception)``: a point that raises is reported and the others go on.
The caller keeps results by index, so what it writes (the CSV) is in the points' order whatever
finished first, and identical for every executor (columns that time a run, such as wall
seconds, differ from run to run on any executor).

Executors (:func:`describe`):

* ``--jobs 1`` (and no ``--scheduler``/``--cluster``): one point after the other in this process,
  as the sweeps always ran;
* ``--jobs N``: a Dask ``LocalCluster`` of N single-threaded worker processes on this machine (no
  setup, no dashboard, no memory limit: a synthesis or a Verilator build may need gigabytes);
* ``--scheduler tcp://HOST:PORT``: the workers of an existing Dask cluster (``dask scheduler`` and
  ``dask worker`` started by hand or by the site); ``--jobs`` is not used;
* ``--cluster slurm|pbs|lsf --jobs N``: dask-jobqueue submits N batch jobs of one worker each
  (by default 1 core and 4 GB each; ``--cluster-option KEY=VALUE`` passes ``queue``, ``account``,
  ``walltime``, ``cores``, ``memory``, ``job_extra_directives`` and other keywords to its cluster
  class). Workers must see the same checkout at the same path (a shared filesystem) and its
  installed virtual environment; the build caches under ``.build/`` are locked per entry, so
  workers on several machines share them safely (docs/DEVELOPING.md).

On a terminal, a live line on standard error shows the points done, failed and remaining.
"""

import logging
import sys
import time


__all__ = ["CLUSTERS", "add_arguments", "check_arguments", "describe", "run_points", "Progress"]

#: ``--cluster`` choices: dask-jobqueue's cluster class for each.
CLUSTERS = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "lsf": "LSFCluster"}
#: dask-jobqueue keywords set unless ``--cluster-option`` gives them: one single-threaded worker
#: per job, as a point is one single-threaded tool run.
JOB_DEFAULTS = {"cores": 1, "processes": 1, "memory": "4GB"}


def add_arguments(parser, jobs_default, what="points"):
    """Add ``--jobs``, ``--scheduler``, ``--cluster`` and ``--cluster-option`` to ``parser``, in
    a group of their own. ``jobs_default`` keeps a command's earlier default (1: serial)."""
    group = parser.add_argument_group(
        "where the points run",
        f"Independent {what} run through Dask: in this process with --jobs 1, on a local cluster "
        "of --jobs worker processes, on an existing cluster (--scheduler), or as batch jobs "
        "(--cluster). The output is the same whichever is used.")
    group.add_argument("--jobs", type=int, default=jobs_default, metavar="N",
                       help=f"{what} at once: local worker processes (1: one after the other in "
                            "this process), or with --cluster the batch jobs to submit "
                            f"(default: {jobs_default})")
    group.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                       help="run on the workers of this existing Dask scheduler")
    group.add_argument("--cluster", choices=sorted(CLUSTERS),
                       help="submit --jobs batch jobs, one Dask worker each (dask-jobqueue); the "
                            "workers need this checkout at the same path")
    group.add_argument("--cluster-option", action="append", default=[], metavar="KEY=VALUE",
                       help="keyword of the dask-jobqueue cluster, repeatable (e.g. queue=short, "
                            "walltime=02:00:00, memory=8GB, account=proj); default: "
                            + ", ".join(f"{k}={v}" for k, v in JOB_DEFAULTS.items()))


def _cluster_options(items):
    options = dict(JOB_DEFAULTS)
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"--cluster-option takes KEY=VALUE, not {item!r}")
        options[key] = int(value) if value.isdigit() else value
    return options


def check_arguments(args):
    """Reject contradictory executor options (``ValueError`` naming the option)."""
    if args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, not {args.jobs}")
    if args.scheduler and args.cluster:
        raise ValueError("--scheduler and --cluster exclude each other: use one")
    if args.scheduler and not args.scheduler.startswith(("tcp://", "tls://", "ucx://", "inproc://")):
        raise ValueError("--scheduler must be an address like tcp://HOST:PORT, "
                         f"not {args.scheduler!r}")
    if args.cluster_option and not args.cluster:
        raise ValueError("--cluster-option needs --cluster")
    _cluster_options(args.cluster_option)


def describe(args):
    """One line saying where the points run."""
    if args.scheduler:
        return f"on the Dask cluster at {args.scheduler}"
    if args.cluster:
        return f"on {args.jobs} {args.cluster} job(s) (dask-jobqueue)"
    if args.jobs == 1:
        return "one at a time, in this process"
    return f"on a local Dask cluster of {args.jobs} workers"


class Progress:
    """The live line ``done, failed, remaining`` on ``stream`` when it is a terminal (else
    silent: the sweeps print a line per point anyway). :meth:`log` prints a line above it."""

    def __init__(self, total, label, stream=None):
        self.total, self.label = total, label
        self.stream = sys.stderr if stream is None else stream
        self.live = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.done = self.failed = 0
        self.started = time.monotonic()

    def line(self):
        remaining = self.total - self.done - self.failed
        return (f"{self.label}: {self.done} done, {self.failed} failed, {remaining} remaining "
                f"({time.monotonic() - self.started:.0f} s)")

    def _draw(self):
        if self.live:
            self.stream.write("\r\x1b[K" + self.line())
            self.stream.flush()

    def _clear(self):
        if self.live:
            self.stream.write("\r\x1b[K")

    def log(self, write, text):
        """Call ``write(text)`` (a sweep's own output) with the live line moved below it."""
        self._clear()
        write(text)
        self._draw()

    def count(self, failed):
        if failed:
            self.failed += 1
        else:
            self.done += 1
        self._draw()

    def close(self):
        if self.live:
            self.stream.write("\n")
            self.stream.flush()


def _client(args):
    """A Dask client (and the cluster it owns, or None) for ``args``."""
    from distributed import Client, LocalCluster
    if args.scheduler:
        return Client(args.scheduler), None
    if args.cluster:
        import dask_jobqueue
        cluster_class = getattr(dask_jobqueue, CLUSTERS[args.cluster])
        cluster = cluster_class(**_cluster_options(args.cluster_option))
        cluster.scale(jobs=args.jobs)
        return Client(cluster), cluster
    cluster = LocalCluster(n_workers=args.jobs, threads_per_worker=1, processes=True,
                           dashboard_address=None, memory_limit=0, silence_logs=logging.ERROR)
    return Client(cluster), cluster


def run_points(function, points, args, on_done, on_failed, label="points", progress=None):
    """Run ``function(*point)`` for every point of ``points`` on the executor ``args`` selects
    (module docstring); call ``on_done(index, point, result)`` or ``on_failed(index, point,
    exception)`` as each finishes (in this process, in completion order). Returns the number of
    failed points. ``KeyboardInterrupt`` stops the run (and the cluster it started)."""
    progress = progress or Progress(len(points), label)
    failed = 0
    try:
        if args.jobs == 1 and not args.scheduler and not args.cluster:
            for index, point in enumerate(points):
                try:
                    result = function(*point)
                except Exception as exc:      # noqa: BLE001 - one point's failure of any kind
                    failed += 1
                    progress.count(failed=True)
                    on_failed(index, point, exc)
                else:
                    progress.count(failed=False)
                    on_done(index, point, result)
            return failed
        import uuid
        from distributed import as_completed
        client, cluster = _client(args)
        try:
            # Keys are global on a shared scheduler: one token per run, so two sweeps never share
            # a task (a point is a run, a build or a simulation, never to be deduplicated).
            token = uuid.uuid4().hex[:12]
            futures = {client.submit(function, *point, pure=False,
                                     key=f"{label}-{token}-{index}"): index
                       for index, point in enumerate(points)}
            for future in as_completed(futures):
                index = futures[future]
                try:
                    result = future.result()   # re-raises the point's exception, or a lost worker's
                except Exception as exc:       # noqa: BLE001 - one point's failure of any kind
                    failed += 1
                    progress.count(failed=True)
                    on_failed(index, points[index], exc)
                else:
                    progress.count(failed=False)
                    on_done(index, points[index], result)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
        return failed
    finally:
        progress.close()
