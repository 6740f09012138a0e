"""Task kernels in plain NumPy (ALGORITHMS.md §2.3), independent of the Rust construction."""

from __future__ import annotations

import numpy as np


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
