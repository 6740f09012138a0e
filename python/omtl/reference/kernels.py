"""Base kernels in plain NumPy (ALGORITHMS.md §2.2), written for clarity."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _dense_rows(X) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)


def kernel_matrix(spec, A, B) -> np.ndarray:
    """``K'(a_r, b_c)`` for all rows of A and B; ``spec`` has name, gamma, degree, coef0, normalize."""
    A, B = _dense_rows(A), _dense_rows(B)
    dots = A @ B.T
    sq_a = np.einsum("ij,ij->i", A, A)
    sq_b = np.einsum("ij,ij->i", B, B)
    K = _from_dots(spec, dots, sq_a[:, None], sq_b[None, :])
    if spec.normalize and spec.name != "rbf":
        self_a = _from_dots(spec, sq_a, sq_a, sq_a)
        self_b = _from_dots(spec, sq_b, sq_b, sq_b)
        denom = np.sqrt(self_a[:, None] * self_b[None, :])
        K = np.divide(K, denom, out=np.zeros_like(K), where=denom > 0)
    return K


def _from_dots(spec, dots, sq_a, sq_b):
    if spec.name == "linear":
        return dots
    if spec.name == "poly":
        return (spec.gamma * dots + spec.coef0) ** spec.degree
    if spec.name == "rbf":
        return np.exp(-spec.gamma * np.maximum(sq_a + sq_b - 2.0 * dots, 0.0))
    raise ValueError(f"unknown kernel {spec.name!r}")
