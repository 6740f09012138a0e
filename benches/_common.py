"""Set-up shared by the synthetic-stream comparisons (compare_baselines.py, compare_perceptron.py):
the same command line (--n, --d, --k, --quick) and the same dense stream, so their numbers are
comparable."""

from __future__ import annotations

import argparse

import numpy as np

import omtl

#: Rows of the stream under --quick.
QUICK_ROWS = 3000


def synthetic_stream_args(description: str, quick_help: str) -> argparse.Namespace:
    """Parses --n (rows), --d (features), --k (tasks) and --quick."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--n", type=int, default=18000)
    parser.add_argument("--d", type=int, default=400)
    parser.add_argument("--k", type=int, default=12)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    return parser.parse_args()


def synthetic_stream(args: argparse.Namespace):
    """``(n, X, y, tasks)``: the dense stream of ``args`` (seed 0), labels as int64."""
    n = QUICK_ROWS if args.quick else args.n
    stream = omtl.datasets.make_multitask_stream(n_samples=n, n_tasks=args.k, n_features=args.d, seed=0)
    return n, stream.X, stream.y.astype(np.int64), stream.tasks
