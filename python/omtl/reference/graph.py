"""Task kernels in plain NumPy (ALGORITHMS.md §2.3), independent of the Rust construction."""

from __future__ import annotations

import numpy as np

from ._core import ReferenceCore


def laplacian(n_tasks: int, edges, weights) -> np.ndarray:
    L = np.zeros((n_tasks, n_tasks))
    for (i, j), w in zip(edges, weights):
        L[i, j] -= w
        L[j, i] -= w
        L[i, i] += w
        L[j, j] += w
    return L


def task_kernel(graph) -> np.ndarray:
    """The k x k task kernel T of an ``omtl.TaskGraph``."""
    k = graph.n_tasks
    if graph.kind == "complete":
        return (np.eye(k) + np.ones((k, k))) / (k + 1)
    if graph.kind == "complete_open":
        return (np.eye(k) + np.ones((k, k))) / 2
    if graph.kind == "disconnected":
        return np.eye(k)
    if graph.kind == "edges":
        return np.linalg.inv(np.eye(k) + laplacian(k, graph.edges, graph.weights))
    if graph.kind == "laplacian_pinv":
        L = laplacian(k, graph.edges, graph.weights)
        values, vectors = np.linalg.eigh(L)
        keep = values > 1e-12 * np.abs(values).max() if values.size and np.abs(values).max() > 0 else values > np.inf
        return (vectors[:, keep] / values[keep]) @ vectors[:, keep].T
    if graph.kind == "interaction":
        return np.linalg.inv(graph.matrix)
    if graph.kind == "psd_plus_identity":
        return np.linalg.inv(np.eye(k) + graph.matrix)
    if graph.kind == "task_kernel":
        return np.array(graph.matrix, dtype=np.float64)
    raise ValueError(f"unknown task graph kind {graph.kind!r}")


class GrowsTasks(ReferenceCore):
    """``grow_tasks`` of a reference core that holds T and the TaskGraph it came from (``graph``,
    set by ``_make_core``), as the engine's ``TaskKernel::grow``: the disconnected and the
    open-ended complete graph keep every entry; other graphs cannot grow in a fitted model."""

    graph = None

    def grow_tasks(self, n: int) -> None:
        if self.graph is None or self.graph.kind not in ("disconnected", "complete_open"):
            kind = None if self.graph is None else self.graph.kind
            raise ValueError(f"a fitted model on a {kind!r} task graph cannot add tasks")
        graph = self.graph.add_tasks(n)
        self._grow_rows(n)
        self.graph, self.T = graph, task_kernel(graph)

    def _grow_rows(self, n: int) -> None:
        """Per-task state beyond T (none by default)."""


def attach_graph(core, graph):
    """``core`` with the TaskGraph its T came from (for ``GrowsTasks``)."""
    core.graph = graph
    return core
