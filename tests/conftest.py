"""Shared fixtures: seeded streams and the location of the real data."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

# A shell without job control starts background commands (`pytest &`, `nohup`) with SIGINT
# ignored, which Python and every process it starts inherit: the Ctrl-C tests send SIGINT and
# need it delivered, as it is to a command run in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

DATA_DIR = Path(os.environ.get("OMTL_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


def random_stream(n=300, d=8, k=4, *, seed=0, sparse=False, density=0.4):
    """A seeded stream of related noisy linear tasks (dense, or CSR with explicit sparsity)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, d))
    if sparse:
        X[rng.random((n, d)) > density] = 0.0
        X = sp.csr_matrix(X)
    tasks = rng.integers(0, k, size=n)
    w0 = rng.standard_normal(d)
    W = w0 + 0.7 * rng.standard_normal((k, d))
    Xd = X.toarray() if sparse else X
    y = np.where(np.einsum("ij,ij->i", Xd, W[tasks]) + 0.1 * rng.standard_normal(n) >= 0, 1, -1)
    return X, y, tasks


def round_stream(n=240, d=7, k=4, *, seed=5, sparse=False, round_seed=3, scale=1.0):
    """``random_stream`` (rows times ``scale``) cut into protocol-P2 rounds: ``(X, y, tasks, rounds)``."""
    from omtl.datasets import Stream

    X, y, tasks = random_stream(n=n, d=d, k=k, seed=seed, sparse=sparse)
    s = Stream(X=X * scale, y=y, tasks=tasks, n_tasks=k, name="test").as_rounds(round_seed)
    return s.X, s.y, s.tasks, s.rounds


def run_rounds(model, X, y, tasks, rounds, *, chunk_rounds=7):
    """learn_rounds over the stream in chunks of whole rounds; returns the predictions."""
    from parity import round_chunks

    parts = round_chunks(rounds, chunk_rounds)
    return np.concatenate([model.learn_rounds(X[c], y[c], tasks=tasks[c], rounds=rounds[c]) for c in parts])


def pickled_midway(model, X, y, tasks, rounds, half):
    """Learns the rounds of rows ``:half``, pickles the model, then has both learn the rest: their
    predictions must be identical. Returns ``(model, restored)`` for further checks."""
    import pickle

    model.learn_rounds(X[:half], y[:half], tasks=tasks[:half], rounds=rounds[:half])
    restored = pickle.loads(pickle.dumps(model))
    rest = slice(half, None)
    p_model = model.learn_rounds(X[rest], y[rest], tasks=tasks[rest], rounds=rounds[rest])
    p_restored = restored.learn_rounds(X[rest], y[rest], tasks=tasks[rest], rounds=rounds[rest])
    np.testing.assert_array_equal(p_model, p_restored)
    return model, restored


def random_graph(k, *, seed=0, weighted=False):
    import omtl

    rng = np.random.default_rng(seed)
    edges = [(i, j) for i in range(k) for j in range(i + 1, k) if rng.random() < 0.4]
    weights = rng.uniform(0.2, 3.0, size=len(edges)) if weighted else None
    return omtl.TaskGraph.from_edges(k, edges, weights)


@pytest.fixture
def data_dir():
    if not DATA_DIR.is_dir():
        pytest.skip(f"real data not found at {DATA_DIR} (set OMTL_DATA)")
    return DATA_DIR
