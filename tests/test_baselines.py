"""Invariants of the ROMCO baselines (ALGORITHMS.md §9): INV-O2, INV-O3, INV-C1, INV-C2, INV-M1,
INV-M2, plus OMTRL's coupling and the batch learners' schedule. INV-O1 (P2) lives in
test_omtl_rounds.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from conftest import random_stream
from parity import chunks_of, compare_runs, scores_row_by_row
from scipy.special import ndtri

import omtl
import omtl.reference as ref
from omtl import _native
from omtl.reference.baselines import cw_step, fista, logistic_grad, logistic_loss, omtl_tau, penalty, prox

# This module's learners in the conformance and parity suites (see learner_table.py).
CONFORMANCE = [
    ("cwcol", omtl.CWCOL, ref.CWCOL, {}),
    ("cwcol-w0", omtl.CWCOL, ref.CWCOL, {"omega": 0.0, "confidence": 0.9}),
    ("cwcol-w1", omtl.CWCOL, ref.CWCOL, {"omega": 1.0, "a": 0.5}),
    ("omtrl-batch", omtl.OMTRL, ref.OMTRL, {"epoch": 40}),
    ("omtrl-logdet", omtl.OMTRL, ref.OMTRL, {"relation_update": "logdet", "epoch": 40, "eta": 1e-2}),
    ("omtrl-vonneumann", omtl.OMTRL, ref.OMTRL, {"relation_update": "vonneumann", "epoch": 40}),
    ("omtl-linf", omtl.OMTL, ref.OMTL, {}),
    ("omtl-l2-explicit", omtl.OMTL, ref.OMTL, {"global_norm": "l2", "explicit": True, "C": 0.5}),
    ("omtl-l1", omtl.OMTL, ref.OMTL, {"global_norm": "l1", "C": 0.3}),
    ("mtfl", omtl.MTFL, ref.MTFL, {"retrain_every": 30}),
    ("trml", omtl.TRML, ref.TRML, {"retrain_every": 40, "rho": 0.05}),
]

# ---------------------------------------------------------------------------------------------
# CW-COL


def plain_cw(X, y, confidence, a):
    """Textbook diagonal CW on one stream; returns the pre-update scores."""
    phi = float(ndtri(confidence))
    psi, zeta = 1 + phi**2 / 2, 1 + phi**2
    mu, sigma = np.zeros(X.shape[1]), np.full(X.shape[1], a)
    scores = np.zeros(len(y))
    for t, (x, yt) in enumerate(zip(X, y)):
        scores[t] = mu @ x
        v, m = sigma @ x**2, yt * (mu @ x)
        if v > 0 and phi * math.sqrt(v) - m > 0:
            alpha = max(0.0, (-m * psi + math.sqrt(m * m * phi**4 / 4 + v * phi * phi * zeta)) / (v * zeta))
            u = 0.25 * (-alpha * v * phi + math.sqrt(alpha**2 * v**2 * phi**2 + 4 * v)) ** 2
            beta = alpha * phi / (math.sqrt(u) + v * alpha * phi)
            mu = mu + alpha * yt * sigma * x
            sigma = sigma - beta * sigma**2 * x**2
    return scores


@pytest.mark.parametrize("cls", [omtl.CWCOL, ref.CWCOL], ids=["native", "reference"])
def test_inv_c1_omega_zero_is_per_task_cw_and_omega_one_is_global_cw(cls):
    k = 4
    X, y, tasks = random_stream(n=400, d=6, k=k, seed=21)
    s0 = cls(n_tasks=k, omega=0.0, confidence=0.9, a=0.7)
    pred0 = s0.learn(X, y, tasks=tasks)
    expect = np.zeros(len(y))
    for i in range(k):
        rows = tasks == i
        expect[rows] = plain_cw(X[rows], y[rows], 0.9, 0.7)
    np.testing.assert_array_equal(pred0, np.where(expect >= 0, 1, -1))
    s1 = cls(n_tasks=k, omega=1.0, confidence=0.9, a=0.7)
    pred1 = s1.learn(X, y, tasks=tasks)
    glob = plain_cw(X, y, 0.9, 0.7)
    np.testing.assert_array_equal(pred1, np.where(glob >= 0, 1, -1))
    assert np.any(pred0 != pred1)  # the two settings are distinguishable on this stream


@pytest.mark.parametrize("omega", [0.0, 1.0])
def test_inv_c1_scores_match_within_tolerance(omega):
    k = 3
    X, y, tasks = random_stream(n=150, d=5, k=k, seed=4)
    got = scores_row_by_row(omtl.CWCOL(n_tasks=k, omega=omega), X, y, tasks)
    if omega == 0.0:
        expect = np.zeros(len(y))
        for i in range(k):
            expect[tasks == i] = plain_cw(X[tasks == i], y[tasks == i], 0.85, 1.0)
    else:
        expect = plain_cw(X, y, 0.85, 1.0)
    np.testing.assert_allclose(got, expect, rtol=1e-9, atol=1e-12)


def test_inv_c2_full_covariance_constraint_holds_with_equality():
    """The closed-form (alpha, beta) used by CW-COL, applied with a full covariance on small d:
    after an update with alpha > 0, y mu.x = phi sqrt(x' Sigma x)."""
    rng = np.random.default_rng(0)
    d = 4
    for confidence in (0.6, 0.85, 0.95):
        phi, psi, zeta = float(ndtri(confidence)), 1 + ndtri(confidence) ** 2 / 2, 1 + ndtri(confidence) ** 2
        mu, Sigma = np.zeros(d), np.eye(d)
        n_updates = 0
        for _ in range(200):
            x, y = rng.standard_normal(d), rng.choice([-1.0, 1.0])
            step = cw_step(phi, psi, zeta, float(x @ Sigma @ x), y * float(mu @ x))
            if step is None:
                continue
            alpha, beta = step
            Sx = Sigma @ x
            mu = mu + alpha * y * Sx
            Sigma = Sigma - beta * np.outer(Sx, Sx)
            n_updates += 1
            assert np.linalg.eigvalsh(Sigma).min() > 0
            np.testing.assert_allclose(y * (mu @ x), phi * math.sqrt(x @ Sigma @ x), rtol=1e-9)
        assert n_updates > 20


@pytest.mark.parametrize("cls", [omtl.CWCOL, ref.CWCOL], ids=["native", "reference"])
def test_inv_c2_variances_stay_positive_and_one_hot_constraint_is_tight(cls):
    k, d = 3, 7
    X, y, tasks = random_stream(n=600, d=d, k=k, seed=8, sparse=True, density=0.5)
    model = cls(n_tasks=k, confidence=0.95)
    model.partial_fit(X, y, tasks=tasks)
    assert model.task_variance_.min() > 0 and model.global_variance_.min() > 0
    assert model.task_variance_.max() <= 1.0
    # One-hot rows: the diagonal update is exact, so the constraint holds with equality.
    phi = float(ndtri(0.95))
    m = cls(n_tasks=k, omega=0.0, confidence=0.95)
    rng = np.random.default_rng(1)
    tight = 0
    for _ in range(200):
        j, i, yt, v = rng.integers(d), rng.integers(k), rng.choice([-1, 1]), rng.uniform(0.5, 2)
        x = sp.csr_matrix(([v], ([0], [j])), shape=(1, d))
        before = m.n_updates_
        m.partial_fit(x, [yt], tasks=[i])
        margin = yt * m.decision_function(x, tasks=[i])[0]
        bound = phi * math.sqrt(m.task_variance_[i, j] * v * v)
        assert margin >= bound * (1 - 1e-9)
        if m.n_updates_ > before:
            tight += 1
            assert margin == pytest.approx(bound, rel=1e-9)
    assert tight > 10


def test_cwcol_combines_the_two_models():
    k = 4
    X, y, tasks = random_stream(n=300, d=6, k=k, seed=2)
    half = omtl.CWCOL(n_tasks=k, omega=0.5)
    half.partial_fit(X, y, tasks=tasks)
    # The prior of coordinate j for task i is the precision-weighted combination.
    pi_i, pi_g = 0.5 / half.task_variance_, 0.5 / half.global_variance_
    mu_p = (pi_i * half.task_mean_ + pi_g * half.global_mean_) / (pi_i + pi_g)
    np.testing.assert_allclose(half.decision_function(X, tasks=tasks), np.einsum("ij,ij->i", X, mu_p[tasks]), rtol=1e-10, atol=1e-12)
    assert half.n_global_updates_ > 0


# ---------------------------------------------------------------------------------------------
# OMTL


def pa1_per_task(X, y, tasks, k, C):
    W = np.zeros((k, X.shape[1]))
    scores = np.zeros(len(y))
    for t in range(len(y)):
        x, i = X[t], tasks[t]
        scores[t] = W[i] @ x
        loss = max(0.0, 1 - y[t] * scores[t])
        if loss > 0 and x @ x > 0:
            W[i] += min(C, loss / (x @ x)) * y[t] * x
    return scores


@pytest.mark.parametrize("cls", [omtl.OMTL, ref.OMTL], ids=["native", "reference"])
@pytest.mark.parametrize("norm", ["linf", "l1", "l2"])
def test_inv_o2_singleton_rounds_are_pa1_per_task(cls, norm):
    k = 4
    X, y, tasks = random_stream(n=300, d=6, k=k, seed=13)
    X = X * 3.0  # large instances, so that the C cap binds sometimes
    expect = pa1_per_task(X, y, tasks, k, 0.4)
    got = scores_row_by_row(cls(n_tasks=k, C=0.4, global_norm=norm), X, y, tasks)
    np.testing.assert_allclose(got, expect, rtol=1e-9, atol=1e-12)


def qp_active_set(H, g, A, b):
    """A generic exact QP solver for small problems: min 1/2 x'Hx + g'x s.t. Ax <= b (H positive
    definite), by enumerating active sets and keeping the one whose KKT point is primal and dual
    feasible."""
    from itertools import combinations

    m, n = A.shape
    for size in range(0, min(m, n) + 1):
        for active in combinations(range(m), size):
            S = list(active)
            K = np.block([[H, A[S].T], [A[S], np.zeros((size, size))]])
            try:
                sol = np.linalg.solve(K, np.concatenate([-g, b[S]]))
            except np.linalg.LinAlgError:
                continue
            x, lam = sol[:n], sol[n:]
            if np.all(lam >= -1e-12) and np.all(A @ x <= b + 1e-12):
                return x
    raise AssertionError("no KKT point found")


def qp_tau(losses, sq_norms, C, norm):
    """The OMTL round problem (max sum tau l - 1/2 sum tau^2 n, tau >= 0, |tau|_* <= C) by a
    generic solver: exact active-set QP for l1/linf, SLSQP for the (quadratically constrained) l2."""
    m = len(losses)
    H, g = np.diag(sq_norms), -np.asarray(losses)
    if norm == "linf":
        A, b = np.vstack([-np.eye(m), np.ones((1, m))]), np.concatenate([np.zeros(m), [C]])
        return qp_active_set(H, g, A, b)
    if norm == "l1":
        A, b = np.vstack([-np.eye(m), np.eye(m)]), np.concatenate([np.zeros(m), np.full(m, C)])
        return qp_active_set(H, g, A, b)
    res = scipy.optimize.minimize(
        lambda t: 0.5 * (t**2) @ sq_norms - t @ losses,
        np.zeros(m),
        jac=lambda t: t * sq_norms - losses,
        bounds=[(0.0, None)] * m,
        constraints=[{"type": "ineq", "fun": lambda t: C**2 - t @ t, "jac": lambda t: -2 * t}],
        method="SLSQP",
        options={"ftol": 1e-16, "maxiter": 1000},
    )
    return res.x


@pytest.mark.parametrize("norm", ["linf", "l1", "l2"])
def test_inv_o3_round_solution_matches_a_generic_qp_and_kkt(norm):
    rng = np.random.default_rng(7)
    n_binding = 0
    for trial in range(60):
        m = int(rng.integers(1, 7))
        losses = np.where(rng.random(m) < 0.2, 0.0, rng.uniform(0.05, 2.5, m))
        sq_norms = rng.uniform(0.2, 3.0, m)
        C = float(rng.uniform(0.1, 2.0))
        native = np.array(_native._testing.omtl_tau(list(losses), list(sq_norms), C, norm))
        reference = omtl_tau(losses, sq_norms, C, norm)
        np.testing.assert_allclose(native, reference, rtol=1e-12, atol=1e-14)
        qp = qp_tau(losses, sq_norms, C, norm)
        # Exact for l1/linf (INV-O3: 1e-8); SLSQP's own accuracy for l2.
        np.testing.assert_allclose(native, qp, atol=1e-8 if norm != "l2" else 1e-6, err_msg=f"trial {trial}")
        if norm == "l2" and np.linalg.norm(losses / sq_norms) > C:
            assert np.linalg.norm(native) == pytest.approx(C, rel=1e-11)
        assert np.all(native >= 0) and np.all(native[losses == 0] == 0)
        if norm == "linf":
            # KKT: sum tau <= C and tau_i = max(0, (l_i - theta)/n_i), theta >= 0, theta (sum tau - C) = 0.
            assert native.sum() <= C * (1 + 1e-12)
            free = losses / sq_norms
            if free.sum() <= C:
                theta = 0.0
            else:
                n_binding += 1
                i = int(np.argmax(native))
                theta = losses[i] - native[i] * sq_norms[i]
                assert native.sum() == pytest.approx(C, rel=1e-12)
            assert theta >= 0
            np.testing.assert_allclose(native, np.maximum(0.0, (losses - theta) / sq_norms), atol=1e-12)
    if norm == "linf":
        assert n_binding > 10


def test_omtl_explicit_linf_moves_only_the_largest_loss():
    tau = _native._testing.omtl_tau([0.5, 2.0, 2.0, 0.0], [1.0, 1.0, 3.0, 1.0], 0.7, "linf", True)
    assert tau == [0.0, 0.7, 0.0, 0.0]
    np.testing.assert_allclose(omtl_tau([0.5, 2.0, 2.0, 0.0], [1.0, 1.0, 3.0, 1.0], 0.7, "linf", True), tau)
    tau2 = np.array(_native._testing.omtl_tau([3.0, 4.0], [1.0, 1.0], 1.0, "l2", True))
    np.testing.assert_allclose(tau2, [0.6, 0.8])


# ---------------------------------------------------------------------------------------------
# OMTRL


def test_omtrl_before_the_warm_up_is_the_complete_graph_perceptron():
    k = 4
    X, y, tasks = random_stream(n=300, d=6, k=k, seed=6)
    a = omtl.OMTRL(n_tasks=k, epoch=10_000)
    pa = a.learn(X, y, tasks=tasks)
    pb = omtl.MTPerceptron(n_tasks=k, graph="complete").learn(X, y, tasks=tasks)
    np.testing.assert_array_equal(pa, pb)
    np.testing.assert_allclose(a.task_kernel_, (np.eye(k) + 1) / (k + 1))


@pytest.mark.parametrize("update", ["batch", "logdet", "vonneumann"])
def test_omtrl_learns_a_unit_trace_spd_coupling(update):
    k = 4
    X, y, tasks = random_stream(n=400, d=6, k=k, seed=9)
    model = omtl.OMTRL(n_tasks=k, relation_update=update, epoch=100, eta=0.01)
    model.partial_fit(X, y, tasks=tasks)
    T = model.task_kernel_
    np.testing.assert_allclose(T, T.T, atol=1e-15)
    assert np.linalg.eigvalsh(T).min() > 0
    assert np.trace(T) == pytest.approx(1.0, rel=1e-12)
    assert model._diagnostics()["n_refreshes"] == 301 and model.n_refresh_skipped_ == 0
    assert not np.allclose(T, (np.eye(k) + 1) / (k + 1) / np.trace((np.eye(k) + 1) / (k + 1)))
    if update == "batch":
        W = model.coef_  # rows are tasks
        values, vectors = np.linalg.eigh(W @ W.T)
        S = (vectors * np.sqrt(np.maximum(values, 0))) @ vectors.T + 1e-8 * np.eye(k)
        np.testing.assert_allclose(T, S / np.trace(S), atol=1e-10)


def test_omtrl_with_more_tasks_than_features_matches_its_reference():
    """k > d: the native batch coupling comes from the d x d side (W W'), refreshed only when W
    changed; the reference takes the k x k eigendecomposition at every example, its eigenvalues
    within rounding of 0 taken as 0 (so no sqrt(eps) noise in its k - d null directions). The two
    routes round differently, so the scores agree to ~1e-9, not bit for bit; the decisions,
    tie-aware, must be the same."""
    k, d = 12, 3
    X, y, tasks = random_stream(n=600, d=d, k=k, seed=21)
    native, reference = omtl.OMTRL(n_tasks=k, epoch=60), ref.OMTRL(n_tasks=k, epoch=60)
    parity = compare_runs(native, reference, X, y, tasks, slices=chunks_of(600, 50), rtol=1e-7, atol=1e-8)
    assert parity.compared >= 500
    W = native.coef_
    values, vectors = np.linalg.eigh(W @ W.T)
    S = (vectors * np.sqrt(np.maximum(values, 0))) @ vectors.T + 1e-8 * np.eye(k)
    np.testing.assert_allclose(native.task_kernel_, S / np.trace(S), atol=1e-7)
    assert native._diagnostics()["n_refreshes"] == 600 - 60 + 1


# ---------------------------------------------------------------------------------------------
# MTFL / TRML


def small_problem(n=160, d=6, k=3, seed=0, flip=0.15):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    tasks = np.arange(n) % k
    W = rng.standard_normal((k, d))
    y = np.where(np.einsum("ij,ij->i", X, W[tasks]) >= 0, 1.0, -1.0)
    y[rng.random(n) < flip] *= -1  # noisy labels: the optimum is finite
    return X, tasks.astype(np.int64), y


def native_solve(X, tasks, y, k, reg, rho, tol=1e-4, max_iter=1000):
    W0, c0 = np.zeros(k * X.shape[1]), np.zeros(k)
    w, c, obj, it, lip = _native._testing.batch_mtl_solve(np.ascontiguousarray(X), tasks, y, k, reg, rho, W0, c0, tol, max_iter)
    native_solve.lipschitz = lip
    return np.asarray(w).reshape(k, X.shape[1]), np.asarray(c), obj, it


def long_run_prox_grad(X, tasks, y, k, reg, rho, iters=20000):
    """Plain proximal gradient with the constant step 1/L, L a bound on the Lipschitz constant
    (per task: the largest eigenvalue of [X_i 1]'[X_i 1] / (4 n_i))."""
    blocks = [(np.c_[X[tasks == i], np.ones(np.sum(tasks == i))], y[tasks == i]) for i in range(k)]
    L = max(np.linalg.eigvalsh(Z.T @ Z).max() / (4 * len(Z)) for Z, _ in blocks)
    V = np.zeros((k, X.shape[1] + 1))  # [w_i, c_i] per row
    for _ in range(iters):
        G = np.array([Z.T @ (-yi / (1 + np.exp(yi * (Z @ V[i])))) / len(Z) for i, (Z, yi) in enumerate(blocks)])
        V = V - G / L
        V[:, :-1] = prox(reg, V[:, :-1], rho / L)
    W, c = V[:, :-1], V[:, -1]
    return W, c, logistic_loss(X, tasks, y, k, W, c) + rho * penalty(reg, W), L


@pytest.fixture(scope="module")
def m1_problems():
    out = {}
    for reg in ("l21", "trace"):
        X, tasks, y = small_problem(seed=1 if reg == "l21" else 2)
        out[reg] = (X, tasks, y, *long_run_prox_grad(X, tasks, y, 3, reg, 0.05))
    return out


@pytest.mark.parametrize("reg", ["l21", "trace"])
def test_inv_m1_default_rule_is_within_1e2_and_tight_rule_within_1e6(reg, m1_problems):
    X, tasks, y, W_ref, c_ref, obj_ref, L = m1_problems[reg]
    k = 3
    _, _, obj, it = native_solve(X, tasks, y, k, reg, 0.05)
    assert abs(obj - obj_ref) <= 1e-2 * obj_ref and it >= 2
    _, _, obj_py, _ = fista(X, tasks, y, k, reg, 0.05, np.zeros((k, X.shape[1])), np.zeros(k))
    assert obj_py == pytest.approx(obj, rel=1e-9)
    W, c, obj, it = native_solve(X, tasks, y, k, reg, 0.05, tol=1e-12, max_iter=100_000)
    assert abs(obj - obj_ref) <= 1e-6 * obj_ref
    # The fixed-point residual of the solver's own prox-gradient map (step 1/L, its final L).
    L = native_solve.lipschitz
    gW, gc = logistic_grad(X, tasks, y, k, W, c)
    residual = math.sqrt(((W - prox(reg, W - gW / L, 0.05 / L)) ** 2).sum() + ((gc / L) ** 2).sum())
    assert residual <= 1e-5
    # The objective the solver reports is the objective of the point it returns.
    assert obj == pytest.approx(logistic_loss(X, tasks, y, k, W, c) + 0.05 * penalty(reg, W), rel=1e-12)


@pytest.mark.parametrize("reg", ["l21", "trace"])
def test_inv_m2_without_regularisation_tasks_decouple(reg):
    k = 3
    X, tasks, y = small_problem(n=240, seed=5, flip=0.25)
    W, c, _, _ = native_solve(X, tasks, y, k, reg, 0.0, tol=1e-13, max_iter=100_000)
    for i in range(k):
        keep = tasks == i
        Wi, ci, _, _ = native_solve(X[keep], tasks[keep], y[keep], k, reg, 0.0, tol=1e-13, max_iter=100_000)
        # Equal up to the solver's accuracy (a relative objective change of 1e-13 leaves the
        # weights accurate to a few 1e-6).
        np.testing.assert_allclose(Wi[i], W[i], rtol=1e-4, atol=2e-5)
        assert ci[i] == pytest.approx(c[i], rel=1e-4, abs=2e-5)
        others = [j for j in range(k) if j != i]
        assert np.all(Wi[others] == 0) and np.all(ci[others] == 0)
    # With rho > 0 the coupling is real: the same comparison fails.
    W, _, _, _ = native_solve(X, tasks, y, k, reg, 0.05, tol=1e-13, max_iter=100_000)
    Wi, _, _, _ = native_solve(X[tasks == 0], tasks[tasks == 0], y[tasks == 0], k, reg, 0.05, tol=1e-13, max_iter=100_000)
    assert np.any(W[0] != 0)
    assert not np.allclose(Wi[0], W[0], rtol=1e-3)


@pytest.mark.parametrize("cls", [omtl.MTFL, omtl.TRML, ref.MTFL, ref.TRML])
def test_batch_learners_retrain_on_schedule_with_all_data(cls):
    k = 3
    X, tasks, y = small_problem(n=250, seed=3)
    model = cls(n_tasks=k, retrain_every=50, rho=0.02)
    pred = model.learn(X[:49], y[:49], tasks=tasks[:49])
    assert np.all(pred == 1) and model.n_retrains_ == 0  # the zero model predicts +1
    model.partial_fit(X[49:], y[49:], tasks=tasks[49:])
    assert model.n_retrains_ == 5 and model.n_active_ == 250
    # The model is the (warm-started) solution on ALL data: solving from scratch agrees closely.
    reg = "l21" if isinstance(model, omtl.MTFL) else "trace"
    W, c, obj, _ = native_solve(X, tasks, y, k, reg, 0.02, tol=1e-12, max_iter=100_000)
    assert model.last_objective_ == pytest.approx(obj, rel=1e-2)
    assert model.last_objective_ >= obj * (1 - 1e-9)
    # Between retrains the model does not move.
    before = model.decision_function(X, tasks=tasks)
    model.partial_fit(X[:10], y[:10], tasks=tasks[:10])
    np.testing.assert_array_equal(model.decision_function(X, tasks=tasks), before)


def test_batch_learner_structure_and_memory():
    k, d = 3, 8
    X, tasks, y = small_problem(n=300, d=d, seed=4)
    strong = omtl.MTFL(n_tasks=k, rho=10.0, retrain_every=100)
    strong.partial_fit(X, y, tasks=tasks)
    assert strong.n_selected_features_ == 0 and np.all(strong.coef_ == 0)
    weak = omtl.MTFL(n_tasks=k, rho=1e-3, retrain_every=100)
    weak.partial_fit(X, y, tasks=tasks)
    assert weak.n_selected_features_ == d
    low = omtl.TRML(n_tasks=k, rho=0.3, retrain_every=100)
    low.partial_fit(X, y, tasks=tasks)
    full = omtl.TRML(n_tasks=k, rho=1e-4, retrain_every=100)
    full.partial_fit(X, y, tasks=tasks)
    assert low.rank_ < full.rank_ == k
    assert np.linalg.matrix_rank(low.coef_, tol=1e-10 * np.abs(low.coef_).max()) == low.rank_
    assert weak.stored_bytes_ == 300 * (4 * d + 12)  # single-precision rows
    sparse = omtl.MTFL(n_tasks=k, retrain_every=100)
    Xs = sp.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0))
    sparse.partial_fit(Xs, y, tasks=tasks)
    assert sparse.stored_bytes_ == 8 * Xs.nnz + 8 * 301 + 12 * 300
    # Tasks without examples keep zero weights and bias.
    one = omtl.TRML(n_tasks=k, retrain_every=50)
    one.partial_fit(X[tasks == 1], y[tasks == 1], tasks=1)
    assert np.all(one.coef_[[0, 2]] == 0) and np.all(one.intercept_[[0, 2]] == 0) and np.any(one.coef_[1] != 0)


def test_docstring_examples_run():
    import doctest

    import omtl.learners.baselines as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 20 and result.failed == 0
