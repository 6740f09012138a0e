"""omtl.save under concurrency and crashes (docs/reliability.md, "Model files"): one consistent
moment per file, private unpredictable temporary files, fsync, permissions kept, stale
temporaries cleaned, and no file written that load would refuse."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from conftest import random_stream

import omtl
from omtl import _atomic_file, persistence
from omtl.persistence import MAGIC

K = 4

CONCURRENT = [
    pytest.param(omtl.MTRBP, {"budget": 20, "kernel": "rbf", "gamma": 0.5}, id="mtrbp"),
    pytest.param(omtl.MTLinear, {}, id="mtlinear"),
    pytest.param(omtl.MTPerceptron, {"kernel": "linear"}, id="mtperceptron"),
]


@pytest.mark.parametrize(("cls", "params"), CONCURRENT)
def test_save_reads_the_whole_model_at_one_moment_while_another_thread_learns(cls, params, tmp_path):
    X, y, tasks = random_stream(n=600, d=6, k=K, seed=3)
    probe = X[:12], tasks[:12]
    # The model after each number of rows, learned one row per call as the learning thread does.
    ref = cls(n_tasks=K, **params)
    scores_after = {0: None}
    for i in range(X.shape[0]):
        ref.partial_fit(X[i : i + 1], y[i : i + 1], tasks=tasks[i : i + 1])
        scores_after[i + 1] = ref.decision_function(*probe[:1], tasks=probe[1])
    model = cls(n_tasks=K, **params).partial_fit(X[:1], y[:1], tasks=tasks[:1])
    done = threading.Event()

    def learn():
        try:
            for i in range(1, X.shape[0]):
                model.partial_fit(X[i : i + 1], y[i : i + 1], tasks=tasks[i : i + 1])
                time.sleep(0.0002)  # lets the saver take the model's lock between rows
        finally:
            done.set()

    learner = threading.Thread(target=learn)
    learner.start()
    paths = []
    while not done.is_set() or not paths:
        paths.append(tmp_path / f"m{len(paths)}.omtl")
        omtl.save(model, paths[-1])
    learner.join()
    seen = set()
    for path in paths:
        loaded = omtl.load(path)  # every file loads ...
        n = loaded.n_seen_
        seen.add(n)
        # ... and holds exactly the model after its own n_seen_ rows (weights and counts agree).
        np.testing.assert_array_equal(loaded.decision_function(probe[0], tasks=probe[1]), scores_after[n])
        assert loaded.n_seen_per_task_.sum() == n
    assert len(seen) >= 2, "no save overlapped the learning: make the stream longer"


def test_threads_saving_to_one_path_never_collide_and_readers_see_whole_files(tmp_path):
    X, y, tasks = random_stream(n=200, d=6, k=K, seed=1)
    model = omtl.MTPerceptron(n_tasks=K, kernel="rbf").partial_fit(X, y, tasks=tasks)
    path = tmp_path / "shared.omtl"
    omtl.save(model, path)
    errors, loads = [], [0]
    stop = threading.Event()

    def save_many():
        try:
            for _ in range(25):
                omtl.save(model, path)
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            errors.append(exc)

    def read_many():
        while not stop.is_set():
            try:
                omtl.load(path)
                loads[0] += 1
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

    savers = [threading.Thread(target=save_many) for _ in range(4)]
    reader = threading.Thread(target=read_many)
    reader.start()
    for t in savers:
        t.start()
    for t in savers:
        t.join()
    stop.set()
    reader.join()
    assert errors == []
    assert loads[0] > 0
    assert sorted(os.listdir(tmp_path)) == ["shared.omtl"]  # no temporary left behind


def test_a_planted_symlink_is_never_written_through(tmp_path):
    X, y, tasks = random_stream(n=50, d=4, k=K)
    model = omtl.MTPerceptron(n_tasks=K).partial_fit(X, y, tasks=tasks)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    path = tmp_path / "model.omtl"
    # Every name a predictable scheme would use (the path plus a suffix naming this process).
    for name in (f"model.omtl.tmp-{os.getpid()}", "model.omtl.tmp", f".model.omtl.tmp-{os.getpid()}"):
        (tmp_path / name).symlink_to(victim)
    omtl.save(model, path)
    assert victim.read_text() == "precious"
    assert not path.is_symlink() and omtl.load(path).n_seen_ == 50


def test_save_flushes_the_file_and_the_directory_to_disk(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    omtl.save(omtl.MTPerceptron(n_tasks=2), tmp_path / "m.omtl")
    assert False in synced, "the file's data was not flushed"
    assert True in synced, "the directory entry (the rename) was not flushed"


def test_an_existing_files_permissions_are_kept_and_a_new_file_follows_the_umask(tmp_path):
    model = omtl.MTPerceptron(n_tasks=2)
    private = tmp_path / "private.omtl"
    private.write_bytes(b"old")
    private.chmod(0o600)
    omtl.save(model, private)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert omtl.load(private).n_tasks == 2
    fresh = tmp_path / "fresh.omtl"
    mask = os.umask(0o027)
    try:
        omtl.save(model, fresh)
    finally:
        os.umask(mask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640


def test_temporaries_of_a_dead_writer_are_removed_and_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tag = _atomic_file.HOST_TAG
        stale = tmp_path / f".m.omtl.{tag}-{dead.pid}-abcd1234.omtl-tmp"
        live = tmp_path / f".m.omtl.{tag}-{alive.pid}-abcd1234.omtl-tmp"
        other_host = tmp_path / f".m.omtl.00000000-{dead.pid}-abcd1234.omtl-tmp"
        for p in (stale, live, other_host):
            p.write_bytes(b"partial")
        omtl.save(omtl.MTPerceptron(n_tasks=2), tmp_path / "m.omtl")
        assert not stale.exists()
        assert live.exists() and other_host.exists()
    finally:
        alive.kill()
        alive.wait()


KILLED_SAVER = textwrap.dedent(
    """
    import sys, threading, numpy as np, omtl
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 20)); y = np.where(X[:, 0] > 0, 1, -1); t = np.arange(400) % 4
    model = omtl.MTPerceptron(n_tasks=4, kernel="rbf").partial_fit(X, y, tasks=t)
    def loop():
        while True:
            omtl.save(model, sys.argv[1])
    threads = [threading.Thread(target=loop, daemon=True) for _ in range(2)]
    for th in threads: th.start()
    print("saving", flush=True)
    threads[0].join()
    """
)


def test_a_saver_killed_mid_write_leaves_a_loadable_file(tmp_path):
    path = tmp_path / "m.omtl"
    omtl.save(omtl.MTPerceptron(n_tasks=4), path)
    for delay in (0.05, 0.2, 0.35):
        proc = subprocess.Popen([sys.executable, "-c", KILLED_SAVER, str(path)], stdout=subprocess.PIPE)
        assert proc.stdout.readline().strip() == b"saving"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert omtl.load(path).n_tasks == 4
    # The next save cleans what the killed writers left.
    omtl.save(omtl.MTPerceptron(n_tasks=4), path)
    assert sorted(os.listdir(tmp_path)) == ["m.omtl"]


def test_save_refuses_a_file_whose_header_load_would_refuse(monkeypatch, tmp_path):
    X, y, _ = random_stream(n=40, d=4, k=K)
    users = [f"user-{i:060d}" for i in range(40)]
    model = omtl.MTPerceptron(n_tasks=None).partial_fit(X, y, tasks=users)
    data = persistence.dumps(model)
    monkeypatch.setattr(persistence, "_MAX_HEADER", len(data) // 2)  # as 1.1M such users against 64 MiB
    with pytest.raises(ValueError, match="header .* over the"):
        omtl.save(model, tmp_path / "big.omtl")
    assert not (tmp_path / "big.omtl").exists()


def test_a_per_task_count_beyond_int64_is_a_value_error(tmp_path):
    X, y, tasks = random_stream(n=40, d=4, k=K)
    data = persistence.dumps(omtl.MTPerceptron(n_tasks=K).partial_fit(X, y, tasks=tasks))
    fixed = len(MAGIC) + 4 + 8
    (head_len,) = struct.unpack_from("<Q", data, len(MAGIC) + 4)
    header, state = json.loads(data[fixed : fixed + head_len]), data[fixed + head_len + 8 : -32]
    for big in (2**63, 2**64 + 5):
        header["fitted"]["seen_per_task"][0] = big
        head = json.dumps(header).encode()
        body = data[: len(MAGIC) + 4] + struct.pack("<Q", len(head)) + head + struct.pack("<Q", len(state)) + state
        with pytest.raises(ValueError, match="2\\*\\*63"):
            persistence.loads(body + hashlib.sha256(body).digest())


@pytest.mark.parametrize("n_tasks", [10**9, 2**32, 40_000])
def test_a_model_file_naming_a_huge_graph_is_refused_before_anything_is_allocated(n_tasks):
    graph = omtl.TaskGraph.from_edges(3, [(0, 1)])
    X, y, tasks = random_stream(n=30, d=4, k=3)
    data = persistence.dumps(omtl.MTPerceptron(n_tasks=3, graph=graph).partial_fit(X, y, tasks=tasks))
    fixed = len(MAGIC) + 4 + 8
    (head_len,) = struct.unpack_from("<Q", data, len(MAGIC) + 4)
    header, state = json.loads(data[fixed : fixed + head_len]), data[fixed + head_len + 8 : -32]
    spec = header["params"]["graph"]["__omtl_task_graph__"]
    spec["n_tasks"] = n_tasks
    for fitted in (True, False):
        h = dict(header, fitted=header["fitted"] if fitted else None)
        s = state if fitted else b""
        head = json.dumps(h).encode()
        body = data[: len(MAGIC) + 4] + struct.pack("<Q", len(head)) + head + struct.pack("<Q", len(s)) + s
        with pytest.raises(ValueError, match="larger than the file allows"):
            persistence.loads(body + hashlib.sha256(body).digest())


def test_save_refuses_an_unfitted_model_whose_graph_load_would_refuse(monkeypatch):
    monkeypatch.setattr(persistence, "_MAX_DENSE_GRAPH", 8 * 20 * 20)
    small = omtl.MTPerceptron(n_tasks=20, graph=omtl.TaskGraph.from_edges(20, [(0, 1)]))
    assert persistence.loads(persistence.dumps(small)).n_tasks == 20
    large = omtl.MTPerceptron(n_tasks=21, graph=omtl.TaskGraph.from_edges(21, [(0, 1)]))
    with pytest.raises(ValueError, match="fit it first or pickle it"):
        persistence.dumps(large)
