"""The stream object every data source returns: a pooled multitask data set in a fixed order."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from .._rng import SplitMix64


@dataclass(frozen=True)
class Stream:
    """A multitask binary stream: rows of ``X`` with labels ``y`` in {-1,+1} and task ids.

    Attributes
    ----------
    X : ndarray (n, d) float64 or scipy.sparse CSR matrix
    y : ndarray (n,) int8 with values in {-1, +1}
    tasks : ndarray (n,) int64 with values in [0, n_tasks)
    n_tasks : int
    name : str
    rounds : ndarray (n,) int64 or None
        For a round-structured stream (protocol P2, ALGORITHMS.md §1.2): the round of each row.
        Rows of one round are consecutive and in ascending task order.
    task_names : tuple of str, optional
    """

    X: np.ndarray | sp.csr_matrix
    y: np.ndarray
    tasks: np.ndarray
    n_tasks: int
    name: str
    rounds: np.ndarray | None = None
    task_names: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.X)

    def take(self, index) -> Stream:
        """The rows at ``index``, in that order; rounds are dropped.

        Parameters
        ----------
        index : array-like of int or slice
            Row positions.

        Returns
        -------
        Stream
        """
        index = np.asarray(index) if not isinstance(index, slice) else index
        return replace(self, X=self.X[index], y=self.y[index], tasks=self.tasks[index], rounds=None)

    def head(self, n: int) -> Stream:
        """The first ``n`` rows.

        Parameters
        ----------
        n : int
            Number of rows.

        Returns
        -------
        Stream
        """
        return self.take(slice(0, n))

    def shuffled(self, seed: int) -> Stream:
        """A uniformly random permutation of all rows (protocol P1).

        Parameters
        ----------
        seed : int
            Seed of the SplitMix64 generator the permutation is drawn with (the same on every
            machine).

        Returns
        -------
        Stream
        """
        order = np.asarray(SplitMix64(seed).permutation(len(self)), dtype=np.int64)
        out = self.take(order)
        return replace(out, name=f"{self.name} (shuffle {seed})")

    def as_rounds(self, seed: int | None = None) -> Stream:
        """The ROMCO-style round stream (protocol P2, §1.3).

        Each task's rows are permuted with SplitMix64(seed) (one generator, tasks in ascending
        order; ``seed=None`` keeps file order); round t holds the t-th row of every task that still
        has one, in ascending task order. ``rounds`` gives the round of each row.

        Parameters
        ----------
        seed : int, optional
            Seed of the SplitMix64 generator; None keeps every task's rows in file order.

        Returns
        -------
        Stream
            With ``rounds`` set.
        """
        rng = SplitMix64(seed) if seed is not None else None
        per_task = []
        for task in range(self.n_tasks):
            rows = np.flatnonzero(self.tasks == task)
            if rng is not None:
                rows = rows[np.asarray(rng.permutation(len(rows)), dtype=np.int64)]
            per_task.append(rows)
        n_rounds = max((len(r) for r in per_task), default=0)
        order, rounds = [], []
        for t in range(n_rounds):
            for rows in per_task:
                if t < len(rows):
                    order.append(rows[t])
                    rounds.append(t)
        out = self.take(np.asarray(order, dtype=np.int64))
        suffix = "file order" if seed is None else f"shuffle {seed}"
        return replace(out, rounds=np.asarray(rounds, dtype=np.int64), name=f"{self.name} (rounds, {suffix})")

    def task_counts(self) -> np.ndarray:
        """Rows per task.

        Returns
        -------
        ndarray of int64, shape (n_tasks,)
        """
        return np.bincount(self.tasks, minlength=self.n_tasks)

    def __repr__(self) -> str:
        kind = "sparse" if self.is_sparse else "dense"
        return (
            f"Stream(name={self.name!r}, n={len(self)}, d={self.n_features}, "
            f"n_tasks={self.n_tasks}, {kind}, positives={int((self.y > 0).sum())})"
        )
