"""Speed of the ROMCO baselines (OMTL, OMTRL, CW-COL, MTFL, TRML): one online pass each.

In one process, on the same dense stream (default 18,000 x 400, 12 tasks, the size the issue
fixes for MTFL/TRML): each native learner over the whole stream (wall and CPU seconds, since this
machine is shared), its NumPy reference twin on a prefix (slow by design), scikit-learn's
LogisticRegression refitted on all data every 100 examples (what a user would otherwise write
for the batch learners; on a prefix), and, for MTFL/TRML, the cost of one retrain against the
number of examples seen (the chunk of ``retrain_every`` examples that ends in a retrain, timed).

    python benches/compare_baselines.py [--n 18000] [--d 400] [--k 12] [--quick]
"""

from __future__ import annotations

import time

import numpy as np
from _common import synthetic_stream, synthetic_stream_args

import omtl
import omtl.reference


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def retrain_costs(cls, X, y, tasks, k, checkpoints, every=100):
    """Seconds of the chunk that ends in the retrain at each checkpoint (one pass, chunked)."""
    model = cls(n_tasks=k, retrain_every=every)
    out = {}
    for a in range(0, len(y), every):
        b = min(a + every, len(y))
        wall, _ = timed(lambda a=a, b=b: model.partial_fit(X[a:b], y[a:b], tasks=tasks[a:b]))
        if b in checkpoints:
            out[b] = (wall, model._diagnostics()["last_n_iter"])
    return out


def run_sklearn_refit(X, y, tasks, k, every=100):
    """Per-task LogisticRegression refitted on all data every `every` examples (warm start)."""
    from sklearn.linear_model import LogisticRegression

    models = [LogisticRegression(C=1.0, warm_start=True, max_iter=200) for _ in range(k)]
    fitted = [False] * k
    for a in range(0, len(y), every):
        b = min(a + every, len(y))
        for t in range(a, b):
            if fitted[tasks[t]]:
                models[tasks[t]].decision_function(X[t : t + 1])
        for i in range(k):
            rows = tasks[:b] == i
            if len(np.unique(y[:b][rows])) == 2:
                models[i].fit(X[:b][rows], y[:b][rows])
                fitted[i] = True


def main():
    args = synthetic_stream_args(__doc__.splitlines()[0], "a 3,000-row stream and short prefixes")
    n, X, y, tasks = synthetic_stream(args)
    k = args.k
    prefix = min(n, 1000 if args.quick else 2000)
    learners = [
        ("OMTL (linf)", omtl.OMTL, omtl.reference.OMTL, {}),
        ("OMTRL (batch)", omtl.OMTRL, omtl.reference.OMTRL, {}),
        ("CW-COL", omtl.CWCOL, omtl.reference.CWCOL, {}),
        ("MTFL", omtl.MTFL, omtl.reference.MTFL, {}),
        ("TRML", omtl.TRML, omtl.reference.TRML, {}),
    ]
    print(f"stream: dense {n} x {args.d}, {k} tasks; reference twins and scikit-learn on the first {prefix} rows")
    print("| learner | full pass: wall s | CPU s | examples/s | error rate | prefix: native ex/s | reference ex/s | native x faster |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, nat_cls, ref_cls, params in learners:
        model = nat_cls(n_tasks=k, **params)
        holder = {}
        wall, cpu = timed(lambda h=holder, m=model: h.setdefault("p", m.learn(X, y, tasks=tasks)))
        err = float(np.mean(holder["p"] != y))
        short = nat_cls(n_tasks=k, **params)
        pwall, _ = timed(lambda m=short: m.learn(X[:prefix], y[:prefix], tasks=tasks[:prefix]))
        ref = ref_cls(n_tasks=k, **params)
        rwall, _ = timed(lambda m=ref: m.learn(X[:prefix], y[:prefix], tasks=tasks[:prefix]))
        print(
            f"| {name} | {wall:.2f} | {cpu:.2f} | {n / wall:,.0f} | {err:.4f} | {prefix / pwall:,.0f} | {prefix / rwall:,.0f} | {rwall / pwall:,.1f} |"
        )
    swall, _ = timed(lambda: run_sklearn_refit(X[:prefix], y[:prefix], tasks[:prefix], k))
    print(f"| scikit-learn LogisticRegression per task, refit on all data every 100 | | | | | | {prefix / swall:,.0f} | |")
    checkpoints = [c for c in (1000, 2000, 4000, 9000, 18000) if c <= n]
    print()
    print("Per-retrain cost (seconds, wall) against the number of examples seen; FISTA iterations in brackets")
    print("| examples seen | " + " | ".join(str(c) for c in checkpoints) + " |")
    print("|---|" + "---:|" * len(checkpoints))
    for name, cls in (("MTFL", omtl.MTFL), ("TRML", omtl.TRML)):
        costs = retrain_costs(cls, X, y, tasks, k, set(checkpoints))
        print(f"| {name} | " + " | ".join(f"{costs[c][0]:.3f} [{costs[c][1]:.0f}]" for c in checkpoints) + " |")


if __name__ == "__main__":
    main()
