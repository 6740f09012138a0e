"""Reference Passive-Aggressive learners (§6.1)."""

from __future__ import annotations

import numpy as np

from .. import learners
from ._core import ReferenceCore


class PACore(ReferenceCore):
    """w ← w + tau y x after every example with hinge loss > 0 (Crammer et al., JMLR 2006)."""

    def __init__(self, n_tasks, n_features, *, shared, C, variant):
        self.shared, self.C, self.variant = shared, C, variant
        self.W = np.zeros((1 if shared else n_tasks, n_features))
        self.n_updates = 0

    @property
    def n_active(self) -> int:
        return self.n_updates

    def grow_tasks(self, n: int) -> None:
        """PA-Unique: n zero weight vectors; PA-Global: nothing (one w for all tasks)."""
        if not self.shared:
            self.W = np.vstack([self.W, np.zeros((n, self.W.shape[1]))])

    def diagnostics(self) -> dict:
        return {}

    def forget(self, tasks) -> int:
        """PA-Unique: the tasks' weights go; PA-Global's one w keeps every task's influence."""
        if not self.shared:
            self.W[list(tasks)] = 0.0
        return 0

    def tau(self, loss, sq_norm) -> float:
        if sq_norm <= 0:
            return 0.0
        if self.variant == "pa":
            return loss / sq_norm
        if self.variant == "pa1":
            return min(self.C, loss / sq_norm)
        return loss / (sq_norm + 1.0 / (2.0 * self.C))

    def score_one(self, x, task):
        return self.W[0 if self.shared else task] @ x

    def update_one(self, x, task, y, score):
        b = 0 if self.shared else task
        loss = 1.0 - y * score
        if loss > 0:
            with np.errstate(over="ignore", invalid="ignore"):
                tau = self.tau(loss, x @ x)
                new = self.W[b] + tau * y * x
            # As the native learner: a step or result that is not finite is refused.
            if not (np.isfinite(tau) and np.all(np.isfinite(new))):
                raise ValueError(f"numerical failure: PA step tau is not finite (tau = {tau})")
            if tau > 0:
                self.W[b] = new
                self.n_updates += 1


class PAUnique(learners.PAUnique):
    __doc__ = "Reference twin of ``omtl.PAUnique`` (NumPy)."

    def _make_core(self, n_features, sparse):
        return PACore(self._check_n_tasks(), n_features, shared=False, **self._validated_params())


class PAGlobal(learners.PAGlobal):
    __doc__ = "Reference twin of ``omtl.PAGlobal`` (NumPy)."

    def _make_core(self, n_features, sparse):
        return PACore(self._check_n_tasks(), n_features, shared=True, **self._validated_params())
