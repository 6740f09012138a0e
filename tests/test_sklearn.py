"""scikit-learn integration with real scikit-learn objects: fit/score/predict_proba, tags,
feature names, metadata routing of ``tasks`` through meta-estimators, and check_estimator."""

import pickle
import warnings

import numpy as np
import pytest

import omtl
import omtl.reference as ref

sklearn = pytest.importorskip("sklearn", reason="scikit-learn is not installed (pip install 'omtl[sklearn]')")

from sklearn.base import clone, is_classifier  # noqa: E402
from sklearn.metrics import f1_score, roc_auc_score  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold, cross_val_predict, cross_val_score, cross_validate  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402

from omtl.sklearn import expected_failed_checks, make_task_scorer  # noqa: E402

LEARNER_NAMES = ["MTLinear", "KernelPerceptron", "MTPerceptron", "MTRBP", "MTFORG", "MTBPRJ", "MTBPRJ2", "ROMCO",
                 "PAGlobal", "PAUnique", "OMTL", "OMTRL", "CWCOL", "MTFL", "TRML"]


def _make(cls, **kw):
    return cls(**kw)  # every other hyper-parameter at its default


@pytest.fixture
def routing():
    with sklearn.config_context(enable_metadata_routing=True):
        yield


@pytest.fixture
def stream():
    s = omtl.datasets.make_multitask_stream(n_samples=600, n_tasks=4, seed=1)
    return s.X, s.y, s.tasks


@pytest.mark.parametrize("module", [omtl, ref], ids=["native", "reference"])
@pytest.mark.parametrize("name", LEARNER_NAMES)
def test_check_estimator(module, name):
    """Every learner passes check_estimator on a single-task stream, up to the documented list."""
    est = _make(getattr(module, name), n_tasks=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, on_fail=None, expected_failed_checks=expected_failed_checks(est))
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert not failed
    # Every expected failure does fail (the list stays minimal).
    xfailed = {r["check_name"] for r in results if r["status"] == "xfail"}
    assert xfailed == set(expected_failed_checks(est))
    assert sum(r["status"] == "passed" for r in results) >= 45


@pytest.mark.parametrize("module", [omtl, ref], ids=["native", "reference"])
def test_learners_inherit_base_estimator_where_scikit_learn_is_installed(module):
    """check_estimator warns about an estimator that does not inherit BaseEstimator: the learners
    do, once scikit-learn is in use (omtl itself never imports it: test_omtl_works_without_...)."""
    from sklearn.base import BaseEstimator, clone

    est = module.MTLinear(n_tasks=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_estimator(est, on_fail=None, expected_failed_checks=expected_failed_checks(est))
    assert not [w for w in caught if "BaseEstimator" in str(w.message)]
    assert isinstance(est, BaseEstimator) and isinstance(clone(est), module.MTLinear)
    assert repr(est) == f"MTLinear({', '.join(f'{k}={v!r}' for k, v in est.get_params().items())})"


def test_classifier_basics(stream):
    X, y, tasks = stream
    est = omtl.MTLinear(n_tasks=4)
    assert is_classifier(est)
    assert not est.__sklearn_is_fitted__()
    assert est.fit(X, y, tasks=tasks) is est
    assert est.__sklearn_is_fitted__() and est.n_features_in_ == X.shape[1]
    np.testing.assert_array_equal(est.classes_, np.unique(y))
    acc = est.score(X, y, tasks=tasks)
    assert isinstance(acc, float) and acc == np.mean(est.predict(X, tasks=tasks) == y)
    assert acc > 0.7
    p = est.predict_proba(X, tasks=tasks)
    assert p.shape == (len(y), 2) and np.allclose(p.sum(axis=1), 1.0)
    # a weighted score
    w = np.zeros(len(y))
    w[:10] = 1.0
    assert est.score(X, y, tasks=tasks, sample_weight=w) == np.mean(est.predict(X[:10], tasks=tasks[:10]) == y[:10])


def test_fit_is_a_fresh_model_and_one_pass(stream):
    X, y, tasks = stream
    est = omtl.MTPerceptron(n_tasks=4).partial_fit(X[:100], y[:100], tasks=tasks[:100])
    est.fit(X, y, tasks=tasks)
    once = omtl.MTPerceptron(n_tasks=4).partial_fit(X, y, tasks=tasks)
    np.testing.assert_array_equal(est.decision_function(X, tasks=tasks), once.decision_function(X, tasks=tasks))
    assert est.n_seen_ == len(y)
    thrice = omtl.MTPerceptron(n_tasks=4).fit(X, y, tasks=tasks, n_epochs=3)
    loop = omtl.MTPerceptron(n_tasks=4)
    for _ in range(3):
        loop.partial_fit(X, y, tasks=tasks)
    assert thrice.n_seen_ == 3 * len(y)
    np.testing.assert_array_equal(thrice.decision_function(X, tasks=tasks), loop.decision_function(X, tasks=tasks))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n_epochs"):
            est.fit(X, y, tasks=tasks, n_epochs=bad)


def test_failing_fit_leaves_the_model_unchanged(stream):
    X, y, tasks = stream
    est = omtl.MTLinear(n_tasks=4).fit(X, y, tasks=tasks)
    before = pickle.dumps(est)
    bad_y = y.copy()
    bad_y[-1] = 5
    with pytest.raises(ValueError):
        est.fit(X, bad_y, tasks=tasks)
    with pytest.raises(ValueError, match="0 sample"):
        est.fit(X[:0], y[:0], tasks=tasks[:0])
    assert pickle.dumps(est) == before


def test_predict_proba_only_for_logistic():
    assert hasattr(omtl.MTLinear(n_tasks=2), "predict_proba")
    assert not hasattr(omtl.MTLinear(n_tasks=2, loss="hinge"), "predict_proba")
    assert not hasattr(omtl.MTPerceptron(n_tasks=2), "predict_proba")
    assert not hasattr(omtl.ROMCO(n_tasks=2), "predict_proba")


def test_tasks_optional_only_for_one_task():
    X = np.random.default_rng(0).normal(size=(20, 3))
    y = (X[:, 0] > 0).astype(int)
    one = omtl.PAGlobal(n_tasks=1).fit(X, y)
    np.testing.assert_array_equal(one.predict(X), one.predict(X, tasks=0))
    with pytest.raises(TypeError, match="tasks is required"):
        omtl.PAGlobal(n_tasks=2).fit(X, y)


def test_feature_names_from_dataframes():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(40, 3)), columns=["a", "b", "c"])
    y = (df["a"] > 0).to_numpy()
    est = omtl.MTLinear(n_tasks=1).fit(df, y)
    np.testing.assert_array_equal(est.feature_names_in_, ["a", "b", "c"])
    assert est.feature_names_in_.dtype == object
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        est.predict(df[["c", "b", "a"]])
    with pytest.raises(ValueError, match="unseen at fit time"):
        est.partial_fit(df.rename(columns={"a": "z"}), y)
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        est.predict(df.to_numpy())
    with pytest.raises(ValueError, match="MTLinear is expecting 3 features as input"):
        est.predict(df[["a", "b"]].to_numpy())
    # a refit on plain arrays forgets the names
    est.fit(df.to_numpy(), y)
    assert not hasattr(est, "feature_names_in_")


def test_pipeline_without_routing():
    X = np.random.default_rng(1).normal(size=(80, 4)) * 100
    y = X[:, 0] > 0
    pipe = make_pipeline(StandardScaler(), omtl.MTLinear(n_tasks=1)).fit(X, y)
    assert pipe.score(X, y) > 0.9
    assert pipe.predict(X).dtype == bool
    assert cross_val_score(omtl.MTLinear(n_tasks=1), X, y, cv=3).mean() > 0.8


def test_routing_through_pipeline_cross_val_and_grid_search(routing, stream):
    X, y, tasks = stream
    pipe = make_pipeline(StandardScaler(), omtl.MTLinear(n_tasks=4))
    pipe.fit(X, y, tasks=tasks)
    direct = omtl.MTLinear(n_tasks=4).fit(StandardScaler().fit_transform(X), y, tasks=tasks)
    np.testing.assert_array_equal(pipe.decision_function(X, tasks=tasks),
                                  direct.decision_function(StandardScaler().fit_transform(X), tasks=tasks))
    assert pipe.score(X, y, tasks=tasks) == direct.score(StandardScaler().fit_transform(X), y, tasks=tasks)
    np.testing.assert_allclose(pipe.predict_proba(X, tasks=tasks)[:, 1],
                               direct.predict_proba(StandardScaler().fit_transform(X), tasks=tasks)[:, 1])

    cv = KFold(3)
    scores = cross_val_score(pipe, X, y, cv=cv, params={"tasks": tasks})
    by_hand = []
    for train, test in cv.split(X):
        m = clone(pipe).fit(X[train], y[train], tasks=tasks[train])
        by_hand.append(m.score(X[test], y[test], tasks=tasks[test]))
    np.testing.assert_allclose(scores, by_hand)
    # cross_val_predict routes metadata to fit only: a multitask predict has no tasks there
    with pytest.raises(TypeError, match="tasks is required"):
        cross_val_predict(omtl.MTLinear(n_tasks=4), X, y, cv=cv, params={"tasks": tasks})

    grid = GridSearchCV(omtl.MTLinear(n_tasks=4), {"learning_rate": [0.1, 0.5], "loss": ["logistic", "hinge"]}, cv=cv)
    grid.fit(X, y, tasks=tasks)
    assert set(grid.best_params_) == {"learning_rate", "loss"}
    assert grid.score(X, y, tasks=tasks) == grid.best_estimator_.score(X, y, tasks=tasks)
    # A search routes no metadata to predict (scikit-learn's): predict with its best estimator.
    with pytest.raises(TypeError):
        grid.predict(X, tasks=tasks)
    assert grid.best_estimator_.predict(X, tasks=tasks).shape == (len(y),)
    with pytest.raises(ValueError, match="tasks is required"):  # the fits fail without tasks
        cross_val_score(pipe, X, y, cv=cv)


def test_set_request_and_clone(routing, stream):
    X, y, tasks = stream
    est = omtl.MTLinear(n_tasks=4).set_fit_request(tasks="task_ids").set_score_request(tasks=False)
    routing_info = est.get_metadata_routing()
    assert routing_info.fit.requests == {"tasks": "task_ids", "n_epochs": None}
    assert routing_info.score.requests == {"tasks": False, "sample_weight": None}
    assert clone(est).get_metadata_routing().fit.requests["tasks"] == "task_ids"
    assert pickle.loads(pickle.dumps(est)).get_metadata_routing().fit.requests["tasks"] == "task_ids"
    with pytest.raises(ValueError, match="alias"):
        est.set_predict_request(tasks="not an identifier")
    # an alias: the meta-estimator receives task_ids and hands them to fit as tasks
    single = omtl.MTLinear(n_tasks=4).set_fit_request(tasks="task_ids")
    pipe = make_pipeline(StandardScaler(), single)
    pipe.fit(X, y, task_ids=tasks)
    assert pipe[-1].n_seen_per_task_.tolist() == np.bincount(tasks, minlength=4).tolist()
    # n_epochs is routed when requested
    est = omtl.MTLinear(n_tasks=4).set_fit_request(n_epochs=True)
    make_pipeline(est).fit(X, y, tasks=tasks, n_epochs=2)
    assert est.n_seen_ == 2 * len(y)


def test_set_request_needs_routing_enabled():
    with sklearn.config_context(enable_metadata_routing=False):
        with pytest.raises(RuntimeError, match="enable_metadata_routing"):
            omtl.MTLinear(n_tasks=2).set_fit_request(tasks=True)


def test_partial_fit_classes_argument():
    X = np.eye(3)
    est = omtl.PAUnique(n_tasks=1)
    est.partial_fit(X, [0, 1, 1], classes=[0, 1])
    with pytest.raises(ValueError, match="differ from the labels this model learned"):
        est.partial_fit(X, [0, 1, 1], classes=["a", "b"])
    with pytest.raises(ValueError, match="two labels"):
        omtl.PAUnique(n_tasks=1).partial_fit(X, [0, 1, 1], classes=[0, 1, 2])


@pytest.mark.parametrize("module", [omtl, ref], ids=["native", "reference"])
def test_any_two_labels(module, tmp_path):
    """Two labels of any kind are a label form: sorted, the second is positive (scikit-learn's
    classes_[1]); the learner behaves exactly as on -1/+1 and answers in the given labels."""
    s = omtl.datasets.make_multitask_stream(n_samples=300, n_tasks=3, seed=4)
    names = np.where(s.y > 0, "spam", "ham")
    est = module.MTPerceptron(n_tasks=3)
    pred = est.learn(s.X, names, tasks=s.tasks)
    twin = module.MTPerceptron(n_tasks=3)
    np.testing.assert_array_equal(pred == "spam", twin.learn(s.X, s.y, tasks=s.tasks) > 0)
    np.testing.assert_array_equal(est.classes_, ["ham", "spam"])
    np.testing.assert_array_equal(est.predict(s.X, tasks=s.tasks) == "spam", twin.predict(s.X, tasks=s.tasks) > 0)
    assert est.score(s.X, names, tasks=s.tasks) == twin.score(s.X, s.y, tasks=s.tasks)
    # later batches must use the same two labels; other labels fail and change nothing
    before = pickle.dumps(est)
    for bad in (s.y[:5], np.array(["ham", "eggs", "spam", "ham", "ham"])):
        with pytest.raises(ValueError, match="not one of this model's classes"):
            est.partial_fit(s.X[:5], bad, tasks=s.tasks[:5])
    assert pickle.dumps(est) == before
    est.partial_fit(s.X[:2], ["ham", "ham"], tasks=s.tasks[:2])  # a single class is fine once known
    if module is omtl:  # the model file keeps the labels
        omtl.save(est, tmp_path / "m.omtl")
        np.testing.assert_array_equal(omtl.load(tmp_path / "m.omtl").predict(s.X, tasks=s.tasks),
                                      est.predict(s.X, tasks=s.tasks))
    # numbers other than -1/+1 and 0/1: {1, 2} makes 2 the positive class
    nums = module.PAGlobal(n_tasks=3).fit(s.X, np.where(s.y > 0, 2, 1), tasks=s.tasks)
    np.testing.assert_array_equal(nums.classes_, [1, 2])
    np.testing.assert_array_equal(nums.predict(s.X, tasks=s.tasks) == 2,
                                  module.PAGlobal(n_tasks=3).fit(s.X, s.y, tasks=s.tasks).predict(s.X, tasks=s.tasks) > 0)
    # a first batch of one such label does not tell which is positive: classes= does
    single = module.PAGlobal(n_tasks=3)
    with pytest.raises(ValueError, match="classes="):
        single.partial_fit(s.X[:3], ["spam"] * 3, tasks=s.tasks[:3])
    assert not single._is_fitted()
    single.partial_fit(s.X[:3], ["spam"] * 3, tasks=s.tasks[:3], classes=["spam", "ham"])
    np.testing.assert_array_equal(single.classes_, ["ham", "spam"])
    # a model that learned -1/+1 keeps to the standard forms (a 1 would change meaning)
    std = module.PAGlobal(n_tasks=3).partial_fit(s.X[:3], [1, 1, 1], tasks=s.tasks[:3])
    with pytest.raises(ValueError, match="learned labels -1/\\+1, 0/1 or bool"):
        std.partial_fit(s.X[:3], [1, 2, 1], tasks=s.tasks[:3])
    with pytest.raises(ValueError, match="Only binary"):
        module.PAGlobal(n_tasks=3).fit(s.X[:3], ["a", "b", "c"], tasks=s.tasks[:3])


def test_omtl_works_without_sklearn_and_river():
    """scikit-learn and River stay optional: import omtl, learn and predict with both blocked."""
    import subprocess
    import sys

    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("sklearn", "river"):
            raise ImportError("blocked " + name)
sys.meta_path.insert(0, Block())
import numpy as np
import omtl
m = omtl.MTLinear(n_tasks=2).fit(np.eye(4), [1, -1, 1, -1], tasks=[0, 1, 0, 1])
assert m.score(np.eye(4), [1, -1, 1, -1], tasks=[0, 1, 0, 1]) >= 0.5
assert "sklearn" not in sys.modules
import omtl.sklearn  # its helpers import without scikit-learn too
try:
    import omtl.river
except ImportError as exc:
    assert "omtl[river]" in str(exc)
else:
    raise AssertionError("omtl.river imported without River")
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_task_scorer(routing, stream):
    X, y, tasks = stream
    cv = KFold(3)
    scoring = {"f1": make_task_scorer(f1_score), "auc": make_task_scorer(roc_auc_score, response_method="decision_function"),
               "proba_auc": make_task_scorer(roc_auc_score, response_method="predict_proba")}
    res = cross_validate(omtl.MTLinear(n_tasks=4), X, y, cv=cv, params={"tasks": tasks}, scoring=scoring)
    for i, (train, test) in enumerate(cv.split(X)):
        m = omtl.MTLinear(n_tasks=4).fit(X[train], y[train], tasks=tasks[train])
        assert res["test_f1"][i] == f1_score(y[test], m.predict(X[test], tasks=tasks[test]))
        assert res["test_auc"][i] == roc_auc_score(y[test], m.decision_function(X[test], tasks=tasks[test]))
        assert res["test_proba_auc"][i] == pytest.approx(res["test_auc"][i])
    grid = GridSearchCV(omtl.MTLinear(n_tasks=4), {"learning_rate": [0.05, 1.0]}, cv=cv,
                        scoring=make_task_scorer(f1_score)).fit(X, y, tasks=tasks)
    assert grid.best_score_ == max(grid.cv_results_["mean_test_score"])
    loss = make_task_scorer(f1_score, greater_is_better=False)
    assert loss(grid.best_estimator_, X, y, tasks=tasks) == -f1_score(y, grid.best_estimator_.predict(X, tasks=tasks))
    with pytest.raises(ValueError, match="response_method"):
        make_task_scorer(f1_score, response_method="transform")


def test_model_file_keeps_feature_names(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(np.random.default_rng(0).normal(size=(30, 2)), columns=["age", "income"])
    est = omtl.MTLinear(n_tasks=1).fit(df, df["age"] > 0)
    omtl.save(est, tmp_path / "m.omtl")
    back = omtl.load(tmp_path / "m.omtl")
    np.testing.assert_array_equal(back.feature_names_in_, ["age", "income"])
    np.testing.assert_array_equal(back.predict(df), est.predict(df))
    plain = omtl.persistence.loads(omtl.persistence.dumps(omtl.MTLinear(n_tasks=1).fit(df.to_numpy(), df["age"] > 0)))
    assert not hasattr(plain, "feature_names_in_")


def test_model_file_label_pair_is_checked():
    import hashlib
    import json
    import struct

    from omtl.persistence import MAGIC

    est = omtl.PAGlobal(n_tasks=1).fit(np.eye(4), ["a", "b", "a", "b"])
    data = omtl.persistence.dumps(est)
    assert omtl.persistence.loads(data).classes_.tolist() == ["a", "b"]
    fixed = len(MAGIC) + 12
    (head_len,) = struct.unpack_from("<Q", data, len(MAGIC) + 4)
    header = json.loads(data[fixed:fixed + head_len])
    rest = data[fixed + head_len:-32]

    def framed(label_form):  # a well-framed file whose header says label_form
        head = json.dumps({**header, "fitted": {**header["fitted"], "label_form": label_form}}).encode()
        body = data[:len(MAGIC) + 4] + struct.pack("<Q", len(head)) + head + rest
        return body + hashlib.sha256(body).digest()

    assert omtl.persistence.loads(framed(["x", "y"])).classes_.tolist() == ["x", "y"]
    for bad in (["a", 1], ["a", "a"], [True, False], ["a"], [[1], [2]], "classes"):
        with pytest.raises(ValueError, match="label form"):
            omtl.persistence.loads(framed(bad))


def test_tags_old_and_new():
    from sklearn.utils import get_tags

    est = omtl.ROMCO(n_tasks=2)
    tags = get_tags(est)
    assert tags.estimator_type == "classifier" and not tags.classifier_tags.multi_class
    assert tags.input_tags.sparse and not tags.requires_fit and tags.target_tags.required
    old = est._get_tags()
    assert old["binary_only"] and old["requires_y"] and est._estimator_type == "classifier"


def test_mixed_column_names_are_an_error():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(np.eye(3), columns=["a", 1, "c"])
    with pytest.raises(TypeError, match="Feature names are only supported if all input features have string names"):
        omtl.PAGlobal(n_tasks=1).fit(df, [1, -1, 1])
    int_names = pd.DataFrame(np.eye(3))  # non-string names: no feature_names_in_, as scikit-learn
    assert not hasattr(omtl.PAGlobal(n_tasks=1).fit(int_names, [1, -1, 1]), "feature_names_in_")


def test_fit_keeps_what_others_attached(routing, stream):
    X, y, tasks = stream
    est = omtl.MTLinear(n_tasks=4).set_fit_request(tasks="ids")
    est.some_meta_estimator_context = object()
    est.fit(X, y, tasks=tasks)
    assert hasattr(est, "some_meta_estimator_context")
    assert est.get_metadata_routing().fit.requests["tasks"] == "ids"
