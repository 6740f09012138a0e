"""The Dask actor that holds one shard's model on a worker.

Dask runs an actor's calls one at a time on its worker, in the order the client sent them, so a
shard's rows are learned in input order. Inputs arrive already validated and in the shard's
local task ids, labels as -1/+1 (a subset of a 0/1 batch could be all 1s and read as -1/+1).
"""

from __future__ import annotations

import pickle

import numpy as np

#: checkpoint formats: omtl's model file (runs no code when read) or pickle (any learner)
SAFE, PICKLE = "omtl", "pickle"


def model_to_bytes(model, fmt: str) -> bytes:
    if fmt == SAFE:
        from ..persistence import dumps

        return dumps(model)
    return pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)


def model_from_bytes(data: bytes, fmt: str):
    if fmt == SAFE:
        from ..persistence import loads

        return loads(data)
    return pickle.loads(data)


def safe_format_supported(model) -> bool:
    from ..persistence import REGISTRY

    return REGISTRY.get(type(model).__name__) is type(model)


class ShardActor:
    """One shard: a learner for the shard's tasks (renumbered 0..k_s-1)."""

    def __init__(self, data: bytes, fmt: str):
        self.model = model_from_bytes(data, fmt)

    def learn(self, X, y_pm1, tasks) -> np.ndarray:
        """Pre-update predictions (-1/+1) of the rows, learned in order."""
        return np.asarray(self.model.learn(X, y_pm1, tasks=tasks), dtype=np.float64)

    def partial_fit(self, X, y_pm1, tasks) -> int:
        self.model.partial_fit(X, y_pm1, tasks=tasks)
        return int(X.shape[0])

    def decision_function(self, X, tasks) -> np.ndarray:
        return np.asarray(self.model.decision_function(X, tasks=tasks), dtype=np.float64)

    def state(self, fmt: str) -> bytes:
        return model_to_bytes(self.model, fmt)

    def stats(self) -> dict:
        m = self.model
        return {
            "n_seen": int(getattr(m, "n_seen_", 0)),
            "n_mistakes": int(getattr(m, "n_mistakes_", 0)),
            "n_updates": int(m.n_updates_),
            "n_active": int(m.n_active_),
            "n_seen_per_task": np.asarray(m.n_seen_per_task_, dtype=np.int64),
        }
