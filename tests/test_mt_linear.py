"""MTLinear: the twin on hand-worked steps, then the invariants of docs/mt_linear.md on both builds.

Native-vs-reference agreement on random streams (every loss, rule, graph shape and hashing) runs in
test_parity.py and test_api.py through tests/learner_table.py.
"""

from __future__ import annotations

import math
import pickle
import struct

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_graph, random_stream
from parity import scores_row_by_row

import omtl
import omtl.reference as ref
from omtl._native import STATE_VERSION, NativeLearner
from omtl.reference.mt_linear import invariant_step, logistic_gain, logistic_proximal_gain, proximal_step

# This module's learners in the conformance and parity suites (see learner_table.py).
CONFORMANCE = [
    # MTLinear: every loss and update rule, the three factor shapes, hashing with collisions.
    ("mtlinear-default", omtl.MTLinear, ref.MTLinear, {}),
    ("mtlinear-hinge-D", omtl.MTLinear, ref.MTLinear, {"loss": "hinge", "graph": "disconnected"}),
    ("mtlinear-squared-adagrad", omtl.MTLinear, ref.MTLinear, {"loss": "squared", "update": "adagrad", "learning_rate": 0.2}),
    ("mtlinear-sgd-nobias", omtl.MTLinear, ref.MTLinear, {"update": "sgd", "fit_intercept": False, "learning_rate": 1.0}),
    ("mtlinear-hash2", omtl.MTLinear, ref.MTLinear, {"hash_bits": 2}),
    ("mtlinear-graph", omtl.MTLinear, ref.MTLinear,
     {"graph": omtl.TaskGraph.from_edges(4, [(0, 1), (1, 2)], [1.0, 0.5]), "loss": "hinge"}),
    # AROW (M.2b): its three proximal steps, hashing with collisions, a general graph.
    ("mtlinear-arow-hinge", omtl.MTLinear, ref.MTLinear, {"update": "arow", "loss": "hinge", "learning_rate": 2.0}),
    ("mtlinear-arow-logistic-hash2", omtl.MTLinear, ref.MTLinear, {"update": "arow", "hash_bits": 2}),
    ("mtlinear-arow-squared-graph", omtl.MTLinear, ref.MTLinear,
     {"update": "arow", "loss": "squared", "learning_rate": 0.3,
      "graph": omtl.TaskGraph.from_edges(4, [(0, 1), (2, 3)], [1.0, 2.0])}),
    # shared_rate (M.8) away from 1 under three rules, with hashing; and at 1 (the rule without it).
    ("mtlinear-shared-rate", omtl.MTLinear, ref.MTLinear, {"shared_rate": 2.5}),
    ("mtlinear-shared-rate-1", omtl.MTLinear, ref.MTLinear, {"shared_rate": 1.0}),
    ("mtlinear-adagrad-hinge-shared-rate-hash2", omtl.MTLinear, ref.MTLinear,
     {"update": "adagrad", "loss": "hinge", "shared_rate": 0.4, "hash_bits": 2}),
    ("mtlinear-arow-shared-rate", omtl.MTLinear, ref.MTLinear,
     {"update": "arow", "loss": "hinge", "learning_rate": 2.0, "shared_rate": 3.0}),
]

BOTH = [pytest.param(omtl.MTLinear, id="native"), pytest.param(ref.MTLinear, id="reference")]


def solve_bisection(f, lo, hi):
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if f(mid) > 0 else (mid, hi)
    return 0.5 * (lo + hi)


def test_logistic_gain_solves_the_flow():
    for m0 in (-30.0, -1.0, 0.0, 2.0, 20.0):
        for a in (1e-6, 0.3, 5.0, 300.0):
            delta = logistic_gain(m0, a)
            assert delta + math.exp(m0) * math.expm1(delta) == pytest.approx(a, rel=1e-12, abs=1e-15)


def test_logistic_proximal_gain_solves_its_equation():
    for m0 in (-30.0, -1.0, 0.0, 2.0, 20.0):
        for a in (1e-6, 0.3, 5.0, 300.0, 1e8):
            delta = logistic_proximal_gain(m0, a)
            assert delta * (1.0 + math.exp(m0 + delta)) == pytest.approx(a, rel=1e-12, abs=1e-15)


def test_arow_steps_by_hand():
    """Hinge: AROW's own step, the margin moves by v (1 - m)/(v + r); squared: towards y by the
    same factor; logistic: the margin gain delta solves delta/v = eta sigma(-(m + delta))."""
    v, eta = 0.8, 2.0
    r = 1.0 / eta
    assert 0.3 + v * proximal_step("hinge", 1.0, 0.3, eta, v) == pytest.approx(0.3 + v * 0.7 / (v + r))
    assert proximal_step("hinge", -1.0, -1.5, eta, v) == 0.0  # margin 1.5: no loss
    p = 0.4
    assert p + v * proximal_step("squared", -1.0, p, eta, v) == pytest.approx(p + (-1.0 - p) * v / (v + r))
    delta = -v * proximal_step("logistic", -1.0, 0.2, eta, v)  # y = -1, margin -0.2
    assert delta / v == pytest.approx(eta / (1.0 + math.exp(-0.2 + delta)), rel=1e-12)


@pytest.mark.parametrize("cls", BOTH)
def test_arow_first_step_by_hand(cls):
    """One hinge example x = (2, 0), y = +1 on one task, eta = 2 (r = 1/2): both variances are 1,
    v = 4 + 1 = 5, the margin moves to 5/(5 + 1/2) = 10/11 (w = (2, 1)·2/11), and D = (4, 1)
    makes the variances 1/9 and 1/3 for the next step."""
    model = cls(n_tasks=1, graph="disconnected", update="arow", loss="hinge", learning_rate=2.0)
    X = np.array([[2.0, 0.0]])
    model.partial_fit(X, [1], tasks=[0])
    assert model.decision_function(X, tasks=[0])[0] == pytest.approx(10 / 11, rel=1e-7)
    np.testing.assert_array_equal(model.block_weights_[0], np.array([4 / 11, 0.0, 2 / 11], dtype=np.float32))
    # Second step from margin 10/11: v = 4/9 + 1/3 = 7/9, gain (1/11)·v/(v + 1/2).
    model.partial_fit(X, [1], tasks=[0])
    v = 7 / 9
    assert model.decision_function(X, tasks=[0])[0] == pytest.approx(10 / 11 + v / 11 / (v + 0.5), rel=1e-6)
    if cls is omtl.MTLinear:  # (weight, D) per slot in f32, a block slot and one component's counters
        assert 3 * 2 * 4 + 24 <= model.memory_bytes_ <= 3 * 2 * 4 + 24 + 64


def test_invariant_steps_by_hand():
    # Hinge: the flow stops at margin 1; squared: p moves to y - (y - p) e^{-eta h}.
    assert invariant_step("hinge", 1.0, -1.0, 10.0, 4.0) == pytest.approx(0.5)
    assert invariant_step("hinge", -1.0, 0.0, 0.1, 2.0) == pytest.approx(-0.1)
    p, h, eta = 0.5, 2.0, 0.3
    s = invariant_step("squared", -1.0, p, eta, h)
    assert p + h * s == pytest.approx(-1.0 + 1.5 * math.exp(-eta * h))


@pytest.mark.parametrize("cls", BOTH)
def test_first_step_by_hand(cls):
    """One logistic example x = (2, 0), y = +1 on one task: G = (1, 1/4), N = (2, 1), rates (1/2, 2),
    Σ u²/N² = 2 so μ = 1/√2, h = μ (4·½ + 1·2) = 2√2; the new margin δ solves δ + e^δ - 1 = η h.
    The weights are stored in single precision: each is δ/4 or δ/2 to f32 rounding (6e-8)."""
    model = cls(n_tasks=1, graph="disconnected")
    X = np.array([[2.0, 0.0]])
    model.partial_fit(X, [1], tasks=[0])
    delta = solve_bisection(lambda d: d + math.expm1(d) - 0.5 * 2 * math.sqrt(2), 0.0, 2.0)
    assert model.decision_function(X, tasks=[0])[0] == pytest.approx(delta, rel=1e-7)
    # The intercept carries half of the margin (its rate-weighted share u² r μ s: 2 of 4).
    expected = np.array([delta / 4, 0.0, delta / 2])
    np.testing.assert_array_equal(model.block_weights_[0], expected.astype(np.float32).astype(np.float64))
    assert model.n_updates_ == 1


@pytest.mark.parametrize("rho", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("cls", BOTH)
def test_shared_rate_sets_the_shared_share_of_the_first_step(cls, rho):
    """Complete graph, k = 2, one logistic example x = (2, 0), y = +1 of task 0 (M.8): each of its 4
    coordinates (own and shared block, feature and intercept) has u² r = 2 (G = u²/4, N = |u|) and
    μ = 1/2, so h = μ (4 + 4ρ) = 2 (1 + ρ) and the margin gain δ solves δ + e^δ - 1 = η h. The
    shared block carries ρ/(1 + ρ) of it, which is all that task 1 sees."""
    model = cls(n_tasks=2, shared_rate=rho)
    X = np.array([[2.0, 0.0]])
    model.partial_fit(X, [1], tasks=[0])
    delta = solve_bisection(lambda d: d + math.expm1(d) - 0.5 * 2 * (1 + rho), 0.0, 3.0)
    assert model.decision_function(X, tasks=[0])[0] == pytest.approx(delta, rel=1e-6)
    assert model.decision_function(X, tasks=[1])[0] == pytest.approx(delta * rho / (1 + rho), rel=1e-6)


@pytest.mark.parametrize("rho", [1.0, 0.4, 2.5])
@pytest.mark.parametrize("cls", BOTH)
def test_shared_rate_under_sgd_is_the_kernel_with_a_heavier_shared_part(cls, rho):
    """Under update="sgd" (one rate for all coordinates) the model depends on T alone, not on the
    factor B: the complete graph with the shared block's rate times ρ is the task kernel
    T_ρ = (diag - off) I + ρ off 11ᵀ through the general factor; ρ = 1 is the complete graph's own
    T. Equal up to the rounding of the single-precision weights (two different factors)."""
    k = 4
    X, y, tasks = random_stream(n=150, d=5, k=k, seed=14)
    diag, off = 2.0 / (k + 1), 1.0 / (k + 1)  # T = (I + 11ᵀ)/(k + 1)
    T_rho = (diag - off) * np.eye(k) + rho * off * np.ones((k, k))
    params = {"update": "sgd", "learning_rate": 1.0}
    closed = scores_row_by_row(cls(n_tasks=k, shared_rate=rho, **params), X, y, tasks)
    general = scores_row_by_row(cls(n_tasks=k, graph=omtl.TaskGraph.from_task_kernel(T_rho), **params), X, y, tasks)
    np.testing.assert_allclose(closed, general, rtol=1e-4, atol=1e-5)


def per_task_runs(cls, X, y, tasks, k, **params):
    """Scores of k single-task models, each fed its task's rows, placed back in stream order."""
    scores = np.zeros(len(y))
    for i in range(k):
        rows = np.flatnonzero(tasks == i)
        scores[rows] = scores_row_by_row(cls(n_tasks=1, **params), X[rows], y[rows], np.zeros(len(rows), dtype=np.int64))
    return scores


@pytest.mark.parametrize("update", ["normalized", "adagrad", "sgd", "arow"])
@pytest.mark.parametrize("cls", BOTH)
def test_disconnected_graph_equals_independent_learners(cls, update):
    """Also with shared_rate away from 1 in the joint model: the disconnected graph has no shared
    block, so it ignores the rate (M.8)."""
    k = 3
    X, y, tasks = random_stream(n=90, d=5, k=k, seed=4)
    joint = scores_row_by_row(cls(n_tasks=k, graph="disconnected", update=update, shared_rate=3.0), X, y, tasks)
    np.testing.assert_array_equal(joint, per_task_runs(cls, X, y, tasks, k, graph="disconnected", update=update))


@pytest.mark.parametrize("update", ["normalized", "arow"])
@pytest.mark.parametrize("cls", BOTH)
def test_complete_graph_with_one_task_is_the_single_task_rule(cls, update):
    """A one-task complete graph is one block, not shared + own: shared_rate does not apply."""
    X, y, _ = random_stream(n=80, d=4, k=1, seed=6)
    tasks = np.zeros(len(y), dtype=np.int64)
    a = scores_row_by_row(cls(n_tasks=1, graph="complete", update=update, shared_rate=0.3), X, y, tasks)
    b = scores_row_by_row(cls(n_tasks=1, graph="disconnected", update=update), X, y, tasks)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cls", BOTH)
def test_edgeless_graph_through_the_general_factor_equals_disconnected(cls):
    """T = I given as a general task kernel: its per-component square root is the identity (and a
    general graph has no shared block: shared_rate is ignored)."""
    k = 4
    X, y, tasks = random_stream(n=120, d=5, k=k, seed=8)
    general = cls(n_tasks=k, graph=omtl.TaskGraph.from_task_kernel(np.eye(k)), shared_rate=2.0)
    closed = cls(n_tasks=k, graph="disconnected")
    np.testing.assert_allclose(scores_row_by_row(general, X, y, tasks), scores_row_by_row(closed, X, y, tasks), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("update", ["normalized", "arow"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_hashing_puts_every_block_in_one_table_as_the_twin(sparse, update):
    """Under hash_bits the shared and per-task blocks share one table (collisions across blocks
    too): the twin, which keeps a dict of table cells, gives the same scores and table."""
    X, y, tasks = random_stream(n=150, d=7, k=4, seed=9, sparse=sparse)
    nat = omtl.MTLinear(n_tasks=4, hash_bits=3, update=update)
    twin = ref.MTLinear(n_tasks=4, hash_bits=3, update=update)
    np.testing.assert_allclose(nat.learn(X, y, tasks=tasks), twin.learn(X, y, tasks=tasks))
    np.testing.assert_allclose(nat.decision_function(X, tasks=tasks), twin.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(nat.table_weights_, twin._core.arrays()["table_weights"])
    assert nat.table_weights_.shape == (8,)
    with pytest.raises(ValueError, match="table_weights_"):
        _ = nat.block_weights_


def test_hashing_bounds_the_memory_whatever_the_number_of_features_and_tasks():
    rng = np.random.default_rng(0)
    n, d, bits = 400, 1_000_000, 6
    nnz = 20
    cols = np.sort(rng.choice(d, size=(n, nnz)), axis=1)  # may repeat within a row: summed below
    X = sp.csr_matrix((rng.uniform(0.5, 2.0, n * nnz), cols.ravel(), np.arange(0, n * nnz + 1, nnz)), shape=(n, d))
    X.sum_duplicates()
    y = np.where(rng.random(n) < 0.5, 1, -1)
    tasks = [f"user{t}" for t in rng.integers(0, 300, n)]  # open-ended string ids: 300 tasks
    model = omtl.MTLinear(hash_bits=bits)
    model.partial_fit(X, y, tasks=tasks)
    # The table (weight, Σg²u², max|u| per cell, f32 each) and one component's counters (24 bytes).
    assert model.table_weights_.shape == (2**bits,)
    assert model.memory_bytes_ == 2**bits * 3 * 4 + 24
    # The twin hashes the same way (a dense copy of a few rows of a narrower problem).
    k = 3
    Xs = np.where(rng.random((40, 300)) < 0.1, rng.uniform(-1.0, 2.0, (40, 300)), 0.0)
    ys, ts = y[:40], rng.integers(0, k, 40)
    nat = scores_row_by_row(omtl.MTLinear(n_tasks=k, hash_bits=bits), Xs, ys, ts)
    np.testing.assert_allclose(nat, scores_row_by_row(ref.MTLinear(n_tasks=k, hash_bits=bits), Xs, ys, ts), rtol=1e-9, atol=1e-12)


def test_without_hashing_a_wide_model_stores_the_pairs_it_touches():
    """Past 4,095 features the exact cells are sparse: a feature index of 2^28 costs its own
    cells only, and the scores equal those of the same rows in a narrow dense model."""
    rng = np.random.default_rng(1)
    n, nnz = 60, 5
    narrow_cols = np.sort(rng.choice(50, size=(n, nnz), replace=True), axis=1)
    Xn = sp.csr_matrix((rng.uniform(0.5, 2.0, n * nnz), narrow_cols.ravel(), np.arange(0, n * nnz + 1, nnz)), shape=(n, 51))
    Xn.sum_duplicates()
    Xn.sort_indices()
    y = np.where(rng.random(n) < 0.5, 1, -1)
    tasks = rng.integers(0, 3, n)
    # The same rows with column 50 moved to 2^28.
    wide_cols = np.where(Xn.indices == 50, 2**28, Xn.indices)
    Xw = sp.csr_matrix((Xn.data, wide_cols, Xn.indptr), shape=(n, 2**28 + 1))
    narrow, wide = omtl.MTLinear(n_tasks=3, fit_intercept=False), omtl.MTLinear(n_tasks=3, fit_intercept=False)
    np.testing.assert_array_equal(narrow.learn(Xn, y, tasks=tasks), wide.learn(Xw, y, tasks=tasks))
    # 4 blocks x at most 51 pairs, each well under 64 bytes with its index.
    assert wide.memory_bytes_ < 4 * 51 * 64
    with pytest.raises(ValueError, match="bytes"):
        _ = wide.block_weights_


@pytest.mark.parametrize("weighted", [False, True])
def test_random_graphs_match_the_twin(weighted):
    k = 6
    graph = random_graph(k, seed=2, weighted=weighted)
    X, y, tasks = random_stream(n=200, d=5, k=k, seed=12)
    nat = scores_row_by_row(omtl.MTLinear(n_tasks=k, graph=graph), X, y, tasks)
    twin = scores_row_by_row(ref.MTLinear(n_tasks=k, graph=graph), X, y, tasks)
    np.testing.assert_allclose(nat, twin, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("params", [{}, {"update": "arow", "loss": "hinge", "learning_rate": 2.0}, {"update": "arow"}])
def test_learns_a_shared_concept(params):
    X, y, tasks = random_stream(n=3000, d=6, k=4, seed=3)
    pred = omtl.MTLinear(n_tasks=4, **params).learn(X, y, tasks=tasks)
    late = slice(2000, None)
    assert np.mean(pred[late] != y[late]) < np.mean(y[late] != np.sign(y[late].sum() + 0.5))


def test_predict_proba():
    X, y, tasks = random_stream(n=100, d=4, k=2, seed=1)
    model = omtl.MTLinear(n_tasks=2).partial_fit(X, y, tasks=tasks)
    proba = model.predict_proba(X, tasks=tasks)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    scores = model.decision_function(X, tasks=tasks)
    np.testing.assert_allclose(proba[:, 1], 1.0 / (1.0 + np.exp(-scores)), rtol=1e-12)
    np.testing.assert_array_equal(proba[:, 1] >= 0.5, model.predict(X, tasks=tasks) == 1)
    with pytest.raises(AttributeError):
        omtl.MTLinear(n_tasks=2, loss="hinge").partial_fit(X, y, tasks=tasks).predict_proba(X, tasks=tasks)


@pytest.mark.parametrize(
    "params",
    [
        {"loss": "log"},
        {"update": "adam"},
        {"learning_rate": 0.0},
        {"learning_rate": float("nan")},
        {"learning_rate": True},
        {"hash_bits": 0},
        {"hash_bits": 32},
        {"hash_bits": 2.5},
        {"fit_intercept": "yes"},
        {"graph": "ring"},
        {"shared_rate": 0.0},
        {"shared_rate": -1.0},
        {"shared_rate": float("nan")},
        {"shared_rate": float("inf")},
        {"shared_rate": "2"},
        {"shared_rate": None},
    ],
)
@pytest.mark.parametrize("cls", BOTH)
def test_bad_parameters_raise_on_the_first_batch_and_leave_no_state(cls, params):
    X, y, tasks = random_stream(n=10, d=3, k=2, seed=0)
    model = cls(n_tasks=2, **params)
    with pytest.raises(ValueError):
        model.partial_fit(X, y, tasks=tasks)
    assert not model._is_fitted()


def test_a_state_of_the_layout_before_shared_rate_is_refused():
    """shared_rate is part of the saved parameters (STATE_VERSION 5): a state of layout 4, or a
    pickle of it, is refused with a clear message, not misread."""
    X, y, tasks = random_stream(n=30, d=3, k=2, seed=0)
    model = omtl.MTLinear(n_tasks=2, shared_rate=1.5).partial_fit(X, y, tasks=tasks)
    state = bytes(model._core._learner.to_bytes())
    assert struct.unpack("<I", state[:4])[0] == STATE_VERSION >= 5
    with pytest.raises(omtl.StateError, match="layout version 4"):
        NativeLearner.from_bytes(struct.pack("<I", 4) + state[4:])
    old = model.__getstate__()
    old["__omtl_state_version__"] = 4
    with pytest.raises(ValueError, match="state version 4"):
        omtl.MTLinear().__setstate__(old)
    restored = pickle.loads(pickle.dumps(model))
    assert restored.shared_rate == 1.5
    np.testing.assert_array_equal(restored.decision_function(X, tasks=tasks), model.decision_function(X, tasks=tasks))


def test_docstring_example_runs():
    import doctest

    import omtl.learners.mt_linear as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5 and result.failed == 0


@pytest.mark.parametrize("update", ["normalized", "arow"])
@pytest.mark.parametrize("cls", BOTH)
def test_update_beyond_single_precision_is_refused(cls, update):
    """The state is f32 (M.5): a row whose update would write G = g²u² ~ 1e60 is refused before
    anything changes, and the model keeps learning afterwards."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y, tasks = np.where(X[:, 0] > 0, 1, -1), rng.integers(0, 2, 30)
    # hinge: |g| = 1 on a mistake (G += u²); AROW: D += u² on any update
    model = cls(n_tasks=2, loss="hinge", update=update).partial_fit(X, y, tasks=tasks)
    before, n_updates, n_seen = model.block_weights_.copy(), model.n_updates_, model.n_seen_
    huge = np.array([[1e30, 0.0, 0.0]])
    wrong = -1 if model.decision_function(huge, tasks=[0])[0] >= 0 else 1
    with pytest.raises(ValueError, match="single precision"):
        model.partial_fit(huge, [wrong], tasks=[0])
    np.testing.assert_array_equal(model.block_weights_, before)
    assert (model.n_updates_, model.n_seen_) == (n_updates, n_seen)
    model.partial_fit(X, y, tasks=tasks)
    assert model.n_updates_ > n_updates


def test_a_csr_passed_again_skips_the_canonical_scan_but_never_misleads_the_engine():
    """check_X asks the input whether it is canonical (scipy caches the answer on it): an
    unsorted matrix still learns as its canonical form, and a stale cached flag (indices
    swapped in place after a call) is refused by the engine with the model unchanged."""
    X, y, tasks = random_stream(n=60, d=9, k=3, seed=4, sparse=True)
    X = sp.csr_matrix(X)
    canonical = omtl.MTLinear(n_tasks=3).learn(X, y, tasks=tasks)
    # The same matrix with every row's entries reversed: not canonical, learns the same.
    rows = [slice(X.indptr[r], X.indptr[r + 1]) for r in range(X.shape[0])]
    reversed_ = sp.csr_matrix(
        (np.concatenate([X.data[s][::-1] for s in rows]), np.concatenate([X.indices[s][::-1] for s in rows]), X.indptr),
        shape=X.shape,
    )
    assert not reversed_.has_canonical_format
    np.testing.assert_array_equal(omtl.MTLinear(n_tasks=3).learn(reversed_, y, tasks=tasks), canonical)
    model = omtl.MTLinear(n_tasks=3)
    model.partial_fit(X, y, tasks=tasks)
    before = model.block_weights_.copy()
    row = next(r for r in range(X.shape[0]) if X.indptr[r + 1] - X.indptr[r] >= 2)
    a = X.indptr[row]
    X.indices[a], X.indices[a + 1] = X.indices[a + 1], X.indices[a]
    assert X.has_canonical_format  # stale: scipy does not see the in-place write
    with pytest.raises(ValueError, match="strictly increasing"):
        model.partial_fit(X, y, tasks=tasks)
    np.testing.assert_array_equal(model.block_weights_, before)


def test_memory_floor_hook_runs_on_sparse_and_dense_rows_and_refuses_bad_tasks():
    """The bench's memory floor (src/floors.rs via ``_testing``): the same pass on the same rows,
    sparse or dense, reads the same weights; a task id out of range is refused."""
    from omtl._native import _testing
    from omtl._validation import csr_parts

    rng = np.random.default_rng(0)
    X = np.where(rng.random((50, 8)) < 0.3, rng.standard_normal((50, 8)), 0.0)
    tasks = rng.integers(0, 3, size=50).astype(np.int64)
    seconds, dense_sum = _testing.complete_graph_floor(np.ascontiguousarray(X), tasks, 3)
    _, sparse_sum = _testing.complete_graph_floor(csr_parts(sp.csr_matrix(X)), tasks, 3)
    assert seconds >= 0.0 and dense_sum == sparse_sum and dense_sum != 0.0
    with pytest.raises(ValueError, match="task"):
        _testing.complete_graph_floor(np.ascontiguousarray(X), tasks, 2)


@pytest.mark.parametrize("layout", ["dense", "sparse", "hashed"])
def test_a_call_failing_at_its_last_row_with_new_labels_leaves_the_model_as_before(layout):
    """A batch naming new string labels whose last row passes validation but is refused by the
    update (a value of 1e25: statistics beyond single precision) leaves the pickled model byte for
    byte as before, new labels and tasks included; the journal undoes it without a copy."""
    rng = np.random.default_rng(5)
    d = 2**20 if layout == "sparse" else 40  # 2^20 columns x 4+ blocks: past the dense bound
    n = 120
    X = sp.random(n, d, density=8 / d, format="csr", random_state=rng)
    X.data[:] = rng.uniform(0.5, 2.0, X.nnz)
    y = np.where(rng.random(n) < 0.5, 1, -1)
    users = np.array([f"user{i}" for i in rng.integers(0, 30, n)], dtype=object)
    model = omtl.MTLinear(hash_bits=12 if layout == "hashed" else None)
    model.partial_fit(X[:80], y[:80], tasks=users[:80])
    before, memory = pickle.dumps(model), model.memory_bytes_
    bad = X[80:].copy()
    last = bad.indptr[-2]
    assert bad.indptr[-1] > last
    bad.data[last] = 1e25
    new_users = np.array([f"new{i}" for i in range(40)], dtype=object)
    y_bad = y[80:].copy()
    y_bad[-1] = -1 if model.decision_function(bad[-1:], tasks=new_users[-1:])[0] >= 0 else 1
    with pytest.raises(ValueError, match="single precision"):
        model.learn(bad, y_bad, tasks=new_users)
    assert pickle.dumps(model) == before
    # What is allocated may keep the room the call reserved (amortised growth: at most double).
    assert memory <= model.memory_bytes_ <= 2 * memory + 64 * 40
    model.partial_fit(X[80:], y[80:], tasks=new_users)  # and it goes on learning
