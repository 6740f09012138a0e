"""The hot paths of the budget learners, the Projectrons, OMTRL and ROMCO beside their floors: how far each is from what the hardware allows.

For every path, in one process on the same stream: the native learner, the hand-written NumPy
(or SciPy) code a user would write instead (the *peer*), and a *floor*, the time of the same
arithmetic done the fastest way NumPy/BLAS can (batched, single-threaded BLAS) or the path's own
multiply-add count at the FMA rate measured here. Every timing is CPU time of this
single-threaded process (on a shared machine wall time mostly measures the neighbours), repeated
``--repeat`` times: the median is printed with the spread (min-max) beside it.

1. Dense kernel sums (MTRBP, MTFORG): School-sized synthetic stream (15,000 x 28, 139 tasks, rbf
   gamma = 1/d, complete graph), B = 200 and 1000. Peer: the NumPy budget Perceptron of
   ``compare_budget.py`` (cached squared norms, one vectorised kernel row per example, random
   slot eviction). Floor: scores of blocks of 500 queries against a fixed active set of B rows,
   ``exp(-gamma (|s|^2 + |x|^2 - 2 S X'))`` then ``K beta`` (one BLAS product per block).
   Sparse text (8,000 x 100,000, ~200 non-zeros, 4 tasks, poly 2, B = 1000): peer, the faster of
   the two SciPy-sparse loops of ``compare_budget.py``; floor, blocks of 500 CSR queries times
   the CSR active set, then the polynomial and ``K beta``.
2. MTBPRJ (School, B = 1000, eta = 0.01): full pass, and the first 5,000 rows against the NumPy
   Projectron that solves at every mistake (``compare_projectron.py``). Floor: the O(B^2) linear
   algebra the incremental inverse cannot avoid, done by BLAS at the active-set size the learner
   had at each step: one ``dsymv`` (alpha = Q k) per update-mistake, one ``dsyr2`` per budget
   step, one ``dsyr`` per insertion (timed at sizes every 50 and interpolated).
3. OMTRL (School, k = 139, batch): full pass against the NumPy reference twin (a k x k
   eigendecomposition at every example after the warm-up; on a prefix, it is slow). Floor: the
   native algorithm's multiply-adds (per refresh after a mistake O(k d^2 + d^3 + k^2 d), per
   mistake O(k d), per example O(d)) at the measured FMA rate.

4. ROMCO (P1, defaults) on three streams: School (wide U, the row side), Sentiment
   (sparse, d = 473,856, k = 4: U held factored) and the dense 18,000 x 400, 12-task stream (the
   column side). Peer: the NumPy ROMCO of ``compare_romco.py`` (``numpy.linalg.svd`` at every
   update); on Sentiment the native PA-Unique pass (the target is ROMCO within 10x of it).
   Floor: the multiply-adds of the route the learner took (from its diagnostics, see
   ``romco_fmas``) at the measured FMA rate.

    OMTL_DATA=/work/shared/data PYTHONPATH=python python benches/floors.py [--quick] [--only dense,mtbprj,omtrl,romco]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy.linalg import blas  # noqa: E402

import omtl  # noqa: E402
import omtl.reference as ref  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_budget import (  # noqa: E402
    dense_stream,
    numpy_budget_perceptron,
    scipy_budget_perceptron,
    scipy_budget_perceptron_scattered,
    text_stream,
)
from compare_projectron import NumpyProjectron  # noqa: E402

clock = time.process_time
ROWS: list[tuple[str, ...]] = []


def measure(fn, repeat):
    """(median seconds, min, max, last result) of ``repeat`` runs of ``fn``."""
    times, out = [], None
    for _ in range(repeat):
        start = clock()
        out = fn()
        times.append(clock() - start)
    return statistics.median(times), min(times), max(times), out


def spread(med, lo, hi):
    return f"{med:.3g} s ({lo:.3g}-{hi:.3g})"


def record(path, who, n, timing, floor_seconds, note=""):
    med, lo, hi = timing[:3]
    ROWS.append((path, who, f"{n / med:,.0f}", spread(med, lo, hi), f"{floor_seconds / med:.2f}" if floor_seconds else "-", note))


def fma_rate():
    """Multiply-adds per second of a single-threaded BLAS dgemm (the machine's usable peak)."""
    a = np.random.default_rng(0).standard_normal((1000, 1000))
    best = np.inf
    for _ in range(3):
        start = clock()
        a @ a
        best = min(best, clock() - start)
    return 1000**3 / best


# ---- 1. dense and sparse kernel sums -------------------------------------------------------------


def dense_floor(X, B, gamma, rng_seed=0):
    """Seconds per example of block-of-500 scores against a fixed active set of B rows."""
    rng = np.random.default_rng(rng_seed)
    S = X[rng.choice(len(X), size=B, replace=B > len(X))]
    beta = rng.choice([-1.0, 1.0], size=B)
    sq_s = np.einsum("ij,ij->i", S, S)
    out = np.empty(len(X))
    start = clock()
    for a in range(0, len(X), 500):
        Q = X[a : a + 500]
        K = Q @ S.T
        K *= -2.0
        K += np.einsum("ij,ij->i", Q, Q)[:, None]
        K += sq_s[None, :]
        np.maximum(K, 0.0, out=K)
        K *= -gamma
        np.exp(K, out=K)
        out[a : a + 500] = K @ beta
    return (clock() - start) / len(X)


def sparse_floor(X, B, gamma, degree, coef0, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    S = X[rng.choice(X.shape[0], size=B, replace=False)].T.tocsc()
    beta = rng.choice([-1.0, 1.0], size=B)
    start = clock()
    for a in range(0, X.shape[0], 500):
        K = (X[a : a + 500] @ S).toarray()
        K *= gamma
        K += coef0
        (K**degree) @ beta
    return (clock() - start) / X.shape[0]


def kernel_sums(args):
    n, d, k = (3000, 28, 139) if args.quick else (15000, 28, 139)
    X, y, tasks = dense_stream(n, d, k, seed=1)
    T = omtl.TaskGraph.complete(k).task_kernel
    gamma = 1.0 / d
    for B in (200, 1000):
        path = f"dense kernel sum, {n}x{d}, {k} tasks, rbf, B={B}"
        params = {"n_tasks": k, "budget": B, "kernel": "rbf", "gamma": gamma}
        rbp = measure(lambda: omtl.MTRBP(seed=0, **params).partial_fit(X, y, tasks=tasks), args.repeat)  # noqa: B023
        forg = measure(lambda: omtl.MTFORG(**params).partial_fit(X, y, tasks=tasks), args.repeat)  # noqa: B023
        peer = measure(lambda: numpy_budget_perceptron(X, y, tasks, T, B, gamma), args.repeat)  # noqa: B023
        mean_size = peer[3][1]
        floors = sorted(dense_floor(X, B, gamma) for _ in range(args.repeat))
        floor = floors[len(floors) // 2] * n
        ns = lambda t: t / (n * mean_size) * 1e9  # noqa: E731, B023
        note_floor = f"floor at a fixed |S| = {B}: {ns(floor) * mean_size / B:.2f} ns per stored row"
        record(path, "omtl.MTRBP", n, rbp, floor, f"{peer[0] / rbp[0]:.2f}x the NumPy loop; {ns(rbp[0]):.2f} ns per stored row (mean |S| {mean_size:.0f})")
        record(path, "omtl.MTFORG", n, forg, floor, f"{peer[0] / forg[0]:.2f}x the NumPy loop; {ns(forg[0]):.2f} ns per stored row")
        record(path, "NumPy loop (peer)", n, peer, floor, f"{ns(peer[0]):.2f} ns per stored row")
        record(path, "floor: blocks of 500 queries, BLAS", n, (floor, floors[0] * n, floors[-1] * n), floor, note_floor)

    n, d, k, nnz = (1500, 100_000, 4, 200) if args.quick else (8000, 100_000, 4, 200)
    X, y, tasks = text_stream(n, d, k, nnz, seed=2)
    T = omtl.TaskGraph.complete(k).task_kernel
    B, gamma, degree, coef0 = 1000, 1.0, 2, 1.0
    path = f"sparse kernel sum, {n}x{d}, ~{nnz} nnz, {k} tasks, poly 2, B={B}"
    params = {"n_tasks": k, "budget": B, "kernel": "poly", "degree": degree, "gamma": gamma, "coef0": coef0}
    rbp = measure(lambda: omtl.MTRBP(seed=0, **params).partial_fit(X, y, tasks=tasks), args.repeat)
    peer_a = measure(lambda: scipy_budget_perceptron(X, y, tasks, T, B, gamma, degree, coef0), 1)
    peer_b = measure(lambda: scipy_budget_perceptron_scattered(X, y, tasks, T, B, gamma, degree, coef0), 1)
    peer = min(peer_a, peer_b, key=lambda t: t[0])
    floor = sparse_floor(X, B, gamma, degree, coef0) * n
    record(path, "omtl.MTRBP", n, rbp, floor, f"{peer[0] / rbp[0]:.2f}x the faster SciPy loop")
    record(path, "SciPy-sparse loop (peer, 1 run)", n, peer, floor, "")
    record(path, "floor: blocks of 500 CSR queries x CSR set", n, (floor, floor, floor), floor, "1 run")


# ---- 2. MTBPRJ --------------------------------------------------------------------------------


def school(args):
    try:
        s = omtl.datasets.load_school(args.data_dir).shuffled(0)
        name = "School"
    except Exception as exc:  # missing data: the same shape, synthetic
        print(f"(School not available: {exc}; synthetic stream of the same shape)")
        s, name = omtl.datasets.make_multitask_stream(n_samples=15362, n_features=28, n_tasks=139, seed=0), "synthetic School-shaped"
    X = np.asarray(s.X.toarray() if hasattr(s.X, "toarray") else s.X, dtype=np.float64)
    y = np.where(np.asarray(s.y) > 0, 1.0, -1.0)
    return X, y, np.asarray(s.tasks), s.n_tasks, name


def blas_step_seconds(sizes):
    """Seconds of dsymv, dsyr2 and dsyr on an n x n matrix, for each n in ``sizes``."""
    rng = np.random.default_rng(0)
    out = {}
    for n in sizes:
        a = rng.standard_normal((n, n))
        a = np.asfortranarray(a + a.T)
        x, z = rng.standard_normal(n), rng.standard_normal(n)
        reps = max(3, int(2e7 / max(n * n, 1)))
        times = []
        for fn in (lambda: blas.dsymv(1.0, a, x, lower=1),  # noqa: B023
                   lambda: blas.dsyr2(1e-9, x, z, lower=1, a=a, overwrite_a=1),  # noqa: B023
                   lambda: blas.dsyr(1e-9, x, lower=1, a=a, overwrite_a=1)):  # noqa: B023
            start = clock()
            for _ in range(reps):
                fn()
            times.append((clock() - start) / reps)
        out[n] = times
    return out


def mtbprj(args):
    X, y, tasks, k, name = school(args)
    n, d = X.shape
    B, gamma, prefix = (200, 1.0 / d, 2000) if args.quick else (1000, 1.0 / d, 5000)
    params = {"n_tasks": k, "budget": B, "kernel": "rbf", "gamma": gamma, "eta": 0.01}
    path = f"MTBPRJ, {name} {n}x{d}, {k} tasks, rbf, B={B}"
    full = measure(lambda: omtl.MTBPRJ(**params).partial_fit(X, y, tasks=tasks), args.repeat)
    pre = measure(lambda: omtl.MTBPRJ(**params).partial_fit(X[:prefix], y[:prefix], tasks=tasks[:prefix]), args.repeat)

    # The O(B^2) steps the learner took, at the sizes it had (instrumented run, not timed).
    model = omtl.MTBPRJ(**params)
    steps = []  # (size before, kind): 0 projection only, 1 insertion, 2 budget step
    for t in range(n):
        before = (model.n_active_, model.n_updates_, model.n_evictions_)
        model.partial_fit(X[t : t + 1], y[t : t + 1], tasks=tasks[t : t + 1])
        if model.n_updates_ > before[1]:
            kind = 2 if model.n_evictions_ > before[2] else (1 if model.n_active_ > before[0] else 0)
            steps.append((before[0], kind, t < prefix))
    grid = sorted({min(B, 50 * max(1, round(s / 50))) for s, _, _ in steps} | {B})
    cost = blas_step_seconds(grid)
    keys = np.array(grid)

    def step_seconds(size, kind):
        g = int(keys[np.argmin(np.abs(keys - size))])
        symv, syr2, syr = cost[g]
        scale = (size / g) ** 2 if g else 0.0
        return scale * (symv + (syr2 if kind == 2 else syr if kind == 1 else 0.0))

    floor_full = sum(step_seconds(s, kind) for s, kind, _ in steps)
    floor_prefix = sum(step_seconds(s, kind) for s, kind, p in steps if p)
    record(path, "omtl.MTBPRJ, full pass", n, full, floor_full, f"{model.n_mistakes_:,} mistakes, {model.n_evictions_:,} budget steps")
    record(path, "floor: BLAS dsymv/dsyr2/dsyr per step, full pass", n, (floor_full,) * 3, floor_full, "")

    T = omtl.TaskGraph.complete(k).task_kernel
    peer_model = NumpyProjectron(T, gamma, B)

    def numpy_prefix():
        for t in range(prefix):
            peer_model.learn_one(X[t], int(tasks[t]), y[t])

    peer = measure(numpy_prefix, 1)
    record(path, f"omtl.MTBPRJ, first {prefix}", prefix, pre, floor_prefix, f"{peer[0] / pre[0]:.0f}x the NumPy Projectron")
    record(path, f"NumPy Projectron (solve every mistake), first {prefix} (peer, 1 run)", prefix, peer, floor_prefix, "")
    record(path, f"floor: BLAS per step, first {prefix}", prefix, (floor_prefix,) * 3, floor_prefix, "")


# ---- 3. OMTRL ---------------------------------------------------------------------------------


def omtrl(args, rate):
    X, y, tasks, k, name = school(args)
    n, d = X.shape
    prefix = 1500 if args.quick else 3000
    path = f"OMTRL batch, {name} {n}x{d}, k={k}"
    full = measure(lambda: omtl.OMTRL(n_tasks=k).partial_fit(X, y, tasks=tasks), args.repeat)
    model = omtl.OMTRL(n_tasks=k)
    preds = model.learn(X, y, tasks=tasks)
    epoch = int(model._diagnostics()["epoch"])
    mistakes = np.asarray(preds) != y
    # The native algorithm's multiply-adds: per example the score (d); per mistake the k-task
    # update (k d); per refresh after a mistake past the warm-up, W W' (k d^2 / 2), its d x d
    # eigendecomposition (~9 d^3, tridiagonal QR with vectors), Z (k d^2) and Z'Z (k^2 d / 2).
    refreshes = int(mistakes[epoch - 1 :].sum()) + 1
    fmas = n * d + int(mistakes.sum()) * k * d + refreshes * (k * d * d / 2 + 9 * d**3 + k * d * d + k * k * d / 2)
    floor = fmas / rate
    pre_native = measure(lambda: omtl.OMTRL(n_tasks=k).partial_fit(X[:prefix], y[:prefix], tasks=tasks[:prefix]), args.repeat)
    peer = measure(lambda: ref.OMTRL(n_tasks=k).partial_fit(X[:prefix], y[:prefix], tasks=tasks[:prefix]), 1)
    record(path, "omtl.OMTRL, full pass", n, full, floor, f"{int(mistakes.sum()):,} mistakes, {refreshes:,} refreshes that compute")
    record(path, "floor: its multiply-adds at the dgemm FMA rate", n, (floor,) * 3, floor, f"{fmas / 1e9:.3f} G multiply-adds")
    record(path, f"omtl.OMTRL, first {prefix}", prefix, pre_native, 0.0, f"{peer[0] / pre_native[0]:.0f}x the NumPy twin")
    record(path, f"NumPy reference twin (k x k eigh per example), first {prefix} (peer, 1 run)", prefix, peer, 0.0, "")


# ---- 4. ROMCO ---------------------------------------------------------------------------------


def romco_streams(args):
    """(name, X, y, tasks, k, peer name, peer) for the three ROMCO streams (P1, defaults)."""
    from compare_romco import numpy_romco

    out = []
    s = omtl.datasets.load_school(args.data_dir).shuffled(0)
    X, y, t, k = s.X, s.y.astype(np.float64), s.tasks, s.n_tasks
    if args.quick:
        X, y, t = X[:3000], y[:3000], t[:3000]
    out.append((f"School {X.shape[0]}x{X.shape[1]}, k={k} (wide: row side)", X, y, t, k,
                "NumPy ROMCO, numpy.linalg.svd per update",
                lambda X=X, y=y, t=t, k=k: numpy_romco(X, y, t, np.arange(len(y)), k)))
    s = omtl.datasets.load_sentiment(args.data_dir)
    X, y, t, k = s.X, s.y.astype(np.float64), s.tasks, s.n_tasks
    if args.quick:
        X, y, t = X[:2000], y[:2000], t[:2000]
    out.append((f"Sentiment {X.shape[0]}x{X.shape[1]:,} sparse, k={k} (factored U = W Pi)", X, y, t, k,
                "omtl.PAUnique (the target: ROMCO within 10x of its pass)",
                lambda X=X, y=y, t=t, k=k: omtl.PAUnique(n_tasks=k).learn(X, y, tasks=t)))
    n = 3000 if args.quick else 18_000
    s = omtl.datasets.make_multitask_stream(n_samples=n, n_tasks=12, n_features=400, seed=0)
    X, y, t, k = s.X, s.y.astype(np.float64), s.tasks, 12
    out.append((f"dense {n}x400, k={k} (column side)", X, y, t, k,
                "NumPy ROMCO, numpy.linalg.svd per update",
                lambda X=X, y=y, t=t, k=k: numpy_romco(X, y, t, np.arange(len(y)), k)))
    return out


def romco_fmas(model, X):
    """Multiply-adds of a P1 pass of ``model`` (fitted on ``X``) by the route it took, from its
    diagnostics: what the chosen route cannot avoid with its representation of U (divisions of the
    secular equations, memory traffic and bookkeeping not counted, so a lower bound).

    Per example: the score, ``<u_t + v_t, x>`` (``nnz``; factored: ``U'x = Pi' (W'x)``, ``nnz k``).
    Per update: the steps of u_t and v_t (``nnz`` each; factored: ``nnz k`` for W), and the SVT:
    - row side (``D = U U'``, d x d): two d x d basis products and ``Pi_L`` (``3 d^3``) and
      ``Pi_L U`` (``d^2 k``) when the eigendecomposition was updated; a fresh one forms ``D``
      (``d^2 k / 2``) and eigendecomposes it (~``9 d^3``, tridiagonal QR with vectors);
    - column side (``C = U'U``, k x k): ``U'x`` (``nnz k``), two k x k basis products and Pi
      (``3 k^3``) and ``U Pi`` (``d k^2``); fresh: ``C`` from its change plus ``9 k^3``;
    - factored (``U = W Pi``): ``3 k^3`` as above plus ``Pi Pi_new`` and ``Pi_new^-1 Pi^-1``
      (``2 k^3``) instead of ``U Pi``;
    - the exact resync every 100 updates: ``d k^2`` (column side), ``d^2 k`` (row side).
    """
    n, d = X.shape
    k = model.n_tasks
    nnz = X.nnz / n if hasattr(X, "nnz") else float(d)
    diag = model._diagnostics()
    updates = model.n_updates_
    svts = diag["n_gram_svt"] + diag["n_qr_svt"]
    updated = diag["n_eigen_updates"]
    fresh = max(svts - updated, 0.0)
    resyncs = updates // 100
    if diag["u_factored"]:
        per_example = nnz * k + nnz
        per_update = 2 * nnz * k + nnz + 5 * k**3
        svt = fresh * 9 * k**3
        resync = 0.0  # work-scaled: at most as much again as the updates (romco.md item 13)
    elif diag["n_row_svt"] > svts / 2:
        per_example = 2 * nnz
        per_update = 2 * nnz + 3 * d**3 + d * d * k
        svt = fresh * (d * d * k / 2 + 9 * d**3)
        resync = resyncs * d * d * k
    else:
        per_example = 2 * nnz
        per_update = 2 * nnz + nnz * k + 3 * k**3 + d * k * k
        svt = fresh * 9 * k**3
        resync = resyncs * d * k * k
    return n * per_example + updates * per_update + svt + resync


def touch_seconds(count, repeat):
    """Seconds to allocate and write ``count`` fresh floats (a model's U and V: first-touch page
    faults included), the median of ``repeat``."""
    times = []
    for _ in range(repeat):
        start = clock()
        np.full(count, 0.0)
        times.append(clock() - start)
    return statistics.median(times)


def read_seconds(X, repeat):
    """Seconds of one pass over the stream's X (``X @ w``, dense BLAS or CSR), the median of ``repeat``."""
    w = np.ones(X.shape[1])
    times = []
    for _ in range(repeat):
        start = clock()
        X @ w
        times.append(clock() - start)
    return statistics.median(times)


def romco(args, rate):
    for name, X, y, tasks, k, peer_name, peer_run in romco_streams(args):
        path = f"ROMCO P1 defaults, {name}"
        n = X.shape[0]
        native = measure(lambda X=X, y=y, tasks=tasks, k=k: omtl.ROMCO(n_tasks=k).learn(X, y, tasks=tasks), args.repeat)
        peer = measure(peer_run, args.repeat)
        model = omtl.ROMCO(n_tasks=k)
        model.learn(X, y, tasks=tasks)
        fmas = romco_fmas(model, X)
        touch = touch_seconds(2 * X.shape[1] * k, args.repeat)
        read = read_seconds(X, args.repeat)
        floor = fmas / rate + touch + read
        diag = model._diagnostics()
        routes = (f"{model.n_updates_:,} updates; SVTs: {int(diag['n_row_svt']):,} row side, "
                  f"{int(diag['n_gram_svt'] - diag['n_row_svt']):,} column side, {int(diag['n_qr_svt']):,} route (a); "
                  f"{int(diag['n_eigen_updates']):,} eigendecompositions updated; factored {int(diag['u_factored'])}")
        if peer_name.startswith("omtl.PAUnique"):
            versus = f"{native[0] / peer[0]:.1f}x the PAUnique pass (target <= 10x)"
        else:
            versus = f"{peer[0] / native[0]:.1f}x the NumPy ROMCO (target >= 10x)"
        record(path, "omtl.ROMCO", n, native, floor, f"{versus}; {routes}")
        record(path, f"{peer_name} (peer)", n, peer, floor, "")
        record(path, "floor: the route's multiply-adds at the dgemm FMA rate, writing U and V once, reading X once", n,
               (floor,) * 3, floor,
               f"{fmas / 1e6:.1f} M multiply-adds ({fmas / rate:.3g} s) + {touch:.3g} s (2 d k floats) + {read:.3g} s (X @ w)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short streams, one repetition")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="dense,mtbprj,omtrl,romco", help="comma-separated subset of dense,mtbprj,omtrl,romco")
    parser.add_argument("--data-dir", default=None, help="folder holding school/ (default: $OMTL_DATA)")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat = 1
    only = set(args.only.split(","))
    rate = fma_rate()
    if "dense" in only:
        kernel_sums(args)
    if "mtbprj" in only:
        mtbprj(args)
    if "omtrl" in only:
        omtrl(args, rate)
    if "romco" in only:
        romco(args, rate)
    print(f"CPU time, median of {args.repeat} (min-max); OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}; "
          f"SIMD level {omtl.simd_level()}; dgemm rate {rate / 1e9:.1f} G multiply-adds/s")
    print("vs floor: the floor's time / this time (above 1: faster than the floor)")
    print("| path | contender | examples/s | time | vs floor | notes |")
    print("|---|---|---|---|---|---|")
    for row in ROWS:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
