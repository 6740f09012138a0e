"""Concurrency (docs/reliability.md, "Thread-safety"): calls on one model from several threads
run one after the other, none is lost or refused, and copies are independent.

Each test starts its threads on a barrier so that the calls collide, and checks the outcome
against the serial runs: with two writers the model must equal one of the two serial orders.
"""

from __future__ import annotations

import copy
import pickle
import threading

import numpy as np
import pytest
from conftest import random_stream
from learner_table import LEARNERS

K = 4
NATIVE = [pytest.param((e[1], e[3]), id=f"{e[0]}-native") for e in LEARNERS]
REFERENCE = [pytest.param((e[2], e[3]), id=f"{e[0]}-reference") for e in LEARNERS]


def run_threads(*targets):
    """Runs the targets at once (released together by a barrier); re-raises the first error."""
    barrier = threading.Barrier(len(targets))
    errors = []

    def wrap(target):
        def run():
            try:
                barrier.wait()
                target()
            except BaseException as exc:  # noqa: BLE001 (re-raised below, in the test's thread)
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a thread did not finish: deadlock?"
    if errors:
        raise errors[0]


def serial(cls, params, batches):
    model = cls(n_tasks=K, **params)
    for X, y, tasks in batches:
        model.partial_fit(X, y, tasks=tasks)
    return model


def check_one_of_the_serial_orders(model, cls, params, a, b, probe):
    Xp, tp = probe
    got = model.decision_function(Xp, tasks=tp)
    orders = [serial(cls, params, [a, b]), serial(cls, params, [b, a])]
    assert any(np.array_equal(got, m.decision_function(Xp, tasks=tp)) for m in orders), (
        "the model is neither A-then-B nor B-then-A: the batches interleaved or one was lost"
    )
    assert model.n_seen_ == orders[0].n_seen_ == a[0].shape[0] + b[0].shape[0]
    assert model.n_mistakes_ in {m.n_mistakes_ for m in orders}
    assert np.array_equal(model.n_seen_per_task_, orders[0].n_seen_per_task_)


def batches(seed, n=150):
    X, y, tasks = random_stream(n=2 * n + 40, d=6, k=K, seed=seed)
    return (X[:n], y[:n], tasks[:n]), (X[n : 2 * n], y[n : 2 * n], tasks[n : 2 * n]), (X[2 * n :], tasks[2 * n :])


@pytest.mark.parametrize("cls_params", NATIVE + REFERENCE)
def test_concurrent_first_calls_on_an_unfitted_model_lose_no_batch(cls_params):
    # Before the lock, both threads built a core and one batch was silently dropped.
    cls, params = cls_params
    a, b, probe = batches(seed=5)
    model = cls(n_tasks=K, **params)
    run_threads(lambda: model.partial_fit(*a[:2], tasks=a[2]), lambda: model.partial_fit(*b[:2], tasks=b[2]))
    check_one_of_the_serial_orders(model, cls, params, a, b, probe)


@pytest.mark.parametrize("cls_params", NATIVE)
def test_writers_and_readers_on_a_fitted_model_are_serialised(cls_params):
    # Before the lock: "RuntimeError: Already borrowed", and a concurrent pickle or
    # decision_function made partial_fit raise.
    cls, params = cls_params
    warm, (a, b, probe) = batches(seed=8, n=60)[0], batches(seed=9)
    model = serial(cls, params, [warm])
    done = threading.Event()
    seen = []

    def reader():
        Xp, tp = probe
        while not done.is_set():
            scores = model.decision_function(Xp, tasks=tp)
            assert scores.shape == (Xp.shape[0],)
            restored = pickle.loads(pickle.dumps(model))
            # A snapshot is taken under the lock: its counters and its core agree.
            assert restored.n_seen_ in (60, 210, 360)
            assert np.array_equal(restored.decision_function(Xp, tasks=tp), restored.decision_function(Xp, tasks=tp))
            seen.append((model.n_updates_, model.n_active_, model.n_seen_))

    def writers():
        try:
            run_threads(lambda: model.partial_fit(*a[:2], tasks=a[2]), lambda: model.partial_fit(*b[:2], tasks=b[2]))
        finally:
            done.set()

    run_threads(writers, reader)
    assert seen, "the reader never ran"
    check_warm = [serial(cls, params, [warm, a, b]), serial(cls, params, [warm, b, a])]
    Xp, tp = probe
    got = model.decision_function(Xp, tasks=tp)
    assert any(np.array_equal(got, m.decision_function(Xp, tasks=tp)) for m in check_warm)
    assert model.n_seen_ == 360


@pytest.mark.parametrize("cls_params", NATIVE)
def test_the_native_learner_serialises_calls_by_itself(cls_params):
    # The Rust lock alone (without the Python model's lock) keeps concurrent calls apart.
    cls, params = cls_params
    a, b, probe = batches(seed=11)
    model = serial(cls, params, [a])
    native = model._core._learner
    n_active = []

    def learn(batch):
        X, y, tasks = batch
        for _ in range(3):
            native.learn(np.ascontiguousarray(X), tasks.astype(np.int64), y.astype(np.float64))
            n_active.append(native.n_active)

    run_threads(lambda: learn(a), lambda: learn(b), lambda: native.to_bytes())
    assert len(n_active) == 6


@pytest.mark.parametrize("cls_params", NATIVE + REFERENCE[:3])
@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_copies_are_independent_models(cls_params, how):
    cls, params = cls_params
    a, b, (Xp, tp) = batches(seed=13)
    model = serial(cls, params, [a])
    duplicate = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": lambda m: pickle.loads(pickle.dumps(m))}[how](model)
    before = model.decision_function(Xp, tasks=tp)
    assert np.array_equal(duplicate.decision_function(Xp, tasks=tp), before)
    duplicate.partial_fit(*b[:2], tasks=b[2])
    assert np.array_equal(model.decision_function(Xp, tasks=tp), before), "learning on the copy changed the original"
    assert model.n_seen_ == 150 and duplicate.n_seen_ == 300
    assert model.n_seen_per_task_.sum() == 150
    model.partial_fit(*b[:2], tasks=b[2])
    assert np.array_equal(model.decision_function(Xp, tasks=tp), duplicate.decision_function(Xp, tasks=tp))
    # Each has its own lock.
    assert duplicate._model_lock() is not model._model_lock()


def test_a_model_can_be_copied_and_pickled_while_another_thread_learns():
    import omtl

    a, b, (Xp, tp) = batches(seed=17, n=400)
    model = omtl.MTFL(n_tasks=K, retrain_every=5)
    model.partial_fit(*a[:2], tasks=a[2])
    copies = []

    def copier():
        for _ in range(20):
            copies.append(copy.copy(model))

    run_threads(lambda: model.partial_fit(*b[:2], tasks=b[2]), copier)
    for c in copies:
        assert c.n_seen_ in (400, 800)
        # The copy's counters and its core come from the same moment.
        assert c.n_active_ == c.n_seen_
