"""The built-in default data: a seeded stream of related binary tasks."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._stream import Stream


def make_multitask_stream(
    n_samples: int = 6000,
    n_tasks: int = 40,
    n_features: int = 20,
    *,
    relatedness: float = 0.8,
    n_outlier_tasks: int = 2,
    label_noise: float = 0.02,
    sparse: bool = False,
    density: float = 0.05,
    seed: int = 0,
) -> Stream:
    """A stream of ``n_tasks`` related linear-threshold tasks, rows interleaved at random.

    Task i labels x by ``sign(<w_i, x>)`` with ``w_i = relatedness * w_0 + (1 - relatedness) * d_i``
    (``w_0`` shared, ``d_i`` task-specific, both standard normal, normalised); the last
    ``n_outlier_tasks`` tasks use ``-w_0`` instead of ``w_0``, so they disagree with the rest. A
    fraction ``label_noise`` of labels is flipped. Dense rows are standard normal; sparse rows
    (CSR) have about ``density * n_features`` nonnegative entries and unit norm, like text.
    Seeded with NumPy's PCG64, so the same arguments give the same stream everywhere.

    Parameters
    ----------
    n_samples : int
        Number of rows.
    n_tasks : int
        Number of tasks; each row's task is drawn uniformly.
    n_features : int
        Number of features d.
    relatedness : float
        In [0, 1]: the weight of the shared direction in every task's weight vector.
    n_outlier_tasks : int
        In [0, n_tasks]: tasks (the last ones) whose shared direction is flipped.
    label_noise : float
        In [0, 0.5): the fraction of labels flipped.
    sparse : bool
        CSR rows with about ``density * n_features`` nonnegative entries and unit norm.
    density : float
        Fraction of nonzero entries of a sparse row.
    seed : int
        Seed of NumPy's PCG64 generator.

    Returns
    -------
    Stream
        ``y`` in {-1, +1}, task ids in [0, n_tasks), named ``"synthetic (dense|sparse, seed <seed>)"``.
    """
    if not 0.0 <= relatedness <= 1.0:
        raise ValueError(f"relatedness must lie in [0, 1], got {relatedness}")
    if not 0 <= n_outlier_tasks <= n_tasks:
        raise ValueError(f"n_outlier_tasks must lie in [0, n_tasks], got {n_outlier_tasks}")
    if not 0.0 <= label_noise < 0.5:
        raise ValueError(f"label_noise must lie in [0, 0.5), got {label_noise}")
    rng = np.random.default_rng(seed)
    unit = lambda v: v / np.linalg.norm(v)  # noqa: E731
    w0 = unit(rng.standard_normal(n_features))
    W = np.empty((n_tasks, n_features))
    for i in range(n_tasks):
        shared = -w0 if i >= n_tasks - n_outlier_tasks else w0
        W[i] = unit(relatedness * shared + (1.0 - relatedness) * unit(rng.standard_normal(n_features)))
    tasks = rng.integers(0, n_tasks, size=n_samples).astype(np.int64)
    if sparse:
        nnz_per_row = max(1, int(round(density * n_features)))
        cols = np.concatenate([rng.choice(n_features, nnz_per_row, replace=False) for _ in range(n_samples)])
        vals = np.abs(rng.standard_normal(n_samples * nnz_per_row))
        indptr = np.arange(0, n_samples * nnz_per_row + 1, nnz_per_row)
        X = sp.csr_matrix((vals, cols, indptr), shape=(n_samples, n_features))
        X.sort_indices()
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
        X = sp.csr_matrix(sp.diags(1.0 / norms) @ X)
        # Centre the scores: nonnegative rows would otherwise make one class dominate.
        margins = np.asarray((X @ W.T)[np.arange(n_samples), tasks]).ravel()
        margins -= np.median(margins)
    else:
        X = rng.standard_normal((n_samples, n_features))
        margins = np.einsum("ij,ij->i", X, W[tasks])
    y = np.where(margins >= 0, 1, -1).astype(np.int8)
    flip = rng.random(n_samples) < label_noise
    y[flip] = -y[flip]
    kind = "sparse" if sparse else "dense"
    return Stream(X=X, y=y, tasks=tasks, n_tasks=n_tasks, name=f"synthetic ({kind}, seed {seed})")
