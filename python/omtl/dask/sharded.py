"""``ShardedLearner``: one online multitask model spread over Dask actors by task-graph component.

The connected components of the task graph are assigned to shards (``._plan``); each shard is
a Dask actor (``._actor``) holding one learner for its components. A batch is validated here,
split by shard (each shard's rows keep their input order), sent to every shard at once, and the
results are put back in input order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._atomic_file import write_atomically
from .._kernel_params import scale_gamma
from .._validation import PM1, check_finite_X, check_labels, check_tasks, check_X, classes_of, labels_in_form
from ..graph import TaskGraph
from ._actor import ShardActor, model_to_bytes, safe_format_supported
from ._checkpoint import (
    CHECKPOINT_MANIFEST,
    PICKLE,
    SAFE,
    checked_plan,
    file_entry,
    graph_digest,
    new_checkpoint_id,
    new_manifest,
    read_manifest,
    read_shard_files,
    shard_identity,
)
from ._plan import COMPONENT_LOCAL, COUPLED, ShardPlan, model_factory, plan_shards, splits_by_component, subgraph


def _summed(key: str, doc: str) -> property:
    """A fitted attribute of a sharded model: the sum of one per-shard statistic."""
    return property(lambda self: int(sum(st[key] for st in self.shard_stats())), doc=doc)


class ShardError(RuntimeError):
    """A shard failed after other shards had applied the same batch: the sharded model no longer
    matches any input prefix. Call ``restore()`` (from the last ``checkpoint()``) and replay the
    rows learned since."""


class ShardLostError(ShardError):
    """A shard's actor or its worker was lost (the worker died, the connection closed). Its state
    is gone: ``restore()`` rebuilds every shard from the last checkpoint."""


def _distributed():
    try:
        import distributed
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError('omtl.dask needs Dask distributed: pip install "omtl[dask]"') from exc
    return distributed


class ShardedLearner:
    """An omtl learner sharded over Dask actors by connected component of the task graph, or,
    without a graph, by task label with the shared state kept in step
    (``omtl.dask.coupled.CoupledShardedLearner``: ``ShardedLearner(model, n_shards=...,
    sync_every=...)``).

    Parameters
    ----------
    make_model : learner or callable
        An unfitted omtl learner used as a prototype (each shard gets one of the same class and
        hyper-parameters with its own ``n_tasks`` and ``graph``), or a function
        ``make_model(n_tasks, graph) -> learner`` called once per shard.
    graph : TaskGraph
        The task graph over all tasks (ids ``0..graph.n_tasks-1``); its components are never split.
    n_shards : int, optional
        Number of shards (default: the number of workers); at most the number of components.
    client : distributed.Client, optional
        Default: the current Dask client, or else a ``LocalCluster`` (one single-threaded worker
        process per shard) that this learner starts and ``close()`` stops.
    balance : "tasks" or "rows"
        Components are placed heaviest first on the lightest shard, weighing each task by 1
        ("tasks") or by its number of rows in the first batch learned ("rows").
    independent_shards : bool
        Learners whose state is shared by all tasks (ROMCO, PA-Global, CW-COL, MTBPRJ-2, OMTRL, MTFL,
        TRML) change meaning when sharded; they are refused unless this is True, and then each shard
        is an independent model of its tasks.

    Notes
    -----
    A global ``budget`` becomes a per-shard budget: each shard stores at most ``budget`` examples.
    Within a shard rows are learned in input order; results come back in input order.
    """

    # The subclass ``ShardedLearner(model)`` builds without a task graph (coupled sharding by
    # label). It names itself (``without_graph=True``), so that this module does not import its own
    # subclass's module; ``omtl.dask`` imports both.
    _without_graph: type | None = None

    def __init_subclass__(cls, *, without_graph: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        if without_graph:
            ShardedLearner._without_graph = cls

    def __new__(cls, make_model=None, graph=None, *args, **kwargs):
        if cls is ShardedLearner and graph is None:  # no task graph: coupled sharding by label
            return super().__new__(ShardedLearner._without_graph)
        return super().__new__(cls)

    _actor_class = ShardActor

    def __init__(self, make_model, graph, *, n_shards=None, client=None, balance="tasks", independent_shards=False,
                 sync_every=None):
        if sync_every is not None:
            raise ValueError("sync_every is for coupled sharding (no task graph): sharded by component, no state is shared")
        if not isinstance(graph, TaskGraph):
            raise TypeError(f"graph must be an omtl.TaskGraph, got {type(graph).__name__}")
        if balance not in ("tasks", "rows"):
            raise ValueError(f"balance must be 'tasks' or 'rows', got {balance!r}")
        if n_shards is not None and (isinstance(n_shards, bool) or not isinstance(n_shards, (int, np.integer)) or n_shards < 1):
            raise ValueError(f"n_shards must be an integer >= 1, got {n_shards!r}")
        self.graph = graph
        self.n_tasks = graph.n_tasks
        self.balance = balance
        self.independent_shards = bool(independent_shards)
        self._factory = model_factory(make_model)
        self._own_cluster = None
        self.client = client if client is not None else self._default_client(n_shards)
        self.n_shards = int(n_shards) if n_shards is not None else max(1, len(self._workers()))
        self._plan: ShardPlan | None = None
        self._actors: list = []
        self._broken: str | None = None
        self._label_form = PM1
        self._last_checkpoint: Path | None = None
        self._checkpoint_seq = 0
        self.n_features_in_: int | None = None
        self.learner_name_: str | None = None

    # ---- cluster and shards ---------------------------------------------------------------------
    def _default_client(self, n_shards):
        distributed = _distributed()
        try:
            return distributed.default_client()
        except ValueError:  # no client yet: the embedded default
            from .cluster import local_cluster

            cluster = local_cluster(int(n_shards or 2))
            self._own_cluster = cluster
            return distributed.Client(cluster, set_as_default=False)  # private to this learner

    def _workers(self) -> list[str]:
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"])

    def _ensure_shards(self, task_ids=None, X=None):
        if self._broken is not None:
            raise ShardError(f"this sharded model is inconsistent ({self._broken}); restore() it from a checkpoint")
        if self._actors:
            return
        weights = None
        if self.balance == "rows" and task_ids is not None:
            weights = np.bincount(task_ids, minlength=self.n_tasks) + 1.0  # unseen tasks still weigh
        plan = plan_shards(self.graph, self.n_shards, weights)
        models = [self._factory(int(ids.size), subgraph(self.graph, ids)) for ids in plan.tasks]
        self._check_learner(models[0], plan.n_shards)
        if X is not None:
            _fix_data_dependent_params(models, X)
        fmt = self._format(models[0])
        self._start_actors(plan, [model_to_bytes(m, fmt) for m in models], fmt)

    def _check_learner(self, model, n_shards):
        name = type(model).__name__
        self.learner_name_ = name
        if n_shards > 1 and not self.independent_shards and not splits_by_component(model):
            raise ValueError(
                f"{name} keeps state shared by all tasks (or is not known to split by graph component): sharded over "
                f"{n_shards} shards it would become {n_shards} independent models, a different learner. Pass "
                "independent_shards=True to accept that, or use one shard. Learners that split exactly by "
                f"component: {', '.join(sorted(COMPONENT_LOCAL))} (without hash_bits, where a learner has it). "
                f"{', '.join(sorted(COUPLED))} (on the complete graph, for a learner with one) shard by task label "
                "with their shared state kept in step: "
                "ShardedLearner(model) without a task graph"
            )

    @staticmethod
    def _format(model) -> str:
        return SAFE if safe_format_supported(model) else PICKLE

    def _start_actors(self, plan: ShardPlan, blobs: list[bytes], fmt: str, timeout: float | None = None):
        self._plan, self._actors, self._actor_futures, self._fmt = plan, *self._new_actors(blobs, fmt, timeout), fmt

    def _new_actors(self, blobs: list[bytes], fmt: str, timeout: float | None = None, identities=None):
        """One actor per blob, spread over the workers; returns (actors, their futures). With
        ``identities``, each blob is a checkpoint's shard file that must name that shard. A
        worker the scheduler still lists may be dead: the actors may go to another worker, so
        the placement cannot wait on a lost worker, and ``timeout`` (seconds) bounds the wait.
        On failure every actor started here is released and the error raised."""
        workers = self._workers()
        if not workers:  # e.g. a worker restarting on a loaded machine: wait for one a while
            try:
                self.client.wait_for_workers(1, timeout=60 if timeout is None else min(timeout, 60))
            except Exception:  # noqa: BLE001 - distributed raises TimeoutError or its own
                pass
            workers = self._workers()
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        futures = [
            self.client.submit(self._actor_class, blob, fmt, *(() if identities is None else (identities[s],)),
                               actor=True, pure=False, workers=[workers[s % len(workers)]], allow_other_workers=True)
            for s, blob in enumerate(blobs)
        ]
        try:
            with self.client.as_current():  # an actor handle binds to the current client (it may not be the default)
                actors = [f.result(timeout=timeout) for f in futures]
        except BaseException:
            _release(futures)
            raise
        return actors, futures

    # ---- calling the shards ---------------------------------------------------------------------
    def _call(self, method: str, parts: list[tuple[int, tuple]]) -> list:
        """Sends every shard its part at once and waits for all; a failure is raised only after
        every call has finished, so the model's state is known."""
        futures = []
        for s, args in parts:
            try:
                futures.append((s, getattr(self._actors[s], method)(*args), None))
            except Exception as exc:  # the scheduler already knows the actor's worker is gone
                futures.append((s, None, exc))
        results, failures = [], []
        for s, fut, sent_error in futures:
            if sent_error is not None:
                failures.append((s, sent_error, True))
                results.append(None)
                continue
            try:
                results.append(fut.result())
            except (ValueError, TypeError) as exc:  # the shard's model refused its rows (and is unchanged)
                failures.append((s, exc, False))
                results.append(None)
            except Exception as exc:  # the actor or its worker is gone
                failures.append((s, exc, True))
                results.append(None)
        if failures:
            self._fail(method, parts, failures)
        return results

    def _fail(self, method, parts, failures):
        s, exc, lost = failures[0]
        updating = method in ("learn", "partial_fit", "step")
        if any(is_lost for _, _, is_lost in failures):
            s, exc, _ = next(f for f in failures if f[2])
            self._broken = f"shard {s} was lost"
            raise ShardLostError(
                f"shard {s}{self._describe_shard(s)} was lost during {method}: {type(exc).__name__}: {exc}. Its state "
                "is gone; call restore() to rebuild every shard from the last checkpoint"
            ) from exc
        if updating and len(failures) < len(parts):
            self._broken = f"shard {s} refused a batch the other shards learned"
            raise ShardError(
                f"shard {s} refused its rows ({type(exc).__name__}: {exc}) after other shards had learned theirs; "
                "call restore() to go back to the last checkpoint"
            ) from exc
        raise exc  # every shard refused: nothing changed

    def _describe_shard(self, s) -> str:
        tasks = self._plan.tasks[s]
        return f" (tasks {tasks[:8].tolist()}{'...' if tasks.size > 8 else ''})"

    def _validated(self, X, y=None, tasks=None):
        X = check_X(X, n_features=self.n_features_in_, check_finite=False)
        n = X.shape[0]
        task_ids = check_tasks(tasks, n, self.n_tasks)
        y_pm1, form = check_labels(y, n) if y is not None else (None, None)
        check_finite_X(X)
        return X, y_pm1, form, task_ids

    def _split(self, task_ids):
        """Per shard with rows: (shard, row indices in input order, local task ids)."""
        shard = self._plan.shard_of[task_ids]
        order = np.argsort(shard, kind="stable")
        bounds = np.searchsorted(shard[order], np.arange(self._plan.n_shards + 1))
        out = []
        for s in range(self._plan.n_shards):
            rows = order[bounds[s]:bounds[s + 1]]
            if rows.size:
                out.append((s, rows, self._plan.local_of[task_ids[rows]]))
        return out

    def _learn(self, X, y, tasks, method):
        X, y_pm1, form, task_ids = self._validated(X, y, tasks)
        if X.shape[0] == 0:
            return np.zeros(0), form
        self._ensure_shards(task_ids, X)
        split = self._split(task_ids)
        results = self._call(method, [(s, (X[rows], y_pm1[rows], local)) for s, rows, local in split])
        self.n_features_in_ = X.shape[1]
        self._label_form = form
        if method == "partial_fit":
            return None, form
        pred = np.empty(X.shape[0])
        for (_, rows, _), res in zip(split, results):
            pred[rows] = res
        return pred, form

    # ---- the learner API ------------------------------------------------------------------------
    def partial_fit(self, X, y, *, tasks):
        """Runs the online protocol on the rows (each shard in input order); returns ``self``."""
        self._learn(X, y, tasks, "partial_fit")
        return self

    def learn(self, X, y, *, tasks) -> np.ndarray:
        """Like ``partial_fit``, returning each row's prediction before its update, in input order."""
        pred, form = self._learn(X, y, tasks, "learn")
        return labels_in_form(pred, form)

    def decision_function(self, X, *, tasks) -> np.ndarray:
        """The score of each row from its shard's model (no update), in input order."""
        X, _, _, task_ids = self._validated(X, None, tasks)
        if X.shape[0] == 0:
            return np.zeros(0)
        self._ensure_shards()
        split = self._split(task_ids)
        results = self._call("decision_function", [(s, (X[rows], local)) for s, rows, local in split])
        scores = np.empty(X.shape[0])
        for (_, rows, _), res in zip(split, results):
            scores[rows] = res
        return scores

    def predict(self, X, *, tasks) -> np.ndarray:
        scores = self.decision_function(X, tasks=tasks)
        return labels_in_form(np.where(scores >= 0.0, 1.0, -1.0), self._label_form)

    # ---- fitted attributes ----------------------------------------------------------------------
    def shard_stats(self) -> list[dict]:
        """Per shard: its global task ids, the worker holding it, and its model's counters."""
        if not self._actors:
            return []
        self._ensure_shards()
        stats = self._call("stats", [(s, ()) for s in range(len(self._actors))])
        where = self.client.who_has(self._actor_futures)
        return [{"shard": s, "tasks": self._plan.tasks[s], "worker": (where.get(f.key) or [None])[0], **st}
                for s, (st, f) in enumerate(zip(stats, self._actor_futures))]

    n_seen_ = _summed("n_seen", "Examples learned over all shards.")
    n_mistakes_ = _summed("n_mistakes", "Mistakes (pre-update predictions) over all shards.")
    n_updates_ = _summed("n_updates", "Model updates over all shards.")
    n_active_ = _summed("n_active", "Stored examples over all shards (each shard within its own budget).")

    @property
    def n_seen_per_task_(self) -> np.ndarray:
        out = np.zeros(self.n_tasks, dtype=np.int64)
        for st in self.shard_stats():
            out[st["tasks"]] = st["n_seen_per_task"]
        return out

    @property
    def classes_(self) -> np.ndarray:
        return classes_of(self._label_form)

    @property
    def shard_of_task_(self) -> np.ndarray:
        self._ensure_shards()
        return self._plan.shard_of.copy()

    # ---- checkpoints ----------------------------------------------------------------------------
    def checkpoint(self, path) -> Path:
        """Writes every shard's model (omtl's model file for native learners, pickle otherwise)
        and a manifest into the folder ``path``; the manifest is replaced last and atomically, so
        the folder always holds one complete checkpoint. Each shard file names its shard, the
        plan and the checkpoint, and the manifest holds every file's checksum, so ``restore``
        refuses files swapped, duplicated or from another checkpoint, and an edited manifest.
        Returns the folder."""
        self._ensure_shards()
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        try:
            previous = read_manifest(path) if (path / CHECKPOINT_MANIFEST).exists() else None
        except ValueError:
            previous = None  # an unreadable manifest is replaced; its files are left
        fmt, plan, checkpoint_id = self._fmt, self._plan, new_checkpoint_id()
        identities = [shard_identity(checkpoint_id, s, plan) for s in range(len(self._actors))]
        blobs = self._call("state", [(s, (fmt, identities[s])) for s in range(len(self._actors))])
        seq = max(self._checkpoint_seq, previous["seq"] if previous else 0) + 1
        ext = "omtl" if fmt == SAFE else "pkl"
        files = [f"shard-{s:04d}-{seq}.{ext}" for s in range(len(blobs))]
        for name, blob in zip(files, blobs):
            write_atomically(path / name, blob)
        manifest = new_manifest(
            id=checkpoint_id, seq=seq, format=fmt, n_tasks=self.n_tasks, learner=self.learner_name_,
            graph=graph_digest(self.graph), plan=plan.to_dict(),
            shards=[file_entry(name, blob) for name, blob in zip(files, blobs)],
            n_features_in=self.n_features_in_, label_form=self._label_form)
        write_atomically(path / CHECKPOINT_MANIFEST, manifest)
        for entry in (previous or {}).get("shards", []):
            if entry["file"] not in files:
                (path / entry["file"]).unlink(missing_ok=True)
        self._checkpoint_seq = seq
        self._last_checkpoint = path
        return path

    def restore(self, path=None, *, timeout: float | None = 300.0):
        """Rebuilds every shard from the checkpoint in ``path`` (default: the last one written by
        this object) on the cluster's current workers; returns ``self``. Rows learned after that
        checkpoint are not in the restored model: replay them.

        The checkpoint is verified before it is used: the manifest's digest, this model's task
        graph, a plan that keeps every connected component on one shard, each shard file's size
        and checksum, and each file's own record of its shard, plan and checkpoint; anything else
        raises ``ValueError``. The new shards are started and loaded before the current ones are
        released: a restore that fails (a corrupted or foreign checkpoint, a worker lost
        meanwhile, more than ``timeout`` seconds to start the shards) raises and leaves this model
        as it was. The checkpoint's files are read in the format this learner writes (omtl's
        model file for omtl's learners, whatever the manifest says): only a learner that is not
        one of omtl's (a reference twin) is read with pickle, which runs code, so such a folder
        must be trusted (docs/reliability.md, "Dask checkpoints").
        """
        path = Path(path) if path is not None else self._last_checkpoint
        if path is None:
            raise ValueError("no checkpoint to restore: pass the folder a checkpoint() call wrote")
        manifest = read_manifest(path)
        fmt = self._expected_format()
        if manifest["format"] != fmt:
            raise ValueError(
                f"the checkpoint's manifest says its shards are in the {manifest['format']!r} format; this learner's "
                f"shards are read only as {fmt!r} files"
            )
        plan = checked_plan(path, manifest, self.graph)
        blobs = read_shard_files(path, manifest)
        identities = [shard_identity(manifest["id"], s, plan) for s in range(plan.n_shards)]
        try:
            actors, futures = self._new_actors(blobs, fmt, timeout, identities)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        self._release_actors()
        self._plan, self._actors, self._actor_futures, self._fmt = plan, actors, futures, fmt
        self.n_features_in_ = manifest["n_features_in"]
        self._label_form = manifest["label_form"]
        self.learner_name_ = manifest["learner"]
        self._checkpoint_seq = manifest["seq"]
        self._last_checkpoint = path
        self._broken = None
        return self

    def _expected_format(self) -> str:
        """The format this learner's shards are written in (decided by the learner, never by a file)."""
        if self._actors:
            return self._fmt
        plan = plan_shards(self.graph, self.n_shards)
        ids = plan.tasks[0]
        return self._format(self._factory(int(ids.size), subgraph(self.graph, ids)))

    # ---- lifetime -------------------------------------------------------------------------------
    def _release_actors(self):
        futures = getattr(self, "_actor_futures", [])
        self._actors, self._actor_futures = [], []
        _release(futures)

    def close(self):
        """Releases the shards (their state is dropped: checkpoint first to keep it) and stops the
        LocalCluster this object started, if any."""
        self._release_actors()
        if self._own_cluster is not None:
            self.client.close()
            self._own_cluster.close()
            self._own_cluster = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        raise TypeError("a ShardedLearner lives on a Dask cluster and does not pickle: checkpoint() it, then restore()")

    def __repr__(self) -> str:
        shards = self._plan.n_shards if self._plan is not None else self.n_shards
        return f"ShardedLearner({self.learner_name_ or '?'}, n_tasks={self.n_tasks}, n_shards={shards})"


def _fix_data_dependent_params(models, X) -> None:
    """Hyper-parameters a model reads from its first batch (``gamma="scale"``, the rbf default)
    are read here from the whole first batch, as one model on the whole stream reads them, and
    given to every shard as numbers (a shard sees only its rows)."""
    for model in models:
        scales = getattr(model, "_scales_gamma", None)
        if scales is not None and scales():
            model.set_params(gamma=scale_gamma(X))


def _release(futures) -> None:
    for f in futures:
        try:
            f.release()
        except Exception:  # a lost worker's future may already be gone
            pass
