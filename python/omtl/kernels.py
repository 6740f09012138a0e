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
    """``K'(a_r, b_c)`` for every row pair; dense or CSR rows (any mix). ``B=None`` means ``B = A``."""
    A = check_X(A)
    B = A if B is None else check_X(B, n_features=A.shape[1])
    scales = (isinstance(gamma, str) and gamma == "scale") or (gamma is None and kernel == "rbf")
    scaled = scale_gamma(A) if scales and A.shape[0] else None  # of A, as a first batch would be
    spec = KernelSpec.resolve(kernel, gamma, degree, coef0, normalize, A.shape[1], scaled=scaled)
    return spec.native().matrix(_rows(A), _rows(B))


def multitask_kernel_matrix(A, tasks_a, B=None, tasks_b=None, *, graph, n_tasks, **kernel_params) -> np.ndarray:
    """``T[i_r, j_c] K'(a_r, b_c)`` with the task kernel of ``graph``."""
    T = resolve_graph(graph, n_tasks).task_kernel
    A = check_X(A)
    ta = check_tasks(tasks_a, A.shape[0], n_tasks)
    if B is None:
        B, tb = A, ta
    else:
        B = check_X(B, n_features=A.shape[1])
        tb = check_tasks(tasks_b, B.shape[0], n_tasks)
    return T[np.ix_(ta, tb)] * kernel_matrix(A, B, **kernel_params)
