"""The shared learner API, run on every native learner and its reference twin (learner_table)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_stream
from learner_table import IDS, LEARNERS

K = 4
BOTH = [pytest.param((e[1], e[3]), id=f"{e[0]}-native") for e in LEARNERS] + [
    pytest.param((e[2], e[3]), id=f"{e[0]}-reference") for e in LEARNERS
]


def fitted(cls_params, n=120, sparse=False, seed=0):
    cls, params = cls_params
    X, y, tasks = random_stream(n=n + 60, d=6, k=K, seed=seed, sparse=sparse)
    model = cls(n_tasks=K, **params)
    model.partial_fit(X[:n], y[:n], tasks=tasks[:n])
    return model, (X[n:], y[n:], tasks[n:])


def snapshot(model):
    return pickle.dumps(model)


@pytest.mark.parametrize("cls_params", BOTH)
def test_bad_input_raises_and_leaves_the_model_unchanged(cls_params):
    model, (X, y, tasks) = fitted(cls_params)
    before = snapshot(model)
    Xnan = X.copy()
    Xnan[2, 1] = np.nan
    Xinf = X.copy()
    Xinf[0, 0] = np.inf
    bad_calls = [
        (ValueError, Xnan, y, tasks),
        (ValueError, Xinf, y, tasks),
        (ValueError, X[:-1], y, tasks),  # X/y length mismatch
        (ValueError, X, y, tasks[:-1]),  # tasks length mismatch
        (ValueError, X, y, np.where(np.arange(len(y)) == 5, K, tasks)),  # unknown task
        (ValueError, X, y, np.where(np.arange(len(y)) == 5, -1, tasks)),
        (ValueError, X, np.where(np.arange(len(y)) == 3, 2, y), tasks),  # label outside the sets
        (ValueError, X, np.where(np.arange(len(y)) == 3, 0, y), tasks),  # -1 mixed with 0
        (ValueError, X[:, :-1], y, tasks),  # feature count differs from earlier calls
        (ValueError, X[0], y[:1], tasks[:1]),  # 1-D X
        (TypeError, np.array([["a"] * X.shape[1]] * len(y)), y, tasks),  # non-numeric
        (TypeError, X, y, tasks.astype(float) + 0.5),  # non-integer task ids
        (TypeError, X, np.array(["yes"] * len(y)), tasks),
        (TypeError, X, y, None),
    ]
    for exc, Xb, yb, tb in bad_calls:
        for method in ("partial_fit", "learn"):
            with pytest.raises(exc):
                getattr(model, method)(Xb, yb, tasks=tb)
            assert snapshot(model) == before, f"{method} changed the model on bad input {exc.__name__}"
    with pytest.raises(ValueError):
        model.decision_function(Xnan, tasks=tasks)
    with pytest.raises(ValueError):
        model.predict(X, tasks=np.full(len(y), K))
    assert snapshot(model) == before


NON_FINITE = [np.nan, np.inf, -np.inf]


def with_value_at_end(X, value):
    """A copy of X whose last stored value is ``value`` (the end of the batch, so all of X is scanned)."""
    X = X.copy()
    if sp.issparse(X):
        X.data[-1] = value
    else:
        X[-1, -1] = value
    return X


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("cls_params", BOTH)
def test_nan_or_infinity_in_X_is_refused_by_every_entry_point(cls_params, sparse):
    """Native learners leave the scan to the Rust core, reference learners scan in Python: the
    error must read alike and leave the model as it was, fitted or not."""
    cls, params = cls_params
    X, y, tasks = random_stream(n=60, d=6, k=K, seed=5, sparse=sparse)
    rounds = np.arange(30)
    calls = {
        "partial_fit": lambda m, Xb: m.partial_fit(Xb, y[30:], tasks=tasks[30:]),
        "learn": lambda m, Xb: m.learn(Xb, y[30:], tasks=tasks[30:]),
        "learn_rounds": lambda m, Xb: m.learn_rounds(Xb, y[30:], tasks=tasks[30:], rounds=rounds),
        "decision_function": lambda m, Xb: m.decision_function(Xb, tasks=tasks[30:]),
        "predict": lambda m, Xb: m.predict(Xb, tasks=tasks[30:]),
    }
    fresh = cls(n_tasks=K, **params)
    model = cls(n_tasks=K, **params)
    model.partial_fit(X[:30], y[:30], tasks=tasks[:30])
    before = snapshot(model)
    for value in NON_FINITE:
        Xb = with_value_at_end(X[30:], value)
        for name, call in calls.items():
            for m in (fresh, model):
                with pytest.raises(ValueError, match="NaN or infinity"):
                    call(m, Xb)
            assert not fresh._is_fitted() and not hasattr(fresh, "n_features_in_"), name
            assert snapshot(model) == before, name
    model.partial_fit(X[30:], y[30:], tasks=tasks[30:])  # and the model still learns
    assert model.n_seen_ == 60


@pytest.mark.parametrize("cls_params", BOTH)
def test_invalid_hyper_parameters_fail_on_the_first_batch_without_side_effects(cls_params):
    cls, params = cls_params
    X, y, tasks = random_stream(n=20, d=4, k=K)
    model = cls(n_tasks=K, **{**params, "kernel": "sigmoid"}) if "kernel" in cls._param_names() else cls(n_tasks=0, **params)
    with pytest.raises(ValueError):
        model.partial_fit(X, y, tasks=tasks)
    assert not hasattr(model, "n_features_in_")


@pytest.mark.parametrize("cls_params", BOTH)
def test_empty_input_is_a_no_op(cls_params):
    cls, params = cls_params
    model = cls(n_tasks=K, **params)
    out = model.learn(np.zeros((0, 6)), np.zeros(0), tasks=np.zeros(0, dtype=int))
    assert out.shape == (0,)
    assert model.n_updates_ == 0 and model.n_active_ == 0
    model, (X, y, tasks) = fitted(cls_params)
    before = snapshot(model)
    model.partial_fit(X[:0], y[:0], tasks=tasks[:0])
    assert model.decision_function(X[:0], tasks=tasks[:0]).shape == (0,)
    assert snapshot(model) == before


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("cls_params", BOTH)
def test_pickled_mid_stream_continues_exactly(cls_params, sparse):
    model, (X, y, tasks) = fitted(cls_params, sparse=sparse)
    clone = pickle.loads(pickle.dumps(model))
    a = model.learn(X, y, tasks=tasks)
    b = clone.learn(X, y, tasks=tasks)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.decision_function(X, tasks=tasks), clone.decision_function(X, tasks=tasks))
    assert (model.n_seen_, model.n_mistakes_, model.n_updates_, model.n_active_) == (
        clone.n_seen_,
        clone.n_mistakes_,
        clone.n_updates_,
        clone.n_active_,
    )


@pytest.mark.parametrize("cls_params", BOTH)
def test_label_forms_and_sign_convention(cls_params):
    cls, params = cls_params
    X, y, tasks = random_stream(n=80, d=5, k=K, seed=3)
    fresh = cls(n_tasks=K, **params)
    assert fresh.predict(X[:3], tasks=0).tolist() == [1, 1, 1]  # empty model: score 0 predicts +1
    ref = cls(n_tasks=K, **params).learn(X, y, tasks=tasks)
    assert set(np.unique(ref)) <= {-1, 1}
    zero_one = cls(n_tasks=K, **params)
    out01 = zero_one.learn(X, (y > 0).astype(int), tasks=tasks)
    np.testing.assert_array_equal(out01, (ref > 0).astype(int))
    assert set(np.unique(zero_one.predict(X, tasks=tasks))) <= {0, 1}
    boolean = cls(n_tasks=K, **params)
    outb = boolean.learn(X, y > 0, tasks=tasks)
    assert outb.dtype == bool
    np.testing.assert_array_equal(outb, ref > 0)
    assert boolean.predict(X, tasks=tasks).dtype == bool
    assert list(boolean.classes_) == [False, True]


@pytest.mark.parametrize("cls_params", BOTH)
def test_counters_chunking_and_scalar_tasks(cls_params):
    cls, params = cls_params
    X, y, tasks = random_stream(n=150, d=5, k=K, seed=9)
    whole = cls(n_tasks=K, **params)
    pred = whole.learn(X, y, tasks=tasks)
    pieces = cls(n_tasks=K, **params)
    parts = [pieces.learn(X[a : a + 7], y[a : a + 7], tasks=tasks[a : a + 7]) for a in range(0, 150, 7)]
    np.testing.assert_array_equal(np.concatenate(parts), pred)
    assert whole.n_seen_ == 150
    assert whole.n_mistakes_ == int(np.sum(pred != y))
    assert whole.n_updates_ >= 1 and whole.n_active_ >= 1
    assert whole.n_features_in_ == 5
    np.testing.assert_array_equal(whole.active_tasks_, np.unique(tasks))
    one_task = cls(n_tasks=K, **params)
    np.testing.assert_array_equal(one_task.learn(X, y, tasks=2), cls(n_tasks=K, **params).learn(X, y, tasks=np.full(150, 2)))


@pytest.mark.parametrize("cls_params", BOTH)
def test_input_is_not_mutated_and_float32_and_lists_work(cls_params):
    cls, params = cls_params
    X, y, tasks = random_stream(n=60, d=5, k=K, seed=2)
    X32 = X.astype(np.float32)
    copies = (X32.copy(), y.copy(), tasks.copy())
    a = cls(n_tasks=K, **params).learn(X32, y, tasks=tasks)
    np.testing.assert_array_equal(X32, copies[0])
    np.testing.assert_array_equal(y, copies[1])
    np.testing.assert_array_equal(tasks, copies[2])
    b = cls(n_tasks=K, **params).learn(X32.astype(np.float64), y, tasks=tasks)
    np.testing.assert_array_equal(a, b)
    c = cls(n_tasks=K, **params).learn(X32.astype(np.float64).tolist(), y.tolist(), tasks=tasks.tolist())
    np.testing.assert_array_equal(a, c)
    Xs = sp.coo_matrix(X)  # other sparse formats are converted
    d = cls(n_tasks=K, **params).learn(Xs, y, tasks=tasks)
    np.testing.assert_array_equal(a, d)


@pytest.mark.parametrize("entry", LEARNERS, ids=IDS)
def test_hyper_parameters_are_keyword_only_and_cloneable(entry):
    from sklearn.base import clone

    _, cls, _, params = entry
    with pytest.raises(TypeError):
        cls(K)
    model = cls(n_tasks=K, **params)
    assert model.get_params()["n_tasks"] == K
    for name, value in params.items():
        assert model.get_params()[name] is value
    twin = clone(model)
    assert twin.get_params() == model.get_params() and twin is not model
    with pytest.raises(ValueError):
        model.set_params(no_such_parameter=1)
    assert repr(model).startswith(cls.__name__ + "(")


def _documented_parameters(cls) -> str:
    """The Parameters section of ``cls``'s docstring and of the classes it refers to ("As ``X``")."""
    import re

    import omtl.learners

    doc = cls.__doc__ or ""
    section = doc.split("Parameters\n    ----------", 1)[-1].split("Attributes\n", 1)[0]
    for name in re.findall(r"[Aa]s ``(\w+)``", section):
        if not hasattr(omtl.learners, name):
            continue  # a parameter named in code ("as ``eta2``"), not a class
        section += _documented_parameters(getattr(omtl.learners, name))
    return section


@pytest.mark.parametrize("entry", LEARNERS, ids=IDS)
def test_every_hyper_parameter_has_a_documented_default(entry):
    import inspect

    from sklearn.base import clone

    _, native, reference, _ = entry
    for cls in (native, reference):
        signature = inspect.signature(cls.__init__)
        for name, parameter in signature.parameters.items():
            if name == "self":
                continue
            assert parameter.default is not inspect.Parameter.empty, f"{cls.__name__}({name}=...) has no default"
            # a twin's docstring points at its native class
            assert name in _documented_parameters(native), f"{native.__name__}'s docstring does not document {name}"
        model = cls()  # scikit-learn's and River's clone build a learner from its defaults
        assert clone(model).get_params() == model.get_params()
    if "budget" in native._param_names():
        assert native().budget == 1000 and "default=1000" in native.__doc__ + _documented_parameters(native)


@pytest.mark.parametrize("cls_params", BOTH)
def test_a_column_vector_y_is_raveled_with_a_data_conversion_warning(cls_params):
    import warnings

    from sklearn.exceptions import DataConversionWarning

    model, (X, y, tasks) = fitted(cls_params)
    twin = pickle.loads(snapshot(model))
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        column = model.learn(X, y.reshape(-1, 1), tasks=tasks)
    np.testing.assert_array_equal(column, twin.learn(X, y, tasks=tasks))
    np.testing.assert_array_equal(model.decision_function(X, tasks=tasks), twin.decision_function(X, tasks=tasks))
    assert model.n_seen_ == twin.n_seen_
    # Any other 2-D y is refused; the warning turned into an error leaves the model as it was.
    before = snapshot(model)
    with pytest.raises(ValueError, match="1-D"):
        model.partial_fit(X, np.c_[y, y], tasks=tasks)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataConversionWarning)
        with pytest.raises(DataConversionWarning):
            model.partial_fit(X, y.reshape(-1, 1), tasks=tasks)
    assert snapshot(model) == before
