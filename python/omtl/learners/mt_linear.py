"""MTLinear: online linear learning on the task-graph feature map (docs/mt_linear.md)."""

from __future__ import annotations

import math

import numpy as np

from .._base import OnlineClassifier, diagnostic
from .._constraints import Boolean, Integer, Name, Number, Optional
from .._docs import fill_doc
from .._sklearn import available_if
from ..graph import TaskGraph, resolve_graph

MT_LINEAR_CONSTRAINTS = {
    "loss": Name(),
    "update": Name(),
    "learning_rate": Number(),
    "fit_intercept": Boolean(),
    "hash_bits": Optional(
        Integer(0, 2**32 - 1),
        message="{name} must be None or a non-negative integer, got {value!r}",
    ),
    "shared_rate": Number(),
    "max_bytes": Optional(
        Integer(1, 2**64 - 1),
        message="{name} must be None or a positive integer (bytes), got {value!r}",
    ),
    "tail_bits": Optional(
        Integer(0, 2**32 - 1),
        message="{name} must be None or a non-negative integer, got {value!r}",
    ),
}


def _has_probabilities(model) -> bool:
    """predict_proba needs loss='logistic'."""
    return model.loss == "logistic"


class MTLinear(OnlineClassifier):
    """Multitask online linear classifier with normalized adaptive, importance-invariant updates.

    Learns the linear model of the multitask kernel with a linear base kernel, written as a feature
    map: task ``i`` scores ``f_i(x) = sum_r B[r, i] <w_r, (x, 1)>`` where ``B^T B = T``, the task
    kernel of ``graph``. The complete graph (default) gives a shared block plus one block per task
    (Vowpal Wabbit's ``-q st`` with a constant); the disconnected graph gives one block per task; any
    other ``TaskGraph`` uses the symmetric square root of ``T`` per connected component.
    An example updates only the blocks of its task's component, O(nnz(x)) per block.

    The default update is Vowpal Wabbit's: AdaGrad per coordinate, normalised by each coordinate's
    largest observed magnitude (Ross, Mineiro & Langford, *Normalized online learning*, UAI 2013),
    with importance-invariant steps (Karampatziakis & Langford, *Online importance weight aware
    updates*, UAI 2011). It is invariant to the scale of each feature, so features need no
    standardisation. Every example with a positive loss updates the model. On the complete graph
    the shared block learns at twice the per-task blocks' rate by default (``shared_rate``).

    Parameters
    ----------
    {n_tasks_open_graph}
    graph : {"complete", "disconnected"} or TaskGraph, default="complete"
    loss : {"logistic", "hinge", "squared"}, default="logistic"
        ``log(1 + exp(-y f))``, ``max(0, 1 - y f)`` or ``(y - f)^2 / 2``.
    update : {"normalized", "adagrad", "sgd", "arow"}, default="normalized"
        The per-coordinate rate: normalized AdaGrad, plain AdaGrad, ``learning_rate/sqrt(t)``, or
        diagonal AROW (a variance per weight, shrinking with the squared values seen; the step is
        the loss's proximal step, AROW's own for ``loss="hinge"``; docs/mt_linear.md M.2b).
    learning_rate : float, default=0.5
        The step ``eta`` (Vowpal Wabbit's ``-l``, same default); for ``update="arow"``, ``1/r``
        (AROW's regularisation ``r``).
    fit_intercept : bool, default=True
        Append a constant feature 1 to ``x`` (a bias per block: a shared and a per-task bias).
    hash_bits : int or None, default=None
        Memory budget for the whole model: every block (the shared one and each task's own) lives
        in one table of ``2**hash_bits`` cells, each (block, feature) pair hashed into it, as
        Vowpal Wabbit's ``-b``; colliding pairs share a weight and its statistics
        (docs/mt_linear.md M.4). The model is then at most the table (``2**hash_bits`` x 4 to 12
        bytes by ``update``) plus a few bytes per task, whatever the number of tasks and features.
        ``None``: exact, every (block, feature) pair its own cell, stored densely for up to 4,095
        features or a few tasks and sparsely beyond (memory follows the pairs touched; M.4).
    shared_rate : float, default=2.0
        The complete graph's shared block learns at ``shared_rate`` times the rate of the per-task
        blocks (every ``update`` rule; for ``"arow"`` its variances): above 1 a mistake moves the
        knowledge common to all tasks more, below 1 the task's own weights; 1 is Vowpal Wabbit's
        ``-q st``. The default 2 was chosen on selection data, not on the benchmark sets
        (docs/mt_linear.md M.7b). Graphs without a shared block (``"disconnected"``, a complete
        graph with one task, any other ``TaskGraph``) ignore it (M.8).
    max_bytes : int or None, default=None
        A byte budget over users (docs/lifecycle.md): exact own cells for the most recently
        active users; when a new cell would not fit, the least recently active users are evicted
        (counted in ``n_evicted_users_``) and fall back to the shared block (and to the tail, with
        ``tail_bits``). ``memory_bytes_`` never exceeds it. Without ``hash_bits``, on the
        ``"complete"`` or ``"disconnected"`` graph; the cells are then stored sparsely.
    tail_bits : int or None, default=None
        With ``max_bytes``: evicted users' weights are added into a table of ``2**tail_bits``
        weights (hashed by user and feature), which those users read from then on: the hybrid of
        an exact head and a hashed tail.
    {n_features}

    Attributes
    ----------
    memory_bytes_ : int
        Bytes allocated for the model's state: the weights with their per-coordinate statistics
        (single precision: 4 bytes a value) in the table, dense blocks or sparse cells, the
        sparse index, and the per-component counters (under ``max_bytes``: the per-user state and
        the tail too).
    n_evicted_users_ : int
        Under ``max_bytes``: users evicted so far.
    n_resident_users_ : int
        Under ``max_bytes``: users holding exact own cells now.
    block_weights_ : ndarray of shape (n_blocks, n_features + fit_intercept)
        Without hashing: the weight blocks (own blocks by task, then the complete graph's shared
        block; the last column is the intercept when ``fit_intercept``), stored in single
        precision and returned as float64. A ``ValueError`` under hashing (the blocks share one
        table: ``table_weights_``) or when the picture would exceed 2**24 values.
    table_weights_ : ndarray of shape (2**hash_bits,)
        Under hashing, the weights of the table (empty before the first update).

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import MTLinear
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.5], [0.0, 1.0]])
    >>> model = MTLinear(n_tasks=2)
    >>> model.learn(X, [1, -1, 1, -1], tasks=[0, 1, 0, 1]).tolist()
    [1, 1, 1, -1]
    >>> model.predict_proba(X[:1], tasks=[0]).round(3).tolist()
    [[0.235, 0.765]]
    """

    def __init__(self, *, n_tasks=None, graph="complete", loss="logistic", update="normalized", learning_rate=0.5,
        fit_intercept=True, hash_bits=None, shared_rate=2.0, max_bytes=None, tail_bits=None, n_features=2**18):
        self._store_params(locals())

    _grows = True  # DECISIONS.md, open-ended task sets

    def _engine_n_tasks(self, n_labels):
        # The open-ended complete graph keeps at least two engine tasks: with one, M.1's factor is
        # a single block, which does not split into the shared and own blocks a second task needs.
        if self.n_tasks is None and self.graph == "complete":
            return max(n_labels, 2)
        return n_labels

    def _task_graph(self) -> TaskGraph:
        return resolve_graph(self.graph, self._check_n_tasks(), open_ended=self.n_tasks is None)

    _native_kind = "mt_linear"
    # T's factor, the normalizer and the cells per component (under hash_bits one shared table)
    _shard_state = "component"
    _coupled_shards = True  # on the complete graph, its shared block kept in step
    _parameter_constraints = MT_LINEAR_CONSTRAINTS

    def _native_setting(self, n_features):
        return {"task_kernel": self._task_graph().native()}

    @available_if(_has_probabilities)
    @fill_doc
    def predict_proba_one(self, x, *, task=None) -> float:
        """The logistic model's probability of the positive class for one event (no update).

        Parameters
        ----------
        {x_event}
        {task_event}

        Returns
        -------
        float
            ``P(y = positive)`` (``classes_[1]``).
        """
        return 0.5 * (1.0 + math.tanh(0.5 * self.decision_one(x, task=task)))

    @property
    def task_graph_(self) -> TaskGraph:
        """The task graph in use (resolved from ``graph``)."""
        return self._task_graph()

    @available_if(_has_probabilities)
    @fill_doc
    def predict_proba(self, X, *, tasks=None) -> np.ndarray:
        """The logistic model's class probabilities (``loss="logistic"`` only: for the other
        losses the attribute does not exist, so ``hasattr`` is False).

        Parameters
        ----------
        {X}
        {tasks}

        Returns
        -------
        ndarray of shape (n_samples, 2)
            ``[P(y = negative), P(y = positive)]`` per row (columns in ``classes_`` order).
        """
        z = self.decision_function(X, tasks=tasks)
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, without overflow
        return np.column_stack([1.0 - p, p])

    memory_bytes_ = diagnostic("memory_bytes", "Bytes allocated for the model's state (weights, per-component counters, a general kernel's factor).")
    n_evicted_users_ = diagnostic("n_evicted_users", "Under max_bytes: users evicted so far.")
    n_resident_users_ = diagnostic("n_resident_users", "Under max_bytes: users holding exact own cells now.")

    @property
    def block_weights_(self) -> np.ndarray:
        if not self._is_fitted():
            return np.zeros((0, 0))
        arrays = self._core.arrays()
        if "block_weights" not in arrays:
            if self.hash_bits is not None:
                raise ValueError("under hash_bits the blocks share one table: see table_weights_")
            n_blocks, width = int(self._diagnostic("n_blocks", 0)), int(self._diagnostic("block_width", 0))
            raise ValueError(
                f"block_weights_ would be {n_blocks} x {width} values ({8 * n_blocks * width:,} bytes); "
                "the model stores only the cells it touched"
            )
        return np.array(arrays["block_weights"], dtype=np.float64)

    @property
    def table_weights_(self) -> np.ndarray:
        if not self._is_fitted():
            return np.zeros(0)
        return np.array(self._core.arrays().get("table_weights", np.zeros(0)), dtype=np.float64)
