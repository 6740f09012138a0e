"""A user's life in the model (docs/lifecycle.md): forgetting tasks on every learner and twin,
and MTLinear's byte budget over users."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from parity import assert_same_run

import omtl
from omtl import reference as ref

# Every class, built so that it stores its examples where it can (a non-linear kernel, a fixed
# gamma) on the disconnected graph where it has one, with a budget that does not fill.
KERNEL = {"kernel": "rbf", "gamma": 0.5}
CLASSES = [
    ("MTLinear", {"graph": "disconnected"}),
    ("MTLinear", {}),
    ("KernelPerceptron", KERNEL),
    ("MTPerceptron", {"graph": "disconnected", **KERNEL}),
    ("MTRBP", {"graph": "disconnected", **KERNEL}),
    ("MTFORG", {"graph": "disconnected", **KERNEL}),
    ("MTBPRJ", {"graph": "disconnected", **KERNEL}),
    ("MTBPRJ2", {"graph": "disconnected", **KERNEL}),
    ("PAUnique", {}),
    ("PAGlobal", {}),
    ("CWCOL", {}),
    ("OMTL", {}),
    ("OMTRL", {"n_tasks": 50}),
    ("MTFL", {"n_tasks": 50, "retrain_every": 40}),
    ("TRML", {"n_tasks": 50, "retrain_every": 40}),
    ("ROMCO", {"n_tasks": 50}),
]
IDS = [f"{name}-{i}" for i, (name, _) in enumerate(CLASSES)]
K, D = 50, 6


def stream(n, seed=0, k=K):
    """Rows of distinct random values (each one searchable in a file), string user ids."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, D))
    users = rng.integers(0, k, n)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] * np.where(users % 2 == 0, 1, -1) > 0, 1, -1)
    # "user3!" is no part of another label: a label is searched for in files as a whole.
    return X, y, np.array([f"user{u}!" for u in users], dtype=object)


@pytest.mark.parametrize(("name", "kwargs"), CLASSES, ids=IDS)
def test_forget_leaves_no_row_of_the_task_in_the_saved_file(name, kwargs, tmp_path):
    X, y, users = stream(400)
    model = getattr(omtl, name)(**kwargs)
    model.partial_fit(X, y, tasks=users)
    gone = ["user3!", "user7!"]
    seen_before = dict(zip(model.tasks_, model.n_seen_per_task_))
    model.forget(gone)
    assert not set(gone) & set(model.tasks_)
    assert len(model.tasks_) == len(model.n_seen_per_task_)
    assert model.n_forgotten_ == sum(seen_before[u] for u in gone)
    path = tmp_path / "m.omtl"
    omtl.save(model, path)
    data = path.read_bytes() + pickle.dumps(model)
    for row in X[np.isin(users, gone)]:
        for v in row:
            assert np.float64(v).tobytes() not in data, f"{name}: a value of a forgotten row is stored"
            assert np.float32(v).tobytes() not in data, f"{name}: a value of a forgotten row is stored (f32)"
        for label in gone:
            assert label.encode() not in data
    # The model keeps learning (the forgotten users come back as new tasks) and saving.
    model.partial_fit(X, y, tasks=users)
    omtl.save(model, path)
    back = omtl.load(path)
    np.testing.assert_array_equal(back.decision_function(X, tasks=users), model.decision_function(X, tasks=users))
    assert list(back.tasks_) == list(model.tasks_)


@pytest.mark.parametrize(("name", "kwargs"), CLASSES, ids=IDS)
def test_forget_on_the_twin_follows_the_engine(name, kwargs):
    X, y, users = stream(240, seed=1)
    native, twin = getattr(omtl, name)(**kwargs), getattr(ref, name)(**kwargs)
    parity = assert_same_run(native, twin, X[:120], y[:120], users[:120])
    if not parity.complete:
        pytest.skip("a tie parted the runs")
    native.forget(["user1!", "user4!"])
    twin.forget(["user1!", "user4!"])
    assert list(native.tasks_) == list(twin.tasks_)
    np.testing.assert_array_equal(native.n_seen_per_task_, twin.n_seen_per_task_)
    assert native.n_active_ == twin.n_active_
    assert_same_run(native, twin, X[120:], y[120:], users[120:])


# Learners whose tasks share nothing on the disconnected graph (docs/lifecycle.md).
EXACT = [
    ("KernelPerceptron", KERNEL),
    ("KernelPerceptron", {}),
    ("MTPerceptron", {"graph": "disconnected", **KERNEL}),
    ("MTRBP", {"graph": "disconnected", **KERNEL}),
    ("PAUnique", {}),
    ("MTLinear", {"graph": "disconnected"}),
    ("OMTL", {}),
]


@pytest.mark.parametrize(("name", "kwargs"), EXACT, ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXACT)])
def test_forgetting_equals_never_learning_where_tasks_share_nothing(name, kwargs):
    X, y, users = stream(400, seed=2)
    # The users in order of first appearance without user5, so that both models number them alike.
    keep = users != "user5!"
    full, without = getattr(omtl, name)(**kwargs), getattr(omtl, name)(**kwargs)
    full.partial_fit(X, y, tasks=users)
    full.forget("user5!")
    without.partial_fit(X[keep], y[keep], tasks=users[keep])
    others = [u for u in full.tasks_]
    rows = np.isin(users, others)
    a = full.decision_function(X[rows], tasks=users[rows])
    b = without.decision_function(X[rows], tasks=users[rows])
    assert a.tobytes() == b.tobytes()


def test_a_forgotten_label_frees_its_task_for_the_next_new_label():
    X, y, users = stream(60, k=6)
    model = omtl.MTLinear(graph="disconnected")
    model.partial_fit(X, y, tasks=users)
    before = pickle.dumps(model)
    for bad in (["user1!", "nobody"], ["user1!", "user1!"]):
        with pytest.raises(ValueError):
            model.forget(bad)
        assert pickle.dumps(model) == before
    position = list(model.tasks_).index("user1!")
    model.forget("user1!")
    assert model.decision_one(X[0], task="user1!") == 0.0  # a new task
    model.learn_one(X[0], 1, task="newcomer")  # the event path takes the free task
    assert list(model.tasks_)[position] == "newcomer"
    restored = pickle.loads(pickle.dumps(model))
    assert list(restored.tasks_) == list(model.tasks_)
    restored.partial_fit(X[:3], y[:3], tasks=["user1!"] * 3)
    assert list(restored.tasks_)[-1] == "user1!"


def churn(n, n_users, width=1024, seed=0):
    """Sparse rows, users with a heavy head (user = n_users u^3)."""
    rng = np.random.default_rng(seed)
    cols = np.sort(rng.integers(0, width, (n, 8)), axis=1)
    X = sp.csr_matrix((np.ones(n * 8), cols.ravel(), np.arange(0, n * 8 + 1, 8)), shape=(n, width))
    X.sum_duplicates()
    users = (n_users * rng.random(n) ** 3).astype(np.int64)
    y = np.where((cols[:, 0] + users) % 3 == 0, -1, 1)
    return X, y, users


@pytest.mark.parametrize("tail_bits", [None, 10])
def test_the_user_budget_holds_memory_and_its_twin_follows_the_rule(tail_bits):
    X, y, users = churn(1500, 400)
    kw = {"n_tasks": None, "max_bytes": 150_000, "tail_bits": tail_bits}
    native, twin = omtl.MTLinear(**kw), ref.MTLinear(**kw)
    for sl in [slice(a, a + 100) for a in range(0, 1500, 100)]:
        parity = assert_same_run(native, twin, X[sl], y[sl], users[sl], rtol=1e-6)
        assert native.memory_bytes_ <= 150_000
        if not parity.complete:
            pytest.skip("a tie parted the runs")
        assert native.n_evicted_users_ == twin.n_evicted_users_
        assert native.n_resident_users_ == twin.n_resident_users_
    assert native.n_evicted_users_ > 50
    # Forgetting a resident user under the budget.
    resident = next(u for u in native.tasks_ if native.decision_one({0: 1.0}, task=u) != 0.0)
    native.forget(resident)
    twin.forget(resident)
    assert_same_run(native, twin, X[:200], y[:200], users[:200], rtol=1e-6)


def test_the_user_budget_refuses_what_it_cannot_hold():
    with pytest.raises(ValueError, match="max_bytes"):
        omtl.MTLinear(max_bytes=1000, hash_bits=10).partial_fit(np.eye(2), [1, -1], tasks=[0, 1])
    with pytest.raises(ValueError, match="tail_bits"):
        omtl.MTLinear(tail_bits=8).partial_fit(np.eye(2), [1, -1], tasks=[0, 1])
    with pytest.raises(ValueError, match="max_bytes"):
        omtl.MTLinear(max_bytes=100).partial_fit(np.eye(2), [1, -1], tasks=[0, 1])
    # A budget as large as the exact model changes nothing.
    X, y, users = churn(600, 50, seed=3)
    exact, roomy = omtl.MTLinear(), omtl.MTLinear(max_bytes=1 << 30, tail_bits=8)
    assert exact.learn(X, y, tasks=users).tolist() == roomy.learn(X, y, tasks=users).tolist()
    assert roomy.n_evicted_users_ == 0


# ---- delayed labels ------------------------------------------------------------------------------
DELAYED = [(name, kwargs) for name, kwargs in CLASSES if "n_tasks" not in kwargs]


@pytest.mark.parametrize("module", [omtl, ref], ids=["native", "twin"])
@pytest.mark.parametrize(("name", "kwargs"), DELAYED, ids=[f"{n}-{i}" for i, (n, _) in enumerate(DELAYED)])
def test_labels_learned_late_in_any_order_equal_learn_one_in_that_order(module, name, kwargs):
    X, y, users = stream(60, seed=4, k=5)
    late, direct = getattr(module, name)(**kwargs), getattr(module, name)(**kwargs)
    late.partial_fit(X[:10], y[:10], tasks=users[:10])
    direct.partial_fit(X[:10], y[:10], tasks=users[:10])
    first = late.n_mistakes_
    served = [late.predict_one(X[i], task=users[i], remember=f"e{i}", now=0.0) for i in range(10, 35)]
    served += list(late.predict(X[35:], tasks=users[35:], remember=[f"e{i}" for i in range(35, 60)], now=1.0))
    order = np.random.default_rng(5).permutation(np.arange(10, 60))
    for i in order:
        late.learn_label(f"e{i}", y[i], now=2.0)
        direct.learn_one(X[i], y[i], task=users[i])
    assert late.decision_function(X, tasks=users).tobytes() == direct.decision_function(X, tasks=users).tobytes()
    assert late.n_seen_ == direct.n_seen_ and late.pending_["count"] == 0
    # The counters count the predictions served.
    assert late.n_mistakes_ == first + sum(int(s != y[i]) for s, i in zip(served, range(10, 60)))


def test_pending_events_are_bounded_saved_and_refused_clearly(tmp_path):
    X, y, users = stream(40, seed=6, k=4)
    model = omtl.MTLinear()
    model.partial_fit(X[:10], y[:10], tasks=users[:10])
    model.predict(X[10:30], tasks=users[10:30], remember=[f"e{i}" for i in range(10, 30)], now=0.0)
    with pytest.raises(KeyError):
        model.learn_label("never", 1, now=1.0)
    model.set_pending_limits(max_events=15, max_age=100.0)
    model.predict_one(X[30], task=users[30], remember="e30", now=1.0)
    assert model.pending_["count"] == 15 and model.pending_["evicted"] == 6
    with pytest.raises(KeyError):
        model.learn_label("e10", y[10], now=2.0)  # evicted: the oldest first
    with pytest.raises(ValueError, match="expired"):
        model.learn_label("e20", y[20], now=500.0)
    assert model.pending_["count"] == 15  # an expired event stays until the next remember
    # Saved with the model: pickles and model files.
    omtl.save(model, tmp_path / "m.omtl")
    for copy in (pickle.loads(pickle.dumps(model)), omtl.load(tmp_path / "m.omtl")):
        assert copy.pending_ == model.pending_
        copy.learn_label("e25", y[25], now=3.0)
    model.learn_label("e25", y[25], now=3.0)
    assert copy.decision_function(X, tasks=users).tobytes() == model.decision_function(X, tasks=users).tobytes()
    # Forgetting a user drops its pending events.
    user = users[29]
    before = model.pending_["count"]
    model.forget(user)
    assert model.pending_["count"] == before - sum(users[i] == user for i in range(16, 31) if i != 25)


def test_evaluate_delayed_replays_a_stream_with_late_labels():
    X, y, users = stream(300, seed=7, k=5)
    now = omtl.evaluate(omtl.MTLinear(), X, y, tasks=users)
    same = omtl.evaluate_delayed(omtl.MTLinear(), X, y, tasks=users, delay=0)
    assert same.mistakes == now.mistakes
    late = omtl.evaluate_delayed(omtl.MTLinear(), X, y, tasks=users, delay=50)
    twin = omtl.evaluate_delayed(ref.MTLinear(), X, y, tasks=users, delay=50)
    assert late.mistakes == twin.mistakes and late.n == 300
    with pytest.raises(ValueError, match="delay"):
        omtl.evaluate_delayed(omtl.MTLinear(), X, y, tasks=users, delay=-1)
