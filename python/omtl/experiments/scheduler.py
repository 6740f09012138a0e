"""Running the experiments' jobs: in this process, in a process pool, or as tasks on a Dask
cluster (``run_on_dask``), where each data set's stream is loaded once, by one worker, and
fetched by the others. The scheduler's state lives in ``omtl.experiments._state.STATE``.

A *job* is one online pass of one learner over one shuffle of one data set. Jobs are plain
picklable tuples handed to a top-level worker function, so they can run in this process
(``jobs=1``) or in a ``concurrent.futures.ProcessPoolExecutor`` (``jobs>1``); every worker
loads each data set once and keeps it.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field

from ._state import STATE
from .streams import load_stream, stream_key


@dataclass
class JobResult:
    job: tuple
    record: dict | None = None
    error: str | None = None
    extra: dict = field(default_factory=dict)


def _call(fn, job):
    try:
        return JobResult(job, fn(job))
    except Exception as exc:  # a failing learner must not kill a multi-hour run; it is reported
        return JobResult(job, None, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")


def _call_many(fn, jobs, streams=()):
    """Several jobs in one Dask task (a task costs milliseconds of scheduling; a --quick pass ~10 ms).
    ``streams``: the ``_StreamRef`` of the data sets the jobs read, loaded once by another
    task of the cluster (``stream_summary``); this worker fetches each one the first time it
    needs it and keeps it, so it never parses a file another worker has parsed."""
    _have_streams(streams)
    return [_call(fn, job) for job in jobs]


def _have_streams(streams) -> None:
    for ref in streams:
        if ref.cache_key not in STATE.stream_cache:
            STATE.stream_cache[ref.cache_key] = _fetch(ref.variable)


@dataclass(frozen=True)
class _StreamRef:
    """A stream loaded on the cluster, named by a Dask ``Variable`` holding its future rather than
    given as the future: a task given a future is placed on a worker holding it (the one that
    loaded the stream), so every pass over one data set would queue on one worker; given the name,
    the task goes to whichever worker is free and fetches the stream there once (``_fetch``)."""

    cache_key: tuple
    variable: str


def _fetch(variable: str):
    """The stream behind the Dask ``Variable`` named ``variable``: from this worker's memory if it
    loaded it, else from the worker that did."""
    from distributed import Variable, get_worker

    future = Variable(variable).get()
    data = get_worker().data
    return data[future.key] if future.key in data else future.result()


def _stream_future(cache_key: tuple) -> tuple:
    """The stream as a Dask future, and the name of a Dask ``Variable`` holding it: loaded
    (parsed, subsampled) once, by one worker; the tasks that need it elsewhere get a copy from that
    worker. Data sets load in parallel on several workers, and no worker, nor this process, parses
    a file twice. A stream ``load_streams_ahead`` will load is waited for, not loaded again."""
    ahead = STATE.loads_ahead.get(cache_key)
    if ahead is not None and ahead[0] is STATE.client:
        ahead[1].wait()
    return _submit_load(STATE.client, cache_key)


#: Dask priorities of the grid's tasks (higher runs first; equal ones in submission order). A
#: data set's work is a chain (its load, then tuning rounds, each waiting for the one before,
#: then its figure) beside work submitted ahead that nothing waits for yet (untuned learners'
#: passes, Table 1's budget learners): a step a driver thread is blocked on goes before the work
#: ahead, so the chains move on while the bulk fills the workers, instead of queueing behind it.
PRIORITY_LOAD = 2
PRIORITY_WAITED = 1
PRIORITY_AHEAD = 0


def _submit_load(client, cache_key: tuple) -> tuple:
    with STATE.stream_futures_lock:
        entry = STATE.stream_futures.get(cache_key)
        if entry is None or entry[0] is not client:
            from distributed import Variable

            future = client.submit(load_stream, *cache_key, pure=False, priority=PRIORITY_LOAD)
            variable = Variable(f"omtl-stream-{future.key}", client=client)
            variable.set(future)
            entry = (client, future, variable)
            STATE.stream_futures[cache_key] = entry
        return entry[1], entry[2].name


def _summary(stream) -> dict:
    counts = stream.task_counts()
    return {"repr": repr(stream), "n": len(stream), "d": stream.n_features, "n_tasks": stream.n_tasks,
            "positives": int((stream.y > 0).sum()), "max_task": int(counts.max()), "min_task": int(counts.min())}


def load_streams_ahead(keys: list[str], data_dir=None, subsample: int | None = None) -> None:
    """On a Dask cluster, queues the loads of the data sets ``keys``, in this order, after those
    queued before (by any thread: several experiments sharing a cluster share one queue), at most
    one load per worker at a time; elsewhere nothing (each is loaded when first used).

    The scheduler places a task without dependencies at once, on the worker it estimates least
    busy, and cannot tell a 3 ms load from a 1 s one: submitted together, two loads could queue
    on one worker while another idles. So a load is submitted when one before it has finished
    (from a thread of this process); a data set's thread asking for its stream waits for it."""
    if STATE.client is None:
        return
    client = STATE.client
    with STATE.stream_futures_lock:
        todo = [ck for ck in dict.fromkeys(stream_key(k, data_dir, subsample) for k in keys)
                if not (ck in STATE.stream_futures and STATE.stream_futures[ck][0] is client)
                and not (ck in STATE.loads_ahead and STATE.loads_ahead[ck][0] is client)]
        for ck in todo:
            STATE.loads_ahead[ck] = (client, threading.Event())
    with STATE.load_queues_lock:
        queue = STATE.load_queues.get(id(client))
        if queue is None or queue.client is not client:
            queue = STATE.load_queues[id(client)] = _LoadQueue(client)
        queue.todo.extend(todo)
        if queue.todo and not queue.running:
            queue.running = True
            threading.Thread(target=_submit_queued_loads, args=(queue,), name="omtl-loads", daemon=True).start()


class _LoadQueue:
    """The loads ``load_streams_ahead`` has queued for one client, and the worker slots they
    take (one per worker)."""

    def __init__(self, client):
        from collections import deque

        self.client, self.todo, self.running = client, deque(), False
        self.slots = threading.Semaphore(_n_workers(client))


def _submit_queued_loads(queue: _LoadQueue) -> None:
    """Submits ``queue``'s loads in order, each when a worker slot is free; returns when the queue
    is empty (a later ``load_streams_ahead`` starts another such thread) or the run is over."""
    client, emptied = queue.client, False
    try:
        while True:
            with STATE.load_queues_lock:
                if not queue.todo:
                    queue.running, emptied = False, True
                    return
                cache_key = queue.todo[0]
            while not queue.slots.acquire(timeout=0.1):
                if STATE.client is not client:  # the run is over (or failed): stop
                    return
            future, _ = _submit_load(client, cache_key)
            future.add_done_callback(lambda _: queue.slots.release())  # finished, failed or cancelled
            with STATE.load_queues_lock:
                queue.todo.popleft()
            _stop_waiting_for(cache_key)
    finally:  # stopped early, whatever the reason: nobody waits for a load this thread will not submit
        if not emptied:
            with STATE.load_queues_lock:
                left = list(queue.todo)
                queue.todo.clear()
                queue.running = False
            for cache_key in left:
                _stop_waiting_for(cache_key)


def _stop_waiting_for(cache_key: tuple) -> None:
    entry = STATE.loads_ahead.pop(cache_key, None)
    if entry is not None:
        entry[1].set()


def stream_summary(key: str, data_dir=None, subsample: int | None = None) -> dict:
    """Size, shape and class balance of a data set's stream (``repr`` too), for the outputs'
    settings. On a Dask cluster the stream is loaded by a worker (where the jobs will need it) and
    only this summary comes back; elsewhere it is loaded here."""
    if STATE.client is None:
        return _summary(load_stream(key, data_dir, subsample))
    with STATE.client.as_current():
        return STATE.client.submit(_summary, _stream_future(stream_key(key, data_dir, subsample))[0],
                                   pure=False, priority=PRIORITY_WAITED).result()


def _stream_keys(jobs: list) -> list[tuple]:
    """The cache keys of the streams some jobs read (jobs naming a data set), in a fixed order."""
    keys = {stream_key(j["dataset"], j.get("data_dir"), j.get("subsample")) for j in jobs
            if isinstance(j, dict) and "dataset" in j}
    return sorted(keys, key=repr)


def _streams_of(jobs: list) -> list[_StreamRef]:
    """The streams a chunk of jobs reads (jobs naming a data set)."""
    keys = _stream_keys(jobs)
    loads = [_stream_future(k) for k in keys]
    if loads:  # loaded before a task may ask for them: a task waiting on a worker would hold its thread
        from distributed import wait

        wait([future for future, _ in loads])
    return [_StreamRef(k, variable) for k, (_, variable) in zip(keys, loads)]


@contextmanager
def run_on_dask(client):
    """Within this block ``run_jobs`` sends every job to the Dask ``client`` as a task."""
    previous, STATE.client = STATE.client, client
    try:
        yield client
    finally:
        STATE.client = previous
        if previous is not client:
            with STATE.load_queues_lock:
                STATE.load_queues.pop(id(client), None)
        for cache_key in [k for k, (c, _) in list(STATE.loads_ahead.items()) if c is client]:
            _stop_waiting_for(cache_key)
        with STATE.stream_futures_lock:  # the loaded streams are released on the cluster
            released = {k: STATE.stream_futures.pop(k)[2] for k, (c, _, _) in list(STATE.stream_futures.items()) if c is client}
        if released:  # and dropped from the workers' caches, so a long-lived cluster does not keep them
            try:
                for variable in released.values():
                    variable.delete()
                client.run(_forget_streams, list(released))
            except Exception:  # a lost worker or scheduler keeps nothing; the run's own outcome stands
                pass


def _forget_streams(cache_keys: list) -> None:
    for cache_key in cache_keys:
        STATE.stream_cache.pop(cache_key, None)


def per_dataset(keys: list, fn: Callable):
    """Yields ``(key, fn(key))`` in the order of ``keys``.

    On a Dask cluster (inside ``run_on_dask``) the data sets run at once, each driven from its
    own thread of this process: one data set's steps (tuning rounds, then the evaluation) depend on
    each other, different data sets do not, so the workers stay busy while this process waits for a
    data set's step or writes outputs. Results still come back in the order of ``keys``, so every
    output is the one a sequential run writes. Elsewhere the data sets run one after the other.
    """
    if STATE.client is None or len(keys) <= 1:
        for key in keys:
            yield key, fn(key)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(keys), thread_name_prefix="omtl-dataset") as pool:
        futures = [pool.submit(fn, key) for key in keys]
        for key, fut in zip(keys, futures):
            yield key, fut.result()


#: A round's jobs go into at most this many Dask tasks per worker (see ``PendingJobs``): on
#: 2 cores every task costs the driver and the workers' event loops CPU taken from the passes (8
#: per worker: --quick grid 1.46-1.80x with 2 workers vs 1, paired runs; 4: 1.69-1.86x); with
#: worker-saturation 1.0 a free worker takes the next task, so 4 still balance passes of unequal cost.
TASKS_PER_WORKER = 4


class PendingJobs:
    """Jobs handed to ``submit_jobs``; ``results`` returns their results in job order.

    On a Dask cluster the jobs are already running as tasks when this object exists, so a data
    set's driver can submit what needs nothing more (evaluations of untuned learners) and go on
    with what does (a tuning search); elsewhere they run when ``results`` is called, exactly
    as ``run_jobs`` always ran them.
    """

    def __init__(self, fn: Callable, jobs: list, n_jobs: int, desc: str, progress: bool, label: Callable | None,
                 waited: bool = False):
        self.fn, self.jobs, self.n_jobs, self.desc, self.progress, self.label = fn, jobs, n_jobs, desc, progress, label
        self._futures: list | None = None
        self._client = STATE.client
        if STATE.client is not None and jobs:
            # pure=False: two equal jobs are still two runs (a job's key must not be shared)
            # at most TASKS_PER_WORKER tasks per worker: fewer scheduling round trips, yet enough
            # tasks to balance passes of unequal cost; jobs dealt round-robin (neighbouring jobs
            # often cost alike)
            n_tasks = min(len(jobs), TASKS_PER_WORKER * _n_workers(STATE.client))
            self._chunks = [list(range(c, len(jobs), n_tasks)) for c in range(n_tasks)]
            chunk_jobs = [[jobs[i] for i in chunk] for chunk in self._chunks]
            # the streams are looked up once for the round, and its tasks go to the scheduler in
            # one message (each client call costs the driver, which shares the cores, a round trip)
            with STATE.client.as_current():  # the client need not be the default one
                refs = {ref.cache_key: ref for ref in _streams_of(jobs)}
                streams = [[refs[k] for k in _stream_keys(cj)] for cj in chunk_jobs]
                self._futures = STATE.client.map(_call_many, [fn] * n_tasks, chunk_jobs, streams, pure=False,
                                                 priority=PRIORITY_WAITED if waited else PRIORITY_AHEAD)

    def results(self) -> list[JobResult]:
        from tqdm.auto import tqdm

        jobs, label = self.jobs, self.label
        if not jobs:
            return []
        results: list[JobResult | None] = [None] * len(jobs)
        bar = tqdm(total=len(jobs), desc=self.desc, unit="run", disable=not self.progress, file=sys.stderr)
        if self._futures is not None:
            from distributed import as_completed as dask_completed

            index = {fut.key: chunk for fut, chunk in zip(self._futures, self._chunks)}
            with self._client.as_current():
                # the tasks finished since the last batch are gathered in one call
                for done in dask_completed(self._futures).batches():
                    for fut, chunk_results in zip(done, self._client.gather(done)):
                        chunk = index[fut.key]
                        for i, res in zip(chunk, chunk_results):
                            results[i] = res
                        if label is not None:
                            bar.set_postfix_str(label(jobs[chunk[-1]]), refresh=False)
                        bar.update(len(chunk))
        elif self.n_jobs <= 1 or len(jobs) <= 1:
            for i, job in enumerate(jobs):
                if label is not None:
                    bar.set_postfix_str(label(job), refresh=True)
                results[i] = _call(self.fn, job)
                bar.update(1)
        else:
            with ProcessPoolExecutor(max_workers=self.n_jobs) as pool:
                futures = {pool.submit(_call, self.fn, job): i for i, job in enumerate(jobs)}
                for fut in as_completed(futures):
                    i = futures[fut]
                    results[i] = fut.result()
                    if label is not None:
                        bar.set_postfix_str(label(jobs[i]), refresh=False)
                    bar.update(1)
        bar.close()
        return results  # type: ignore[return-value]


def _n_workers(client) -> int:
    """The cluster's number of workers, asked of the scheduler at most once a second (a round
    trip each time; the data sets' threads submit many small rounds)."""
    asked, n = STATE.worker_count.get(id(client), (-math.inf, 1))
    if time.monotonic() - asked > 1.0:
        n = max(1, len(client.scheduler_info(n_workers=-1)["workers"]))
        STATE.worker_count[id(client)] = (time.monotonic(), n)
    return n


def submit_jobs(fn: Callable, jobs: list, *, n_jobs: int = 1, desc: str = "", progress: bool = True,
                label: Callable | None = None, waited: bool = False) -> PendingJobs:
    """``run_jobs`` in two steps: submit now (on a Dask cluster the tasks start at once),
    collect with ``.results()``. ``waited``: the caller collects them next, before it submits
    anything else (on a cluster they go before the work submitted ahead, ``PRIORITY_WAITED``)."""
    return PendingJobs(fn, jobs, n_jobs, desc, progress, label, waited)


def run_jobs(fn: Callable, jobs: list, *, n_jobs: int = 1, desc: str = "", progress: bool = True,
             label: Callable | None = None) -> list[JobResult]:
    """Runs ``fn(job)`` for every job (in order when ``n_jobs == 1``), with a tqdm bar.

    ``fn`` must be a top-level function (picklable). Results come back in the order of ``jobs``.
    Exceptions are caught per job and returned as ``JobResult.error``. Inside
    ``run_on_dask`` the jobs run as tasks on that Dask cluster, whatever ``n_jobs``.
    """
    return submit_jobs(fn, jobs, n_jobs=n_jobs, desc=desc, progress=progress, label=label, waited=True).results()


def run_jobs_here(fn: Callable, jobs: list) -> list[JobResult]:
    """``fn(job)`` for every job, in order, in this process (no bar), whatever the cluster: for
    code that already runs as one task on a worker."""
    return [_call(fn, job) for job in jobs]


def on_dask() -> bool:
    """True inside ``run_on_dask``."""
    return STATE.client is not None


def run_task(fn: Callable, *args, reads: list | None = None):
    """``fn(*args)``: here, or inside ``run_on_dask`` as one task on the cluster (this thread
    waits for its result). For the work between the passes that costs real time, such as drawing
    a figure: on a cluster it runs on a worker while this process goes on driving the other data
    sets, and this process never imports the heavy module (matplotlib). ``reads``: jobs naming
    the data sets ``fn`` loads (the worker fetches them from the cluster first)."""
    if STATE.client is None:
        return fn(*args)
    with STATE.client.as_current():
        return STATE.client.submit(_call_with_streams, fn, args, _streams_of(reads or []), pure=False,
                                   priority=PRIORITY_WAITED).result()


def _call_with_streams(fn, args, streams):
    _have_streams(streams)
    return fn(*args)
