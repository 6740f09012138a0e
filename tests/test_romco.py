"""ROMCO (ALGORITHMS.md §5): both protocols, INV-R1..R5, persistence and input checking."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import pickled_midway, random_stream, round_stream, run_rounds
from parity import check_scores, compare_runs, pre_update_scores, round_chunks

import omtl
import omtl.reference as ref
from omtl import _native
from omtl.datasets import Stream
from omtl.reference.rounds import round_spans

# This module's learners in the conformance and parity suites (see learner_table.py).
CONFORMANCE = [
    ("romco-default", omtl.ROMCO, ref.ROMCO, {}),
    ("romco-strong", omtl.ROMCO, ref.ROMCO, {"eta1": 0.2, "eta2": 0.05, "lambda1": 0.5, "lambda2": 0.3}),
    ("romco-mistake", omtl.ROMCO, ref.ROMCO, {"lambda1": 0.05, "lambda2": 0.02, "update": "mistake"}),
    ("romco-lambda1-0", omtl.ROMCO, ref.ROMCO, {"lambda1": 0.0, "lambda2": 0.1}),
]

K = 4


CONFIGS = [
    {},
    {"eta1": 0.2, "eta2": 0.05, "lambda1": 0.5, "lambda2": 0.3},
    {"lambda1": 0.05, "lambda2": 0.02, "update": "mistake"},
    {"lambda1": 0.0, "lambda2": 0.1},
    {"eta1": 0.3, "eta2": 0.0, "lambda1": 2.0, "lambda2": 0.0},
]


def compare_rounds(native, reference, X, y, tasks, rounds, *, chunk_rounds=7):
    """Tie-aware comparison (parity.py) of learn_rounds over chunks of whole rounds."""
    return compare_runs(native, reference, X, y, tasks, rounds=rounds, slices=round_chunks(rounds, chunk_rounds))


def assert_same_model(a, b, *, rtol=1e-9):
    np.testing.assert_allclose(a.U_, b.U_, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(a.V_, b.V_, rtol=rtol, atol=1e-12)
    assert a.rank_ == b.rank_
    assert a.n_personalized_ == b.n_personalized_
    assert a.n_updates_ == b.n_updates_
    assert a.n_mistakes_ == b.n_mistakes_


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("params", CONFIGS, ids=[str(i) for i in range(len(CONFIGS))])
def test_rounds_native_matches_reference(params, sparse):
    X, y, tasks, rounds = round_stream(sparse=sparse)
    nat, rf = omtl.ROMCO(n_tasks=K, **params), ref.ROMCO(n_tasks=K, **params)
    if compare_rounds(nat, rf, X, y, tasks, rounds).complete:
        assert_same_model(nat, rf)
        np.testing.assert_allclose(
            nat.decision_function(X, tasks=tasks), rf.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-12
        )
    assert nat.n_updates_ <= rounds[-1] + 1  # one joint update per round at most


def test_both_svt_routes_run_and_agree_with_the_reference():
    """Routes (b) and (a) on one P1 stream (route (c) off), the reference (numpy.linalg.svd)
    agreeing throughout. θ = 1e-9 is below 1e-6 σ_max, so route (b) is taken only while Ĉ has no
    inaccurate eigenvalue. Tasks 0 and 1 receive the same examples one after the other: after an
    update of task 1, columns 0 and 1 of U are equal up to the O(θ) of one thresholding, Ĉ is
    nearly singular and route (a) must step in; after one of task 0 they differ by a step."""
    Xb, yb, tb = random_stream(n=450, d=10, k=K, seed=2)
    rows = [(x, label, task) for x, label, t in zip(Xb, yb, tb) for task in ((0, 1) if t <= 1 else (t,))]
    X = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    tasks = np.array([r[2] for r in rows])
    params = {"eta1": 0.5, "lambda1": 2e-9}
    nat, rf = omtl.ROMCO(n_tasks=K, **params), ref.ROMCO(n_tasks=K, **params)
    nat._svt_route = "gram"
    assert compare_runs(nat, rf, X, y, tasks).complete, "a tie parted the runs: pick another stream"
    assert_same_model(nat, rf)
    diag = nat._diagnostics()
    assert diag["n_gram_svt"] > 0 and diag["n_qr_svt"] > 0, diag
    assert diag["n_numerical_failures"] == 0


def test_singleton_rounds_equal_the_per_example_protocol():
    X, y, tasks = random_stream(n=200, d=6, k=K, seed=9)
    a, b = omtl.ROMCO(n_tasks=K, lambda1=0.1, lambda2=0.05), omtl.ROMCO(n_tasks=K, lambda1=0.1, lambda2=0.05)
    np.testing.assert_array_equal(a.learn(X, y, tasks=tasks), b.learn_rounds(X, y, tasks=tasks, rounds=np.arange(200)))
    np.testing.assert_array_equal(a.U_, b.U_)
    np.testing.assert_array_equal(a.V_, b.V_)


def test_a_round_is_predicted_with_one_model():
    X = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    y = np.array([1, 1, -1])
    m = omtl.ROMCO(n_tasks=3, lambda1=0.0, lambda2=0.0)
    m.learn_rounds(X[:1], y[:1], tasks=[0], rounds=[0])
    # Round 2: all three tasks scored before the joint update.
    scores_before = m.decision_function(X, tasks=[0, 1, 2])
    pred = m.learn_rounds(X, y, tasks=[0, 1, 2], rounds=[5, 5, 5])
    np.testing.assert_array_equal(pred, np.where(scores_before >= 0, 1, -1))
    assert m.n_updates_ == 2


def margin_perceptrons(X, y, tasks, step, k, rounds=None, trigger=1.0):
    """k independent linear learners z_i += step y x whenever y z_i·x < trigger (strict)."""
    Xd = X.toarray() if sp.issparse(X) else X
    Z = np.zeros((k, Xd.shape[1]))
    rounds = np.arange(len(y)) if rounds is None else rounds
    scores = np.zeros(len(y))
    for start, end in round_spans(rounds):
        rows = range(start, end)
        for t in rows:
            scores[t] = Z[tasks[t]] @ Xd[t]
        for t in rows:
            if y[t] * scores[t] < trigger:
                Z[tasks[t]] += step * y[t] * Xd[t]
    return scores


@pytest.mark.parametrize("protocol", ["P1", "P2"])
def test_inv_r1_unregularised_tasks_are_independent(protocol):
    X, y, tasks, rounds = round_stream(n=300, sparse=True, seed=4)
    if protocol == "P1":
        rounds = np.arange(len(y))
    expect = margin_perceptrons(X, y, tasks, 0.5, K, rounds)
    for eta1, eta2 in [(0.5, 0.0), (0.2, 0.3), (0.0, 0.5)]:
        m = omtl.ROMCO(n_tasks=K, eta1=eta1, eta2=eta2, lambda1=0.0, lambda2=0.0)
        m.learn_rounds(X, y, tasks=tasks, rounds=rounds)
        # The pre-update scores, round by round.
        replay = omtl.ROMCO(n_tasks=K, eta1=eta1, eta2=eta2, lambda1=0.0, lambda2=0.0)
        got = np.zeros(len(y))
        for r in np.unique(rounds):
            idx = np.flatnonzero(rounds == r)
            if replay._is_fitted():
                got[idx] = replay.decision_function(X[idx], tasks=tasks[idx])
            replay.learn_rounds(X[idx], y[idx], tasks=tasks[idx], rounds=rounds[idx])
        np.testing.assert_allclose(got, expect, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(m.U_ + m.V_, replay.U_ + replay.V_, rtol=1e-12, atol=1e-15)


def test_inv_r2_mistake_trigger_on_singletons_is_perceptrons():
    X, y, tasks = random_stream(n=400, d=6, k=K, seed=7)
    battery = omtl.KernelPerceptron(n_tasks=K).learn(X, y, tasks=tasks)
    for eta1, eta2 in [(0.37, 0.0), (0.01, 2.0)]:
        m = omtl.ROMCO(n_tasks=K, eta1=eta1, eta2=eta2, lambda1=0.0, lambda2=0.0, update="mistake")
        np.testing.assert_array_equal(m.learn(X, y, tasks=tasks), battery)


def v_only_recursion(X, y, tasks, eta2, lambda2, k, trigger="loss"):
    """The ROMCO recursion with U ≡ 0 (V alone), per example."""
    V = np.zeros((X.shape[1], k))
    preds = np.zeros(len(y))
    for t in range(len(y)):
        i, x = tasks[t], X[t]
        p = V[:, i] @ x
        preds[t] = 1 if p >= 0 else -1
        if (y[t] * p < 1) if trigger == "loss" else (y[t] * p <= 0):
            if y[t] * p < 1:
                V[:, i] += eta2 * y[t] * x
            for j in range(k):
                n = np.linalg.norm(V[:, j])
                V[:, j] *= max(0.0, 1 - eta2 * lambda2 / n) if n > 0 else 0.0
    return preds, V


def test_inv_r3_huge_regularisation_zeroes_each_part():
    X, y, tasks = random_stream(n=300, d=6, k=K, seed=8)
    m = omtl.ROMCO(n_tasks=K, lambda1=1e12, lambda2=0.05)
    preds = np.concatenate([m.learn(X[a : a + 60], y[a : a + 60], tasks=tasks[a : a + 60]) for a in range(0, 300, 60)])
    assert not m.U_.any() and m.rank_ == 0
    expect, V = v_only_recursion(X, y, tasks, 0.1, 0.05, K)
    np.testing.assert_array_equal(preds, expect)
    np.testing.assert_allclose(m.V_, V, rtol=1e-9, atol=1e-12)
    m = omtl.ROMCO(n_tasks=K, lambda1=1e-3, lambda2=1e12)
    m.learn(X, y, tasks=tasks)
    assert not m.V_.any() and m.n_personalized_ == 0
    assert m.rank_ > 0


def numpy_svt(M, theta):
    P, s, Qt = np.linalg.svd(M, full_matrices=False)
    return (P * np.maximum(s - theta, 0)) @ Qt, s


@pytest.mark.parametrize("shape", [(300, 6), (5, 8), (1000, 12)])
def test_inv_r4_svt_routes_agree_and_satisfy_the_prox_condition(shape):
    rng = np.random.default_rng(shape[0])
    d, k = shape
    M = rng.standard_normal((d, k)) @ np.diag(np.geomspace(1, 0.01, k))
    s = np.linalg.svd(M, compute_uv=False)
    theta = 0.5 * (s[1] + s[2])
    expect, sigma = numpy_svt(M, theta)
    for route in ("gram", "qr", "explicit"):
        got = _native._testing.svt(M, theta, route)
        assert np.linalg.norm(got - expect) <= 1e-9 * np.linalg.norm(expect), route
        # σ(SVT(M)) = (σ(M) - θ)_+
        np.testing.assert_allclose(
            np.linalg.svd(got, compute_uv=False), np.maximum(sigma - theta, 0), atol=1e-10 * sigma[0]
        )
        # Prox optimality on the retained pairs: P₊ᵀ (M - U) Q₊ = θ I.
        P, _, Qt = np.linalg.svd(M, full_matrices=False)
        keep = sigma > theta
        G = P[:, keep].T @ (M - got) @ Qt[keep].T
        assert np.linalg.norm(G - theta * np.eye(keep.sum())) <= 1e-9
    # Below θ = 1e-6 σ_max route (b) is accurate only without inaccurate (tiny) eigenvalues of
    # MᵀM: here, κ(M) = 100 and θ = 1e-9 σ_max, it is taken and agrees with the SVD; with a
    # repeated column (MᵀM singular) it declines (the fallback case); route (a) never does.
    tiny = 1e-9 * sigma[0]
    expect, _ = numpy_svt(M, tiny)
    got = _native._testing.svt(M, tiny, "gram")
    if d >= k:
        assert np.linalg.norm(got - expect) <= 1e-9 * np.linalg.norm(expect)
    else:
        assert got is None  # d < k: MᵀM is singular
    singular = np.hstack([M, M[:, :1]])
    assert _native._testing.svt(singular, tiny, "gram") is None
    assert _native._testing.svt(singular, tiny, "qr") is not None
    assert _native._testing.svt(M, 1e-9 * sigma[0], "qr") is not None


def test_group_shrinkage_of_columns():
    """INV-R4, V part: after an update each column has norm (||v̂|| - η2 λ2)_+."""
    X, y, tasks = random_stream(n=50, d=5, k=K, seed=1)
    m = omtl.ROMCO(n_tasks=K, eta2=0.3, lambda2=0.2, lambda1=0.0)
    for t in range(50):
        V_before = m.V_ if m._is_fitted() else np.zeros((5, K))
        p = m.decision_function(X[t : t + 1], tasks=[tasks[t]])[0] if m._is_fitted() else 0.0
        n_before = m.n_updates_
        m.learn(X[t : t + 1], y[t : t + 1], tasks=[tasks[t]])
        if m.n_updates_ == n_before:
            continue
        V_hat = V_before.copy()
        if y[t] * p < 1:
            V_hat[:, tasks[t]] += 0.3 * y[t] * X[t]
        np.testing.assert_allclose(
            np.linalg.norm(m.V_, axis=0), np.maximum(np.linalg.norm(V_hat, axis=0) - 0.06, 0), atol=1e-12
        )


def test_inv_r5_untriggered_rounds_leave_the_model_bit_identical():
    X, y, tasks, rounds = round_stream(n=200, seed=6)
    m = omtl.ROMCO(n_tasks=K, lambda1=0.05, lambda2=0.05, update="mistake")
    run_rounds(m, X, y, tasks, rounds)
    n_quiet = 0
    for r in range(rounds[-1] + 1):
        idx = np.flatnonzero(rounds == r)
        scores = m.decision_function(X[idx], tasks=tasks[idx])
        U, V, n = m.U_, m.V_, m.n_updates_
        m.learn_rounds(X[idx], y[idx], tasks=tasks[idx], rounds=rounds[idx])
        if np.all(y[idx] * scores > 0):
            n_quiet += 1
            assert m.n_updates_ == n
            assert np.array_equal(m.U_, U) and np.array_equal(m.V_, V)
        else:
            assert m.n_updates_ == n + 1
    assert n_quiet > 5


@pytest.mark.parametrize("cls", [omtl.ROMCO, ref.ROMCO], ids=["native", "reference"])
@pytest.mark.parametrize("protocol", ["P1", "P2"])
def test_pickling_mid_stream_continues_identically(cls, protocol):
    X, y, tasks, rounds = round_stream(n=200, sparse=True, seed=12)
    if protocol == "P1":
        rounds = np.arange(len(y))
    half = np.flatnonzero(rounds >= rounds[len(y) // 2])[0]
    a, b = pickled_midway(cls(n_tasks=K, lambda1=0.1, lambda2=0.05), X, y, tasks, rounds, half)
    np.testing.assert_array_equal(a.U_, b.U_)
    np.testing.assert_array_equal(a.V_, b.V_)
    assert (a.rank_, a.n_personalized_, a.n_seen_) == (b.rank_, b.n_personalized_, b.n_seen_)


BAD_ROUNDS = [
    (np.array([0, 0, 1, 0, 2, 2]), ValueError, "non-decreasing"),
    (np.array([0, 0, 0, 1, 1, 1]), ValueError, "twice"),
    (np.array([0, 1, 2]), ValueError, "rounds has 3"),
    (np.array([0.5, 1, 2, 3, 4, 5]), TypeError, "integers"),
    (None, TypeError, "required"),
    (3, TypeError, "one round id per row"),
    (np.zeros((6, 1), dtype=int), ValueError, "1-D"),
]


@pytest.mark.parametrize(
    "cls", [omtl.ROMCO, ref.ROMCO, omtl.PAUnique, omtl.MTPerceptron], ids=["romco", "romco-ref", "pa", "mtp"]
)
@pytest.mark.parametrize("bad", BAD_ROUNDS, ids=[b[2] for b in BAD_ROUNDS])
def test_bad_rounds_leave_the_model_unchanged(cls, bad):
    rounds, exc, msg = bad
    X, y, tasks = random_stream(n=40, d=5, k=K, seed=3)
    m = cls(n_tasks=K)
    m.learn(X[:20], y[:20], tasks=tasks[:20])
    before = pickle.dumps(m)
    Xb, yb, tb = (
        X[20:26],
        y[20:26],
        np.array([0, 1, 2, 0, 1, 2]) if "twice" not in msg else np.array([0, 1, 0, 2, 3, 1]),
    )
    with pytest.raises(exc, match=msg):
        m.learn_rounds(Xb, yb, tasks=tb, rounds=rounds)
    assert pickle.dumps(m) == before


def test_bad_input_leaves_the_model_unchanged():
    X, y, tasks, rounds = round_stream(n=60, seed=3)
    m = omtl.ROMCO(n_tasks=K, lambda1=0.1)
    m.learn_rounds(X[:30], y[:30], tasks=tasks[:30], rounds=rounds[:30])
    before = pickle.dumps(m)
    bad_X = X[30:40].copy()
    bad_X[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.learn_rounds(bad_X, y[30:40], tasks=tasks[30:40], rounds=rounds[30:40])
    with pytest.raises(ValueError, match="features"):
        m.learn_rounds(X[30:40, :3], y[30:40], tasks=tasks[30:40], rounds=rounds[30:40])
    with pytest.raises(ValueError, match="task id"):
        m.learn_rounds(X[30:40], y[30:40], tasks=np.full(10, K), rounds=np.arange(10))
    with pytest.raises(ValueError, match="label"):
        m.learn_rounds(X[30:40], np.full(10, 2), tasks=tasks[30:40], rounds=rounds[30:40])
    assert pickle.dumps(m) == before


@pytest.mark.parametrize(
    "params, msg",
    [
        ({"eta1": -0.1}, "eta1"),
        ({"lambda2": float("nan")}, "lambda2"),
        ({"update": "sometimes"}, "update"),
        ({"eta1": 0.0, "eta2": 0.0}, "eta1 \\+ eta2"),
        ({"lambda1": True}, "lambda1"),
    ],
)
def test_bad_parameters_are_reported_and_not_mutated(params, msg):
    X, y, tasks = random_stream(n=10, d=3, k=K)
    for cls in (omtl.ROMCO, ref.ROMCO):
        m = cls(n_tasks=K, **params)
        with pytest.raises(ValueError, match=msg):
            m.learn(X, y, tasks=tasks)
        assert m.get_params() == {**cls(n_tasks=K).get_params(), **params}
        assert not m._is_fitted()


def test_fitted_attributes_before_and_after():
    m = omtl.ROMCO(n_tasks=3)
    assert (m.rank_, m.n_personalized_, m.n_updates_) == (0, 0, 0)
    with pytest.raises(AttributeError):
        _ = m.U_
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    m.learn_rounds(X, [True, False], tasks=[0, 2], rounds=[0, 0])
    assert m.U_.shape == (2, 3) and m.V_.shape == (2, 3)
    assert not m.U_[:, 1].any() and not m.V_[:, 1].any()
    assert m.rank_ == 2 and m.n_personalized_ == 2
    assert m.predict(X, tasks=[0, 2]).dtype == bool


def test_learn_rounds_flattens_for_per_example_learners():
    X, y, tasks, rounds = round_stream(n=150, seed=10)
    for cls in (omtl.PAUnique, omtl.MTPerceptron, ref.PAGlobal, ref.MTPerceptron):
        a, b = cls(n_tasks=K), cls(n_tasks=K)
        np.testing.assert_array_equal(a.learn_rounds(X, y, tasks=tasks, rounds=rounds), b.learn(X, y, tasks=tasks))
        np.testing.assert_array_equal(a.decision_function(X, tasks=tasks), b.decision_function(X, tasks=tasks))
        assert a.n_seen_ == b.n_seen_ == len(y)


def test_very_high_dimensional_sparse_input():
    """d = 500,000 works. Only the columns some row touches can become non-zero, so the model
    must equal the reference run on those columns alone."""
    d, n, k = 500_000, 30, 3
    rng = np.random.default_rng(0)
    X = sp.random(n, d, density=2e-5, format="csr", random_state=1)
    y = rng.choice([-1, 1], size=n)
    tasks = np.arange(n) % k
    rounds = np.arange(n) // k
    used = np.unique(X.indices)
    nat, rf = omtl.ROMCO(n_tasks=k, lambda1=0.01), ref.ROMCO(n_tasks=k, lambda1=0.01)
    s_nat = pre_update_scores(nat, X, y, tasks, rounds)
    if check_scores(s_nat, pre_update_scores(rf, X[:, used], y, tasks, rounds)) < n:
        return  # a tie parted the runs (parity.py): the models may differ from there on
    U, V = nat.U_, nat.V_
    assert U.shape == (d, k)
    np.testing.assert_allclose(U[used], rf.U_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(V[used], rf.V_, rtol=1e-9, atol=1e-12)
    unused = np.setdiff1d(np.arange(d), used)
    assert not U[unused].any() and not V[unused].any()


# ---- Route (c): Brand's rank-one update of the thin SVD (§5.5 c) ---------------------------


def routed(route, **params):
    """A native ROMCO whose singleton rounds use the given SVT route (a test hook)."""
    m = omtl.ROMCO(n_tasks=K, **params)
    m._svt_route = route
    return m


def rel_err(a, b):
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


ROUTE_C_CONFIGS = {
    "defaults": {},
    "strong-lambda1": {"eta1": 0.1, "lambda1": 1.0, "lambda2": 0.01},
    "huge-lambda1": {"lambda1": 1e12},
    "lambda1-0": {"lambda1": 0.0, "lambda2": 0.05},
}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("name", list(ROUTE_C_CONFIGS))
def test_route_c_agrees_with_route_a_on_long_streams(name, sparse):
    """INV-R4 for route (c): on a long P1 stream (compactions of the basis, re-orthogonalisations
    every 1000 updates, rank drops and regrowth) the factored update follows route (a) as the
    reference twin runs it — a thin SVD (numpy.linalg.svd, LAPACK) of the dense U at every
    update — to 1e-9 relative."""
    params = ROUTE_C_CONFIGS[name]
    n, d, chunk = 4000, 12, 250
    X, y, tasks = random_stream(n=n, d=d, k=K, seed=31, sparse=sparse, density=0.5)
    c, a = routed("brand", **params), ref.ROMCO(n_tasks=K, **params)
    for s in range(0, n, chunk):
        sl = slice(s, s + chunk)
        np.testing.assert_array_equal(c.learn(X[sl], y[sl], tasks=tasks[sl]), a.learn(X[sl], y[sl], tasks=tasks[sl]))
        assert rel_err(c.U_, a.U_) <= 1e-9 or (not c.U_.any() and not a.U_.any()), s
        assert rel_err(c.V_, a.V_) <= 1e-9, s
        assert c.rank_ == a.rank_, s
    assert rel_err(c.decision_function(X, tasks=tasks), a.decision_function(X, tasks=tasks)) <= 1e-9
    diag = c._diagnostics()
    assert diag["n_brand_svt"] == c.n_updates_ == a.n_updates_ > 900
    assert diag["n_numerical_failures"] == 0
    if name == "huge-lambda1":
        assert not c.U_.any() and c.rank_ == 0
    if name == "lambda1-0":
        assert c.rank_ == min(d, K)


def test_route_c_rank_drops_to_zero_and_regrows():
    """Per example: with θ close to the size of one step, U is thresholded away completely now and
    then and regrows; route (c) and the reference's SVD agree throughout, `rank_` included."""
    X, y, tasks = random_stream(n=500, d=6, k=K, seed=4)
    params = {"eta1": 0.1, "lambda1": 0.8, "lambda2": 0.01}
    c, a = routed("brand", **params), ref.ROMCO(n_tasks=K, **params)
    ranks = []
    for t in range(len(y)):
        sl = slice(t, t + 1)
        np.testing.assert_array_equal(c.learn(X[sl], y[sl], tasks=tasks[sl]), a.learn(X[sl], y[sl], tasks=tasks[sl]))
        np.testing.assert_allclose(c.U_, a.U_, rtol=1e-9, atol=1e-12)
        assert c.rank_ == a.rank_
        ranks.append(c.rank_)
    ranks = np.array(ranks)
    dropped = np.flatnonzero((ranks[1:] == 0) & (ranks[:-1] > 0))
    assert len(dropped) > 3 and ranks.max() >= 2, np.bincount(ranks)
    assert np.any(ranks[dropped[0] + 1 :] > 0)  # regrowth after a drop


def test_route_c_alternates_with_the_dense_routes_of_multi_task_rounds():
    """With route (c) selected, singleton rounds run on the factored U; rounds of several tasks
    switch to the dense U and routes (b)/(a) and back, and the mixture still matches the
    reference."""
    X, y, tasks, rounds = round_stream(n=400, d=4 * K, seed=14)
    # Split every third multi-task round into singletons, so the protocol alternates.
    r2, nxt = np.empty_like(rounds), 0
    for r in np.unique(rounds):
        idx = np.flatnonzero(rounds == r)
        if r % 3 == 0:
            r2[idx] = nxt + np.arange(len(idx))
            nxt += len(idx)
        else:
            r2[idx] = nxt
            nxt += 1
    params = {"lambda1": 0.05, "lambda2": 0.02}
    nat, rf = routed("brand", **params), ref.ROMCO(n_tasks=K, **params)
    assert compare_rounds(nat, rf, X, y, tasks, r2).complete, "a tie parted the runs: pick another stream"
    assert_same_model(nat, rf)
    diag = nat._diagnostics()
    assert diag["n_brand_svt"] > 0 and diag["n_gram_svt"] + diag["n_qr_svt"] > 0, diag
    p1 = routed("brand", **params)
    p1.learn(X, y, tasks=tasks)
    diag = p1._diagnostics()
    assert diag["n_brand_svt"] == p1.n_updates_ > 0 and diag["n_gram_svt"] + diag["n_qr_svt"] == 0


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_route_c_pickling_mid_stream_continues_identically(sparse):
    """The factored state (basis, rotations, counters up to the next re-orthogonalisation)
    survives pickling: a copy taken mid-stream, after more than 1000 factored updates,
    continues bit-identically."""
    X, y, tasks = random_stream(n=5000, d=12, k=K, seed=17, sparse=sparse, density=0.5)
    a = routed("brand", lambda1=1e-4)
    h = 4000
    a.learn(X[:h], y[:h], tasks=tasks[:h])
    assert a._diagnostics()["n_brand_svt"] > 1000
    b = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(a.U_, b.U_)
    pa, pb = a.learn(X[h:], y[h:], tasks=tasks[h:]), b.learn(X[h:], y[h:], tasks=tasks[h:])
    np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(a.decision_function(X, tasks=tasks), b.decision_function(X, tasks=tasks))
    np.testing.assert_array_equal(a.U_, b.U_)
    np.testing.assert_array_equal(a.V_, b.V_)
    assert a._diagnostics() == b._diagnostics()


def test_unknown_svt_route_is_rejected():
    m = routed("svd")
    with pytest.raises(ValueError, match="svt_route"):
        m.learn(np.ones((2, 3)), [1, -1], tasks=[0, 1])


@pytest.mark.parametrize("route", ["auto", "brand"])
def test_an_overflowing_step_is_refused_on_every_route(route):
    """An overflowing step (η1 |x| = inf) is neither thresholded away silently nor absorbed: the
    update raises ValueError before anything changes, on route (c) as elsewhere."""
    m = omtl.ROMCO(n_tasks=2, eta1=1e150, lambda1=1e-4)
    m._svt_route = route
    X, y, tasks = np.ones((3, 3)), [1, -1, 1], [0, 1, 0]
    m.learn(X, y, tasks=tasks)
    before = pickle.dumps(m)
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="ROMCO gradient step overflows"):
        m.learn(np.full((5, 3), 1e10), [-1, 1, -1, 1, -1], tasks=[0, 1, 0, 1, 0])
    assert pickle.dumps(m) == before


@pytest.mark.parametrize("route", ["auto", "qr", "brand"])
@pytest.mark.parametrize("lambda1", [0.8, 1.0])
@pytest.mark.parametrize("d", [6, 3])
def test_forced_routes_stay_exact_on_rank_deficient_updates(route, lambda1, d):
    """Strong trace-norm shrinkage keeps U rank-deficient, where a one-sided Jacobi SVD with
    running column norms (and nalgebra's SVD at tolerance ε) once lost up to 1e-2 relative;
    with d < k (wide U) route (a) once truncated R to its first d rows, which is wrong when a
    zero column (a task not yet updated) shifts R's rows, and lost up to 2e-4."""
    worst = 0.0
    for seed in range(3):
        X, y, tasks = random_stream(n=1500, d=d, k=5, seed=seed)
        native = omtl.ROMCO(n_tasks=5, lambda1=lambda1)
        native._svt_route = route
        reference = ref.ROMCO(n_tasks=5, lambda1=lambda1)
        if not compare_runs(native, reference, X, y, tasks).complete:
            continue  # a tie parted the runs (parity.py)
        scale = max(np.abs(reference.U_).max(), 1e-300)
        worst = max(worst, np.abs(native.U_ - reference.U_).max() / scale)
    assert worst < 1e-9


@pytest.mark.parametrize("d", [4 * K - 1, 4 * K, 40])
def test_auto_route_updates_the_gram_eigendecomposition_on_p1(d):
    """By default a singleton round takes route (b) with the eigendecomposition of C updated
    from the previous one (two secular equations) instead of recomputed; with the default
    θ = 1e-5 < 1e-6 σ_max that is accurate because U stays well conditioned here, and the run
    matches the reference's SVD at every update to 1e-9."""
    X, y, tasks = random_stream(n=1200, d=d, k=K, seed=3)
    m, r = omtl.ROMCO(n_tasks=K, eta1=0.5), ref.ROMCO(n_tasks=K, eta1=0.5)
    for s in range(0, len(y), 200):
        sl = slice(s, s + 200)
        assert compare_runs(m, r, X[sl], y[sl], tasks[sl]).complete, "a tie parted the runs: pick another stream"
        assert rel_err(m.U_, r.U_) <= 1e-9, s
    diag = m._diagnostics()
    updates = m.n_updates_
    assert diag["n_brand_svt"] == 0 and diag["n_gram_svt"] == updates > 200, diag
    # Full eigendecompositions: the first update of each column and the first after a resync.
    assert diag["n_eigen_updates"] >= updates - K - updates // 100 - 1, diag


def _stream_in_chunks(protocol, k, d, *, seed, sparse, round_size, chunk_rounds, **stream):
    """1,600 random rows of k tasks and d features, as protocol P1 rows or P2 rounds of
    ``round_size``, and the slices to feed them in (200 rows, or ``chunk_rounds`` rounds)."""
    X, y, tasks = random_stream(n=1600, d=d, k=k, seed=seed, sparse=sparse, **stream)
    if protocol == "P1":
        return X, y, tasks, None, [slice(a, a + 200) for a in range(0, len(y), 200)]
    s = Stream(X=X, y=y, tasks=tasks, n_tasks=k, name="rounds").as_rounds(round_size)
    return s.X, s.y, s.tasks, s.rounds, round_chunks(s.rounds, chunk_rounds)


@pytest.mark.parametrize("protocol", ["P1", "P2"])
@pytest.mark.parametrize("params", [{}, {"eta1": 0.5, "lambda1": 0.3}], ids=["defaults", "strong-lambda1"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_wide_u_takes_the_row_side_and_matches_the_reference(protocol, params, sparse):
    """Wide U (more live tasks than features, like School: d = 28, k = 139): route (b) runs on
    the d x d Gram matrix of the rows, D = UUᵀ, with its eigendecomposition updated when one
    column changed (P1) and recomputed from the exact D̂ otherwise (P2 rounds of several tasks,
    and after each resync); U follows the reference's SVD to 1e-9 at every checkpoint."""
    k, d = 16, 5
    X, y, tasks, rounds, slices = _stream_in_chunks(protocol, k, d, seed=7, sparse=sparse, round_size=2, chunk_rounds=20)
    m, r = omtl.ROMCO(n_tasks=k, **params), ref.ROMCO(n_tasks=k, **params)
    for sl in slices:
        kw = {} if rounds is None else {"rounds": rounds[sl]}
        assert compare_runs(m, r, X[sl], y[sl], tasks[sl], **kw).complete, "a tie parted the runs: pick another stream"
        assert rel_err(m.U_, r.U_) <= 1e-9
        assert rel_err(m.V_, r.V_) <= 1e-9
        assert m.rank_ == r.rank_
    diag = m._diagnostics()
    assert diag["n_numerical_failures"] == 0 and diag["n_qr_svt"] == 0, diag
    if params:  # a strong threshold zeroes U now and then: the live set restarts from the column side
        assert diag["n_row_svt"] >= 0.5 * m.n_updates_, diag
        return
    assert diag["n_row_svt"] >= m.n_updates_ - 2 * d, diag  # the column side only while <= d tasks are live
    if protocol == "P1":
        assert diag["n_eigen_updates"] >= m.n_updates_ - 2 * d - m.n_updates_ // 100 - 2, diag


@pytest.mark.parametrize("protocol", ["P1", "P2"])
@pytest.mark.parametrize(
    "params", [{}, {"eta1": 0.5, "lambda1": 1.0, "lambda2": 0.01}], ids=["defaults", "strong-lambda1"]
)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_tall_u_held_factored_matches_the_reference(protocol, params, sparse):
    """Tall U (d >= 8 k², like Sentiment: d = 473,856, k = 4) is held as U = W Π with the k x k
    Π accumulated lazily, so an update touches only the non-zero rows of x (plus k x k work);
    a strong threshold zeroes singular values now and then, which folds Π back into W. U, V
    and the scores follow the reference's SVD to 1e-9 at every checkpoint, and a pickle taken
    while U is factored continues bit-identically."""
    k, d = K, 8 * K * K + 10
    X, y, tasks, rounds, slices = _stream_in_chunks(protocol, k, d, seed=11, sparse=sparse, round_size=4, chunk_rounds=50, density=0.1)
    m, r = omtl.ROMCO(n_tasks=k, **params), ref.ROMCO(n_tasks=k, **params)
    factored_seen = 0
    for i, sl in enumerate(slices):
        kw = {} if rounds is None else {"rounds": rounds[sl]}
        twin = pickle.loads(pickle.dumps(m)) if i == len(slices) // 2 else None
        assert compare_runs(m, r, X[sl], y[sl], tasks[sl], **kw).complete, "a tie parted the runs: pick another stream"
        if twin is not None:
            if rounds is None:
                twin.learn(X[sl], y[sl], tasks=tasks[sl])
            else:
                twin.learn_rounds(X[sl], y[sl], tasks=tasks[sl], rounds=rounds[sl])
            np.testing.assert_array_equal(twin.U_, m.U_)
            np.testing.assert_array_equal(twin.V_, m.V_)
        assert rel_err(m.U_, r.U_) <= 1e-9 or (not m.U_.any() and not r.U_.any())
        assert rel_err(m.V_, r.V_) <= 1e-9
        assert m.rank_ == r.rank_
        factored_seen += m._diagnostics()["u_factored"]
    diag = m._diagnostics()
    assert diag["n_numerical_failures"] == 0 and diag["n_qr_svt"] == 0, diag
    if not params:
        assert factored_seen >= 1 and diag["n_folds"] == 0, diag
    elif protocol == "P1":  # the strong threshold zeroes singular values of the factored U
        assert diag["n_folds"] > 0, diag
