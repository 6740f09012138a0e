"""Model files (omtl.save / omtl.load) and the checked restore of native states (pickles too)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import random_stream
from learner_table import LEARNERS

import omtl
import omtl.reference as ref
from omtl.persistence import MAGIC, REGISTRY

K = 4
NATIVE = [pytest.param(e[1], e[3], id=e[0]) for e in LEARNERS]


def split_file(data: bytes):
    """(header dict, state bytes) of a model file."""
    fixed = len(MAGIC) + 4 + 8
    (head_len,) = struct.unpack_from("<Q", data, len(MAGIC) + 4)
    return json.loads(data[fixed : fixed + head_len]), data[fixed + head_len + 8 : -32]


def make_file(header: dict, state: bytes, version: int = 1) -> bytes:
    head = json.dumps(header).encode()
    body = MAGIC + struct.pack("<I", version) + struct.pack("<Q", len(head)) + head + struct.pack("<Q", len(state)) + state
    return body + hashlib.sha256(body).digest()


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize(("cls", "params"), NATIVE)
def test_a_loaded_model_continues_exactly(cls, params, sparse, tmp_path):
    X, y, tasks = random_stream(n=240, d=6, k=K, seed=1, sparse=sparse)
    whole = cls(n_tasks=K, **params)
    expected = whole.learn(X, y, tasks=tasks)
    half = cls(n_tasks=K, **params).partial_fit(X[:120], y[:120], tasks=tasks[:120])
    omtl.save(half, tmp_path / "m.omtl")
    loaded = omtl.load(tmp_path / "m.omtl")
    assert type(loaded) is cls and loaded.get_params() == half.get_params()
    assert (loaded.n_seen_, loaded.n_mistakes_, loaded.n_updates_, loaded.n_active_) == (
        half.n_seen_, half.n_mistakes_, half.n_updates_, half.n_active_)
    assert np.array_equal(loaded.n_seen_per_task_, half.n_seen_per_task_)
    rest = loaded.learn(X[120:], y[120:], tasks=tasks[120:])
    assert np.array_equal(rest, expected[120:])
    assert np.array_equal(loaded.decision_function(X, tasks=tasks), whole.decision_function(X, tasks=tasks))
    assert loaded.n_seen_ == whole.n_seen_ and loaded.n_mistakes_ == whole.n_mistakes_


def test_label_form_task_graphs_and_unfitted_models_round_trip(tmp_path):
    X, y, tasks = random_stream(n=80, d=4, k=3, seed=2)
    graphs = [
        omtl.TaskGraph.from_edges(3, [(0, 1), (1, 2)], [0.5, 2.0]),
        omtl.TaskGraph.from_task_kernel(np.array([[1.0, 0.2, 0.0], [0.2, 1.0, 0.0], [0.0, 0.0, 1.0]])),
        omtl.TaskGraph.from_interaction(np.array([[2.0, -0.5, 0.0], [-0.5, 2.0, 0.0], [0.0, 0.0, 1.0]])),
    ]
    with pytest.warns(UserWarning):
        graphs.append(omtl.TaskGraph.laplacian_pinv(3, [(0, 1), (1, 2)]))
    for graph in graphs:
        model = omtl.MTBPRJ(n_tasks=3, budget=8, graph=graph, gamma=0.5).partial_fit(X, y > 0, tasks=tasks)
        omtl.save(model, tmp_path / "g.omtl")
        loaded = omtl.load(tmp_path / "g.omtl")
        assert loaded.graph == graph
        assert loaded.predict(X, tasks=tasks).dtype == bool  # the label form survives
        assert np.array_equal(loaded.decision_function(X, tasks=tasks), model.decision_function(X, tasks=tasks))
    unfitted = omtl.ROMCO(n_tasks=3, lambda1=0.2)
    omtl.save(unfitted, tmp_path / "u.omtl")
    loaded = omtl.load(tmp_path / "u.omtl")
    assert not loaded._is_fitted() and loaded.get_params() == unfitted.get_params()
    # dumps/loads: the same bytes without a file.
    assert omtl.persistence.dumps(unfitted) == (tmp_path / "u.omtl").read_bytes()
    assert omtl.persistence.loads((tmp_path / "g.omtl").read_bytes()).graph == graphs[-1]


def test_save_refuses_what_it_cannot_write(tmp_path):
    X, y, tasks = random_stream(n=40, d=4, k=2, seed=0)
    with pytest.raises(TypeError, match="native learners"):
        omtl.save(ref.MTPerceptron(n_tasks=2).partial_fit(X, y, tasks=tasks), tmp_path / "r.omtl")
    with pytest.raises(TypeError, match="native learners"):
        omtl.save(object(), tmp_path / "o.omtl")
    # Hyper-parameters changed after fitting no longer describe the engine.
    model = omtl.MTRBP(n_tasks=2, budget=5).partial_fit(X, y, tasks=tasks)
    model.set_params(budget=6)
    with pytest.raises(ValueError, match="cannot save"):
        omtl.save(model, tmp_path / "b.omtl")
    assert not (tmp_path / "b.omtl").exists()


@pytest.fixture
def saved(tmp_path):
    X, y, tasks = random_stream(n=100, d=5, k=3, seed=3)
    model = omtl.MTBPRJ(n_tasks=3, budget=6, gamma=0.5).partial_fit(X, y, tasks=tasks)
    path = tmp_path / "m.omtl"
    omtl.save(model, path)
    return path, path.read_bytes()


def expect_invalid(path, data, match=None):
    Path(path).write_bytes(data)
    with pytest.raises(ValueError, match=match):
        omtl.load(path)


def test_framing_is_checked(saved):
    path, data = saved
    expect_invalid(path, b"", "magic")
    expect_invalid(path, b"PK\x03\x04" + data[4:], "magic")
    expect_invalid(path, data[:-1], "checksum")
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 4
    expect_invalid(path, bytes(flipped), "checksum")
    header, state = split_file(data)
    expect_invalid(path, make_file(header, state, version=3), "format version 3")
    # Lengths that disagree with the file, checksum made to match.
    body = bytearray(data[:-32])
    body[len(MAGIC) + 4 : len(MAGIC) + 12] = struct.pack("<Q", 2**40)
    expect_invalid(path, bytes(body) + hashlib.sha256(bytes(body)).digest(), "header length")


def test_header_is_checked(saved):
    path, data = saved
    header, state = split_file(data)

    def edited(**changes):
        return make_file({**header, **changes}, state)

    expect_invalid(path, edited(**{"class": "os.system"}), "not an omtl learner")
    expect_invalid(path, edited(**{"class": "TaskGraph"}), "not an omtl learner")
    expect_invalid(path, edited(state_version=1), "native state version")
    expect_invalid(path, edited(params={**header["params"], "extra": 1}), "parameters do not match")
    expect_invalid(path, edited(params={**header["params"], "budget": -3}), "invalid parameters")
    expect_invalid(path, edited(params={**header["params"], "budget": 7}), "not the one the parameters")
    expect_invalid(path, edited(params={**header["params"], "gamma": 0.25}), "not the one the parameters")
    expect_invalid(path, edited(params={**header["params"], "degree": 10**30}), "invalid parameters")
    expect_invalid(path, edited(params={**header["params"], "kernel": ["rbf"]}), "JSON type list")
    expect_invalid(path, edited(params={**header["params"], "graph": {"__omtl_task_graph__": {"kind": "evil"}}}),
                   "malformed task graph")
    fitted = header["fitted"]
    expect_invalid(path, edited(fitted={**fitted, "n_seen": fitted["n_seen"] + 1}), "counts disagree")
    expect_invalid(path, edited(fitted={**fitted, "n_mistakes": -1}), "n_mistakes")
    expect_invalid(path, edited(fitted={**fitted, "n_features_in": 6}), "features")
    expect_invalid(path, edited(fitted={**fitted, "seen_per_task": [1, 2]}), "one count per task")
    expect_invalid(path, edited(fitted={**fitted, "label_form": "strings"}), "label form")
    expect_invalid(path, edited(fitted=None), "unfitted model with a native state")
    expect_invalid(path, make_file({**header, "class": "MTRBP", "params": omtl.MTRBP(n_tasks=3, budget=6).get_params()},
                                   state), "not the one the parameters")


def test_native_state_is_checked(saved, tmp_path):
    path, data = saved
    header, state = split_file(data)
    expect_invalid(path, make_file(header, state[:-3]), "model state")
    expect_invalid(path, make_file(header, state + b"\0"), "model state")
    # The state of another learner under this header.
    X, y, tasks = random_stream(n=50, d=5, k=3, seed=3)
    other = omtl.MTBPRJ2(n_tasks=3, budget=6, gamma=0.5).partial_fit(X, y, tasks=tasks)
    omtl.save(other, tmp_path / "o.omtl")
    expect_invalid(path, make_file(header, split_file((tmp_path / "o.omtl").read_bytes())[1]))
    # An old layout version gets a clear message.
    expect_invalid(path, make_file(header, struct.pack("<I", 1) + state[4:]), "layout version 1")


def test_tampered_pickles_raise_value_error():
    X, y, tasks = random_stream(n=100, d=5, k=3, seed=4)
    model = omtl.MTBPRJ2(n_tasks=3, budget=6, gamma=0.5).partial_fit(X, y, tasks=tasks)
    state = bytes(model._core._learner.to_bytes())
    blob = pickle.dumps(model)
    assert blob.count(state) == 1
    # The budget field of the projection parameters (follows the kernel, task kernel and n_features):
    # 6 -> 2**40, same length, so the pickle itself stays well formed.
    at = state.index(struct.pack("<Q", 6))
    for value in (2**40, 1, 0):
        tampered = state[:at] + struct.pack("<Q", value) + state[at + 8 :]
        with pytest.raises(ValueError, match="model state"):
            pickle.loads(blob.replace(state, tampered))
    # Python-side bookkeeping that disagrees with the engine.
    model.n_features_in_ = 4
    with pytest.raises(ValueError, match="features"):
        pickle.loads(pickle.dumps(model))


def test_registry_holds_every_native_learner_and_nothing_else():
    assert set(REGISTRY.values()) == {getattr(omtl, n) for n in omtl.learners.__all__}
    assert all(name == cls.__name__ for name, cls in REGISTRY.items())


def test_fuzzed_files_and_pickles_never_crash():
    """Thousands of corrupted states per run, in a subprocess: an abort fails the test."""
    script = Path(__file__).with_name("_model_file_fuzz.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(omtl.__file__).parents[1]),
                                                                     os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, str(script), "16"], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-4000:]}"
    lines = run.stdout.strip().splitlines()
    assert len(lines) == len(set(REGISTRY.values())), run.stdout


def test_demo_saves_every_trained_model(tmp_path, capsys):
    from omtl.cli import demo_learners, main, model_file_name

    assert main(["demo", "--n-samples", "300", "--save", str(tmp_path / "models")]) == 0
    assert "trained models written to" in capsys.readouterr().out
    stream = omtl.datasets.make_multitask_stream(n_samples=300, seed=0)
    for label, _ in demo_learners(stream.n_tasks):
        model = omtl.load(tmp_path / "models" / f"{model_file_name(label)}.omtl")
        assert model.n_seen_ == 300
        assert model.predict(stream.X[:5], tasks=stream.tasks[:5]).shape == (5,)


def test_models_past_their_sparse_index_threshold_save_and_load(tmp_path):
    # From 256 stored sparse rows the engine keeps an inverted index (not serialised).
    X, y, tasks = random_stream(n=2000, d=30, k=3, seed=5, sparse=True, density=0.2)
    for model in (omtl.KernelPerceptron(n_tasks=3, kernel="rbf", gamma=0.2), omtl.MTRBP(n_tasks=3, budget=300, gamma=0.2)):
        model.partial_fit(X[:1500], y[:1500], tasks=tasks[:1500])
        assert model.n_active_ > 256
        omtl.save(model, tmp_path / "s.omtl")
        loaded = omtl.load(tmp_path / "s.omtl")
        assert np.array_equal(loaded.learn(X[1500:], y[1500:], tasks=tasks[1500:]),
                              model.learn(X[1500:], y[1500:], tasks=tasks[1500:]))
