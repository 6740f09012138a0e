"""Starting and stopping real ``omtl serve`` processes on free loopback ports, for the server's
tests and bench (tests/test_serve*.py, benches/compare_serve.py). Every process started here
is ended by ``stop``/``kill`` (and by ``ServerProcess.__exit__``)."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

LISTENING = re.compile(r"listening on http://([\d.]+):(\d+)(?: \(VW protocol on [\d.]+:(\d+)\))?")


class ServerProcess:
    """``python -m omtl serve --port 0 ...`` in a subprocess; ``url`` once it listens."""

    def __init__(self, state_dir, *args, token=None, preexec_fn=None, timeout=60.0, env=None):
        self.state_dir = Path(state_dir)
        command = [sys.executable, "-m", "omtl", "serve", "--state-dir", str(state_dir), "--port", "0", *map(str, args)]
        if token is not None:
            token_file = self.state_dir.parent / f"{self.state_dir.name}.token"
            token_file.write_text(token + "\n")
            command += ["--token-file", str(token_file)]
        self.stderr: list[str] = []
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            preexec_fn=preexec_fn, env={**os.environ, **(env or {})},
        )
        self.url = None
        self.vw_port = None
        ready = threading.Event()

        def drain():
            for line in self.process.stderr:
                self.stderr.append(line.rstrip("\n"))
                match = LISTENING.search(line)
                if match:
                    self.url = f"http://{match[1]}:{match[2]}"
                    self.vw_port = int(match[3]) if match[3] else None
                    ready.set()
            ready.set()

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"omtl serve did not start in {timeout} s: {self.stderr}")
        if self.url is None:
            self.process.wait(timeout=10)
            raise RuntimeError(f"omtl serve exited with {self.process.returncode}: {' | '.join(self.stderr)}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout=60.0) -> int:
        """SIGTERM; waits for the exit; its code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._drain.join(timeout=5)
        return code

    def kill(self) -> None:
        """SIGKILL (kill -9); waits for the exit."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._drain.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.kill()


def start_failure(state_dir, *args, timeout=60.0) -> tuple[int, str]:
    """Runs ``omtl serve`` expecting it to refuse to start: its exit code and stderr."""
    command = [sys.executable, "-m", "omtl", "serve", "--state-dir", str(state_dir), "--port", "0", *map(str, args)]
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stderr


# ---- kill -9 under a learn load -----------------------------------------------------------------
def _request(k: int, batch: int, d: int = 8, n_users: int = 10):
    """Learn request ``k`` of the kill test: ``batch`` dense rows, str tasks, -1/+1 labels."""
    import numpy as np

    rng = np.random.default_rng(k)
    X = rng.normal(size=(batch, d))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1, -1)
    tasks = [f"u{t}" for t in rng.integers(0, n_users, size=batch)]
    return X, y, tasks


def kill_test(root, n_kills: int, n_clients: int = 4, batch: int = 5, seed: int = 0,
              min_gap: float = 0.3, max_gap: float = 1.5) -> dict:
    """Kills ``omtl serve`` with SIGKILL at ``n_kills`` random moments while ``n_clients``
    threads send learn requests, restarts it each time, and checks after each restart that every
    acknowledged request is in the model and that the model equals, bit for bit, an in-process
    replay of the logged requests in log order (a request in flight at the kill may or may not
    have been logged: the replay tries where each fits). Returns the counts."""
    import copy
    import itertools
    import random

    import omtl
    from omtl.client import Client

    state = Path(root) / "kill-state"
    args = ["--learner", "MTLinear", "--snapshot-every", "400", "--snapshot-interval", "2"]
    rng = random.Random(seed)
    lock = threading.Lock()
    counter = itertools.count()
    acked: dict[int, int] = {}  # lsn -> request number
    failed: list[int] = []  # requests whose answer never came, since the last restart
    waiting = threading.Semaphore(0)
    restarted = threading.Event()
    stop = threading.Event()
    current = {"url": None}

    def client_loop():
        while not stop.is_set():
            client = Client(current["url"], timeout=30)
            try:
                while not stop.is_set():
                    k = next(counter)
                    X, y, tasks = _request(k, batch)
                    events = [{"features": x.tolist(), "label": int(v), "task": t} for x, v, t in zip(X, y, tasks)]
                    try:
                        answer = client._call("POST", "/v1/learn", {"events": events})
                    except (OSError, ValueError, RuntimeError):
                        with lock:
                            failed.append(k)
                        break
                    with lock:
                        acked[answer["lsn"]] = k
            finally:
                client.close()
            if stop.is_set():
                return
            waiting.release()
            restarted.wait()

    server = ServerProcess(state, *args)
    current["url"] = server.url
    local = omtl.MTLinear()
    verified_lsn = 0
    results = {"kills": 0, "restarts": 0, "failed_restarts": 0, "lost": 0, "identical": 0, "acked": 0}
    threads = [threading.Thread(target=client_loop, daemon=True) for _ in range(n_clients)]
    for t in threads:
        t.start()
    try:
        for _ in range(n_kills):
            time.sleep(rng.uniform(min_gap, max_gap))
            restarted.clear()
            server.kill()
            results["kills"] += 1
            for _ in threads:
                if not waiting.acquire(timeout=60):
                    raise TimeoutError("a client did not notice the kill")
            try:
                server = ServerProcess(state)
            except (RuntimeError, TimeoutError):
                results["failed_restarts"] += 1
                raise
            results["restarts"] += 1
            with Client(server.url) as probe:
                lsn = probe.model_info()["lsn"]
                probe.snapshot()
            with lock:
                in_flight = list(failed)
                failed.clear()
                mine = {n: k for n, k in acked.items() if n > verified_lsn}
            results["lost"] += sum(1 for n in mine if n > lsn)
            unknown = [n for n in range(verified_lsn + 1, lsn + 1) if n not in mine]
            served = omtl.dumps(omtl.load(state / "model.omtl"))
            match = None
            for guess in itertools.permutations(in_flight, len(unknown)):
                order = {**{n: k for n, k in mine.items() if n <= lsn}, **dict(zip(unknown, guess))}
                candidate = copy.deepcopy(local)
                for n in sorted(order):
                    X, y, tasks = _request(order[n], batch)
                    candidate.learn(X, y, tasks=tasks)
                if omtl.dumps(candidate) == served:
                    match = candidate
                    break
            if match is None:
                raise AssertionError(f"after kill {results['kills']}: the restarted model is no replay of the log")
            results["identical"] += 1
            local, verified_lsn = match, lsn
            current["url"] = server.url
            restarted.set()
        stop.set()
        restarted.set()
        for t in threads:
            t.join(timeout=60)
        results["acked"] = len(acked)
        code = server.stop()
        results["final_exit_code"] = code
    finally:
        stop.set()
        restarted.set()
        server.kill()
    return results


# ---- hostile requests ---------------------------------------------------------------------------
TOKEN = "s3cret-token"


def raw(url, method, path, body=b"", headers=None):
    """One request on a fresh connection: ``(status, body text)``."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def hostile_requests(auth):
    """``(kind, method, path, body, headers, expected status)``: each must be refused."""
    j = {"Content-Type": "application/json", **auth}
    ok = {"features": [1.0, 0.5, -0.5, 0.25], "task": 1, "label": 1}

    def events(*e):
        return json.dumps({"events": list(e)}).encode()

    return [
        ("bad JSON", "POST", "/v1/learn", b'{"events": [', j, 400),
        ("not an object", "POST", "/v1/learn", b"[1, 2]", j, 400),
        ("unknown field", "POST", "/v1/learn", b'{"events": [], "x": 1}', j, 400),
        ("events not an array", "POST", "/v1/learn", b'{"events": 3}', j, 400),
        ("no events", "POST", "/v1/learn", b'{"events": []}', j, 400),
        ("event not an object", "POST", "/v1/learn", b'{"events": [7]}', j, 400),
        ("features missing", "POST", "/v1/learn", events({"task": 1, "label": 1}), j, 400),
        ("features a string", "POST", "/v1/learn", events({**ok, "features": "abc"}), j, 400),
        ("a feature null", "POST", "/v1/learn", events({**ok, "features": {"a": None}}), j, 400),
        ("NaN", "POST", "/v1/learn", b'{"events": [{"features": [NaN, 1, 1, 1], "task": 1, "label": 1}]}', j, 400),
        ("infinity", "POST", "/v1/learn", b'{"events": [{"features": [1e999, 1, 1, 1], "task": 1, "label": 1}]}', j, 400),
        ("a string in a row", "POST", "/v1/predict", events({"features": [1, "x", 1, 1], "task": 1}), j, 400),
        ("label missing", "POST", "/v1/learn", events({"features": [1, 1, 1, 1], "task": 1}), j, 400),
        ("label an object", "POST", "/v1/learn", events({**ok, "label": {"y": 1}}), j, 400),
        ("labels of two types", "POST", "/v1/learn", events(ok, {**ok, "label": "spam"}), j, 400),
        ("a label not of the model's classes", "POST", "/v1/learn", events({**ok, "label": 7}), j, 400),
        ("task a float", "POST", "/v1/learn", events({**ok, "task": 1.5}), j, 400),
        ("task missing in a batch with tasks", "POST", "/v1/learn", events(ok, {"features": [1, 1, 1, 1], "label": 1}), j, 400),
        ("unknown task of a closed model", "POST", "/v1/learn", events({**ok, "task": 99}), j, 404),
        ("wrong width", "POST", "/v1/predict", events({"features": [1, 1, 1, 1, 1], "task": 1}), j, 400),
        ("rows of two kinds", "POST", "/v1/predict", events({"features": [1, 1, 1, 1], "task": 1}, {"features": {"a": 1}, "task": 1}), j, 400),
        ("deep nesting", "POST", "/v1/learn", b"[" * 200 + b"]" * 200, j, 400),
        ("huge body", "POST", "/v1/learn", b'{"events": [' + b" " * 70_000 + b"]}", j, 413),
        ("too many events", "POST", "/v1/predict", events(*[{"features": [1, 1, 1, 1], "task": 1}] * 101), j, 413),
        ("too many features", "POST", "/v1/predict", events({"features": {f"f{i}": 1 for i in range(60)}, "task": 1}), j, 413),
        ("unknown id", "POST", "/v1/label", b'{"labels": [{"id": "nope", "label": 1}]}', j, 404),
        ("empty id", "POST", "/v1/predict", events({"features": [1, 1, 1, 1], "task": 1, "remember": ""}), j, 400),
        ("an id twice", "POST", "/v1/predict", events(*[{"features": [1, 1, 1, 1], "task": 1, "remember": "a"}] * 2), j, 400),
        ("invalid UTF-8", "POST", "/v1/learn", b'{"events": [{"features": {"\xff\xfe": 1}}]}', j, 400),
        ("wrong method", "GET", "/v1/learn", b"", auth, 405),
        ("unknown route", "GET", "/v2/learn", b"", auth, 404),
        ("no token", "POST", "/v1/learn", events(ok), {"Content-Type": "application/json"}, 401),
        ("a wrong token", "POST", "/v1/learn", events(ok), {"Authorization": "Bearer " + TOKEN[:-1] + "x"}, 401),
        ("a token not bearer", "GET", "/v1/model", b"", {"Authorization": "Basic " + TOKEN}, 401),
    ]


def hostile_run(root, rounds: int = 1, total: int | None = None) -> dict:
    """Sends every kind of hostile request ``rounds`` times (or ``total`` requests, cycling) to a
    server with a token and small caps; checks each status, that the server stays alive and that
    the model is unchanged (its snapshot before and after, bit for bit)."""
    import numpy as np

    import omtl

    state = Path(root) / "hostile-state"
    args = ["--learner", "PAUnique", "--param", "n_tasks=3", "--param", "n_features=64", "--max-body-bytes", "65536",
            "--max-events", "100", "--max-features", "50"]
    with ServerProcess(state, *args, token=TOKEN) as server:
        client = omtl.Client(server.url, token=TOKEN)
        rng = np.random.default_rng(0)
        X = rng.normal(size=(20, 4))
        client.learn(X, np.where(X[:, 0] > 0, 1, -1), tasks=rng.integers(0, 3, size=20))
        client.snapshot()
        before = omtl.dumps(omtl.load(state / "model.omtl"))
        cases = hostile_requests({"Authorization": f"Bearer {TOKEN}"})
        total = len(cases) * rounds if total is None else total
        refused, wrong = 0, []
        for i in range(total):
            kind, method, path, body, headers, expected = cases[i % len(cases)]
            status, text = raw(server.url, method, path, body, headers)
            if status == expected and 400 <= status < 500 and "error" in json.loads(text):
                refused += 1
            else:
                wrong.append((kind, status, text[:200]))
        alive = client.health()["status"] == "ok"
        client.snapshot()
        unchanged = omtl.dumps(omtl.load(state / "model.omtl")) == before
        client.close()
        code = server.stop()
    return {"requests": total, "kinds": len({kind for kind, *_ in cases}), "refused_4xx": refused, "wrong": wrong,
            "alive": alive, "unchanged": unchanged, "exit_code": code}
