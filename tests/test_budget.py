"""Budget learners MTRBP and MTFORG (ALGORITHMS.md §4.1, §4.2; invariants INV-B1..B4, B6, F1)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_graph, random_stream
from parity import chunks_of, compare_runs

import omtl
import omtl.reference as ref
from omtl._rng import SplitMix64

# This module's learners in the conformance and parity suites (see learner_table.py).
CONFORMANCE = [
    ("rbp-rbf-C-B20", omtl.MTRBP, ref.MTRBP, {"budget": 20, "kernel": "rbf", "gamma": 0.7, "seed": 3}),
    ("rbp-linear-D-B7", omtl.MTRBP, ref.MTRBP, {"budget": 7, "graph": "disconnected", "kernel": "linear", "seed": 12345678901234567890}),
    ("rbp-poly-C-B1", omtl.MTRBP, ref.MTRBP, {"budget": 1, "kernel": "poly", "degree": 3, "normalize": True}),
    ("forg-rbf-C-B20", omtl.MTFORG, ref.MTFORG, {"budget": 20, "kernel": "rbf", "gamma": 0.7}),
    ("forg-linear-D-B7", omtl.MTFORG, ref.MTFORG, {"budget": 7, "graph": "disconnected", "kernel": "linear", "radius": 3.0}),
    ("forg-poly-C-B1", omtl.MTFORG, ref.MTFORG, {"budget": 1, "kernel": "poly", "degree": 2, "normalize": True}),
]

BUDGET_CLASSES = [(omtl.MTRBP, ref.MTRBP), (omtl.MTFORG, ref.MTFORG)]
BUDGET_IDS = ["MTRBP", "MTFORG"]


def noisy_stream(n, d, k, *, seed, flip=0.25, sparse=False):
    """A stream with enough label noise that a small budget keeps evicting."""
    X, y, tasks = random_stream(n=n, d=d, k=k, seed=seed, sparse=sparse)
    flips = np.random.default_rng(seed + 1000).random(n) < flip
    return X, np.where(flips, -y, y), tasks


def step_by_step(model, X, y, tasks, record):
    """Feeds one example at a time; returns the predictions and ``record(model)`` after each step."""
    preds, trace = [], []
    for t in range(len(y)):
        preds.append(int(model.learn(X[t : t + 1], y[t : t + 1], tasks=tasks[t : t + 1])[0]))
        trace.append(record(model))
    return np.array(preds), trace


def eviction_sequence(model, X, y, tasks):
    """Insertion times of the evicted elements, in eviction order (MTRBP)."""
    _, trace = step_by_step(model, X, y, tasks, lambda m: (m.n_evictions_, m._diagnostics().get("last_evicted_time", 0)))
    seq, seen = [], 0
    for n_ev, when in trace:
        if n_ev > seen:
            seq.append(int(when))
            seen = n_ev
    return seq


# ---- INV-B3: reproducible random evictions, and the budget --------------------------------------


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_same_seed_gives_the_same_eviction_sequence_native_and_reference(sparse):
    X, y, tasks = noisy_stream(260, 6, 3, seed=4, sparse=sparse)
    params = {"n_tasks": 3, "budget": 12, "kernel": "rbf", "gamma": 0.8, "seed": 2024}
    a = eviction_sequence(omtl.MTRBP(**params), X, y, tasks)
    b = eviction_sequence(omtl.MTRBP(**params), X, y, tasks)
    c = eviction_sequence(ref.MTRBP(**params), X, y, tasks)
    assert len(a) > 30
    assert a == b == c


def test_different_seeds_give_different_eviction_sequences():
    X, y, tasks = noisy_stream(300, 6, 3, seed=5)
    seqs = [eviction_sequence(omtl.MTRBP(n_tasks=3, budget=10, kernel="rbf", seed=s), X, y, tasks) for s in (0, 1, 2)]
    assert all(len(s) > 30 for s in seqs)
    assert seqs[0] != seqs[1] and seqs[0] != seqs[2] and seqs[1] != seqs[2]


def test_evictions_follow_the_pinned_generator():
    """The i-th eviction removes position rng.below(B) of the active set in insertion order."""
    B = 6
    X, y, tasks = noisy_stream(200, 5, 2, seed=8)
    model = omtl.MTRBP(n_tasks=2, budget=B, kernel="rbf", seed=77)
    _, trace = step_by_step(model, X, y, tasks, lambda m: (m.n_updates_, m.n_evictions_, m._diagnostics()["last_evicted_time"]))
    rng, stored, prev_updates = SplitMix64(77), [], 0
    for t, (n_upd, _n_ev, evicted) in enumerate(trace, start=1):
        if n_upd > prev_updates:
            if len(stored) == B:
                assert stored.pop(rng.below(B)) == evicted
            stored.append(t)
        prev_updates = n_upd
    assert model.n_evictions_ > 20


@pytest.mark.parametrize("budget", [1, 3, 17])
@pytest.mark.parametrize("classes", BUDGET_CLASSES, ids=BUDGET_IDS)
def test_budget_is_never_exceeded(classes, budget):
    X, y, tasks = noisy_stream(400, 5, 4, seed=budget)
    for cls, kw in [(classes[0], {"kernel": "rbf"}), (classes[1], {"kernel": "poly", "normalize": True})]:
        model = cls(n_tasks=4, budget=budget, graph=random_graph(4, seed=budget), **kw)
        _, sizes = step_by_step(model, X, y, tasks, lambda m: m.n_active_)
        assert max(sizes) == budget
        # Every mistake made with a full set evicts exactly one element.
        assert model.n_updates_ == model.n_active_ + model.n_evictions_
        assert model.n_evictions_ > 0


# ---- INV-B1, INV-B2, INV-B6: large budgets ------------------------------------------------------


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("kernel", ["linear", "poly", "rbf"])
@pytest.mark.parametrize("classes", BUDGET_CLASSES, ids=BUDGET_IDS)
def test_budget_at_least_n_equals_the_multitask_perceptron(classes, kernel, sparse):
    n, k = 300, 5
    X, y, tasks = noisy_stream(n, 6, k, seed=21, flip=0.1, sparse=sparse)
    graph = random_graph(k, seed=9, weighted=True)
    p = omtl.MTPerceptron(n_tasks=k, graph=graph, kernel=kernel)
    extra = {"radius": 10.0} if classes[0] is omtl.MTFORG else {"seed": 3}
    b = classes[0](n_tasks=k, budget=n, graph=graph, kernel=kernel, **extra)
    np.testing.assert_array_equal(p.learn(X, y, tasks=tasks), b.learn(X, y, tasks=tasks))
    np.testing.assert_allclose(b.decision_function(X, tasks=tasks), p.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-12)
    assert b.n_evictions_ == 0 and b.n_active_ == p.n_active_ == p.n_updates_


def test_rbp_disconnected_linear_equals_independent_linear_perceptrons():
    """INV-B2: same prediction errors at the same steps as k independent linear Perceptrons."""
    n, d, k = 600, 7, 4
    X, y, tasks = noisy_stream(n, d, k, seed=31, flip=0.15)
    model = omtl.MTRBP(n_tasks=k, budget=n, graph="disconnected", kernel="linear", seed=5)
    pred = model.learn(X, y, tasks=tasks)
    W = np.zeros((k, d))
    expected = np.zeros(n, dtype=np.int64)
    for t in range(n):
        i = tasks[t]
        f = W[i] @ X[t]
        expected[t] = 1 if f >= 0 else -1
        if y[t] * f <= 0:
            W[i] += y[t] * X[t]
    np.testing.assert_array_equal(pred != y, expected != y)
    np.testing.assert_array_equal(pred, expected)


@pytest.mark.parametrize("classes", BUDGET_CLASSES, ids=BUDGET_IDS)
def test_components_are_independent_when_the_budget_is_large(classes):
    """INV-B6: with block-diagonal T and B >= n, a component's predictions ignore the others."""
    k, n = 6, 400
    graph = omtl.TaskGraph.from_edges(k, [(0, 1), (1, 2), (3, 4)], [1.0, 2.0, 0.5])  # {0,1,2}, {3,4}, {5}
    X, y, tasks = noisy_stream(n, 5, k, seed=13)
    full = classes[0](n_tasks=k, budget=n, graph=graph, kernel="rbf", gamma=0.5)
    pred_full = full.learn(X, y, tasks=tasks)
    for component in ([0, 1, 2], [3, 4], [5]):
        keep = np.isin(tasks, component)
        alone = classes[0](n_tasks=k, budget=n, graph=graph, kernel="rbf", gamma=0.5)
        np.testing.assert_array_equal(alone.learn(X[keep], y[keep], tasks=tasks[keep]), pred_full[keep])


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_rbp_predictions_ignore_the_scale_of_t(kernel):
    """INV-P6 for MTRBP (fixed seed): T -> c T changes no prediction (and no eviction)."""
    k = 4
    graph = random_graph(k, seed=2, weighted=True)
    X, y, tasks = noisy_stream(400, 5, k, seed=23)
    base = omtl.MTRBP(n_tasks=k, budget=15, graph=graph, kernel=kernel, seed=8)
    expected = base.learn(X, y, tasks=tasks)
    assert base.n_evictions_ > 50
    for c in (0.01, 7.0):
        scaled = omtl.MTRBP(n_tasks=k, budget=15, graph=graph.scaled(c), kernel=kernel, seed=8)
        np.testing.assert_array_equal(scaled.learn(X, y, tasks=tasks), expected)
        np.testing.assert_allclose(scaled.decision_function(X, tasks=tasks), c * base.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-12)


def test_rbp_predictions_ignore_task_relabelling():
    """INV-P7 for MTRBP: permuting task ids together with the graph changes nothing."""
    k = 5
    edges = [(0, 1), (1, 2), (3, 4), (0, 4)]
    weights = [1.0, 0.5, 2.0, 0.3]
    perm = np.array([3, 0, 4, 1, 2])
    X, y, tasks = noisy_stream(400, 5, k, seed=29)
    a = omtl.MTRBP(n_tasks=k, budget=12, graph=omtl.TaskGraph.from_edges(k, edges, weights), seed=4)
    permuted = omtl.TaskGraph.from_edges(k, [(perm[i], perm[j]) for i, j in edges], weights)
    b = omtl.MTRBP(n_tasks=k, budget=12, graph=permuted, seed=4)
    np.testing.assert_array_equal(a.learn(X, y, tasks=tasks), b.learn(X, y, tasks=perm[tasks]))
    assert a.n_evictions_ == b.n_evictions_ > 50


# ---- INV-B4: k = 1 reductions -------------------------------------------------------------------


def rbf(a, B, gamma):
    return np.exp(-gamma * ((B - a) ** 2).sum(axis=1))


def test_k1_task_kernel_is_one_and_c_g_is_the_radius():
    m = omtl.MTFORG(n_tasks=1, budget=3, kernel="linear", radius=2.5)
    m.partial_fit(np.eye(2), [1, -1], tasks=0)
    assert m.task_graph_.task_kernel.tolist() == [[1.0]]
    assert m._diagnostics()["c_g"] == pytest.approx(2.5, rel=1e-15)


def test_k1_rbp_equals_the_randomized_budget_perceptron():
    """An independent Randomized Budget Perceptron (Cavallanti et al. 2007) written here."""
    n, d, B, gamma, seed = 500, 4, 9, 1.5, 99
    X, y, _ = noisy_stream(n, d, 1, seed=41)
    model = omtl.MTRBP(n_tasks=1, budget=B, kernel="rbf", gamma=gamma, seed=seed)
    got = model.learn(X, y, tasks=0)
    rng, xs, alphas, expected = SplitMix64(seed), [], [], []
    for t in range(n):
        f = float(np.dot(alphas, rbf(X[t], np.array(xs), gamma))) if xs else 0.0
        expected.append(1 if f >= 0 else -1)
        if y[t] * f <= 0:
            if len(xs) == B:
                r = rng.below(B)
                del xs[r], alphas[r]
            xs.append(X[t])
            alphas.append(y[t])
    np.testing.assert_array_equal(got, expected)
    assert model.n_evictions_ > 50


def straightforward_forgetron(X, y, budget, kernel, c):
    """The self-tuned Forgetron (Dekel, Shalev-Shwartz & Singer 2008) for one task, with the
    shrink found by the textbook quadratic-root case analysis. Returns predictions and chi's."""
    xs, alphas, Q, M, preds, chis = [], [], 0.0, 0, [], []
    for t in range(len(y)):
        f = sum(a * kernel(v, X[t]) for v, a in zip(xs, alphas))
        preds.append(1 if f >= 0 else -1)
        if y[t] * f > 0:
            continue
        M += 1
        xs.append(X[t])
        alphas.append(float(y[t]))
        if len(xs) <= budget:
            continue
        sigma = abs(alphas[0])
        y_r = np.sign(alphas[0])
        mu = y_r * sum(a * kernel(v, xs[0]) for v, a in zip(xs, alphas))  # margin of f' at x_r
        # Psi(sigma chi, chi mu) + Q <= 15/32 c^2 M, largest chi in (0, 1].
        A = c * c * sigma * sigma - 2 * sigma * mu
        Bq = 2 * c * sigma
        C = Q - 15 / 32 * c * c * M
        if A + Bq + C <= 0:
            chi = 1.0
        elif abs(A) < 1e-300:
            chi = -C / Bq
        else:
            roots = [(-Bq + s * np.sqrt(Bq * Bq - 4 * A * C)) / (2 * A) for s in (1, -1)]
            chi = max(r for r in roots if 0 < r <= 1)
        alphas = [chi * a for a in alphas]
        Q += A * chi * chi + Bq * chi
        del xs[0], alphas[0]
        chis.append(chi)
    return np.array(preds), chis


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_k1_forg_equals_the_self_tuned_forgetron(kernel):
    n, d, B = 700, 4, 5
    X, y, _ = noisy_stream(n, d, 1, seed=43)
    if kernel == "rbf":
        params, radius = {"kernel": "rbf", "gamma": 1.0}, 1.0

        def kfun(a, b):
            return float(np.exp(-((a - b) ** 2).sum()))
    else:
        params, radius = {"kernel": "linear", "radius": 2.0}, 2.0

        def kfun(a, b):
            return float(a @ b)

    model = omtl.MTFORG(n_tasks=1, budget=B, **params)
    preds, trace = step_by_step(model, X, y, np.zeros(n, dtype=np.int64), lambda m: (m.n_evictions_, m.last_shrink_))
    chis, seen = [], 0
    for n_ev, chi in trace:
        if n_ev > seen:
            chis.append(chi)
            seen = n_ev
    expected_preds, expected_chis = straightforward_forgetron(X, y, B, kfun, radius)
    np.testing.assert_array_equal(preds, expected_preds)
    assert len(chis) == len(expected_chis) > 100
    assert min(chis) < 0.9  # the test exercises real shrinks
    np.testing.assert_allclose(chis, expected_chis, rtol=1e-9)


# ---- INV-F1: the Forgetron's shrink and damage ------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"kernel": "rbf", "gamma": 2.0, "budget": 3},
        {"kernel": "linear", "radius": 2.7, "budget": 4},
        {"kernel": "poly", "degree": 2, "normalize": True, "budget": 2},
        {"kernel": "rbf", "gamma": 0.3, "budget": 1, "graph": "disconnected"},
    ],
    ids=["rbf", "linear", "poly-normalized", "rbf-D-B1"],
)
def test_forgetron_shrink_and_damage_invariants(params):
    """INV-F1 on thousands of random steps: chi* in (0, 1] is the largest root, Q <= 15/32 c^2 M."""
    k = 4
    graph = params.pop("graph", random_graph(k, seed=17, weighted=True))
    X, y, tasks = noisy_stream(2500, 5, k, seed=51, flip=0.3)
    model = omtl.MTFORG(n_tasks=k, graph=graph, **params)
    _, trace = step_by_step(model, X, y, tasks, lambda m: m._diagnostics())
    n_shrinks, prev = 0, 0
    grid = np.linspace(0.0, 1.0, 201)[1:]
    for diag in trace:
        c_g2 = diag["c_g"] ** 2
        assert diag["forgetron_q"] <= 15 / 32 * c_g2 * diag["forgetron_m"] * (1 + 1e-12)
        assert diag["forgetron_q"] >= 0
        if diag["n_evictions"] == prev:
            continue
        prev = diag["n_evictions"]
        n_shrinks += 1
        chi, a, b, c = diag["last_shrink"], diag["last_a"], diag["last_b"], diag["last_c"]
        assert 0 < chi <= 1
        assert c <= -15 / 32 * c_g2 * (1 - 1e-12)
        assert a * chi * chi + b * chi + c <= 1e-12 * max(1.0, abs(c))
        if chi < 1:
            above = chi + (1 - chi) * grid
            assert np.all(a * above**2 + b * above + c > 0)
    assert n_shrinks > 500
    assert model.n_active_ <= model.budget


def test_forgetron_scale_folding_keeps_the_reference_results():
    """Long noisy stream, budget 1: the global scale underflows 1e-150 and is folded."""
    X, y, tasks = noisy_stream(2000, 5, 3, seed=61, flip=0.3)
    params = {"n_tasks": 3, "budget": 1, "kernel": "rbf", "gamma": 2.0}
    native, reference = omtl.MTFORG(**params), ref.MTFORG(**params)
    assert compare_runs(native, reference, X, y, tasks).complete, "a tie parted the runs: pick another stream"
    assert native._diagnostics()["n_folds"] >= 1
    np.testing.assert_allclose(native.decision_function(X, tasks=tasks), reference.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-300)
    assert native.forgetron_q_ == pytest.approx(reference.forgetron_q_, rel=1e-9)
    assert native.forgetron_m_ == reference.forgetron_m_


def test_forgetron_needs_a_positive_c_g():
    with pytest.warns(UserWarning, match="pinv"):
        graph = omtl.TaskGraph.laplacian_pinv(3, [])  # T = 0
    model = omtl.MTFORG(n_tasks=3, budget=4, graph=graph)
    X, y, tasks = random_stream(n=5, d=3, k=3)
    for m in (model, ref.MTFORG(n_tasks=3, budget=4, graph=graph)):
        with pytest.raises(ValueError, match="c_G"):
            m.partial_fit(X, y, tasks=tasks)
        assert not hasattr(m, "n_features_in_") and m.n_active_ == 0


def test_radius_warning_is_emitted_once():
    X = np.array([[3.0, 0.0], [0.0, 0.1], [0.0, 4.0]])
    model = omtl.MTFORG(n_tasks=1, budget=2, kernel="linear", radius=1.0)
    with pytest.warns(RuntimeWarning, match="radius"):
        model.partial_fit(X, [1, -1, 1], tasks=0)
    assert model._diagnostics()["n_radius_exceeded"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.partial_fit(X, [1, -1, 1], tasks=0)  # counted, not warned again
        omtl.MTFORG(n_tasks=1, budget=2, kernel="linear", radius=5.0).partial_fit(X, [1, -1, 1], tasks=0)
        omtl.MTFORG(n_tasks=1, budget=2, kernel="rbf", radius=0.1).partial_fit(X, [1, -1, 1], tasks=0)
    assert model._diagnostics()["n_radius_exceeded"] == 4


# ---- the shared API: pickling, bad input, parameters --------------------------------------------


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("classes", BUDGET_CLASSES, ids=BUDGET_IDS)
@pytest.mark.parametrize("impl", [0, 1], ids=["native", "reference"])
def test_pickling_mid_stream_then_continuing_equals_uninterrupted(classes, impl, sparse):
    X, y, tasks = noisy_stream(400, 6, 3, seed=71, sparse=sparse)
    cls = classes[impl]
    params = {"n_tasks": 3, "budget": 8, "kernel": "rbf", "gamma": 0.6}
    if cls in (omtl.MTRBP, ref.MTRBP):
        params["seed"] = 12
    straight = cls(**params)
    p_straight = straight.learn(X, y, tasks=tasks)
    first = cls(**params)
    p1 = first.learn(X[:150], y[:150], tasks=tasks[:150])
    assert first.n_evictions_ > 0  # the RNG / damage state is live when pickled
    resumed = pickle.loads(pickle.dumps(first))
    # Before any update the restored model scores without its (unpickled) sparse index: same numbers.
    np.testing.assert_array_equal(resumed.decision_function(X, tasks=tasks), first.decision_function(X, tasks=tasks))
    p2 = resumed.learn(X[150:], y[150:], tasks=tasks[150:])
    np.testing.assert_array_equal(np.concatenate([p1, p2]), p_straight)
    np.testing.assert_array_equal(resumed.decision_function(X, tasks=tasks), straight.decision_function(X, tasks=tasks))
    assert resumed.n_evictions_ == straight.n_evictions_
    assert resumed._diagnostics() == straight._diagnostics()


@pytest.mark.parametrize("classes", BUDGET_CLASSES, ids=BUDGET_IDS)
@pytest.mark.parametrize("impl", [0, 1], ids=["native", "reference"])
def test_bad_input_leaves_the_model_unchanged(classes, impl):
    X, y, tasks = noisy_stream(300, 5, 3, seed=81)
    cls = classes[impl]
    params = {"n_tasks": 3, "budget": 6, "kernel": "rbf"}
    model, twin = cls(**params), cls(**params)
    model.partial_fit(X[:100], y[:100], tasks=tasks[:100])
    twin.partial_fit(X[:100], y[:100], tasks=tasks[:100])
    before = model._diagnostics()
    bad_x = X[100:120].copy()
    bad_x[-1, 2] = np.nan
    bad_y = y[100:120].copy()
    bad_y[-1] = 2
    bad_t = tasks[100:120].copy()
    bad_t[-1] = 3
    for args in [(bad_x, y[100:120], tasks[100:120]), (X[100:120], bad_y, tasks[100:120]), (X[100:120], y[100:120], bad_t), (X[100:120, :3], y[100:120], tasks[100:120])]:
        with pytest.raises(ValueError):
            model.learn(args[0], args[1], tasks=args[2])
    assert model._diagnostics() == before and model.n_seen_ == 100
    np.testing.assert_array_equal(model.learn(X[100:], y[100:], tasks=tasks[100:]), twin.learn(X[100:], y[100:], tasks=tasks[100:]))


def test_native_core_rejects_bad_batches_without_changing_state():
    """The Rust layer validates the whole batch before the first update, too."""
    X, y, tasks = noisy_stream(120, 4, 2, seed=3)
    model = omtl.MTRBP(n_tasks=2, budget=5, kernel="rbf", seed=1)
    model.partial_fit(X[:60], y[:60], tasks=tasks[:60])
    state = pickle.dumps(model)
    yy = y[60:].astype(np.float64)
    yy[-1] = 0.5
    with pytest.raises(ValueError, match="label"):
        model._core.learn(X[60:], tasks[60:], yy)
    assert pickle.dumps(model) == state


@pytest.mark.parametrize("bad", [{"budget": 0}, {"budget": 2.5}, {"budget": True}, {"budget": -3}, {"seed": -1}, {"seed": 2**64}, {"seed": 1.5}])
def test_rbp_rejects_bad_parameters_and_stays_unfitted(bad):
    params = {"n_tasks": 2, "budget": 3, **bad}
    for cls in (omtl.MTRBP, ref.MTRBP):
        model = cls(**params)
        assert model.get_params()[next(iter(bad))] is bad[next(iter(bad))]
        with pytest.raises(ValueError):
            model.partial_fit(np.eye(2), [1, -1], tasks=[0, 1])
        assert model.n_active_ == 0 and not hasattr(model, "n_features_in_")


@pytest.mark.parametrize("bad", [{"budget": 0}, {"radius": 0.0}, {"radius": -1.0}, {"radius": float("inf")}, {"radius": "1"}])
def test_forg_rejects_bad_parameters_and_stays_unfitted(bad):
    params = {"n_tasks": 2, "budget": 3, **bad}
    for cls in (omtl.MTFORG, ref.MTFORG):
        model = cls(**params)
        with pytest.raises(ValueError):
            model.partial_fit(np.eye(2), [1, -1], tasks=[0, 1])
        assert model.n_active_ == 0 and not hasattr(model, "n_features_in_")


def test_fitted_attributes_before_and_after_the_first_batch():
    rbp, forg = omtl.MTRBP(n_tasks=2, budget=2), omtl.MTFORG(n_tasks=2, budget=2)
    assert (rbp.n_evictions_, forg.n_evictions_) == (0, 0)
    assert (forg.forgetron_q_, forg.forgetron_m_, forg.last_shrink_) == (0.0, 0, 1.0)
    X, y, tasks = noisy_stream(200, 4, 2, seed=91)
    for m in (rbp, forg):
        m.partial_fit(X, y, tasks=tasks)
        assert m.n_active_ == 2 and m.n_evictions_ == m.n_updates_ - 2
    assert forg.forgetron_m_ == forg.n_updates_
    assert 0 < forg.forgetron_q_ <= 15 / 32 * forg.task_graph_.c_g**2 * forg.forgetron_m_
    assert 0 < forg.last_shrink_ <= 1
    assert isinstance(forg.forgetron_m_, int) and isinstance(rbp.n_evictions_, int)


@pytest.mark.parametrize("classes", BUDGET_CLASSES, ids=BUDGET_IDS)
def test_large_sparse_budgets_use_the_inverted_index_and_match_the_reference(classes):
    """From 256 stored sparse rows on, scores go through an inverted index kept in step with the
    evictions (and rebuilt after unpickling): same predictions as the reference, step by step."""
    n, k, budget = 1100, 3, 260
    X, y, tasks = noisy_stream(n, 30, k, seed=97, flip=0.45, sparse=True)
    extra = {"seed": 6} if classes[0] is omtl.MTRBP else {"radius": 15.0}
    params = {"n_tasks": k, "budget": budget, "kernel": "poly", "degree": 2, **extra}
    native, reference = classes[0](**params), classes[1](**params)
    assert compare_runs(native, reference, X, y, tasks, slices=chunks_of(n, 100)).complete, "a tie parted the runs"
    assert native.n_evictions_ > 150
    np.testing.assert_allclose(native.decision_function(X, tasks=tasks), reference.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-12)
    # Pickled with a built index: the copy scores alike before and after its next update.
    half = classes[0](**params)
    half.partial_fit(X[:700], y[:700], tasks=tasks[:700])
    copy = pickle.loads(pickle.dumps(half))
    np.testing.assert_array_equal(copy.decision_function(X, tasks=tasks), half.decision_function(X, tasks=tasks))
    np.testing.assert_array_equal(copy.learn(X[700:], y[700:], tasks=tasks[700:]), half.learn(X[700:], y[700:], tasks=tasks[700:]))
    np.testing.assert_array_equal(copy.decision_function(X, tasks=tasks), half.decision_function(X, tasks=tasks))


def test_sparse_and_dense_input_give_the_same_run():
    X, y, tasks = noisy_stream(300, 8, 3, seed=95, sparse=True)
    for cls, extra in [(omtl.MTRBP, {"seed": 4}), (omtl.MTFORG, {"radius": 10.0})]:
        a = cls(n_tasks=3, budget=10, kernel="poly", degree=2, **extra)
        b = cls(n_tasks=3, budget=10, kernel="poly", degree=2, **extra)
        np.testing.assert_array_equal(a.learn(X, y, tasks=tasks), b.learn(X.toarray(), y, tasks=tasks))
        assert sp.issparse(X)
        np.testing.assert_allclose(a.decision_function(X, tasks=tasks), b.decision_function(X.toarray(), tasks=tasks), rtol=1e-9, atol=1e-12)
