"""Which tasks go to which shard, and the model each shard builds for its tasks.

A shard holds whole connected components of the task graph, so every task it learns keeps all
its neighbours; its model sees the shard's tasks renumbered 0..k_s-1 (in increasing global id)
and the task graph restricted to them. For the graph kinds here the restriction is exact: T is
block diagonal over the components ((I + L)^-1, pinv(L), A^-1 and (I + M)^-1 invert block by
block, a given T is cut along its zero blocks), so a shard's T equals the rows and columns of
the global T that belong to it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from .. import learners as _learners
from ..graph import TaskGraph


# How a learner shards is declared by its class (``_shard_state``, ``_coupled_shards``).
def _learners_where(test) -> frozenset:
    return frozenset(name for name in _learners.__all__ if test(getattr(_learners, name)))


#: Learners whose state splits by connected component of the task graph (ALGORITHMS.md §3-4,
#: §6.1-6.2; MTLinear keeps its factor of T, its normalizer and its cells per component, except
#: under ``hash_bits``, where all blocks share one table; OMTL's joint step couples only the tasks
#: of one round, and a sharded stream is protocol P1): sharded by component they equal the one
#: model on the whole stream; the budget learners up to their budget, which becomes a per-shard
#: budget.
COMPONENT_LOCAL = _learners_where(lambda cls: getattr(cls, "_shard_state", None) == "component")

#: Learners with a state shared by all tasks whatever the graph (MTBPRJ-2's span in the base-kernel
#: space, ROMCO's low-rank U, PA-Global's and CW-COL's global model, OMTRL's learned coupling, the
#: MTFL/TRML penalties): sharded, each shard is an independent model of its tasks, a different
#: model, so they are refused unless ``independent_shards=True``.
SHARED_STATE = _learners_where(lambda cls: getattr(cls, "_shard_state", None) == "shared")

#: Learners whose shared state coupled sharding (by task label, ``CoupledShardedLearner``) keeps in step.
COUPLED = _learners_where(lambda cls: getattr(cls, "_coupled_shards", False))


def splits_by_component(model) -> bool:
    """True when ``model`` is known to keep its state per connected component (its class, and no
    ``hash_bits``: hashed, every block lives in one shared table)."""
    if getattr(model, "hash_bits", None) is not None:
        return False
    return type(model).__name__ in COMPONENT_LOCAL


@dataclass(frozen=True)
class ShardPlan:
    """``shard_of[t]``: the shard of global task t; ``local_of[t]``: its id inside that shard;
    ``tasks[s]``: the global ids of shard s, increasing (local id = position)."""

    shard_of: np.ndarray
    local_of: np.ndarray
    tasks: tuple

    @property
    def n_shards(self) -> int:
        return len(self.tasks)

    def to_dict(self) -> dict:
        return {"shard_of": self.shard_of.tolist()}

    @classmethod
    def from_shard_of(cls, shard_of, n_shards: int) -> ShardPlan:
        shard_of = np.asarray(shard_of, dtype=np.int64)
        tasks = tuple(np.flatnonzero(shard_of == s) for s in range(n_shards))
        local_of = np.empty_like(shard_of)
        for ids in tasks:
            local_of[ids] = np.arange(ids.size)
        return cls(shard_of, local_of, tasks)


def plan_shards(graph: TaskGraph, n_shards: int, weights=None) -> ShardPlan:
    """Assigns whole components to ``n_shards`` shards, heaviest first to the lightest shard
    (longest-processing-time rule; ties to the lower shard id, so the plan is deterministic).

    ``weights[t]`` is task t's load (1 per task when None: balance by task count; observed rows
    per task: balance by rows)."""
    k = graph.n_tasks
    w = np.ones(k) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (k,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"weights must be {k} finite nonnegative numbers, one per task")
    comp = np.asarray(graph.components, dtype=np.int64)
    labels, inverse = np.unique(comp, return_inverse=True)
    comp_w = np.bincount(inverse, weights=w, minlength=labels.size)
    comp_n = np.bincount(inverse, minlength=labels.size)
    # heaviest first; equal loads by task count, then by smallest task (the label)
    order = sorted(range(labels.size), key=lambda c: (-comp_w[c], -comp_n[c], labels[c]))
    heap = [(0.0, s) for s in range(n_shards)]
    shard_of_comp = np.empty(labels.size, dtype=np.int64)
    for c in order:
        load, s = heapq.heappop(heap)
        shard_of_comp[c] = s
        heapq.heappush(heap, (load + comp_w[c], s))
    # fewer components than shards leaves shards empty: drop them (the rest keep their order)
    used = np.unique(shard_of_comp)
    return ShardPlan.from_shard_of(np.searchsorted(used, shard_of_comp)[inverse], used.size)


def subgraph(graph: TaskGraph, tasks: np.ndarray) -> TaskGraph:
    """``graph`` restricted to the global tasks ``tasks`` (whole components), renumbered 0..len-1."""
    m = int(tasks.size)
    if graph.kind == "disconnected":
        return TaskGraph.disconnected(m)
    if graph.kind == "complete":
        if m != graph.n_tasks:
            raise ValueError("a complete graph is one component; it cannot be split")
        return graph
    if graph.kind in ("edges", "laplacian_pinv"):
        local = np.full(graph.n_tasks, -1, dtype=np.int64)
        local[tasks] = np.arange(m)
        pairs = np.asarray(graph.edges, dtype=np.int64).reshape(-1, 2)
        keep = (local[pairs[:, 0]] >= 0) & (local[pairs[:, 1]] >= 0)
        edges = local[pairs[keep]]
        weights = np.asarray(graph.weights, dtype=np.float64)[keep]
        # the constructors validate again (and laplacian_pinv would warn a second time)
        return TaskGraph._checked(m, graph.kind, edges=edges, weights=weights)
    if graph.kind in ("interaction", "psd_plus_identity", "task_kernel"):
        return TaskGraph._checked(m, graph.kind, matrix=np.ascontiguousarray(graph.matrix[np.ix_(tasks, tasks)]))
    raise ValueError(f"cannot shard a task graph of kind {graph.kind!r}")


def model_factory(make_model):
    """``make_model`` as a function (n_tasks, graph) -> unfitted learner.

    ``make_model`` is either such a function or an unfitted learner used as a prototype: each
    shard gets a learner of the same class and hyper-parameters with its own ``n_tasks`` and,
    when the class takes one, its ``graph``."""
    if callable(make_model) and not hasattr(make_model, "get_params"):
        return make_model
    if not hasattr(make_model, "get_params"):
        raise TypeError(f"make_model must be a learner or a function (n_tasks, graph) -> learner, got {make_model!r}")
    prototype = make_model
    cls = type(prototype)
    params = prototype.get_params()

    def build(n_tasks, graph):
        rebuilt = {**params, "n_tasks": n_tasks}
        if "graph" in params:
            rebuilt["graph"] = graph
        return cls(**rebuilt)

    return build
