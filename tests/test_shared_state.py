"""omtl.shared_state and coupled shards run in process (omtl.dask.SimulatedShards): replicas
synced after every row are the one model bit for bit (exact cells), one replica is the one model,
the shard of a label is stable, merged replicas load and serve, and what cannot be is refused."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import omtl
from omtl import shared_state as ss
from omtl.dask.coupled import SimulatedShards, rounds

N, D = 240, 5


def stream(n=N, d=D, n_users=15, seed=0):
    rng = np.random.default_rng(seed)
    X = np.where(rng.random((n, d)) < 0.2, 0.0, rng.normal(size=(n, d)))
    users = np.array([f"user-{u}" for u in rng.integers(0, n_users, size=n)], dtype=object)
    bias = np.array([hash(u) % 3 - 1 for u in users]) * 0.5
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + bias + 0.3 * rng.normal(size=n) > 0, 1, 0)
    return X, y, users


COUPLED = [omtl.MTLinear(), omtl.MTLinear(update="adagrad", loss="hinge"), omtl.PAGlobal(), omtl.CWCOL()]


@pytest.mark.parametrize("proto", COUPLED, ids=lambda m: repr(m)[:40])
def test_a_sync_after_every_row_is_the_one_model(proto):
    X, y, users = stream()
    one = type(proto)(**proto.get_params())
    want = one.learn(X, y, tasks=users)
    sharded = SimulatedShards(proto, n_shards=3, sync_every=1)
    got = np.concatenate([sharded.learn(X[i:i + 50], y[i:i + 50], tasks=users[i:i + 50]) for i in range(0, N, 50)])
    assert np.array_equal(got, want)
    assert np.array_equal(sharded.decision_function(X, tasks=users), one.decision_function(X, tasks=users))
    merged = sharded.to_model()
    assert type(merged) is type(one) and merged.n_seen_ == N and merged.n_mistakes_ == one.n_mistakes_
    assert np.array_equal(merged.decision_function(X, tasks=users), one.decision_function(X, tasks=users))
    assert np.array_equal(merged.predict(X, tasks=users), one.predict(X, tasks=users))  # labels 0/1 kept
    assert sorted(merged.tasks_) == sorted(one.tasks_)
    by_label = dict(zip(merged.tasks_, merged.n_seen_per_task_))
    assert by_label == dict(zip(one.tasks_, one.n_seen_per_task_))


def test_one_shard_is_the_one_model_hashed_and_syncs_change_nothing():
    X, y, users = stream(seed=1)
    proto = omtl.MTLinear(hash_bits=10)
    one = omtl.MTLinear(hash_bits=10)
    sharded = SimulatedShards(proto, n_shards=1, sync_every=7)
    assert np.array_equal(sharded.learn(X, y, tasks=users), one.learn(X, y, tasks=users))
    assert sharded.n_syncs_ == N // 7
    assert np.array_equal(sharded.decision_function(X, tasks=users), one.decision_function(X, tasks=users))


def test_longer_intervals_stay_close_and_averaging_is_another_rule():
    X, y, users = stream(n=600, seed=2)
    one_err = np.mean(omtl.MTLinear(hash_bits=14).learn(X, y, tasks=users) != y)
    errs = {}
    for mix in ("sum", "mean"):
        sharded = SimulatedShards(omtl.MTLinear(hash_bits=14), n_shards=4, sync_every=10, mix=mix)
        errs[mix] = np.mean(sharded.learn(X, y, tasks=users) != y)
    assert abs(errs["sum"] - one_err) < 0.05 and errs["sum"] != errs["mean"]


def test_rounds_end_when_a_shard_reaches_sync_every():
    shard = np.array([0, 1, 0, 0, 1, 1, 1, 0])
    sched, since = rounds(shard, np.array([1, 0]), 2)
    # shard 0 has 1 row already: its next row (row 0) ends the first round; then shard 0's
    # rows 2 and 3, shard 1's rows 4 and 5; rows 6 and 7 are one row each
    assert sched == [(0, 1, True), (1, 4, True), (4, 6, True), (6, 8, False)]
    assert since.tolist() == [1, 1]
    sched, since = rounds(shard, np.zeros(2, dtype=np.int64), 100)
    assert sched == [(0, 8, False)] and since.tolist() == [4, 4]


def test_shard_of_a_label_is_stable_across_processes():
    labels = ["alice", "bob", "ünïcode", "", "user-123"]
    here = ss.shards_of(np.array(labels, dtype=object), 7).tolist()
    code = f"from omtl import shared_state as ss; print(ss.shards_of({labels!r}, 7).tolist())"
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120)
        assert out.stdout.strip() == str(here)
    murmur = pytest.importorskip("sklearn.utils").murmurhash3_32
    assert here == [(murmur(s.encode(), seed=0, positive=True) * 7) >> 32 for s in labels]
    # integer labels: their decimal digits
    assert ss.shards_of(np.array([42, -7]), 5).tolist() == ss.shards_of(["42", "-7"], 5).tolist()
    with pytest.raises(TypeError):
        ss.shards_of([1.5], 3)


def test_what_cannot_be_is_refused_and_leaves_the_model_unchanged():
    X, y, users = stream(seed=3)
    with pytest.raises(ValueError, match="hash_bits=None"):
        sharded = SimulatedShards(omtl.MTLinear(hash_bits=8), n_shards=2, sync_every=5)
        sharded.learn(X, y, tasks=users)
        sharded.to_model()
    for proto in (omtl.MTPerceptron(), omtl.MTLinear(graph="disconnected")):
        with pytest.raises(ValueError):
            SimulatedShards(proto, n_shards=2)
    with pytest.raises(ValueError, match="sync_every"):
        SimulatedShards(omtl.MTLinear(), n_shards=2, sync_every=0)
    a, b = (ss.empty_replica(omtl.MTLinear(), D) for _ in range(2))
    a.learn(X, y, tasks=users)
    before = a.decision_function(X, tasks=users)
    other = ss.empty_replica(omtl.MTLinear(update="sgd"), D)
    other.learn(X[:5], y[:5], tasks=users[:5])
    with pytest.raises(ValueError, match="another model"):
        ss.apply(a, ss.combine([ss.changes(other)]))
    with pytest.raises(ValueError):
        ss.apply(a, b"\x01\x00\x00\x00garbage")
    assert np.array_equal(a.decision_function(X, tasks=users), before)
    with pytest.raises(ValueError, match="in step"):
        ss.merge([a, b])
    with pytest.raises(ValueError, match="mix"):
        ss.combine([ss.changes(a)], mix="median")
    loaded = omtl.persistence.loads(omtl.persistence.dumps(a))
    with pytest.raises(ValueError, match="track"):  # a model read back does not record
        ss.changes(loaded)
