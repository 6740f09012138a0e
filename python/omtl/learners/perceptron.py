"""Unbounded kernel Perceptrons (ALGORITHMS.md §3): the battery and the multitask Perceptron."""

from __future__ import annotations

from .._base import OnlineClassifier
from ._mixins import KernelParamsMixin


class MTPerceptron(KernelParamsMixin, OnlineClassifier):
    """Multitask kernel Perceptron (Cavallanti, Cesa-Bianchi & Gentile, JMLR 2010).

    Scores ``f_i(x) = sum_j beta_j T[i_j, i] K'(x_j, x)`` with the task kernel T of ``graph``
    and stores every example with ``y f <= 0``. Unbounded: memory grows with the mistakes (with
    the linear kernel it is kept in primal form, O(k d) floats at most).

    Parameters
    ----------
    {n_tasks_open_graph}
    graph : {"complete", "disconnected"} or TaskGraph, default="complete"
    kernel : {"linear", "poly", "rbf"}, default="linear"
    gamma : float, "scale" or None
        rbf: ``exp(-gamma ||x - x'||^2)``, default "scale" = 1/(n_features Var X) of the first batch; poly: ``(gamma <x,x'> + coef0)^degree``, default 1.
    degree : int, default=2
    coef0 : float, default=1.0
    normalize : bool, default=False
        Cosine-normalise the base kernel (``K(x,x) = 1``).
    {n_features}

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import MTPerceptron
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1]])
    >>> MTPerceptron(n_tasks=2).learn(X, [1, -1, 1], tasks=[0, 1, 1]).tolist()
    [1, 1, 1]
    """

    _grows = True

    def __init__(self, *, n_tasks=None, graph="complete", kernel="linear", gamma=None, degree=2, coef0=1.0, normalize=False, n_features=2**18):
        self._store_params(locals())

    _native_kind = "mt_perceptron"
    _shard_state = "component"

    @property
    def _stores_examples(self) -> bool:
        # In dual form (a non-linear kernel) the active set is the stored examples
        # (omtl.evaluate.stores_examples).
        return self.kernel != "linear"

    def _native_params(self, n_features, sparse):
        return {}


class KernelPerceptron(MTPerceptron):
    """The Perceptron battery: one independent kernel Perceptron per task (§3.2).

    Same as ``MTPerceptron(graph="disconnected")``; its active-set size after one pass sets the
    budgets of the papers' experiments (§7.2).

    Parameters
    ----------
    n_tasks, kernel, gamma, degree, coef0, normalize
        As ``MTPerceptron`` (without ``graph``: the tasks share nothing).
    """

    def __init__(self, *, n_tasks=None, kernel="linear", gamma=None, degree=2, coef0=1.0, normalize=False, n_features=2**18):
        super().__init__(n_tasks=n_tasks, graph="disconnected", kernel=kernel, gamma=gamma, degree=degree, coef0=coef0, normalize=normalize,
                         n_features=n_features)
