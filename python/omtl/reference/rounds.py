"""Protocol plumbing for reference cores whose update is per round (ROMCO, OMTL)."""

from __future__ import annotations

import numpy as np

from ._core import ReferenceCore, dense_row


def round_spans(rounds):
    """``(start, end)`` of each protocol-P2 round in order: the runs of equal consecutive round ids."""
    start = 0
    while start < len(rounds):
        end = start + 1
        while end < len(rounds) and rounds[end] == rounds[start]:
            end += 1
        yield start, end
        start = end


class RoundCore(ReferenceCore):
    """A core defining ``round(rows, tasks, ys) -> scores`` (predict every row with the same
    model, then one joint update, §1.2) and ``score_one`` gets both protocols: P1 as singleton
    rounds (§1.3) and P2, and ``decision``."""

    def learn_rows(self, X, tasks, y):
        return np.array([self.round([dense_row(X, t)], [int(tasks[t])], [y[t]])[0] for t in range(len(tasks))])

    def learn_round_rows(self, X, tasks, y, rounds):
        scores = np.zeros(len(tasks))
        for start, end in round_spans(rounds):
            idx = range(start, end)
            scores[start:end] = self.round(
                [dense_row(X, t) for t in idx], [int(tasks[t]) for t in idx], [y[t] for t in idx]
            )
        return scores
