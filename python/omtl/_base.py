"""The shared face of every learner: scikit-learn/River-style methods over an algorithm core.

A learner class holds its hyper-parameters (keyword-only, stored unchanged) and builds a *core*
on its first non-empty batch, when the number of features is known. The core is either the Rust
engine (``NativeCore``) or a NumPy reference implementation (``omtl.reference``); both take the
validated batch and return the pre-update scores. Everything a user can get wrong is checked here
first, so a failing call leaves the model exactly as it was.
"""

from __future__ import annotations

import copy
import functools
import inspect
import threading
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from ._bookkeeping import check_restored
from ._constraints import validate
from ._delayed import DelayedLabelsMixin, PendingEvents
from ._docs import fill_doc
from ._lifecycle import ForgetMixin

# STATE_VERSION: the layout version of a saved model, the native module's (defined in Rust).
from ._native import (
    STATE_VERSION,
    decision_event,
    decision_small,
    event_row,
    learn_event,
    learn_small,
    predict_event,
)
from ._sklearn import SklearnClassifierMixin
from ._tasks import GROW_HINT, TaskSet, is_integer_ids, label_list, map_labels
from ._validation import (
    PM1,
    ZERO_ONE,
    check_finite_X,
    check_labels,
    check_rounds,
    check_tasks,
    check_X,
    classes_of,
    csr_parts,
    labels_in_form,
)
from .graph import TaskGraph

# `rounds` of a protocol-P1 call (None is a user's missing round ids, an error).
_P1 = object()

# Guards the lazy creation of the per-model locks (a model built by ``__init__`` has none yet).
_LOCK_INIT = threading.Lock()


def _as_native_rows(X):
    return csr_parts(X) if sp.issparse(X) else X


# The binding's small-batch path (src/python/small.rs) takes at most this many rows.
_SMALL_BATCH = 64


def _small_rows(X):
    """``X`` as the binding's small-batch functions read it (a NumPy array, or a CSR matrix's
    parts), or None when the batch path must take it."""
    if type(X) is np.ndarray:
        return X
    if sp.issparse(X) and X.format == "csr" and X.shape[0] <= _SMALL_BATCH:
        return (X.indptr, X.indices, X.data, X.shape[1])
    return None


class Core(Protocol):
    """What ``OnlineClassifier`` drives, one protocol for ``NativeCore`` (the engine) and every
    reference core (``omtl.reference._core.ReferenceCore``): the base calls both the same way.
    ``n_new`` > 0 adds that many tasks first, atomically with the call (an error leaves the core
    as it was; ``decision`` scores them on a grown copy). A learner may also call, on its own
    core, ``arrays``, ``factors``, ``radius_exceeded`` and ``force_rebuild``."""

    #: Whether ``learn``/``decision`` scan X for NaN and infinity themselves (else the base does).
    checks_finite_X: bool

    @property
    def n_updates(self) -> int: ...

    @property
    def n_active(self) -> int: ...

    def learn(self, X, tasks, y, n_new: int = 0) -> np.ndarray: ...

    def learn_rounds(self, X, tasks, y, rounds, n_new: int = 0) -> np.ndarray:
        """Protocol P2 (a core without joint rounds flattens them, ALGORITHMS.md §1.3)."""

    def decision(self, X, tasks, n_new: int = 0) -> np.ndarray: ...

    def add_tasks(self, n: int) -> None:
        """Adds ``n`` tasks with no examples, atomically (raises where the core cannot grow)."""

    def snapshot(self) -> CoreSnapshot:
        """The state now, independent of the core (see ``CoreSnapshot``)."""

    def diagnostics(self) -> dict: ...


class NativeCore:
    """Adapter from the batch protocol (``Core``) to ``omtl._native.NativeLearner`` (and its
    pickling)."""

    # learn, learn_rounds and decision validate the whole batch in Rust (Rows::validate, which
    # also scans X for NaN and infinity) before they touch the model, so Python need not scan X.
    checks_finite_X = True

    def __init__(self, learner):
        self._learner = learner

    # With n_new > 0 the engine adds the tasks and learns (or scores) the batch atomically.
    def learn(self, X, tasks, y, n_new=0):
        return self._learner.learn(_as_native_rows(X), tasks, y, n_new)

    def decision(self, X, tasks, n_new=0):
        return self._learner.decision(_as_native_rows(X), tasks, n_new)

    def learn_rounds(self, X, tasks, y, rounds, n_new=0):
        return self._learner.learn_rounds(_as_native_rows(X), tasks, y, rounds, n_new)

    def add_tasks(self, n):
        self._learner.add_tasks(n)

    def forget(self, tasks) -> int:
        return self._learner.forget(tasks)

    def radius_exceeded(self, X):
        return self._learner.radius_exceeded(_as_native_rows(X))

    @property
    def n_updates(self) -> int:
        return self._learner.n_updates

    @property
    def n_active(self) -> int:
        return self._learner.n_active

    def diagnostics(self) -> dict:
        return self._learner.diagnostics()

    def arrays(self) -> dict:
        return self._learner.arrays()

    def factors(self):
        return self._learner.factors()

    def force_rebuild(self) -> None:
        self._learner.force_rebuild()

    def __getstate__(self):
        return {"state": bytes(self._learner.to_bytes())}

    def __setstate__(self, state):
        from ._native import NativeLearner

        self._learner = NativeLearner.from_bytes(state["state"])

    def snapshot(self) -> CoreSnapshot:
        return CoreSnapshot(_native_core_from_state, self.__getstate__())


def _native_core_from_state(state) -> NativeCore:
    # (Pickles of native models name this function: keep its name and place.)
    core = NativeCore.__new__(NativeCore)
    core.__setstate__(state)
    return core


class CoreSnapshot:
    """A core's state, taken under the model's lock: pickling and copying a model go through it,
    so they see one consistent state whatever other threads do next. ``rebuild(state)`` makes an
    independent core of it; the snapshot pickles as that call, so that it unpickles as the core."""

    def __init__(self, rebuild, state):
        self.rebuild, self.state = rebuild, state

    def __reduce__(self):
        return (self.rebuild, (self.state,))

    def restore(self) -> Core:
        return self.rebuild(self.state)


def locked(method):
    """Runs a method under the model's lock (see ``OnlineClassifier._model_lock``)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._model_lock():
            return method(self, *args, **kwargs)

    return wrapper


def diagnostic(name: str, doc: str, before_fit=0, kind=int) -> property:
    """A learner's fitted attribute read from its core's diagnostics (``before_fit`` while there
    is no core), converted by ``kind``."""
    return property(lambda self: kind(self._diagnostic(name, before_fit)), doc=doc)


def _same_n_tasks(a, b) -> bool:
    return (a is None) == (b is None) and (a is None or a == b)


class OnlineClassifier(ForgetMixin, DelayedLabelsMixin, SklearnClassifierMixin):
    """Base class of all learners. Subclasses define ``__init__`` and ``_make_core``."""

    # Whether a fitted native model learns events on the binding's fast path (omtl._native's
    # learn_event). A learner with a hook before its updates (``_before_learn``: MTFORG's radius
    # warning) learns them through the batch path, which runs the hook.
    _events_native = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._events_native = cls._before_learn is OnlineClassifier._before_learn
        if cls.__dict__.get("__doc__"):
            fill_doc(cls)  # the shared parameter entries ({n_features}, ...: omtl._docs)

    # ---- hyper-parameters (scikit-learn conventions) -------------------------------------------
    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind is p.KEYWORD_ONLY]

    def _store_params(self, init_locals: dict) -> None:
        """Stores the arguments of ``__init__`` unchanged (``init_locals`` is its ``locals()``,
        taken first thing): every hyper-parameter under its own name, as scikit-learn expects."""
        for name, value in init_locals.items():
            if name not in ("self", "__class__"):
                setattr(self, name, value)

    @locked
    def get_params(self, deep: bool = True) -> dict:
        """The hyper-parameters, as given to the constructor (scikit-learn's convention).

        Parameters
        ----------
        deep : bool, default=True
            Accepted for scikit-learn; omtl learners hold no nested estimators.

        Returns
        -------
        dict
            Parameter name -> value.
        """
        return {name: getattr(self, name) for name in self._param_names()}

    @locked
    def set_params(self, **params):
        """Sets hyper-parameters; all of them or, on an error, none.

        ``n_tasks`` fixes the shape of a fitted model and cannot change after the first batch (the
        others are read when the core is built, on the first batch).

        Parameters
        ----------
        **params
            Parameter name -> new value (names as in ``get_params``).

        Returns
        -------
        self
        """
        valid = set(self._param_names())
        for name in params:
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; valid: {sorted(valid)}")
        if "n_tasks" in params and self._is_fitted() and not _same_n_tasks(params["n_tasks"], self._n_tasks_param_at_fit()):
            raise ValueError(
                f"cannot set n_tasks={params['n_tasks']!r} on a model fitted with n_tasks={self._n_tasks_param_at_fit()!r}: "
                "build a new model (or sklearn.base.clone it) to learn a different number of tasks"
            )
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ---- to be provided by subclasses ----------------------------------------------------------
    # A native learner declares its kind in the native registry (``omtl._native.LEARNER_KINDS``)
    # and returns its validated hyper-parameters from ``_native_params``; the base builds the
    # core. A reference twin overrides ``_make_core`` only.
    _native_kind: str = ""
    # Hyper-parameter -> constraint (omtl._constraints), checked in this order when the core is
    # built; n_tasks and the kernel/graph parameters are checked by their own helpers.
    _parameter_constraints: dict = {}

    def _validated_params(self) -> dict:
        """The hyper-parameters named in ``_parameter_constraints``, checked and normalised."""
        return validate(self._parameter_constraints, self)

    def _native_params(self, n_features: int, sparse: bool) -> dict:
        """The validated hyper-parameters, keyed as the native parameter type's fields."""
        return self._validated_params()

    def _native_setting(self, n_features: int) -> dict:
        """What the core is built for besides its hyper-parameters (a linear learner: n_tasks)."""
        return {"n_tasks": self._check_n_tasks()}

    def _check_dict_width(self) -> None:
        """Checks ``n_features``, the column space of dict rows (a model file's too)."""
        w = self._dict_width()
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or not 1 <= w <= 2**31 - 1:
            raise ValueError(f"n_features (the column space of dict rows) must be an integer in [1, 2**31 - 1], got {w!r}")

    def _make_core(self, n_features: int, sparse: bool):
        from ._native import NativeLearner

        self._check_dict_width()

        params = self._native_params(n_features, sparse)
        setting = self._native_setting(n_features)
        return NativeCore(NativeLearner.build(self._native_kind, params, n_features=n_features, sparse=sparse, **setting))

    # ---- task sets (python/omtl/_tasks.py; DECISIONS.md "Open-ended task sets") -----------------
    # Whether the learner can add tasks to a fitted model (n_tasks=None, add_tasks); the
    # learners of a learned or sized task relation keep False.
    _grows = False

    def _open_graph_error(self) -> str | None:
        """Why this learner's settings cannot grow (None: they can). Learners with a ``graph``
        grow for "complete" (the open-ended complete graph) and "disconnected" only."""
        graph = getattr(self, "graph", None)
        if graph is not None and not (isinstance(graph, str) and graph in ("complete", "disconnected")):
            return "a TaskGraph fixes the set of tasks; pass graph='complete' or 'disconnected'"
        return None

    def _check_open_ended(self) -> None:
        if not self._grows:
            raise ValueError(
                f"{type(self).__name__} needs n_tasks (an integer): it learns or sizes a relation between a fixed set "
                "of tasks, which a new task would change everywhere; label strings are fine up to n_tasks labels"
            )
        why = self._open_graph_error()
        if why is not None:
            raise ValueError(f"n_tasks=None (open-ended tasks) is not available here: {why}")

    def _engine_n_tasks(self, n_labels: int) -> int:
        """The number of engine tasks that holds ``n_labels`` labels (a learner may keep more)."""
        return n_labels

    def _n_tasks_param_at_fit(self):
        """The ``n_tasks`` hyper-parameter the fitted model was built (or grown) with."""
        return self._tasks.n_tasks_at_fit

    def _label_mode(self, tasks=None) -> bool:
        """Whether task ids are labels mapped in order of appearance (else integer indices)."""
        if self._is_fitted():
            return self._tasks.label_mode
        return self.n_tasks is None or (tasks is not None and not is_integer_ids(tasks))

    def _map_tasks(self, tasks, n_rows: int):
        """Engine task indices of a batch's ids, and the labels it adds (label mode). Validates
        the ids (and raises) without changing anything."""
        if not self._label_mode(tasks):
            n_tasks = self._check_n_tasks()
            if not is_integer_ids(tasks) and tasks is not None and self._is_fitted():
                raise TypeError(
                    f"this model's tasks are integer ids in [0, {n_tasks}) (it was fitted with integer ids), got {tasks!r:.80}"
                )
            try:
                return check_tasks(tasks, n_rows, n_tasks), []
            except ValueError as exc:
                if str(exc).startswith("unknown task id"):
                    raise ValueError(f"{exc}; {GROW_HINT}") from None
                raise
        labels = label_list(tasks, n_rows)
        known = self._tasks.index if self._is_fitted() else {}
        capacity = None if self.n_tasks is None else self._check_n_tasks()
        if self.n_tasks is None:
            self._check_n_tasks()  # refuses n_tasks=None where the learner cannot grow
        fitted = self._is_fitted()
        base, free = (len(self._tasks.labels), self._tasks.free) if fitted else (0, [])
        return map_labels(labels, known, capacity, GROW_HINT, base, free)

    def _n_new_engine_tasks(self, new_labels: list) -> int:
        """Engine tasks to add so that the new labels have indices (0 for a fixed n_tasks)."""
        if self.n_tasks is not None or not new_labels:
            return 0
        if not self._is_fitted():
            return self._engine_n_tasks(len(new_labels))
        return max(0, self._engine_n_tasks(self._tasks.tasks_needed(len(new_labels))) - self._tasks.n_engine_tasks)

    def _check_n_tasks(self) -> int:
        k = self.n_tasks
        if k is None:
            self._check_open_ended()
            if self._is_fitted():
                if self._n_tasks_param_at_fit() is not None:
                    raise ValueError(
                        f"n_tasks was changed to None after fitting; this model was fitted with n_tasks={self._n_tasks_param_at_fit()}"
                    )
                return self._fitted_n_tasks()
            # Before the first batch: the engine size the first batch's labels need (_run_learn).
            return self.__dict__.get("_pending_n_tasks", 1)
        if self._is_fitted() and self._n_tasks_param_at_fit() is None:
            raise ValueError(f"n_tasks was changed to {k!r} after fitting; this model was fitted with n_tasks=None")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"n_tasks must be an integer >= 1, got {k!r}")
        if k >= 2**63:
            raise ValueError(f"n_tasks must be an integer in [1, 2**63), got {k!r}")
        if self._is_fitted() and k != self._fitted_n_tasks():
            raise ValueError(
                f"n_tasks was changed to {k!r} after fitting; this model was fitted with n_tasks={self._fitted_n_tasks()}"
            )
        return int(k)

    def _fitted_n_tasks(self) -> int:
        return self._tasks.n_engine_tasks

    def _model_lock(self) -> threading.RLock:
        """The lock every public call that reads or writes the model's state holds: concurrent
        calls on one model run one after the other (re-entrant, as calls nest). Not pickled; a
        copy or an unpickled model gets its own."""
        lock = self.__dict__.get("_lock")
        if lock is None:
            with _LOCK_INIT:
                lock = self.__dict__.setdefault("_lock", threading.RLock())
        return lock

    def _before_learn(self, core, X) -> None:
        """Runs just before the core learns a validated batch (a hook for warnings that must come
        before the update, so that a warning turned into an error changes nothing)."""

    # ---- the online protocol -------------------------------------------------------------------
    def _is_fitted(self) -> bool:
        return getattr(self, "_core", None) is not None

    def _prepare(self, X, y, tasks, classes=None):
        """Checks a batch; the scan of X for NaN/inf is left to ``_core_for``. Returns the
        task indices and the task labels the batch adds (label mode)."""
        self._check_n_tasks()
        X = check_X(self._dict_rows(X), n_features=getattr(self, "n_features_in_", None), check_finite=False)
        n = X.shape[0]
        y_pm1, form = check_labels(y, n, *self._label_context(classes))
        task_ids, new_labels = self._map_tasks(tasks, n)
        return X, y_pm1, form, task_ids, new_labels

    def _ensure_core(self, X):
        """The model's core, building it (not yet attached) on the first batch."""
        if self._is_fitted():
            return self._core, False
        n_features, sparse = X.shape[1], sp.issparse(X)
        if type(self)._make_core is not OnlineClassifier._make_core:
            # A reference twin: the engine checks its hyper-parameters first (its rules are the
            # one place of them), so that it refuses exactly what its native class refuses.
            OnlineClassifier._make_core(self, n_features, sparse)
        return self._make_core(n_features, sparse), True

    def _core_for(self, X):
        """``_ensure_core``, after scanning X for NaN/inf unless the core does so itself."""
        core, new = self._ensure_core(X)
        if not core.checks_finite_X:
            check_finite_X(X)
        return core, new

    @locked
    def _run_learn(self, X, y, tasks, rounds=_P1, classes=None):
        """Learns a batch (protocol P1, or P2 when ``rounds`` is given) and returns the
        pre-update scores and the label form. Everything that can fail is checked or computed
        before the core is called; the Python-side state changes only after it succeeded (or
        was interrupted, keeping the rows it completed)."""
        feature_names = self._check_columns(X)
        X, y_pm1, form, task_ids, new_labels = self._prepare(X, y, tasks, classes)
        round_ids = None if rounds is _P1 else check_rounds(rounds, task_ids)
        if X.shape[0] == 0:
            return np.zeros(0), form
        label_mode = self._label_mode(tasks)
        n_new = self._n_new_engine_tasks(new_labels)
        if not self._is_fitted() and self.n_tasks is None:
            # The first batch of an open-ended model builds the engine with its fewest tasks and
            # grows it by the labels' (as a fitted model grows), so that an interrupt keeps only
            # the tasks of the rows learned.
            self._pending_n_tasks = min(max(1, self._engine_n_tasks(0)), n_new)
            n_new -= self._pending_n_tasks
            try:
                core, new = self._core_for(X)
                counts = self._task_counts(task_ids, n_new)
            finally:
                del self._pending_n_tasks
        else:
            core, new = self._core_for(X)
            counts = self._task_counts(task_ids, n_new)
        self._before_learn(core, X)
        try:
            if round_ids is not None:
                scores = core.learn_rounds(X, task_ids, y_pm1, round_ids, n_new)
            else:
                scores = core.learn(X, task_ids, y_pm1, n_new)
        except BaseException as exc:
            # An interrupted native call (Ctrl-C) kept the rows it completed and the tasks their
            # labels need: count them.
            partial = getattr(exc, "omtl_partial_scores", None)
            if partial is not None and (len(partial) or not new):
                n = len(partial)
                reached = self._labels_reached(task_ids[:n], new_labels, new)
                n_kept = self._n_new_engine_tasks(reached)
                if new and self.n_tasks is None:
                    n_kept -= counts.shape[0] - n_new  # the tasks the core was built with
                done = np.unique(task_ids[:n], return_counts=True) if not new else np.bincount(task_ids[:n], minlength=counts.shape[0] - n_new + n_kept)
                self._commit_tasks(label_mode, reached, n_kept, done)
                self._record(core, new, X.shape[1], np.asarray(partial, dtype=np.float64), y_pm1[:n], form)
                self._record_feature_names(feature_names if new else None)
            raise
        scores = np.asarray(scores, dtype=np.float64)
        self._commit_tasks(label_mode, new_labels, n_new, counts)
        self._record(core, new, X.shape[1], scores, y_pm1, form)
        self._record_feature_names(feature_names if new else None)
        return scores, form

    def _labels_reached(self, learned_ids, new_labels: list, first: bool) -> list:
        """The new labels that the rows learned before an interrupt name: the first ones, as
        new labels take their tasks in order of first appearance (free tasks first)."""
        if not new_labels or len(learned_ids) == 0:
            return []
        ids = np.unique(learned_ids)
        if first:
            return new_labels[: len(ids)]
        tasks = self._tasks
        free = set(tasks.free[: len(new_labels)])
        return new_labels[: int(np.count_nonzero((ids >= len(tasks.labels)) | np.isin(ids, list(free))))]

    def _commit_tasks(self, label_mode: bool, new_labels: list, n_new: int, counts) -> None:
        """The Python-side record of a learned batch's tasks (no failure): ``counts`` are a first
        batch's per-task counts (``_task_counts``), else ``(task indices, counts)``."""
        if self._is_fitted():
            tasks = self._tasks
            if n_new:
                tasks.grow(n_new)
            ids, n = counts
            tasks.counts[ids] += n
        else:
            tasks = self._tasks = TaskSet(counts, self.n_tasks, [] if label_mode else None)
        if label_mode:
            tasks.add_labels(new_labels)

    def _task_counts(self, task_ids, n_new: int = 0):
        """Examples per task in a batch: for a model's first batch a length-n_tasks array (its
        ``n_seen_per_task_``); for a fitted model ``(task indices, counts)`` of the tasks the
        batch names (no O(n_tasks) work per call), with room reserved for ``n_new`` new tasks."""
        if self._is_fitted():
            if n_new:
                self._tasks.reserve(n_new)
            return np.unique(task_ids, return_counts=True)
        k = self._check_n_tasks() + n_new
        try:
            return np.bincount(task_ids, minlength=k)
        except (MemoryError, ValueError):  # numpy refuses or cannot allocate k counters
            raise ValueError(f"n_tasks={k} is too large: the per-task example counts alone need {8 * k:,} bytes") from None

    def _record(self, core, new, n_features, scores, y_pm1, form):
        """The Python-side bookkeeping of learned rows (nothing here can fail)."""
        pred = np.where(scores >= 0.0, 1.0, -1.0)
        mistakes = int(np.count_nonzero(pred != y_pm1))
        if new:
            self._core = core
            self.n_features_in_ = n_features
            self.n_seen_ = 0
            self.n_mistakes_ = 0
        self.n_seen_ += scores.shape[0]
        self.n_mistakes_ += mistakes
        if scores.shape[0]:
            self._label_form = form

    @fill_doc
    def partial_fit(self, X, y, *, tasks=None, classes=None):
        """Runs the online protocol on the rows of ``X`` in order (predict, then update).

        Parameters
        ----------
        {X}
        {y}
        {tasks}
        classes : array-like of shape (2,), default=None
            The two labels (scikit-learn's convention): needed on a first batch of labels other than
            -1/+1, 0/1 or bool when it holds a single one of them.

        Returns
        -------
        self
        """
        # A small batch of known tasks: validated and counted in the binding, in one call.
        rows = None if classes is not None else _small_rows(X)
        if rows is None or learn_small(self, rows, y, tasks) is None:
            self._run_learn(X, y, tasks, classes=classes)
        return self

    @fill_doc
    def learn(self, X, y, *, tasks=None) -> np.ndarray:
        """Like ``partial_fit``, returning the prediction made for each row before its update.

        Parameters
        ----------
        {X}
        {y}
        {tasks}

        Returns
        -------
        {predictions}
        """
        rows = _small_rows(X)
        fast = None if rows is None else learn_small(self, rows, y, tasks)  # see partial_fit
        scores, form = fast if fast is not None else self._run_learn(X, y, tasks)
        return labels_in_form(np.where(scores >= 0.0, 1.0, -1.0), form)

    @fill_doc
    def learn_rounds(self, X, y, *, tasks, rounds) -> np.ndarray:
        """Runs protocol P2 (ALGORITHMS.md §1.2) and returns the predictions made before each update.

        Consecutive rows with the same id in ``rounds`` (non-decreasing integers, one per row) form a
        round, which holds at most one row per task. Round-based learners (ROMCO) predict every row
        of a round with the same model and then make one joint update; every other learner runs the
        rows one by one in the given order (flattening, §1.3), exactly as ``learn`` would. Round ids
        are compared within one call only: do not split a round across calls.

        Parameters
        ----------
        {X}
        {y}
        tasks : array-like of shape (n_samples,) or scalar
            The task of each row (one label for all rows): integer ids in ``[0, n_tasks)``, or any
            hashable labels (``tasks_``); may be left out when the model has exactly one task.
        rounds : array-like of shape (n_samples,)
            The round id of each row.

        Returns
        -------
        {predictions}
        """
        scores, form = self._run_learn(X, y, tasks, rounds)
        return labels_in_form(np.where(scores >= 0.0, 1.0, -1.0), form)

    @locked
    @fill_doc
    def decision_function(self, X, *, tasks=None) -> np.ndarray:
        """The real-valued score f_task(x) of the current model for each row (no update).

        Parameters
        ----------
        {X}
        {tasks}
            A label never seen scores as a new task with no examples (the model is not changed).

        Returns
        -------
        ndarray of shape (n_samples,)
            The scores (0 before the first batch).
        """
        rows = _small_rows(X)
        if rows is not None:  # a small batch of known tasks, scored in the binding
            fast = decision_small(self, rows, tasks)
            if fast is not None:
                return fast
        self._check_columns(X)
        self._check_n_tasks()
        X = check_X(self._dict_rows(X), n_features=getattr(self, "n_features_in_", None), check_finite=False)
        task_ids, new_labels = self._map_tasks(tasks, X.shape[0])
        if not self._is_fitted():  # no core to check X: the scores are 0 but NaN/inf is still an error
            check_finite_X(X)
            return np.zeros(X.shape[0])
        if X.shape[0] == 0:
            return np.zeros(0)
        if not self._core.checks_finite_X:
            check_finite_X(X)
        # Labels never seen score as new tasks with no examples, on a grown copy of the model.
        n_new = self._n_new_engine_tasks(new_labels)
        return np.asarray(self._core.decision(X, task_ids, n_new), dtype=np.float64)

    @locked
    @fill_doc
    def predict(self, X, *, tasks=None, remember=None, now=None) -> np.ndarray:
        """Labels by the sign of the score (0 counts as positive), in the last label form seen.

        Parameters
        ----------
        {X}
        {tasks}
        remember : sequence of str, optional
            One id per row: the rows are kept in the pending store until ``learn_label(id, y)``
            learns them (delayed labels, docs/lifecycle.md).
        now : float, optional
            With ``remember``: the time in seconds (default ``time.time()``).

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted labels (no update).
        """
        if remember is not None:
            X = check_X(self._dict_rows(X), n_features=getattr(self, "n_features_in_", None), check_finite=False)
            scores = self._remember_rows(X, tasks, list(remember), now)
            return labels_in_form(np.where(scores >= 0.0, 1.0, -1.0), getattr(self, "_label_form", PM1))
        scores = self.decision_function(X, tasks=tasks)
        return labels_in_form(np.where(scores >= 0.0, 1.0, -1.0), getattr(self, "_label_form", PM1))

    # ---- one event at a time (the binding's fast path: src/python/events.rs) --------------------
    def learn_one(self, x, y, *, task=None):
        """Runs the online protocol on one event: predicts it, then learns it.

        Equal to ``learn`` on a one-row batch (same model afterwards, same prediction), at a small
        constant cost per event: conversion, validation, the task lookup and the counters run in
        the native binding.

        Parameters
        ----------
        x : 1-D array-like of n_features numbers, or dict
            The event's features: a row of numbers; a dict ``{int column: value}`` (absent
            columns are 0); or a dict ``{str name: value}``, names hashed into ``n_features``
            columns as scikit-learn's ``FeatureHasher(input_type="dict", alternate_sign=False)``
            does (a str value ``v`` of name ``f`` is the feature ``"f=v"`` with value 1), so a
            name never seen before is never dropped. Int and str keys cannot be mixed.
        y : label
            -1/+1, 0/1, bool, or one of the model's two classes. A lone 1 keeps a model's 0/1
            form (it is valid in both -1/+1 and 0/1).
        task : hashable, default=None
            The event's task: an integer id in ``[0, n_tasks)``, or any hashable label
            (``tasks_``; a new label adds a task where the model grows); may be left out when the
            model has exactly one task.

        Returns
        -------
        label
            The prediction made before the update, in the label form of ``y``.
        """
        return learn_event(self, x, y, task)

    @fill_doc
    def predict_one(self, x, *, task=None, remember=None, now=None):
        """The predicted label of one event (no update), in the last label form learned.

        Parameters
        ----------
        {x_event}
        task : hashable, default=None
            As for ``learn_one``; a label never seen scores as a new task with no examples.
        remember : str, optional
            An id under which the event is kept in the pending store until ``learn_label(id, y)``
            learns it (delayed labels, docs/lifecycle.md); an id pending already is replaced.
        now : float, optional
            With ``remember``: the time in seconds (default ``time.time()``).

        Returns
        -------
        label
            The sign of ``decision_one`` (0 counts as positive).
        """
        if remember is not None:
            return self._remember_one(x, task, remember, now)
        return predict_event(self, x, task)

    @fill_doc
    def decision_one(self, x, *, task=None) -> float:
        """The real-valued score f_task(x) of one event (no update).

        Parameters
        ----------
        {x_event}
        {task_event}

        Returns
        -------
        float
            The score (0 before the first event).
        """
        return decision_event(self, x, task)

    def _dict_width(self) -> int:
        # A model pickled before n_features existed has the default.
        return self.__dict__.get("n_features", 2**18)

    def _dict_rows(self, X):
        """A batch given as a list or tuple of dicts as a CSR matrix, each dict read as
        ``learn_one`` reads it (str names hashed into ``n_features`` columns, as
        ``omtl.hash_features`` does; int keys as columns); any other ``X`` unchanged."""
        if not isinstance(X, (list, tuple)) or not X or not isinstance(X[0], dict):
            return X
        fitted = self.n_features_in_ if self._is_fitted() else None
        width = self._dict_width()
        names = all(type(x) is dict and all(type(k) is str for k in x) for x in X)
        if names and fitted in (None, width):
            from ._hashing import hash_features

            return hash_features(X, n_features=width)
        return sp.vstack([self._event_rows(x) for x in X], format="csr")

    def _event_rows(self, x, skip=None):
        """One event's ``x`` as a one-row batch (for the batch path); ``skip``: a dict key that is
        not a feature (a River example's task key)."""
        fitted = self.n_features_in_ if self._is_fitted() else None
        parts = event_row(x, fitted, self._dict_width(), skip)
        if parts[0] == "dense":
            return parts[1].reshape(1, -1)
        _, indices, values, width = parts
        indptr = np.array([0, indices.shape[0]], dtype=np.int64)
        return sp.csr_matrix((values, indices.astype(np.int64), indptr), shape=(1, width))

    @locked
    def _learn_one_slow(self, x, y, task, skip=None):
        """``learn_one`` through the batch path (a model's first event, a reference core, a
        learner with a hook before its updates)."""
        X = self._event_rows(x, skip)
        if y is None:
            raise ValueError("this learner requires y to be passed, but the target y is None")
        if isinstance(y, (list, tuple, dict, set, np.ndarray)):
            raise TypeError(f"y must be one label (learn a batch with learn/partial_fit), got {type(y).__name__}")
        before = getattr(self, "_label_form", None) if self._is_fitted() else None
        scores, form = self._run_learn(X, [y], None if task is None else [task])
        if form == PM1 and before == ZERO_ONE and not isinstance(y, (bool, np.bool_)) and y == 1:
            self._label_form = form = ZERO_ONE  # a lone 1 keeps the 0/1 form (as the fast path)
        return labels_in_form(np.where(scores >= 0.0, 1.0, -1.0), form)[0].item()

    @locked
    def _decision_one_slow(self, x, task, skip=None) -> float:
        """``decision_one`` through the batch path."""
        X = self._event_rows(x, skip)
        return float(self.decision_function(X, tasks=None if task is None else [task])[0])

    # ---- fitted attributes ---------------------------------------------------------------------
    @property
    @locked
    def classes_(self) -> np.ndarray:
        return classes_of(getattr(self, "_label_form", PM1))

    @property
    @locked
    def n_updates_(self) -> int:
        """Number of model updates (for Perceptron-type rules: update-mistakes y f <= 0)."""
        return int(self._core.n_updates) if self._is_fitted() else 0

    @property
    @locked
    def n_active_(self) -> int:
        """The examples the model stores: the active set of a kernel or budget learner, every
        example seen for MTFL/TRML; for a learner with fixed-size weights (and the Perceptrons in
        primal form) the number of updates (README, "What n_active_ counts")."""
        return int(self._core.n_active) if self._is_fitted() else 0

    @property
    @locked
    def active_tasks_(self) -> np.ndarray:
        """Ids (labels) of the tasks that have had at least one example so far."""
        if not self._is_fitted():
            return np.zeros(0, dtype=np.int64)
        if self._tasks.label_mode:
            return self.tasks_[self.n_seen_per_task_ > 0]
        return np.flatnonzero(self._tasks.counts)

    @property
    @locked
    def n_seen_per_task_(self) -> np.ndarray:
        """Examples seen per task, in the order of ``tasks_``."""
        if not self._is_fitted():
            return np.zeros(self.n_tasks or 0, dtype=np.int64)
        return self._tasks.seen()

    @property
    @locked
    def tasks_(self) -> np.ndarray:
        """The task labels in index order: ``arange(n_tasks)`` for integer task ids with a fixed
        ``n_tasks``; else the labels seen so far, in order of first appearance (the mapping
        pickles and ``omtl.save`` keep)."""
        if self._is_fitted():
            return self._tasks.ids()
        return np.arange(self.n_tasks) if isinstance(self.n_tasks, (int, np.integer)) and not isinstance(self.n_tasks, bool) else np.zeros(0, dtype=np.int64)

    @locked
    def add_tasks(self, labels, *, graph=None):
        """Grows a fitted model by new tasks, which start with no examples (DECISIONS.md,
        "Open-ended task sets").

        Parameters
        ----------
        labels : sequence
            The new tasks' labels (label mode) or, for a model with integer ids, the next ids
            ``n_tasks, n_tasks + 1, ...``.
        graph : TaskGraph, optional
            For a model built on a ``TaskGraph``: the grown graph, ``graph.add_tasks(len(labels))``.

        Returns
        -------
        self

        Supported where the learner grows (MTPerceptron, KernelPerceptron, MTRBP, MTFORG, MTBPRJ,
        MTBPRJ2 with the disconnected graph, MTLinear, PAUnique, PAGlobal, CWCOL, OMTL) and the task kernel
        keeps its existing entries: the disconnected graph and the open-ended complete graph of
        ``n_tasks=None``. A fixed-k complete graph (T depends on k) and a general TaskGraph (a new
        task's edges change ``(I + L)^-1``) cannot grow a fitted model: fit a new one. Atomic.
        """
        if not self._is_fitted():
            raise ValueError("add_tasks grows a fitted model; before fitting, set n_tasks (or n_tasks=None for tasks that keep arriving)")
        self._check_n_tasks()
        if not self._grows:
            self._check_open_ended()  # raises with the reason
        if isinstance(labels, (str, bytes)) or not hasattr(labels, "__iter__"):
            labels = [labels]  # one label, not its characters
        labels = list(labels)
        new = label_list(labels, len(labels))
        tasks = self._tasks
        k = tasks.n_engine_tasks
        if tasks.label_mode:
            if len(set(new)) != len(new) or any(v in tasks.index for v in new):
                raise ValueError("add_tasks: the labels must be new and distinct")
            m = tasks.tasks_needed(len(new))
            n_new = max(0, self._engine_n_tasks(m) - k) if self.n_tasks is None else max(0, m - k)
        else:
            if new != list(range(k, k + len(new))):
                raise ValueError(f"add_tasks: a model with integer task ids grows by the next ids {k}, {k + 1}, ...; got {new!r:.80}")
            n_new = len(new)
        if not new:
            return self
        current = getattr(self, "graph", None)
        if isinstance(current, TaskGraph) and n_new:
            if graph is None or not isinstance(graph, TaskGraph) or graph != current.add_tasks(n_new):
                raise ValueError(f"add_tasks: pass graph=model.graph.add_tasks({n_new}) for a model built on a TaskGraph")
            if current.kind not in ("disconnected", "complete_open"):
                raise ValueError(
                    f"a fitted model on a {current.kind!r} task graph cannot grow: a new task changes its task kernel "
                    "for the existing tasks; fit a new model on the larger graph"
                )
        elif graph is not None and not isinstance(current, TaskGraph):
            raise ValueError("add_tasks: graph= is only for a model built on a TaskGraph")
        elif current == "complete" and self.n_tasks is not None:
            raise ValueError(
                "a fitted model on the fixed complete graph cannot grow: its task kernel (I + 11^T)/(k+1) depends on k; "
                "build the model with n_tasks=None for the open-ended complete graph (T_ii = 1, T_ij = 1/2)"
            )
        why = self._open_graph_error() if not isinstance(current, TaskGraph) else None
        if why is not None:
            raise ValueError(f"this model cannot grow: {why}")
        if n_new:
            tasks.reserve(n_new)
            self._core.add_tasks(n_new)  # atomic; raises for a learner or state that cannot grow
            tasks.grow(n_new)
        if tasks.label_mode:
            tasks.add_labels(new)
        if self.n_tasks is not None:
            self.n_tasks = tasks.n_tasks_at_fit = tasks.n_engine_tasks
        if isinstance(current, TaskGraph) and n_new:
            self.graph = graph
        return self

    @locked
    def _diagnostics(self) -> dict:
        return dict(self._core.diagnostics()) if self._is_fitted() else {}

    @locked
    def _diagnostic(self, name: str, before_fit):
        """One of the core's diagnostics (a KeyError if the core has no such value), or
        ``before_fit`` while there is no core."""
        return self._core.diagnostics()[name] if self._is_fitted() else before_fit

    # ---- persistence and copies ----------------------------------------------------------------
    @locked
    def __getstate__(self):
        # A consistent, independent state: the core as a snapshot, arrays and the task set
        # copied, no lock (another thread may add labels while the state is pickled, outside the
        # lock).
        state = {k: (v.copy() if isinstance(v, (np.ndarray, list, dict, TaskSet, PendingEvents)) else v) for k, v in self.__dict__.items() if k != "_lock"}
        if self._is_fitted():
            state["_core"] = self._core.snapshot()
        state["__omtl_state_version__"] = STATE_VERSION
        return state

    def __setstate__(self, state):
        state = dict(state)
        version = state.pop("__omtl_state_version__", None)
        if version != STATE_VERSION:
            raise ValueError(f"cannot load a {type(self).__name__} saved with state version {version}; this omtl reads {STATE_VERSION}")
        if isinstance(state.get("_core"), CoreSnapshot):  # copy.copy hands the snapshot over as is
            state["_core"] = state["_core"].restore()
        state.pop("_lock", None)
        state.pop("_seen_buf", None)
        if "_tasks" not in state:  # pickled with one attribute per field
            tasks = TaskSet.from_legacy(state)
            if tasks is not None:
                state["_tasks"] = tasks
        self.__dict__.update(state)
        check_restored(self, settings=False)

    def __copy__(self):
        """An independent model (a shallow copy would share the fitted core with this one)."""
        return self.__deepcopy__({})

    def __deepcopy__(self, memo):
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return new
