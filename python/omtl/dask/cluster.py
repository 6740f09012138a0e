"""The Dask client an experiment grid runs on: a scheduler's address, or a LocalCluster."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def experiment_client(scheduler: str | None = None, jobs: int = 1):
    """A ``distributed.Client`` connected to ``scheduler`` (an address such as
    ``tcp://host:8786``; the workers must import omtl and see the data folder) or, without one, to
    a ``LocalCluster`` of ``jobs`` single-threaded worker processes, closed on exit.

    Worker processes inherit this process's environment (``PYTHONPATH``, ``OMTL_DATA``)."""
    try:
        from distributed import Client, LocalCluster
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
    with LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        yield client


def distributed_available() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True
