"""Budget Projectrons (ALGORITHMS.md §4.3–§4.5): MTBPRJ and MTBPRJ-2 of Cavallanti & Cesa-Bianchi."""

from __future__ import annotations

from .._base import OnlineClassifier, diagnostic
from .._constraints import Boolean, Name, Number
from ._mixins import KernelParamsMixin
from .budget import BUDGET

# Both Projectrons' shared hyper-parameters.
PROJECTRON_CONSTRAINTS = {
    "budget": BUDGET,
    "eta": Number(),
    "threshold_on": Name(),
}


class _ProjectronAttributes:
    _grows = True  # DECISIONS.md, open-ended task sets
    _stores_examples = True  # at most `budget` (omtl.evaluate.stores_examples)

    """Fitted attributes shared by both Projectrons (read from the core's diagnostics)."""

    n_projections_ = diagnostic("n_projections", 'Update-mistakes absorbed by projection (the set did not change).')

    n_evictions_ = diagnostic("n_evictions", 'Budget steps: an element was folded into the others and removed.')

    n_rebuilds_ = diagnostic("n_rebuilds", 'Recomputes of the inverse Gram matrix from scratch (§4.3, safeguards N3–N5).')

    jitter_ = diagnostic("jitter", 'Total jitter the recomputes had to add to the Gram matrix diagonal (0 when well conditioned).', 0.0, float)

    def _force_rebuild(self) -> None:
        """Recomputes the inverse Gram matrix now (INV-Q2; for tests)."""
        if self._is_fitted():
            self._core.force_rebuild()


class MTBPRJ(_ProjectronAttributes, KernelParamsMixin, OnlineClassifier):
    """Multitask budget Projectron, MTBPRJ (Cavallanti & Cesa-Bianchi, Alg. 1).

    A multitask kernel Perceptron ``f_i(x) = sum_j beta_j T[i_j, i] K'(x_j, x)`` that keeps at
    most ``budget`` examples. On an update-mistake (``y f <= 0``) it projects
    ``K([x, i], .)`` onto the span of the active set in the multitask RKHS (Orabona, Keshet &
    Caputo, JMLR 2009):

    - if the residual norm is at most ``eta``, the projection is added to the weights and the set
      is unchanged (also when the set is full: no eviction);
    - otherwise ``[x, i]`` is added with weight ``y``; if the set was full, the old element whose
      removal loses least, ``|beta_j| / sqrt((H^-1)_jj)``, is folded into the others by projection
      and removed (ties go to the oldest; the new example is never the one removed).

    ``MTPRJ`` is another name for this class.

    Parameters
    ----------
    {n_tasks_open_graph}
    budget : int >= 1, default=1000
        Largest number of stored examples (``n_active_ <= budget`` after every example); the
        projection keeps two ``budget x budget`` matrices, 16 MB at the default
        (DECISIONS.md, "Default budget").
    eta : float, default=0.01
        Projection threshold (the paper's value).
    {graph_kernel}
    threshold_on : {"norm", "squared"}, default="norm"
        Compare ``eta`` with the residual norm ``delta`` (the papers) or with ``delta**2``
        (Orabona's MATLAB Projectron++).
    {n_features}

    Attributes
    ----------
    n_projections_, n_evictions_, n_rebuilds_, jitter_

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import MTBPRJ
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(size=(200, 3))
    >>> y = np.where(X[:, 0] > X[:, 1], 1, -1)
    >>> model = MTBPRJ(n_tasks=2, budget=10, gamma=2.0).partial_fit(X, y, tasks=rng.integers(0, 2, 200))
    >>> model.n_active_ <= 10, model.n_evictions_ > 0
    (True, True)
    """

    def __init__(self, *, n_tasks=None, budget=1000, eta=0.01, graph="complete", kernel="rbf", gamma=None, degree=2,
        coef0=1.0, normalize=False, threshold_on="norm", n_features=2**18):
        self._store_params(locals())

    _native_kind = "mtbprj"
    _shard_state = "component"  # the budget becomes a per-shard budget
    _parameter_constraints = PROJECTRON_CONSTRAINTS


class MTBPRJ2(_ProjectronAttributes, KernelParamsMixin, OnlineClassifier):
    """MTBPRJ-2: budget Projectron in the base-kernel space with per-task weights (Alg. 2).

    Keeps a shared dictionary of at most ``budget`` instances and one weight per (task,
    instance): ``f_i(x) = sum_j W[i, j] K'(x_j, x)``. Projections ignore the task markers, so an
    instance seen in one task can absorb mistakes of every task:

    - residual norm at most ``eta``: ``W[l, :] += y T[l, i] alpha`` for every task ``l`` of the
      component of ``i``;
    - otherwise ``x`` joins the dictionary with ``W[:, new] = y T[:, i]``; when full, the old
      instance minimising ``||W[:, j]|| / sqrt((H'^-1)_jj)`` is folded into the others
      (``W[l, j] += gamma_j W[l, r]``) and removed.

    Weights live in one ``|c| x budget`` block per connected component ``c`` of the graph,
    allocated when a task of ``c`` first errs (so the disconnected graph costs ``budget`` weights
    per used task and the complete graph ``n_tasks * budget``). ``MTPRJ2`` is another name for
    this class.

    Parameters
    ----------
    n_tasks, budget, eta, graph, kernel, gamma, degree, coef0, normalize, threshold_on
        As ``MTBPRJ``, except that ``n_tasks=None`` (the default, open-ended tasks) is only
        available with ``graph="disconnected"``; on another graph the first fit refuses it with
        the reason (a connected component's weight rows cannot take a new member: DECISIONS.md).
    alg2_literal_line14 : bool, default=False
        Ablation switch (ALGORITHMS.md A-C7): use the update as printed in the paper,
        ``W[l, j] += gamma_j W[l, r] T[l, i_j]``, whose extra factor double-counts the task
        coupling. The default drops it.
    {n_features}

    Attributes
    ----------
    n_projections_, n_evictions_, n_rebuilds_, jitter_

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import MTBPRJ2
    >>> X = np.random.default_rng(0).uniform(size=(200, 3))
    >>> model = MTBPRJ2(n_tasks=2, budget=10, gamma=2.0)
    >>> model.partial_fit(X, np.where(X[:, 0] > X[:, 1], 1, -1), tasks=np.arange(200) % 2).n_active_ <= 10
    True
    """

    def __init__(self, *, n_tasks=None, budget=1000, eta=0.01, graph="complete", kernel="rbf", gamma=None, degree=2,
        coef0=1.0, normalize=False, threshold_on="norm", alg2_literal_line14=False, n_features=2**18):
        self._store_params(locals())

    def _open_graph_error(self):
        # A connected component keeps one weight row per member; a new member's row (the past
        # updates weighted by its T entries) is not kept, so only the disconnected graph grows.
        if self.graph != "disconnected":
            return ("MTBPRJ2 grows with graph='disconnected' only: on a connected graph each task keeps a "
                    "weight row that every past update wrote, and its budget rule weighs all rows, so a "
                    "task added later would change past decisions (MTBPRJ grows with 'complete' too)")
        return None

    _native_kind = "mtbprj2"
    _shard_state = "shared"  # the span in the base-kernel space
    _parameter_constraints = {**PROJECTRON_CONSTRAINTS, "alg2_literal_line14": Boolean(lenient=True)}


#: Another name for ``MTBPRJ`` (the paper calls it both MTBPRJ and MTPRJ; A-C9).
MTPRJ = MTBPRJ
#: Another name for ``MTBPRJ2`` (A-C9).
MTPRJ2 = MTBPRJ2
