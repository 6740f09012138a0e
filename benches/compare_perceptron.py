"""Speed of the linear Perceptron battery against what a Python user would otherwise write.

In one process, on the same dense stream (default 18,000 x 400, 12 tasks), one online pass of:
omtl.KernelPerceptron (native, primal form), its reference twin (on a prefix: it is slow by
design), scikit-learn's Perceptron with one model per task fed by partial_fit one example at a
time, and River's Perceptron (one per task, learn_one). Prints examples/second and ratios.

    python benches/compare_perceptron.py [--n 18000] [--d 400] [--k 12] [--quick]
"""

from __future__ import annotations

import time

import numpy as np
from _common import synthetic_stream, synthetic_stream_args

import omtl
import omtl.reference


def timed(fn, n_examples):
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    return n_examples / seconds, seconds


def run_sklearn(X, y, tasks, k):
    from sklearn.linear_model import Perceptron

    models = [Perceptron(fit_intercept=False) for _ in range(k)]
    seen = [False] * k
    for t in range(len(y)):
        i = tasks[t]
        xt = X[t : t + 1]
        if seen[i]:
            models[i].predict(xt)
        models[i].partial_fit(xt, y[t : t + 1], classes=np.array([-1, 1]))
        seen[i] = True


def run_river(X, y, tasks, k):
    from river import linear_model

    models = [linear_model.Perceptron() for _ in range(k)]
    names = [f"f{j}" for j in range(X.shape[1])]
    for t in range(len(y)):
        x = dict(zip(names, X[t]))
        m = models[tasks[t]]
        m.predict_one(x)
        m.learn_one(x, y[t] > 0)


def main():
    args = synthetic_stream_args(__doc__.splitlines()[0], "a 3,000-row stream and short baselines")
    n, X, y, tasks = synthetic_stream(args)
    # The slow contenders run on a prefix; examples/second is what is compared.
    prefix = min(n, 1500 if args.quick else 4000)
    results = {}
    native = omtl.KernelPerceptron(n_tasks=args.k)
    results["omtl KernelPerceptron (native)"] = timed(lambda: native.learn(X, y, tasks=tasks), n)
    reference = omtl.reference.KernelPerceptron(n_tasks=args.k)
    ref_n = min(prefix, 1000)
    results["omtl reference twin (NumPy)"] = timed(lambda: reference.learn(X[:ref_n], y[:ref_n], tasks=tasks[:ref_n]), ref_n)
    results["scikit-learn Perceptron per task, partial_fit(1)"] = timed(lambda: run_sklearn(X[:prefix], y[:prefix], tasks[:prefix], args.k), prefix)
    try:
        results["River Perceptron per task, learn_one"] = timed(lambda: run_river(X[:prefix], y[:prefix], tasks[:prefix], args.k), prefix)
    except ImportError:
        print("river is not installed: skipped (pip install river)")
    base = results["omtl KernelPerceptron (native)"][0]
    print(f"stream: dense {n} x {args.d}, {args.k} tasks (slow contenders timed on the first {prefix} rows)")
    print("| contender | examples/s | native is x faster |")
    print("|---|---:|---:|")
    for name, (eps, _) in results.items():
        print(f"| {name} | {eps:,.0f} | {base / eps:,.1f} |")


if __name__ == "__main__":
    main()
