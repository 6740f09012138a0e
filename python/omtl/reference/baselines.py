"""Reference twins of the ROMCO baselines (ALGORITHMS.md §6.2–§6.5), in plain NumPy.

Written like the pseudocode: dense vectors, one example at a time, no incremental tricks.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtri

from .. import learners
from ._core import ReferenceCore
from .rounds import RoundCore

# ---------------------------------------------------------------------------------------------
# CW-COL (§6.4)


def cw_constants(confidence):
    phi = float(ndtri(confidence))
    return phi, 1.0 + phi * phi / 2.0, 1.0 + phi * phi


def cw_step(phi, psi, zeta, v, m):
    """(alpha, beta) of the closed-form diagonal CW update, or None if no update is needed."""
    if not (v > 0.0 and phi * math.sqrt(v) - m > 0.0):
        return None
    alpha = max(0.0, (-m * psi + math.sqrt(m * m * phi**4 / 4.0 + v * phi * phi * zeta)) / (v * zeta))
    if alpha <= 0.0:
        return None
    u = 0.25 * (-alpha * v * phi + math.sqrt(alpha * alpha * v * v * phi * phi + 4.0 * v)) ** 2
    beta = alpha * phi / (math.sqrt(u) + v * alpha * phi)
    return alpha, beta


# Variances never fall below VARIANCE_FLOOR * a (as the native learner; docs/baselines.md).
VARIANCE_FLOOR = 1e-12


def _cw_checked(mu, sigma, floor):
    """The new (mean, variance) of a CW step: refused if not finite, variances floored."""
    if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(sigma))):
        raise ValueError("numerical failure: CW-COL step is not finite")
    return mu, np.maximum(sigma, floor)


class CWColCore(ReferenceCore):
    def __init__(self, n_tasks, n_features, confidence, a, omega):
        self.phi, self.psi, self.zeta = cw_constants(confidence)
        self.a, self.omega = a, omega
        self.mu_g, self.sigma_g = np.zeros(n_features), np.full(n_features, a)
        self.mu, self.sigma = np.zeros((n_tasks, n_features)), np.full((n_tasks, n_features), a)
        self.n_updates = 0
        self.n_global_updates = 0

    @property
    def n_active(self):
        return self.n_updates

    def forget(self, tasks):
        """The tasks' individual models go back to the prior; the global model keeps them."""
        tasks = list(tasks)
        self.mu[tasks], self.sigma[tasks] = 0.0, self.a
        return 0

    def grow_tasks(self, n):
        """New tasks start from the untouched prior (mu = 0, sigma = a), as the engine's."""
        self.mu = np.vstack([self.mu, np.zeros((n, self.mu.shape[1]))])
        self.sigma = np.vstack([self.sigma, np.full((n, self.sigma.shape[1]), self.a)])

    def prior(self, i, s):
        """Geometric-mean prior (mean, variance) of task i on the coordinates s."""
        w = self.omega
        if w == 0.0:
            return self.mu[i, s], self.sigma[i, s]
        if w == 1.0:
            return self.mu_g[s], self.sigma_g[s]
        pi_i, pi_g = (1.0 - w) / self.sigma[i, s], w / self.sigma_g[s]
        pi_p = pi_i + pi_g
        return (pi_i * self.mu[i, s] + pi_g * self.mu_g[s]) / pi_p, 1.0 / pi_p

    def score_one(self, x, i):
        s = np.flatnonzero(x)
        return float(self.prior(i, s)[0] @ x[s])

    def update_one(self, x, i, y, score):
        s = np.flatnonzero(x)
        xs = x[s]
        floor = VARIANCE_FLOOR * self.a
        # Both steps are computed (each from the model before this example) and checked first.
        mu_p, sig_p = self.prior(i, s)
        own = None
        step = cw_step(self.phi, self.psi, self.zeta, float(sig_p @ xs**2), y * float(mu_p @ xs))
        if step is not None:
            alpha, beta = step
            own = _cw_checked(mu_p + alpha * y * sig_p * xs, sig_p - beta * sig_p**2 * xs**2, floor)
        glob = None
        sg = self.sigma_g[s].copy()
        step = cw_step(self.phi, self.psi, self.zeta, float(sg @ xs**2), y * float(self.mu_g[s] @ xs))
        if step is not None:
            alpha, beta = step
            glob = _cw_checked(self.mu_g[s] + alpha * y * sg * xs, sg - beta * sg**2 * xs**2, floor)
        if own is not None:
            self.mu[i, s], self.sigma[i, s] = own
            self.n_updates += 1
        if glob is not None:
            self.mu_g[s], self.sigma_g[s] = glob
            self.n_global_updates += 1


    def diagnostics(self):
        return {
            "n_global_updates": float(self.n_global_updates),
            "min_variance": float(min(self.sigma_g.min(), self.sigma.min())),
            "phi": self.phi,
        }

    def arrays(self):
        return {"task_mean": self.mu.copy(), "task_variance": self.sigma.copy(), "global_mean": self.mu_g.copy(), "global_variance": self.sigma_g.copy()}


# ---------------------------------------------------------------------------------------------
# OMTRL (§6.3)


def _sym(M):
    return (M + M.T) / 2.0


def _spectral(M, f):
    values, vectors = np.linalg.eigh(_sym(M))
    return _sym((vectors * f(values)) @ vectors.T)


def _sqrt_above_rounding(values):
    """Square roots of a PSD matrix's eigenvalues, those within rounding of 0 (below
    ``n eps max|v|``) taken as 0: the square root of rounding noise ~eps would put noise of size
    sqrt(eps) into the null directions (k > d: W W' has rank <= d) that an exact zero does not."""
    tol = len(values) * np.finfo(float).eps * np.max(np.abs(values), initial=0.0)
    return np.sqrt(np.where(values > tol, values, 0.0))


class OMTRLCore(ReferenceCore):
    def __init__(self, n_tasks, n_features, update, eta, epoch):
        k = n_tasks
        self.W = np.zeros((k, n_features))
        self.Ainv = (np.eye(k) + np.ones((k, k))) / (k + 1)
        self.update, self.eta, self.epoch = update, eta, epoch
        self.n_seen = self.n_updates = self.n_refreshes = self.n_refresh_skipped = 0

    @property
    def n_active(self):
        return self.n_updates

    def refresh(self):
        G = _sym(self.W @ self.W.T)  # W' W with W = [w_1 .. w_k] as columns
        with np.errstate(over="ignore", invalid="ignore"):
            if self.update == "batch":
                S = _spectral(G, _sqrt_above_rounding) + 1e-8 * np.eye(len(G))
                new = S / np.trace(S)
            elif self.update == "logdet":
                new = self.Ainv + self.eta * G
                new = new / np.trace(new)  # unit trace (our deviation, see docs/baselines.md)
            else:
                M = _spectral(self.Ainv, lambda v: np.log(np.maximum(v, np.finfo(float).tiny))) + self.eta * G
                E = _spectral(M, lambda v: np.exp(v - v.max()))
                new = E / np.trace(E)
        if np.all(np.isfinite(new)):
            self.Ainv = _sym(new)
            self.n_refreshes += 1
        else:
            self.n_refresh_skipped += 1

    def score_one(self, x, i):
        return x @ self.W[i]

    def update_one(self, x, i, y, score):
        self.n_seen += 1
        if y * score <= 0:
            self.W += y * np.outer(self.Ainv[:, i], x)
            self.n_updates += 1
        if self.n_seen >= self.epoch:
            self.refresh()

    def diagnostics(self):
        return {"n_refreshes": float(self.n_refreshes), "n_refresh_skipped": float(self.n_refresh_skipped), "epoch": float(self.epoch)}

    def arrays(self):
        return {"task_kernel": self.Ainv.copy(), "coef": self.W.copy()}

    def forget(self, tasks):
        """The tasks' w_i go to 0; the other tasks' weights and the coupling keep them."""
        self.W[list(tasks)] = 0.0
        return 0


# ---------------------------------------------------------------------------------------------
# OMTL (§6.2)


def _linf_water_filling(ls, n, C, ids):
    """tau_i = max(0, l_i - theta)/n_i with sum tau = C, finite when some n_i is tiny (§6.2).

    The piece is the shortest prefix (losses decreasing) with g(l_next) >= C; the steps are formed
    relative to its member r of smallest norm (ratios n_r/n_j <= 1, no 1/n, no l - theta), as in
    the native learner, so a singleton round gives tau = C exactly (INV-O2).
    """
    ls, n = [float(v) for v in ls], [float(v) for v in n]
    order = sorted(range(len(ls)), key=lambda r: (-ls[r], ids[r]))
    length = len(order)
    with np.errstate(over="ignore"):
        for m in range(1, len(order) + 1):
            nxt = ls[order[m]] if m < len(order) else 0.0
            g_next = 0.0
            for i in order[:m]:
                g_next += (ls[i] - nxt) / n[i]
            if g_next >= C:
                length = m
                break
    piece = order[:length]
    r = min(piece, key=lambda j: (n[j], ids[j]))
    spread, weight = 0.0, 0.0
    for j in piece:
        spread += (ls[j] - ls[r]) / n[j]
    for j in piece:
        weight += n[r] / n[j]
    tau_r = (C - spread) / weight
    tau = np.zeros(len(ls))
    for j in piece:
        tau[j] = max(tau_r if j == r else tau_r * (n[r] / n[j]) + (ls[j] - ls[r]) / n[j], 0.0)
    return tau


def omtl_tau(losses, sq_norms, C, norm, explicit=False):
    """Step sizes of one OMTL round: argmax_{tau >= 0, |tau|_* <= C} sum tau l - 1/2 sum tau^2 n."""
    # l/n overflows to inf on a tiny-norm row; every branch reads that correctly (it does not fit).
    with np.errstate(over="ignore"):
        return _omtl_tau(losses, sq_norms, C, norm, explicit)


def _omtl_tau(losses, sq_norms, C, norm, explicit):
    losses, sq_norms = np.asarray(losses, dtype=float), np.asarray(sq_norms, dtype=float)
    tau = np.zeros(len(losses))
    act = np.flatnonzero((losses > 0) & (sq_norms > 0))
    if act.size == 0:
        return tau
    ls, n = losses[act], sq_norms[act]
    if explicit:
        if norm == "l1":
            tau[act] = C
        elif norm == "linf":
            tau[act[np.argmax(ls)]] = C  # argmax returns the first maximum: lowest task id
        else:
            tau[act] = C * ls / math.sqrt(sum(v * v for v in ls))
        return tau
    if norm == "l1":
        tau[act] = np.minimum(C, ls / n)
    elif norm == "linf":
        with np.errstate(over="ignore"):  # l/n overflows on a tiny-norm row: it then does not fit
            free = sum(ls / n)
        if free <= C:
            tau[act] = ls / n
        else:
            tau[act] = _linf_water_filling(ls, n, C, act)
    else:

        def norm_at(theta):
            return math.sqrt(sum((li / (ni + theta)) ** 2 for li, ni in zip(ls, n)))

        if norm_at(0.0) <= C:
            tau[act] = ls / n
        else:
            lo, hi = 0.0, math.sqrt(sum(v * v for v in ls)) / C
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                if norm_at(mid) > C:
                    lo = mid
                else:
                    hi = mid
                if hi - lo <= 1e-13 * hi:
                    break
            tau[act] = ls / (n + hi)
    return tau


class OMTLCore(RoundCore):
    def __init__(self, n_tasks, n_features, C, norm, explicit):
        self.W = np.zeros((n_tasks, n_features))
        self.C, self.norm, self.explicit = C, norm, explicit
        self.n_updates = 0
        self.n_rounds = 0

    def grow_tasks(self, n):
        """New tasks start with w = 0, as the engine's (a round involves only its tasks)."""
        self.W = np.vstack([self.W, np.zeros((n, self.W.shape[1]))])

    def forget(self, tasks):
        """The tasks' w_i go to 0 (each w_i learns from its own examples only)."""
        self.W[list(tasks)] = 0.0
        return 0

    @property
    def n_active(self):
        return self.n_updates

    def score_one(self, x, i):
        return x @ self.W[i]

    def round(self, xs, tasks, ys):
        """One P2 round: predict every row with the same W, then one joint update."""
        scores = np.array([x @ self.W[i] for x, i in zip(xs, tasks)])
        losses = np.maximum(0.0, 1.0 - np.asarray(ys) * scores)
        tau = omtl_tau(losses, [x @ x for x in xs], self.C, self.norm, self.explicit)
        with np.errstate(over="ignore", invalid="ignore"):
            bad = [
                not math.isfinite(t) or (t > 0 and not np.all(np.isfinite(self.W[i] + t * y_ * x)))
                for x, i, y_, t in zip(xs, tasks, ys, tau)
            ]
        if any(bad):
            raise ValueError("numerical failure: OMTL step is not finite or overflows the weights")
        for x, i, y_, t in zip(xs, tasks, ys, tau):
            if t > 0:
                self.W[i] += t * y_ * x
                self.n_updates += 1
        self.n_rounds += 1
        return scores

    def diagnostics(self):
        return {"n_rounds": float(self.n_rounds)}

    def arrays(self):
        return {"coef": self.W.copy()}


# ---------------------------------------------------------------------------------------------
# MTFL / TRML (§6.5)


def softplus(z):
    return np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))


def logistic_loss(X, tasks, y, k, W, c):
    """sum_i (1/n_i) sum_{task i} log(1 + exp(-y (w_i.x + c_i)))  (W is k x d)."""
    counts = np.bincount(tasks, minlength=k)
    inv = np.divide(1.0, counts, out=np.zeros(k), where=counts > 0)
    margins = np.einsum("ij,ij->i", X, W[tasks]) + c[tasks]
    return float(np.bincount(tasks, weights=softplus(-y * margins), minlength=k) @ inv)


def logistic_grad(X, tasks, y, k, W, c):
    counts = np.bincount(tasks, minlength=k)
    inv = np.divide(1.0, counts, out=np.zeros(k), where=counts > 0)
    margins = np.einsum("ij,ij->i", X, W[tasks]) + c[tasks]
    g = -y / (1.0 + np.exp(np.clip(y * margins, -700, 700))) * inv[tasks]
    gW = np.zeros_like(W)
    np.add.at(gW, tasks, g[:, None] * X)
    return gW, np.bincount(tasks, weights=g, minlength=k)


def penalty(reg, W):
    if reg == "l21":
        return float(np.sqrt((W**2).sum(axis=0)).sum())  # rows of the d x k matrix = columns of W (k x d)
    return float(np.linalg.svd(W, compute_uv=False).sum())


def prox(reg, W, theta):
    """prox_{theta Omega} of W (k x d; the spec's d x k matrix transposed)."""
    if reg == "l21":
        norms = np.sqrt((W**2).sum(axis=0))
        scale = np.where(norms > 0, np.maximum(0.0, 1.0 - theta / np.where(norms > 0, norms, 1.0)), 0.0)
        return W * scale
    if theta == 0.0:
        return W.copy()
    U, s, Vt = np.linalg.svd(W, full_matrices=False)
    return (U * np.maximum(s - theta, 0.0)) @ Vt


def fista(X, tasks, y, k, reg, rho, W0, c0, tol=1e-4, max_iter=1000):
    """Accelerated proximal gradient with the MALSAR line search (§6.5). Returns (W, c, obj, iters)."""
    Wz, Wz_old, cz, cz_old = W0.copy(), W0.copy(), c0.copy(), c0.copy()
    t, t_old, L = 1.0, 0.0, 1.0
    prev = None
    obj = logistic_loss(X, tasks, y, k, W0, c0) + rho * penalty(reg, W0)
    it = 0
    while it < max_iter:
        it += 1
        alpha = (t_old - 1.0) / t
        Ws, cs = Wz + alpha * (Wz - Wz_old), cz + alpha * (cz - cz_old)
        Fs = logistic_loss(X, tasks, y, k, Ws, cs)
        gW, gc = logistic_grad(X, tasks, y, k, Ws, cs)
        stalled = False
        while True:
            Wp = prox(reg, Ws - gW / L, rho / L)
            cp = cs - gc / L
            Fp = logistic_loss(X, tasks, y, k, Wp, cp)
            dW, dc = Wp - Ws, cp - cs
            r_sum = float((dW**2).sum() + (dc**2).sum())
            if r_sum <= 1e-20:
                stalled = True
                break
            if Fp <= Fs + float((dW * gW).sum() + dc @ gc) + L / 2.0 * r_sum:
                break
            L *= 2.0
        Wz_old, Wz, cz_old, cz = Wz, Wp, cz, cp
        obj = Fp + rho * penalty(reg, Wz)
        if stalled:
            break
        if prev is not None and abs(obj - prev) <= tol * prev:
            break
        prev = obj
        t_old, t = t, (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0
    return Wz, cz, obj, it


class BatchMTLCore(ReferenceCore):
    def __init__(self, n_tasks, n_features, reg, rho, retrain_every):
        self.k, self.reg, self.rho, self.every = n_tasks, reg, rho, retrain_every
        self.W, self.c = np.zeros((n_tasks, n_features)), np.zeros(n_tasks)
        self.X, self.tasks, self.y = [], [], []
        self.n_updates = 0
        self.last = (np.nan, 0)

    @property
    def n_active(self):
        return len(self.y)

    def score_one(self, x, i):
        return x @ self.W[i] + self.c[i]

    def update_one(self, x, i, y, score):
        # The training copy is kept in single precision (saturating), as the native store.
        big = float(np.finfo(np.float32).max)
        self.X.append(np.clip(x, -big, big).astype(np.float32).astype(np.float64))
        self.tasks.append(i)
        self.y.append(y)
        if len(self.y) % self.every == 0:
            self.W, self.c, obj, it = fista(np.array(self.X), np.array(self.tasks), np.array(self.y), self.k, self.reg, self.rho, self.W, self.c)
            self.last = (obj, it)
            self.n_updates += 1

    def diagnostics(self):
        s = np.linalg.svd(self.W, compute_uv=False)
        return {
            "n_retrains": float(self.n_updates),
            "last_objective": float(self.last[0]),
            "last_n_iter": float(self.last[1]),
            "n_zero_rows": float(np.sum(np.all(self.W == 0.0, axis=0))),
            "rank": float(np.sum(s > 1e-12 * s.max())) if s.size and s.max() > 0 else 0.0,
            "stored_bytes": float(4 * sum(x.size for x in self.X) + 12 * len(self.y)),
        }

    def arrays(self):
        return {"coef": self.W.copy(), "intercept": self.c.copy()}

    def forget(self, tasks):
        """The tasks' stored examples go, their weights and biases to 0 (the others keep the
        joint fit until the next retrain)."""
        gone = set(tasks)
        keep = [t not in gone for t in self.tasks]
        self.X = [x for x, k in zip(self.X, keep) if k]
        self.y = [y for y, k in zip(self.y, keep) if k]
        self.tasks = [t for t, k in zip(self.tasks, keep) if k]
        self.W[list(tasks)], self.c[list(tasks)] = 0.0, 0.0
        return keep.count(False)


# ---------------------------------------------------------------------------------------------


def _linear_twin(native: type, core: type, *leading) -> type:
    """The reference twin of a linear baseline: ``native`` with a core builder that passes
    ``(n_tasks, n_features, *leading, *validated hyper-parameters)`` to the NumPy ``core``."""

    def _make_core(self, n_features, sparse):
        return core(self._check_n_tasks(), n_features, *leading, *self._validated_params().values())

    name = native.__name__
    doc = f"Reference twin of ``omtl.{name}`` (NumPy)."
    return type(name, (native,), {"__doc__": doc, "__module__": __name__, "__qualname__": name, "_make_core": _make_core})


CWCOL = _linear_twin(learners.CWCOL, CWColCore)
OMTRL = _linear_twin(learners.OMTRL, OMTRLCore)
OMTL = _linear_twin(learners.OMTL, OMTLCore)
MTFL = _linear_twin(learners.MTFL, BatchMTLCore, "l21")
TRML = _linear_twin(learners.TRML, BatchMTLCore, "trace")
