"""The base of every reference core: the online protocol written once.

A core defines ``score_one(x, task)`` (the current model's score of one dense row) and
``update_one(x, task, y, score)`` (the update after seeing the label, given the pre-update
score); ``learn`` (predict, then update, row by row) and ``decision`` follow. Round-based cores
(``rounds.RoundCore``) replace ``learn_rows`` with singleton rounds. A core that grows defines
``grow_tasks(n)``.

The public methods are the ``omtl._base.Core`` protocol, the native core's: ``learn``,
``learn_rounds`` and ``decision`` take ``n_new`` (tasks added first, atomically: on an error the
core is as it was), ``add_tasks`` is atomic, ``snapshot`` gives an independent copy.
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.sparse as sp


def dense_row(X, t: int) -> np.ndarray:
    return X[t].toarray()[0] if sp.issparse(X) else X[t]


class ReferenceCore:
    """Predict-then-update over ``score_one`` / ``update_one`` (an ``omtl._base.Core``)."""

    # The base scans X for NaN and infinity before a reference core sees it.
    checks_finite_X = False

    # ---- what a core defines -----------------------------------------------------------------
    def score_one(self, x: np.ndarray, task: int) -> float:
        raise NotImplementedError

    def update_one(self, x: np.ndarray, task: int, y: float, score: float) -> None:
        raise NotImplementedError

    def grow_tasks(self, n: int) -> None:
        """Adds ``n`` tasks with no examples (may leave the core half-grown on an error:
        ``add_tasks`` undoes it)."""
        raise ValueError(f"{type(self).__name__} cannot add tasks to a fitted model")

    def forget(self, tasks) -> int:
        """Forgets the engine tasks ``tasks`` (distinct, known): their stored examples and own
        state go (docs/lifecycle.md); returns the stored examples removed. A core that can
        forget defines it."""
        raise ValueError(f"{type(self).__name__} cannot forget tasks")

    def learn_rows(self, X, tasks, y) -> np.ndarray:
        scores = np.zeros(len(tasks))
        for t in range(len(tasks)):
            x, task = dense_row(X, t), int(tasks[t])
            scores[t] = self.score_one(x, task)
            self.update_one(x, task, float(y[t]), scores[t])
        return scores

    def learn_round_rows(self, X, tasks, y, rounds) -> np.ndarray:
        """Protocol P2; a per-row core flattens the rounds (ALGORITHMS.md §1.3)."""
        return self.learn_rows(X, tasks, y)

    # ---- the Core protocol -------------------------------------------------------------------
    def learn(self, X, tasks, y, n_new: int = 0) -> np.ndarray:
        return self._grown_then(n_new, self.learn_rows, X, tasks, y)

    def learn_rounds(self, X, tasks, y, rounds, n_new: int = 0) -> np.ndarray:
        return self._grown_then(n_new, self.learn_round_rows, X, tasks, y, rounds)

    def decision(self, X, tasks, n_new: int = 0) -> np.ndarray:
        # Tasks never seen score on a grown copy: scoring changes nothing.
        core = self
        if n_new:
            core = copy.deepcopy(self)
            core.grow_tasks(n_new)
        return np.array([core.score_one(dense_row(X, t), int(tasks[t])) for t in range(len(tasks))], dtype=np.float64)

    def add_tasks(self, n: int) -> None:
        self._grown_then(n, lambda: None)

    def snapshot(self):
        from .._base import CoreSnapshot  # (a cycle at import time)

        return CoreSnapshot(copy.deepcopy, copy.deepcopy(self))

    def _grown_then(self, n_new: int, run, *args):
        """``run(*args)`` after adding ``n_new`` tasks, all or nothing: on any error (Ctrl-C
        included) the core's state is put back as it was."""
        if not n_new:
            return run(*args)
        saved = copy.deepcopy(self.__dict__)
        try:
            self.grow_tasks(n_new)
            return run(*args)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
