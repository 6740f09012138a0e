"""The base of every reference core: the online protocol written once.

A core defines ``score_one(x, task)`` (the current model's score of one dense row) and
``update_one(x, task, y, score)`` (the update after seeing the label, given the pre-update
score); ``learn`` (predict, then update, row by row) and ``decision`` follow. Round-based cores
(``rounds.RoundCore``) replace ``learn`` with singleton rounds.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def dense_row(X, t: int) -> np.ndarray:
    return X[t].toarray()[0] if sp.issparse(X) else X[t]


class ReferenceCore:
    """Predict-then-update over ``score_one`` / ``update_one`` (an ``omtl._base.Core``)."""

    # The base scans X for NaN and infinity before a reference core sees it.
    checks_finite_X = False

    def score_one(self, x: np.ndarray, task: int) -> float:
        raise NotImplementedError

    def update_one(self, x: np.ndarray, task: int, y: float, score: float) -> None:
        raise NotImplementedError

    def decision(self, X, tasks) -> np.ndarray:
        return np.array([self.score_one(dense_row(X, t), int(tasks[t])) for t in range(len(tasks))], dtype=np.float64)

    def learn(self, X, tasks, y) -> np.ndarray:
        scores = np.zeros(len(tasks))
        for t in range(len(tasks)):
            x, task = dense_row(X, t), int(tasks[t])
            scores[t] = self.score_one(x, task)
            self.update_one(x, task, float(y[t]), scores[t])
        return scores
