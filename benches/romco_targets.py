"""ROMCO's speed goals on wide and sparse streams, side by side in one run, each contender the best of ``--repeat``
fresh passes (alternating, so that load from other processes hits every contender alike):

- School (wide U: d = 28, k = 139), defaults, P1, its first 3,000 rows and all of it: native ROMCO
  against the NumPy ROMCO of ``compare_romco.py`` (``numpy.linalg.svd`` at every update); target
  >= 10x;
- Sentiment (sparse, d = 473,856, k = 4), defaults, P1: a native ROMCO pass against a native
  PA-Unique pass; target: within 10x;
- the dense 18,000 x 400, 12-task stream of ``compare_romco.py``, defaults, P1: target >= 10x.

Usage: ``PYTHONPATH=python python benches/romco_targets.py [--data-dir DIR] [--repeat N] [--clock cpu|wall]``
(``OMTL_SIMD=avx2 OPENBLAS_CORETYPE=Haswell`` for AVX2 on both sides on an AVX-512 CPU)
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from compare_romco import numpy_romco

import omtl
import omtl._simd

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.process_time
SPREAD: list[tuple[float, float]] = []  # per contender pair: min and max of other / native


def best_of(repeat, *runs):
    """Best time of each run over ``repeat`` rounds (the runs alternate within a round); the
    spread of the ratio over the rounds goes to ``SPREAD``."""
    times = [[] for _ in runs]
    for _ in range(repeat):
        for i, run in enumerate(runs):
            start = clock()
            run()
            times[i].append(clock() - start)
    ratios = sorted(b / a for a, b in zip(*times))
    SPREAD.append((ratios[0], ratios[-1]))
    return [min(t) for t in times]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="folder holding school/ and sentiment/ (default: $OMTL_DATA)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: process time (default; on a shared machine wall time mostly measures the neighbours)")
    args = parser.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)  # NumPy's LAPACK single-threaded, like the native engine
    except ImportError:
        print("threadpoolctl not installed: BLAS runs with its default thread count")
    data_dir = args.data_dir or os.environ.get("OMTL_DATA")
    rows = []

    s = omtl.datasets.load_school(data_dir).shuffled(0)
    for n in (3000, len(s.y)):
        X, y, t, k = s.X[:n], s.y[:n].astype(np.float64), s.tasks[:n], s.n_tasks
        nat, ref = best_of(
            args.repeat,
            lambda X=X, y=y, t=t, k=k: omtl.ROMCO(n_tasks=k).learn(X, y, tasks=t),
            lambda X=X, y=y, t=t, k=k: numpy_romco(X, y, t, np.arange(len(y)), k),
        )
        name = "School, first 3,000 rows, P1 defaults" if n == 3000 else "School, P1 defaults"
        rows.append((name, "NumPy-SVD ROMCO", nat, ref, ref / nat, ">= 10x"))

    s = omtl.datasets.load_sentiment(data_dir)
    X, y, t, k = s.X, s.y.astype(np.float64), s.tasks, s.n_tasks
    nat, ref = best_of(
        args.repeat,
        lambda: omtl.ROMCO(n_tasks=k).learn(X, y, tasks=t),
        lambda: omtl.PAUnique(n_tasks=k).learn(X, y, tasks=t),
    )
    rows.append(("Sentiment, P1 defaults", "native PAUnique", nat, ref, nat / ref, "<= 10x (ROMCO / PA)"))

    s = omtl.datasets.make_multitask_stream(n_samples=18_000, n_tasks=12, n_features=400, seed=0)
    X, y, t, k = s.X, s.y.astype(np.float64), s.tasks, 12
    nat, ref = best_of(
        args.repeat,
        lambda: omtl.ROMCO(n_tasks=k).learn(X, y, tasks=t),
        lambda: numpy_romco(X, y, t, np.arange(len(y)), k),
    )
    rows.append(("18,000 x 400, P1 defaults", "NumPy-SVD ROMCO", nat, ref, ref / nat, ">= 10x"))

    print(
        f"best of {args.repeat} passes each ({args.clock} time); spread: the ratio of each round's pair, min-max; "
        f"native SIMD level {omtl._simd.simd_level()}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'by CPU')}"
    )
    print("| stream | against | native ROMCO (s) | other (s) | ratio | spread | target |")
    print("|---|---|---:|---:|---:|---|---|")
    for (stream, other, nat, ref, ratio, target), (lo, hi) in zip(rows, SPREAD):
        if ratio != ref / nat:
            lo, hi = 1 / hi, 1 / lo  # the ratio is native / other there
        print(f"| {stream} | {other} | {nat:.3f} | {ref:.3f} | {ratio:.1f}x | {lo:.1f}-{hi:.1f}x | {target} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
