"""ROMCO: online multitask classification with correlative (low-rank) and personalized
(column-sparse) structure (ALGORITHMS.md §5)."""

from __future__ import annotations

import numpy as np

from .._base import OnlineClassifier, diagnostic
from .._constraints import Name, Number

ROMCO_CONSTRAINTS = {"eta1": Number(), "eta2": Number(), "lambda1": Number(), "lambda2": Number(), "update": Name()}


class ROMCO(OnlineClassifier):
    """ROMCO (Yang, Li, Zhao, Li & Das Gollapalli, SDM 2016), a linear multitask learner.

    Task i scores ``p = (u_i + v_i) · x``. ``U`` (n_features x n_tasks) is the *correlative*
    part, kept low-rank by the trace norm; ``V`` is the *personalized* part, kept column-sparse by
    a column group lasso. When a round triggers an update, every present task with positive hinge
    loss takes the gradient steps ``u_i += eta1 y x`` and ``v_i += eta2 y x``; then
    ``U ← SVT_{eta1 lambda1}(U)`` (singular value thresholding) and every column
    ``v_i ← (1 - eta2 lambda2 / ||v_i||)_+ v_i``. Rounds without a trigger change nothing.

    Two protocols: ``learn``/``partial_fit`` treat each row as its own round (protocol P1,
    "singleton rounds"); ``learn_rounds`` takes rounds of several tasks, all predicted with the
    same model, followed by one joint update (protocol P2, the paper's). With singleton rounds the
    regularisation acts after every example, about ``n_tasks`` times more often than in P2, so
    tune ``lambda1``/``lambda2`` per protocol (§5.6).

    Parameters
    ----------
    {n_tasks_fixed}
    eta1 : float, default=0.1
        Step size for U.
    eta2 : float, default=0.1
        Step size for V. The paper also names a parameter "tau" that it never defines; we read it
        as ``eta2`` (ALGORITHMS.md §8.2, A-R1).
    lambda1 : float, default=1e-4
        Trace-norm weight (the SVT threshold is ``eta1 * lambda1``).
    lambda2 : float, default=1e-4
        Column group-lasso weight (the shrinkage is ``eta2 * lambda2``).
    update : {"loss", "mistake"}, default="loss"
        When to update (A-R2): ``"loss"`` (Alg. 1 of the paper) when some present task has hinge
        loss ``1 - y p > 0``; ``"mistake"`` (the paper's text) when some present task has
        ``y p <= 0``. Either way every present task with positive loss contributes a gradient.
    {n_features}

    Attributes
    ----------
    rank_ : int
        Rank of U after the last update.
    n_personalized_ : int
        Number of tasks whose personalized column ``v_i`` is non-zero.
    U_, V_ : ndarray of shape (n_features, n_tasks)
        The two parts of the model (after the first batch).

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import ROMCO
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.5], [0.5, 1.0]])
    >>> model = ROMCO(n_tasks=2)
    >>> model.learn_rounds(X, [1, -1, 1, -1], tasks=[0, 1, 0, 1], rounds=[0, 0, 1, 1]).tolist()
    [1, 1, 1, -1]
    >>> model.rank_, model.n_personalized_, model.U_.shape
    (2, 2, (2, 2))
    """

    def __init__(self, *, n_tasks=None, eta1=0.1, eta2=0.1, lambda1=1e-4, lambda2=1e-4, update="loss", n_features=2**18):
        self._store_params(locals())

    _native_kind = "romco"
    _shard_state = "shared"  # the low-rank U
    _parameter_constraints = ROMCO_CONSTRAINTS

    def _native_params(self, n_features, sparse):
        params = self._validated_params()
        # The SVT implementation (§5.5): "auto" unless a test or benchmark sets `_svt_route`.
        return {**params, "svt_route": getattr(self, "_svt_route", "auto")}

    rank_ = diagnostic("rank", 'Rank of U after the last update (0 before the first one).')

    n_personalized_ = diagnostic("n_personalized", 'Number of non-zero columns of V.')

    def _factors(self):
        if not self._is_fitted():
            raise AttributeError("U_ and V_ are set on the first non-empty batch")
        return self._core.factors()

    @property
    def U_(self) -> np.ndarray:
        """The correlative part U, shape (n_features, n_tasks) (a copy)."""
        return np.array(self._factors()[0])

    @property
    def V_(self) -> np.ndarray:
        """The personalized part V, shape (n_features, n_tasks) (a copy)."""
        return np.array(self._factors()[1])
