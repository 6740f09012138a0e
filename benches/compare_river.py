"""Per-example speed of the River adapter (omtl.river) against River's own LogisticRegression.

In one process, on the same synthetic multitask stream as dicts (River's format), the
prequential loop River users write (predict_one, then learn_one, an Accuracy metric updated per
example) for: River's ``linear_model.LogisticRegression`` (one pooled model, task id not a
feature), ``omtl.river.MTLinear`` (task id from ``x["task"]``) and the batch
``omtl.MTLinear.learn`` on the same rows as arrays (the ceiling without per-example calls); then
the mini-batch loop (``predict_many`` a chunk of pandas rows, then ``learn_many`` it) for both.
Rows per second, best of ``--repeat`` runs, for each ``--d``.

    python benches/compare_river.py [--n 20000] [--k 12] [--d 20 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from river import linear_model, metrics

import omtl
import omtl.river


def prequential(model, data):
    metric = metrics.Accuracy()
    start = time.perf_counter()
    for x, y in data:
        metric.update(y, model.predict_one(x))
        model.learn_one(x, y)
    return time.perf_counter() - start, metric.get()


def prequential_many(model, frames):
    """The mini-batch loop: predict a chunk, then learn it (River's MiniBatchClassifier)."""
    correct = 0
    start = time.perf_counter()
    for X, y in frames:
        correct += int((model.predict_many(X).to_numpy() == y.to_numpy()).sum())
        model.learn_many(X, y)
    return time.perf_counter() - start, correct / sum(len(y) for _, y in frames)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--k", type=int, default=12)
    parser.add_argument("--d", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=100, help="rows per mini-batch (learn_many)")
    args = parser.parse_args()
    print(f"{'d':>5} {'model':<38} {'rows/s':>10} {'vs River LR':>11} {'accuracy':>9}")
    for d in args.d:
        s = omtl.datasets.make_multitask_stream(n_samples=args.n, n_tasks=args.k, n_features=d, seed=0)
        names = [f"x{j}" for j in range(d)]
        rows = [dict(zip(names, map(float, row))) for row in s.X]
        labels = [bool(v > 0) for v in s.y]
        pooled = list(zip(rows, labels))
        tasked = [({**x, "task": int(t)}, y) for x, t, y in zip(rows, s.tasks, labels)]
        frame, target = pd.DataFrame([x for x, _ in tasked]), pd.Series(labels)
        chunks = [slice(i, i + args.chunk) for i in range(0, args.n, args.chunk)]
        frames = [(frame.iloc[c], target.iloc[c]) for c in chunks]
        pooled_frames = [(frame.drop(columns=["task"]).iloc[c], target.iloc[c]) for c in chunks]
        contenders = {  # (run, its arguments), called in the loop below
            "river LogisticRegression (pooled)": (lambda data: prequential(linear_model.LogisticRegression(), data), pooled),
            "omtl.river.MTLinear": (lambda data: prequential(omtl.river.MTLinear(n_tasks=args.k), data), tasked),
            "omtl.MTLinear.learn (one batch call)": (lambda stream: _batch(stream, args.k), s),
            f"river LR learn_many ({args.chunk}-row)": (
                lambda data: prequential_many(linear_model.LogisticRegression(), data), pooled_frames),
            f"omtl.river.MTLinear learn_many ({args.chunk})": (
                lambda data: prequential_many(omtl.river.MTLinear(n_tasks=args.k), data), frames),
        }
        best = {}
        for _ in range(args.repeat):  # interleaved, so load changes hit every contender alike
            for name, (run, data) in contenders.items():
                seconds, acc = run(data)
                if name not in best or seconds < best[name][0]:
                    best[name] = (seconds, acc)
        base = best["river LogisticRegression (pooled)"][0]
        for name, (seconds, acc) in best.items():
            print(f"{d:>5} {name:<38} {args.n / seconds:>10,.0f} {base / seconds:>10.2f}x {acc:>9.3f}")


def _batch(s, k):
    start = time.perf_counter()
    pred = omtl.MTLinear(n_tasks=k).learn(s.X, s.y, tasks=s.tasks)
    return time.perf_counter() - start, float(np.mean(pred == s.y))


if __name__ == "__main__":
    main()
