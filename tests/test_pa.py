"""Passive-Aggressive baselines (ALGORITHMS.md §6.1): INV-A1..A3 and scikit-learn agreement."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from conftest import random_stream

import omtl
import omtl.reference as ref

# This module's learners in the conformance and parity suites (see learner_table.py).
CONFORMANCE = [
    ("pa-global-pa1", omtl.PAGlobal, ref.PAGlobal, {}),
    ("pa-global-pa", omtl.PAGlobal, ref.PAGlobal, {"variant": "pa"}),
    ("pa-unique-pa1", omtl.PAUnique, ref.PAUnique, {"C": 0.3}),
    ("pa-unique-pa2", omtl.PAUnique, ref.PAUnique, {"variant": "pa2", "C": 0.5}),
]

K = 4
VARIANTS = ["pa", "pa1", "pa2"]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("impl", [omtl, ref], ids=["native", "reference"])
def test_inv_a1_global_with_one_task_is_unique(impl, variant):
    X, y, _ = random_stream(n=300, d=6, k=1, seed=1)
    g, u = impl.PAGlobal(n_tasks=1, variant=variant, C=0.4), impl.PAUnique(n_tasks=1, variant=variant, C=0.4)
    np.testing.assert_array_equal(g.learn(X, y, tasks=0), u.learn(X, y, tasks=0))
    np.testing.assert_array_equal(g.decision_function(X, tasks=0), u.decision_function(X, tasks=0))


def test_global_ignores_task_ids():
    X, y, tasks = random_stream(n=200, d=5, k=K, seed=2)
    a, b = omtl.PAGlobal(n_tasks=K), omtl.PAGlobal(n_tasks=K)
    np.testing.assert_array_equal(a.learn(X, y, tasks=tasks), b.learn(X, y, tasks=0))


@pytest.mark.parametrize("sparse", [False, True])
def test_inv_a2_pa_update_reaches_unit_margin(sparse):
    X, y, tasks = random_stream(n=150, d=6, k=K, seed=3, sparse=sparse)
    m = omtl.PAUnique(n_tasks=K, variant="pa")
    checked = 0
    for t in range(150):
        row = X[t : t + 1]
        f = m.decision_function(row, tasks=[tasks[t]])[0]
        m.learn(row, y[t : t + 1], tasks=[tasks[t]])
        sq = row.multiply(row).sum() if sparse else float((row @ row.T)[0, 0])
        if 1 - y[t] * f > 0 and sq > 0:
            after = y[t] * m.decision_function(row, tasks=[tasks[t]])[0]
            assert abs(after - 1.0) < 1e-9
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("impl", [omtl, ref], ids=["native", "reference"])
def test_inv_a3_pa1_with_large_c_is_pa(impl):
    X, y, tasks = random_stream(n=300, d=6, k=K, seed=4)
    # The largest step PA takes on this stream, from a replay of the reference.
    W = np.zeros((K, 6))
    worst = 0.0
    for t in range(300):
        loss = 1 - y[t] * (W[tasks[t]] @ X[t])
        if loss > 0:
            tau = loss / (X[t] @ X[t])
            worst = max(worst, tau)
            W[tasks[t]] += tau * y[t] * X[t]
    pa, pa1 = impl.PAUnique(n_tasks=K, variant="pa"), impl.PAUnique(n_tasks=K, variant="pa1", C=worst)
    np.testing.assert_array_equal(pa.learn(X, y, tasks=tasks), pa1.learn(X, y, tasks=tasks))
    np.testing.assert_allclose(pa.decision_function(X, tasks=tasks), pa1.decision_function(X, tasks=tasks), rtol=1e-12)
    # And a C just below it makes a difference (the test can fail).
    pa1_small = impl.PAUnique(n_tasks=K, variant="pa1", C=0.5 * worst)
    pa1_small.learn(X, y, tasks=tasks)
    assert not np.allclose(pa.decision_function(X, tasks=tasks), pa1_small.decision_function(X, tasks=tasks))


def sklearn_pa1_factories():
    from sklearn import linear_model

    out = []
    if hasattr(linear_model, "PassiveAggressiveClassifier"):

        def pa():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                return linear_model.PassiveAggressiveClassifier(C=1.0, fit_intercept=False)

        out.append(("PassiveAggressiveClassifier", pa))
    try:
        sgd = linear_model.SGDClassifier(loss="hinge", penalty=None, learning_rate="pa1", eta0=1.0, fit_intercept=False)
        sgd.partial_fit(np.ones((1, 2)), [1], classes=[-1, 1])
        out.append(
            (
                "SGDClassifier(learning_rate='pa1')",
                lambda: linear_model.SGDClassifier(
                    loss="hinge", penalty=None, learning_rate="pa1", eta0=1.0, fit_intercept=False
                ),
            )
        )
    except (ValueError, TypeError):
        pass
    return out


@pytest.mark.parametrize("sparse", [False, True])
def test_pa_unique_matches_scikit_learn_per_task(sparse):
    factories = sklearn_pa1_factories()
    if not factories:
        pytest.skip("this scikit-learn has neither PassiveAggressiveClassifier nor SGDClassifier(learning_rate='pa1')")
    X, y, tasks = random_stream(n=160, d=6, k=K, seed=5, sparse=sparse)
    ours = omtl.PAUnique(n_tasks=K, C=1.0)
    scores = np.zeros(160)
    for t in range(160):
        if ours._is_fitted():
            scores[t] = ours.decision_function(X[t : t + 1], tasks=[tasks[t]])[0]
        ours.learn(X[t : t + 1], y[t : t + 1], tasks=[tasks[t]])
    for name, make in factories:
        models = [make() for _ in range(K)]
        fitted = [False] * K
        theirs = np.zeros(160)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            for t in range(160):
                i = tasks[t]
                if fitted[i]:
                    theirs[t] = models[i].decision_function(X[t : t + 1])[0]
                models[i].partial_fit(X[t : t + 1], y[t : t + 1], classes=[-1, 1])
                fitted[i] = True
        np.testing.assert_allclose(scores, theirs, rtol=1e-9, atol=1e-12, err_msg=name)
        for i in range(K):
            np.testing.assert_allclose(
                ours.decision_function(np.eye(6), tasks=i), models[i].coef_[0], rtol=1e-9, atol=1e-12
            )


@pytest.mark.parametrize("cls", [omtl.PAUnique, omtl.PAGlobal, ref.PAUnique, ref.PAGlobal])
def test_pickling_mid_stream_continues_identically(cls):
    X, y, tasks = random_stream(n=200, d=5, k=K, seed=6, sparse=True)
    a = cls(n_tasks=K, variant="pa2")
    a.learn(X[:100], y[:100], tasks=tasks[:100])
    b = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(
        a.learn(X[100:], y[100:], tasks=tasks[100:]), b.learn(X[100:], y[100:], tasks=tasks[100:])
    )
    np.testing.assert_array_equal(a.decision_function(X, tasks=tasks), b.decision_function(X, tasks=tasks))
    assert a.n_updates_ == b.n_updates_


@pytest.mark.parametrize(
    "params, msg",
    [({"C": 0.0}, "`C`: must be a finite number > 0"), ({"C": float("inf")}, "`C`: must be a finite number > 0"),
     ({"C": "1"}, "C must be a real number"), ({"variant": "pa3"}, "variant")],
)
def test_bad_parameters(params, msg):
    """The engine's rule and message (XParams::check) for the native classes and the twin alike."""
    X, y, tasks = random_stream(n=10, d=3, k=K)
    messages = set()
    for cls in (omtl.PAUnique, omtl.PAGlobal, ref.PAUnique, ref.PAGlobal):
        m = cls(n_tasks=K, **params)
        with pytest.raises(ValueError, match=msg) as err:
            m.learn(X, y, tasks=tasks)
        messages.add(str(err.value))
        assert not m._is_fitted()
    assert len(messages) == 1


def test_bad_input_leaves_the_model_unchanged():
    X, y, tasks = random_stream(n=40, d=4, k=K, seed=7)
    m = omtl.PAUnique(n_tasks=K)
    m.learn(X[:20], y[:20], tasks=tasks[:20])
    before = pickle.dumps(m)
    bad = X[20:].copy()
    bad[5, 1] = np.inf
    with pytest.raises(ValueError):
        m.learn(bad, y[20:], tasks=tasks[20:])
    with pytest.raises(ValueError):
        m.learn(X[20:], y[20:], tasks=np.full(20, -1))
    assert pickle.dumps(m) == before


def test_zero_rows_and_counts():
    m = omtl.PAUnique(n_tasks=2, variant="pa")
    m.learn(np.zeros((3, 4)), [1, -1, 1], tasks=[0, 1, 0])
    assert m.n_updates_ == 0 and m.n_active_ == 0
    m.learn(np.eye(4)[:2], [1, -1], tasks=[0, 1])
    assert m.n_updates_ == 2
