"""Budget kernel Perceptrons on the multitask kernel (ALGORITHMS.md §4.1, §4.2): MTRBP and MTFORG."""

from __future__ import annotations

import warnings

from .._base import OnlineClassifier, diagnostic
from .._constraints import Integer, Number
from ._mixins import KernelParamsMixin

# Shared with the Projectrons.
BUDGET = Integer(0, 2**62, message="{name} must be a non-negative integer, got {value!r}", too_large="{name} is too large: {value!r}")


class _BudgetMixin:
    _grows = True  # MTRBP and MTFORG add tasks (DECISIONS.md, open-ended task sets)
    _shard_state = "component"  # the budget becomes a per-shard budget
    _stores_examples = True  # at most `budget` (omtl.evaluate.stores_examples)

    """Fitted attributes shared by the budget learners."""

    n_evictions_ = diagnostic("n_evictions", 'Number of elements removed from the active set to respect the budget.')


class MTRBP(_BudgetMixin, KernelParamsMixin, OnlineClassifier):
    """Multitask Randomized Budget Perceptron (Cavallanti & Cesa-Bianchi, Alg. 3).

    The multitask kernel Perceptron (scores ``f_i(x) = sum_j beta_j T[i_j, i] K'(x_j, x)``,
    stores ``([x, i], y)`` on every update-mistake ``y f <= 0``) with at most ``budget`` stored
    examples: when the active set is full, a uniformly random stored example is discarded before
    the new one is appended. The randomized budget Perceptron it extends is from Cavallanti,
    Cesa-Bianchi & Gentile, "Tracking the best hyperplane with a simple budget Perceptron",
    Machine Learning 69, 2007. Random draws come from the pinned SplitMix64 generator seeded with
    ``seed`` (one draw per eviction), so runs are reproducible and identical to
    ``omtl.reference.MTRBP``. Per example the cost is one pass over the stored rows.

    Parameters
    ----------
    {n_tasks_open_graph}
    budget : int >= 1, default=1000
        Largest number of stored examples (``n_active_ <= budget`` after every example). The
        default holds a School-sized stream's 25 % budget and costs 1,000 stored rows; set it from
        the memory you can give and the kernel Perceptron's active set (DECISIONS.md, "Default
        budget").
    {graph_kernel}
    seed : int, default=0
        Seed of the eviction generator, in ``[0, 2**64)``.
    {n_features}

    Attributes
    ----------
    n_evictions_ : int
        Number of random evictions so far.

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import MTRBP
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1], [-1.0, 0.0], [0.0, -1.0]])
    >>> model = MTRBP(n_tasks=2, budget=2, seed=1)
    >>> model.learn(X, [1, -1, -1, -1, 1], tasks=[0, 1, 1, 0, 1]).tolist()
    [1, 1, 1, 1, 1]
    >>> model.n_active_, model.n_evictions_
    (2, 3)
    """

    def __init__(self, *, n_tasks=None, budget=1000, graph="complete", kernel="rbf", gamma=None, degree=2, coef0=1.0,
        normalize=False, seed=0, n_features=2**18):
        self._store_params(locals())

    _native_kind = "mt_rbp"
    _parameter_constraints = {
        "budget": BUDGET,
        "seed": Integer(0, 2**64 - 1, message="{name} must be an integer in [0, 2**64), got {value!r}"),
    }


class MTFORG(_BudgetMixin, KernelParamsMixin, OnlineClassifier):
    """Multitask self-tuned Forgetron (Cavallanti & Cesa-Bianchi, eq. 3).

    The multitask kernel Perceptron with at most ``budget`` stored examples, after the self-tuned
    Forgetron of Dekel, Shalev-Shwartz & Singer, "The Forgetron: a kernel-based Perceptron on a
    budget", SIAM J. Comput. 37(5), 2008. When the active set is full, a mistake appends the new
    example, shrinks every coefficient by the largest factor ``chi`` in ``(0, 1]`` that keeps the
    accumulated removal damage ``Q`` at most ``15/32 c_G^2 M`` (``M`` = update-mistakes so far,
    ``c_G = R sqrt(max_i T_ii)``), then removes the oldest example. Deterministic.

    Parameters
    ----------
    n_tasks, budget, graph, kernel, gamma, degree, coef0, normalize
        As ``MTRBP``. The task kernel must have ``max_i T_ii > 0`` (else ``c_G = 0`` and fitting raises).
    radius : float, default=1.0
        R with ``K'(x, x) <= R^2`` for every instance. Ignored (R = 1) for rbf and normalised
        kernels. A ``RuntimeWarning`` is emitted once if an instance exceeds it.
    {n_features}

    Attributes
    ----------
    n_evictions_ : int
        Number of removals (one per mistake made with a full active set).
    forgetron_q_ : float
        Accumulated removal damage Q.
    forgetron_m_ : int
        Update-mistake counter M.
    last_shrink_ : float
        The last shrinking coefficient chi* (1.0 before the first removal).

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import MTFORG
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1], [-1.0, 0.0], [0.0, -1.0]])
    >>> model = MTFORG(n_tasks=2, budget=2)
    >>> model.learn(X, [1, -1, -1, -1, 1], tasks=[0, 1, 1, 0, 1]).tolist()
    [1, 1, 1, -1, -1]
    >>> model.n_active_, model.n_evictions_, model.forgetron_m_, round(model.last_shrink_, 4)
    (2, 2, 4, 0.4062)
    """

    def __init__(self, *, n_tasks=None, budget=1000, graph="complete", kernel="rbf", gamma=None, degree=2, coef0=1.0,
        normalize=False, radius=1.0, n_features=2**18):
        self._store_params(locals())

    _native_kind = "mt_forg"
    _parameter_constraints = {
        "budget": BUDGET,
        "radius": Number(),
    }

    def _before_learn(self, core, X):
        # Before the update, in every path (learn, partial_fit, learn_rounds): under
        # warnings.simplefilter("error") the call then fails with the model unchanged.
        if not getattr(self, "_radius_warned", False) and core.radius_exceeded(X):
            radius = core.diagnostics()["radius"]
            warnings.warn(
                f"an instance has K'(x, x) > radius^2 = {radius**2:g}: the damage "
                "bound of MTFORG assumes K'(x, x) <= R^2; raise `radius` or normalise the kernel",
                RuntimeWarning,
                stacklevel=5,
            )
            self._radius_warned = True

    forgetron_q_ = diagnostic("forgetron_q", 'Accumulated removal damage Q (``Q <= 15/32 c_G^2 M`` always).', 0.0, float)

    forgetron_m_ = diagnostic("forgetron_m", 'Number of update-mistakes M.')

    last_shrink_ = diagnostic("last_shrink", 'The last shrinking coefficient chi* in (0, 1] (1.0 before the first removal).', 1.0, float)
