"""Open-ended task ids (DECISIONS.md, "Open-ended task sets"): any hashable labels, n_tasks=None,
growth of the graph learners, MTLinear and PA, TaskGraph.add_tasks and model.add_tasks."""

from __future__ import annotations

import os
import pickle
import tempfile

import numpy as np
import pytest
from conftest import random_stream
from learner_table import LEARNERS
from parity import check_scores, chunks_of, compare_runs, pre_update_scores

import omtl
import omtl.reference
from omtl._native import NativeLearner

K = 6

# Every table setting that can grow: a learner with _grows, on a string graph that grows for it.
GROWABLE = [
    pytest.param(native, reference, params, id=name)
    for name, native, reference, params in LEARNERS
    if native._grows and native(n_tasks=None, **params)._open_graph_error() is None
]
FIXED_ONLY = [omtl.OMTRL, omtl.MTFL, omtl.TRML, omtl.ROMCO]


def arriving_stream(n=360, d=6, seed=0, sparse=False):
    """A stream whose K tasks arrive one after another (task i first at row ~ 40 i), labelled by
    strings whose order of appearance is not their sort order; and the integer ids a fixed-k
    model gets for them (the order of first appearance)."""
    X, y, tasks = random_stream(n=n, d=d, k=K, seed=seed, sparse=sparse)
    tasks = np.minimum(tasks, np.arange(n) // 40)
    names = np.array([f"user-{c}" for c in "qbxmaf"])
    labels = names[tasks]
    first = {}
    for label in labels:
        first.setdefault(label, len(first))
    ids = np.array([first[label] for label in labels])
    return X, y, labels, ids


def fixed_graph(params):
    """The fixed-k graph an open-ended model equals: the open-ended complete graph's T (T_ii = 1,
    T_ij = 1/2) or the disconnected graph."""
    graph = params.get("graph", "complete")
    return omtl.TaskGraph.complete_open(K) if graph == "complete" else omtl.TaskGraph.disconnected(K)


def fixed_model(cls, params):
    kw = dict(params)
    if "graph" in cls._param_names():
        kw["graph"] = fixed_graph(params)
    return cls(n_tasks=K, **kw)


@pytest.mark.parametrize("native, reference, params", GROWABLE)
def test_an_open_ended_model_equals_a_fixed_model_of_the_final_size(native, reference, params):
    X, y, labels, ids = arriving_stream()
    for cls in (native, reference):
        grown, fixed = cls(n_tasks=None, **params), fixed_model(cls, params)
        assert grown.n_tasks is None
        s_grown = np.concatenate([pre_update_scores(grown, X[sl], y[sl], labels[sl]) for sl in chunks_of(len(y), 25)])
        s_fixed = np.concatenate([pre_update_scores(fixed, X[sl], y[sl], ids[sl]) for sl in chunks_of(len(y), 25)])
        # The same model, task by task: the same arithmetic, so the same scores.
        np.testing.assert_array_equal(s_grown, s_fixed)
        assert list(grown.tasks_) == list(dict.fromkeys(labels))
        np.testing.assert_array_equal(grown.n_seen_per_task_, fixed.n_seen_per_task_)
        np.testing.assert_array_equal(grown.decision_function(X, tasks=labels), fixed.decision_function(X, tasks=ids))


@pytest.mark.parametrize("native, reference, params", GROWABLE)
def test_native_and_reference_grow_alike(native, reference, params):
    X, y, labels, _ = arriving_stream(seed=3)
    nat, ref = native(n_tasks=None, **params), reference(n_tasks=None, **params)
    parity = compare_runs(nat, ref, X, y, labels, slices=chunks_of(len(y), 30))
    if parity.complete:
        unseen = np.array(["never-seen"] * 5)
        np.testing.assert_allclose(
            nat.decision_function(X[:5], tasks=unseen), ref.decision_function(X[:5], tasks=unseen), rtol=1e-9, atol=1e-12
        )
        assert list(nat.tasks_) == list(ref.tasks_)


@pytest.mark.parametrize(
    "cls, params",
    [
        (omtl.MTPerceptron, {}),
        (omtl.MTPerceptron, {"kernel": "rbf", "gamma": 0.5}),
        (omtl.MTRBP, {"budget": 15, "kernel": "rbf", "gamma": 0.5, "seed": 4}),
        (omtl.MTLinear, {"loss": "hinge"}),
        (omtl.MTLinear, {}),
    ],
)
def test_the_open_complete_graph_decides_as_the_fixed_complete_graph(cls, params):
    """T_open = (k+1)/2 T_complete: the sign-based Perceptron rules (and MTLinear's normalized
    rule, invariant to the blocks' scale) decide alike; the Perceptrons' scores differ by (k+1)/2."""
    X, y, labels, ids = arriving_stream(seed=5)
    grown, fixed = cls(**params), cls(n_tasks=K, graph="complete", **params)
    s_grown = pre_update_scores(grown, X, y, labels)
    s_fixed = pre_update_scores(fixed, X, y, ids)
    clear = np.abs(s_fixed) > 1e-6 * np.abs(s_fixed).max()
    np.testing.assert_array_equal((s_grown >= 0)[clear], (s_fixed >= 0)[clear])
    if cls is omtl.MTLinear:  # single-precision weights, rounded differently under the two scales
        np.testing.assert_allclose(s_grown, s_fixed, rtol=1e-4, atol=1e-5)
    else:
        check_scores(s_grown, s_fixed * (K + 1) / 2)


def test_the_disconnected_graph_is_one_learner_per_label():
    X, y, labels, _ = arriving_stream(seed=7)
    model = omtl.MTPerceptron(graph="disconnected").partial_fit(X, y, tasks=labels)
    for label in np.unique(labels):
        alone = omtl.MTPerceptron(n_tasks=1).partial_fit(X[labels == label], y[labels == label], tasks=0)
        np.testing.assert_array_equal(model.decision_function(X, tasks=label), alone.decision_function(X, tasks=0))
    # A label never seen scores 0 (no examples, nothing shared), and the model does not grow.
    np.testing.assert_array_equal(model.decision_function(X, tasks="nobody"), np.zeros(len(y)))
    assert "nobody" not in list(model.tasks_)


def test_an_unseen_label_scores_as_a_new_task_without_changing_the_model():
    X, y, labels, _ = arriving_stream(seed=8)
    model = omtl.MTPerceptron().partial_fit(X, y, tasks=labels)
    before = pickle.dumps(model)
    cold = model.decision_function(X[:20], tasks="newcomer")
    assert pickle.dumps(model) == before
    # The open complete graph gives a newcomer the shared part: T_new,j = 1/2 for every j.
    assert np.abs(cold).max() > 0
    grown = pickle.loads(before).add_tasks(["newcomer"])
    np.testing.assert_allclose(grown.decision_function(X[:20], tasks="newcomer"), cold, rtol=1e-12)
    assert grown.tasks_[-1] == "newcomer" and grown.n_seen_per_task_[-1] == 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the reference twins compute the overflow before refusing
@pytest.mark.parametrize("cls", [omtl.PAUnique, omtl.reference.PAUnique, omtl.MTLinear, omtl.reference.MTLinear])
def test_a_batch_that_fails_after_new_labels_changes_nothing(cls):
    X, y, labels, _ = arriving_stream(seed=9)
    model = cls().partial_fit(X[:100], y[:100], tasks=labels[:100])
    before = pickle.dumps(model)
    for value in (np.nan, 1e200):  # NaN; a row whose squared norm overflows (refused, or a non-finite step)
        if value == 1e200 and cls is omtl.reference.PAUnique:
            continue  # the reference PA takes tau = 0 for an infinite norm
        bad = X[100:110].copy()
        bad[5] = value
        with pytest.raises(ValueError):
            model.partial_fit(bad, y[100:110], tasks=["fresh"] * 10)
    with pytest.raises(TypeError):
        model.partial_fit(X[100:110], y[100:110], tasks=["fresh"] * 9 + [["unhashable"]])
    assert pickle.dumps(model) == before
    assert "fresh" not in list(model.tasks_)


def test_labels_of_every_kind():
    pd = pytest.importorskip("pandas")
    X, y, _, ids = arriving_stream(seed=10)
    cats = pd.Categorical(np.array(["a", "b", "c", "d", "e", "f"])[ids])
    a = omtl.MTLinear().partial_fit(X, y, tasks=pd.Series(cats))
    b = omtl.MTLinear().partial_fit(X, y, tasks=list(np.array(["a", "b", "c", "d", "e", "f"])[ids]))
    np.testing.assert_array_equal(a.decision_function(X, tasks=cats), b.decision_function(X, tasks=np.asarray(cats)))
    # Open-ended integer labels are labels too: indices in order of appearance, not their values.
    c = omtl.PAUnique().partial_fit(X[:3], y[:3], tasks=[10**12, 7, 10**12])
    assert c.tasks_.tolist() == [10**12, 7] and c.tasks_.dtype == np.int64
    d = omtl.PAUnique().partial_fit(X[:2], y[:2], tasks=[("eu", 3), 2.5])
    assert d.tasks_.tolist() == [("eu", 3), 2.5]
    d.partial_fit(X[:2], y[:2], tasks="one label for every row")
    assert d.n_seen_per_task_.tolist() == [1, 1, 2]
    for bad, exc in [([[1], [2]], TypeError), ([True, False], TypeError), ([float("nan")] * 2, ValueError)]:
        with pytest.raises(exc):
            omtl.PAUnique().partial_fit(X[:2], y[:2], tasks=bad)


def test_a_fixed_n_tasks_takes_string_labels_up_to_n_tasks():
    X, y, labels, _ = arriving_stream(seed=11)
    model = omtl.OMTRL(n_tasks=K).partial_fit(X, y, tasks=labels)
    assert sorted(model.tasks_) == sorted(set(labels))
    with pytest.raises(ValueError, match="fixed set of n_tasks=6.*n_tasks=None"):
        model.partial_fit(X[:1], y[:1], tasks="a seventh")
    # A model fitted with integer ids keeps them (tasks_ = arange(n_tasks)) and refuses strings.
    ints = omtl.PAUnique(n_tasks=3).partial_fit(X[:10], y[:10], tasks=np.arange(10) % 3)
    assert ints.tasks_.tolist() == [0, 1, 2]
    with pytest.raises(TypeError, match="integer ids"):
        ints.partial_fit(X[:1], y[:1], tasks="a")


@pytest.mark.parametrize("cls", FIXED_ONLY)
def test_learners_of_a_task_relation_refuse_open_ended_tasks(cls):
    X, y, labels, _ = arriving_stream(seed=12)
    model = cls(n_tasks=None)
    with pytest.raises(ValueError, match="needs n_tasks"):
        model.partial_fit(X, y, tasks=labels)
    assert not model._is_fitted()
    fitted = cls(n_tasks=K).partial_fit(X, y, tasks=labels)
    with pytest.raises(ValueError, match="needs n_tasks"):
        fitted.add_tasks(["another"])
    # The engine refuses too (the default of OnlineLearner::add_tasks).
    with pytest.raises(ValueError, match="cannot add tasks"):
        fitted._core._learner.add_tasks(1)


@pytest.mark.parametrize(
    "cls, params, match",
    [
        (omtl.MTBPRJ2, {"budget": 5, "n_tasks": None}, "disconnected"),
        (omtl.MTPerceptron, {"graph": omtl.TaskGraph.from_edges(2, [(0, 1)])}, "TaskGraph fixes"),
    ],
)
def test_settings_that_cannot_grow_refuse_n_tasks_none_clearly(cls, params, match):
    X, y, labels, _ = arriving_stream(seed=13)
    with pytest.raises(ValueError, match=match):
        cls(**params).partial_fit(X, y, tasks=labels)


def test_a_fixed_graph_rejects_unknown_tasks_and_says_how_to_grow():
    X, y, _, ids = arriving_stream(seed=14)
    graph = omtl.TaskGraph.from_edges(K, [(0, 1), (2, 3)])
    model = omtl.MTPerceptron(n_tasks=K, graph=graph).partial_fit(X, y, tasks=ids)
    with pytest.raises(ValueError, match="unknown task id 6.*add_tasks"):
        model.partial_fit(X[:1], y[:1], tasks=[K])
    with pytest.raises(ValueError, match="cannot grow"):
        model.add_tasks([K], graph=graph.add_tasks(1))
    # The disconnected graph grows a fitted model exactly: the new task is a new independent learner.
    d = omtl.MTPerceptron(n_tasks=K, graph=omtl.TaskGraph.disconnected(K)).partial_fit(X, y, tasks=ids)
    with pytest.raises(ValueError, match="graph=model.graph.add_tasks"):
        d.add_tasks([K])
    d.add_tasks([K, K + 1], graph=d.graph.add_tasks(2))
    assert d.n_tasks == K + 2 and d.graph == omtl.TaskGraph.disconnected(K + 2) and d.tasks_.tolist() == list(range(K + 2))
    d.partial_fit(X[:30], y[:30], tasks=K + 1)
    alone = omtl.MTPerceptron(n_tasks=1).partial_fit(X[:30], y[:30], tasks=0)
    np.testing.assert_array_equal(d.decision_function(X, tasks=K + 1), alone.decision_function(X, tasks=0))
    # The fixed-k complete graph's T depends on k: growing it is refused with the reason.
    c = omtl.MTPerceptron(n_tasks=K, graph="complete").partial_fit(X, y, tasks=ids)
    with pytest.raises(ValueError, match="depends on k.*n_tasks=None"):
        c.add_tasks([K])
    before = pickle.dumps(c)
    with pytest.raises(ValueError, match="next ids"):
        d.add_tasks([99])
    assert pickle.dumps(c) == before


def test_task_graph_add_tasks_semantics():
    g = omtl.TaskGraph.from_edges(3, [(0, 1)], [2.0])
    isolated = g.add_tasks(2)
    np.testing.assert_allclose(isolated.task_kernel[:3, :3], g.task_kernel, rtol=1e-12)
    np.testing.assert_array_equal(isolated.task_kernel[3:, 3:], np.eye(2))
    np.testing.assert_array_equal(isolated.task_kernel[:3, 3:], 0.0)
    joined = g.add_tasks(1, edges=[(2, 3)])
    assert joined.components.tolist() == [0, 0, 1, 1]
    assert not np.allclose(joined.task_kernel[2, 2], g.task_kernel[2, 2])  # an edge to an old task changes T there
    assert omtl.TaskGraph.complete(3).add_tasks(2) == omtl.TaskGraph.complete(5)
    opened = omtl.TaskGraph.complete_open(3).add_tasks(2).task_kernel
    np.testing.assert_array_equal(opened, (np.eye(5) + np.ones((5, 5))) / 2)
    for matrix_graph in (omtl.TaskGraph.from_task_kernel(np.eye(2) + 0.5), omtl.TaskGraph.from_interaction(2 * np.eye(2))):
        grown = matrix_graph.add_tasks(1)
        np.testing.assert_allclose(grown.task_kernel[:2, :2], matrix_graph.task_kernel, rtol=1e-12)
        assert grown.task_kernel[2, 2] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="edge-list"):
        omtl.TaskGraph.complete(3).add_tasks(1, edges=[(0, 3)])


def test_n_tasks_cannot_change_after_fitting():
    X, y, labels, _ = arriving_stream(seed=15)
    model = omtl.PAUnique().partial_fit(X[:50], y[:50], tasks=labels[:50])
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match="n_tasks"):
        model.set_params(n_tasks=5)
    model.set_params(n_tasks=None)  # unchanged: fine
    model.n_tasks = 5  # behind set_params' back: caught before anything is learned
    with pytest.raises(ValueError, match="n_tasks was changed"):
        model.partial_fit(X[50:], y[50:], tasks=labels[50:])
    with pytest.raises(ValueError, match="n_tasks was changed"):
        model.decision_function(X, tasks=labels)
    model.n_tasks = None
    assert pickle.dumps(model) == before
    fixed = omtl.PAUnique(n_tasks=K).partial_fit(X, y, tasks=labels)
    fixed.n_tasks = None
    with pytest.raises(ValueError, match="n_tasks was changed to None"):
        fixed.partial_fit(X, y, tasks=labels)


@pytest.mark.parametrize("cls, params", [(omtl.MTLinear, {}), (omtl.MTRBP, {"budget": 10, "seed": 1}), (omtl.PAUnique, {})])
def test_pickle_and_model_files_keep_the_mapping(cls, params):
    X, y, labels, _ = arriving_stream(seed=16)
    # The same two batches (gamma="scale" is read from the first one).
    whole = cls(**params).partial_fit(X[:150], y[:150], tasks=labels[:150]).partial_fit(X[150:], y[150:], tasks=labels[150:])
    half = cls(**params).partial_fit(X[:150], y[:150], tasks=labels[:150])
    path = os.path.join(tempfile.mkdtemp(), "model.omtl")
    omtl.save(half, path)
    for restored in (omtl.load(path), pickle.loads(pickle.dumps(half))):
        assert restored.n_tasks is None and list(restored.tasks_) == list(half.tasks_)
        restored.partial_fit(X[150:], y[150:], tasks=labels[150:])
        assert list(restored.tasks_) == list(whole.tasks_)
        np.testing.assert_array_equal(restored.decision_function(X, tasks=labels), whole.decision_function(X, tasks=labels))
    odd = cls(**params).partial_fit(X[:5], y[:5], tasks=[(1, 2)] * 5)
    with pytest.raises(TypeError, match="str and int task labels"):
        omtl.save(odd, path)


def test_engine_growth_is_atomic_and_checked():
    X, y, _, ids = arriving_stream(seed=17)
    model = omtl.MTLinear(n_tasks=2, graph="disconnected").partial_fit(X[:40], y[:40], tasks=ids[:40] % 2)
    learner = model._core._learner
    state = bytes(learner.to_bytes())
    with pytest.raises((ValueError, MemoryError)):
        learner.add_tasks(2**40)  # far beyond memory (or u32 task ids): refused, nothing changed
    assert bytes(learner.to_bytes()) == state
    fresh = NativeLearner.from_bytes(state)
    fresh.add_tasks(3)
    assert fresh.n_tasks == 5
    fresh.check_state()


def joint_rounds(ids, width=3):
    """Round ids grouping consecutive rows of distinct tasks, at most ``width`` per round."""
    rounds, current, members = [], 0, set()
    for task in ids:
        if task in members or len(members) == width:
            current, members = current + 1, set()
        members.add(task)
        rounds.append(current)
    return np.array(rounds)


@pytest.mark.parametrize(
    "cls", [omtl.MTPerceptron, omtl.reference.MTPerceptron, omtl.CWCOL, omtl.reference.CWCOL, omtl.OMTL, omtl.reference.OMTL]
)
def test_learn_rounds_grows_too(cls):
    X, y, labels, ids = arriving_stream(seed=18)
    rounds = joint_rounds(ids)  # OMTL updates each round jointly; the others flatten it
    grown, fixed = cls(), cls(n_tasks=K, **({"graph": omtl.TaskGraph.complete_open(K)} if "graph" in cls._param_names() else {}))
    cuts = [0, *np.flatnonzero(np.diff(rounds)) + 1, len(y)][::12] + [len(y)]  # whole rounds per call
    parts = [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    a = np.concatenate([pre_update_scores(grown, X[sl], y[sl], labels[sl], rounds[sl]) for sl in parts])
    b = np.concatenate([pre_update_scores(fixed, X[sl], y[sl], ids[sl], rounds[sl]) for sl in parts])
    np.testing.assert_array_equal(a, b)
    assert list(grown.tasks_) == list(dict.fromkeys(labels))


def test_add_tasks_takes_one_label_or_a_sequence():
    X, y, labels, _ = arriving_stream(seed=19)
    model = omtl.PAUnique().partial_fit(X[:20], y[:20], tasks=labels[:20])
    n = len(model.tasks_)
    model.add_tasks("carol")  # one label, not five characters
    model.add_tasks(iter(["dave", ("eu", 7)]))
    assert list(model.tasks_[n:]) == ["carol", "dave", ("eu", 7)]
    assert model.n_seen_per_task_[n:].tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="new and distinct"):
        model.add_tasks(["carol"])
    with pytest.raises(ValueError, match="grows a fitted model"):
        omtl.PAUnique().add_tasks(["x"])


def _legacy_state(model) -> dict:
    """``model``'s pickled state as omtl wrote it with one attribute per task-set field (and, for
    a reference core, the core itself rather than a snapshot)."""
    state = model.__getstate__()
    tasks = state.pop("_tasks")
    state.update(_seen_per_task=tasks.counts, _n_tasks_at_fit=tasks.n_tasks_at_fit)
    if tasks.labels is not None:
        state.update(_task_labels=tasks.labels, _task_index=tasks.index)
    if not hasattr(state["_core"], "_learner"):
        state["_core"] = state["_core"].restore()
    return state


@pytest.mark.parametrize("cls", [omtl.MTLinear, omtl.PAUnique, omtl.reference.PAUnique, omtl.reference.MTPerceptron])
@pytest.mark.parametrize("open_ended", [False, True], ids=["fixed", "labels"])
def test_a_state_pickled_with_one_attribute_per_task_field_still_loads(cls, open_ended):
    X, y, _, _ = arriving_stream(n=80, d=4)
    tasks = [f"u{i % 5}" for i in range(80)] if open_ended else np.arange(80) % 3
    model = cls(n_tasks=None if open_ended else 3).fit(X, y, tasks=tasks)
    old = cls.__new__(cls)
    old.__setstate__(pickle.loads(pickle.dumps(_legacy_state(model))))
    assert old._tasks.n_tasks_at_fit == model._tasks.n_tasks_at_fit
    np.testing.assert_array_equal(old.tasks_, model.tasks_)
    np.testing.assert_array_equal(old.n_seen_per_task_, model.n_seen_per_task_)
    np.testing.assert_array_equal(old.decision_function(X, tasks=tasks), model.decision_function(X, tasks=tasks))
    # It goes on learning (and growing) as the model it was pickled from.
    more = ["newcomer"] * 4 if open_ended else np.arange(4) % 3
    np.testing.assert_array_equal(old.learn(X[:4], y[:4], tasks=more), model.learn(X[:4], y[:4], tasks=more))
    np.testing.assert_array_equal(old.n_seen_per_task_, model.n_seen_per_task_)
