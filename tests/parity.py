"""Native-versus-reference comparisons that do not depend on the CPU.

The native build fuses multiply-adds (FMA, AVX-512) where the CPU has them, so its last bits
differ from NumPy's and from one machine to another. Two runs that agree to rounding can still
part at an *exact-arithmetic tie*: a score that is exactly 0 (the sign convention) or a margin
y·f exactly 1 (the hinge kink) in exact arithmetic comes out as 0.0 on one side and -3e-18 on the
other, and the two models make different updates from there on. So a trajectory is compared row
by row up to the first row where the reference score sits at a tie (within rounding of 0 or of
±1) and the two scores fall on different sides of it; from that row on the runs may legitimately differ,
and the model comparisons that follow are skipped. Anywhere else a differing decision is a bug.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A reference score within TIE · max(1, largest |score| so far) of 0 or of ±1 is a tie. Rounding
# noise of an exact zero is ~1e-16 of the terms summed; legitimately small scores (MTFORG's shrunk
# models) go down to ~1e-10 of the largest, so 1e-12 sits between the two.
TIE = 1e-12


@dataclass
class Parity:
    """The outcome of a compared run: rows compared, and the row where a tie parted it (if any)."""

    n_rows: int
    compared: int
    tie_row: int | None = None

    @property
    def complete(self) -> bool:
        """True when every row was compared (no tie parted the runs): final states must agree."""
        return self.tie_row is None


def pre_update_scores(model, X, y, tasks, rounds=None) -> np.ndarray:
    """The scores a learn (or learn_rounds) call made before each update."""
    if rounds is None:
        scores, _ = model._run_learn(X, y, tasks)
    else:
        scores, _ = model._run_learn(X, y, tasks, rounds)
    return np.asarray(scores, dtype=np.float64)


def scores_row_by_row(model, X, y, tasks) -> np.ndarray:
    """The pre-update score of every row, one row at a time through the public API
    (decision_function, then partial_fit)."""
    out = np.zeros(len(y))
    for t in range(len(y)):
        out[t] = model.decision_function(X[t : t + 1], tasks=tasks[t : t + 1])[0]
        model.partial_fit(X[t : t + 1], y[t : t + 1], tasks=tasks[t : t + 1])
    return out


def _parted(s_nat: np.ndarray, s_ref: np.ndarray, scale: float) -> np.ndarray:
    """Rows where a tie may part the runs: the reference score is a tie (within TIE of 0 or ±1,
    relative to the largest |score| up to that row) and the two sides fall on different sides of
    it (or one exactly on it), so their decisions or updates can differ."""
    running = np.maximum(np.maximum.accumulate(np.abs(s_ref)) if len(s_ref) else s_ref, max(scale, 1.0))
    a_ref, a_nat = np.abs(s_ref), np.abs(s_nat)
    at_zero = (a_ref <= TIE * running) & (np.sign(s_nat) != np.sign(s_ref))
    at_one = (np.abs(a_ref - 1.0) <= TIE * running) & (np.sign(a_nat - 1.0) != np.sign(a_ref - 1.0))
    return at_zero | at_one


def chunks_of(n: int, chunk: int):
    return [slice(a, min(a + chunk, n)) for a in range(0, n, chunk)]


def round_chunks(rounds: np.ndarray, chunk_rounds: int):
    """Slices of whole rounds, `chunk_rounds` rounds each."""
    bounds = np.flatnonzero(np.diff(rounds)) + 1
    starts = np.concatenate([[0], bounds[chunk_rounds - 1 :: chunk_rounds], [len(rounds)]])
    return [slice(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]


def check_scores(s_nat, s_ref, *, rtol=1e-9, atol=1e-12, scale=0.0, offset=0, n_rows=None) -> int:
    """Checks two arrays of pre-update scores of the same rows: decisions identical and scores
    close up to the first tie where they differ. Returns how many rows agree before it (all of
    them when there is no such tie). ``scale`` carries the largest |score| of earlier rows."""
    s_nat, s_ref = np.asarray(s_nat, dtype=np.float64), np.asarray(s_ref, dtype=np.float64)
    scale = max(scale, float(np.max(np.abs(s_ref), initial=0.0)))
    parted = _parted(s_nat, s_ref, scale)
    upto = int(np.argmax(parted)) if parted.any() else len(s_ref)
    where = f"rows {offset}..{offset + upto} of {n_rows if n_rows is not None else len(s_ref)}"
    np.testing.assert_array_equal(
        s_nat[:upto] >= 0, s_ref[:upto] >= 0, err_msg=f"decisions differ away from any tie ({where})"
    )
    np.testing.assert_allclose(
        s_nat[:upto], s_ref[:upto], rtol=rtol, atol=atol * max(1.0, scale), err_msg=f"scores differ ({where})"
    )
    return upto


def compare_runs(native, reference, X, y, tasks, *, rounds=None, slices=None, rtol=1e-9, atol=1e-12) -> Parity:
    """Feeds both learners the same calls (``slices`` of the stream; one call if None) and checks
    their pre-update scores with ``check_scores``. Stops feeding at a tie where the scores differ."""
    n = len(y)
    tasks = np.full(n, int(tasks)) if np.ndim(tasks) == 0 else np.asarray(tasks)
    slices = slices if slices is not None else [slice(0, n)]
    scale, done = 0.0, 0
    for sl in slices:
        part_rounds = None if rounds is None else rounds[sl]
        s_nat = pre_update_scores(native, X[sl], y[sl], tasks[sl], part_rounds)
        s_ref = pre_update_scores(reference, X[sl], y[sl], tasks[sl], part_rounds)
        upto = check_scores(s_nat, s_ref, rtol=rtol, atol=atol, scale=scale, offset=done, n_rows=n)
        if upto < len(s_ref):
            return Parity(n_rows=n, compared=done + upto, tie_row=done + upto)
        scale = max(scale, float(np.max(np.abs(s_ref), initial=0.0)))
        done += len(s_ref)
    return Parity(n_rows=n, compared=n)


def assert_same_run(native, reference, X, y, tasks, *, rtol=1e-9, chunk=50) -> Parity:
    """``compare_runs`` in chunks of ``chunk`` rows, then (when no tie parted the runs) the final
    scores and counters must agree too."""
    parity = compare_runs(native, reference, X, y, tasks, slices=chunks_of(len(y), chunk), rtol=rtol)
    if parity.complete:
        np.testing.assert_allclose(
            native.decision_function(X, tasks=tasks), reference.decision_function(X, tasks=tasks), rtol=rtol, atol=1e-12
        )
        assert native.n_active_ == reference.n_active_
        assert native.n_updates_ == reference.n_updates_
        assert native.n_mistakes_ == reference.n_mistakes_
    return parity
