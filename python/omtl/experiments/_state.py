"""What the experiment grid keeps per process, in one object (``STATE``): the streams loaded
here, and, while ``omtl.experiments.scheduler.run_on_dask`` is active, the Dask client and the
bookkeeping of the streams loaded on its cluster."""

from __future__ import annotations

import threading


class GridState:
    """The experiment grid's per-process state."""

    def __init__(self):
        #: Per stream cache key, the stream loaded in this process (a worker's, or the driver's).
        self.stream_cache: dict = {}
        #: The Dask client the grid runs on while ``run_on_dask`` is active (``omtl reproduce
        #: --scheduler/--jobs``); None: this process, or a process pool.
        self.client = None
        #: Per cache key, ``(client, future, Variable)`` of a stream loaded by one task of the cluster.
        self.stream_futures: dict = {}
        self.stream_futures_lock = threading.Lock()
        #: Per cache key, ``(client, event)`` for a stream ``load_streams_ahead`` has yet to submit.
        self.loads_ahead: dict = {}
        #: Per client (by id), its queue of loads; dropped when ``run_on_dask`` ends.
        self.load_queues: dict = {}
        self.load_queues_lock = threading.Lock()
        #: Per client (by id): (time asked, number of workers).
        self.worker_count: dict = {}


#: The one instance.
STATE = GridState()
