"""Delayed labels (docs/lifecycle.md): an event is scored when it arrives and learned when its
label comes, later.

``predict_one(x, task=..., remember=ID)`` (and ``predict(X, tasks=..., remember=[ids])``) scores
an event as ``decision_one`` does and keeps its row (as learned: dense, or the columns of a dict
hashed), task, served score and time in the model's pending store; ``learn_label(ID, y)`` learns
it as ``learn_one`` would at that point, and the progressive counters (``n_mistakes_``) count the
prediction that was served. Learning events this way in any order of label arrival gives the
model, bit for bit, that ``learn_one`` gives in the order the labels arrived.

The store follows the engine's rule (``omtl::model::PendingStore``): at most ``max_events``
events and ``max_bytes`` bytes (96 per event, plus its id, task label and row: 8 bytes a dense
value, 12 a column), the oldest evicted first; an event older than ``max_age`` seconds cannot be
learned, and the next ``remember`` drops the expired events at the old end. Time is the
caller's (``now=``, seconds; by default ``time.time()``). An unknown id is a ``KeyError``, an
expired one a ``ValueError``. The store is saved with the model (pickles, and model files'
pending section).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from ._native import event_row
from ._validation import PM1, check_labels, labels_in_form

# The engine's default limits (omtl::model::PendingLimits) and its fixed cost of an event.
DEFAULT_LIMITS = (1_000_000, 256 << 20, 30.0 * 86_400.0)
EVENT_OVERHEAD = 96
MAX_ID_BYTES = 1 << 16


class PendingEvents:
    """The events kept, oldest first (a dict keeps insertion order: id -> (row, task, served
    score, time, bytes)), their bytes, the limits and the counts of evicted and expired events."""

    __slots__ = ("events", "bytes", "limits", "evicted", "expired")

    def __init__(self, limits=DEFAULT_LIMITS):
        self.events, self.bytes, self.limits = {}, 0, tuple(limits)
        self.evicted = self.expired = 0

    def __getstate__(self):
        return {name: getattr(self, name) for name in self.__slots__}

    def __setstate__(self, state):
        for name in self.__slots__:
            setattr(self, name, state[name])

    def copy(self):
        out = PendingEvents(self.limits)
        out.events, out.bytes, out.evicted, out.expired = dict(self.events), self.bytes, self.evicted, self.expired
        return out

    def make_room(self, size, now):
        max_events, max_bytes, max_age = self.limits
        while self.events:
            oldest = next(iter(self.events))
            if now - self.events[oldest][3] <= max_age:
                break
            self.remove(oldest)
            self.expired += 1
        while self.events and (len(self.events) >= max_events or self.bytes + size > max_bytes):
            self.remove(next(iter(self.events)))
            self.evicted += 1

    def remove(self, event_id):
        event = self.events.pop(event_id)
        self.bytes -= event[4]
        return event


# A kept row: ("dense", values) or ("columns", indices, values, width), as the engine keeps it
# (no per-event matrix object: a pending event costs what its values take).


def _rows_of(X) -> list:
    """The rows of a validated batch (an ndarray or a CSR matrix) as kept rows."""
    if sp.issparse(X):
        X = X.tocsr()
        return [("columns", X.indices[a:b].astype(np.int64), X.data[a:b].astype(np.float64), X.shape[1])
                for a, b in zip(X.indptr[:-1], X.indptr[1:])]
    return [("dense", np.array(r, dtype=np.float64)) for r in X]


def _row_of_event(parts) -> tuple:
    """A kept row from ``omtl._native.event_row``'s conversion of one event."""
    if parts[0] == "dense":
        return ("dense", parts[1])
    return ("columns", parts[1].astype(np.int64), parts[2], parts[3])


def _event_bytes(event_id: str, task, row) -> int:
    task_bytes = len(task.encode()) if isinstance(task, str) else 0
    values = 8 * row[1].shape[0] if row[0] == "dense" else 12 * row[1].shape[0]
    return EVENT_OVERHEAD + len(event_id.encode()) + task_bytes + values


def _check_id(event_id) -> str:
    if not isinstance(event_id, str):
        raise TypeError(f"an event id is a str, got {type(event_id).__name__}")
    if not 0 < len(event_id.encode()) <= MAX_ID_BYTES:
        raise ValueError(f"an event id must have 1 to {MAX_ID_BYTES} bytes")
    return event_id


def _check_now(now) -> float:
    now = time.time() if now is None else now
    if isinstance(now, bool) or not isinstance(now, (int, float, np.integer, np.floating)) or not math.isfinite(now):
        raise ValueError(f"now must be a finite number of seconds, got {now!r}")
    return float(now)


class DelayedLabelsMixin:
    """The pending store and ``learn_label`` (mixed into ``OnlineClassifier``)."""

    def _pending_store(self) -> PendingEvents:
        store = self.__dict__.get("_pending")
        if store is None:
            store = self._pending = PendingEvents()
        return store

    def _remember_rows(self, X, tasks, ids, now):
        """Scores the rows and keeps them under ``ids``; returns the scores (atomic: every id and
        row is checked before the store changes)."""
        ids = [_check_id(i) for i in ids]
        if len(ids) != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but remember has {len(ids)} ids")
        if len(set(ids)) != len(ids):
            raise ValueError("remember: an id is named twice")
        now = _check_now(now)
        scores = self.decision_function(X, tasks=tasks)
        task_list = [None] * len(ids) if tasks is None else (
            [tasks] * len(ids) if isinstance(tasks, (str, bytes)) or np.ndim(tasks) == 0 else list(tasks))
        self._keep(ids, task_list, _rows_of(X), scores, now)
        return scores

    def _keep(self, ids, task_list, rows, scores, now) -> None:
        """Puts scored events in the store (checked first: a failure keeps nothing)."""
        sizes = [_event_bytes(i, t, r) for i, t, r in zip(ids, task_list, rows)]
        store = self._pending_store()
        if max(sizes, default=0) > store.limits[1]:
            raise ValueError(f"an event takes {max(sizes)} bytes, over the pending store's max_bytes={store.limits[1]}")
        for event_id, task, row, score, size in zip(ids, task_list, rows, scores, sizes):
            if event_id in store.events:
                store.remove(event_id)
            store.make_room(size, now)
            task = task.item() if isinstance(task, np.generic) else task
            store.events[event_id] = (row, task, float(score), now, size)
            store.bytes += size

    def _remember_one(self, x, task, event_id, now):
        with self._model_lock():
            event_id, now = _check_id(event_id), _check_now(now)
            fitted = self.n_features_in_ if self._is_fitted() else None
            row = _row_of_event(event_row(x, fitted, self._dict_width()))
            score = self.decision_one(x, task=task)
            self._keep([event_id], [task], [row], [score], now)
            return labels_in_form(np.array([1.0 if score >= 0 else -1.0]), getattr(self, "_label_form", PM1))[0].item()

    def learn_label(self, event_id, y, *, now=None):
        """Learns the event kept under ``event_id`` with its label ``y``, as ``learn_one`` would
        now; ``n_mistakes_`` counts the prediction served when it was remembered.

        Parameters
        ----------
        event_id : str
            The id given to ``predict_one(..., remember=event_id)`` (or ``predict``).
        y : label
            The event's label, as ``learn_one`` takes it.
        now : float, optional
            The time in seconds (default ``time.time()``), against the store's ``max_age``.

        Returns
        -------
        label
            The prediction the model made just before this update (as ``learn_one``).

        Raises
        ------
        KeyError
            For an id not pending (never remembered, learned already, evicted, dropped).
        ValueError
            For an expired event (older than ``max_age``): it stays in the store.
        """
        with self._model_lock():
            now = _check_now(now)
            store = self._pending_store()
            if event_id not in store.events:
                raise KeyError(event_id)
            row, task, served, remembered, _ = store.events[event_id]
            age, max_age = now - remembered, store.limits[2]
            if age > max_age:
                raise ValueError(f"the event {event_id!r} expired: remembered {age:g} s ago, max_age={max_age:g} s")
            if y is None or isinstance(y, (list, tuple, dict, set, np.ndarray)):
                raise TypeError(f"y must be one label, got {type(y).__name__}")
            if row[0] == "dense":
                predicted = self.learn_one(row[1], y, task=task)
            elif self._is_fitted():
                predicted = self.learn_one(dict(zip(row[1].tolist(), row[2].tolist())), y, task=task)
            else:  # a first event of columns: the batch path keeps the row's width
                X = sp.csr_matrix((row[2], row[1], np.array([0, row[1].shape[0]])), shape=(1, row[3]))
                scores, form = self._run_learn(X, [y], None if task is None else [task])
                predicted = labels_in_form(np.array([1.0 if scores[0] >= 0 else -1.0]), form)[0].item()
            store.remove(event_id)
            # learn_one counted its own prediction: count the one served instead (both in the
            # form of y, which learn_one checked).
            served_label = labels_in_form(np.array([1.0 if served >= 0 else -1.0]), self._label_form)[0].item()
            self.n_mistakes_ += int(served_label != y) - int(predicted != y)
            return predicted

    def set_pending_limits(self, *, max_events=None, max_bytes=None, max_age=None):
        """Sets the pending store's bounds (None keeps one); the oldest events are evicted at the
        next ``remember`` if the store is over them.

        Returns
        -------
        self
        """
        with self._model_lock():
            store = self._pending_store()
            new = tuple(old if v is None else v for old, v in zip(store.limits, (max_events, max_bytes, max_age)))
            for name, v in zip(("max_events", "max_bytes"), new[:2]):
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                    raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
            if isinstance(new[2], bool) or not isinstance(new[2], (int, float)) or math.isnan(new[2]) or new[2] <= 0:
                raise ValueError(f"max_age must be a positive number of seconds, got {new[2]!r}")
            store.limits = (int(new[0]), int(new[1]), float(new[2]))
            return self

    @property
    def pending_(self) -> dict:
        """The pending store: ``count``, ``bytes``, the limits, and the ``evicted`` and
        ``expired`` counts."""
        with self._model_lock():
            s = self._pending_store()
            max_events, max_bytes, max_age = s.limits
            return {"count": len(s.events), "bytes": s.bytes, "max_events": max_events, "max_bytes": max_bytes,
                    "max_age": max_age, "evicted": s.evicted, "expired": s.expired}

    def _forget_pending(self, labels) -> int:
        """Drops the pending events of the tasks ``labels`` (a forgotten user's)."""
        store = self.__dict__.get("_pending")
        if store is None:
            return 0
        gone = set(labels)
        doomed = [i for i, e in store.events.items() if e[1] is not None and e[1] in gone]
        for i in doomed:
            store.remove(i)
        return len(doomed)

    # ---- the model file's pending section (omtl.persistence) ----------------------------------
    def _pending_tuple(self):
        """The store in the form the native model file writer takes (None when empty)."""
        store = self.__dict__.get("_pending")
        if store is None or not (store.events or store.evicted or store.expired):
            return None
        events = []
        for event_id, (row, task, score, when, _) in store.events.items():
            if row[0] == "columns":
                events.append((event_id, task, "columns", row[1].astype(np.float64).tolist(), row[2].tolist(), score, when))
            else:
                events.append((event_id, task, "dense", row[1].tolist(), None, score, when))
        return events, store.limits, store.evicted, store.expired

    def _restore_pending(self, pending, width) -> None:
        """The store from the native reader's form (rows of ``width`` columns)."""
        store = PendingEvents(pending[1])
        store.evicted, store.expired = pending[2], pending[3]
        for event_id, task, kind, a, b, score, when in pending[0]:
            if kind == "dense":
                row = ("dense", np.array(a, dtype=np.float64))
            else:
                row = ("columns", np.array(a, dtype=np.int64), np.array(b, dtype=np.float64), width)
            size = _event_bytes(event_id, task, row)
            store.events[event_id] = (row, task, float(score), float(when), size)
            store.bytes += size
        self._pending = store


def evaluate_delayed(model, X, y=None, *, tasks=None, delay: int = 0, curve_points: int = 200):
    """Replays a stream with labels that arrive ``delay`` events late, as River's
    ``progressive_val_score(delay=...)`` does: event ``i`` is predicted (and remembered) when it
    arrives, and its label is learned when event ``i + delay`` has been predicted; the labels
    still pending at the end are learned then. Every learner; the model is updated in place.

    The error counts the predictions served (made ``delay`` labels behind); ``delay=0`` is the
    usual prequential pass, one event at a time. Time is the event number (``now=i``), so the
    store's age limit counts events.

    Parameters
    ----------
    model : omtl learner
        Updated in place.
    X : array-like, scipy.sparse matrix or Stream
        The rows (or a ``omtl.datasets.Stream`` with rows, labels and tasks).
    y : array-like of shape (n,), optional
        Labels; from the Stream when ``X`` is one.
    tasks : array-like or scalar, optional
        The task of each row; required unless ``X`` is a Stream.
    delay : int
        How many later events are predicted before an event's label arrives (>= 0).
    curve_points : int
        About how many points of the cumulative error curve to keep.

    Returns
    -------
    EvaluationReport
        As ``omtl.evaluate``, over the served predictions.
    """
    from .evaluate import progressive_report, task_array, task_codes

    if y is None and hasattr(X, "y"):
        X, y, tasks = X.X, X.y, X.tasks
    if tasks is None:
        raise TypeError("evaluate_delayed needs tasks (or a Stream)")
    if isinstance(delay, bool) or not isinstance(delay, (int, np.integer)) or delay < 0:
        raise ValueError(f"delay must be an integer >= 0, got {delay!r}")
    y_pm1, _ = check_labels(y, X.shape[0])
    n = X.shape[0]
    task_ids = task_array(tasks, n)
    codes = task_codes(model, task_ids, n)
    rows = X.tocsr() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    served = np.empty(n)
    start = time.perf_counter()
    prefix = f"evaluate_delayed:{id(model)}:"
    for i in range(n):
        row = rows[i : i + 1]
        served[i] = model.predict(row, tasks=task_ids[i : i + 1], remember=[f"{prefix}{i}"], now=float(i))[0]
        j = i - delay
        if j >= 0:
            model.learn_label(f"{prefix}{j}", y_pm1[j], now=float(i))
    for j in range(max(0, n - delay), n):
        model.learn_label(f"{prefix}{j}", y_pm1[j], now=float(n))
    seconds = time.perf_counter() - start
    served_pm1 = np.asarray(check_labels(served, n)[0], dtype=np.float64)
    return progressive_report(model, type(model).__name__, y_pm1, served_pm1, codes, curve_points, seconds,
                              f"P1, labels {delay} events late")
