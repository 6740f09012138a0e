"""Shared machinery of the experiments: data sets, budgets, learners, jobs, progress, aggregation.

A *job* is one online pass of one learner over one shuffle of one data set. Jobs are plain
picklable tuples handed to a top-level worker function, so they can run in this process
(``jobs=1``) or in a :class:`concurrent.futures.ProcessPoolExecutor` (``jobs>1``); every worker
loads each data set once and keeps it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

# ---------------------------------------------------------------------------------------------
# data sets
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataSpec:
    """One data set of an experiment: how to load it and how to describe it."""

    key: str
    title: str
    loader: str  # name of the function in omtl.datasets
    loader_kwargs: tuple = ()
    note: str = ""
    short: str = ""

    @property
    def label(self) -> str:
        """A short column header."""
        return self.short or self.title


DATASETS = {
    "school": DataSpec("school", "School binary", "load_school"),
    "sentiment": DataSpec("sentiment", "Sentiment", "load_sentiment"),
    "ecml2006_a": DataSpec("ecml2006_a", "Pkdd06 Spam A", "load_ecml2006", (("task", "a"),)),
    "ecml2006_b": DataSpec("ecml2006_b", "ECML/PKDD 2006 Spam B", "load_ecml2006", (("task", "b"),),
                           note="substitute for MHC-I / EachMovie", short="ECML B"),
    "pu_spam": DataSpec(
        "pu_spam", "PU spam (ROMCO's Spam Email)", "load_pu_spam",
        note="same 4 PU corpora as ROMCO's Spam Email, but raw term counts (L2-normalised, per-corpus "
             "feature blocks) instead of ROMCO's undocumented 1,458-d TF-IDF features",
        short="PU spam",
    ),
    "landmine": DataSpec("landmine", "Landmine", "load_landmine", note="substitute for MHC-I / EachMovie"),
    "newsgroups_cs": DataSpec("newsgroups_cs", "20 Newsgroups comp.vs.sci", "load_newsgroups",
                              (("pair", "comp.vs.sci"),), note="substitute for MHC-I / EachMovie",
                              short="NG comp/sci"),
    "newsgroups_rt": DataSpec("newsgroups_rt", "20 Newsgroups rec.vs.talk", "load_newsgroups",
                              (("pair", "rec.vs.talk"),), note="substitute for MHC-I / EachMovie",
                              short="NG rec/talk"),
}

#: Seed of the fixed random subsample used by ``--quick`` (the same rows for every shuffle seed).
QUICK_SUBSAMPLE_SEED = 4242

_STREAM_CACHE: dict = {}


def _stream_key(key: str, data_dir, subsample) -> tuple:
    return (key, None if data_dir is None else str(data_dir), subsample)


def load_stream(key: str, data_dir=None, subsample: int | None = None):
    """The data set ``key`` in file order, or a fixed random subsample of ``subsample`` rows
    (kept in file order), cached per process."""
    cache_key = _stream_key(key, data_dir, subsample)
    if cache_key not in _STREAM_CACHE:
        from .. import datasets

        spec = DATASETS[key]
        stream = getattr(datasets, spec.loader)(data_dir, **dict(spec.loader_kwargs))
        if subsample is not None and subsample < len(stream):
            from .._rng import SplitMix64

            rows = np.sort(np.asarray(SplitMix64(QUICK_SUBSAMPLE_SEED).permutation(len(stream))[:subsample]))
            stream = compact_columns(stream.take(rows))
        _STREAM_CACHE[cache_key] = stream
    return _STREAM_CACHE[cache_key]


def compact_columns(stream):
    """Drops the sparse columns that are zero in every row (dense streams are returned as is).

    Exact for every learner here: a column that is zero in every row never enters an inner
    product, a distance, a gradient or a proximal step (its weights stay 0), so predictions do not
    change. It makes a text subsample's feature space thousands instead of ~150,000 wide, which
    matters for the learners that keep dense d x k matrices (ROMCO, MTFL, TRML).
    """
    if not stream.is_sparse:
        return stream
    used = np.unique(stream.X.indices)
    X = stream.X[:, used].tocsr()
    X.sum_duplicates()
    X.sort_indices()
    return replace(stream, X=X)


def select(items: list, labels: list[str] | None, what: str) -> list:
    """The entries of ``items`` (tuples whose first field is a label) named in ``labels``."""
    if labels is None:
        return list(items)
    known = [it[0] for it in items]
    unknown = [lab for lab in labels if lab not in known]
    if unknown:
        raise ValueError(f"unknown {what} {unknown}; choose from {known}")
    return [it for it in items if it[0] in labels]


# ---------------------------------------------------------------------------------------------
# budgets (ALGORITHMS.md §7.2, INV-E2)
# ---------------------------------------------------------------------------------------------


def budget_from_percent(n_battery: int, percent: int) -> int:
    """``B_p = max(1, round(p * N_bat))`` with halves rounded up, in exact integer arithmetic.

    ``percent`` is an integer percentage (25 for p = 0.25), so ``p * N_bat = percent * N_bat / 100``
    and rounding half up is ``floor((percent * N_bat + 50) / 100)``.
    """
    if isinstance(percent, bool) or int(percent) != percent or not 0 < percent <= 100:
        raise ValueError(f"percent must be an integer in (0, 100], got {percent!r}")
    if int(n_battery) != n_battery or n_battery < 0:
        raise ValueError(f"n_battery must be a non-negative integer, got {n_battery!r}")
    return max(1, (int(percent) * int(n_battery) + 50) // 100)


def budgets_from_battery(n_battery: int, percents: Iterable[int] = (25, 10, 5)) -> dict[int, int]:
    return {int(p): budget_from_percent(n_battery, p) for p in percents}


# ---------------------------------------------------------------------------------------------
# learners
# ---------------------------------------------------------------------------------------------


def resolve_learner(class_name: str):
    """The class ``omtl.<class_name>``, or None if it has not landed yet."""
    import omtl

    return getattr(omtl, class_name, None)


def make_learner(class_name: str, params: dict):
    """Instantiates ``omtl.<class_name>(**params)``.

    Raises ``LookupError`` if the class does not exist and ``TypeError`` naming the offending
    parameters if the class does not accept them.
    """
    cls = resolve_learner(class_name)
    if cls is None:
        raise LookupError(f"omtl.{class_name} is not available")
    accepted = set(cls._param_names()) if hasattr(cls, "_param_names") else None
    if accepted is not None:
        unknown = sorted(set(params) - accepted)
        if unknown:
            raise TypeError(f"omtl.{class_name} does not accept {unknown}; it takes {sorted(accepted)}")
    return cls(**params)


def accepted_params(class_name: str) -> set[str] | None:
    cls = resolve_learner(class_name)
    if cls is None or not hasattr(cls, "_param_names"):
        return None
    return set(cls._param_names())


# ---------------------------------------------------------------------------------------------
# one online pass
# ---------------------------------------------------------------------------------------------


def run_p1(model, stream, *, progress: bool = False) -> dict:
    """Protocol P1 pass (``omtl.evaluate``); the result as a plain dict (curve included)."""
    from ..evaluate import evaluate

    report = evaluate(model, stream, progress=progress)
    return _record_from(report.summary(), report.curve, report.curve_steps, report.per_task)


def run_p2(model, stream, *, progress: bool = False, curve_points: int = 200) -> dict:
    """Protocol P2 pass over a round-structured stream (``stream.rounds`` set), via ``omtl.evaluate``.

    Uses ``model.learn_rounds`` when the learner has it; otherwise the rows are fed to
    ``model.learn`` in the same order, the P2 -> P1 flattening of §1.3. Chunks never split a round.
    """
    from ..evaluate import evaluate

    if stream.rounds is None:
        raise ValueError("run_p2 needs a round-structured stream (Stream.as_rounds)")
    report = evaluate(model, stream, progress=progress, curve_points=curve_points)
    return _record_from(report.summary(), report.curve, report.curve_steps, report.per_task)


def _record_from(summary: dict, curve, steps, counts) -> dict:
    out = dict(summary)
    out["curve"] = [float(v) for v in curve]
    out["curve_steps"] = [int(v) for v in steps]
    out["tasks_with_examples"] = int((counts.n > 0).sum())
    return out


# ---------------------------------------------------------------------------------------------
# running many jobs
# ---------------------------------------------------------------------------------------------


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


def chosen_streams(datasets: list[str] | None, known: list[str], subsample: int | None) -> tuple[list[str], int | None]:
    """``datasets`` checked against an experiment's ``known`` data sets (all of them when None), and
    the rows ``subsample``d from each (None: every row): what a table's ``data_streams`` returns."""
    keys = list(datasets or known)
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise ValueError(f"unknown data set(s) {unknown}; this experiment uses {known}")
    return keys, subsample


def _call_many(fn, jobs, streams=()):
    """Several jobs in one Dask task (a task costs milliseconds of scheduling; a --quick pass ~10 ms).
    ``streams``: the :class:`_StreamRef` of the data sets the jobs read, loaded once by another
    task of the cluster (:func:`stream_summary`); this worker fetches each one the first time it
    needs it and keeps it, so it never parses a file another worker has parsed."""
    _have_streams(streams)
    return [_call(fn, job) for job in jobs]


def _have_streams(streams) -> None:
    for ref in streams:
        if ref.cache_key not in _STREAM_CACHE:
            _STREAM_CACHE[ref.cache_key] = _fetch(ref.variable)


@dataclass(frozen=True)
class _StreamRef:
    """A stream loaded on the cluster, named by a Dask ``Variable`` holding its future rather than
    given as the future: a task given a future is placed on a worker holding it (the one that
    loaded the stream), so every pass over one data set would queue on one worker; given the name,
    the task goes to whichever worker is free and fetches the stream there once (:func:`_fetch`)."""

    cache_key: tuple
    variable: str


def _fetch(variable: str):
    """The stream behind the Dask ``Variable`` named ``variable``: from this worker's memory if it
    loaded it, else from the worker that did."""
    from distributed import Variable, get_worker

    future = Variable(variable).get()
    data = get_worker().data
    return data[future.key] if future.key in data else future.result()


#: Per cache key, the Dask future of a stream loaded by one task of the cluster (:func:`_stream_future`).
_STREAM_FUTURES: dict = {}
_STREAM_FUTURES_LOCK = threading.Lock()


def _stream_future(cache_key: tuple) -> tuple:
    """The stream as a Dask future, and the name of a Dask ``Variable`` holding it: loaded
    (parsed, subsampled) once, by one worker; the tasks that need it elsewhere get a copy from that
    worker. Data sets load in parallel on several workers, and no worker, nor this process, parses
    a file twice. A stream :func:`load_streams_ahead` will load is waited for, not loaded again."""
    ahead = _LOADS_AHEAD.get(cache_key)
    if ahead is not None and ahead[0] is _DASK_CLIENT:
        ahead[1].wait()
    return _submit_load(_DASK_CLIENT, cache_key)


#: Dask priorities of the grid's tasks (higher runs first; equal ones in submission order). A
#: data set's work is a chain (its load, then tuning rounds, each waiting for the one before,
#: then its figure) beside work submitted ahead that nothing waits for yet (untuned learners'
#: passes, Table 1's budget learners): a step a driver thread is blocked on goes before the work
#: ahead, so the chains move on while the bulk fills the workers, instead of queueing behind it.
PRIORITY_LOAD = 2
PRIORITY_WAITED = 1
PRIORITY_AHEAD = 0


def _submit_load(client, cache_key: tuple) -> tuple:
    with _STREAM_FUTURES_LOCK:
        entry = _STREAM_FUTURES.get(cache_key)
        if entry is None or entry[0] is not client:
            from distributed import Variable

            future = client.submit(load_stream, *cache_key, pure=False, priority=PRIORITY_LOAD)
            variable = Variable(f"omtl-stream-{future.key}", client=client)
            variable.set(future)
            entry = (client, future, variable)
            _STREAM_FUTURES[cache_key] = entry
        return entry[1], entry[2].name


#: Per cache key, ``(client, event)`` for a stream :func:`load_streams_ahead` has yet to submit.
_LOADS_AHEAD: dict = {}


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
    if _DASK_CLIENT is None:
        return
    client = _DASK_CLIENT
    with _STREAM_FUTURES_LOCK:
        todo = [ck for ck in dict.fromkeys(_stream_key(k, data_dir, subsample) for k in keys)
                if not (ck in _STREAM_FUTURES and _STREAM_FUTURES[ck][0] is client)
                and not (ck in _LOADS_AHEAD and _LOADS_AHEAD[ck][0] is client)]
        for ck in todo:
            _LOADS_AHEAD[ck] = (client, threading.Event())
    with _LOAD_QUEUES_LOCK:
        queue = _LOAD_QUEUES.get(id(client))
        if queue is None or queue.client is not client:
            queue = _LOAD_QUEUES[id(client)] = _LoadQueue(client)
        queue.todo.extend(todo)
        if queue.todo and not queue.running:
            queue.running = True
            threading.Thread(target=_submit_queued_loads, args=(queue,), name="omtl-loads", daemon=True).start()


class _LoadQueue:
    """The loads :func:`load_streams_ahead` has queued for one client, and the worker slots they
    take (one per worker)."""

    def __init__(self, client):
        from collections import deque

        self.client, self.todo, self.running = client, deque(), False
        self.slots = threading.Semaphore(_n_workers(client))


#: Per client (by id), its :class:`_LoadQueue`; dropped when :func:`run_on_dask` ends.
_LOAD_QUEUES: dict = {}
_LOAD_QUEUES_LOCK = threading.Lock()


def _submit_queued_loads(queue: _LoadQueue) -> None:
    """Submits ``queue``'s loads in order, each when a worker slot is free; returns when the queue
    is empty (a later :func:`load_streams_ahead` starts another such thread) or the run is over."""
    client, emptied = queue.client, False
    try:
        while True:
            with _LOAD_QUEUES_LOCK:
                if not queue.todo:
                    queue.running, emptied = False, True
                    return
                cache_key = queue.todo[0]
            while not queue.slots.acquire(timeout=0.1):
                if _DASK_CLIENT is not client:  # the run is over (or failed): stop
                    return
            future, _ = _submit_load(client, cache_key)
            future.add_done_callback(lambda _: queue.slots.release())  # finished, failed or cancelled
            with _LOAD_QUEUES_LOCK:
                queue.todo.popleft()
            _stop_waiting_for(cache_key)
    finally:  # stopped early, whatever the reason: nobody waits for a load this thread will not submit
        if not emptied:
            with _LOAD_QUEUES_LOCK:
                left = list(queue.todo)
                queue.todo.clear()
                queue.running = False
            for cache_key in left:
                _stop_waiting_for(cache_key)


def _stop_waiting_for(cache_key: tuple) -> None:
    entry = _LOADS_AHEAD.pop(cache_key, None)
    if entry is not None:
        entry[1].set()


def stream_summary(key: str, data_dir=None, subsample: int | None = None) -> dict:
    """Size, shape and class balance of a data set's stream (``repr`` too), for the outputs'
    settings. On a Dask cluster the stream is loaded by a worker (where the jobs will need it) and
    only this summary comes back; elsewhere it is loaded here."""
    if _DASK_CLIENT is None:
        return _summary(load_stream(key, data_dir, subsample))
    with _DASK_CLIENT.as_current():
        return _DASK_CLIENT.submit(_summary, _stream_future(_stream_key(key, data_dir, subsample))[0],
                                   pure=False, priority=PRIORITY_WAITED).result()


#: The Dask client the grid runs on while :func:`run_on_dask` is active (``omtl reproduce
#: --scheduler/--jobs``); None: this process, or a process pool.
_DASK_CLIENT = None


def _stream_keys(jobs: list) -> list[tuple]:
    """The cache keys of the streams some jobs read (jobs naming a data set), in a fixed order."""
    keys = {_stream_key(j["dataset"], j.get("data_dir"), j.get("subsample")) for j in jobs
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
    """Within this block :func:`run_jobs` sends every job to the Dask ``client`` as a task."""
    global _DASK_CLIENT
    previous, _DASK_CLIENT = _DASK_CLIENT, client
    try:
        yield client
    finally:
        _DASK_CLIENT = previous
        if previous is not client:
            with _LOAD_QUEUES_LOCK:
                _LOAD_QUEUES.pop(id(client), None)
        for cache_key in [k for k, (c, _) in list(_LOADS_AHEAD.items()) if c is client]:
            _stop_waiting_for(cache_key)
        with _STREAM_FUTURES_LOCK:  # the loaded streams are released on the cluster
            released = {k: _STREAM_FUTURES.pop(k)[2] for k, (c, _, _) in list(_STREAM_FUTURES.items()) if c is client}
        if released:  # and dropped from the workers' caches, so a long-lived cluster does not keep them
            try:
                for variable in released.values():
                    variable.delete()
                client.run(_forget_streams, list(released))
            except Exception:  # a lost worker or scheduler keeps nothing; the run's own outcome stands
                pass


def _forget_streams(cache_keys: list) -> None:
    for cache_key in cache_keys:
        _STREAM_CACHE.pop(cache_key, None)


def per_dataset(keys: list, fn: Callable):
    """Yields ``(key, fn(key))`` in the order of ``keys``.

    On a Dask cluster (inside :func:`run_on_dask`) the data sets run at once, each driven from its
    own thread of this process: one data set's steps (tuning rounds, then the evaluation) depend on
    each other, different data sets do not, so the workers stay busy while this process waits for a
    data set's step or writes outputs. Results still come back in the order of ``keys``, so every
    output is the one a sequential run writes. Elsewhere the data sets run one after the other.
    """
    if _DASK_CLIENT is None or len(keys) <= 1:
        for key in keys:
            yield key, fn(key)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(keys), thread_name_prefix="omtl-dataset") as pool:
        futures = [pool.submit(fn, key) for key in keys]
        for key, fut in zip(keys, futures):
            yield key, fut.result()


#: A round's jobs go into at most this many Dask tasks per worker (see :class:`PendingJobs`): on
#: 2 cores every task costs the driver and the workers' event loops CPU taken from the passes (8
#: per worker: --quick grid 1.46-1.80x with 2 workers vs 1, paired runs; 4: 1.69-1.86x); with
#: worker-saturation 1.0 a free worker takes the next task, so 4 still balance passes of unequal cost.
TASKS_PER_WORKER = 4


class PendingJobs:
    """Jobs handed to :func:`submit_jobs`; :meth:`results` returns their results in job order.

    On a Dask cluster the jobs are already running as tasks when this object exists, so a data
    set's driver can submit what needs nothing more (evaluations of untuned learners) and go on
    with what does (a tuning search); elsewhere they run when :meth:`results` is called, exactly
    as :func:`run_jobs` always ran them.
    """

    def __init__(self, fn: Callable, jobs: list, n_jobs: int, desc: str, progress: bool, label: Callable | None,
                 waited: bool = False):
        self.fn, self.jobs, self.n_jobs, self.desc, self.progress, self.label = fn, jobs, n_jobs, desc, progress, label
        self._futures: list | None = None
        self._client = _DASK_CLIENT
        if _DASK_CLIENT is not None and jobs:
            # pure=False: two equal jobs are still two runs (a job's key must not be shared)
            # at most TASKS_PER_WORKER tasks per worker: fewer scheduling round trips, yet enough
            # tasks to balance passes of unequal cost; jobs dealt round-robin (neighbouring jobs
            # often cost alike)
            n_tasks = min(len(jobs), TASKS_PER_WORKER * _n_workers(_DASK_CLIENT))
            self._chunks = [list(range(c, len(jobs), n_tasks)) for c in range(n_tasks)]
            chunk_jobs = [[jobs[i] for i in chunk] for chunk in self._chunks]
            # the streams are looked up once for the round, and its tasks go to the scheduler in
            # one message (each client call costs the driver, which shares the cores, a round trip)
            with _DASK_CLIENT.as_current():  # the client need not be the default one
                refs = {ref.cache_key: ref for ref in _streams_of(jobs)}
                streams = [[refs[k] for k in _stream_keys(cj)] for cj in chunk_jobs]
                self._futures = _DASK_CLIENT.map(_call_many, [fn] * n_tasks, chunk_jobs, streams, pure=False,
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


_WORKER_COUNT: dict = {}  # per client: (time asked, number of workers)


def _n_workers(client) -> int:
    """The cluster's number of workers, asked of the scheduler at most once a second (a round
    trip each time; the data sets' threads submit many small rounds)."""
    asked, n = _WORKER_COUNT.get(id(client), (-math.inf, 1))
    if time.monotonic() - asked > 1.0:
        n = max(1, len(client.scheduler_info(n_workers=-1)["workers"]))
        _WORKER_COUNT[id(client)] = (time.monotonic(), n)
    return n


def submit_jobs(fn: Callable, jobs: list, *, n_jobs: int = 1, desc: str = "", progress: bool = True,
                label: Callable | None = None, waited: bool = False) -> PendingJobs:
    """:func:`run_jobs` in two steps: submit now (on a Dask cluster the tasks start at once),
    collect with ``.results()``. ``waited``: the caller collects them next, before it submits
    anything else (on a cluster they go before the work submitted ahead, :data:`PRIORITY_WAITED`)."""
    return PendingJobs(fn, jobs, n_jobs, desc, progress, label, waited)


def run_jobs(fn: Callable, jobs: list, *, n_jobs: int = 1, desc: str = "", progress: bool = True,
             label: Callable | None = None) -> list[JobResult]:
    """Runs ``fn(job)`` for every job (in order when ``n_jobs == 1``), with a tqdm bar.

    ``fn`` must be a top-level function (picklable). Results come back in the order of ``jobs``.
    Exceptions are caught per job and returned as ``JobResult.error``. Inside
    :func:`run_on_dask` the jobs run as tasks on that Dask cluster, whatever ``n_jobs``.
    """
    return submit_jobs(fn, jobs, n_jobs=n_jobs, desc=desc, progress=progress, label=label, waited=True).results()


def run_jobs_here(fn: Callable, jobs: list) -> list[JobResult]:
    """``fn(job)`` for every job, in order, in this process (no bar), whatever the cluster: for
    code that already runs as one task on a worker."""
    return [_call(fn, job) for job in jobs]


def on_dask() -> bool:
    """True inside :func:`run_on_dask`."""
    return _DASK_CLIENT is not None


def run_task(fn: Callable, *args, reads: list | None = None):
    """``fn(*args)``: here, or inside :func:`run_on_dask` as one task on the cluster (this thread
    waits for its result). For the work between the passes that costs real time, such as drawing
    a figure: on a cluster it runs on a worker while this process goes on driving the other data
    sets, and this process never imports the heavy module (matplotlib). ``reads``: jobs naming
    the data sets ``fn`` loads (the worker fetches them from the cluster first)."""
    if _DASK_CLIENT is None:
        return fn(*args)
    with _DASK_CLIENT.as_current():
        return _DASK_CLIENT.submit(_call_with_streams, fn, args, _streams_of(reads or []), pure=False,
                                   priority=PRIORITY_WAITED).result()


def _call_with_streams(fn, args, streams):
    _have_streams(streams)
    return fn(*args)


# ---------------------------------------------------------------------------------------------
# aggregation and output helpers
# ---------------------------------------------------------------------------------------------


def mean_std(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean and sample standard deviation (ddof=1; NaN with one value) and the count."""
    vals = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return float("nan"), float("nan"), 0
    mean = statistics.fmean(vals)
    std = statistics.stdev(vals) if len(vals) > 1 else float("nan")
    return mean, std, len(vals)


def environment() -> dict:
    import omtl

    return {
        "omtl_version": getattr(omtl, "__version__", "?"),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": sys.argv,
    }


def write_csv(path: Path, rows: list[dict], fields: list[str]) -> None:
    """``rows`` as CSV with the columns ``fields`` (a missing or None value is an empty cell)."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def fmt_pct(mean: float, std: float | None = None, digits: int = 1) -> str:
    """``12.3 ± 0.4`` (percent values); ``n/a`` for NaN."""
    if mean is None or math.isnan(mean):
        return "n/a"
    if std is None or math.isnan(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def log(msg: str) -> None:
    """A status line on stdout (tqdm bars go to stderr)."""
    print(msg, flush=True)
