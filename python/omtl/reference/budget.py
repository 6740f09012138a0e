"""Reference budget Perceptrons (§4.1 MTRBP, §4.2 MTFORG), written like the pseudocode.

The active set is a ``SupportSet`` in insertion order; coefficients are stored as they
are (no global scale), the shrink factor is the closed form of §4.2 step 5, and random
evictions use the same pinned SplitMix64 generator as the Rust engine.
"""

from __future__ import annotations

import numpy as np

from .. import learners
from .._rng import SplitMix64
from ._core import dense_row
from .graph import GrowsTasks, attach_graph, task_kernel
from .kernels import kernel_matrix
from .perceptron import SupportSet


class _BudgetCore(GrowsTasks):
    """Shared state: T, the base kernel, the support set and the counters."""

    def __init__(self, T: np.ndarray, kernel, n_features: int, budget: int):
        self.T = T
        self.kernel = kernel
        self.budget = budget
        self.support = SupportSet(n_features)
        self.n_updates = 0
        self.n_seen = 0
        self.n_evictions = 0

    @property
    def n_active(self) -> int:
        return len(self.support)

    def score_one(self, x, task) -> float:
        return self.support.score(self.kernel, self.T, x, task)

    def update_one(self, x, i, y, score):
        self.n_seen += 1
        self.observe(x)
        if y * score <= 0:  # update-mistake
            self.n_updates += 1
            self.on_mistake(x, i, y)

    def observe(self, x) -> None:
        pass

    def forget(self, tasks) -> int:
        keep = self.support.remove_tasks(tasks)
        removed = int((~keep).sum())
        self.forgotten(keep, removed)
        return removed


class RBPCore(_BudgetCore):
    """MTRBP: if |S| = B, remove a uniformly random stored element; then append (x, i, y)."""

    def __init__(self, T, kernel, n_features, budget, seed):
        super().__init__(T, kernel, n_features, budget)
        self.rng = SplitMix64(seed)
        self.times = []  # insertion time of each stored element, in insertion order
        self.last_evicted_time = 0

    def diagnostics(self) -> dict:
        return {"n_evictions": self.n_evictions, "last_evicted_time": self.last_evicted_time, "budget": self.budget}

    def forgotten(self, keep, removed) -> None:
        self.times = [t for t, k in zip(self.times, keep) if k]
        self.n_updates -= removed

    def on_mistake(self, x, i, y):
        if len(self.support) == self.budget:
            r = self.rng.below(len(self.support))
            self.last_evicted_time = self.times.pop(r)
            self.support.remove(r)
            self.n_evictions += 1
        self.support.append(x, i, y, y)
        self.times.append(self.n_seen)


class ForgetronCore(_BudgetCore):
    """MTFORG (self-tuned Forgetron on the multitask kernel), §4.2 steps 1-8."""

    def __init__(self, T, kernel, n_features, budget, radius):
        super().__init__(T, kernel, n_features, budget)
        self.radius = radius
        self.c_g = radius * np.sqrt(max(np.max(np.diag(T)), 0.0))
        if not self.c_g > 0:
            raise ValueError(f"MTFORG needs c_G = R sqrt(max_i T_ii) > 0, got {self.c_g}")
        self.Q = 0.0
        self.M = 0
        self.n_radius_exceeded = 0
        self.n_forgotten = 0
        self.last = {"last_shrink": 1.0, "last_a": 0.0, "last_b": 0.0, "last_c": 0.0, "last_phi": 0.0, "last_sigma": 0.0}

    def diagnostics(self) -> dict:
        return {
            "n_evictions": self.n_evictions,
            "budget": self.budget,
            "forgetron_q": self.Q,
            "forgetron_m": self.M,
            "c_g": self.c_g,
            "radius": self.radius,
            "n_radius_exceeded": self.n_radius_exceeded,
            **self.last,
            "n_forgotten": self.n_forgotten,
        }

    def forgotten(self, keep, removed) -> None:
        self.n_forgotten += removed

    def _exceeds_radius(self, x) -> bool:
        kxx = kernel_matrix(self.kernel, x[None, :], x[None, :])[0, 0]
        return kxx > self.radius**2 * (1 + 1e-12)

    def radius_exceeded(self, X) -> bool:
        """Whether some row of the batch has K'(x, x) > R^2 (the front end warns before learning)."""
        return any(self._exceeds_radius(dense_row(X, t)) for t in range(X.shape[0]))

    def observe(self, x):
        if self._exceeds_radius(x):
            self.n_radius_exceeded += 1

    def on_mistake(self, x, i, y):
        self.M += 1  # step 1
        self.support.append(x, i, y, y)  # step 2 / 3.1: (tentatively) append with beta = y
        if len(self.support) <= self.budget:
            return
        S, c_g = self.support, self.c_g
        r = 0  # step 3.2: the oldest element (insertion order)
        sigma, y_r = abs(S.beta[r]), S.labels[r]
        phi = S.score(self.kernel, self.T, S.X[r], int(S.tasks[r]))  # step 3.3, all B+1 terms
        a = c_g**2 * sigma**2 - 2 * sigma * y_r * phi  # step 3.4
        b = 2 * c_g * sigma
        c = self.Q - 15 / 32 * c_g**2 * self.M
        if a + b + c <= 0:  # step 3.5
            chi = 1.0
        else:
            chi = -2 * c / (b + np.sqrt(max(b * b - 4 * a * c, 0.0)))
        S.beta = chi * S.beta  # step 3.6
        self.Q += a * chi**2 + b * chi  # step 3.7
        S.remove(r)  # step 3.8
        self.n_evictions += 1
        self.last = {"last_shrink": chi, "last_a": a, "last_b": b, "last_c": c, "last_phi": phi, "last_sigma": sigma}


class MTRBP(learners.MTRBP):
    __doc__ = "Reference twin of ``omtl.MTRBP`` (NumPy, dual form, same generator)."

    def _make_core(self, n_features, sparse):
        budget, seed = self._validated_params().values()
        graph = self._task_graph()
        return attach_graph(RBPCore(task_kernel(graph), self._kernel_spec(n_features), n_features, budget, seed), graph)


class MTFORG(learners.MTFORG):
    __doc__ = "Reference twin of ``omtl.MTFORG`` (NumPy, coefficients kept unscaled)."

    def _make_core(self, n_features, sparse):
        budget, radius = self._validated_params().values()
        spec = self._kernel_spec(n_features)
        if spec.name == "rbf" or spec.normalize:
            radius = 1.0  # K'(x, x) <= 1 (§2.5)
        graph = self._task_graph()
        return attach_graph(ForgetronCore(task_kernel(graph), spec, n_features, budget, radius), graph)
