"""Fuzzing of model files and pickles, run by test_persistence.py in a subprocess (so that an
abort would show as a failed test instead of killing pytest).

For every native learner class, fitted on a small stream: random byte flips, truncations and
edits of the u64 length fields of the native state (bincode writes a u64 before every
sequence), placed in a model file (checksum recomputed, so the deep checks run, not only the
checksum) and in a pickle; and headers edited structurally (graph sizes and kinds, task labels,
counts, parameters: ``mutate_header``) or by a changed character. Each load must raise
ValueError or give a model that then scores finitely, survives ``partial_fit`` (which may refuse
a step that would not be finite, with ValueError) and still scores finitely. Model files are built in memory and read with
``omtl.persistence.loads`` (``load`` reads the file, then calls it).

Usage: ``python _model_file_fuzz.py SECONDS``. Prints one line per class and exits 0, or raises.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import omtl
from omtl._base import NativeCore
from omtl.persistence import MAGIC, REGISTRY, loads

K, D = 3, 5


def settings(cls):
    names = cls._param_names()
    kw = {"budget": 6} if "budget" in names else {}
    if "retrain_every" in names:
        kw["retrain_every"] = 15
    if "graph" in names:
        kw["graph"] = omtl.TaskGraph.from_edges(K, [(0, 1)])
    if "kernel" in names and "budget" in names:
        kw["gamma"] = 0.5
    return kw


def stream(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, D))
    X[rng.random((n, D)) < 0.3] = 0.0
    tasks = rng.integers(0, K, size=n)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.2 * rng.standard_normal(n) > 0, 1, -1)
    return X, y, tasks


def state_of(path):
    data = Path(path).read_bytes()
    fixed = len(MAGIC) + 4 + 8
    (head_len,) = struct.unpack_from("<Q", data, len(MAGIC) + 4)
    return data[: fixed + head_len], data[fixed + head_len + 8 : -32]


def file_with(head: bytes, state: bytes) -> bytes:
    body = head + struct.pack("<Q", len(state)) + state
    return body + hashlib.sha256(body).digest()


def size_fields(state: bytes):
    """Offsets of u64 words holding a small count: likely lengths and sizes."""
    return [p for p in range(len(state) - 7) if 1 <= int.from_bytes(state[p : p + 8], "little") <= 10_000]


def corrupt(state: bytes, fields, rng) -> bytes:
    b = bytearray(state)
    kind = rng.integers(4)
    if kind == 0:
        for _ in range(rng.integers(1, 4)):
            b[rng.integers(len(b))] ^= 1 << int(rng.integers(8))
    elif kind == 1:
        b = b[: rng.integers(len(b))]
    elif fields:
        p = fields[rng.integers(len(fields))]
        old = int.from_bytes(b[p : p + 8], "little")
        new = [0, 1, old - 1, old + 1, 2 * old, 2**31, 2**62, 2**64 - 1][rng.integers(8)]
        b[p : p + 8] = new.to_bytes(8, "little")
    else:
        b[0] ^= 1
    return bytes(b)


def _native_core(state):
    """What unpickling a NativeCore does with its state."""
    core = NativeCore.__new__(NativeCore)
    core.__setstate__({"state": state})
    return core


class _RawCore:
    """Pickles as a NativeCore holding the given (possibly corrupted) state bytes."""

    def __init__(self, state):
        self.state = state

    def __reduce__(self):
        return (_native_core, (self.state,))

    def snapshot(self):
        # Pickling a model snapshots its core (omtl._base.Core): the bytes are immutable, so the
        # stand-in itself serves, and the decoding happens only on unpickling.
        return self


def exercise(model, X, y, tasks, settings_checked=True):
    """A loaded model scores finitely, learns (or refuses a step that would not be finite) and
    still scores finitely: a state that loads is never a NaN model. Unpickling does not hold the
    engine's settings to the hyper-parameters (``set_params`` after fitting is allowed), so an
    unpickled engine may carry an extreme step size a user could also set, and score ±inf after
    learning with it (``settings_checked=False``)."""
    labels = model.tasks_  # the stream's tasks named as this model names them (edited labels too)
    tasks = labels[np.asarray(tasks) % len(labels)] if len(labels) else tasks
    before = model.decision_function(X, tasks=tasks)
    assert np.isfinite(before).all(), f"a loaded {type(model).__name__} scores {before}"
    try:
        model.partial_fit(X, y, tasks=tasks)
    except ValueError as e:
        # A valid but extreme state whose next step would not be finite: the update is refused
        # and the model left as it was (docs/reliability.md).
        # An edited label form (another valid pair of classes) refuses the stream's -1/+1.
        if not any(m in str(e) for m in ("numerical failure", "overflows", "this model's classes")):
            raise
    after = model.decision_function(X, tasks=tasks)
    assert not settings_checked or np.isfinite(after).all(), f"a loaded {type(model).__name__} scores {after} after learning"
    model.predict(X, tasks=tasks)


# Header edits: sizes, task graphs, task labels and counts a hostile file could hold.
HUGE = [0, -1, 1.5, 2**31, 10**9, 2**32, 2**62, 2**63, 2**64 + 1, True, "3", None, [], {}]


def mutate_header(header: dict, rng) -> dict:
    """A structurally edited copy of a model file's header (a JSON object)."""
    h = json.loads(json.dumps(header))
    fitted = h.get("fitted") or {}
    graphs = [v["__omtl_task_graph__"] for v in h["params"].values() if isinstance(v, dict)]
    choice = int(rng.integers(7))
    pick = HUGE[int(rng.integers(len(HUGE)))]
    if choice == 0 and graphs:  # the graph's size
        graphs[0]["n_tasks"] = pick
    elif choice == 1 and graphs:  # a graph of another kind or with other edges
        g = graphs[0]
        g["kind"] = ["edges", "laplacian_pinv", "complete", "disconnected", "task_kernel", "bogus"][int(rng.integers(6))]
        g["n_tasks"] = [K, 3000, 40_000, 10**9][int(rng.integers(4))]
        g["edges"] = [[[0, 1]], [[0, 10**12]], [[-1, 0]], [[0, 0]], [[0, "1"]], None][int(rng.integers(6))]
        g["weights"] = None if g["edges"] is None else [[1.0], [-1.0], [1e308], ["w"]][int(rng.integers(4))]
    elif choice == 2 and fitted:  # task labels
        fitted["task_labels"] = [
            [f"user-{i}" for i in range(K)], ["a", "a", "b"], [1, "1", 2], [2**70, 1, 2], [[1], 2, 3],
            [None, 1, 2], [True, False, 1], [1.5, 2.5, 3.5], list(range(10_000)), "abc",
        ][int(rng.integers(10))]
    elif choice == 3 and fitted:  # per-task counts
        counts = fitted["seen_per_task"]
        if counts:
            counts[int(rng.integers(len(counts)))] = pick
    elif choice == 4 and fitted:  # totals
        fitted[["n_seen", "n_mistakes", "n_features_in"][int(rng.integers(3))]] = pick
    elif choice == 5 and fitted:  # label form
        fitted["label_form"] = [["a", "a"], [1, 1.0], [None, 1], "pm1", "bogus", [1e308, -1e308]][int(rng.integers(6))]
    else:  # a parameter
        name = sorted(h["params"])[int(rng.integers(len(h["params"])))]
        h["params"][name] = pick
    return h


def header_bytes(header: dict) -> bytes:
    head = json.dumps(header).encode()
    return MAGIC + struct.pack("<I", 1) + struct.pack("<Q", len(head)) + head


def main(seconds: float) -> None:
    X, y, tasks = stream()
    classes = sorted(set(REGISTRY.values()), key=lambda c: c.__name__)
    per_class = seconds / len(classes)
    rng = np.random.default_rng(0)
    tmp = Path(tempfile.mkdtemp())
    for cls in classes:
        model = cls(n_tasks=K, **settings(cls)).partial_fit(X[:40], y[:40], tasks=tasks[:40])
        path = tmp / cls.__name__
        omtl.save(model, path)
        head, state = state_of(path)
        header = json.loads(head[len(MAGIC) + 4 + 8 :])
        fields = size_fields(state)
        counts = {"file ok": 0, "file rejected": 0, "pickle ok": 0, "pickle rejected": 0}
        end = time.monotonic() + per_class
        trials = 0
        while time.monotonic() < end and trials < 5000:
            trials += 1
            bad = corrupt(state, fields, rng)
            # A model file whose checksum matches the corrupted state (in memory: the same
            # code as omtl.load after reading the file).
            if rng.integers(4) == 0:  # a structurally edited header with the valid state
                data = file_with(header_bytes(mutate_header(header, rng)), state)
            elif rng.integers(8) == 0:  # now and then a changed character of the JSON header
                fixed = len(MAGIC) + 4 + 8
                json_bytes = bytearray(head[fixed:])
                json_bytes[rng.integers(len(json_bytes))] = int(rng.integers(32, 127))
                data = file_with(head[: fixed - 8] + struct.pack("<Q", len(json_bytes)) + bytes(json_bytes), state)
            else:
                data = file_with(head, bad)
            try:
                loaded = loads(data)
            except ValueError:
                counts["file rejected"] += 1
            else:
                counts["file ok"] += 1
                exercise(loaded, X[40:], y[40:], tasks[40:])
            # The same state inside a pickle of the model.
            stand_in = cls.__new__(cls)
            stand_in.__dict__.update(model.__dict__)
            stand_in._core = _RawCore(bad)
            buf = io.BytesIO()
            pickle.dump(stand_in, buf)
            try:
                loaded = pickle.loads(buf.getvalue())
            except ValueError:
                counts["pickle rejected"] += 1
            else:
                counts["pickle ok"] += 1
                exercise(loaded, X[40:], y[40:], tasks[40:], settings_checked=False)
        assert counts["file rejected"] > 0 and counts["pickle rejected"] > 0, counts
        print(cls.__name__, trials, counts, flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]))
