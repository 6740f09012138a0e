"""Budget Projectron speed: native MTBPRJ / MTBPRJ-2 against a NumPy Projectron written the obvious way.

The NumPy contender is MTBPRJ (ALGORITHMS.md §4.4) as one would first write it: it keeps the
Gram matrix of the active set, calls ``numpy.linalg.solve`` on it at every update-mistake for
the projection, and ``numpy.linalg.inv`` on the enlarged Gram matrix at every budget step for
the removal scores. The native learners keep an incremental inverse (§4.3): O(B²) per mistake.

All contenders run in this process on the same stream (School, or a synthetic stream of the
same shape when the data is missing), with the same kernel and budget; the NumPy one runs on a
prefix (it is slow), and the native MTBPRJ runs on that same prefix too, so the ratio compares
like with like. Usage::

    PYTHONPATH=python python benches/compare_projectron.py            # School, B = 1000
    PYTHONPATH=python python benches/compare_projectron.py --quick    # a short run
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

import omtl
from omtl.datasets import make_multitask_stream


class NumpyProjectron:
    """MTBPRJ with numpy.linalg.solve on the Gram matrix at every mistake (no incremental inverse)."""

    def __init__(self, T, gamma, budget, eta=0.01):
        self.T, self.gamma, self.budget, self.eta = T, gamma, budget, eta
        self.X = None
        self.tasks = np.zeros(0, dtype=np.int64)
        self.beta = np.zeros(0)
        self.H = np.zeros((0, 0))

    def kernel_row(self, x, i):
        if self.X is None or len(self.beta) == 0:
            return np.zeros(0)
        d2 = np.maximum(((self.X - x) ** 2).sum(axis=1), 0.0)
        return self.T[self.tasks, i] * np.exp(-self.gamma * d2)

    def learn_one(self, x, i, y):
        k = self.kernel_row(x, i)
        f = float(self.beta @ k)
        if y * f > 0:
            return f
        kappa = self.T[i, i]
        if len(self.beta):
            alpha = np.linalg.solve(self.H, k)
            d2 = max(0.0, kappa - k @ alpha)
        else:
            alpha, d2 = np.zeros(0), kappa
        if d2 <= max(self.eta**2, 1e-10 * kappa):
            self.beta = self.beta + y * alpha
            return f
        n = len(self.beta)
        H = np.empty((n + 1, n + 1))
        H[:n, :n], H[:n, n], H[n, :n], H[n, n] = self.H, k, k, kappa
        self.H = H
        self.X = x[None, :].copy() if self.X is None else np.vstack([self.X, x])
        self.tasks = np.append(self.tasks, i)
        self.beta = np.append(self.beta, y)
        if n + 1 > self.budget:
            Q = np.linalg.inv(self.H)
            score = np.abs(self.beta[:n]) / np.sqrt(np.diag(Q)[:n])
            r = int(np.argmin(score))
            gamma = -Q[:, r] / Q[r, r]
            gamma[r] = 0.0
            self.beta = self.beta + self.beta[r] * gamma
            keep = np.arange(n + 1) != r
            self.H = self.H[np.ix_(keep, keep)]
            self.X, self.tasks, self.beta = self.X[keep], self.tasks[keep], self.beta[keep]
        return f


def load_stream(args):
    if not args.synthetic:
        try:
            return omtl.datasets.load_school(args.data_dir).shuffled(args.seed), "School (shuffled)"
        except Exception as exc:  # missing data: a synthetic stream of the same shape
            print(f"(School not available: {exc}; using a synthetic stream of the same shape)")
    s = make_multitask_stream(n_samples=15362, n_features=28, n_tasks=139, seed=args.seed)
    return s, "synthetic 15362 x 28, 139 tasks"


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=1000)
    p.add_argument("--numpy-rows", type=int, default=None, help="prefix the NumPy Projectron (and the paired native run) learns; default: all")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--blas-threads", type=int, default=1, help="BLAS threads for the NumPy contender")
    p.add_argument("--data-dir", default=None, help="folder holding school/ (default: $OMTL_DATA)")
    p.add_argument("--synthetic", action="store_true", help="skip School, use the synthetic stream")
    p.add_argument("--quick", action="store_true", help="budget 200, 3000 NumPy rows")
    args = p.parse_args(argv)
    if args.quick:
        args.budget, args.numpy_rows = 200, 3000
    stream, name = load_stream(args)
    X, y, tasks = np.asarray(stream.X.toarray() if hasattr(stream.X, "toarray") else stream.X), stream.y, stream.tasks
    y = np.where(np.asarray(y) > 0, 1.0, -1.0)
    n, d = X.shape
    k = stream.n_tasks
    gamma = 1.0 / d
    B = args.budget
    m = n if args.numpy_rows is None else min(args.numpy_rows, n)
    print(f"stream: {name}, n = {n}, d = {d}, tasks = {k}; rbf gamma = 1/d, budget = {B}, eta = 0.01, graph = complete")
    rows = []

    def native_run(cls, X_, y_, t_):
        model = cls(n_tasks=k, budget=B, kernel="rbf", gamma=gamma)
        _, sec = timed(lambda: model.partial_fit(X_, y_, tasks=t_))
        return model, sec

    first_model = None
    for label, cls in [("native MTBPRJ", omtl.MTBPRJ), ("native MTBPRJ-2", omtl.MTBPRJ2)]:
        model, sec = native_run(cls, X, y, tasks)
        first_model = first_model or model
        rows.append((label, n, model.n_mistakes_, model.n_evictions_, model.n_projections_, n / sec))
    if m == n:  # the paired native run is the full-stream MTBPRJ run
        rows.append(rows.pop(0))
    if m < n:  # the NumPy contender learns a prefix: time the native MTBPRJ on the same rows
        prefix_model, prefix_sec = native_run(omtl.MTBPRJ, X[:m], y[:m], tasks[:m])
        rows.append((f"native MTBPRJ, first {m}", m, prefix_model.n_mistakes_, prefix_model.n_evictions_,
                     prefix_model.n_projections_, m / prefix_sec))
    else:
        prefix_model = first_model
    native_eps = rows[-1][5]

    T = omtl.TaskGraph.complete(k).task_kernel
    ref = NumpyProjectron(T, gamma, B)
    mistakes = 0

    def run_numpy():
        nonlocal mistakes
        for t in range(m):
            f = ref.learn_one(X[t], int(tasks[t]), y[t])
            mistakes += (1.0 if f >= 0 else -1.0) != y[t]

    # One BLAS thread: the native learners are single-threaded, and on a busy machine a threaded
    # BLAS makes the small solves of the NumPy contender much slower, not faster.
    with threadpool_limits(limits=args.blas_threads):
        _, sec = timed(run_numpy)
    rows.append((f"NumPy Projectron (solve), {m} rows", m, mistakes, -1, -1, m / sec))
    numpy_eps = m / sec
    print()
    print("| learner | rows | mistakes | evictions | projections | examples/s |")
    print("|---|---|---|---|---|---|")
    for label, rows_, mis, ev, pr, eps in rows:
        ev_s = "" if ev < 0 else f"{ev:,}"
        pr_s = "" if pr < 0 else f"{pr:,}"
        print(f"| {label} | {rows_:,} | {mis:,} | {ev_s} | {pr_s} | {eps:,.0f} |")
    print()
    print(f"native MTBPRJ / NumPy Projectron on the same {m} rows: {native_eps / numpy_eps:.1f}x")
    agree = np.array_equal(
        np.where(prefix_model.decision_function(X[:50], tasks=tasks[:50]) >= 0, 1, -1),
        np.where(np.array([ref.beta @ ref.kernel_row(X[t], int(tasks[t])) for t in range(50)]) >= 0, 1, -1),
    )
    print(f"native and NumPy models predict alike on 50 rows after the prefix: {agree}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
