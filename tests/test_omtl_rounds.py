"""OMTL (Dekel, Long & Singer) on protocol P2 rounds (ALGORITHMS.md §1.2, §6.2): native against
reference, INV-O1, and the difference a joint round update makes."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import pickled_midway, run_rounds
from conftest import round_stream as shared_round_stream
from parity import compare_runs, round_chunks

import omtl
import omtl.reference as ref

K = 4
CONFIGS = [
    {},
    {"global_norm": "l2", "C": 0.3},
    {"global_norm": "l1", "C": 0.5},
    {"global_norm": "linf", "explicit": True, "C": 0.8},
    {"global_norm": "l2", "explicit": True},
    {"global_norm": "l1", "explicit": True, "C": 0.2},
]


def round_stream(*, scale=2.0, **kwargs):
    """The shared round stream, its rows scaled by 2 unless said otherwise."""
    return shared_round_stream(scale=scale, **kwargs)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("params", CONFIGS, ids=[str(i) for i in range(len(CONFIGS))])
def test_rounds_native_matches_reference(params, sparse):
    X, y, tasks, rounds = round_stream(sparse=sparse)
    nat, rf = omtl.OMTL(n_tasks=K, **params), ref.OMTL(n_tasks=K, **params)
    if compare_runs(nat, rf, X, y, tasks, rounds=rounds, slices=round_chunks(rounds, 7)).complete:
        np.testing.assert_allclose(nat.coef_, rf.coef_, rtol=1e-9, atol=1e-12)
        assert nat.n_updates_ == rf.n_updates_ and nat.n_mistakes_ == rf.n_mistakes_
    assert nat._diagnostics()["n_rounds"] == rf._diagnostics()["n_rounds"] == rounds.max() + 1


@pytest.mark.parametrize("C", [0.1, 1.0])
def test_inv_o1_l1_rounds_equal_pa_unique(C):
    X, y, tasks, rounds = round_stream(seed=17)
    a = omtl.OMTL(n_tasks=K, global_norm="l1", C=C)
    b = omtl.PAUnique(n_tasks=K, C=C)
    np.testing.assert_array_equal(run_rounds(a, X, y, tasks, rounds), b.learn_rounds(X, y, tasks=tasks, rounds=rounds))
    np.testing.assert_allclose(a.decision_function(X, tasks=tasks), b.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-12)
    assert a.n_updates_ == b.n_updates_


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_joint_rounds_differ_from_flattening(norm):
    """linf/l2 share the budget C within a round: with several tasks per round the model differs
    from the singleton-round (flattened) run, which is PA-I per task."""
    X, y, tasks, rounds = round_stream(seed=23, scale=1.0)
    joint = omtl.OMTL(n_tasks=K, global_norm=norm, C=0.1)
    joint.learn_rounds(X, y, tasks=tasks, rounds=rounds)
    flat = omtl.OMTL(n_tasks=K, global_norm=norm, C=0.1)
    flat.learn(X, y, tasks=tasks)
    assert not np.allclose(joint.coef_, flat.coef_)
    # With a shared budget, a round moves the weights by at most C in total (linf) / in l2.
    assert np.abs(joint.coef_).sum() < np.abs(flat.coef_).sum()
    pa = omtl.PAUnique(n_tasks=K, C=0.1)
    pa.learn(X, y, tasks=tasks)
    np.testing.assert_allclose(flat.decision_function(X, tasks=tasks), pa.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-12)


def test_singleton_rounds_equal_the_p1_run_and_pickling_mid_rounds():
    X, y, tasks, rounds = round_stream(seed=2)
    a = omtl.OMTL(n_tasks=K)
    b = omtl.OMTL(n_tasks=K)
    np.testing.assert_array_equal(a.learn(X, y, tasks=tasks), b.learn_rounds(X, y, tasks=tasks, rounds=np.arange(len(y))))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    half = int(np.searchsorted(rounds, rounds.max() // 2))
    m, clone = pickled_midway(omtl.OMTL(n_tasks=K, global_norm="l2"), X, y, tasks, rounds, half)
    np.testing.assert_array_equal(m.coef_, clone.coef_)


def test_bad_rounds_leave_the_model_unchanged():
    X, y, tasks, rounds = round_stream(n=60)
    m = omtl.OMTL(n_tasks=K)
    m.learn_rounds(X, y, tasks=tasks, rounds=rounds)
    before = pickle.dumps(m)
    with pytest.raises(ValueError):
        m.learn_rounds(X[:2], y[:2], tasks=[1, 1], rounds=[0, 0])  # one task twice in a round
    with pytest.raises(ValueError):
        m.learn_rounds(X[:2], y[:2], tasks=[1, 2], rounds=[3, 2])  # decreasing round ids
    assert pickle.dumps(m) == before
