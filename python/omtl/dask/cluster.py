"""The Dask client an experiment grid runs on: a scheduler's address, or a LocalCluster."""

from __future__ import annotations

from contextlib import contextmanager

#: Dask settings of the LocalCluster omtl starts itself (``omtl reproduce --jobs N``, and a
#: ``ShardedLearner`` without a client); a cluster given by address keeps its own.
#: On a machine with as many cores as workers every CPU second a worker or the driver spends on
#: Dask's own bookkeeping is taken from another worker's tasks (with one worker it runs on an idle
#: core). Measured on the 2-core development machine, ``--quick`` grid on one worker: the worker's
#: event-loop thread used 0.9-1.2 s of CPU per run beside ~10 s of tasks, the driver's (scheduler,
#: nannies, client) 0.8-1.1 s; with these settings 0.43-0.48 s and 0.6-0.75 s.
QUIET_CLUSTER_CONFIG = {
    # the statistical profiler samples every worker thread's stack every 10 ms (the dashboard's
    # profile page, which nobody reads for a run of the grid): ~0.3 s of CPU per worker per run
    "distributed.worker.profile.enabled": False,
    # host metrics for the dashboard, every 500 ms in every process
    "distributed.admin.system-monitor.interval": "5s",
    # event-loop health checks (a warning when a loop is blocked 3 s), every 20 ms in every process
    "distributed.admin.tick.interval": "500ms",
    # spill / pause / terminate thresholds checked every 100 ms by each worker and nanny; a grid's
    # memory is its data sets and one pass's model
    "distributed.worker.memory.monitor-interval": "1s",
}

#: Added with several workers: a worker is sent a task only when its thread is free (Dask's
#: default, 1.1, sends one more, which waits on that worker). A grid's passes differ in cost by
#: 1000x and Dask cannot tell them apart (one duration estimate per function), so a long pass could
#: wait behind another long one on a busy worker while the other worker idled (seen: ECML B's two
#: TRML passes, ~1.3 s each, one after the other on one worker). With one worker there is nothing
#: to balance and the default's task sent ahead saves a round trip per task.
BALANCED_CLUSTER_CONFIG = {"distributed.scheduler.worker-saturation": 1.0}


def cluster_config(n_workers: int) -> dict:
    """The Dask settings omtl's own LocalCluster of ``n_workers`` workers starts with."""
    return {**QUIET_CLUSTER_CONFIG, **(BALANCED_CLUSTER_CONFIG if n_workers > 1 else {})}


def local_cluster(n_workers: int, **kwargs):
    """A ``LocalCluster`` of ``n_workers`` single-threaded worker processes with
    ``cluster_config``'s settings (applied while it starts: the scheduler and each worker
    read them then; the global Dask configuration is left as it was). ``kwargs`` go to
    ``LocalCluster``."""
    import dask
    from distributed import LocalCluster

    options = {"threads_per_worker": 1, "processes": True, "dashboard_address": ":0", **kwargs}
    with dask.config.set(cluster_config(n_workers)):
        return LocalCluster(n_workers=n_workers, **options)


@contextmanager
def experiment_client(scheduler: str | None = None, jobs: int = 1):
    """A ``distributed.Client`` connected to ``scheduler`` (an address such as
    ``tcp://host:8786``; the workers must import omtl and see the data folder) or, without one, to
    a ``LocalCluster`` of ``jobs`` single-threaded worker processes (``local_cluster``),
    closed on exit.

    Worker processes inherit this process's environment (``PYTHONPATH``, ``OMTL_DATA``)."""
    try:
        from distributed import Client
    except ImportError as exc:
        raise ImportError('running on Dask needs Dask distributed: pip install "omtl[dask]"') from exc
    if scheduler is not None:
        client = Client(scheduler)
        try:
            yield client
        finally:
            client.close()
        return
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs!r}")
    with local_cluster(jobs) as cluster, Client(cluster) as client:
        yield client


def distributed_available() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True
