"""``gamma="scale"`` (scikit-learn SVC's 1 / (d Var X), from the first batch), now the rbf default."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_stream
from parity import assert_same_run
from test_persistence import make_file, split_file

import omtl
import omtl.reference as ref
from omtl._kernel_params import scale_gamma
from omtl.kernels import kernel_matrix
from omtl.persistence import dumps, loads

KERNEL_CLASSES = [
    (omtl.MTPerceptron, ref.MTPerceptron, {"kernel": "rbf"}),
    (omtl.KernelPerceptron, ref.KernelPerceptron, {"kernel": "rbf"}),
    (omtl.MTRBP, ref.MTRBP, {"budget": 15, "seed": 3}),
    (omtl.MTFORG, ref.MTFORG, {"budget": 15}),
    (omtl.MTBPRJ, ref.MTBPRJ, {"budget": 15, "eta": 0.4}),
    (omtl.MTBPRJ2, ref.MTBPRJ2, {"budget": 15, "eta": 0.4}),
]
IDS = [c[0].__name__ for c in KERNEL_CLASSES]


def test_scale_gamma_is_svc_s_value_dense_and_sparse():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 6)) * 3.0
    X[rng.random(X.shape) < 0.5] = 0.0
    expected = 1.0 / (6 * X.var())
    assert scale_gamma(X) == pytest.approx(expected, rel=1e-12)
    assert scale_gamma(sp.csr_matrix(X)) == pytest.approx(expected, rel=1e-12)  # implicit zeros count
    # One row: the variance over its d entries; constant entries (Var = 0): 1/d.
    assert scale_gamma(X[:1]) == pytest.approx(1.0 / (6 * X[:1].var()))
    assert scale_gamma(np.zeros((3, 4))) == 0.25
    assert scale_gamma(np.ones((1, 5))) == 0.2
    assert scale_gamma(sp.csr_matrix((2, 8))) == 0.125
    # Any sparse layout, duplicate entries summed (one entry of the matrix).
    assert scale_gamma(sp.csc_matrix(X)) == pytest.approx(expected, rel=1e-12)
    dup = sp.csr_matrix((np.array([1.0, 2.0, 4.0]), np.array([0, 0, 1]), np.array([0, 2, 3])), shape=(2, 2))
    assert not dup.has_canonical_format
    assert scale_gamma(dup) == pytest.approx(1.0 / (2 * dup.toarray().var()), rel=1e-12)
    assert dup.data.tolist() == [1.0, 2.0, 4.0]  # the caller's matrix untouched


@pytest.mark.parametrize(("native", "reference", "params"), KERNEL_CLASSES, ids=IDS)
def test_rbf_default_is_scale_from_the_first_batch_and_stays_fixed(native, reference, params):
    X, y, tasks = random_stream(n=160, d=5, k=3, seed=1)
    X = X * 4.0
    for gamma in (None, "scale"):
        model = native(n_tasks=3, gamma=gamma, **params)
        model.partial_fit(X[:30], y[:30], tasks=tasks[:30])
        g = model.kernel_.gamma
        assert g == pytest.approx(1.0 / (5 * X[:30].var()))
        model.partial_fit(X[30:], y[30:], tasks=tasks[30:])  # later batches do not move it
        assert model.kernel_.gamma == g
        assert model.get_params()["gamma"] == gamma  # stored unchanged
    # The twin resolves the same value and makes the same predictions.
    assert_same_run(native(n_tasks=3, gamma="scale", **params), reference(n_tasks=3, gamma="scale", **params),
                    X, y, tasks)


def test_poly_scale_and_the_defaults_of_the_other_kernels():
    X, y, tasks = random_stream(n=50, d=4, k=2, seed=2)
    poly = omtl.MTPerceptron(n_tasks=2, kernel="poly", gamma="scale").partial_fit(X, y, tasks=tasks)
    assert poly.kernel_.gamma == pytest.approx(1.0 / (4 * X.var()))
    assert omtl.MTPerceptron(n_tasks=2, kernel="poly").partial_fit(X, y, tasks=tasks).kernel_.gamma == 1.0
    assert omtl.MTRBP(n_tasks=2, budget=5, gamma=0.3).partial_fit(X, y, tasks=tasks).kernel_.gamma == 0.3
    with pytest.raises(ValueError, match='gamma must be a positive number, None or "scale"'):
        omtl.MTPerceptron(n_tasks=2, kernel="rbf", gamma="auto").partial_fit(X, y, tasks=tasks)


def test_a_failed_first_batch_leaves_no_gamma_behind():
    X, y, tasks = random_stream(n=20, d=3, k=2, seed=3)
    model = omtl.MTRBP(n_tasks=2, budget=5, gamma="scale")
    before = pickle.dumps(model)
    bad = X.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError):
        model.partial_fit(bad, y, tasks=tasks)
    assert pickle.dumps(model) == before
    with pytest.raises(AttributeError):
        _ = model.kernel_
    # The next first batch sets it from its own rows.
    model.partial_fit(X[10:], y[10:], tasks=tasks[10:])
    assert model.kernel_.gamma == pytest.approx(1.0 / (3 * X[10:].var()))


def test_the_resolved_gamma_survives_pickle_copy_and_model_files(tmp_path):
    X, y, tasks = random_stream(n=80, d=4, k=2, seed=4)
    model = omtl.MTBPRJ(n_tasks=2, budget=10, eta=0.3).partial_fit(X[:40] * 3, y[:40], tasks=tasks[:40])
    g = model.kernel_.gamma
    path = tmp_path / "m.omtl"
    omtl.save(model, path)
    for other in (pickle.loads(pickle.dumps(model)), omtl.load(path)):
        assert other.kernel_.gamma == g
        np.testing.assert_array_equal(other.learn(X[40:], y[40:], tasks=tasks[40:]),
                                      model.__deepcopy__({}).learn(X[40:], y[40:], tasks=tasks[40:]))
    header, state = split_file(dumps(model))
    assert header["fitted"]["gamma_scale"] == g
    for bad in (-1.0, 0, "1", True):
        with pytest.raises(ValueError, match="gamma_scale must be a positive finite number"):
            loads(make_file({**header, "fitted": {**header["fitted"], "gamma_scale": bad}}, state))
    # Without the value a "scale" model cannot be rebuilt: the file is refused, not guessed at.
    del header["fitted"]["gamma_scale"]
    with pytest.raises(ValueError, match="not a valid omtl model file"):
        loads(make_file({**header, "params": {**header["params"], "gamma": "scale"}}, state))


def test_a_model_saved_before_scale_became_the_default_keeps_one_over_d():
    # Such a file holds gamma=None and an engine built with 1/d, and no resolved value.
    X, y, tasks = random_stream(n=60, d=5, k=2, seed=5)
    old = omtl.MTRBP(n_tasks=2, budget=8, gamma=0.2).partial_fit(X * 3, y, tasks=tasks)
    header, state = split_file(dumps(old))
    model = loads(make_file({**header, "params": {**header["params"], "gamma": None}}, state))
    assert model.kernel_.gamma == 0.2
    np.testing.assert_array_equal(model.decision_function(X, tasks=tasks), old.decision_function(X, tasks=tasks))


def test_kernel_matrix_scale_uses_the_first_argument():
    rng = np.random.default_rng(6)
    A, B = rng.normal(size=(5, 3)) * 2, rng.normal(size=(4, 3))
    g = 1.0 / (3 * A.var())
    expected = np.exp(-g * ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2))
    np.testing.assert_allclose(kernel_matrix(A, B, gamma="scale"), expected, rtol=1e-12)
    np.testing.assert_allclose(kernel_matrix(A, B), expected, rtol=1e-12)  # the rbf default
    np.testing.assert_allclose(kernel_matrix(A, B, kernel="poly"), (A @ B.T + 1.0) ** 2, rtol=1e-12)
