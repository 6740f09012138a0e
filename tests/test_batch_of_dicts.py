"""A batch may be a list of dicts, read as ``learn_one`` reads one; strided rows and labels
(columns of 2-D arrays, Fortran-ordered rows, ``y[::2]``) are read through their strides."""

import numpy as np
import pytest

import omtl
from omtl import reference as ref

EVENTS = [{"cheap": 1.0, "pills": 2.0}, {"lunch": 1.0, "from": "bob"}, {"cheap": 1.0, "now": 0.5}, {}]
USERS = ["ann", "bob", "ann", "cy"]
Y = np.array([1, -1, 1, -1])


@pytest.mark.parametrize("module", [omtl, ref], ids=["native", "reference"])
def test_a_list_of_named_dicts_learns_as_its_hashed_matrix(module):
    by_dicts, by_matrix = module.MTLinear(n_features=2**10), module.MTLinear(n_features=2**10)
    X = omtl.hash_features(EVENTS, n_features=2**10)
    np.testing.assert_array_equal(by_dicts.learn(EVENTS, Y, tasks=USERS), by_matrix.learn(X, Y, tasks=USERS))
    by_dicts.partial_fit(EVENTS, Y, tasks=USERS)
    by_matrix.partial_fit(X, Y, tasks=USERS)
    np.testing.assert_array_equal(by_dicts.decision_function(EVENTS, tasks=USERS),
                                  by_matrix.decision_function(X, tasks=USERS))
    np.testing.assert_array_equal(by_dicts.predict(EVENTS, tasks=USERS), by_matrix.predict(X, tasks=USERS))


def test_a_list_of_dicts_learns_as_learn_one_does_event_by_event():
    events = [{0: 1.0, 3: 2.0}, {1: 1.0}, {3: -1.0, 2: 0.5}]
    batch, one = omtl.MTLinear(), omtl.MTLinear()
    predicted = batch.learn(events, [1, -1, 1], tasks=[0, 1, 0])
    singles = [one.learn_one(x, y, task=t) for x, y, t in zip(events, [1, -1, 1], [0, 1, 0])]
    np.testing.assert_array_equal(predicted, singles)
    np.testing.assert_array_equal(batch.decision_function(events, tasks=[0, 1, 0]),
                                  [one.decision_one(x, task=t) for x, t in zip(events, [0, 1, 0])])


def test_named_dicts_against_a_model_of_another_width_are_refused_unchanged():
    model = omtl.MTLinear()
    model.learn(np.ones((2, 3)), [1, -1], tasks=[0, 1])
    before = model.decision_function(np.ones((1, 3)), tasks=[0])
    with pytest.raises(ValueError, match="n_features"):
        model.learn([{"a": 1.0}], [1], tasks=[0])
    assert model.n_seen_ == 2
    np.testing.assert_array_equal(model.decision_function(np.ones((1, 3)), tasks=[0]), before)


def test_strided_rows_and_labels_are_read_through_their_strides():
    X = np.random.default_rng(0).normal(size=(8, 8))
    strided, contiguous = omtl.MTLinear(), omtl.MTLinear()
    for i in range(8):
        assert strided.learn_one(X[:, i], 1 if i % 2 else -1, task=i % 2) == contiguous.learn_one(
            np.ascontiguousarray(X[:, i]), 1 if i % 2 else -1, task=i % 2)
    fortran = np.asfortranarray(X)
    assert strided.predict_one(fortran[3], task=0) == contiguous.predict_one(X[3].copy(), task=0)
    y = np.array([1, 0, -1, 0, 1, 0, -1, 0])
    a, b = omtl.MTLinear(), omtl.MTLinear()
    np.testing.assert_array_equal(a.learn(X[:4], y[::2], tasks=[0, 0, 1, 1]),
                                  b.learn(X[:4], y[::2].copy(), tasks=[0, 0, 1, 1]))
