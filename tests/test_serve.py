"""``omtl serve`` against the in-process estimator: a real server (a subprocess on a free
loopback port) driven by the real client (``omtl.Client``) and raw HTTP. Round trips, delayed
labels, restarts and replay, the VW protocol, metrics, SIGTERM. Durability under kill -9, hostile
requests and disk failures: tests/test_serve_faults.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request

import numpy as np
import pytest
from serve_support import ServerProcess

import omtl

pytestmark = pytest.mark.skipif(not hasattr(omtl._native, "serve"), reason="built without the serve feature")

WORDS = ["cheap", "pills", "meeting", "tomorrow", "watches", "lunch", "free", "offer", "report", "friday"]


def mail_stream(n, seed, users=("alice", "bob", "carol"), classes=("ham", "spam")):
    """Named-feature events (dicts), str tasks, labels of ``classes``; the first two events are
    of both classes (a first batch of one class does not say which is positive)."""
    rng = np.random.default_rng(seed)
    events = []
    for i in range(n):
        words = rng.choice(WORDS, size=3, replace=False)
        x = {str(w): float(rng.integers(1, 3)) for w in words}
        spam = sum(x.get(w, 0) for w in ("cheap", "pills", "free", "offer", "watches")) > 1.5
        if i < 2:
            spam = i == 0
            x["cheap" if spam else "report"] = 2.0
        events.append((x, classes[int(spam)], str(rng.choice(users))))
    return events


def learn_first(local, events, n_features):
    """The in-process estimator learns ``events`` as one batch (as the server does)."""
    X = omtl.hash_features([x for x, _, _ in events], n_features=n_features)
    return local.learn(X, [y for _, y, _ in events], tasks=[t for _, _, t in events]).tolist()


def same_model(served_file, estimator):
    """The served model (its snapshot) equals the in-process estimator, bit for bit."""
    return omtl.dumps(omtl.load(served_file)) == omtl.dumps(estimator)


@pytest.fixture
def state(tmp_path):
    return tmp_path / "state"


def test_learn_and_predict_match_the_in_process_estimator(state):
    events = mail_stream(60, seed=1)
    local = omtl.MTLinear(n_features=512)
    with ServerProcess(state, "--learner", "MTLinear", "--param", "n_features=512") as server, \
            omtl.Client(server.url) as client:
        served = client.learn([x for x, _, _ in events[:40]], [y for _, y, _ in events[:40]],
                              tasks=[t for _, _, t in events[:40]])
        assert served == learn_first(local, events[:40], 512)
        for x, y, t in events[40:]:
            assert client.learn_one(x, y, task=t) == local.learn_one(x, y, task=t)
        probe = [x for x, _, _ in mail_stream(20, seed=2)]
        tasks = ["alice", "bob", "dave"] * 6 + ["alice", "bob"]
        assert client.decision_function(probe, tasks=tasks) == [local.decision_one(x, task=t) for x, t in zip(probe, tasks)]
        assert client.predict(probe, tasks=tasks) == [local.predict_one(x, task=t) for x, t in zip(probe, tasks)]
        assert client.predict_proba_one(probe[0], task="bob") == pytest.approx(local.predict_proba_one(probe[0], task="bob"))
        info = client.model_info()
        assert (info["class"], info["n_seen"], info["n_tasks"]) == ("MTLinear", 60, 3)
        assert info["n_mistakes"] == local.n_mistakes_
        client.snapshot()
        assert same_model(state / "model.omtl", local)
        assert server.stop() == 0


@pytest.mark.parametrize("name,params", [("PAUnique", {"n_tasks": 3}), ("MTRBP", {"n_tasks": 3, "budget": 12})])
def test_dense_rows_and_integer_tasks(state, name, params):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 6))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1, -1)
    tasks = rng.integers(0, 3, size=50)
    local = getattr(omtl, name)(**params)
    args = ["--learner", name] + [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
    with ServerProcess(state, *args) as server, omtl.Client(server.url) as client:
        served = client.learn(X[:30], y[:30], tasks=tasks[:30])
        assert served == local.learn(X[:30], y[:30], tasks=tasks[:30]).tolist()
        for i in range(30, 50):
            assert client.learn_one(X[i], y[i], task=int(tasks[i])) == local.learn_one(X[i], y[i], task=int(tasks[i]))
        assert client.decision_function(X, tasks=tasks) == local.decision_function(X, tasks=tasks).tolist()
        client.snapshot()
        assert same_model(state / "model.omtl", local)
        with pytest.raises(KeyError, match="404"):
            client.learn_one(X[0], 1, task=7)  # a closed model's unknown task
        assert server.stop() == 0


def test_a_fitted_estimator_served_from_python(state, tmp_path):
    """``omtl.serve(state_dir, model=estimator)``: the Python entry point, from a fitted model."""
    events = mail_stream(30, seed=4)
    local = omtl.MTLinear(n_features=256)
    learn_first(local, events[:20], 256)
    omtl.save(local, tmp_path / "start.omtl")
    script = (
        "import sys, omtl; m = omtl.load(sys.argv[2]); "
        "omtl.serve(sys.argv[1], m, port=0, snapshot_every=1000000)"
    )
    command = [sys.executable, "-c", script, str(state), str(tmp_path / "start.omtl")]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        url = line.split("listening on ")[1].strip()
        with omtl.Client(url) as client:
            for x, y, t in events[20:]:
                assert client.learn_one(x, y, task=t) == local.learn_one(x, y, task=t)
        process.terminate()
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert same_model(state / "model.omtl", local)


def test_delayed_labels_learn_as_learn_one_in_label_order(state):
    events = mail_stream(24, seed=5, classes=(-1, 1))
    local = omtl.MTLinear(n_features=256)
    with ServerProcess(state, "--learner", "MTLinear", "--param", "n_features=256") as server, \
            omtl.Client(server.url) as client:
        for x, y, t in events[:4]:
            client.learn_one(x, y, task=t)
            local.learn_one(x, y, task=t)
        served = {}
        for i, (x, _, t) in enumerate(events[4:], start=4):
            served[i] = client.predict_one(x, task=t, remember=f"m{i}")
        assert client.model_info()["pending"]["count"] == 20
        order = np.random.default_rng(0).permutation(np.arange(4, 24))
        mistakes = local.n_mistakes_
        for i in order[:10]:
            x, y, t = events[i]
            # The answer is the prediction before the update, as learn_one's at this moment.
            assert client.learn_label(f"m{i}", y) == local.learn_one(x, y, task=t)
            mistakes += served[i] != y
        # A batch of labels, atomic: an unknown id refuses all of it.
        rest = [int(i) for i in order[10:]]
        with pytest.raises(KeyError, match="no pending event"):
            client.learn_labels([f"m{i}" for i in rest] + ["nope"], [events[i][1] for i in rest] + [1])
        client.learn_labels([f"m{i}" for i in rest], [events[i][1] for i in rest])
        for i in rest:
            x, y, t = events[i]
            local.learn_one(x, y, task=t)
            mistakes += served[i] != y
        with pytest.raises(KeyError):
            client.learn_label("m4", 1)  # learned already
        info = client.model_info()
        assert info["pending"]["count"] == 0 and info["n_seen"] == 24
        assert info["n_mistakes"] == mistakes, "the served predictions are counted"
        client.snapshot()
        served_model = omtl.load(state / "model.omtl")
        probe = [x for x, _, _ in mail_stream(10, seed=6)]
        for x in probe:
            assert served_model.decision_one(x, task="alice") == local.decision_one(x, task="alice")
        assert server.stop() == 0


def test_a_restart_replays_the_log_to_the_same_model(state):
    events = mail_stream(40, seed=7, classes=(-1, 1))
    local = omtl.MTLinear(n_features=256)
    args = ["--learner", "MTLinear", "--param", "n_features=256", "--snapshot-every", "15", "--snapshot-interval", "3600"]
    with ServerProcess(state, *args) as server, omtl.Client(server.url) as client:
        for k in range(0, 40, 4):
            batch = events[k:k + 4]
            client.learn([x for x, _, _ in batch], [y for _, y, _ in batch], tasks=[t for _, _, t in batch])
            for x, y, t in batch:
                local.learn_one(x, y, task=t)
        client.predict_one(events[0][0], task="bob", remember="later")
        server.kill()  # kill -9: the last snapshot plus the log
    with ServerProcess(state) as server, omtl.Client(server.url) as client:
        info = client.model_info()
        assert info["n_seen"] == 40 and info["pending"]["count"] == 1
        client.learn_label("later", events[0][1])
        local.learn_one(events[0][0], events[0][1], task="bob")
        client.snapshot()
        assert same_model(state / "model.omtl", local)
        assert server.stop() == 0


def traces(state_dir, text):
    """The files of ``state_dir`` whose bytes hold ``text``."""
    needle = text.encode()
    return [p.name for p in state_dir.iterdir() if p.is_file() and needle in p.read_bytes()]


def test_forget_takes_a_user_out_of_the_model_and_the_state_directory(state):
    leaver = "leaver-7f3a9q"  # a task name found nowhere else
    events = [(x, y, leaver if t == "alice" else t) for x, y, t in mail_stream(40, seed=11, users=("alice", "bob"), classes=(-1, 1))]
    local = omtl.MTLinear(n_features=256)
    probe = [x for x, _, _ in mail_stream(12, seed=12)]
    args = ["--learner", "MTLinear", "--param", "n_features=256", "--snapshot-interval", "3600"]
    with ServerProcess(state, *args) as server, omtl.Client(server.url) as client:
        for k in range(0, 40, 8):
            batch = events[k:k + 8]
            client.learn([x for x, _, _ in batch], [y for _, y, _ in batch], tasks=[t for _, _, t in batch])
            learn_first(local, batch, 256)
        client.predict_one(probe[0], task=leaver, remember="leaver-mail")
        client.snapshot()
        client.learn_one(probe[1], 1, task=leaver)
        local.learn_one(probe[1], 1, task=leaver)
        assert traces(state, leaver), "the snapshot and the log hold the user's records"
        bob = client.decision_function(probe, tasks=["bob"] * len(probe))
        lsn = client.model_info()["lsn"]
        # Refused forgets change nothing and log nothing.
        with pytest.raises(KeyError, match="404"):
            client.forget([leaver, "nobody"])
        with pytest.raises(ValueError, match="400.*twice"):
            client.forget(["bob", "bob"])
        assert client.model_info()["lsn"] == lsn

        answer = client.forget(leaver)
        n_examples = sum(t == leaver for _, _, t in events) + 1
        assert answer["forgotten"] == [leaver]
        assert (answer["n_examples"], answer["n_pending"], answer["lsn"]) == (n_examples, 1, lsn + 1)
        assert answer["snapshot_lsn"] >= answer["lsn"]
        assert traces(state, leaver) == [], "no file of the state directory holds the user"
        local.forget(leaver)
        info = client.model_info()
        assert leaver not in info["tasks"] and info["tasks"] == ["bob"] and info["pending"]["count"] == 0
        assert client.decision_function(probe, tasks=["bob"] * len(probe)) == bob
        assert client.decision_function(probe, tasks=["bob"] * len(probe)) == local.decision_function(
            omtl.hash_features(probe, n_features=256), tasks=["bob"] * len(probe)).tolist()
        text = client.metrics()
        assert 'omtl_requests_total{route="/v1/forget",status="200"} 1' in text
        assert 'omtl_requests_total{route="/v1/forget",status="404"} 1' in text
        assert "omtl_tasks_forgotten_total 1" in text
        client.learn_one(probe[2], -1, task="bob")
        local.learn_one(probe[2], -1, task="bob")
        server.kill()  # kill -9: the snapshot after the forget plus the log after it
    with ServerProcess(state) as server, omtl.Client(server.url) as client:
        info = client.model_info()
        assert info["tasks"] == ["bob"] and info["n_seen"] == 42
        assert client.decision_function(probe, tasks=["bob"] * len(probe)) == local.decision_function(
            omtl.hash_features(probe, n_features=256), tasks=["bob"] * len(probe)).tolist()
        with pytest.raises(KeyError, match="404"):
            client.learn_label("leaver-mail", 1)
        assert traces(state, leaver) == []
        assert server.stop() == 0


def test_sigterm_drains_snapshots_and_exits_0(state):
    with ServerProcess(state, "--learner", "PAUnique", "--param", "n_tasks=1", "--snapshot-interval", "3600") as server, \
            omtl.Client(server.url) as client:
        client.learn_one([1.0, 0.5], 1)
        client.learn_one([-1.0, 0.5], -1)
        assert server.stop() == 0
    assert omtl.load(state / "model.omtl").n_seen_ == 2
    segments = sorted(state.glob("wal-*.log"))
    assert all(p.stat().st_size == 0 for p in segments), "the last snapshot covers the log"


def test_metrics_health_and_openapi(state):
    with ServerProcess(state, "--learner", "MTLinear", "--param", "n_features=64") as server, \
            omtl.Client(server.url) as client:
        client.learn_one({"a": 1.0}, 1, task="u")
        client.predict_one({"a": 1.0}, task="u")
        assert client.health() == {"status": "ok", "learn_available": True}
        text = client.metrics()
        for name in ("omtl_events_learned_total 1", "omtl_events_predicted_total 1", "omtl_wal_fsyncs_total",
                     "omtl_model_progressive_error", 'omtl_request_seconds_bucket{route="/v1/learn",le="+Inf"} 1',
                     "omtl_snapshot_lsn", "omtl_learn_available 1", "omtl_pending_events 0"):
            assert name in text, name
        with urllib.request.urlopen(server.url + "/v1/openapi.json", timeout=10) as r:
            spec = json.load(r)
        assert {"/v1/predict", "/v1/learn", "/v1/label", "/metrics"} <= set(spec["paths"])
        assert server.stop() == 0


def test_the_vw_daemon_protocol(state):
    local = omtl.MTLinear(n_features=1024)
    lines = ["1 'm1 |words cheap pills |t alice", "-1 'm2 |words meeting friday |t alice",
             "1 |words cheap watches |t bob", "|words cheap offer |t alice"]
    with ServerProcess(state, "--learner", "MTLinear", "--param", "n_features=1024", "--vw-port", "0") as server:
        with socket.create_connection(("127.0.0.1", server.vw_port), timeout=30) as sock:
            sock.sendall(("\n".join(lines) + "\nnot an example\n").encode())
            answers = b""
            while answers.count(b"\n") < 5:
                answers += sock.recv(65536)
        answers = answers.decode().splitlines()
        expected = []
        for line, (x, y, t) in zip(lines, [({"words^cheap": 1, "words^pills": 1}, 1, "alice"),
                                            ({"words^meeting": 1, "words^friday": 1}, -1, "alice"),
                                            ({"words^cheap": 1, "words^watches": 1}, 1, "bob"),
                                            ({"words^cheap": 1, "words^offer": 1}, None, "alice")]):
            score = local.decision_one(x, task=t)
            if y is not None:
                local.learn_one(x, y, task=t)
            tag = line.split("'")[1].split()[0] if "'" in line else None
            expected.append(f"{score:.6f}" + (f" {tag}" if tag else ""))
        assert answers[:4] == expected
        assert answers[4].startswith("error: ")
        with omtl.Client(server.url) as client:
            assert client.model_info()["n_seen"] == 3
        assert server.stop() == 0
