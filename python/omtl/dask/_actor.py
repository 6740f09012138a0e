"""The Dask actor that holds one shard's model on a worker.

Dask runs an actor's calls one at a time on its worker, in the order the client sent them, so a
shard's rows are learned in input order. Inputs arrive already validated and in the shard's
local task ids, labels as -1/+1 (a subset of a 0/1 batch could be all 1s and read as -1/+1).
"""

from __future__ import annotations

import pickle

import numpy as np

from ._checkpoint import SAFE, check_identity

#: the key of a shard file's identity (in a model file's metadata, or beside the model in a pickle)
SHARD_KEY = "omtl_shard"


def model_to_bytes(model, fmt: str, identity: dict | None = None) -> bytes:
    """The model's bytes; with ``identity``, a checkpoint's shard file that names its shard."""
    if fmt == SAFE:
        from ..persistence import dumps

        return dumps(model, metadata=None if identity is None else {SHARD_KEY: identity})
    payload = model if identity is None else {SHARD_KEY: identity, "model": model}
    return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def model_from_bytes(data: bytes, fmt: str, identity: dict | None = None):
    """The model in ``data``; with ``identity``, a shard file that must name exactly that shard."""
    if fmt == SAFE:
        from ..persistence import loads_with_header

        model, header = loads_with_header(data)
        found = (header.get("metadata") or {}).get(SHARD_KEY)
    else:
        model = pickle.loads(data)
        if identity is None:
            return model
        found = model.get(SHARD_KEY) if isinstance(model, dict) else None
        model = model.get("model") if isinstance(model, dict) else None
    if identity is not None:
        check_identity(found, identity)
        n_tasks = getattr(model, "n_tasks", None)
        if n_tasks is not None and n_tasks != identity["n_tasks"]:
            raise ValueError(f"the checkpoint's shard file {identity['shard']} holds a model of {n_tasks} tasks, its "
                             f"shard has {identity['n_tasks']}")
    return model


def safe_format_supported(model) -> bool:
    from ..persistence import REGISTRY

    return REGISTRY.get(type(model).__name__) is type(model)


class ShardActor:
    """One shard: a learner for the shard's tasks (renumbered 0..k_s-1)."""

    def __init__(self, data: bytes, fmt: str, identity: dict | None = None):
        self.model = model_from_bytes(data, fmt, identity)

    def learn(self, X, y_pm1, tasks) -> np.ndarray:
        """Pre-update predictions (-1/+1) of the rows, learned in order."""
        return np.asarray(self.model.learn(X, y_pm1, tasks=tasks), dtype=np.float64)

    def partial_fit(self, X, y_pm1, tasks) -> int:
        self.model.partial_fit(X, y_pm1, tasks=tasks)
        return int(X.shape[0])

    def decision_function(self, X, tasks) -> np.ndarray:
        return np.asarray(self.model.decision_function(X, tasks=tasks), dtype=np.float64)

    def state(self, fmt: str, identity: dict | None = None) -> bytes:
        return model_to_bytes(self.model, fmt, identity)

    def stats(self) -> dict:
        m = self.model
        return {
            "n_seen": int(getattr(m, "n_seen_", 0)),
            "n_mistakes": int(getattr(m, "n_mistakes_", 0)),
            "n_updates": int(m.n_updates_),
            "n_active": int(m.n_active_),
            "n_seen_per_task": np.asarray(m.n_seen_per_task_, dtype=np.int64),
        }
