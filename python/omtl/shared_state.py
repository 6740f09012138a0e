"""Shared state of coupled models: one model run as replicas that are kept in step.

A learner whose tasks share state (``MTLinear`` on the complete graph: its shared block;
``PAGlobal`` and ``CWCOL``: their global model) can run as several replicas, each learning the rows
of its own tasks (``shards_of``) and holding a copy of the shared state. To bring them in step,
every replica reports what its shared state changed since the last sync (``changes``), the
reports are combined (``combine``: per value, the replicas' changes added, or averaged, for a
weight, added for an accumulated statistic, the largest for a running maximum) and every replica
applies the result (``apply``). Replicas in step merge into one model (``merge``).
``omtl.dask.ShardedLearner`` does all of this on a Dask cluster (docs/scale-out.md,
"Coupled sharding"; the rules: docs/DECISIONS.md, "Coupled shards").

Reports and updates are bytes in a versioned layout (``LAYOUT_VERSION``), checked when read.

>>> import numpy as np, omtl
>>> from omtl import shared_state
>>> rng = np.random.default_rng(0)
>>> X, y = rng.normal(size=(40, 3)), rng.choice([-1, 1], size=40)
>>> users = np.array([f"u{i % 8}" for i in range(40)], dtype=object)
>>> shard = shared_state.shards_of(users, 2)
>>> replicas = [shared_state.empty_replica(omtl.MTLinear(), 3) for _ in range(2)]
>>> for s, r in enumerate(replicas):
...     _ = r.learn(X[shard == s], y[shard == s], tasks=users[shard == s])
>>> update = shared_state.combine([shared_state.changes(r) for r in replicas])
>>> for r in replicas:
...     shared_state.apply(r, update)
>>> merged = shared_state.merge(replicas)
>>> merged.n_seen_
40
"""

from __future__ import annotations

import json

import numpy as np

from . import _native
from .persistence import dumps, file_limits, loads

__all__ = ["LAYOUT_VERSION", "apply", "changes", "combine", "empty_replica", "merge", "shards_of", "track"]

#: The layout version of the reports and updates.
LAYOUT_VERSION = _native.SHARED_LAYOUT_VERSION


def _native_learner(model):
    """The fitted model's native learner (the one place this module reaches into an estimator)."""
    core = getattr(model, "_core", None)
    learner = getattr(core, "_learner", None)
    if learner is None:
        raise ValueError(f"{type(model).__name__} is not a fitted native omtl model")
    return learner


def empty_replica(model, n_features: int, *, label_mode: bool = True):
    """A replica of ``model``'s estimator (its class and hyper-parameters; a fitted model's state
    is ignored) that has learned nothing, over ``n_features`` features, recording its shared
    state: tasks named by labels (``label_mode``) or the estimator's ``n_tasks`` numbered tasks.

    Every replica starts from one, so that its first rows are recorded like any other (a model
    only records once it has a learner)."""
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1:
        raise ValueError(f"n_features must be an integer >= 1, got {n_features!r}")
    blank = type(model)(**model.get_params())
    data = _native.empty_replica(dumps(blank), int(n_features), bool(label_mode), **file_limits())
    replica = loads(data)
    track(replica)
    return replica


def track(model) -> None:
    """Starts recording ``model``'s changes to its shared state (a model read from a file or a
    pickle does not record: call this again)."""
    _native.shared_track(_native_learner(model))


def changes(model) -> bytes:
    """``model``'s changes to its shared state since the last sync (or ``track``)."""
    with model._model_lock():
        return bytes(_native.shared_changes(_native_learner(model)))


def combine(reports, *, mix: str = "sum") -> bytes:
    """One update from every replica's report (in the same order at every sync). A weight that
    several replicas changed takes the sum of their changes (``mix="sum"``: every replica's
    updates applied once, as if all their rows had been learned from the state at the last sync;
    a weight with an adaptive rate, as MTLinear's normalized and AdaGrad rules keep, has each
    replica's change scaled by ``sqrt(G_replica / G_combined)``, the rate it stepped at over the
    rate one model reaches) or their mean (``"mean"``: parameter averaging, as Vowpal Wabbit's
    AllReduce and Jubatus' MIX do); statistics (sums of squared gradients, counts, precisions) add
    up, maxima are kept."""
    if mix not in ("sum", "mean"):
        raise ValueError(f"mix must be 'sum' or 'mean', got {mix!r}")
    return bytes(_native.shared_combine([bytes(r) for r in reports], mix))


def apply(model, update: bytes) -> None:
    """Brings ``model``'s shared state in step with ``update`` (from ``combine``) and records
    afresh; on error ``model`` is unchanged."""
    with model._model_lock():
        _native.shared_apply(_native_learner(model), bytes(update))


def merge(replicas, *, label_form=None):
    """One model from replicas in step (models or their model files' bytes): the shared state
    and every replica's tasks (label mode: the labels replica by replica; numbered tasks keep
    their numbers), counts added up, predictions written in ``label_form`` (a form as a model
    file names it: ``"pm1"``, ``"01"``, ``"bool"`` or a pair of labels; default: the first
    replica's). ``MTLinear`` with ``hash_bits`` does not merge (ValueError): a task block's slots
    depend on its task number."""
    parts = [bytes(r) if isinstance(r, (bytes, bytearray, memoryview)) else dumps(r) for r in replicas]
    if label_form is None:
        label_form = json.loads(_native.read_model_header(parts[0], **file_limits()))["fitted"]["label_form"]
    form = json.dumps(list(label_form) if isinstance(label_form, tuple) else label_form)
    return loads(_native.merge_replicas(parts, form, **file_limits()))


def shards_of(labels, n_shards: int) -> np.ndarray:
    """The shard (``0..n_shards-1``) of every task label: MurmurHash3 (x86, 32-bit, seed 0) of the
    label's UTF-8 bytes (an int: its decimal digits), reduced by multiply-shift. The same in every
    process and run (no ``PYTHONHASHSEED``), so a label is learned by one shard wherever it
    arrives."""
    if isinstance(n_shards, bool) or not isinstance(n_shards, (int, np.integer)) or n_shards < 1:
        raise ValueError(f"n_shards must be an integer >= 1, got {n_shards!r}")
    arr = np.asarray(labels)
    if arr.dtype.kind in "iu":
        return _native.shards_of(np.ascontiguousarray(arr, dtype=np.int64).ravel(), int(n_shards))
    return _native.shards_of(list(arr.ravel()) if arr.dtype != object else arr.ravel().tolist(), int(n_shards))
