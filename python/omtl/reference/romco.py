"""Reference ROMCO (§5): U and V as dense NumPy matrices, the SVT by numpy.linalg.svd."""

from __future__ import annotations

import numpy as np

from .. import learners
from .rounds import RoundCore


class RomcoCore(RoundCore):
    """Alg. 1 of Yang et al. (SDM 2016) as restated in ALGORITHMS.md §5.3, one round at a time."""

    def __init__(self, n_tasks, n_features, *, eta1, eta2, lambda1, lambda2, update):
        self.k, self.d = n_tasks, n_features
        self.eta1, self.eta2, self.lambda1, self.lambda2, self.update = eta1, eta2, lambda1, lambda2, update
        self.U = np.zeros((n_features, n_tasks))
        self.V = np.zeros((n_features, n_tasks))
        self.rank = 0
        self.n_updates = 0

    @property
    def n_active(self) -> int:
        return self.n_updates

    def diagnostics(self) -> dict:
        n_personalized = int(np.count_nonzero(np.linalg.norm(self.V, axis=0) > 0))
        return {"rank": self.rank, "n_personalized": n_personalized}

    def factors(self):
        return self.U.copy(), self.V.copy()

    def forget(self, tasks):
        """The tasks' columns of U and V go to 0; the rank is that of what remains."""
        tasks = list(tasks)
        self.U[:, tasks], self.V[:, tasks] = 0.0, 0.0
        if self.lambda1 > 0:
            sigma = np.linalg.svd(self.U, compute_uv=False) if self.U.size else np.zeros(0)
            smax = sigma.max() if sigma.size else 0.0
            self.rank = int(np.count_nonzero(sigma > 1e-12 * smax)) if smax > 0 else 0
        return 0

    def score_one(self, x, i) -> float:
        return float((self.U[:, i] + self.V[:, i]) @ x)

    def round(self, xs, tasks, ys) -> np.ndarray:
        """One round: predict every present task with the same (U, V), then one joint update."""
        p = np.array([self.score_one(x, i) for x, i in zip(xs, tasks)])
        margins = np.asarray(ys) * p
        fire = np.any(margins < 1.0) if self.update == "loss" else np.any(margins <= 0.0)
        if not fire:
            return p  # no update, no shrinkage
        gamma = np.zeros((self.d, self.k))
        for x, i, y, m in zip(xs, tasks, ys, margins):
            if m < 1.0:  # hinge loss > 0; at the kink the subgradient is 0
                gamma[:, i] = -y * x
        U_hat = self.U - self.eta1 * gamma
        V_hat = self.V - self.eta2 * gamma
        # U ← SVT_{eta1 lambda1}(U_hat), by a thin SVD. Zero columns stay exactly zero
        # (SVT([A, 0]) = [SVT(A), 0]), so only the others go through the SVD.
        live = np.flatnonzero(np.any(U_hat != 0.0, axis=0))
        P, sigma, Qt = np.linalg.svd(U_hat[:, live], full_matrices=False)
        theta = self.eta1 * self.lambda1
        kept = np.maximum(sigma - theta, 0.0)
        if theta == 0.0:
            # SVT_0 is the identity: keep U exactly (recomposing P diag(σ) Qᵀ would put rounding
            # noise where U has exact zeros, and a score that is exactly 0 would not come out so).
            self.U = U_hat.copy()
        else:
            self.U = np.zeros_like(U_hat)
            self.U[:, live] = (P * kept) @ Qt
        smax = sigma.max() if sigma.size else 0.0
        self.rank = int(np.count_nonzero(kept > 1e-12 * smax)) if smax > 0 else 0
        # Column group shrinkage of every column of V.
        for i in range(self.k):
            norm = np.linalg.norm(V_hat[:, i])
            factor = max(0.0, 1.0 - self.eta2 * self.lambda2 / norm) if norm > 0 else 0.0
            self.V[:, i] = factor * V_hat[:, i]
        self.n_updates += 1
        return p


class ROMCO(learners.ROMCO):
    __doc__ = "Reference twin of ``omtl.ROMCO`` (NumPy, numpy.linalg.svd at every update)."

    def _make_core(self, n_features, sparse):
        return RomcoCore(self._check_n_tasks(), n_features, **self._validated_params())
