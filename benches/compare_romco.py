"""Examples per second of ROMCO and PA-Unique against other implementations, in one process on
the same stream (ALGORITHMS.md §5, §6.1).

Contenders (each runs the prequential protocol: predict, then learn, row by row):

- ROMCO: the native engine (protocol P1 — route (b) of §5.5 with the eigendecomposition of
  the Gram matrix updated at each example, and route (c), Brand's factored update, for
  comparison — and rounds via ``learn_rounds``), its reference twin (``omtl.reference.ROMCO``)
  and a lean NumPy ROMCO that calls ``numpy.linalg.svd`` at every update (same parameters, same
  trigger);
- PA-Unique (PA-I, C = 1): the native engine, River's ``PAClassifier`` (one per task,
  ``predict_one`` + ``learn_one`` on dicts prepared in advance), scikit-learn's per-example
  ``partial_fit`` (``PassiveAggressiveClassifier``, or ``SGDClassifier(learning_rate="pa1")``
  where the former is gone; one per task, ``decision_function`` + ``partial_fit``) and Vowpal
  Wabbit's Python binding (one workspace per task, hinge loss, ``learn`` on text lines prepared in
  advance) if ``vowpalwabbit`` is installed.

With the real data sets at hand (``--data-dir`` or ``$OMTL_DATA``) two more groups run on the
stream shapes: School (wide U: d = 28, k = 139; native against the NumPy-SVD ROMCO
and the twin, defaults, P1) and Sentiment (sparse, d = 473,856, k = 4; a native ROMCO pass
against a native PA-Unique pass, as the issue states its target).

Usage: ``PYTHONPATH=python python benches/compare_romco.py [--quick] [--data-dir DIR]``
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

import omtl
import omtl._simd
import omtl.reference as ref
from omtl.reference.rounds import round_spans


def numpy_romco(X, y, tasks, rounds, k, *, eta1=0.1, eta2=0.1, lambda1=1e-4, lambda2=1e-4):
    """ROMCO (loss trigger) in plain NumPy: a thin SVD of U at every update."""
    d = X.shape[1]
    U, V = np.zeros((d, k)), np.zeros((d, k))
    preds = np.empty(len(y))
    for start, end in round_spans(rounds):
        idx = range(start, end)
        p = np.array([(U[:, tasks[t]] + V[:, tasks[t]]) @ X[t] for t in idx])
        preds[start:end] = np.where(p >= 0, 1, -1)
        margins = y[start:end] * p
        if np.any(margins < 1):
            for t, m in zip(idx, margins):
                if m < 1:
                    U[:, tasks[t]] += eta1 * y[t] * X[t]
                    V[:, tasks[t]] += eta2 * y[t] * X[t]
            P, s, Qt = np.linalg.svd(U, full_matrices=False)
            U = (P * np.maximum(s - eta1 * lambda1, 0.0)) @ Qt
            norms = np.linalg.norm(V, axis=0)
            V *= np.maximum(0.0, 1.0 - eta2 * lambda2 / np.where(norms > 0, norms, np.inf))
    return preds


def timed(fn):
    # CPU time of this process: every contender is single-threaded (BLAS included), and on a
    # shared machine wall time mostly measures the neighbours.
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def river_pa(X, y, tasks, k):
    from river import linear_model

    rows = [dict(enumerate(x)) for x in X]  # prepared outside the timed loop

    def run():
        models = [linear_model.PAClassifier(C=1.0, mode=1) for _ in range(k)]
        preds = np.empty(len(y))
        for t in range(len(y)):
            m = models[tasks[t]]
            preds[t] = 1 if m.predict_one(rows[t]) else -1
            m.learn_one(rows[t], bool(y[t] > 0))
        return preds

    return run


def sklearn_pa(X, y, tasks, k):
    from sklearn import linear_model

    if hasattr(linear_model, "PassiveAggressiveClassifier"):
        name = "scikit-learn PassiveAggressiveClassifier"

        def make():
            return linear_model.PassiveAggressiveClassifier(C=1.0, fit_intercept=False)
    else:
        name = "scikit-learn SGDClassifier(pa1)"

        def make():
            return linear_model.SGDClassifier(
                loss="hinge", penalty=None, learning_rate="pa1", eta0=1.0, fit_intercept=False
            )

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            models = [make() for _ in range(k)]
            fitted = [False] * k
            preds = np.empty(len(y))
            for t in range(len(y)):
                i, row = tasks[t], X[t : t + 1]
                preds[t] = np.sign(models[i].decision_function(row)[0]) if fitted[i] else 1
                models[i].partial_fit(row, y[t : t + 1], classes=[-1, 1])
                fitted[i] = True
            return preds

    return name, run


def vw_pa(X, y, tasks, k):
    try:
        from vowpalwabbit import Workspace
    except ImportError:
        return None
    lines = [f"{int(y[t])} | " + " ".join(f"{j}:{v:.17g}" for j, v in enumerate(X[t]) if v != 0) for t in range(len(y))]

    def run():
        models = [Workspace("--quiet --loss_function hinge") for _ in range(k)]
        for t in range(len(y)):
            models[tasks[t]].learn(lines[t])
        for m in models:
            m.finish()

    return run


def real_streams(data_dir, results, routes):
    """School (wide U) and Sentiment (sparse, high-d), when the data are available."""
    if not data_dir:
        print("no --data-dir / $OMTL_DATA: School and Sentiment skipped")
        return
    try:
        school = omtl.datasets.load_school(data_dir).shuffled(0)
        sentiment = omtl.datasets.load_sentiment(data_dir)
    except (OSError, ValueError) as exc:
        print(f"School/Sentiment skipped: {exc}")
        return

    def record(group, name, n, seconds, note=""):
        results.append((group, name, n / seconds, note + f" ({seconds:.3f} s per pass)"))

    X, y, tasks, k = school.X, school.y.astype(np.float64), school.tasks, school.n_tasks
    n = len(y)
    m = omtl.ROMCO(n_tasks=k)
    sec, _ = timed(lambda: m.learn(X, y, tasks=tasks))
    record(
        "ROMCO P1, School",
        "omtl.ROMCO (native)",
        n,
        sec,
        routes(m) + f"; {m._diagnostics()['n_row_svt']:.0f} on the row side",
    )
    sec, _ = timed(lambda: numpy_romco(X, y, tasks, np.arange(n), k))
    record("ROMCO P1, School", "NumPy ROMCO, numpy.linalg.svd per update", n, sec)
    m = ref.ROMCO(n_tasks=k)
    sec, _ = timed(lambda: m.learn(X, y, tasks=tasks))
    record("ROMCO P1, School", "omtl.reference.ROMCO (twin)", n, sec)

    X, y, tasks, k = sentiment.X, sentiment.y.astype(np.float64), sentiment.tasks, sentiment.n_tasks
    n = len(y)
    m = omtl.ROMCO(n_tasks=k)
    sec, _ = timed(lambda: m.learn(X, y, tasks=tasks))
    record(
        "Sentiment", "omtl.ROMCO (native)", n, sec, routes(m) + f"; U factored: {m._diagnostics()['u_factored']:.0f}"
    )
    m = omtl.PAUnique(n_tasks=k)
    sec, _ = timed(lambda: m.learn(X, y, tasks=tasks))
    record("Sentiment", "omtl.PAUnique (native)", n, sec, "the issue's yardstick: ROMCO within 10x of this pass")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-samples", type=int, default=18_000)
    parser.add_argument("--n-features", type=int, default=400)
    parser.add_argument("--n-tasks", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a short run (3,000 rows)")
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads for NumPy/scikit-learn (default 1: every contender single-threaded, like the native engine)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder holding school/ and sentiment/ (default: $OMTL_DATA; skipped if absent)",
    )
    args = parser.parse_args(argv)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.blas_threads)
    except ImportError:
        print("threadpoolctl not installed: BLAS runs with its default thread count")
    n = 3000 if args.quick else args.n_samples
    k = args.n_tasks
    stream = omtl.datasets.make_multitask_stream(n_samples=n, n_tasks=k, n_features=args.n_features, seed=args.seed)
    X, y, tasks = stream.X, stream.y.astype(np.float64), stream.tasks
    rstream = stream.as_rounds(args.seed)
    Xr, yr, tr, rr = rstream.X, rstream.y.astype(np.float64), rstream.tasks, rstream.rounds
    print(f"stream: dense {n} x {args.n_features}, {k} tasks; P2: {rr[-1] + 1} rounds")
    print(
        f"native SIMD level {omtl._simd.simd_level()}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'by CPU')}; "
        f"BLAS threads {args.blas_threads}; CPU time of one pass each"
    )

    results = []

    def record(group, name, seconds, note=""):
        results.append((group, name, n / seconds, note))

    def routes(m):
        d = m._diagnostics()
        return (
            f"{m.n_updates_} updates; SVT routes (b)/(a)/(c): "
            f"{d['n_gram_svt']:.0f}/{d['n_qr_svt']:.0f}/{d.get('n_brand_svt', 0):.0f}; "
            f"{d.get('n_eigen_updates', 0):.0f} eigendecompositions updated"
        )

    # ---- ROMCO -----------------------------------------------------------------------------
    m = omtl.ROMCO(n_tasks=k)
    sec, _ = timed(lambda: m.learn(X, y, tasks=tasks))
    record("ROMCO P1", "omtl.ROMCO (native)", sec, routes(m))
    m = omtl.ROMCO(n_tasks=k)
    m._svt_route = "brand"  # route (c), a test and benchmark hook
    sec, _ = timed(lambda: m.learn(X, y, tasks=tasks))
    record("ROMCO P1", "omtl.ROMCO (native, route (c))", sec, routes(m))
    sec, _ = timed(lambda: numpy_romco(X, y, tasks, np.arange(n), k))
    record("ROMCO P1", "NumPy ROMCO, numpy.linalg.svd per update", sec)
    m = ref.ROMCO(n_tasks=k)
    sec, _ = timed(lambda: m.learn(X, y, tasks=tasks))
    record("ROMCO P1", "omtl.reference.ROMCO (twin)", sec)
    # Other regimes of the SVT (§5.5): lambda1 large enough for the Gram route, and lambda1 = 0.
    for label, lam in (("ROMCO P1, lambda1=1", 1.0), ("ROMCO P1, lambda1=0", 0.0)):
        m = omtl.ROMCO(n_tasks=k, lambda1=lam)
        sec, _ = timed(lambda m=m: m.learn(X, y, tasks=tasks))
        record(label, "omtl.ROMCO (native)", sec, routes(m))
        sec, _ = timed(lambda lam=lam: numpy_romco(X, y, tasks, np.arange(n), k, lambda1=lam))
        record(label, "NumPy ROMCO, numpy.linalg.svd per update", sec)
    m = omtl.ROMCO(n_tasks=k)
    sec, _ = timed(lambda: m.learn_rounds(Xr, yr, tasks=tr, rounds=rr))
    record("ROMCO P2", "omtl.ROMCO (native)", sec, routes(m))
    sec, _ = timed(lambda: numpy_romco(Xr, yr, tr, rr, k))
    record("ROMCO P2", "NumPy ROMCO, numpy.linalg.svd per update", sec)
    m = ref.ROMCO(n_tasks=k)
    sec, _ = timed(lambda: m.learn_rounds(Xr, yr, tasks=tr, rounds=rr))
    record("ROMCO P2", "omtl.reference.ROMCO (twin)", sec)

    # ---- PA-Unique -------------------------------------------------------------------------
    m = omtl.PAUnique(n_tasks=k)
    sec, _ = timed(lambda: m.learn(X, y, tasks=tasks))
    record("PA-Unique", "omtl.PAUnique (native)", sec)
    m = ref.PAUnique(n_tasks=k)
    sec, _ = timed(lambda: m.learn(X, y, tasks=tasks))
    record("PA-Unique", "omtl.reference.PAUnique (twin)", sec)
    sec, _ = timed(river_pa(X, y, tasks, k))
    record("PA-Unique", "River PAClassifier (learn_one)", sec)
    name, run = sklearn_pa(X, y, tasks, k)
    sec, _ = timed(run)
    record("PA-Unique", name + " (partial_fit)", sec)
    run = vw_pa(X, y, tasks, k)
    if run is None:
        print("vowpalwabbit is not installed: skipped")
    else:
        sec, _ = timed(run)
        record("PA-Unique", "Vowpal Wabbit (hinge, learn)", sec, "SGD, not PA; learn only")

    real_streams(args.data_dir or os.environ.get("OMTL_DATA"), results, routes)

    print()
    print("| group | contender | examples/s | native / this | note |")
    print("|---|---|---:|---:|---|")
    for group, name, rate, note in results:
        native = next(r for g, nm, r, _ in results if g == group and nm.endswith("(native)"))
        print(f"| {group} | {name} | {rate:,.0f} | {native / rate:,.1f}x | {note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
