"""Budget Projectrons MTBPRJ and MTBPRJ-2 (ALGORITHMS.md §4.3–§4.5, invariants of §9).

The inverse-Gram engine itself (INV-Q1: 10^4 random inserts/removals against a from-scratch
inverse, near-singular sets, leave-one-out identities) and INV-P3/INV-P4 on the native
coefficients are unit-tested in Rust (src/linalg/inverse_gram.rs, src/learner/projectron.rs);
here the same identities are checked on the reference twins, and the native learners are tied
to the twins by parity.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_graph, random_stream
from parity import scores_row_by_row

import omtl
import omtl.reference as ref
from omtl.reference.kernels import kernel_matrix

# This module's learners in the conformance and parity suites (see learner_table.py).
CONFORMANCE = [
    # Budget Projectrons (§4.4, §4.5): budgets small enough that the parity streams exercise
    # insertions, projections and evictions. They meet the 1e-9 parity tolerance.
    ("mtbprj-rbf-C", omtl.MTBPRJ, ref.MTBPRJ, {"budget": 10, "gamma": 0.3, "eta": 0.4}),
    ("mtbprj-poly-D-squared", omtl.MTBPRJ, ref.MTBPRJ,
     {"budget": 15, "graph": "disconnected", "kernel": "poly", "normalize": True, "threshold_on": "squared", "eta": 0.3}),
    ("mtbprj2-rbf-C", omtl.MTBPRJ2, ref.MTBPRJ2, {"budget": 10, "gamma": 0.3, "eta": 0.4}),
    ("mtbprj2-linear-D", omtl.MTBPRJ2, ref.MTBPRJ2, {"budget": 12, "graph": "disconnected", "kernel": "linear", "eta": 0.1}),
    ("mtbprj2-literal14", omtl.MTBPRJ2, ref.MTBPRJ2, {"budget": 10, "gamma": 0.3, "eta": 0.4, "alg2_literal_line14": True}),
]

NATIVE = {"MTBPRJ": omtl.MTBPRJ, "MTBPRJ2": omtl.MTBPRJ2}
REFERENCE = {"MTBPRJ": ref.MTBPRJ, "MTBPRJ2": ref.MTBPRJ2}


def unit_cube_stream(n, d, k, *, seed, sparse=False):
    """Instances on [0, 1]^d (the conditioning INV-B1 asks for), labels from related tasks."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, size=(n, d))
    tasks = rng.integers(0, k, size=n)
    W = rng.standard_normal(d) + 0.5 * rng.standard_normal((k, d))
    y = np.where(np.einsum("ij,ij->i", X - 0.5, W[tasks]) >= 0, 1, -1)
    if sparse:
        X[rng.random((n, d)) > 0.6] = 0.0
        X = sp.csr_matrix(X)
    return X, y, tasks


def run_pair(native, reference, X, y, tasks, chunk=37):
    """Feeds both the same chunks (predictions must agree); returns both models' scores of each
    chunk right after learning it."""
    s_nat, s_ref = [], []
    for a in range(0, len(y), chunk):
        sl = slice(a, a + chunk)
        p_nat = native.learn(X[sl], y[sl], tasks=tasks[sl])
        p_ref = reference.learn(X[sl], y[sl], tasks=tasks[sl])
        np.testing.assert_array_equal(p_nat, p_ref, err_msg=f"predictions diverge in rows {a}..{a + chunk}")
        s_nat.append(native.decision_function(X[sl], tasks=tasks[sl]))
        s_ref.append(reference.decision_function(X[sl], tasks=tasks[sl]))
    return np.concatenate(s_nat), np.concatenate(s_ref)


PARITY_CASES = [
    ("MTBPRJ", {"budget": 12, "gamma": 1.0, "eta": 0.5}, "complete"),
    ("MTBPRJ", {"budget": 12, "gamma": 1.0, "eta": 0.5}, "random"),
    ("MTBPRJ", {"budget": 9, "kernel": "poly", "degree": 3, "normalize": True, "eta": 0.5, "threshold_on": "squared"}, "disconnected"),
    ("MTBPRJ2", {"budget": 12, "gamma": 1.0, "eta": 0.5}, "complete"),
    ("MTBPRJ2", {"budget": 12, "gamma": 1.0, "eta": 0.5}, "random"),
    ("MTBPRJ2", {"budget": 9, "gamma": 1.0, "eta": 0.5}, "disconnected"),
    ("MTBPRJ2", {"budget": 9, "gamma": 1.0, "eta": 0.5, "alg2_literal_line14": True}, "random"),
]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("case", PARITY_CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(PARITY_CASES)])
def test_native_matches_reference(case, sparse):
    name, params, graph_name = case
    k = 4
    graph = random_graph(k, seed=2) if graph_name == "random" else graph_name
    X, y, tasks = unit_cube_stream(260, 5, k, seed=17, sparse=sparse)
    native = NATIVE[name](n_tasks=k, graph=graph, **params)
    reference = REFERENCE[name](n_tasks=k, graph=graph, **params)
    f_nat = scores_row_by_row(native, X, y, tasks)
    f_ref = scores_row_by_row(reference, X, y, tasks)
    # The stream is chosen so that no score is ambiguous: exact zeros (empty model, untouched
    # component) are computed exactly by both; every other score is far from 0.
    nonzero = f_ref != 0.0
    assert np.all(np.abs(f_ref[nonzero]) > 1e-9), "pick another seed: a score lies within 1e-9 of zero"
    np.testing.assert_array_equal(f_nat == 0.0, ~nonzero)
    np.testing.assert_array_equal(np.where(f_nat >= 0, 1, -1), np.where(f_ref >= 0, 1, -1))
    np.testing.assert_allclose(f_nat, f_ref, rtol=1e-6, atol=0)
    for attr in ("n_active_", "n_updates_", "n_mistakes_", "n_projections_", "n_evictions_"):
        assert getattr(native, attr) == getattr(reference, attr), attr
    # The stream exercises all three kinds of update.
    assert native.n_evictions_ > 0 and native.n_projections_ > 0
    assert native.n_active_ == params["budget"]
    # Chunked batches give the same as one row at a time.
    a = NATIVE[name](n_tasks=k, graph=graph, **params)
    b = REFERENCE[name](n_tasks=k, graph=graph, **params)
    s_nat, s_ref = run_pair(a, b, X, y, tasks)
    np.testing.assert_allclose(s_nat, s_ref, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("name", ["MTBPRJ", "MTBPRJ2"])
def test_budget_is_never_exceeded(name):
    X, y, tasks = random_stream(n=400, d=5, k=3, seed=8)
    for budget in (1, 2, 7):
        model = NATIVE[name](n_tasks=3, budget=budget, gamma=1.0, eta=0.05)
        for t in range(len(y)):
            model.partial_fit(X[t : t + 1], y[t : t + 1], tasks=tasks[t : t + 1])
            assert model.n_active_ <= budget
        assert model.n_evictions_ > 0


# ---- INV-P3 / INV-P4 on the reference (the native side: Rust unit tests + parity) ----------


def test_removal_damage_equals_score_reference():
    """INV-P3 and INV-P4: the norm of what a budget step changes is the removal score."""
    X, y, tasks = unit_cube_stream(250, 3, 3, seed=4)
    T = omtl.TaskGraph.complete(3).task_kernel
    for name in ("MTBPRJ", "MTBPRJ2"):
        model = REFERENCE[name](n_tasks=3, budget=8, gamma=3.0, eta=0.05)
        model.partial_fit(X[:1], y[:1], tasks=tasks[:1])
        core = model._core
        checked = 0
        for t in range(1, len(y)):
            x, i, yt = X[t], int(tasks[t]), float(y[t])
            if yt * model.decision_function(X[t : t + 1], tasks=[i])[0] > 0:
                model.partial_fit(X[t : t + 1], y[t : t + 1], tasks=[i])
                continue
            before = pickle.loads(pickle.dumps(core))
            model.partial_fit(X[t : t + 1], y[t : t + 1], tasks=[i])
            if core.counts["n_evictions"] == before.counts["n_evictions"]:
                continue
            if name == "MTBPRJ":
                S = before.support
                Xs, ts = np.vstack([S.X, x]), np.append(S.tasks, i)
                pre = np.append(S.beta, yt)
                H = T[np.ix_(ts, ts)] * kernel_matrix(model.kernel_, Xs, Xs)
                kept = [np.flatnonzero((Xs == row).all(axis=1))[0] for row in core.support.X]
                post = np.zeros(len(pre))
                post[kept] = core.support.beta
                Q = np.linalg.inv(H)
                scores = np.abs(pre[:-1]) / np.sqrt(np.diag(Q)[:-1])
                r = int(np.setdiff1d(np.arange(len(pre)), kept)[0])
                diff = pre - post
                damage = np.sqrt(diff @ H @ diff)
            else:
                Xs = np.vstack([before.D, x])
                pre = np.hstack([before.W, (yt * T[:, i])[:, None]])
                kept = [np.flatnonzero((Xs == row).all(axis=1))[0] for row in core.D]
                post = np.zeros_like(pre)
                post[:, kept] = core.W
                H = kernel_matrix(model.kernel_, Xs, Xs)
                Q = np.linalg.inv(H)
                scores = np.linalg.norm(pre[:, :-1], axis=0) / np.sqrt(np.diag(Q)[:-1])
                r = int(np.setdiff1d(np.arange(pre.shape[1]), kept)[0])
                diff = pre - post
                damage = np.sqrt(np.einsum("lj,jm,lm->", diff, H, diff))
            assert r < len(scores), "the new element must not be removed (A-C4)"
            assert scores[r] == pytest.approx(scores.min(), rel=1e-12)
            assert damage == pytest.approx(scores[r], rel=1e-6)
            checked += 1
        assert checked >= 10, (name, checked)


# ---- INV-P5 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [omtl.MTBPRJ, omtl.MTBPRJ2, ref.MTBPRJ, ref.MTBPRJ2], ids=["nat1", "nat2", "ref1", "ref2"])
def test_duplicate_is_absorbed_by_projection(cls):
    k = 3
    X, _, _ = unit_cube_stream(6, 3, k, seed=1)
    model = cls(n_tasks=k, budget=50, gamma=2.0, eta=0.0)
    tasks = np.array([0, 1, 2, 0, 1, 2])
    model.partial_fit(X, np.array([1, -1, 1, -1, 1, -1]), tasks=tasks)
    n_active = model.n_active_
    probes, _, _ = unit_cube_stream(40, 3, k, seed=2)
    probe_tasks = np.arange(40) % k
    before = model.decision_function(probes, tasks=probe_tasks)
    # A mistake on an exact duplicate of an active instance (same task).
    j = int(np.flatnonzero(tasks == 1)[0])
    f = model.decision_function(X[j : j + 1], tasks=[1])[0]
    y = -1 if f >= 0 else 1
    n_proj = model.n_projections_
    model.partial_fit(X[j : j + 1], [y], tasks=[1])
    assert model.n_active_ == n_active and model.n_projections_ == n_proj + 1
    # Equals inserting it: f_l(x) += y T[l, 1] K'(x_j, x).
    T = omtl.TaskGraph.complete(k).task_kernel
    kv = kernel_matrix(model.kernel_, probes, X[j : j + 1])[:, 0]
    np.testing.assert_allclose(model.decision_function(probes, tasks=probe_tasks), before + y * T[probe_tasks, 1] * kv, rtol=1e-8, atol=1e-10)


# ---- INV-Q2 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["MTBPRJ", "MTBPRJ2"])
def test_forced_rebuild_changes_nothing(name):
    X, y, tasks = unit_cube_stream(600, 4, 3, seed=12)
    a = NATIVE[name](n_tasks=3, budget=25, gamma=3.0, eta=0.1)
    a.partial_fit(X[:300], y[:300], tasks=tasks[:300])
    b = pickle.loads(pickle.dumps(a))
    rebuilds = b.n_rebuilds_
    b._force_rebuild()
    assert b.n_rebuilds_ == rebuilds + 1 and b.jitter_ == 0.0
    pa = a.learn(X[300:], y[300:], tasks=tasks[300:])
    pb = b.learn(X[300:], y[300:], tasks=tasks[300:])
    np.testing.assert_array_equal(pa, pb)
    np.testing.assert_allclose(a.decision_function(X, tasks=tasks), b.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-12)


def test_periodic_drift_probe_runs_and_needs_no_recompute():
    """N5 probes the drift of Q every 1000 structural operations; on well-conditioned data the
    probes pass, so nothing is recomputed and no jitter is added."""
    X, _, tasks = unit_cube_stream(3000, 4, 2, seed=3)
    y = np.random.default_rng(3).choice([-1, 1], size=3000)  # noise: about one mistake in two
    model = omtl.MTBPRJ(n_tasks=2, budget=15, gamma=4.0, eta=0.05)
    model.partial_fit(X, y, tasks=tasks)
    ops = (model.n_updates_ - model.n_projections_) + model.n_evictions_
    assert ops >= 1000
    assert model._diagnostics()["n_drift_probes"] >= ops // 1000
    assert model.n_rebuilds_ == 0
    assert model.jitter_ == 0.0


# ---- INV-B1, INV-B5, INV-B4 --------------------------------------------------------------------


def assert_equal_up_to_conditioning(f, g):
    """Scores within 1e-6, predictions equal except where |f| < 1e-6 (INV-B1)."""
    np.testing.assert_allclose(f, g, rtol=1e-6, atol=1e-6)
    clear = np.abs(g) >= 1e-6
    np.testing.assert_array_equal(np.sign(f[clear]), np.sign(g[clear]))


@pytest.mark.parametrize("graph", ["complete", "disconnected", "random"])
def test_unbounded_mtbprj_with_eta_zero_is_the_multitask_perceptron(graph):
    """INV-B1 on RBF data with gamma >= 5 on [0, 1]^d, n <= 300."""
    k = 4
    g = random_graph(k, seed=5) if graph == "random" else graph
    X, y, tasks = unit_cube_stream(300, 3, k, seed=21)
    prj = omtl.MTBPRJ(n_tasks=k, budget=300, eta=0.0, graph=g, kernel="rbf", gamma=6.0)
    mtp = omtl.MTPerceptron(n_tasks=k, graph=g, kernel="rbf", gamma=6.0)
    assert_equal_up_to_conditioning(scores_row_by_row(prj, X, y, tasks), scores_row_by_row(mtp, X, y, tasks))
    assert prj.n_evictions_ == 0


def test_unbounded_mtbprj2_disconnected_is_the_battery():
    """INV-B5: MTBPRJ-2 with G = D, B >= n, eta = 0 equals the Perceptron battery."""
    k = 3
    X, y, tasks = unit_cube_stream(300, 3, k, seed=22)
    prj = omtl.MTBPRJ2(n_tasks=k, budget=300, eta=0.0, graph="disconnected", kernel="rbf", gamma=6.0)
    bat = omtl.KernelPerceptron(n_tasks=k, kernel="rbf", gamma=6.0)
    assert_equal_up_to_conditioning(scores_row_by_row(prj, X, y, tasks), scores_row_by_row(bat, X, y, tasks))


@pytest.mark.parametrize("native", [True, False], ids=["native", "reference"])
def test_one_task_mtbprj_equals_mtbprj2(native):
    """INV-B4: with k = 1, MTBPRJ equals MTBPRJ-2 (and the literal line 14 changes nothing)."""
    X, y, _ = unit_cube_stream(400, 4, 1, seed=30)
    tasks = np.zeros(len(y), dtype=np.int64)
    classes = NATIVE if native else REFERENCE
    params = {"n_tasks": 1, "budget": 10, "gamma": 3.0, "eta": 0.1}
    f1 = scores_row_by_row(classes["MTBPRJ"](**params), X, y, tasks)
    for literal in (False, True):
        m2 = classes["MTBPRJ2"](alg2_literal_line14=literal, **params)
        f2 = scores_row_by_row(m2, X, y, tasks)
        np.testing.assert_allclose(f1, f2, rtol=1e-9, atol=1e-12)
        assert m2.n_evictions_ > 0


def test_literal_line14_is_an_ablation():
    X, y, tasks = unit_cube_stream(300, 4, 3, seed=31)
    params = {"n_tasks": 3, "budget": 8, "gamma": 3.0, "eta": 0.1}
    a = omtl.MTBPRJ2(**params).partial_fit(X, y, tasks=tasks)
    b = omtl.MTBPRJ2(alg2_literal_line14=True, **params).partial_fit(X, y, tasks=tasks)
    assert not np.allclose(a.decision_function(X, tasks=tasks), b.decision_function(X, tasks=tasks))


def test_mtbprj2_blocks_are_allocated_per_used_component():
    X, y, tasks = unit_cube_stream(300, 4, 6, seed=32)
    tasks = tasks % 2  # only tasks 0 and 1 ever appear
    d = omtl.MTBPRJ2(n_tasks=6, budget=20, graph="disconnected", gamma=3.0).partial_fit(X, y, tasks=tasks)
    assert d._diagnostics()["n_weights"] == 2 * d.n_active_
    c = omtl.MTBPRJ2(n_tasks=6, budget=20, graph="complete", gamma=3.0).partial_fit(X, y, tasks=tasks)
    assert c._diagnostics()["n_weights"] == 6 * c.n_active_


# ---- API: aliases, persistence, bad input ------------------------------------------------------


def test_aliases_are_the_same_classes():
    assert omtl.MTPRJ is omtl.MTBPRJ and omtl.MTPRJ2 is omtl.MTBPRJ2
    assert ref.MTPRJ is ref.MTBPRJ and ref.MTPRJ2 is ref.MTBPRJ2
    assert omtl.MTBPRJ(n_tasks=2, budget=3).get_params()["eta"] == 0.01


@pytest.mark.parametrize("cls", [omtl.MTBPRJ, omtl.MTBPRJ2, ref.MTBPRJ, ref.MTBPRJ2], ids=["nat1", "nat2", "ref1", "ref2"])
def test_pickling_mid_stream_continues_identically(cls):
    X, y, tasks = random_stream(n=300, d=5, k=3, seed=9, sparse=cls in (omtl.MTBPRJ2, ref.MTBPRJ))
    model = cls(n_tasks=3, budget=10, gamma=0.5, eta=0.2)
    model.partial_fit(X[:150], y[:150], tasks=tasks[:150])
    clone = pickle.loads(pickle.dumps(model))
    for m in (model, clone):
        m.partial_fit(X[150:], y[150:], tasks=tasks[150:])
    np.testing.assert_array_equal(model.decision_function(X, tasks=tasks), clone.decision_function(X, tasks=tasks))
    for attr in ("n_active_", "n_projections_", "n_evictions_", "n_rebuilds_", "jitter_", "n_mistakes_"):
        assert getattr(model, attr) == getattr(clone, attr)


@pytest.mark.parametrize("cls", [omtl.MTBPRJ, omtl.MTBPRJ2, ref.MTBPRJ, ref.MTBPRJ2], ids=["nat1", "nat2", "ref1", "ref2"])
def test_bad_input_leaves_the_model_unchanged(cls):
    X, y, tasks = random_stream(n=120, d=4, k=3, seed=10)
    model = cls(n_tasks=3, budget=6, gamma=0.5, eta=0.2)
    model.partial_fit(X[:60], y[:60], tasks=tasks[:60])
    twin = pickle.loads(pickle.dumps(model))
    bad_calls = [
        (X[60:70], y[60:70], np.full(10, 3)),  # unknown task
        (X[60:70], np.full(10, 2), tasks[60:70]),  # bad label
        (np.vstack([X[60:69], [np.nan] * 4]), y[60:70], tasks[60:70]),  # NaN late in the batch
        (X[60:70, :3], y[60:70], tasks[60:70]),  # wrong number of features
        (X[60:70], y[60:69], tasks[60:70]),  # length mismatch
    ]
    for Xb, yb, tb in bad_calls:
        with pytest.raises((ValueError, TypeError)):
            model.partial_fit(Xb, yb, tasks=tb)
    model.partial_fit(X[60:], y[60:], tasks=tasks[60:])
    twin.partial_fit(X[60:], y[60:], tasks=tasks[60:])
    np.testing.assert_array_equal(model.decision_function(X, tasks=tasks), twin.decision_function(X, tasks=tasks))
    assert model.n_seen_ == twin.n_seen_ == 120


@pytest.mark.parametrize("cls", [omtl.MTBPRJ, omtl.MTBPRJ2, ref.MTBPRJ, ref.MTBPRJ2], ids=["nat1", "nat2", "ref1", "ref2"])
@pytest.mark.parametrize(
    "params",
    [{"budget": 0}, {"budget": 2.5}, {"budget": True}, {"eta": -0.1}, {"eta": float("nan")}, {"threshold_on": "cube"}],
    ids=["budget0", "budget-float", "budget-bool", "eta-neg", "eta-nan", "threshold"],
)
def test_bad_parameters_raise_on_first_fit(cls, params):
    X, y, tasks = random_stream(n=10, d=3, k=2, seed=1)
    model = cls(n_tasks=2, **{"budget": 5, **params})
    with pytest.raises(ValueError):
        model.partial_fit(X, y, tasks=tasks)
    assert not model._is_fitted() and model.n_active_ == 0 and model.n_projections_ == 0


def test_attributes_before_fit():
    m = omtl.MTBPRJ2(n_tasks=2, budget=4)
    assert (m.n_projections_, m.n_evictions_, m.n_rebuilds_, m.jitter_, m.n_active_) == (0, 0, 0, 0.0, 0)


@pytest.mark.parametrize("cls", [omtl.MTBPRJ, omtl.MTBPRJ2, ref.MTBPRJ, ref.MTBPRJ2], ids=["nat1", "nat2", "ref1", "ref2"])
def test_overflowing_kernel_values_are_refused(cls):
    """A candidate whose kernel values overflow raises ValueError and changes nothing."""
    model = cls(n_tasks=2, budget=4, kernel="poly", degree=3, gamma=1e200)
    model.partial_fit(np.array([[1e-100, 0.0]]), [1], tasks=[0])
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="not finite|overflow"):
        model.partial_fit(np.array([[1e10, 1e10]]), [-1], tasks=[1])
    assert model.n_active_ == 1 and model.n_updates_ == 1 and model.n_seen_ == 1
    assert np.isfinite(model.decision_function(np.array([[1e-100, 0.0]]), tasks=[0])).all()
