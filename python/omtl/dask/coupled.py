"""Coupled sharding: one model whose tasks share state, spread over Dask actors by task label,
the shared state kept in step (docs/scale-out.md, "Coupled sharding"; docs/DECISIONS.md,
"Coupled shards").

Each shard is a Dask actor (``CoupledShard``) holding one replica (``omtl.shared_state``):
the state of the tasks whose labels hash to it, and a copy of the shared state. The driver cuts
the stream into rounds (``rounds``): a round ends with a sync as soon as one shard has learned
``sync_every`` rows since the last one. In a round every shard learns its rows in input order;
at its end every shard reports its shared changes, the driver combines them, and every shard
applies the update at the start of its next call (so a round costs one call per shard).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .. import _native, shared_state
from .._atomic_file import write_atomically
from .._tasks import label_list
from .._validation import PM1, check_finite_X, check_labels, check_tasks, check_X, labels_in_form
from ..persistence import REGISTRY, dumps, file_limits, loads
from ._checkpoint import CHECKPOINT_MANIFEST
from ._plan import COUPLED
from .sharded import ShardedLearner, ShardError

#: Rows a shard learns between two syncs by default: on the per-user stream of
#: benches/bench_dask_coupled.py (10^6 users, 4 shards, MTLinear hash_bits=22) the progressive
#: error is within 0.25 point of the one model's (docs/results/dask_coupled.md).
DEFAULT_SYNC_EVERY = 4096

#: Learners whose shared state is kept in step (the engine refuses the others and MTLinear off
#: the complete graph).
class CoupledShard:
    """One shard of a coupled model: a replica (an omtl learner) that records its shared state."""

    def __init__(self, data: bytes, fmt: str = "omtl"):
        del fmt  # always omtl's model file
        self.model = loads(data)
        shared_state.track(self.model)
        # seconds spent learning rows and keeping the shared state in step (report and apply)
        self.seconds = {"learn": 0.0, "sync": 0.0}

    def _apply(self, update):
        if update is not None:
            t0 = time.perf_counter()
            shared_state.apply(self.model, update)
            self.seconds["sync"] += time.perf_counter() - t0

    def step(self, update, X, y_pm1, tasks, report: bool):
        """Applies ``update`` (or None), learns the rows in order (if any) and, if ``report``,
        returns the shared changes since the last sync: ``(predictions or None, report or None)``."""
        self._apply(update)
        pred, changes = None, None
        t0 = time.perf_counter()
        if X is not None and X.shape[0]:
            pred = np.asarray(self.model.learn(X, y_pm1, tasks=tasks), dtype=np.float64)
        t1 = time.perf_counter()
        if report:
            changes = shared_state.changes(self.model)
        self.seconds["learn"] += t1 - t0
        self.seconds["sync"] += time.perf_counter() - t1
        return pred, changes

    def decision_function(self, update, X, tasks) -> np.ndarray:
        self._apply(update)
        return np.asarray(self.model.decision_function(X, tasks=tasks), dtype=np.float64)

    def state(self, update=None) -> bytes:
        self._apply(update)
        return dumps(self.model)

    def stats(self, update=None) -> dict:
        self._apply(update)
        m = self.model
        return {"n_seen": int(m.n_seen_), "n_mistakes": int(m.n_mistakes_), "n_updates": int(m.n_updates_),
                "n_active": int(m.n_active_), "n_tasks": int(len(m.tasks_)),
                "memory_bytes": int(getattr(m, "memory_bytes_", 0)),
                "learn_seconds": self.seconds["learn"], "sync_seconds": self.seconds["sync"]}


def rounds(shard: np.ndarray, since: np.ndarray, sync_every: int):
    """The rounds of a batch whose rows go to ``shard`` (per row), the shards having learned
    ``since`` rows since the last sync: ``(start, stop, sync)`` in order, ``sync`` when the round
    ends as one shard reaches ``sync_every`` rows; and the shards' counts after the batch.
    O(shards) per round."""
    n, n_shards = shard.shape[0], since.shape[0]
    since = since.copy()
    rows_of = [np.flatnonzero(shard == s) for s in range(n_shards)]
    at = np.zeros(n_shards, dtype=np.int64)  # per shard, its first row not yet in a round
    out, start = [], 0
    while start < n:
        need = sync_every - since  # >= 1
        last = min((rows_of[s][at[s] + need[s] - 1] for s in range(n_shards) if at[s] + need[s] <= rows_of[s].size),
                   default=None)
        stop, sync = (n, False) if last is None else (int(last) + 1, True)
        for s in range(n_shards):
            taken = int(np.searchsorted(rows_of[s], stop)) - at[s]
            at[s] += taken
            since[s] += taken
        out.append((start, stop, sync))
        if sync:
            since[:] = 0
        start = stop
    return out, since


class CoupledShardedLearner(ShardedLearner, without_graph=True):
    """An omtl learner whose tasks share state, sharded over Dask actors by task label.

    ``ShardedLearner(model)`` without a task graph builds one. Tasks go to shards by a stable hash
    of their label (``omtl.shared_state.shards_of``), new labels included; every shard holds
    its tasks' state and a replica of the shared state, brought back in step every
    ``sync_every`` rows of any shard and at every checkpoint and save.

    Parameters
    ----------
    make_model : omtl learner
        An unfitted ``MTLinear`` (complete graph), ``PAGlobal`` or ``CWCOL``: every shard learns
        with its class and hyper-parameters.
    graph : None
        No task graph: the tasks are sharded by label (a graph shards by component, with
        ``ShardedLearner``). With ``n_tasks=None`` tasks are labels (str or int)
        that keep arriving; with a fixed ``n_tasks`` they are the ids ``0..n_tasks-1``.
    n_shards : int, optional
        Number of shards (default: the number of workers).
    client : distributed.Client, optional
        As for ``ShardedLearner``.
    sync_every : int
        The most rows a shard learns between two syncs (>= 1). With 1, one row is learned at a
        time and the model is the one model exactly (learners with exact cells).
    mix : {"sum", "mean"}
        How the changes of a shared weight that several shards changed combine: added (every
        shard's updates applied once, as if all their rows since the last sync had been learned
        from the state then; an adaptive rate's weight scaled to the rate one model reaches) or
        averaged (parameter averaging, as Vowpal Wabbit's AllReduce and Jubatus' MIX do).
        Statistics (sums of squared gradients, counts, precisions) always add up. Averaging costs
        accuracy (docs/results/dask_coupled.md; docs/DECISIONS.md, "Coupled shards").
    """

    def __init__(self, make_model, graph=None, *, n_shards=None, client=None, sync_every=DEFAULT_SYNC_EVERY,
                 mix="sum", balance="tasks", independent_shards=False):
        del balance, independent_shards  # component sharding only
        if graph is not None:
            raise ValueError("coupled sharding takes no task graph (the learner's own graph is used)")
        name = type(make_model).__name__
        if REGISTRY.get(name) is not type(make_model) or name not in COUPLED:
            raise ValueError(
                f"coupled sharding keeps in step the shared state of {', '.join(sorted(COUPLED))} (on the complete "
                f"graph, for a learner with a task graph), got {make_model!r}; shard other learners by task-graph "
                "component"
            )
        if getattr(make_model, "graph", "complete") != "complete":
            raise ValueError(f"coupled {name} shares its state through the complete graph's shared block: "
                             f"shard {name} on another graph by component (ShardedLearner(model, graph))")
        if isinstance(sync_every, bool) or not isinstance(sync_every, (int, np.integer)) or sync_every < 1:
            raise ValueError(f"sync_every must be an integer >= 1, got {sync_every!r}")
        if mix not in ("sum", "mean"):
            raise ValueError(f"mix must be 'sum' or 'mean', got {mix!r}")
        self.mix = mix
        if n_shards is not None and (isinstance(n_shards, bool) or not isinstance(n_shards, (int, np.integer)) or n_shards < 1):
            raise ValueError(f"n_shards must be an integer >= 1, got {n_shards!r}")
        self.prototype = type(make_model)(**make_model.get_params())
        self.graph = None
        self.n_tasks = make_model.n_tasks
        self.sync_every = int(sync_every)
        self.balance = "hash"
        self.independent_shards = False
        self._own_cluster = None
        self.client = client if client is not None else self._default_client(n_shards)
        self.n_shards = int(n_shards) if n_shards is not None else max(1, len(self._workers()))
        self._actors, self._actor_futures, self._fmt = [], [], "omtl"
        self._plan = None
        self._broken = None
        self._label_form = PM1
        self._label_mode = self.n_tasks is None
        self._since = np.zeros(self.n_shards, dtype=np.int64)
        self._pending = None  # the last sync's update, not yet applied by the shards flagged
        self._owes = np.zeros(self.n_shards, dtype=bool)
        self._last_checkpoint = None
        self._checkpoint_seq = 0
        self.n_features_in_ = None
        self.learner_name_ = name
        self.n_syncs_ = 0
        self.combine_seconds_ = 0.0  # the driver's time combining reports
        self.sync_bytes_ = 0  # reports sent to the driver and updates sent to the shards

    _actor_class = CoupledShard

    # ---- shards -------------------------------------------------------------------------------
    def _ensure_shards(self, task_ids=None, X=None):
        if self._broken is not None:
            raise ShardError(f"this sharded model is inconsistent ({self._broken}); restore() it from a checkpoint")
        if self._actors or X is None:
            return
        blank = dumps(self.prototype)
        blob = bytes(_native.empty_replica(blank, X.shape[1], self._label_mode, **file_limits()))
        self._actors, self._actor_futures = self._new_actors([blob] * self.n_shards, "omtl")

    def _require_shards(self):
        if self._broken is not None:
            raise ShardError(f"this sharded model is inconsistent ({self._broken}); restore() it from a checkpoint")
        if not self._actors:
            raise ValueError("this sharded model has not learned a batch yet")

    def _describe_shard(self, s) -> str:
        return f" (of {self.n_shards}, holding the task labels that hash to it)"

    def _update_for(self, s):
        """The pending update shard ``s`` has not applied (None if none); it will have."""
        if self._owes[s]:
            self._owes[s] = False
            return self._pending
        return None

    def _task_labels(self, tasks, n):
        if self._label_mode:
            labels = label_list(tasks, n)
            return np.array(labels, dtype=object) if labels else np.zeros(0, dtype=object)
        return check_tasks(tasks, n, self.n_tasks)

    def _validated(self, X, y=None, tasks=None):
        X = check_X(X, n_features=self.n_features_in_, check_finite=False)
        n = X.shape[0]
        labels = self._task_labels(tasks, n)
        y_pm1, form = check_labels(y, n) if y is not None else (None, None)
        shard = shared_state.shards_of(labels, self.n_shards) if n else np.zeros(0, dtype=np.int64)
        check_finite_X(X)
        return X, y_pm1, form, labels, shard

    # ---- learning -----------------------------------------------------------------------------
    def _sync(self, reports):
        t0 = time.perf_counter()
        self._pending = shared_state.combine(reports, mix=self.mix)
        self.combine_seconds_ += time.perf_counter() - t0
        self.sync_bytes_ += sum(len(r) for r in reports) + len(self._pending) * self.n_shards
        self._owes[:] = True
        self._since[:] = 0
        self.n_syncs_ += 1

    def _learn(self, X, y, tasks, method):
        X, y_pm1, form, labels, shard = self._validated(X, y, tasks)
        n = X.shape[0]
        if n == 0:
            return np.zeros(0), form
        self._ensure_shards(X=X)
        pred = np.empty(n)
        schedule, since = rounds(shard, self._since, self.sync_every)
        for i, (start, stop, sync) in enumerate(schedule):
            parts, rows_of = [], {}
            for s in range(self.n_shards):
                rows = start + np.flatnonzero(shard[start:stop] == s)
                if rows.size or sync or self._owes[s]:
                    rows_of[s] = rows
                    args = (X[rows], y_pm1[rows], labels[rows]) if rows.size else (None, None, None)
                    parts.append((s, (self._update_for(s), *args, sync)))
            try:
                results = self._call("step", parts)
            except (ValueError, TypeError) as exc:
                if i == 0:
                    raise  # every shard refused the first round: nothing learned
                self._broken = "a batch was refused after some of its rows were learned"
                raise ShardError(f"a shard refused rows {start}..{stop} of the batch after rows 0..{start} were learned "
                                 f"({exc}); call restore() to go back to the last checkpoint") from exc
            for (s, _), (p, _) in zip(parts, results):
                if p is not None:
                    pred[rows_of[s]] = p
            if sync:
                self._sync([rep for _, rep in results])
        self._since = since
        self.n_features_in_ = X.shape[1]
        self._label_form = form
        return (None if method == "partial_fit" else pred), form

    def sync(self):
        """Brings every shard's shared state in step now (a sync round without rows); returns
        ``self``. Checkpoints and saves do it first."""
        self._require_shards()
        results = self._call("step", [(s, (self._update_for(s), None, None, None, True)) for s in range(self.n_shards)])
        self._sync([rep for _, rep in results])
        return self

    def decision_function(self, X, *, tasks) -> np.ndarray:
        """The score of each row from its shard's replica (no update), in input order."""
        X, _, _, labels, shard = self._validated(X, None, tasks)
        if X.shape[0] == 0:
            return np.zeros(0)
        self._require_shards()
        parts, rows_of = [], {}
        for s in range(self.n_shards):
            rows = np.flatnonzero(shard == s)
            if rows.size:
                rows_of[s] = rows
                parts.append((s, (self._update_for(s), X[rows], labels[rows])))
        scores = np.empty(X.shape[0])
        for (s, _), res in zip(parts, self._call("decision_function", parts)):
            scores[rows_of[s]] = res
        return scores

    def predict(self, X, *, tasks) -> np.ndarray:
        scores = self.decision_function(X, tasks=tasks)
        return labels_in_form(np.where(scores >= 0.0, 1.0, -1.0), self._label_form)

    # ---- fitted attributes --------------------------------------------------------------------
    def shard_stats(self) -> list[dict]:
        """Per shard: the worker holding it and its replica's counters."""
        if not self._actors:
            return []
        self._require_shards()
        stats = self._call("stats", [(s, (self._update_for(s),)) for s in range(self.n_shards)])
        where = self.client.who_has(self._actor_futures)
        return [{"shard": s, "worker": (where.get(f.key) or [None])[0], **st}
                for s, (st, f) in enumerate(zip(stats, self._actor_futures))]

    @property
    def n_seen_per_task_(self):
        raise AttributeError("a coupled sharded model keeps its task counts in its shards: save() it and read the "
                             "merged model's n_seen_per_task_, or see shard_stats()")

    @property
    def shard_of_task_(self):
        raise AttributeError("coupled shards are chosen by label: omtl.shared_state.shards_of(labels, n_shards)")

    # ---- checkpoints and the merged model -----------------------------------------------------
    def _states(self) -> list[bytes]:
        """Every shard's model file, the shared state synced first (one consistent model)."""
        self.sync()
        return self._call("state", [(s, (self._update_for(s),)) for s in range(self.n_shards)])

    def checkpoint(self, path) -> Path:
        """Syncs the shards, then writes every shard's model file and a manifest into the folder
        ``path``; the manifest is replaced last and atomically, so the folder always holds one
        complete checkpoint. Returns the folder."""
        self._require_shards()
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        try:
            previous = _read_coupled_manifest(path) if (path / CHECKPOINT_MANIFEST).exists() else None
        except ValueError:
            previous = None
        blobs = self._states()
        seq = max(self._checkpoint_seq, previous["seq"] if previous else 0) + 1
        files = [f"shard-{s:04d}-{seq}.omtl" for s in range(len(blobs))]
        for name, blob in zip(files, blobs):
            write_atomically(path / name, blob)
        manifest = {"seq": seq, "mode": "coupled", "format": "omtl", "files": files, "learner": self.learner_name_,
                    "n_tasks": self.n_tasks, "label_mode": self._label_mode, "n_features_in": self.n_features_in_,
                    "label_form": list(self._label_form) if isinstance(self._label_form, tuple) else self._label_form,
                    "sync_every": self.sync_every, "mix": self.mix}
        write_atomically(path / CHECKPOINT_MANIFEST, json.dumps(manifest).encode())
        for name in (previous or {}).get("files", []):
            if name not in files:
                (path / name).unlink(missing_ok=True)
        self._checkpoint_seq = seq
        self._last_checkpoint = path
        return path

    def restore(self, path=None, *, timeout: float | None = 300.0):
        """Rebuilds every shard from the checkpoint in ``path`` (default: the last one written by
        this object) on the cluster's current workers; returns ``self``. Rows learned after the
        checkpoint are not in the restored model: replay them (the same rows in the same batches
        give the model an uninterrupted run from that checkpoint gives, bit for bit). A restore
        that fails leaves this model as it was."""
        path = Path(path) if path is not None else self._last_checkpoint
        if path is None:
            raise ValueError("no checkpoint to restore: pass the folder a checkpoint() call wrote")
        manifest = _read_coupled_manifest(path)
        if manifest["learner"] != self.learner_name_ or manifest["n_tasks"] != self.n_tasks:
            raise ValueError(f"the checkpoint holds a {manifest['learner']} with n_tasks={manifest['n_tasks']}, "
                             f"this model is a {self.learner_name_} with n_tasks={self.n_tasks}")
        if len(manifest["files"]) != self.n_shards:
            raise ValueError(f"the checkpoint holds {len(manifest['files'])} shards, this model {self.n_shards}: tasks "
                             "go to shards by a hash of their label modulo the number of shards")
        blobs = [(path / name).read_bytes() for name in manifest["files"]]
        for blob in blobs:  # read as omtl's model file; the replica must be this learner's
            model = loads(blob)
            if type(model) is not type(self.prototype) or model.get_params() != self.prototype.get_params():
                raise ValueError(f"{path}: a shard is not a replica of {self.prototype!r}")
        actors, futures = self._new_actors(blobs, "omtl", timeout)
        self._release_actors()
        self._actors, self._actor_futures = actors, futures
        self.n_features_in_ = manifest["n_features_in"]
        form = manifest["label_form"]
        self._label_form = tuple(form) if isinstance(form, list) else form
        self._label_mode = manifest["label_mode"]
        self._since[:] = 0
        self._owes[:] = False
        self._pending = None
        self._checkpoint_seq = manifest["seq"]
        self._last_checkpoint = path
        self._broken = None
        return self

    def to_model(self):
        """The whole model as one omtl learner, after a sync: the shared state and every shard's
        tasks (their labels shard by shard), counts added up. A single process can serve it.
        ``MTLinear`` with ``hash_bits`` cannot merge (ValueError: a task block's slots depend on its
        task number); exact cells can (docs/DECISIONS.md, "Coupled shards")."""
        self._require_shards()
        return shared_state.merge(self._states(), label_form=self._label_form)

    def save(self, path) -> None:
        """Writes ``to_model`` to the model file ``path`` (``omtl.load`` reads it)."""
        from ..persistence import save

        save(self.to_model(), path)

    def __repr__(self) -> str:
        return f"ShardedLearner({self.learner_name_}, coupled, n_shards={self.n_shards}, sync_every={self.sync_every})"


def _read_coupled_manifest(path: Path) -> dict:
    try:
        manifest = json.loads((Path(path) / CHECKPOINT_MANIFEST).read_text())
    except FileNotFoundError:
        raise ValueError(f"{path} holds no checkpoint ({CHECKPOINT_MANIFEST} is missing)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: unreadable {CHECKPOINT_MANIFEST} ({exc})") from None
    keys = {"seq", "mode", "files", "learner", "n_tasks", "label_mode", "n_features_in", "label_form"}
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(manifest, dict) or not keys <= set(manifest) or manifest["mode"] != "coupled" \
            or not isinstance(files, list) or not files \
            or not all(isinstance(f, str) and f and Path(f).name == f and not f.startswith(".") for f in files) \
            or not isinstance(manifest["seq"], int) or not isinstance(manifest["label_mode"], bool):
        raise ValueError(f"{path}: malformed {CHECKPOINT_MANIFEST} (not a checkpoint of coupled shards)")
    return manifest


class SimulatedShards(CoupledShardedLearner):
    """The shards of a ``CoupledShardedLearner`` run one after the other in this process,
    with the same schedule of rounds and syncs: the same model, bit for bit, without a cluster
    (to measure what sharding costs in accuracy at shard counts a machine cannot run, and to
    test). ``n_shards`` is required; checkpoints, restores and saves work as on a cluster."""

    def __init__(self, make_model, *, n_shards, sync_every=DEFAULT_SYNC_EVERY, mix="sum"):
        if n_shards is None:
            raise ValueError("SimulatedShards needs n_shards")
        super().__init__(make_model, n_shards=n_shards, sync_every=sync_every, mix=mix)

    def _default_client(self, n_shards):
        return None

    def _new_actors(self, blobs, fmt, timeout=None):
        return [CoupledShard(blob) for blob in blobs], [None] * len(blobs)

    def _release_actors(self):
        self._actors, self._actor_futures = [], []

    def _call(self, method, parts):
        return [getattr(self._actors[s], method)(*args) for s, args in parts]

    def shard_stats(self) -> list[dict]:
        return [{"shard": s, "worker": None, **a.stats(self._update_for(s))} for s, a in enumerate(self._actors)]

    def close(self):
        self._release_actors()

    def __repr__(self) -> str:
        return f"SimulatedShards({self.learner_name_}, n_shards={self.n_shards}, sync_every={self.sync_every})"
