"""Finiteness and resources: no learner absorbs a non-finite value, no allocation sized
by a hyper-parameter aborts the interpreter, every failing call leaves the model unchanged, and
the numerical fixes (CW-COL's variance floor, OMTL's step on tiny rows, the projectron threshold at
many tasks) hold. docs/reliability.md ("Finiteness and resources") lists the guarantees these tests stand for."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import omtl
import omtl.reference as ref
from omtl.reference.projectron import insertion_floor


def stream(n=200, d=20, k=10, seed=0, noise=0.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] >= 0, 1, -1)
    flip = rng.random(n) < noise
    y[flip] = -y[flip]
    return X, y, rng.integers(0, k, n)


def assert_refused_unchanged(model, X, y, tasks, match):
    """The call raises ValueError naming the cause and the model is bit-for-bit as before."""
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match=match):
        model.partial_fit(X, y, tasks=tasks)
    assert pickle.dumps(model) == before


# ---------------------------------------------------------------------------------------------
# Allocations sized by a hyper-parameter


@pytest.mark.parametrize(
    "make",
    [
        lambda: omtl.PAUnique(n_tasks=10**10),
        lambda: omtl.OMTL(n_tasks=10**10),
        lambda: omtl.CWCOL(n_tasks=10**11),
        lambda: omtl.ROMCO(n_tasks=10**6),  # its k x k Gram: 8 TB
        lambda: omtl.OMTRL(n_tasks=10**6),
        lambda: omtl.MTFL(n_tasks=10**10),
        lambda: omtl.TRML(n_tasks=10**6),  # its trace-norm prox works on k x k matrices
        lambda: omtl.KernelPerceptron(n_tasks=10**11),
        lambda: omtl.MTBPRJ2(n_tasks=10**11, budget=5),
    ],
    ids=["PAUnique", "OMTL", "CWCOL", "ROMCO", "OMTRL", "MTFL", "TRML", "battery", "MTBPRJ2"],
)
def test_huge_sizes_are_value_errors_naming_the_parameter_and_the_memory(make):
    X, y, tasks = stream(n=20)
    model = make()
    with pytest.raises(ValueError, match=r"n_tasks=\d+ needs [\d.]+ [kMGTP]?B for "):
        model.partial_fit(X, y, tasks=tasks)
    assert not model._is_fitted()


def test_a_projectron_gram_beyond_memory_is_refused_when_needed():
    """H and Q grow with the active set; the growth that would pass the machine's memory fails
    with the budget named, before the model changes (tiny rows: the store itself stays small)."""
    X, y, tasks = stream(n=40, d=2, k=2, seed=3)
    model = omtl.MTBPRJ(n_tasks=2, budget=10**12, eta=0.0)
    model.partial_fit(X, y, tasks=tasks)  # a small active set: fine
    assert 0 < model.n_active_ < 40


# ---------------------------------------------------------------------------------------------
# Overflowing hyper-parameters and rows


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: omtl.MTPerceptron(n_tasks=10, kernel="poly", degree=1000), "degree"),
        (lambda: omtl.MTPerceptron(n_tasks=10, kernel="poly", degree=float("inf")), "degree"),
        (lambda: omtl.MTRBP(n_tasks=10, budget=20, kernel="poly", gamma=1e300), "K\\(x, x\\)"),
        (lambda: omtl.KernelPerceptron(n_tasks=10, kernel="poly", coef0=1e300), "K\\(x, x\\)"),
        (lambda: omtl.MTBPRJ(n_tasks=10, budget=20, kernel="poly", coef0=float("inf")), "coef0"),
        (lambda: omtl.MTFORG(n_tasks=10, budget=5, kernel="linear", radius=1e155), "radius"),
        (lambda: omtl.ROMCO(n_tasks=10, eta1=1e308), "ROMCO gradient step"),
        (lambda: omtl.ROMCO(n_tasks=10, eta2=1e308, eta1=0.0), "ROMCO gradient step"),
    ],
    ids=["degree1000", "degree-inf", "gamma1e300", "coef0-1e300", "coef0-inf", "radius", "eta1", "eta2"],
)
def test_overflowing_hyperparameters_raise_and_leave_the_model_unfitted(make, match):
    X, y, tasks = stream()
    model = make()
    with np.errstate(all="ignore"), pytest.raises(ValueError, match=match):
        model.partial_fit(X, y, tasks=tasks)
    assert not model._is_fitted()


@pytest.mark.parametrize(
    "make",
    [
        lambda: omtl.PAUnique(n_tasks=3),
        lambda: omtl.OMTL(n_tasks=3),
        lambda: omtl.CWCOL(n_tasks=3),
        lambda: omtl.ROMCO(n_tasks=3),
        lambda: omtl.OMTRL(n_tasks=3),
        lambda: omtl.MTPerceptron(n_tasks=3),
        lambda: omtl.MTBPRJ(n_tasks=3, budget=5),
        lambda: omtl.MTFORG(n_tasks=3, budget=5),
    ],
    ids=["PAUnique", "OMTL", "CWCOL", "ROMCO", "OMTRL", "MTPerceptron", "MTBPRJ", "MTFORG"],
)
def test_a_row_whose_squared_norm_overflows_is_refused_mid_stream(make):
    X, y, tasks = stream(n=30, d=4, k=3)
    model = make()
    model.partial_fit(X, y, tasks=tasks)
    bad = X.copy()
    bad[7] = 1e200  # finite entries, ‖x‖² = inf
    assert_refused_unchanged(model, bad, y, tasks, "row 7 overflows")


@pytest.mark.parametrize("cls", [omtl.PAUnique, ref.PAUnique], ids=["native", "reference"])
def test_pa_step_that_overflows_is_refused(cls):
    """PA (no C cap) on a row whose squared norm is subnormal: tau = loss/‖x‖² overflows."""
    model = cls(n_tasks=1, variant="pa")
    model.partial_fit(np.array([[1.0, 0.0]]), [1], tasks=0)
    assert_refused_unchanged(model, np.array([[1e-160, 0.0]]), [-1], 0, "PA step tau is not finite")


# ---------------------------------------------------------------------------------------------
# OMTL on tiny-norm rows (finding 8)


@pytest.mark.parametrize("norm", ["linf", "l1", "l2"])
def test_omtl_step_is_finite_on_tiny_rows_and_is_pa1(norm):
    """INV-O2 where ‖x‖² underflows to a subnormal: the singleton step is exactly C (PA-I)."""
    X = np.full((6, 4), 1e-160)
    y = np.array([1, -1, 1, 1, -1, -1])
    tasks = np.array([0, 1, 0, 2, 2, 1])
    for cls in (omtl.OMTL, ref.OMTL):
        m = cls(n_tasks=3, C=0.5, global_norm=norm)
        m.partial_fit(X, y, tasks=tasks)
        assert np.isfinite(m.coef_).all()
        pa = omtl.PAUnique(n_tasks=3, C=0.5)
        pa.partial_fit(X, y, tasks=tasks)
        np.testing.assert_array_equal(
            m.decision_function(X * 1e150, tasks=tasks), pa.decision_function(X * 1e150, tasks=tasks)
        )


def test_omtl_linf_round_with_one_tiny_row_stays_finite():
    """A round mixing a tiny-norm row with ordinary ones: the capped water-filling."""
    X = np.array([[1e-160, 0.0], [1.0, 1.0], [0.5, -2.0]])
    for cls in (omtl.OMTL, ref.OMTL):
        m = cls(n_tasks=3, C=1.0)
        m.learn_rounds(X, [1, -1, 1], tasks=[0, 1, 2], rounds=[0, 0, 0])
        assert np.isfinite(m.coef_).all()
        # The tiny row takes (nearly) the whole budget C: its loss is the largest per unit norm.
        assert m.coef_[0, 0] == pytest.approx(1e-160, rel=1e-9)


# ---------------------------------------------------------------------------------------------
# MTBPRJ at many tasks (finding 7)


def test_projection_threshold_is_capped_relative_to_the_candidate_norm():
    # Ordinary settings: the plain eta test (every Table 1 setting: rbf, kappa = T_ii >= 2/140).
    assert insertion_floor(0.01, "norm", 2 / 140) == 0.01**2
    assert insertion_floor(0.01, "squared", 1.0) == 0.01
    # Many tasks: kappa = T_ii < eta² would block every insertion; the cap is (1/2)² kappa.
    kappa = 2 / 20_001
    assert insertion_floor(0.01, "norm", kappa) == pytest.approx(0.25 * kappa)
    assert insertion_floor(0.01, "squared", kappa) == pytest.approx(0.25 * kappa)


@pytest.mark.parametrize("cls", [omtl.MTBPRJ, omtl.MTBPRJ2], ids=["MTBPRJ", "MTBPRJ2"])
def test_projectrons_learn_with_twenty_thousand_tasks(cls):
    k = 20_000
    s = omtl.datasets.make_multitask_stream(n_samples=1500, n_tasks=k, seed=0)
    model = cls(n_tasks=k, budget=100)
    pred = model.learn(s.X, s.y, tasks=s.tasks)
    assert model.n_active_ == 100
    assert np.mean(pred != s.y) < 0.3


# ---------------------------------------------------------------------------------------------
# CW-COL's variances (finding 6)


def test_cwcol_variances_stay_positive_on_a_noisy_stream():
    """Without the floor the variances reach 0 and then -inf after ~30k noisy rows (d = 20)."""
    X, y, tasks = stream(n=60_000, d=20, k=10, seed=4, noise=0.2)
    model = omtl.CWCOL(n_tasks=10)
    model.partial_fit(X, y, tasks=tasks)
    a = model.a
    for v in (model.task_variance_, model.global_variance_):
        assert np.isfinite(v).all() and v.min() >= 1e-12 * a
    assert np.isfinite(model.decision_function(X[:100], tasks=tasks[:100])).all()


# ---------------------------------------------------------------------------------------------
# Long runs (10⁶ rows): finiteness and budgets. Throughput and memory are not measured here.


def long_stream_chunks(n, d, k, seed, chunk=200_000, noise=0.1):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, d))
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        X = rng.standard_normal((m, d))
        tasks = rng.integers(0, k, m)
        y = np.where(np.einsum("ij,ij->i", X, w[tasks]) >= 0, 1, -1)
        flip = rng.random(m) < noise
        y[flip] = -y[flip]
        yield X, y, tasks


@pytest.mark.slow
@pytest.mark.parametrize(
    "make, budget",
    [
        (lambda: omtl.CWCOL(n_tasks=10), None),
        (lambda: omtl.ROMCO(n_tasks=10), None),
        (lambda: omtl.MTRBP(n_tasks=10, budget=30, seed=1), 30),
        (lambda: omtl.MTFORG(n_tasks=10, budget=30), 30),
        (lambda: omtl.MTBPRJ(n_tasks=10, budget=30), 30),
        (lambda: omtl.MTBPRJ2(n_tasks=10, budget=30), 30),
    ],
    ids=["CWCOL", "ROMCO", "MTRBP", "MTFORG", "MTBPRJ", "MTBPRJ2"],
)
def test_a_million_rows_stay_finite_and_within_budget(make, budget):
    model = make()
    n_seen = 0
    probe = None
    for X, y, tasks in long_stream_chunks(10**6, d=20, k=10, seed=5):
        model.partial_fit(X, y, tasks=tasks)
        n_seen += len(y)
        probe = (X[:500], tasks[:500])
        if budget is not None:
            assert model.n_active_ <= budget
    assert model.n_seen_ == n_seen == 10**6
    assert np.isfinite(model.decision_function(probe[0], tasks=probe[1])).all()
    if isinstance(model, omtl.CWCOL):
        assert model.task_variance_.min() > 0 and np.isfinite(model.task_variance_).all()
        assert model.global_variance_.min() > 0 and np.isfinite(model.global_variance_).all()
    if isinstance(model, omtl.ROMCO):
        assert np.isfinite(model.U_).all() and np.isfinite(model.V_).all()


@pytest.mark.parametrize("make, large", [(lambda: omtl.KernelPerceptron(n_tasks=2, kernel="linear"), 1e90),
                                         (lambda: omtl.MTRBP(n_tasks=2, kernel="linear"), 1e90),
                                         (lambda: omtl.MTLinear(n_tasks=2), 1e10)],  # single-precision cells
                         ids=["KernelPerceptron", "MTRBP", "MTLinear"])
def test_a_row_beyond_the_learnable_norm_is_refused_so_a_learned_model_always_saves(make, large):
    """A model holds values up to 1e150; a row of norm 1e152 would be stored (or summed into
    weights) and leave a model that pickles but cannot be unpickled. Rows up to 1e100 learn
    (where the learner's own precision allows)."""
    import pickle

    model = make()
    model.partial_fit(np.array([[1.0, 0.0], [0.0, 1.0]]), [1, -1], tasks=[0, 1])
    with pytest.raises(ValueError, match="rescale"):
        model.partial_fit(np.array([[1e152, 0.0]]), [-1], tasks=[0])
    assert model.n_seen_ == 2
    model.partial_fit(np.array([[large, 0.0], [0.0, -large]]), [-1, 1], tasks=[0, 1])
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.decision_function(np.eye(2), tasks=[0, 1]),
                                  model.decision_function(np.eye(2), tasks=[0, 1]))
