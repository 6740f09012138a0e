"""Task labels: any hashable ids mapped to the engine's task indices 0..k-1 (DECISIONS.md,
"Open-ended task sets").

A model is in one of two modes, fixed on its first non-empty batch:

- *index* mode: ``n_tasks`` is an int and the task ids are integers; id ``i`` is task index ``i``
  (``tasks_`` is ``arange(n_tasks)``), as omtl always did;
- *label* mode (``n_tasks=None``, or ids that are not integers): labels get the indices 0, 1, ...
  in the order they first appear; ``tasks_`` lists them in index order.

Everything here runs before a model is touched and changes nothing.
"""

from __future__ import annotations

import cmath
import itertools
import math
import numbers
import operator

import numpy as np

from ._validation import integer_array


def is_integer_ids(tasks) -> bool:
    """Whether ``tasks`` are integer ids (one int, or an array of integers / integral floats)."""
    if isinstance(tasks, (bool, np.bool_)):
        return False
    if isinstance(tasks, numbers.Integral):
        return True
    if isinstance(tasks, (str, bytes)) or tasks is None:
        return False
    try:
        integer_array(tasks, "tasks")
    except (TypeError, ValueError):
        return False
    return True


def _plain(label):
    """A label as a plain Python value (NumPy scalars unwrapped), checked usable as a key.

    A missing value is refused, whatever its spelling (None, NaN, pandas' NA and NaT, a NaN
    Decimal), as is infinity: rows without a user id would otherwise pool into one task."""
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, (bool, np.bool_)):
        raise TypeError("a task label cannot be a bool (True == 1 would make it task 1's label)")
    if label is None or type(label).__name__ in ("NAType", "NaTType") and type(label).__module__.startswith("pandas"):
        raise ValueError(f"a task label cannot be missing ({label!r}): give every row its task")
    if isinstance(label, numbers.Number) and not isinstance(label, numbers.Integral):
        try:
            finite = cmath.isfinite(label) if isinstance(label, complex) else math.isfinite(label)
        except (TypeError, ValueError, OverflowError):
            finite = False
        if not finite:
            raise ValueError(f"a task label cannot be NaN or infinite, got {label!r}")
    try:
        hash(label)
    except TypeError:
        raise TypeError(f"task labels must be hashable, got {type(label).__name__}") from None
    return label


def check_label(label):
    """A new task label as ``map_labels`` records it (see ``_plain``): what the per-event path
    calls for a label the model does not know yet."""
    return _plain(label)


def label_list(tasks, n_rows: int) -> list:
    """The task label of every row (one label applies to every row). Bool labels are refused
    here (True == 1 would make a bool another label's alias); the rest is checked, for the labels
    a model does not know yet, by ``map_labels``."""
    if tasks is None:
        raise TypeError("tasks is required: pass one task label per row, or one label for all rows")
    if isinstance(tasks, (list, tuple)):
        values, typed = list(tasks), False
    elif isinstance(tasks, (str, bytes)) or np.ndim(tasks) == 0:
        return [_plain(tasks.item() if isinstance(tasks, np.ndarray) else tasks)] * n_rows
    else:  # ndarray, pandas Series / Categorical / Index, ...
        arr = np.asarray(tasks)
        if arr.ndim != 1:
            raise ValueError(f"tasks must be 1-D, got shape {arr.shape}")
        if arr.dtype.kind == "b":
            raise TypeError("a task label cannot be a bool (True == 1 would make it task 1's label)")
        values, typed = arr.tolist(), arr.dtype.kind != "O"
    if len(values) != n_rows:
        raise ValueError(f"X has {n_rows} rows but tasks has {len(values)}")
    if not typed:
        types = set(map(type, values))  # a C loop; exact types suffice: bool cannot be subclassed
        if bool in types or np.bool_ in types:
            raise TypeError("a task label cannot be a bool (True == 1 would make it task 1's label)")
    return values


def map_labels(labels: list, index: dict, capacity: int | None, hint: str, base: int | None = None,
               free: list = ()) -> tuple[np.ndarray, list]:
    """Task indices of ``labels`` under the mapping ``index`` (label -> index), and the labels it
    lacks (as plain values), in order of first appearance, with the indices of the ``free`` tasks
    (forgotten labels', ascending) first, then ``base, base + 1, ...`` (``base``: the tasks named
    so far, free ones included; default ``len(index)``). ``capacity`` (a fixed n_tasks) bounds
    the number of tasks; ``hint`` ends that error. Lookups run in C (``map``); only new labels
    are handled one by one."""
    if base is None:
        base = len(index)
    try:
        codes = list(map(index.get, labels))
    except TypeError:
        bad = next(v for v in labels if not _hashable(v))
        raise TypeError(f"task labels must be hashable, got {type(bad).__name__}") from None
    if None not in codes:
        return np.array(codes, dtype=np.int64), []
    missing = map(operator.is_, codes, itertools.repeat(None))  # (C loops throughout)
    new = list(dict.fromkeys(itertools.compress(labels, missing)))
    if set(map(type, new)) != {str}:  # a str is a valid label as it is; anything else is checked
        new = [_plain(v) for v in new]
    if capacity is not None and base + max(0, len(new) - len(free)) > capacity:
        label = new[capacity - base + len(free)]
        raise ValueError(
            f"unknown task {label!r} at row {labels.index(label)}: this model has a fixed set of n_tasks={capacity} "
            f"tasks, all taken by other labels; {hint}"
        )
    # The new labels' indices in a map of their own: the model's map is not copied (its size).
    places = list(free[: len(new)]) + list(range(base, base + max(0, len(new) - len(free))))
    fresh = dict(zip(new, places))
    # A known label keeps its code (the default of a lookup in the small map of new ones).
    return np.fromiter(map(fresh.get, labels, codes), dtype=np.int64, count=len(labels)), new


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def labels_array(labels: list) -> np.ndarray:
    """``tasks_`` of a label-mode model: int64 when every label is an int, else objects."""
    if all(isinstance(v, int) for v in labels):
        return np.array(labels, dtype=np.int64)
    out = np.empty(len(labels), dtype=object)
    out[:] = labels
    return out


GROW_HINT = (
    "for tasks that keep arriving build the model with n_tasks=None (graph 'complete' or 'disconnected'), "
    "or grow a fitted model with model.add_tasks(labels) where the learner supports it "
    "(TaskGraph.add_tasks(n) gives a larger graph for a new model)"
)


class _Forgotten:
    """The place of a forgotten task label in ``TaskSet.labels`` (one object, equal to no label)."""

    def __repr__(self) -> str:
        return "FORGOTTEN"

    def __reduce__(self):
        return "FORGOTTEN"


#: Marks a forgotten label's task in ``TaskSet.labels`` (DECISIONS.md, "Forgetting tasks").
FORGOTTEN = _Forgotten()


class TaskSet:
    """The task set of a fitted model, in one place: the labels and their indices (label mode),
    the ``n_tasks`` it was fitted (or grown) with, and the examples seen per engine task.

    ``OnlineClassifier`` holds it as ``_tasks`` from its first batch on; pickling copies it, model
    files read it, and the binding's per-event and small-batch paths (src/python/events.rs,
    small.rs) read and update ``labels``, ``index`` and ``counts`` in place. ``counts`` may hold
    more engine tasks than labels (a learner that keeps spare tasks); it is a view of a buffer
    with spare room, so that tasks added one at a time cost amortised O(1).
    """

    __slots__ = ("labels", "index", "n_tasks_at_fit", "counts", "_buf", "n_forgotten", "free")

    def __init__(self, counts: np.ndarray, n_tasks_at_fit, labels: list | None = None):
        self.counts = counts
        self.n_tasks_at_fit = n_tasks_at_fit
        self.labels = labels
        self.index = None if labels is None else {v: i for i, v in enumerate(labels) if v is not FORGOTTEN}
        self._buf = None
        self.n_forgotten = 0
        self.free = self.free_tasks()

    @property
    def n_new_places(self) -> int:
        """Tasks named so far, free ones included (where new labels start, past the free ones)."""
        return len(self.labels)

    @property
    def label_mode(self) -> bool:
        """Whether task ids are labels mapped in order of appearance (else integer indices)."""
        return self.labels is not None

    @property
    def n_engine_tasks(self) -> int:
        return int(self.counts.shape[0])

    def ids(self) -> np.ndarray:
        """``tasks_``: the labels in index order (forgotten ones skipped), or
        ``arange(n_engine_tasks)``."""
        if not self.label_mode:
            return np.arange(self.n_engine_tasks)
        return labels_array([v for v in self.labels if v is not FORGOTTEN])

    def seen(self) -> np.ndarray:
        """Examples seen per task, in the order of ``ids()`` (a copy)."""
        if not self.label_mode:
            return self.counts.copy()
        live = [i for i, v in enumerate(self.labels) if v is not FORGOTTEN]
        return self.counts[live].copy() if len(live) < len(self.labels) else self.counts[: len(self.labels)].copy()

    def free_tasks(self) -> list:
        """The tasks whose labels were forgotten (label mode), ascending: new labels take them
        first, lowest first (DECISIONS.md, "Forgetting tasks")."""
        return [] if not self.label_mode else [i for i, v in enumerate(self.labels) if v is FORGOTTEN]

    def tasks_needed(self, n_new_labels: int) -> int:
        """Tasks named once ``n_new_labels`` more labels have their places."""
        return len(self.labels) + max(0, n_new_labels - len(self.free))

    def forget(self, tasks) -> int:
        """Forgets the engine tasks ``tasks`` (known, distinct: checked by the caller): their
        counts go to ``n_forgotten``, their labels leave the index, their places stay (a label
        that comes back is a new task). Returns the examples they had learned."""
        n = 0
        for t in tasks:
            n += int(self.counts[t])
            self.counts[t] = 0
            if self.label_mode:
                del self.index[self.labels[t]]
                self.labels[t] = FORGOTTEN
        self.n_forgotten += n
        if self.label_mode:
            self.free = sorted(set(self.free).union(tasks))
        return n

    def add_labels(self, labels) -> None:
        """Adds new labels (checked new and distinct by the caller), in order: each takes the
        lowest free task, or else the next one."""
        labels = list(labels)
        reused = labels[: len(self.free)]
        for label in reused:
            i = self.free.pop(0)
            self.labels[i] = label
            self.index[label] = i
        appended = labels[len(reused):]
        base = len(self.labels)
        self.labels.extend(appended)
        self.index.update(zip(appended, range(base, base + len(appended))))

    def reserve(self, n_new: int) -> None:
        """Makes room for ``n_new`` more counts without changing them (doubling). Called before
        the engine changes, so that nothing is allocated once it has."""
        k = self.n_engine_tasks
        buf = self._buf
        if buf is None or self.counts.base is not buf or buf.shape[0] < k + n_new:
            try:
                buf = np.zeros(max(2 * (k + n_new), 16), dtype=np.int64)
            except (MemoryError, ValueError):
                raise ValueError(f"{k + n_new} tasks are too many: their example counts alone need {16 * (k + n_new):,} bytes") from None
            buf[:k] = self.counts
            self._buf = buf
            self.counts = buf[:k]

    def grow(self, n_new: int) -> None:
        """Appends ``n_new`` zero counts (after ``reserve``; cannot fail then)."""
        self.reserve(n_new)
        self.counts = self._buf[: self.n_engine_tasks + n_new]

    def copy(self) -> TaskSet:
        """An independent copy (without the spare room)."""
        out = TaskSet(self.counts.copy(), self.n_tasks_at_fit)
        out.labels = None if self.labels is None else list(self.labels)
        out.index = None if self.index is None else dict(self.index)
        out.n_forgotten = self.n_forgotten
        out.free = list(self.free)
        return out

    def __getstate__(self):
        return {"labels": self.labels, "index": self.index, "n_tasks_at_fit": self.n_tasks_at_fit, "counts": self.counts.copy(),
                "n_forgotten": self.n_forgotten}

    def __setstate__(self, state):
        self.labels, self.index = state["labels"], state["index"]
        self.n_tasks_at_fit, self.counts, self._buf = state["n_tasks_at_fit"], state["counts"], None
        self.n_forgotten = state.get("n_forgotten", 0)
        self.free = self.free_tasks()

    @classmethod
    def from_legacy(cls, state: dict) -> TaskSet | None:
        """The task set of a model state pickled with one attribute per field (``_seen_per_task``,
        ``_n_tasks_at_fit``, ``_task_labels``, ``_task_index``); pops them. None if unfitted."""
        counts = state.pop("_seen_per_task", None)
        labels, index = state.pop("_task_labels", None), state.pop("_task_index", None)
        at_fit = state.pop("_n_tasks_at_fit", None if counts is None else len(counts))
        if counts is None:
            return None
        out = cls(counts, at_fit)
        out.labels, out.index = labels, index
        out.free = out.free_tasks()
        return out
