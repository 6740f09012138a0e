"""Native learners against their NumPy reference twins on the same seeded streams."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_graph, random_stream
from learner_table import IDS, LEARNERS

import omtl
import omtl.reference as ref


def assert_same_run(native, reference, X, y, tasks, *, rtol=1e-9, chunk=50):
    """Feeds both learners the same chunks; predictions identical and scores close at every step."""
    for a in range(0, len(y), chunk):
        sl = slice(a, a + chunk)
        p_nat = native.learn(X[sl], y[sl], tasks=tasks[sl])
        p_ref = reference.learn(X[sl], y[sl], tasks=tasks[sl])
        np.testing.assert_array_equal(p_nat, p_ref, err_msg=f"predictions diverge in rows {a}..{a + chunk}")
    s_nat = native.decision_function(X, tasks=tasks)
    s_ref = reference.decision_function(X, tasks=tasks)
    np.testing.assert_allclose(s_nat, s_ref, rtol=rtol, atol=1e-12)
    assert native.n_active_ == reference.n_active_
    assert native.n_updates_ == reference.n_updates_
    assert native.n_mistakes_ == reference.n_mistakes_


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("entry", LEARNERS, ids=IDS)
def test_native_matches_reference(entry, sparse):
    _, native_cls, ref_cls, params = entry
    X, y, tasks = random_stream(n=240, d=7, k=4, seed=5, sparse=sparse)
    assert_same_run(native_cls(n_tasks=4, **params), ref_cls(n_tasks=4, **params), X, y, tasks)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("kernel", ["linear", "poly", "rbf"])
def test_mt_perceptron_parity_on_random_graphs(kernel, weighted):
    k = 6
    graph = random_graph(k, seed=3, weighted=weighted)
    X, y, tasks = random_stream(n=300, d=6, k=k, seed=11)
    params = {"graph": graph, "kernel": kernel}
    assert_same_run(omtl.MTPerceptron(n_tasks=k, **params), ref.MTPerceptron(n_tasks=k, **params), X, y, tasks)
