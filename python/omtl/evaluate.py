"""Prequential (online) evaluation: every prediction is made before its label is used (§7.1)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ._validation import check_labels


@dataclass
class TaskCounts:
    """Confusion counts per task (positive class +1)."""

    tp: np.ndarray
    fp: np.ndarray
    tn: np.ndarray
    fn: np.ndarray

    @property
    def n(self) -> np.ndarray:
        return self.tp + self.fp + self.tn + self.fn

    @property
    def f1(self) -> np.ndarray:
        denom = 2 * self.tp + self.fp + self.fn
        return np.divide(2.0 * self.tp, denom, out=np.zeros(len(self.tp)), where=denom > 0)


@dataclass
class EvaluationReport:
    """What one online pass measured.

    ``curve[j]`` is the cumulative error rate after ``curve_steps[j]`` predictions, sampled every
    ``ceil(n/curve_points)`` predictions and at the end. ``n_active`` is the size of the active
    set (the examples the model stores), ``None`` for a learner that stores none
    (``stores_examples``: MTLinear and the other learners with fixed-size weights).
    """

    learner: str
    n: int
    mistakes: int
    error_rate: float
    f1_micro: float
    f1_macro: float
    per_task: TaskCounts
    curve: np.ndarray
    curve_steps: np.ndarray
    seconds: float
    examples_per_second: float
    n_active: int | None
    n_updates: int
    predictions: np.ndarray = field(repr=False)
    protocol: str = "P1"

    def __repr__(self) -> str:
        # The curve, per-task counts and predictions are arrays: a repr of them would fill a
        # screen, so only the scalars are shown.
        return (
            f"EvaluationReport(learner={self.learner!r}, n={self.n}, error_rate={self.error_rate:.4f}, "
            f"f1_micro={self.f1_micro:.4f}, f1_macro={self.f1_macro:.4f}, n_active={self.n_active}, "
            f"seconds={self.seconds:.3f}, protocol={self.protocol!r})"
        )

    def summary(self) -> dict:
        """The scalar results.

        Returns
        -------
        dict
            learner, n, error_rate, f1_micro, f1_macro, n_active, n_updates, seconds,
            examples_per_second, protocol.
        """
        return {
            "learner": self.learner,
            "n": self.n,
            "error_rate": self.error_rate,
            "f1_micro": self.f1_micro,
            "f1_macro": self.f1_macro,
            "n_active": self.n_active,
            "n_updates": self.n_updates,
            "seconds": self.seconds,
            "examples_per_second": self.examples_per_second,
            "protocol": self.protocol,
        }


def stores_examples(model) -> bool:
    """Whether ``model.n_active_`` counts examples the model stores (an active set): the budget
    learners, MTFL/TRML and the kernel Perceptrons with a non-linear kernel. A learner with
    fixed-size weights (MTLinear, PA, OMTL, OMTRL, ROMCO, CW-COL, the Perceptrons in primal form)
    stores none, and its ``n_active_`` is its number of updates (docs/learners.md, "What
    ``n_active_`` counts").

    Parameters
    ----------
    model : omtl learner
        A native learner or its reference twin.

    Returns
    -------
    bool
    """
    # Declared by the learner's class (``_stores_examples``).
    return bool(getattr(model, "_stores_examples", False))


def f1_from_counts(tp, fp, fn) -> float:
    denom = 2 * tp + fp + fn
    return 2.0 * tp / denom if denom > 0 else 0.0


def online_metrics(y_pm1: np.ndarray, pred_pm1: np.ndarray, tasks: np.ndarray, n_tasks: int, curve_points: int = 200):
    """Error rate, micro/macro F1, per-task counts and the cumulative error curve (INV-E1)."""
    pos, ppos = y_pm1 > 0, pred_pm1 > 0
    count = lambda mask: np.bincount(tasks[mask], minlength=n_tasks).astype(np.int64)  # noqa: E731
    counts = TaskCounts(tp=count(pos & ppos), fp=count(~pos & ppos), tn=count(~pos & ~ppos), fn=count(pos & ~ppos))
    n = len(y_pm1)
    errors = pred_pm1 != y_pm1
    mistakes = int(errors.sum())
    f1_micro = float(f1_from_counts(counts.tp.sum(), counts.fp.sum(), counts.fn.sum()))
    present = counts.n > 0
    f1_macro = float(counts.f1[present].mean()) if present.any() else 0.0
    step = max(1, math.ceil(n / curve_points)) if n else 1
    steps = np.arange(step, n + 1, step)
    if n and (steps.size == 0 or steps[-1] != n):
        steps = np.append(steps, n)
    cumulative = np.cumsum(errors)
    curve = cumulative[steps - 1] / steps if n else np.zeros(0)
    return mistakes, (mistakes / n if n else 0.0), f1_micro, f1_macro, counts, curve, steps


def evaluate(
    model,
    X,
    y=None,
    *,
    tasks=None,
    rounds=None,
    curve_points: int = 200,
    progress: bool = False,
    chunk_size: int | None = None,
):
    """Runs ``model`` over the stream once (predict, then update, row by row) and reports.

    ``X`` may be a ``omtl.datasets.Stream``, in which case ``y``, ``tasks`` and ``rounds`` come
    from it. With ``rounds`` (one round id per row, as ``Stream.as_rounds`` gives) the pass runs
    protocol P2 through ``model.learn_rounds``; chunks then never split a round. Error rates count
    instances, not rounds (§7.1). The learner is updated in place. Batches go to the learner in chunks so a progress bar
    (``progress=True``, tqdm) can show the pass; chunking does not change the results (except
    through ``gamma="scale"``, the rbf default, which a fresh model reads from its first chunk).

    Parameters
    ----------
    model : omtl learner
        Any learner with ``learn`` (and ``learn_rounds`` for P2); updated in place.
    X : array-like, scipy.sparse matrix or Stream
        The rows, or a ``omtl.datasets.Stream`` holding rows, labels, tasks and rounds.
    y : array-like of shape (n,), optional
        Labels (-1/+1, 0/1 or bool); taken from the Stream when ``X`` is one.
    tasks : array-like or scalar, optional
        The task of each row (integer ids, or any hashable labels as the model takes them);
        required unless ``X`` is a Stream. Checked for the whole stream before the pass starts.
    rounds : array-like of int, optional
        One round id per row (protocol P2).
    curve_points : int
        About how many points of the cumulative error curve to keep.
    progress : bool
        Show a tqdm progress bar.
    chunk_size : int, optional
        Rows per ``learn`` call (default max(256, n/100)).

    Returns
    -------
    EvaluationReport
        Mistakes, error rate, micro/macro F1, per-task counts, the cumulative error curve,
        seconds, throughput, the active-set size and the pre-update predictions. The per-task
        counts are indexed by the model's task index (``model.tasks_`` names them).
    """
    name = type(model).__name__
    if y is None and hasattr(X, "y"):
        stream = X
        X, y, tasks = stream.X, stream.y, stream.tasks
        rounds = stream.rounds if rounds is None else rounds
    if tasks is None:
        raise TypeError("evaluate needs tasks (or a Stream)")
    y_pm1, _ = check_labels(y, X.shape[0])
    if rounds is not None:
        rounds = np.asarray(rounds, dtype=np.int64)
        if rounds.shape != (X.shape[0],):
            raise ValueError(f"rounds must have one id per row ({X.shape[0]}), got shape {rounds.shape}")
    n = X.shape[0]
    # Task ids as the model takes them (integer ids, or any hashable labels), checked for the
    # whole stream before the first chunk changes the model; ``codes`` are the model's task
    # indices, what the per-task counts are indexed by.
    task_ids = task_array(tasks, n)
    codes = task_codes(model, task_ids, n)
    chunk = chunk_size or max(256, math.ceil(n / 100))
    preds = np.empty(n)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, desc=name, unit="ex", leave=False)
    start = time.perf_counter()
    # A learner without learn_rounds runs a round stream flattened (§1.3): same rows, same order.
    use_rounds = rounds is not None and hasattr(model, "learn_rounds")
    for a, b in round_chunks(n, chunk, rounds):
        if not use_rounds:
            preds[a:b] = model.learn(X[a:b], y_pm1[a:b], tasks=task_ids[a:b])
        else:
            preds[a:b] = model.learn_rounds(X[a:b], y_pm1[a:b], tasks=task_ids[a:b], rounds=rounds[a:b])
        if bar is not None:
            bar.update(b - a)
    seconds = time.perf_counter() - start
    if bar is not None:
        bar.close()
    protocol = "P1" if rounds is None else ("P2 (learn_rounds)" if use_rounds else "P2 flattened to P1 (learn)")
    return progressive_report(model, name, y_pm1, preds, codes, curve_points, seconds, protocol)


def progressive_report(model, name, y_pm1, preds, codes, curve_points, seconds, protocol) -> EvaluationReport:
    """The report of a progressive run: the predictions ``preds`` made before learning the labels
    ``y_pm1`` of tasks ``codes`` in ``seconds``."""
    n = len(y_pm1)
    n_tasks = max(_model_n_tasks(model), int(codes.max()) + 1 if n else 0)
    mistakes, err, f1_micro, f1_macro, counts, curve, steps = online_metrics(y_pm1, preds, codes, n_tasks, curve_points)
    return EvaluationReport(
        learner=name,
        n=n,
        mistakes=mistakes,
        error_rate=err,
        f1_micro=f1_micro,
        f1_macro=f1_macro,
        per_task=counts,
        curve=curve,
        curve_steps=steps,
        seconds=seconds,
        examples_per_second=n / seconds if seconds > 0 else float("inf"),
        n_active=int(model.n_active_) if stores_examples(model) else None,
        n_updates=int(model.n_updates_),
        predictions=preds,
        protocol=protocol,
    )


def task_array(tasks, n: int) -> np.ndarray:
    """One task id per row (a scalar applies to every row), integers kept as integers and any
    other labels as Python objects (strings are not truncated to a fixed width)."""
    arr = np.asarray(tasks)
    if arr.dtype.kind in "US":
        arr = arr.astype(object)  # Python strings, as the model maps them
    if arr.ndim == 0:
        return np.broadcast_to(arr, (n,))
    if arr.shape != (n,):
        raise ValueError(f"tasks must have one id per row ({n}), got shape {arr.shape}")
    return arr


def task_codes(model, task_ids: np.ndarray, n: int) -> np.ndarray:
    """The model's task index of every row, as its next calls will map them; raises (without
    changing the model) for ids the model would refuse."""
    map_tasks = getattr(model, "_map_tasks", None)
    if map_tasks is not None:  # an omtl learner: its own validation, labels mapped in order
        with model._model_lock():
            codes, _ = map_tasks(task_ids, n)
        return np.asarray(codes, dtype=np.int64).reshape(-1)
    codes = np.asarray(task_ids, dtype=np.int64)
    if n and codes.min() < 0:
        raise ValueError("task ids must be non-negative integers")
    return codes


def _model_n_tasks(model) -> int:
    """The number of tasks the model has now (after the pass), 0 if it does not say."""
    k = getattr(model, "n_tasks", None)
    if k is None:
        seen = getattr(model, "n_seen_per_task_", None)
        return 0 if seen is None else len(seen)
    return int(k)


def round_chunks(n: int, size: int, rounds=None):
    """Consecutive ``(start, stop)`` slices of about ``size`` rows; with rounds, cut only where a
    new round starts."""
    a = 0
    while a < n:
        b = min(n, a + size)
        if rounds is not None:
            while b < n and rounds[b] == rounds[b - 1]:
                b += 1
        yield a, b
        a = b
