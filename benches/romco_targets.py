"""Issue 12's ROMCO targets, side by side in one run, each contender the best of ``--repeat``
fresh passes (alternating, so that load from other processes hits every contender alike):

- School (wide U: d = 28, k = 139), defaults, P1: native ROMCO against the NumPy ROMCO of
  ``compare_romco.py`` (``numpy.linalg.svd`` at every update); target >= 10x;
- Sentiment (sparse, d = 473,856, k = 4), defaults, P1: a native ROMCO pass against a native
  PA-Unique pass; target: within 10x;
- the dense 18,000 x 400, 12-task stream of ``compare_romco.py``, defaults, P1: target >= 10x.

Usage: ``PYTHONPATH=python python benches/romco_targets.py [--data-dir DIR] [--repeat N]``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from compare_romco import numpy_romco

import omtl


def best_of(repeat, *runs):
    """Best wall time of each run over ``repeat`` rounds (the runs alternate within a round)."""
    best = [float("inf")] * len(runs)
    for _ in range(repeat):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="folder holding school/ and sentiment/ (default: $OMTL_DATA)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)  # NumPy's LAPACK single-threaded, like the native engine
    except ImportError:
        print("threadpoolctl not installed: BLAS runs with its default thread count")
    data_dir = args.data_dir or os.environ.get("OMTL_DATA")
    rows = []

    s = omtl.datasets.load_school(data_dir).shuffled(0)
    X, y, t, k = s.X, s.y.astype(np.float64), s.tasks, s.n_tasks
    nat, ref = best_of(
        args.repeat,
        lambda: omtl.ROMCO(n_tasks=k).learn(X, y, tasks=t),
        lambda: numpy_romco(X, y, t, np.arange(len(y)), k),
    )
    rows.append(("School, P1 defaults", "NumPy-SVD ROMCO", nat, ref, ref / nat, ">= 10x"))

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

    print(f"best of {args.repeat} passes each")
    print("| stream | against | native ROMCO (s) | other (s) | ratio | target |")
    print("|---|---|---:|---:|---:|---|")
    for stream, other, nat, ref, ratio, target in rows:
        print(f"| {stream} | {other} | {nat:.3f} | {ref:.3f} | {ratio:.1f}x | {target} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
