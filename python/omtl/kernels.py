"""Kernel matrices from the native engine: the base kernel K' and the multitask kernel
``K([x,i],[x',j]) = T_ij K'(x,x')`` (ALGORITHMS.md §2.2, §2.4)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._kernel_params import KernelSpec, scale_gamma
from ._validation import check_tasks, check_X, csr_parts
from .graph import resolve_graph


def _rows(X):
    return csr_parts(X) if sp.issparse(X) else X


def kernel_matrix(A, B=None, *, kernel="rbf", gamma=None, degree=2, coef0=1.0, normalize=False) -> np.ndarray:
    """The base kernel ``K'(a_r, b_c)`` for every row pair (ALGORITHMS.md §2.2).

    Parameters
    ----------
    A : array-like or scipy.sparse matrix of shape (n_a, d)
        Dense or sparse rows (any mix with ``B``).
    B : array-like or scipy.sparse matrix of shape (n_b, d), optional
        Default ``A``.
    kernel : {"linear", "poly", "rbf"}
        As in scikit-learn's SVC.
    gamma : float, "scale" or None
        None: "scale" for rbf, 1 for poly. "scale" is 1 / (d * Var(A)), A standing for the first
        batch a learner would see.
    degree : int
        Polynomial degree, in [1, 32].
    coef0 : float
        Polynomial offset, >= 0.
    normalize : bool
        Cosine normalisation ``K'(a, b) / sqrt(K'(a, a) K'(b, b))``.

    Returns
    -------
    ndarray of shape (n_a, n_b)
    """
    A = check_X(A)
    B = A if B is None else check_X(B, n_features=A.shape[1])
    scales = (isinstance(gamma, str) and gamma == "scale") or (gamma is None and kernel == "rbf")
    scaled = scale_gamma(A) if scales and A.shape[0] else None  # of A, as a first batch would be
    spec = KernelSpec.resolve(kernel, gamma, degree, coef0, normalize, A.shape[1], scaled=scaled)
    return spec.native().matrix(_rows(A), _rows(B))


def multitask_kernel_matrix(A, tasks_a, B=None, tasks_b=None, *, graph, n_tasks, **kernel_params) -> np.ndarray:
    """The multitask kernel ``T[i_r, j_c] K'(a_r, b_c)`` with the task kernel of ``graph`` (§2.4).

    Parameters
    ----------
    A : array-like or scipy.sparse matrix of shape (n_a, d)
        Rows.
    tasks_a : array-like of int, shape (n_a,), or int
        The task of each row of ``A``.
    B : array-like or scipy.sparse matrix of shape (n_b, d), optional
        Default ``A`` (with ``tasks_a``).
    tasks_b : array-like of int, shape (n_b,), or int, optional
        The task of each row of ``B``.
    graph : {"complete", "disconnected"} or TaskGraph
        The task relation.
    n_tasks : int
        Number of tasks.
    **kernel_params
        ``kernel``, ``gamma``, ``degree``, ``coef0``, ``normalize`` as in ``kernel_matrix``.

    Returns
    -------
    ndarray of shape (n_a, n_b)
    """
    T = resolve_graph(graph, n_tasks).task_kernel
    A = check_X(A)
    ta = check_tasks(tasks_a, A.shape[0], n_tasks)
    if B is None:
        B, tb = A, ta
    else:
        B = check_X(B, n_features=A.shape[1])
        tb = check_tasks(tasks_b, B.shape[0], n_tasks)
    return T[np.ix_(ta, tb)] * kernel_matrix(A, B, **kernel_params)
