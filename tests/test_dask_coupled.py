"""Coupled sharding on a real Dask LocalCluster (2 worker processes): shards chosen by label, the
shared state kept in step; the same model as the shards run in process; the one model exactly
with a sync after every row (exact cells) or one shard; checkpoint, a lost worker, restore and
replay; the whole model saved to one file that omtl.load serves."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

pytest.importorskip("distributed", reason='Dask distributed is not installed (pip install "omtl[dask]")')

from distributed import Client, LocalCluster  # noqa: E402

import omtl  # noqa: E402
from omtl.dask import CoupledShardedLearner, ShardedLearner, ShardError, ShardLostError, SimulatedShards  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as c:
        assert set(c.run(lambda: omtl.__file__).values()) == {omtl.__file__}
        yield c


def stream(n=300, d=6, n_users=40, seed=0):
    rng = np.random.default_rng(seed)
    X = np.where(rng.random((n, d)) < 0.3, 0.0, rng.normal(size=(n, d)))
    users = np.array([f"u{u}" for u in rng.integers(0, n_users, size=n)], dtype=object)
    y = np.where(X[:, 0] - 0.4 * X[:, 2] + 0.2 * rng.normal(size=n) > 0, 1, -1)
    return X, y, users


def batches(n, size):
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def test_sync_after_every_row_is_the_one_model_and_saves_as_one(client, tmp_path):
    X, y, users = stream(n=80)
    one = omtl.MTLinear()
    want = one.learn(X, y, tasks=users)
    with ShardedLearner(omtl.MTLinear(), n_shards=3, sync_every=1, client=client) as sharded:
        assert isinstance(sharded, CoupledShardedLearner)
        got = np.concatenate([sharded.learn(X[b], y[b], tasks=users[b]) for b in batches(80, 40)])
        assert np.array_equal(got, want)
        assert sharded.n_seen_ == 80 and sharded.n_mistakes_ == one.n_mistakes_
        assert {st["worker"] for st in sharded.shard_stats()} == set(client.scheduler_info()["workers"])
        sharded.save(tmp_path / "whole.omtl")
    served = omtl.load(tmp_path / "whole.omtl")
    assert np.array_equal(served.decision_function(X, tasks=users), one.decision_function(X, tasks=users))
    assert served.n_seen_ == 80


def test_the_cluster_runs_the_in_process_shards_and_one_shard_is_the_one_model(client):
    X, y, users = stream(seed=1)
    proto = omtl.MTLinear(hash_bits=12)
    here = SimulatedShards(proto, n_shards=2, sync_every=15)
    with ShardedLearner(proto, n_shards=2, sync_every=15, client=client) as sharded:
        for b in batches(300, 70):
            assert np.array_equal(sharded.learn(X[b], y[b], tasks=users[b]), here.learn(X[b], y[b], tasks=users[b]))
        assert sharded.n_syncs_ == here.n_syncs_ > 0
        assert np.array_equal(sharded.decision_function(X, tasks=users), here.decision_function(X, tasks=users))
        with pytest.raises(ValueError, match="hash_bits=None"):
            sharded.to_model()
    one = omtl.MTLinear(hash_bits=12)
    with ShardedLearner(proto, n_shards=1, sync_every=15, client=client) as single:
        assert np.array_equal(single.learn(X, y, tasks=users), one.learn(X, y, tasks=users))


def test_lost_worker_restore_and_replay_give_the_uninterrupted_run(client, tmp_path):
    X, y, users = stream(n=360, seed=2)
    proto = omtl.PAGlobal()
    parts = batches(360, 60)
    # the uninterrupted run, in process, with the same checkpoint (a sync) after batch 2
    ref = SimulatedShards(proto, n_shards=2, sync_every=25)
    ref_pred = []
    for i, b in enumerate(parts):
        ref_pred.append(ref.learn(X[b], y[b], tasks=users[b]))
        if i == 1:
            ref.checkpoint(tmp_path / "ref")
    sharded = ShardedLearner(proto, n_shards=2, sync_every=25, client=client)
    try:
        for b in parts[:2]:
            sharded.learn(X[b], y[b], tasks=users[b])
        sharded.checkpoint(tmp_path / "ck")
        assert sorted(p.suffix for p in (tmp_path / "ck").iterdir()) == [".json", ".omtl", ".omtl"]
        sharded.learn(X[parts[2]], y[parts[2]], tasks=users[parts[2]])
        victim = sharded.shard_stats()[0]["worker"]
        try:
            client.run(os._exit, 1, workers=[victim])
        except Exception:  # the worker dies before it can answer
            pass
        deadline = time.time() + 30
        while victim in client.scheduler_info()["workers"] and time.time() < deadline:
            time.sleep(0.1)
        with pytest.raises(ShardLostError, match="restore"):
            sharded.learn(X[parts[3]], y[parts[3]], tasks=users[parts[3]])
        with pytest.raises(ShardError, match="restore"):
            sharded.decision_function(X, tasks=users)
        sharded.restore()
        assert sharded.n_seen_ == 120
        for i, b in enumerate(parts[2:], start=2):  # the replay: the uninterrupted run's predictions
            assert np.array_equal(sharded.learn(X[b], y[b], tasks=users[b]), ref_pred[i])
        assert np.array_equal(sharded.decision_function(X, tasks=users), ref.decision_function(X, tasks=users))
        merged = sharded.to_model()
        assert np.array_equal(merged.decision_function(X, tasks=users), ref.to_model().decision_function(X, tasks=users))
    finally:
        sharded.close()
        client.wait_for_workers(2, timeout=180)  # the nanny restarts the killed worker


def test_coupled_sharding_refuses_what_it_cannot_keep_in_step(client, tmp_path):
    with pytest.raises(ValueError, match="component"):
        ShardedLearner(omtl.MTPerceptron(), client=client)
    with pytest.raises(ValueError, match="sync_every"):
        ShardedLearner(omtl.MTPerceptron(n_tasks=4), omtl.TaskGraph.disconnected(4), client=client, sync_every=10)
    X, y, users = stream(n=40, seed=3)
    with ShardedLearner(omtl.CWCOL(), n_shards=2, sync_every=8, client=client) as sharded:
        with pytest.raises(ValueError, match="not learned"):
            sharded.decision_function(X, tasks=users)
        sharded.learn(X, y, tasks=users)
        sharded.checkpoint(tmp_path)
        with ShardedLearner(omtl.CWCOL(), n_shards=3, client=client) as other, pytest.raises(ValueError, match="3"):
            other.restore(tmp_path)
        bad = X.copy()
        bad[3, 1] = np.inf
        before = sharded.decision_function(X, tasks=users)
        with pytest.raises(ValueError):
            sharded.learn(bad, y, tasks=users)
        assert np.array_equal(sharded.decision_function(X, tasks=users), before)
