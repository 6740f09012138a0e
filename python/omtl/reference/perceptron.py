"""Reference kernel Perceptrons (§3), the textbook dual form with a list of stored examples."""

from __future__ import annotations

import numpy as np

from .. import learners
from .graph import GrowsTasks, attach_graph, task_kernel
from .kernels import kernel_matrix


class SupportSet:
    """Stored examples (x_j, i_j, y_j, beta_j) in insertion order, rows kept as a dense matrix."""

    def __init__(self, n_features: int):
        self.X = np.zeros((0, n_features))
        self.tasks = np.zeros(0, dtype=np.int64)
        self.labels = np.zeros(0)
        self.beta = np.zeros(0)

    def __len__(self) -> int:
        return len(self.beta)

    def append(self, x: np.ndarray, task: int, y: float, beta: float) -> None:
        self.X = np.vstack([self.X, x[None, :]])
        self.tasks = np.append(self.tasks, task)
        self.labels = np.append(self.labels, y)
        self.beta = np.append(self.beta, beta)

    def remove_tasks(self, tasks) -> np.ndarray:
        """Removes the elements of ``tasks``, the others keeping their order; returns the mask
        of the elements kept."""
        keep = ~np.isin(self.tasks, list(tasks))
        self.X, self.tasks, self.labels, self.beta = self.X[keep], self.tasks[keep], self.labels[keep], self.beta[keep]
        return keep

    def remove(self, position: int) -> None:
        keep = np.arange(len(self)) != position
        self.X, self.tasks, self.labels, self.beta = self.X[keep], self.tasks[keep], self.labels[keep], self.beta[keep]

    def multitask_kernel_row(self, kernel, T, x: np.ndarray, task: int) -> np.ndarray:
        """``T[i_j, task] K'(x_j, x)`` for every stored j."""
        if len(self) == 0:
            return np.zeros(0)
        return T[self.tasks, task] * kernel_matrix(kernel, self.X, x[None, :])[:, 0]

    def score(self, kernel, T, x: np.ndarray, task: int) -> float:
        return float(self.beta @ self.multitask_kernel_row(kernel, T, x, task))


class PerceptronCore(GrowsTasks):
    """f_i(x) = sum_j beta_j T[i_j, i] K'(x_j, x); on y f <= 0 append (x, i, y)."""

    def __init__(self, T: np.ndarray, kernel, n_features: int):
        self.T = T
        self.kernel = kernel
        self.support = SupportSet(n_features)
        self.n_updates = 0

    @property
    def n_active(self) -> int:
        return len(self.support)

    def diagnostics(self) -> dict:
        return {}

    def score_one(self, x, i):
        return self.support.score(self.kernel, self.T, x, i)

    def update_one(self, x, i, y, score):
        if y * score <= 0:
            self.support.append(x, i, y, y)
            self.n_updates += 1

    def forget(self, tasks) -> int:
        # The engine keeps the linear kernel's model as weight blocks, which a general graph mixes.
        if self.kernel.name == "linear" and self.graph.kind not in ("disconnected", "complete", "complete_open"):
            raise ValueError("the linear-kernel Perceptron on a general task graph cannot forget a task")
        keep = self.support.remove_tasks(tasks)
        removed = int((~keep).sum())
        self.n_updates -= removed
        # The engine's primal form (linear kernel) stores no example.
        return 0 if self.kernel.name == "linear" else removed


class MTPerceptron(learners.MTPerceptron):
    __doc__ = "Reference twin of ``omtl.MTPerceptron`` (NumPy, dual form)."

    def _make_core(self, n_features, sparse):
        graph = self._task_graph()
        return attach_graph(PerceptronCore(task_kernel(graph), self._kernel_spec(n_features), n_features), graph)


class KernelPerceptron(learners.KernelPerceptron):
    __doc__ = "Reference twin of ``omtl.KernelPerceptron`` (NumPy, dual form)."

    def _make_core(self, n_features, sparse):
        graph = self._task_graph()
        return attach_graph(PerceptronCore(task_kernel(graph), self._kernel_spec(n_features), n_features), graph)
