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

import math
import numbers

import numpy as np

from ._validation import _integer_array


def is_integer_ids(tasks) -> bool:
    """Whether ``tasks`` are integer ids (one int, or an array of integers / integral floats)."""
    if isinstance(tasks, (bool, np.bool_)):
        return False
    if isinstance(tasks, numbers.Integral):
        return True
    if isinstance(tasks, (str, bytes)) or tasks is None:
        return False
    try:
        _integer_array(tasks, "tasks")
    except (TypeError, ValueError):
        return False
    return True


def _plain(label):
    """A label as a plain Python value (NumPy scalars unwrapped), checked usable as a key."""
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, (bool, np.bool_)):
        raise TypeError("a task label cannot be a bool (True == 1 would make it task 1's label)")
    if isinstance(label, float) and math.isnan(label):
        raise ValueError("a task label cannot be NaN")
    try:
        hash(label)
    except TypeError:
        raise TypeError(f"task labels must be hashable, got {type(label).__name__}") from None
    return label


def label_list(tasks, n_rows: int) -> list:
    """The task label of every row, as plain Python values (one label applies to every row)."""
    if tasks is None:
        raise TypeError("tasks is required: pass one task label per row, or one label for all rows")
    if isinstance(tasks, (list, tuple)):
        values = list(tasks)
    elif isinstance(tasks, (str, bytes)) or np.ndim(tasks) == 0:
        return [_plain(tasks.item() if isinstance(tasks, np.ndarray) else tasks)] * n_rows
    else:  # ndarray, pandas Series / Categorical / Index, ...
        arr = np.asarray(tasks)
        if arr.ndim != 1:
            raise ValueError(f"tasks must be 1-D, got shape {arr.shape}")
        values = arr.tolist()
    if len(values) != n_rows:
        raise ValueError(f"X has {n_rows} rows but tasks has {len(values)}")
    return [_plain(v) for v in values]


def map_labels(labels: list, index: dict, capacity: int | None, hint: str) -> tuple[np.ndarray, list]:
    """Task indices of ``labels`` under the mapping ``index`` (label -> index), and the labels it
    lacks, in order of first appearance, with the indices ``len(index), len(index) + 1, ...``.
    ``capacity`` (a fixed n_tasks) bounds the number of labels; ``hint`` ends that error."""
    ids = np.empty(len(labels), dtype=np.int64)
    new: dict = {}
    for row, label in enumerate(labels):
        i = index.get(label)
        if i is None:
            i = new.get(label)
            if i is None:
                i = len(index) + len(new)
                if capacity is not None and i >= capacity:
                    raise ValueError(
                        f"unknown task {label!r} at row {row}: this model has a fixed set of n_tasks={capacity} tasks, "
                        f"all taken by other labels; {hint}"
                    )
                new[label] = i
        ids[row] = i
    return ids, list(new)


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
