"""A model file crosses between Python and Rust both ways with identical scores.

Rust's side is ``examples/model_file.rs`` (the crate's ``omtl::model_file``), run through
``cargo run --example model_file``: it scores rows with a file Python wrote, and learns and saves a
model Python then loads. MTLinear and MTRBP, with integer and string task ids.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import omtl
from omtl import _native

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    shutil.which("cargo") is None or not (ROOT / "Cargo.toml").exists(), reason="needs cargo and the crate's sources"
)


@pytest.fixture(scope="module")
def example():
    """The built example (compiled once per run)."""
    subprocess.run(["cargo", "build", "--quiet", "--example", "model_file"], cwd=ROOT, check=True)

    def run(*args) -> np.ndarray:
        out = subprocess.run(["cargo", "run", "--quiet", "--example", "model_file", "--", *map(str, args)],
                             cwd=ROOT, check=True, capture_output=True, text=True).stdout
        return np.array([float(v) for v in out.split()])

    return run


def stream(task_ids, n=90, d=4, seed=7):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    tasks = [task_ids[t % len(task_ids)] for t in range(n)]
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1, -1)
    return X, tasks, y


def write_rows(path, X, tasks, y):
    # repr() of a float reads back as the same double in Rust's parse::<f64>.
    path.write_text("".join(f"{t},{int(label)}," + ",".join(repr(float(v)) for v in row) + "\n"
                            for row, t, label in zip(X, tasks, y)))
    return path


def test_the_crate_knows_every_class_python_saves():
    registry = {name: cls._native_kind for name, cls in omtl.persistence.REGISTRY.items()}
    assert registry == dict(_native.MODEL_FILE_CLASSES)


@pytest.mark.parametrize("task_ids", [[0, 1, 2], ["ana", "bo", "cy"]], ids=["int-tasks", "str-tasks"])
@pytest.mark.parametrize("make", [
    lambda: omtl.MTLinear(n_tasks=3),
    lambda: omtl.MTRBP(n_tasks=3, budget=10, gamma=0.5, seed=3),
], ids=["MTLinear", "MTRBP"])
def test_a_file_python_writes_scores_the_same_in_rust(example, tmp_path, make, task_ids):
    X, tasks, y = stream(task_ids)
    model = make().partial_fit(X[:60], y[:60], tasks=tasks[:60])
    omtl.save(model, tmp_path / "py.omtl")
    rows = write_rows(tmp_path / "rows.csv", X, tasks, y)
    rust = example("score", tmp_path / "py.omtl", rows)
    assert np.array_equal(rust, model.decision_function(X, tasks=tasks))


@pytest.mark.parametrize("task_ids", [[0, 1, 2], ["ana", "bo", "cy"]], ids=["int-tasks", "str-tasks"])
@pytest.mark.parametrize("kind", ["mt_linear", "mt_rbp"])
def test_a_file_rust_writes_scores_the_same_in_python(example, tmp_path, kind, task_ids):
    X, tasks, y = stream(task_ids)
    rows = write_rows(tmp_path / "rows.csv", X, tasks, y)
    rust = example("learn", tmp_path / "rust.omtl", kind, rows)
    model = omtl.load(tmp_path / "rust.omtl")
    assert type(model) is {"mt_linear": omtl.MTLinear, "mt_rbp": omtl.MTRBP}[kind]
    assert model.n_seen_ == len(y) and model.n_mistakes_ > 0
    assert np.array_equal(model.decision_function(X, tasks=tasks), rust)
    # The loaded model continues learning, and a file it writes scores the same in Rust again.
    model.partial_fit(X[:10], y[:10], tasks=tasks[:10])
    omtl.save(model, tmp_path / "again.omtl")
    assert np.array_equal(example("score", tmp_path / "again.omtl", rows), model.decision_function(X, tasks=tasks))
