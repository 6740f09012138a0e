"""``omtl serve`` under faults: kill -9 under a learn load (bounded here; the full run is in
benches/compare_serve.py), hostile requests, the token, torn and corrupt logs, a full disk and a
read-only state directory. Real server processes on free loopback ports; every one is ended."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess

import numpy as np
import pytest
from serve_support import ServerProcess, hostile_run, kill_test, start_failure

import omtl

pytestmark = pytest.mark.skipif(not hasattr(omtl._native, "serve"), reason="built without the serve feature")

def test_kill_9_under_load_loses_no_acknowledged_event(tmp_path):
    results = kill_test(tmp_path, n_kills=4, n_clients=4, min_gap=0.4, max_gap=1.0)
    assert results["kills"] == results["restarts"] == results["identical"] == 4
    assert results["lost"] == 0 and results["failed_restarts"] == 0
    assert results["acked"] > 0 and results["final_exit_code"] == 0


def test_hostile_requests_are_refused_and_change_nothing(tmp_path):
    result = hostile_run(tmp_path, rounds=3)
    assert result["kinds"] >= 20
    assert result["wrong"] == [] and result["refused_4xx"] == result["requests"]
    assert result["alive"] and result["unchanged"] and result["exit_code"] == 0


def learn_some(server, n, seed, token=None):
    rng = np.random.default_rng(seed)
    with omtl.Client(server.url, token=token) as client:
        for _ in range(n):
            x = rng.normal(size=4)
            client.learn_one(x, 1 if x[0] > 0 else -1, task=f"u{rng.integers(3)}")
        return client.model_info()["n_seen"]


def test_a_torn_last_record_is_dropped_and_corruption_refuses_to_start(tmp_path):
    state = tmp_path / "state"
    with ServerProcess(state, "--learner", "MTLinear", "--snapshot-interval", "3600") as server:
        assert learn_some(server, 12, seed=1) == 12
        server.kill()
    (segment,) = sorted(state.glob("wal-*.log"))
    good = segment.read_bytes()
    # A record cut short by a power cut: dropped, the 12 acknowledged events kept.
    segment.write_bytes(good + good[:20])
    with ServerProcess(state) as server:
        assert any("torn" in line for line in server.stderr)
        client = omtl.Client(server.url)
        assert client.model_info()["n_seen"] == 12
        client.snapshot()  # the replayed log is covered: the next records start a segment
        assert learn_some(server, 5, seed=2) == 17
        server.kill()
    # A flipped byte inside an earlier record: refused, one line naming the file and offset.
    (segment,) = sorted(state.glob("wal-*.log"))
    data = bytearray(segment.read_bytes())
    data[30] ^= 0x40
    segment.write_bytes(bytes(data))
    code, stderr = start_failure(state)
    assert code != 0
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and segment.name in lines[0] and "corrupt record at offset 0" in lines[0], stderr


def test_a_full_disk_turns_learns_into_503_while_predictions_go_on(tmp_path):
    """The log's file size capped (RLIMIT_FSIZE, as a full disk): learns are refused with 503,
    predictions go on, and every acknowledged event survives a restart without the cap."""
    state = tmp_path / "state"
    with ServerProcess(state, "--learner", "MTLinear", "--snapshot-interval", "3600") as server:
        learn_some(server, 3, seed=2)
        server.stop()
    cap = max(p.stat().st_size for p in state.iterdir()) + 4096

    def capped():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))

    acked = 3
    with ServerProcess(state, "--snapshot-interval", "3600", preexec_fn=capped) as server:
        client = omtl.Client(server.url)
        rng = np.random.default_rng(3)
        refused = 0
        for _ in range(200):
            x = rng.normal(size=4)
            try:
                client.learn_one(x, 1 if x[0] > 0 else -1, task="u1")
                acked += 1
            except RuntimeError as exc:
                assert "503" in str(exc)
                refused += 1
                break
        assert refused == 1, "the log reached its cap"
        assert isinstance(client.decision_one(rng.normal(size=4), task="u1"), float)
        assert client.health()["learn_available"] is False
        assert client.model_info()["n_seen"] == acked
        server.kill()
    with ServerProcess(state) as server:
        assert omtl.Client(server.url).model_info()["n_seen"] == acked
        assert server.stop() == 0


def test_a_forget_whose_snapshot_fails_answers_503_and_a_later_snapshot_removes_the_records(tmp_path):
    """The snapshot after a forget cannot be written (RLIMIT_FSIZE below any model file's size,
    above the forget record's): the answer is a 503 that says the task is forgotten; the model has
    forgotten it, the old snapshot still names it, and the first snapshot without the cap
    removes it."""
    state = tmp_path / "state"
    with ServerProcess(state, "--learner", "MTLinear", "--snapshot-interval", "3600") as server, \
            omtl.Client(server.url) as client:
        rng = np.random.default_rng(5)
        for i in range(12):
            x = rng.normal(size=4)
            client.learn_one(x, 1 if x[0] > 0 else -1, task="leaver-9k2w" if i % 2 else "stayer")
        assert server.stop() == 0
    cap = 128  # a forget record (under 64 bytes) fits in the empty segment; no model file does
    assert (state / "model.omtl").stat().st_size > cap

    def capped():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))

    with ServerProcess(state, "--snapshot-interval", "3600", preexec_fn=capped) as server, \
            omtl.Client(server.url) as client:
        with pytest.raises(RuntimeError, match="503: the tasks are forgotten"):
            client.forget("leaver-9k2w")
        assert client.model_info()["tasks"] == ["stayer"]
        assert b"leaver-9k2w" in (state / "model.omtl").read_bytes()
        server.kill()
    with ServerProcess(state) as server, omtl.Client(server.url) as client:
        client.snapshot()  # the recovery's own snapshot, or this one, covers the forget
        assert client.model_info()["tasks"] == ["stayer"]
        assert [p.name for p in state.iterdir() if b"leaver-9k2w" in p.read_bytes()] == []
        assert server.stop() == 0


def read_only(state):
    """Makes the state directory and its files read-only (``chattr +i`` for root, whom modes do
    not stop); returns the undoing."""
    paths = [state, *state.iterdir()]
    if os.geteuid() != 0:
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        return lambda: [p.chmod(0o755 if p.is_dir() else 0o644) for p in paths]
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", *map(str, paths)],
                                                        capture_output=True).returncode != 0:
        pytest.skip("running as root on a file system without chattr +i: no way to make a directory read-only")
    return lambda: subprocess.run(["chattr", "-i", *map(str, paths)], check=True)


def test_a_read_only_state_directory_refuses_learns_while_predictions_go_on(tmp_path):
    state = tmp_path / "state"
    with ServerProcess(state, "--learner", "MTLinear", "--snapshot-interval", "3600") as server:
        learn_some(server, 3, seed=4)
        assert server.stop() == 0
    undo = read_only(state)
    try:
        with ServerProcess(state) as server:
            client = omtl.Client(server.url)
            with pytest.raises(RuntimeError, match="503"):
                client.learn_one([1.0, 0.0, 0.0, 0.0], 1, task="u1")
            assert isinstance(client.decision_one([1.0, 0.0, 0.0, 0.0], task="u1"), float)
            assert client.health()["learn_available"] is False
            assert client.model_info()["n_seen"] == 3
            server.kill()
    finally:
        undo()
    with ServerProcess(state) as server:
        assert learn_some(server, 2, seed=5) == 5, "learns resume once the directory is writable"
        assert server.stop() == 0
