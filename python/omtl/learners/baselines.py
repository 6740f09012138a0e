"""The remaining baselines of the ROMCO paper (ALGORITHMS.md §6.2–§6.5): OMTL, OMTRL, CW-COL,
MTFL and TRML. All are linear; all run protocol P1 (OMTL also runs P2 rounds natively)."""

from __future__ import annotations

import numpy as np

from .._base import OnlineClassifier, diagnostic
from .._constraints import Boolean, Integer, Name, Number, Optional

OMTRL_DEFAULT_EPOCH = 1000


class _ArraysMixin:
    """Fitted arrays of the core (``arrays()``), with a fallback before the first batch."""

    def _array(self, name, default):
        if not self._is_fitted():
            return default
        return np.array(self._core.arrays()[name], dtype=np.float64)


class CWCOL(_ArraysMixin, OnlineClassifier):
    """CW-COL: collaborative confidence-weighted learning (Li, Chang, Hoi, Liu & Jain, CIKM 2011).

    **Reconstruction** (ALGORITHMS.md §6.4, §8.3 A-B3): the paper's collaborative layer was not
    available to us. A global diagonal CW model (Dredze, Crammer & Pereira, ICML 2008) learns from
    every example; each task keeps an individual CW model; task ``i`` predicts with the weighted
    geometric mean of the two Gaussians (per coordinate: precision ``(1-omega)/sigma_i +
    omega/sigma_g``, precision-weighted mean), formed on the support of ``x`` only. When the CW
    constraint ``y mu.x >= phi sqrt(x' Sigma x)`` is violated under that prior, the CW posterior is
    written into the task's model on the support of ``x``; the global model then takes a plain CW
    step. O(nnz(x)) per example; memory ``2 d`` floats per task that has been updated, plus ``2 d``.

    Parameters
    ----------
    n_tasks : int or None, default=None
        None: open-ended task labels (any hashable ids; a new label starts from the prior).
    confidence : float in (0.5, 1), default=0.85
        The CW confidence level eta; ``phi = Phi^{-1}(eta)``.
    a : float > 0, default=1.0
        Initial variance of every weight.
    omega : float in [0, 1], default=0.5
        Weight of the global model in the prior: 0 gives independent per-task CW, 1 predicts with
        the global CW model.
    {n_features}

    Attributes
    ----------
    task_mean_, task_variance_ : ndarray of shape (n_tasks, n_features)
        The individual models.
    global_mean_, global_variance_ : ndarray of shape (n_features,)

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import CWCOL
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1], [0.9, 0.0]])
    >>> CWCOL(n_tasks=2).learn(X, [-1, 1, -1, -1], tasks=[0, 1, 1, 0]).tolist()
    [1, 1, -1, -1]
    """

    _grows = True  # a new task starts from the prior, beside the global model (DECISIONS.md)

    def __init__(self, *, n_tasks=None, confidence=0.85, a=1.0, omega=0.5, n_features=2**18):
        self._store_params(locals())

    _native_kind = "cw_col"
    _shard_state = "shared"  # one global model (omtl.dask: refused by component, kept in step by label)
    _coupled_shards = True
    _parameter_constraints = {
        "confidence": Number(),
        "a": Number(),
        "omega": Number(),
    }

    def _shape(self):
        return (self.n_tasks, getattr(self, "n_features_in_", 0))

    @property
    def task_mean_(self):
        return self._array("task_mean", np.zeros(self._shape()))

    @property
    def task_variance_(self):
        return self._array("task_variance", np.full(self._shape(), float(self.a)))

    @property
    def global_mean_(self):
        return self._array("global_mean", np.zeros(self._shape()[1]))

    @property
    def global_variance_(self):
        return self._array("global_variance", np.full(self._shape()[1], float(self.a)))

    n_global_updates_ = diagnostic("n_global_updates", 'Number of CW steps of the global model.')


class OMTRL(_ArraysMixin, OnlineClassifier):
    """OMTRL: online multitask learning of task relationships (Saha, Rai, Daumé III &
    Venkatasubramanian, AISTATS 2011).

    A multitask linear Perceptron (§3.3) whose task coupling ``A^{-1}`` is learned: on an
    update-mistake of task ``i``, every ``w_s`` moves by ``y (A^{-1})_{s i} x``. ``A^{-1}`` starts
    as the complete-graph kernel ``(I + 11')/(k+1)``; after ``epoch`` examples it is refreshed
    after every example from ``W'W``:

    - ``"batch"``: ``A^{-1} = (W'W)^{1/2} / tr((W'W)^{1/2})`` (plus ``1e-8 I`` before normalising);
    - ``"logdet"``: ``A^{-1} += eta sym(W'W)``;
    - ``"vonneumann"``: ``A <- exp(log A - eta sym(W'W))``.

    **Reconstruction** (ALGORITHMS.md §6.3, §8.3 A-B2): these closed forms are our reading of the
    paper; the initial coupling and the refresh schedule were not checked against its full text.
    Our deviation: after a ``logdet`` or ``vonneumann`` refresh ``A^{-1}`` is rescaled to unit
    trace (as ``batch`` is); the literal formulas make ``A^{-1}`` and ``W`` grow each other until
    they overflow. A refresh that is still not finite is skipped (``n_refresh_skipped_``).

    Parameters
    ----------
    {n_tasks_fixed}
    relation_update : {"batch", "logdet", "vonneumann"}, default="batch"
    eta : float >= 0, default=1e-3
        Step size of the ``logdet`` / ``vonneumann`` refreshes.
    epoch : int >= 0 or None, default=None
        Warm-up length in examples before the coupling is learned; ``None`` means 1,000 (the
        paper uses half of the stream, which a streaming learner cannot know).
    {n_features}

    Attributes
    ----------
    task_kernel_ : ndarray of shape (n_tasks, n_tasks)
        The current coupling ``A^{-1}``.
    coef_ : ndarray of shape (n_tasks, n_features)

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import OMTRL
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1]])
    >>> model = OMTRL(n_tasks=2)
    >>> model.learn(X, [1, -1, 1], tasks=[0, 1, 1]).tolist()
    [1, 1, 1]
    >>> model.task_kernel_.round(3).tolist()
    [[0.667, 0.333], [0.333, 0.667]]
    """

    def __init__(self, *, n_tasks=None, relation_update="batch", eta=1e-3, epoch=None, n_features=2**18):
        self._store_params(locals())

    _native_kind = "omtrl"
    _shard_state = "shared"  # the learned task coupling
    _parameter_constraints = {
        "relation_update": Name(),
        "eta": Number(),
        "epoch": Optional(Integer(0), default=OMTRL_DEFAULT_EPOCH),
    }

    @property
    def task_kernel_(self):
        k = self.n_tasks
        return self._array("task_kernel", (np.eye(k) + np.ones((k, k))) / (k + 1))

    @property
    def coef_(self):
        return self._array("coef", np.zeros((self.n_tasks, getattr(self, "n_features_in_", 0))))

    n_refresh_skipped_ = diagnostic("n_refresh_skipped", 'Task-relation refreshes skipped because their result was not finite (the previous one is kept).')


class OMTL(_ArraysMixin, OnlineClassifier):
    """OMTL: online multitask learning with a shared loss (Dekel, Long & Singer, COLT 2006).

    One linear ``w_i`` per task. The hinge losses of a round are combined by the absolute norm
    ``global_norm`` and the implicit update ``w_i += tau_i y_i x_i`` maximises
    ``sum tau_i l_i - 1/2 sum tau_i^2 |x_i|^2`` subject to ``|tau|_* <= C`` (ALGORITHMS.md §6.2):
    ``"l1"`` is PA-I per task, ``"linf"`` (default, §8.3 A-B1) shares a budget ``sum tau <= C``,
    ``"l2"`` bounds ``|tau|_2 <= C``. ``explicit=True`` takes ``tau = C v`` for the maximiser of
    ``v.l`` over the dual unit ball (``linf``: only the largest loss moves; ties to the lowest
    task id). In protocol P1 each example is a singleton round, where every implicit variant is
    PA-I (INV-O2).

    Parameters
    ----------
    n_tasks : int or None, default=None
        None: open-ended task labels (any hashable ids; a new label starts with w = 0).
    C : float > 0, default=1.0
    global_norm : {"linf", "l1", "l2"}, default="linf"
    explicit : bool, default=False
    {n_features}

    Attributes
    ----------
    coef_ : ndarray of shape (n_tasks, n_features)

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import OMTL
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1]])
    >>> OMTL(n_tasks=2).learn(X, [1, -1, 1], tasks=[0, 1, 1]).tolist()
    [1, 1, -1]
    """

    _grows = True  # one w_i per task; a round involves only its tasks (DECISIONS.md)

    def __init__(self, *, n_tasks=None, C=1.0, global_norm="linf", explicit=False, n_features=2**18):
        self._store_params(locals())

    _native_kind = "omtl"
    _shard_state = "component"  # a round couples its own tasks only
    _parameter_constraints = {
        "C": Number(),
        "global_norm": Name(),
        "explicit": Boolean(),
    }

    @property
    def coef_(self):
        return self._array("coef", np.zeros((self.n_tasks, getattr(self, "n_features_in_", 0))))


class _BatchMTL(_ArraysMixin, OnlineClassifier):
    _regularizer = ""
    _stores_examples = True  # every example, for the periodic retraining (omtl.evaluate.stores_examples)

    def __init__(self, *, n_tasks=None, rho=1e-2, retrain_every=100, n_features=2**18):
        self._store_params(locals())

    _native_kind = "batch_mtl"
    _shard_state = "shared"  # the penalty couples every task
    _parameter_constraints = {"rho": Number(), "retrain_every": Integer(0)}

    def _native_params(self, n_features, sparse):
        return {"regularizer": self._regularizer, **self._validated_params()}

    @property
    def coef_(self):
        """``W`` transposed: row ``i`` is task ``i``'s weight vector."""
        return self._array("coef", np.zeros((self.n_tasks, getattr(self, "n_features_in_", 0))))

    @property
    def intercept_(self):
        return self._array("intercept", np.zeros(self.n_tasks))

    n_retrains_ = diagnostic("n_retrains", 'Number of retrains so far.')

    @property
    def last_objective_(self) -> float:
        """Objective value reached by the last retrain (nan before the first)."""
        return float(self._diagnostic("last_objective", np.nan)) if self.n_retrains_ else float("nan")

    stored_bytes_ = diagnostic("stored_bytes", 'Memory held by the stored training examples.')


_BATCH_DOC = """{name}: batch multitask logistic regression with {what}, retrained periodically
    ({source}; ALGORITHMS.md §6.5, §8.2 A-R10/A-R11).

    Minimises ``sum_i (1/n_i) sum_(x,y in task i) log(1 + exp(-y (w_i.x + c_i))) + rho {penalty}``
    (per-task bias ``c_i``, unregularised) by accelerated proximal gradient (FISTA with a
    MALSAR-style line search; stops at a relative objective change of 1e-4 or 1,000 iterations).
    Every example is stored; after every ``retrain_every`` examples the model is retrained on all
    examples seen so far, warm-started from the previous solution, and the examples in between
    are predicted with the last model (before the first retrain every prediction is +1).

    Memory: the stored examples, kept in single precision (the solver computes in double
    precision on that copy): ``4 d`` bytes per dense row or ``8 nnz + 8`` bytes per sparse row
    (the representation of the first batch), plus 12 bytes per example for its task and label
    (``stored_bytes_``); 18,000 dense rows of 400 features hold 29 MB. ``n_active_`` is the number of stored examples, ``n_updates_`` the number
    of retrains.

    Parameters
    ----------
    {{n_tasks_fixed}}
    rho : float >= 0, default=1e-2
        Regularisation weight (ours; MALSAR has no default).
    retrain_every : int >= 1, default=100
    {{n_features}}

    Attributes
    ----------
    coef_ : ndarray of shape (n_tasks, n_features)
    intercept_ : ndarray of shape (n_tasks,)
    n_retrains_, last_objective_, stored_bytes_

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import {name}
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5))
    >>> y = np.where(X[:, 0] > 0, 1, -1)
    >>> model = {name}(n_tasks=3, retrain_every=100)
    >>> errors = model.learn(X, y, tasks=np.arange(300) % 3) != y
    >>> int(errors[:100].sum()) > int(errors[100:].sum()), model.n_retrains_
    (True, 3)
    """


class MTFL(_BatchMTL):
    __doc__ = _BATCH_DOC.format(
        name="MTFL", what="a row-sparse (l2,1) weight matrix", source="Liu, Ji & Ye, UAI 2009; Argyriou, Evgeniou & Pontil, NIPS 2006", penalty="sum_r |W_r,:|_2"
    )
    _regularizer = "l21"

    @property
    def n_selected_features_(self) -> int:
        """Number of features (rows of W) not zeroed by the group penalty."""
        if not self._is_fitted():
            return 0
        return int(self.n_features_in_ - self._diagnostics()["n_zero_rows"])


class TRML(_BatchMTL):
    __doc__ = _BATCH_DOC.format(name="TRML", what="a low-rank (trace norm) weight matrix", source="Ji & Ye, ICML 2009; MALSAR Logistic_Trace", penalty="|W|_*")
    _regularizer = "trace"

    rank_ = diagnostic("rank", 'Rank of the current W (singular values above 1e-12 of the largest).')
