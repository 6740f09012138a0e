"""The per-event API (learn_one, predict_one, decision_one, predict_proba_one) of every learner and
its reference twin: one event at a time equals one batch (NumPy rows, int-column dicts, str-name
dicts hashed as scikit-learn's FeatureHasher), bad input changes nothing, threads lose nothing."""

import copy
import math
import pickle
import threading
from decimal import Decimal

import numpy as np
import pytest
import scipy.sparse as sp
from learner_table import IDS, LEARNERS

import omtl

K = 4


def _kwargs(params: dict) -> dict:
    # gamma="scale" is read from the first batch, which one event cannot match: explicit gamma.
    if params.get("kernel") in ("rbf", "poly") and params.get("gamma") is None:
        return {**params, "gamma": 0.4}
    return params


def _stream(n=90, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(size=X.shape) < 0.3] = 0.0  # some zeros, absent from the dicts
    tasks = rng.integers(0, K, size=n)
    y = np.where(X[:, 0] + 0.3 * X[:, 1] * (tasks % 2 * 2 - 1) + 0.2 * rng.normal(size=n) > 0, 1, -1)
    return X, y, tasks


def _native_bytes(model):
    learner = getattr(model._core, "_learner", None)
    return None if learner is None else bytes(learner.to_bytes())


def _assert_same_model(a, b, X, tasks):
    assert (a.n_seen_, a.n_mistakes_) == (b.n_seen_, b.n_mistakes_)
    np.testing.assert_array_equal(a.n_seen_per_task_, b.n_seen_per_task_)
    np.testing.assert_array_equal(a.tasks_, b.tasks_)
    np.testing.assert_allclose(a.decision_function(X, tasks=tasks), b.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-12)
    if _native_bytes(a) is not None:
        assert _native_bytes(a) == _native_bytes(b)


def _one_at_a_time(model, events, y, tasks):
    return [model.learn_one(x, v, task=t) for x, v, t in zip(events, y.tolist(), tasks.tolist())]


@pytest.mark.filterwarnings("ignore:an instance has K'")  # MTFORG's radius warning
@pytest.mark.parametrize("twin", [False, True], ids=["native", "twin"])
@pytest.mark.parametrize("entry", LEARNERS, ids=IDS)
def test_numpy_rows_equal_one_batch(entry, twin):
    _, native, reference, params = entry
    cls = reference if twin else native
    X, y, tasks = _stream(n=50 if twin else 90)
    batch = cls(n_tasks=K, **_kwargs(params))
    expected = batch.learn(X, y, tasks=tasks)
    events = cls(n_tasks=K, **_kwargs(params))
    got = _one_at_a_time(events, list(X), y, tasks)
    assert got == expected.tolist()
    assert all(type(p) is int for p in got)
    _assert_same_model(events, batch, X, tasks)
    scores = [events.decision_one(x, task=t) for x, t in zip(X[:10], tasks[:10].tolist())]
    np.testing.assert_allclose(scores, batch.decision_function(X[:10], tasks=tasks[:10]), rtol=1e-9, atol=1e-12)
    assert all(type(s) is float for s in scores)
    assert [events.predict_one(x, task=t) for x, t in zip(X[:10], tasks[:10].tolist())] == batch.predict(
        X[:10], tasks=tasks[:10]).tolist()


@pytest.mark.filterwarnings("ignore:an instance has K'")
@pytest.mark.parametrize("entry", LEARNERS, ids=IDS)
def test_int_dicts_equal_one_csr_batch(entry):
    _, cls, _, params = entry
    X, y, tasks = _stream()
    d = X.shape[1]
    dicts = [{j: float(v) for j, v in enumerate(row) if v != 0.0} for row in X]
    batch = cls(n_tasks=K, n_features=d, **_kwargs(params))
    expected = batch.learn(sp.csr_matrix(X), y, tasks=tasks)
    events = cls(n_tasks=K, n_features=d, **_kwargs(params))
    assert _one_at_a_time(events, dicts, y, tasks) == expected.tolist()
    _assert_same_model(events, batch, sp.csr_matrix(X), tasks)
    # A dense row and its dict score alike on the fitted (sparse) model.
    assert events.decision_one(X[3], task=1) == pytest.approx(events.decision_one(dicts[3], task=1), rel=1e-12)


@pytest.mark.parametrize("entry", [e for e in LEARNERS if e[0] in (
    "mtlinear-default", "mtlinear-arow-hinge", "pa-unique-pa1", "cwcol", "mtp-rbf-C", "rbp-poly-C-B1", "romco-default",
    "omtl-linf", "mtbprj2-rbf-C")], ids=lambda e: e[0])
def test_str_dicts_equal_hash_features_and_sklearn(entry):
    from sklearn.feature_extraction import FeatureHasher

    _, cls, reference, params = entry
    X, y, tasks = _stream(n=70)
    width = 2**10
    names = ["spam", "ham", "offre spéciale", "x", "clé"]
    dicts = [{names[j]: float(v) for j, v in enumerate(row)} for row in X]
    for i, x in enumerate(dicts):
        x["colour"] = ["red", "blue", "green"][i % 3]  # a str value: the name "colour=red", value 1
    hashed = omtl.hash_features(dicts, n_features=width)
    theirs = FeatureHasher(n_features=width, input_type="dict", alternate_sign=False).transform(dicts)
    assert hashed.shape == theirs.shape and (hashed != theirs).nnz == 0
    labels = [f"user-{t}" for t in tasks]  # string task ids, added as they arrive
    grows = cls._grows and cls(n_tasks=None, **_kwargs(params))._open_graph_error() is None
    n_tasks = None if grows else K
    batch = cls(n_tasks=n_tasks, n_features=width, **_kwargs(params))
    expected = batch.learn(theirs, y, tasks=labels)
    for model_cls in (cls, reference):
        events = model_cls(n_tasks=n_tasks, n_features=width, **_kwargs(params))
        got = [events.learn_one(x, v, task=t) for x, v, t in zip(dicts, y.tolist(), labels)]
        assert got == expected.tolist()
        _assert_same_model(events, batch, hashed, labels)
    assert events.n_features_in_ == width


def test_hash_features_matches_sklearn_on_awkward_dicts():
    from sklearn.feature_extraction import FeatureHasher

    dicts = [{}, {"a": 0, "b": 0.0}, {"a": 1, "b": -2.5, "é": 3, b"raw": 4.0}, {"k": "v", "k=v": 1.0},
             {"x": True, "y": np.float32(2.5), "z": np.int64(-3)}, {str(i): i for i in range(300)}]
    for width in (1, 7, 2**18, 2**31 - 1):
        ours = omtl.hash_features(dicts, n_features=width)
        theirs = FeatureHasher(n_features=width, input_type="dict", alternate_sign=False).transform(dicts)
        assert ours.shape == theirs.shape and (ours != theirs).nnz == 0 and ours.has_sorted_indices
    assert omtl.hash_features([], n_features=4).shape == (0, 4)
    for bad, kind in [([{1: 1.0}], TypeError), ([{"a": 1.0}], None), ([{"a": float("nan")}], ValueError),
                      ([{"a": [1]}], TypeError), ([{"a": Decimal(1)}], TypeError), ([3], TypeError)]:
        if kind is None:
            for width in (0, -1, 2**31, 2.0, True):
                with pytest.raises(ValueError, match="n_features"):
                    omtl.hash_features(bad, n_features=width)
            continue
        with pytest.raises(kind):
            omtl.hash_features(bad, n_features=8)


def test_learn_one_returns_the_form_of_y_and_probabilities():
    X, y, tasks = _stream()
    model = omtl.MTLinear(n_tasks=K)
    zero_one = (y > 0).astype(int).tolist()
    got = [model.learn_one(x, v, task=t) for x, v, t in zip(X, zero_one, tasks.tolist())]
    twin = omtl.MTLinear(n_tasks=K)
    expected = twin.learn(X, zero_one, tasks=tasks)
    assert [g == 1 for g in got] == (expected == 1).tolist()
    assert set(got[zero_one.index(0):]) <= {0, 1}  # a lone 1 keeps the 0/1 form once a 0 was seen
    assert model.classes_.tolist() == [0, 1] and model.predict_one(X[0], task=0) in (0, 1)
    p = model.predict_proba_one(X[0], task=0)
    assert type(p) is float and p == pytest.approx(twin.predict_proba(X[:1], tasks=[0])[0, 1], rel=1e-12)
    assert type(model.learn_one(X[0], True, task=0)) is bool
    assert not hasattr(omtl.MTLinear(loss="hinge"), "predict_proba_one")
    pair = omtl.PAUnique(n_tasks=K).partial_fit(X[:5], ["ham", "spam", "ham", "spam", "spam"], tasks=tasks[:5])
    assert pair.learn_one(X[5], "spam", task=1) in ("ham", "spam")
    with pytest.raises(ValueError, match="classes"):
        pair.learn_one(X[5], "eggs", task=1)
    # Before the first event: score 0 (positive), x still checked.
    fresh = omtl.MTLinear(n_tasks=K)
    assert fresh.decision_one(X[0], task=1) == 0.0 and fresh.predict_one(X[0], task=1) == 1
    with pytest.raises(ValueError, match="NaN"):
        fresh.decision_one([1.0, math.nan], task=1)
    assert not fresh._is_fitted()


def test_open_ended_tasks_arrive_one_event_at_a_time():
    X, y, _ = _stream(n=200)
    users = [f"u{i % 37}" for i in range(200)]
    events = omtl.MTLinear()
    got = [events.learn_one(x, v, task=u) for x, v, u in zip(X, y.tolist(), users)]
    batch = omtl.MTLinear()
    assert got == batch.learn(X, y, tasks=users).tolist()
    _assert_same_model(events, batch, X, users)
    assert len(events.tasks_) == 37 and events._fitted_n_tasks() == 37
    # An unknown label scores as a new task with no examples, and adds nothing.
    assert events.decision_one(X[0], task="stranger") == pytest.approx(
        batch.decision_function(X[:1], tasks=["stranger"])[0], rel=1e-12)
    assert len(events.tasks_) == 37
    # Saved and loaded, pickled and copied, it goes on as the batch model does.
    for again in (omtl.loads(omtl.dumps(events)), pickle.loads(pickle.dumps(events)), copy.copy(events)):
        assert again.learn_one(X[0], 1, task="new") == batch.learn(X[:1], [1], tasks=["new"])[0]
        batch = pickle.loads(pickle.dumps(batch))  # undo for the next round
        batch = omtl.MTLinear().partial_fit(X, y, tasks=users)


@pytest.mark.parametrize("label", [None, float("nan"), float("inf"), -math.inf, Decimal("NaN"), Decimal("Infinity"),
                                   np.float64("nan"), True, np.bool_(False)])
def test_missing_task_labels_are_refused(label):
    X, y, _ = _stream(n=4)
    model = omtl.MTLinear().partial_fit(X, y, tasks=["a", "b", "a", "b"])
    before = pickle.dumps(model)
    kind = TypeError if isinstance(label, (bool, np.bool_)) or label is None else ValueError
    with pytest.raises(kind):
        model.learn_one(X[0], 1, task=label)
    with pytest.raises((TypeError, ValueError)):
        model.learn(X[:2], y[:2], tasks=["a", label])
    assert pickle.dumps(model) == before


def test_pandas_missing_task_labels_are_refused():
    pd = pytest.importorskip("pandas")
    X, y, _ = _stream(n=4)
    for missing in (pd.NA, pd.NaT):
        model = omtl.MTLinear()
        with pytest.raises(ValueError, match="missing"):
            model.partial_fit(X[:2], y[:2], tasks=["a", missing])
        model.partial_fit(X[:2], y[:2], tasks=["a", "b"])
        with pytest.raises(ValueError, match="missing"):
            model.learn_one(X[2], 1, task=missing)
        assert model.n_seen_ == 2


def _state(model):
    return (_native_bytes(model), model.n_seen_, model.n_mistakes_, model.n_seen_per_task_.tolist(),
            model.tasks_.tolist(), model._label_form)


@pytest.mark.parametrize("twin", [False, True], ids=["native", "twin"])
def test_bad_events_leave_the_model_unchanged(twin):
    cls = omtl.reference.MTLinear if twin else omtl.MTLinear
    X, y, tasks = _stream()
    fixed = cls(n_tasks=K).partial_fit(X, y, tasks=tasks)
    labelled = cls().partial_fit(X, y, tasks=[f"u{t}" for t in tasks])
    bad_x = [([1.0] * 4, ValueError), ([1.0] * 6, ValueError), (X[:2], ValueError), ([1.0, 2.0, "3", 4.0, 5.0], TypeError),
             ([1.0, 2.0, Decimal(3), 4.0, 5.0], TypeError), ([1.0, 2.0, 3j, 4.0, 5.0], TypeError),
             (np.array([1.0, np.nan, 0, 0, 0]), ValueError), ([np.inf] * 5, ValueError), ("abcde", TypeError),
             (np.array(["a"] * 5), TypeError), (np.ones(5, dtype=complex), ValueError), ({0: 1.0, "a": 2.0}, ValueError),
             ({5: 1.0}, ValueError), ({-1: 1.0}, ValueError), ({0: "x"}, TypeError), ({1.5: 1.0}, TypeError),
             ({"a": 1.0}, ValueError), (None, TypeError), (object(), TypeError), ({0: 10**400}, ValueError)]
    for model, good_task, bad_tasks in [
        (fixed, 1, [(K, ValueError), (-1, ValueError), ("a", TypeError), (None, TypeError), (True, TypeError), (1.5, TypeError)]),
        (labelled, "u1", [(None, TypeError), ([1], TypeError), (True, TypeError), (float("nan"), ValueError)]),
    ]:
        before = _state(model)
        for x, kind in bad_x:
            with pytest.raises(kind):
                model.learn_one(x, 1, task=good_task)
            with pytest.raises(kind):
                model.decision_one(x, task=good_task)
        for task, kind in bad_tasks:
            with pytest.raises(kind):
                model.learn_one(X[0], 1, task=task)
        for label, kind in [(2, ValueError), (0.5, ValueError), ("a", TypeError), (None, ValueError),
                            (math.nan, ValueError), ([1], TypeError)]:
            with pytest.raises(kind):
                model.learn_one(X[0], label, task=good_task)
        assert _state(model) == before
    # A fixed set of labelled tasks refuses one label too many.
    full = cls(n_tasks=2).partial_fit(X[:2], y[:2], tasks=["a", "b"])
    before = _state(full)
    with pytest.raises(ValueError, match="n_tasks=2"):
        full.learn_one(X[0], 1, task="c")
    assert _state(full) == before


def test_mtforg_events_warn_before_the_update():
    X, y, tasks = _stream()
    model = omtl.MTFORG(n_tasks=K, budget=5, kernel="linear", radius=0.1).partial_fit(X[:1] * 0.01, y[:1], tasks=tasks[:1])
    with pytest.warns(RuntimeWarning, match="radius"):
        model.learn_one(X[1], 1, task=0)
    assert model.n_seen_ == 2


def test_threads_lose_no_event_and_pickles_stay_consistent():
    X, y, _ = _stream(n=400)
    model = omtl.MTLinear()
    model.learn_one(X[0], 1, task="seed")
    errors, pickles = [], []

    def learner(offset):
        try:
            for i in range(400):
                model.learn_one(X[i], int(y[i]), task=f"t{offset}-{i % 25}")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def saver():
        try:
            for _ in range(60):
                pickles.append(pickle.dumps(model))
                copy.copy(model)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=learner, args=(k,)) for k in range(3)] + [threading.Thread(target=saver)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert model.n_seen_ == 1 + 3 * 400 == int(model.n_seen_per_task_.sum())
    assert len(model.tasks_) == 1 + 3 * 25
    for p in pickles:
        again = pickle.loads(p)  # checked on load: counts, labels and engine agree
        assert int(again.n_seen_per_task_.sum()) == again.n_seen_


def test_per_task_counts_grow_in_place():
    model = omtl.PAUnique()
    model.learn_one([1.0, 0.0], 1, task=0)
    buffers = set()
    for i in range(1, 300):
        model.learn_one([0.0, 1.0], -1, task=i)
        buffers.add(id(model._tasks._buf))
    assert len(buffers) < 12  # doubling: a handful of reallocations for 300 tasks
    assert model.n_seen_per_task_.tolist() == [1] * 300
    state = model.__getstate__()
    assert state["_tasks"]._buf is None and state["_tasks"].index is not model._tasks.index


@pytest.mark.parametrize("twin", [False, True], ids=["native", "twin"])
def test_small_batches_equal_one_batch_and_fail_cleanly(twin):
    cls = omtl.reference.MTLinear if twin else omtl.MTLinear
    X, y, tasks = _stream(n=120)
    whole = cls(n_tasks=K)
    expected = whole.learn(X, y, tasks=tasks)
    for form in (y, (y > 0).astype(np.int64), y > 0, y.astype(np.float64)):
        chunks = cls(n_tasks=K)
        got = np.concatenate([chunks.learn(X[i : i + 7], form[i : i + 7], tasks=tasks[i : i + 7]) for i in range(0, 120, 7)])
        assert (got == form).tolist() == (expected == y).tolist()
        _assert_same_model(chunks, whole, X, tasks)
    for rows in (sp.csr_matrix(X), sp.csc_matrix(X), sp.csr_matrix(X, dtype=np.float64).astype(np.float64)):
        chunks = cls(n_tasks=K)
        got = np.concatenate([chunks.learn(rows[i : i + 9], y[i : i + 9], tasks=tasks[i : i + 9]) for i in range(0, 120, 9)])
        assert got.tolist() == expected.tolist()
        _assert_same_model(chunks, whole, X, tasks)
        np.testing.assert_allclose(chunks.decision_function(rows[:6], tasks=tasks[:6]), whole.decision_function(X[:6], tasks=tasks[:6]),
                                   rtol=1e-9, atol=1e-12)
    unsorted = sp.csr_matrix((np.array([1.0, 2.0, 0.5]), np.array([3, 1, 1]), np.array([0, 2, 3])), shape=(2, 5))
    assert not unsorted.has_sorted_indices  # the batch path sorts it (and sums duplicates)
    np.testing.assert_allclose(whole.decision_function(unsorted, tasks=[0, 1]),
                               whole.decision_function(unsorted.toarray(), tasks=[0, 1]), rtol=1e-12)
    labelled, batch = cls(), cls()
    users = np.array([f"u{t}" for t in tasks], dtype=object)
    batch.partial_fit(X, y, tasks=users)
    for i in range(0, 120, 10):
        labelled.partial_fit(X[i : i + 10], y[i : i + 10], tasks=users[i : i + 10])
    _assert_same_model(labelled, batch, X, users)
    np.testing.assert_array_equal(labelled.decision_function(X[:5], tasks="u1"), batch.decision_function(X[:5], tasks="u1"))
    before = _state(labelled)
    bad = X[:5].copy()
    bad[3, 2] = np.nan
    bad_csr = sp.csr_matrix(X[:5])
    bad_csr.data[4] = np.inf
    for call, kind in [(lambda: labelled.learn(bad, y[:5], tasks="u1"), ValueError),
                       (lambda: labelled.learn(X[:5], [1, -1, 0, 1, 1], tasks="u1"), ValueError),
                       (lambda: labelled.learn(X[:5, :4], y[:5], tasks="u1"), ValueError),
                       (lambda: labelled.learn(X[:5], y[:4], tasks="u1"), ValueError),
                       (lambda: labelled.learn(X[:5], y[:5], tasks=["u1"] * 4), ValueError),
                       (lambda: labelled.learn(X[:5], y[:5], tasks=[True] * 5), TypeError),
                       (lambda: labelled.decision_function(bad, tasks="u1"), ValueError),
                       (lambda: labelled.learn(bad_csr, y[:5], tasks="u1"), ValueError),
                       (lambda: labelled.learn(sp.csr_matrix(X[:5, :4]), y[:5], tasks="u1"), ValueError)]:
        with pytest.raises(kind):
            call()
    assert _state(labelled) == before
    fixed = cls(n_tasks=K).partial_fit(X, y, tasks=tasks)
    before = _state(fixed)
    for ids in (np.array([0, 1, K]), np.array([-1, 0, 0]), K):
        with pytest.raises(ValueError, match="unknown task"):
            fixed.learn(X[:3], y[:3], tasks=ids)
    assert _state(fixed) == before
