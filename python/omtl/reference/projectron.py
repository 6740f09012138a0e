"""Reference budget Projectrons (§4.4, §4.5), written the obvious way.

Every update-mistake rebuilds the Gram matrix of the active set and calls
``numpy.linalg.solve`` for the projection, and a budget step calls ``numpy.linalg.inv`` on the
Gram matrix of the enlarged set for the leave-one-out quantities. No incremental inverse, no
safeguards beyond the insertion guard N1: on well-conditioned streams this is the oracle the
native incremental engine is compared with.
"""

from __future__ import annotations

import numpy as np

from .. import learners
from .graph import GrowsTasks, attach_graph, task_kernel
from .kernels import kernel_matrix
from .perceptron import SupportSet

EPS_INS = 1e-10  # N1 (§4.3)


def self_kernel(kernel, x: np.ndarray) -> float:
    return float(kernel_matrix(kernel, x[None, :], x[None, :])[0, 0])


# The projection threshold never exceeds rho sqrt(kappa) (docs/projectron.md, "Small T_ii").
PROJECTION_CAP_REL = 0.5


def insertion_floor(eta: float, threshold_on: str, kappa: float) -> float:
    """Insert only if delta^2 exceeds max(threshold^2, eps_ins * kappa) (A-C6 and N1), where the
    threshold is capped at rho sqrt(kappa) so that insertions stay possible when T_ii is small."""
    thr2 = eta * eta if threshold_on == "norm" else eta
    thr2 = min(thr2, PROJECTION_CAP_REL * PROJECTION_CAP_REL * kappa)
    return max(thr2, EPS_INS * kappa)


def project(H: np.ndarray, kz: np.ndarray, kappa: float):
    """alpha = H^-1 k_z and delta^2 = max(0, kappa - k_z' alpha), by a direct solve."""
    if len(kz) == 0:
        return np.zeros(0), max(0.0, kappa)
    with np.errstate(all="ignore"):
        alpha = np.linalg.solve(H, kz)
        return alpha, max(0.0, kappa - float(kz @ alpha))


class MTBPRJCore(GrowsTasks):
    """Alg. 1 with the choices of §8.1 (A-C3..A-C6)."""

    def __init__(self, T, kernel, n_features, budget, eta, threshold_on):
        self.T, self.kernel = T, kernel
        self.budget, self.eta, self.threshold_on = budget, eta, threshold_on
        self.support = SupportSet(n_features)
        self.n_updates = 0
        self.counts = {"n_projections": 0, "n_insertions": 0, "n_evictions": 0, "n_forgotten": 0}

    @property
    def n_active(self) -> int:
        return len(self.support)

    def forget(self, tasks) -> int:
        """The tasks' stored examples go (the inverse Gram is recomputed at each step here)."""
        removed = int((~self.support.remove_tasks(tasks)).sum())
        self.counts["n_forgotten"] += removed
        return removed

    def diagnostics(self) -> dict:
        return {**self.counts, "n_rebuilds": 0, "jitter": 0.0}

    def gram(self) -> np.ndarray:
        """H_jl = T[i_j, i_l] K'(x_j, x_l) over the active set."""
        S = self.support
        return self.T[np.ix_(S.tasks, S.tasks)] * kernel_matrix(self.kernel, S.X, S.X)

    def score_one(self, x, i):
        return self.support.score(self.kernel, self.T, x, i)

    def update_one(self, x, i, y, score):
        if y * score <= 0:
            self.mistake(x, i, y)
            self.n_updates += 1

    def mistake(self, x, i, y):
        S = self.support
        kz = S.multitask_kernel_row(self.kernel, self.T, x, i)
        kappa = self.T[i, i] * self_kernel(self.kernel, x)
        alpha, d2 = project(self.gram(), kz, kappa)
        if not (np.isfinite(kappa) and np.isfinite(d2) and np.isfinite(alpha).all()):
            # An overflowing kernel value: refused, the model is left unchanged.
            raise ValueError("numerical failure: projectron candidate is not finite")
        if d2 <= insertion_floor(self.eta, self.threshold_on, kappa):
            S.beta = S.beta + y * alpha  # projection step: the set does not change
            self.counts["n_projections"] += 1
            return
        S.append(x, i, y, y)
        self.counts["n_insertions"] += 1
        if len(S) <= self.budget:
            return
        # Budget maintenance on S + {z}: leave-one-out residuals from the inverse Gram matrix.
        self.counts["n_evictions"] += 1
        Q = np.linalg.inv(self.gram())
        old = len(S) - 1  # the new element (last) is not a candidate
        score = np.abs(S.beta[:old]) / np.sqrt(np.diag(Q)[:old])
        r = int(np.argmin(score))  # first minimum = oldest (insertion order)
        gamma = -Q[:, r] / Q[r, r]
        gamma[r] = 0.0
        S.beta = S.beta + S.beta[r] * gamma
        S.remove(r)


class MTBPRJ2Core(GrowsTasks):
    """Alg. 2: dictionary D with base-kernel projections and a k x |D| weight matrix W."""

    def __init__(self, T, kernel, n_features, budget, eta, threshold_on, literal_line14):
        self.T, self.kernel = T, kernel
        self.budget, self.eta, self.threshold_on = budget, eta, threshold_on
        self.literal_line14 = literal_line14
        self.D = np.zeros((0, n_features))
        self.dict_tasks = np.zeros(0, dtype=np.int64)
        self.W = np.zeros((T.shape[0], 0))
        self.n_updates = 0
        self.counts = {"n_projections": 0, "n_insertions": 0, "n_evictions": 0, "n_forgotten": 0}

    def forget(self, tasks) -> int:
        """The dictionary elements the tasks inserted go with their weight columns; the tasks'
        own weight rows are zeroed."""
        tasks = list(tasks)
        keep = ~np.isin(self.dict_tasks, tasks)
        removed = int((~keep).sum())
        self.W[tasks] = 0.0
        self.D, self.dict_tasks, self.W = self.D[keep], self.dict_tasks[keep], self.W[:, keep]
        self.counts["n_forgotten"] += removed
        return removed

    @property
    def n_active(self) -> int:
        return self.D.shape[0]

    def _grow_rows(self, n: int) -> None:
        # As the engine: a connected graph's weight rows cannot grow once it has updated.
        if self.graph.kind != "disconnected" and self.n_updates:
            raise ValueError("MTBPRJ2 cannot add a task to a connected task graph once it has updated")
        self.W = np.vstack([self.W, np.zeros((n, self.W.shape[1]))])

    def diagnostics(self) -> dict:
        return {**self.counts, "n_rebuilds": 0, "jitter": 0.0}

    def score_one(self, x, i) -> float:
        if self.n_active == 0:
            return 0.0
        return float(self.W[i] @ kernel_matrix(self.kernel, self.D, x[None, :])[:, 0])

    def update_one(self, x, i, y, score):
        if y * score <= 0:
            self.mistake(x, i, y)
            self.n_updates += 1

    def mistake(self, x, i, y):
        K = kernel_matrix(self.kernel, self.D, self.D)
        kz = kernel_matrix(self.kernel, self.D, x[None, :])[:, 0] if self.n_active else np.zeros(0)
        kappa = self_kernel(self.kernel, x)
        alpha, d2 = project(K, kz, kappa)
        if not (np.isfinite(kappa) and np.isfinite(d2) and np.isfinite(alpha).all()):
            # An overflowing kernel value: refused, the model is left unchanged.
            raise ValueError("numerical failure: projectron candidate is not finite")
        coupling = y * self.T[:, i]  # y T[l, i] for every task l (0 outside i's component)
        if d2 <= insertion_floor(self.eta, self.threshold_on, kappa):
            self.W = self.W + np.outer(coupling, alpha)
            self.counts["n_projections"] += 1
            return
        self.D = np.vstack([self.D, x[None, :]])
        self.dict_tasks = np.append(self.dict_tasks, i)
        self.W = np.hstack([self.W, coupling[:, None]])
        self.counts["n_insertions"] += 1
        if self.n_active <= self.budget:
            return
        self.counts["n_evictions"] += 1
        Q = np.linalg.inv(kernel_matrix(self.kernel, self.D, self.D))
        old = self.n_active - 1
        d_norm = np.linalg.norm(self.W[:, :old], axis=0) / np.sqrt(np.diag(Q)[:old])
        r = int(np.argmin(d_norm))
        gamma = -Q[:, r] / Q[r, r]
        gamma[r] = 0.0
        if self.literal_line14:
            # As printed: (beta_l)_j += gamma_j (beta_l)_r (A^-1)_{l, i_j}
            self.W = self.W + gamma[None, :] * self.W[:, [r]] * self.T[:, self.dict_tasks]
        else:
            self.W = self.W + np.outer(self.W[:, r], gamma)
        keep = np.arange(self.n_active) != r
        self.D, self.dict_tasks, self.W = self.D[keep], self.dict_tasks[keep], self.W[:, keep]


class MTBPRJ(learners.MTBPRJ):
    __doc__ = "Reference twin of ``omtl.MTBPRJ`` (NumPy, direct solves on the Gram matrix)."

    def _make_core(self, n_features, sparse):
        budget, eta, threshold_on = self._validated_params().values()
        graph = self._task_graph()
        core = MTBPRJCore(task_kernel(graph), self._kernel_spec(n_features), n_features, budget, eta, threshold_on)
        return attach_graph(core, graph)

    def _force_rebuild(self):
        """Nothing to rebuild: every step solves from scratch."""


class MTBPRJ2(learners.MTBPRJ2):
    __doc__ = "Reference twin of ``omtl.MTBPRJ2`` (NumPy, direct solves on the Gram matrix)."

    def _make_core(self, n_features, sparse):
        budget, eta, threshold_on, literal_line14 = self._validated_params().values()
        graph = self._task_graph()
        spec = self._kernel_spec(n_features)
        core = MTBPRJ2Core(task_kernel(graph), spec, n_features, budget, eta, threshold_on, literal_line14)
        return attach_graph(core, graph)

    def _force_rebuild(self):
        """Nothing to rebuild: every step solves from scratch."""


MTPRJ = MTBPRJ
MTPRJ2 = MTBPRJ2
