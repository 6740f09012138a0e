"""Speed of the native budget learners against what a Python user writes by hand.

Contenders, measured in one process on the same stream:

- ``omtl.MTRBP`` / ``omtl.MTFORG`` (Rust engine, one ``partial_fit`` call over the stream);
- a straightforward NumPy budget kernel Perceptron: a loop over examples, one vectorised kernel
  row per prediction (``exp(-gamma (|s|^2 + |x|^2 - 2 S x))`` over the stored rows), the multitask
  coefficients ``beta_j T[i_j, i]``, random eviction (the victim's row is overwritten in place);
- its SciPy-sparse version for the text stream: the stored rows in a CSR matrix, one sparse
  product ``S @ x.T`` per prediction, the CSR rebuilt after each change of the active set;
- for the dense stream, the *arithmetic bound*: the time per example of the kernel rows alone
  (|S| d multiply-adds and |S| exponentials), computed for all examples at once with one BLAS
  matrix product and a vectorised exp. No online learner can beat it by much.

Streams (synthetic, seeded): School-sized dense (15,000 x 28, 139 tasks, rbf) and a text-like
sparse stream (8,000 x 100,000, ~200 non-zeros per row drawn from a Zipf law over the vocabulary,
tf-idf-like positive values, unit rows, 4 tasks, poly degree 2).

    python benches/compare_budget.py            # the issue's targets
    python benches/compare_budget.py --quick    # a short run
    OMTL_SIMD=avx2 OPENBLAS_CORETYPE=Haswell python benches/compare_budget.py   # AVX2 on an AVX-512 CPU
"""

from __future__ import annotations

import os

# One thread everywhere: the contenders are single-threaded loops, and small BLAS calls only
# lose to thread hand-offs. Set before NumPy loads its BLAS.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

import omtl  # noqa: E402
import omtl._simd  # noqa: E402

# CPU time of this (single-threaded) process: on a shared machine, wall time mostly measures
# the neighbours.
clock = time.process_time


# ---- streams ------------------------------------------------------------------------------------


def dense_stream(n, d, k, seed):
    s = omtl.datasets.make_multitask_stream(n_samples=n, n_tasks=k, n_features=d, seed=seed)
    return s.X, s.y.astype(np.float64), s.tasks


def text_stream(n, d, k, nnz, seed):
    """Rows of ~``nnz`` distinct terms drawn from a Zipf(1.1) law over ``d`` terms, positive
    idf-weighted values, unit norm; labels from related linear tasks."""
    rng = np.random.default_rng(seed)
    p = np.arange(1, d + 1) ** -1.1
    p /= p.sum()
    idf = np.log(1.0 / p)
    perm = rng.permutation(d)  # frequent terms are spread over the index range
    draws = rng.choice(d, size=(n, int(nnz * 2)), p=p)
    indptr, indices, data = [0], [], []
    for t in range(n):
        ranks = rng.permutation(np.unique(draws[t]))[:nnz]
        cols = perm[ranks]
        order = np.argsort(cols)
        indices.append(cols[order])
        data.append((idf[ranks] * (0.5 + rng.random(len(ranks))))[order])
        indptr.append(indptr[-1] + len(cols))
    X = sp.csr_matrix((np.concatenate(data), np.concatenate(indices), np.array(indptr)), shape=(n, d))
    X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())) @ X)
    X.sort_indices()
    tasks = rng.integers(0, k, size=n)
    w0 = rng.standard_normal(d)
    W = 0.7 * w0 + 0.3 * rng.standard_normal((k, d))
    margins = np.asarray((X @ W.T)[np.arange(n), tasks]).ravel()
    y = np.where(margins >= np.median(margins), 1.0, -1.0)
    return X, y, tasks


# ---- hand-written contenders --------------------------------------------------------------------


def numpy_budget_perceptron(X, y, tasks, T, budget, gamma, seed=0):
    """Randomized budget kernel Perceptron (rbf) with a NumPy kernel row per prediction."""
    n, d = X.shape
    S = np.zeros((budget, d))
    sq = np.zeros(budget)
    coef = np.zeros(budget)
    owner = np.zeros(budget, dtype=np.int64)
    size, mistakes, sizes = 0, 0, 0
    rng = np.random.default_rng(seed)
    for t in range(n):
        x, i = X[t], tasks[t]
        sizes += size
        if size:
            k = np.exp(-gamma * np.maximum(sq[:size] + x @ x - 2.0 * (S[:size] @ x), 0.0))
            f = (coef[:size] * T[owner[:size], i]) @ k
        else:
            f = 0.0
        mistakes += (f >= 0) != (y[t] > 0)
        if y[t] * f <= 0:
            if size < budget:
                j = size
                size += 1
            else:
                j = rng.integers(budget)
            S[j], sq[j], coef[j], owner[j] = x, x @ x, y[t], i
    return mistakes, sizes / n


def scipy_budget_perceptron(X, y, tasks, T, budget, gamma, degree, coef0, seed=0):
    """Randomized budget kernel Perceptron (poly) on CSR rows, one sparse product per prediction."""
    n, d = X.shape
    rows, coef, owner = [], [], []
    S = None
    mistakes = 0
    rng = np.random.default_rng(seed)
    for t in range(n):
        x, i = X[t], tasks[t]
        if rows:
            dots = (S @ x.T).toarray().ravel()
            f = (np.asarray(coef) * T[owner, i]) @ (gamma * dots + coef0) ** degree
        else:
            f = 0.0
        mistakes += (f >= 0) != (y[t] > 0)
        if y[t] * f <= 0:
            if len(rows) < budget:
                rows.append(x)
                coef.append(y[t])
                owner.append(i)
            else:
                j = rng.integers(budget)
                rows[j], coef[j], owner[j] = x, y[t], i
            S = sp.vstack(rows, format="csr")
    return mistakes


def scipy_budget_perceptron_scattered(X, y, tasks, T, budget, gamma, degree, coef0, seed=0):
    """The same, written with more care: the CSR of the stored rows rebuilt from their arrays
    with ``np.concatenate``, and the query scattered into a dense buffer (a CSR mat-vec)."""
    n, d = X.shape
    idx, val, coef, owner = [], [], [], []
    S = None
    buf = np.zeros(d)
    mistakes = 0
    rng = np.random.default_rng(seed)
    for t in range(n):
        a, b = X.indptr[t], X.indptr[t + 1]
        xi, xv, i = X.indices[a:b], X.data[a:b], tasks[t]
        if coef:
            buf[xi] = xv
            dots = S @ buf
            buf[xi] = 0.0
            f = (np.asarray(coef) * T[owner, i]) @ (gamma * dots + coef0) ** degree
        else:
            f = 0.0
        mistakes += (f >= 0) != (y[t] > 0)
        if y[t] * f <= 0:
            if len(coef) < budget:
                idx.append(xi)
                val.append(xv)
                coef.append(y[t])
                owner.append(i)
            else:
                j = rng.integers(budget)
                idx[j], val[j], coef[j], owner[j] = xi, xv, y[t], i
            indptr = np.concatenate([[0], np.cumsum([len(v) for v in val])])
            S = sp.csr_matrix((np.concatenate(val), np.concatenate(idx), indptr), shape=(len(val), d))
    return mistakes


def arithmetic_bound_rbf(X, budget, gamma, repeat=1):
    """Seconds per example of |S| d multiply-adds + |S| exps with BLAS and vectorised exp."""
    rng = np.random.default_rng(0)
    S = X[rng.choice(len(X), size=budget, replace=budget > len(X))]
    sq_s = np.einsum("ij,ij->i", S, S)
    best = np.inf
    for _ in range(repeat):
        start = clock()
        for a in range(0, len(X), 2000):
            block = X[a : a + 2000]
            sq_x = np.einsum("ij,ij->i", block, block)
            K = block @ S.T
            K *= -2.0
            K += sq_x[:, None]
            K += sq_s[None, :]
            np.maximum(K, 0.0, out=K)
            K *= -gamma
            np.exp(K, out=K)
        best = min(best, clock() - start)
    return best / len(X)


# ---- measuring ----------------------------------------------------------------------------------


def timed(fn, repeat):
    best, out = np.inf, None
    for _ in range(repeat):
        start = clock()
        out = fn()
        best = min(best, clock() - start)
    return best, out


def run_native(cls, X, y, tasks, **params):
    model = cls(**params)
    model.partial_fit(X, y, tasks=tasks)
    return model.n_mistakes_


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short streams, one repetition")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (the best time is kept)")
    parser.add_argument("--only", choices=["dense", "sparse"], default=None)
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    rows = []

    if args.only in (None, "dense"):
        n, d, k = (3000, 28, 139) if args.quick else (15000, 28, 139)
        X, y, tasks = dense_stream(n, d, k, seed=1)
        T = omtl.TaskGraph.complete(k).task_kernel
        gamma = 1.0 / d
        for budget in (200, 1000):
            common = {"n_tasks": k, "budget": budget, "kernel": "rbf", "gamma": gamma}
            t_rbp, m_rbp = timed(lambda: run_native(omtl.MTRBP, X, y, tasks, seed=0, **common), repeat)  # noqa: B023
            t_forg, m_forg = timed(lambda: run_native(omtl.MTFORG, X, y, tasks, **common), repeat)  # noqa: B023
            t_np, (m_np, mean_size) = timed(lambda: numpy_budget_perceptron(X, y, tasks, T, budget, gamma), repeat)  # noqa: B023
            # The bound for the active-set sizes the learners actually had (the set fills first).
            t_bound = arithmetic_bound_rbf(X, int(round(mean_size)), gamma, repeat=repeat) * n
            ns_per_row = lambda secs: secs / (n * mean_size) * 1e9  # noqa: E731, B023
            print(
                f"B={budget}: mean |S| {mean_size:.0f}; ns per (example, stored row): MTRBP {ns_per_row(t_rbp):.2f}, "
                f"MTFORG {ns_per_row(t_forg):.2f}, NumPy {ns_per_row(t_np):.2f}, bound {ns_per_row(t_bound):.2f}"
            )
            name = f"dense {n}x{d}, {k} tasks, rbf, B={budget}"
            rows.append((name, "omtl.MTRBP", n / t_rbp, m_rbp, t_np / t_rbp, t_bound / t_rbp))
            rows.append((name, "omtl.MTFORG", n / t_forg, m_forg, t_np / t_forg, t_bound / t_forg))
            rows.append((name, "NumPy loop (random eviction)", n / t_np, m_np, 1.0, t_bound / t_np))
            rows.append((name, "arithmetic bound (BLAS + vector exp)", n / t_bound, -1, t_np / t_bound, 1.0))

    if args.only in (None, "sparse"):
        n, d, k, nnz = (1500, 100_000, 4, 200) if args.quick else (8000, 100_000, 4, 200)
        X, y, tasks = text_stream(n, d, k, nnz, seed=2)
        T = omtl.TaskGraph.complete(k).task_kernel
        budget, gamma, degree, coef0 = 1000, 1.0, 2, 1.0
        common = {"n_tasks": k, "budget": budget, "kernel": "poly", "degree": degree, "gamma": gamma, "coef0": coef0}
        t_rbp, m_rbp = timed(lambda: run_native(omtl.MTRBP, X, y, tasks, seed=0, **common), repeat)
        t_forg, m_forg = timed(lambda: run_native(omtl.MTFORG, X, y, tasks, radius=2.0, **common), repeat)
        t_sp, m_sp = timed(lambda: scipy_budget_perceptron(X, y, tasks, T, budget, gamma, degree, coef0), repeat)
        t_sc, m_sc = timed(lambda: scipy_budget_perceptron_scattered(X, y, tasks, T, budget, gamma, degree, coef0), repeat)
        name = f"sparse {n}x{d}, ~{nnz} nnz, {k} tasks, poly 2, B={budget}"
        t_best = min(t_sp, t_sc)
        rows.append((name, "omtl.MTRBP", n / t_rbp, m_rbp, t_best / t_rbp, float("nan")))
        rows.append((name, "omtl.MTFORG", n / t_forg, m_forg, t_best / t_forg, float("nan")))
        rows.append((name, "SciPy-sparse loop (vstack, S @ x.T)", n / t_sp, m_sp, t_best / t_sp, float("nan")))
        rows.append((name, "SciPy-sparse loop (concatenate, S @ scattered x)", n / t_sc, m_sc, t_best / t_sc, float("nan")))

    print(
        f"(CPU time, best of {repeat}; native SIMD level {omtl._simd.simd_level()}; "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'by CPU')})"
    )
    print("speed-up: against the faster hand-written loop of the stream; bound: time of the arithmetic bound / time")
    print("| stream | contender | examples/s | mistakes | speed-up vs hand-written loop | vs arithmetic bound |")
    print("|---|---|---|---|---|---|")
    for name, who, eps, mistakes, ratio, bound in rows:
        m = "-" if mistakes < 0 else f"{mistakes:,}"
        b = "-" if bound != bound else f"{bound:.2f}"
        print(f"| {name} | {who} | {eps:,.0f} | {m} | {ratio:.2f}x | {b} |")


if __name__ == "__main__":
    main()
