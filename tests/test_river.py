"""omtl.river with River itself: learn_one/predict_one against the batch learner,
progressive_val_score, River pipelines and clone."""

import pickle
from decimal import Decimal

import numpy as np
import pytest

import omtl

river = pytest.importorskip("river", reason="River is not installed (pip install 'omtl[river]')")

from river import compose, evaluate, metrics, preprocessing  # noqa: E402

import omtl.river  # noqa: E402


def _stream(n=400, n_tasks=4, seed=2, task_key="task"):
    s = omtl.datasets.make_multitask_stream(n_samples=n, n_tasks=n_tasks, n_outlier_tasks=min(2, n_tasks - 1), seed=seed)
    names = [f"f{j}" for j in range(s.X.shape[1])]
    xs = [{**dict(zip(names, map(float, row))), task_key: int(t)} for row, t in zip(s.X, s.tasks)]
    return s, xs, [bool(v > 0) for v in s.y]


@pytest.mark.parametrize("name", omtl.river.__all__)
def test_every_adapter_matches_its_learner(name):
    s, xs, ys = _stream(n=150)
    extra = {"budget": 20} if "budget" in getattr(omtl, name)._param_names() else {}
    model = getattr(omtl.river, name)(n_tasks=4, **extra)
    assert isinstance(model, river.base.Classifier)
    before = []
    for x, y in zip(xs, ys):
        before.append(model.predict_one(x))
        model.learn_one(x, y)
    twin = getattr(omtl, name)(n_tasks=4, **extra)
    # Row by row, as the adapter learns (gamma="scale" is read from the first batch).
    expected = np.concatenate([twin.learn(s.X[i : i + 1], s.y[i : i + 1] > 0, tasks=s.tasks[i : i + 1]) for i in range(len(xs))])
    assert before == expected.tolist()
    assert all(type(p) is bool for p in before)
    np.testing.assert_array_equal(
        [model.predict_one(x) for x in xs[:20]], twin.predict(s.X[:20], tasks=s.tasks[:20])
    )


def test_progressive_val_score_and_probabilities():
    s, xs, ys = _stream()
    model = omtl.river.MTLinear(n_tasks=4)
    acc = evaluate.progressive_val_score(zip(xs, ys), model, metrics.Accuracy())
    twin = omtl.MTLinear(n_tasks=4)
    assert acc.get() == pytest.approx(np.mean(twin.learn(s.X, s.y > 0, tasks=s.tasks) == (s.y > 0)))
    proba = model.predict_proba_one(xs[0])
    assert set(proba) == {False, True} and sum(proba.values()) == pytest.approx(1.0)
    assert proba[True] == pytest.approx(twin.predict_proba(s.X[:1], tasks=s.tasks[:1])[0, 1])
    auc = evaluate.progressive_val_score(zip(xs, ys), omtl.river.MTLinear(n_tasks=4), metrics.ROCAUC())
    assert auc.get() > 0.7
    with pytest.raises(NotImplementedError):
        omtl.river.MTPerceptron(n_tasks=4).predict_proba_one(xs[0])
    with pytest.raises(NotImplementedError):
        omtl.river.MTLinear(n_tasks=4, loss="hinge").predict_proba_one(xs[0])


def test_pipeline_with_a_scaler():
    s, xs, ys = _stream()
    # The task id must bypass the scaler: select it beside the scaled features.
    model = compose.Select("task") + (compose.Discard("task") | preprocessing.StandardScaler())
    model |= omtl.river.MTLinear(n_tasks=4)
    acc = evaluate.progressive_val_score(zip(xs, ys), model, metrics.Accuracy())
    # Well above the majority class (0.55). Half of this stream's 4 tasks are outliers (-w_0), where
    # sharing helps least: 0.705 with shared_rate=1, 0.6875 with the default 2 (docs/mt_linear.md M.7b).
    assert acc.get() > 0.65
    learner = model["MTLinear"].learner  # the task ids arrived unscaled
    assert learner.n_seen_per_task_.tolist() == np.bincount(s.tasks, minlength=4).tolist()
    # A single-task model needs no task key, so the scaler goes straight in front of it.
    _, xs1, ys1 = _stream(n_tasks=1)
    single = [({k: v for k, v in x.items() if k != "task"}, y) for x, y in zip(xs1, ys1)]
    plain = preprocessing.StandardScaler() | omtl.river.MTLinear(n_tasks=1, task_key=None)
    assert evaluate.progressive_val_score(single, plain, metrics.Accuracy()).get() > 0.6


def test_task_fn_features_and_new_keys():
    s, xs, ys = _stream(task_key="user")
    model = omtl.river.PAUnique(n_tasks=4, task_fn=lambda x: x["user"], features=[f"f{j}" for j in range(s.X.shape[1])])
    for x, y in zip(xs, ys):
        model.learn_one(x, y)
    twin = omtl.PAUnique(n_tasks=4).partial_fit(s.X, s.y > 0, tasks=s.tasks)
    np.testing.assert_array_equal(twin.decision_function(s.X, tasks=s.tasks),
                                  model.learner.decision_function(s.X, tasks=s.tasks))
    # A listed feature missing from an example is 0, a key not listed is ignored; values are numbers
    m = omtl.river.PAGlobal(n_tasks=1, task_key=None, features=["a", "b"])
    m.learn_one({"a": 1.0, "b": 2.0}, True)
    m.learn_one({"a": 1.0, "c": 5.0}, False)
    assert m.learner.n_seen_ == 2 and m.learner.n_features_in_ == 2
    for bad in ("x", "1.5", Decimal("1.5"), 1j, None):
        with pytest.raises(TypeError, match="real numbers"):
            m.learn_one({"a": bad, "b": 1.0}, True)
    with pytest.raises(ValueError, match="task key"):
        omtl.river.PAGlobal(n_tasks=2).learn_one({"a": 1.0}, True)
    with pytest.raises(TypeError, match="dict"):
        m.learn_one([1.0, 2.0], True)
    assert m.learner.n_seen_ == 2


def test_hashed_names_learn_a_word_first_seen_late():
    # Default: every name hashed (scikit-learn's FeatureHasher), so a word that first appears
    # after many messages still gets its own weight; none is dropped.
    rng = np.random.default_rng(0)
    words = [f"w{j}" for j in range(40)]
    model = omtl.river.MTLinear(task_key="user", n_features=2**12)
    for i in range(300):
        x = {w: 1.0 for w in rng.choice(words, 5, replace=False)}
        model.learn_one({**x, "user": f"u{i % 3}"}, bool(i % 2))
    late = {"viagra": 1.0, "user": "u0"}
    before = model.predict_proba_one(late)[True]
    for _ in range(30):
        model.learn_one(late, True)
    assert model.predict_proba_one(late)[True] > max(before, 0.9)
    assert model.learner.n_features_in_ == 2**12
    assert sorted(model.learner.tasks_.tolist()) == ["u0", "u1", "u2"]
    # learn_one over the dicts equals learn on omtl.hash_features of them
    xs = [{w: float(v) for w, v in zip(rng.choice(words, 4, replace=False), rng.normal(size=4))} for _ in range(100)]
    ys = rng.random(100) > 0.5
    a = omtl.river.PAUnique(task_key=None, n_tasks=1, n_features=2**10)
    for x, y in zip(xs, ys):
        a.learn_one(x, y)
    b = omtl.PAUnique(n_tasks=1, n_features=2**10).partial_fit(omtl.hash_features(xs, n_features=2**10), ys)
    X = omtl.hash_features(xs, n_features=2**10)
    np.testing.assert_array_equal(a.learner.decision_function(X), b.decision_function(X))


def test_clone_and_pickle():
    s, xs, ys = _stream(n=50)
    model = omtl.river.MTRBP(n_tasks=4, budget=10, task_key="task")
    for x, y in zip(xs, ys):
        model.learn_one(x, y)
    fresh = model.clone()
    assert fresh.params == {"n_tasks": 4, "budget": 10} and fresh.task_key == "task"
    assert not fresh.learner._is_fitted()
    again = pickle.loads(pickle.dumps(model))
    assert [again.predict_one(x) for x in xs] == [model.predict_one(x) for x in xs]
    assert "MTRBP" in repr(model)


@pytest.mark.parametrize("labels", [(0, 1), (-1, 1), (False, True)])
def test_predictions_keep_the_label_form(labels):
    s, xs, _ = _stream(n=200)
    ys = [labels[1] if v > 0 else labels[0] for v in s.y]
    model = omtl.river.MTLinear(n_tasks=4)
    before = []
    for x, y in zip(xs, ys):
        before.append(model.predict_one(x))
        model.learn_one(x, y)
    told = ys.index(labels[0]) + 1  # the first negative label fixes the form (a lone 1 does not)
    assert set(before[told:]) <= set(labels) and all(type(p) is type(labels[0]) for p in before[told:])
    expected = omtl.MTLinear(n_tasks=4).learn(s.X, s.y, tasks=s.tasks)
    assert [p == labels[1] for p in before] == (expected > 0).tolist()
    assert set(model.predict_proba_one(xs[0])) == set(labels)
    other = (-1, 1) if labels == (0, 1) else (0, 1)
    seen = model.learner.n_seen_
    with pytest.raises(ValueError, match="label"):
        model.learn_one(xs[0], other[0])
    assert model.learner.n_seen_ == seen


def test_two_string_labels_with_classes():
    s, xs, _ = _stream(n=200)
    ys = ["spam" if v > 0 else "ham" for v in s.y]
    model = omtl.river.PAUnique(n_tasks=4, classes=["spam", "ham"])
    before = []
    for x, y in zip(xs, ys):
        before.append(model.predict_one(x))
        model.learn_one(x, y)
    expected = omtl.PAUnique(n_tasks=4).learn(s.X, s.y, tasks=s.tasks)
    assert [p == "spam" for p in before[1:]] == (expected[1:] > 0).tolist()
    assert set(before[1:]) <= {"spam", "ham"}
    with pytest.raises(ValueError, match="classes"):
        model.learn_one(xs[0], "eggs")
    with pytest.raises(ValueError, match="classes="):  # without classes, one example cannot say
        omtl.river.PAUnique(n_tasks=4).learn_one(xs[0], "spam")
    assert model.clone().classes == ["spam", "ham"]


def test_mini_batches_match_one_at_a_time():
    pd = pytest.importorskip("pandas")
    s, xs, ys = _stream(n=300)
    frame = pd.DataFrame(xs)
    labels = pd.Series(ys)
    one, many = omtl.river.MTLinear(n_tasks=4), omtl.river.MTLinear(n_tasks=4)
    assert isinstance(many, river.base.MiniBatchClassifier)
    assert many.predict_many(frame.iloc[:3]).tolist() == [True] * 3
    for start in range(0, 300, 50):
        chunk = slice(start, start + 50)
        expected = [one.predict_one(x) for x in xs[chunk]]
        assert many.predict_many(frame.iloc[chunk]).tolist() == expected
        for x, y in zip(xs[chunk], ys[chunk]):
            one.learn_one(x, y)
        many.learn_many(frame.iloc[chunk], labels.iloc[chunk])
    hashed = omtl.hash_features([{k: v for k, v in x.items() if k != "task"} for x in xs])
    np.testing.assert_array_equal(one.learner.decision_function(hashed, tasks=s.tasks),
                                  many.learner.decision_function(hashed, tasks=s.tasks))
    proba = many.predict_proba_many(frame.iloc[:5])
    assert list(proba.columns) == [False, True] and proba.index.equals(frame.index[:5])
    np.testing.assert_allclose(proba[True], [one.predict_proba_one(x)[True] for x in xs[:5]])
    # a missing column is 0, an extra one hashed as any other name, the task column required
    assert many.predict_many(frame.drop(columns=["f0"]).iloc[:3]).shape == (3,)
    assert many.predict_many(frame.assign(extra=1.0).iloc[:3]).shape == (3,)
    with pytest.raises(ValueError, match="task column"):
        many.learn_many(frame.drop(columns=["task"]), labels)
    with pytest.raises(NotImplementedError):
        omtl.river.ROMCO(n_tasks=4).predict_proba_many(frame)


def _text_stream(n=400, seed=0):
    import random

    rng = random.Random(seed)
    spam = "cheap pills free win now offer cash prize click deal".split()
    ham = "lunch report meeting friday notes agenda team review call plan".split()
    return [({"user": rng.choice(["ann", "bob"]), "text": " ".join(rng.sample(spam if y else ham, 4))}, y)
            for y in (rng.random() < 0.5 for _ in range(n))]


def test_a_text_value_warns_once_and_bag_of_words_learns_it():
    """A str value is one categorical feature (``text=...``): a whole text teaches nothing, so the
    adapter warns once, and River's BagOfWords in front learns the words."""
    import warnings

    import pandas as pd
    from river import feature_extraction

    stream = _text_stream()
    raw = omtl.river.MTLinear(task_key="user")
    with pytest.warns(UserWarning, match="BagOfWords") as record:
        for x, y in stream:
            raw.learn_one(x, y)
    assert len([w for w in record if "holds a text" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # single words and numbers: no warning
        omtl.river.MTLinear(task_key="user").learn_one({"user": "ann", "colour": "red", "x": 1.0}, True)
        words = compose.Select("user") + feature_extraction.BagOfWords(on="text")
        model = words | omtl.river.MTLinear(task_key="user")
        accuracy = evaluate.progressive_val_score(stream, model, metrics.Accuracy()).get()
    with pytest.warns(UserWarning, match="holds a text"):
        raw_accuracy = evaluate.progressive_val_score(stream, omtl.river.MTLinear(task_key="user"), metrics.Accuracy()).get()
    assert accuracy > 0.95 and raw_accuracy < 0.65, (accuracy, raw_accuracy)
    frame = pd.DataFrame([dict(x, label=y) for x, y in stream[:50]])
    with pytest.warns(UserWarning, match="holds a text"):
        omtl.river.MTLinear(task_key="user").learn_many(frame.drop(columns="label"), frame["label"])
