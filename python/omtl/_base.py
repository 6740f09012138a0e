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

import numpy as np
import scipy.sparse as sp

from ._validation import (
    PM1,
    check_finite_X,
    check_labels,
    check_rounds,
    check_tasks,
    check_X,
    classes_of,
    csr_parts,
    labels_in_form,
)

# Bumped whenever a native model's serialized layout changes (2: ROMCO keeps the eigenvalues
# of C after the last thresholding, for the updated eigendecomposition of route (b); 3: the
# Projectrons' drift-probe count, OMTRL's "coupling is fresh" flag, and MTLinear, whose weights
# and statistics are stored in single precision; 4: ROMCO's row-side Gram route for wide U (the
# eigendecomposition of D = UUᵀ), its factored tall U = W Π (Π, Π⁻¹) and their counters).
STATE_VERSION = 4

# `rounds` of a protocol-P1 call (None is a user's missing round ids, an error).
_P1 = object()

# Guards the lazy creation of the per-model locks (a model built by ``__init__`` has none yet).
_LOCK_INIT = threading.Lock()


def _as_native_rows(X):
    return csr_parts(X) if sp.issparse(X) else X


class NativeCore:
    """Adapter from the batch protocol to ``omtl._native.NativeLearner`` (and its pickling)."""

    # learn, learn_rounds and decision validate the whole batch in Rust (Rows::validate, which
    # also scans X for NaN and infinity) before they touch the model, so Python need not scan X.
    checks_finite_X = True

    def __init__(self, learner):
        self._learner = learner

    def learn(self, X, tasks, y):
        return self._learner.learn(_as_native_rows(X), tasks, y)

    def decision(self, X, tasks):
        return self._learner.decision(_as_native_rows(X), tasks)

    def learn_rounds(self, X, tasks, y, rounds):
        return self._learner.learn_rounds(_as_native_rows(X), tasks, y, rounds)

    def radius_exceeded(self, X):
        return self._learner.radius_exceeded(_as_native_rows(X))

    def __getattr__(self, name):
        # n_updates, n_active, diagnostics, learn_rounds, ... come straight from the engine.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["_learner"], name)

    def __getstate__(self):
        return {"state": bytes(self._learner.to_bytes())}

    def __setstate__(self, state):
        from ._native import NativeLearner

        self._learner = NativeLearner.from_bytes(state["state"])

    def snapshot(self):
        """The state now, as an object that pickles and copies to a ``NativeCore``."""
        return _NativeSnapshot(self.__getstate__())


def _native_core_from_state(state) -> NativeCore:
    core = NativeCore.__new__(NativeCore)
    core.__setstate__(state)
    return core


class _NativeSnapshot:
    """A native core's serialised state, taken under the model's lock: pickling and copying
    a model go through it, so they see one consistent state whatever other threads do next."""

    def __init__(self, state):
        self.state = state

    def __reduce__(self):
        return (_native_core_from_state, (self.state,))

    def restore(self) -> NativeCore:
        return _native_core_from_state(self.state)


def _snapshot(core):
    """An independent copy of a core's state (see ``_NativeSnapshot``)."""
    return core.snapshot() if isinstance(core, NativeCore) else copy.deepcopy(core)


def _locked(method):
    """Runs a method under the model's lock (see ``OnlineClassifier._model_lock``)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._model_lock():
            return method(self, *args, **kwargs)

    return wrapper


class OnlineClassifier:
    """Base class of all learners. Subclasses define ``__init__`` and ``_make_core``."""

    # ---- hyper-parameters (scikit-learn conventions) -------------------------------------------
    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind is p.KEYWORD_ONLY]

    @_locked
    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    @_locked
    def set_params(self, **params):
        """Sets hyper-parameters; all of them or, on an error, none. ``n_tasks`` fixes the shape
        of a fitted model and cannot change after the first batch (the others are read when the
        core is built, on the first batch)."""
        valid = set(self._param_names())
        for name in params:
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; valid: {sorted(valid)}")
        if "n_tasks" in params and self._is_fitted() and params["n_tasks"] != self._fitted_n_tasks():
            raise ValueError(
                f"cannot set n_tasks={params['n_tasks']!r} on a model fitted with n_tasks={self._fitted_n_tasks()}: "
                "build a new model (or sklearn.base.clone it) to learn a different number of tasks"
            )
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ---- to be provided by subclasses ----------------------------------------------------------
    def _make_core(self, n_features: int, sparse: bool):
        raise NotImplementedError

    def _check_n_tasks(self) -> int:
        k = self.n_tasks
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
        return int(self._seen_per_task.shape[0])

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

    def _prepare(self, X, y, tasks):
        """Checks a batch; the scan of X for NaN/inf is left to ``_core_for``."""
        n_tasks = self._check_n_tasks()
        X = check_X(X, n_features=getattr(self, "n_features_in_", None), check_finite=False)
        n = X.shape[0]
        y_pm1, form = check_labels(y, n)
        task_ids = check_tasks(tasks, n, n_tasks)
        return X, y_pm1, form, task_ids

    def _ensure_core(self, X):
        """The model's core, building it (not yet attached) on the first batch."""
        if self._is_fitted():
            return self._core, False
        return self._make_core(X.shape[1], sp.issparse(X)), True

    def _core_for(self, X):
        """``_ensure_core``, after scanning X for NaN/inf unless the core does so itself."""
        core, new = self._ensure_core(X)
        if not getattr(core, "checks_finite_X", False):
            check_finite_X(X)
        return core, new

    @_locked
    def _run_learn(self, X, y, tasks, rounds=_P1):
        """Learns a batch (protocol P1, or P2 when ``rounds`` is given) and returns the
        pre-update scores and the label form. Everything that can fail is checked or computed
        before the core is called; the Python-side state changes only after it succeeded (or
        was interrupted, keeping the rows it completed)."""
        X, y_pm1, form, task_ids = self._prepare(X, y, tasks)
        round_ids = None if rounds is _P1 else check_rounds(rounds, task_ids)
        if X.shape[0] == 0:
            return np.zeros(0), form
        core, new = self._core_for(X)
        counts = self._task_counts(task_ids)
        self._before_learn(core, X)
        try:
            if round_ids is not None and hasattr(core, "learn_rounds"):
                scores = core.learn_rounds(X, task_ids, y_pm1, round_ids)
            else:  # P1, or a P1-only core flattening the rounds row by row (§1.3)
                scores = core.learn(X, task_ids, y_pm1)
        except BaseException as exc:
            # An interrupted native call (Ctrl-C) kept the rows it completed: count them.
            partial = getattr(exc, "omtl_partial_scores", None)
            if partial is not None and (len(partial) or not new):
                n = len(partial)
                done = np.bincount(task_ids[:n], minlength=counts.shape[0])
                self._record(core, new, X.shape[1], np.asarray(partial, dtype=np.float64), y_pm1[:n], done, form)
            raise
        scores = np.asarray(scores, dtype=np.float64)
        self._record(core, new, X.shape[1], scores, y_pm1, counts, form)
        return scores, form

    def _task_counts(self, task_ids) -> np.ndarray:
        """Examples per task in a batch, as a length-n_tasks array (``n_seen_per_task_``)."""
        k = self._check_n_tasks()
        try:
            return np.bincount(task_ids, minlength=k)
        except (MemoryError, ValueError):  # numpy refuses or cannot allocate k counters
            raise ValueError(f"n_tasks={k} is too large: the per-task example counts alone need {8 * k:,} bytes") from None

    def _record(self, core, new, n_features, scores, y_pm1, counts, form):
        """The Python-side bookkeeping of learned rows (nothing here can fail)."""
        pred = np.where(scores >= 0.0, 1.0, -1.0)
        mistakes = int(np.count_nonzero(pred != y_pm1))
        if new:
            self._core = core
            self.n_features_in_ = n_features
            self.n_seen_ = 0
            self.n_mistakes_ = 0
            self._seen_per_task = counts
        else:
            self._seen_per_task += counts
        self.n_seen_ += scores.shape[0]
        self.n_mistakes_ += mistakes
        if scores.shape[0]:
            self._label_form = form

    def partial_fit(self, X, y, *, tasks):
        """Runs the online protocol on the rows of ``X`` in order (predict, then update)."""
        self._run_learn(X, y, tasks)
        return self

    def learn(self, X, y, *, tasks) -> np.ndarray:
        """Like ``partial_fit``, returning the prediction made for each row before its update,
        in the label form of ``y`` (-1/+1, 0/1 or bool)."""
        scores, form = self._run_learn(X, y, tasks)
        return labels_in_form(np.where(scores >= 0.0, 1.0, -1.0), form)

    def learn_rounds(self, X, y, *, tasks, rounds) -> np.ndarray:
        """Runs protocol P2 (ALGORITHMS.md §1.2) and returns the predictions made before each
        update, in the label form of ``y``.

        Consecutive rows with the same id in ``rounds`` (non-decreasing integers, one per row)
        form a round, which holds at most one row per task. Round-based learners (ROMCO) predict
        every row of a round with the same model and then make one joint update; every other
        learner runs the rows one by one in the given order (flattening, §1.3), exactly as
        ``learn`` would. Round ids are compared within one call only: do not split a round
        across calls.
        """
        scores, form = self._run_learn(X, y, tasks, rounds)
        return labels_in_form(np.where(scores >= 0.0, 1.0, -1.0), form)

    @_locked
    def decision_function(self, X, *, tasks) -> np.ndarray:
        """The real-valued score f_task(x) of the current model for each row (no update)."""
        n_tasks = self._check_n_tasks()
        X = check_X(X, n_features=getattr(self, "n_features_in_", None), check_finite=False)
        task_ids = check_tasks(tasks, X.shape[0], n_tasks)
        if not self._is_fitted():  # no core to check X: the scores are 0 but NaN/inf is still an error
            check_finite_X(X)
            return np.zeros(X.shape[0])
        if X.shape[0] == 0:
            return np.zeros(0)
        if not getattr(self._core, "checks_finite_X", False):
            check_finite_X(X)
        return np.asarray(self._core.decision(X, task_ids), dtype=np.float64)

    @_locked
    def predict(self, X, *, tasks) -> np.ndarray:
        """Labels by the sign of the score (0 counts as positive), in the last label form seen."""
        scores = self.decision_function(X, tasks=tasks)
        return labels_in_form(np.where(scores >= 0.0, 1.0, -1.0), getattr(self, "_label_form", PM1))

    # ---- fitted attributes ---------------------------------------------------------------------
    @property
    @_locked
    def classes_(self) -> np.ndarray:
        return classes_of(getattr(self, "_label_form", PM1))

    @property
    @_locked
    def n_updates_(self) -> int:
        """Number of model updates (for Perceptron-type rules: update-mistakes y f <= 0)."""
        return int(self._core.n_updates) if self._is_fitted() else 0

    @property
    @_locked
    def n_active_(self) -> int:
        """Size of the active set (for linear models: the number of examples it sums)."""
        return int(self._core.n_active) if self._is_fitted() else 0

    @property
    @_locked
    def active_tasks_(self) -> np.ndarray:
        """Ids of the tasks that have had at least one example so far."""
        if not self._is_fitted():
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(self._seen_per_task)

    @property
    @_locked
    def n_seen_per_task_(self) -> np.ndarray:
        return self._seen_per_task.copy() if self._is_fitted() else np.zeros(self.n_tasks, dtype=np.int64)

    @_locked
    def _diagnostics(self) -> dict:
        return dict(self._core.diagnostics()) if self._is_fitted() else {}

    # ---- persistence and copies ----------------------------------------------------------------
    @_locked
    def __getstate__(self):
        # A consistent, independent state: the core as a snapshot, arrays copied, no lock.
        state = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items() if k != "_lock"}
        if self._is_fitted():
            state["_core"] = _snapshot(self._core)
        state["__omtl_state_version__"] = STATE_VERSION
        return state

    def __setstate__(self, state):
        state = dict(state)
        version = state.pop("__omtl_state_version__", None)
        if version != STATE_VERSION:
            raise ValueError(f"cannot load a {type(self).__name__} saved with state version {version}; this omtl reads {STATE_VERSION}")
        if isinstance(state.get("_core"), _NativeSnapshot):  # copy.copy hands the snapshot over as is
            state["_core"] = state["_core"].restore()
        state.pop("_lock", None)
        self.__dict__.update(state)
        from .persistence import check_restored  # (a cycle at import time)

        check_restored(self, settings=False)

    def __copy__(self):
        """An independent model (a shallow copy would share the fitted core with this one)."""
        return self.__deepcopy__({})

    def __deepcopy__(self, memo):
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return new
