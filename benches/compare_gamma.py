"""rbf ``gamma="scale"`` (scikit-learn SVC's 1 / (d * Var(X)), from the first batch; the rbf default
since this comparison) against ``gamma=1/d`` (the default before) on the real data sets.

One prequential pass (predict, then learn) over each of ``--seeds`` seeded permutations of the
pooled stream (``Stream.shuffled(seed)``), for MTPerceptron (rbf, complete graph, no budget) and
MTRBP (rbf, complete graph, ``--budget`` examples); cumulative error % as mean ± std over the
permutations. Scikit-learn's breast-cancer set (one task, 569 rows) is added twice, with raw
features and with features standardised (z-scores over the whole set, as a user running
StandardScaler first would), to show what gamma does to unscaled features.

``gamma="scale"`` is taken from the first batch a model learns. By default the pass is one
``learn`` call, so Var(X) is taken over the whole permuted stream (the same value for every
permutation); ``--first-batch N`` learns the first N rows in a call of their own, then the rest, as
a stream would (the γ-scale column then shows the mean over the permutations).

Usage: ``python benches/compare_gamma.py [--datasets school,landmine] [--seeds 3] [--budget 500]
[--first-batch N] [--out docs/results/gamma_scale.md]``; data from ``$OMTL_DATA`` (default ../shared/data).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

import omtl
from omtl import datasets as D
from omtl._kernel_params import scale_gamma


def _breast_cancer(standardise: bool) -> D.Stream:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    if standardise:
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    name = "breast_cancer_scaled" if standardise else "breast_cancer_raw"
    return D.Stream(X=np.ascontiguousarray(X, dtype=np.float64), y=np.where(y == 1, 1, -1).astype(np.int8),
                    tasks=np.zeros(len(y), dtype=np.int64), n_tasks=1, name=name, task_names=("all",))


DATASETS = {
    "school": D.load_school,
    "landmine": D.load_landmine,
    "ecml_a": lambda d: D.load_ecml2006(d, task="a"),
    "ecml_b": lambda d: D.load_ecml2006(d, task="b"),
    "pu_spam": D.load_pu_spam,
    "sentiment": D.load_sentiment,
    "newsgroups_cs": lambda d: D.load_newsgroups(d, pair="comp.vs.sci"),
    "newsgroups_rt": lambda d: D.load_newsgroups(d, pair="rec.vs.talk"),
    "breast_cancer_raw": lambda d: _breast_cancer(False),
    "breast_cancer_scaled": lambda d: _breast_cancer(True),
}


def contenders(k: int, d: int, budget: int):
    for gamma in ("1/d", "scale"):
        value = 1.0 / d if gamma == "1/d" else gamma
        yield "MTPerceptron", gamma, omtl.MTPerceptron(n_tasks=k, kernel="rbf", gamma=value)
        yield f"MTRBP B={budget}", gamma, omtl.MTRBP(n_tasks=k, budget=budget, kernel="rbf", gamma=value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=500)
    parser.add_argument("--first-batch", type=int, default=0, help="rows in the first learn call (0: all)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="write the Markdown table here too")
    args = parser.parse_args(argv)
    rows = []
    for name in args.datasets.split(","):
        stream = DATASETS[name](args.data_dir)
        n, d = stream.X.shape
        g_scale = []
        errors: dict[tuple[str, object], list[float]] = {}
        seconds: dict[tuple[str, object], float] = {}
        for seed in range(args.seeds):
            s = stream.shuffled(seed)
            cut = args.first_batch or n
            g_scale.append(scale_gamma(s.X[:cut]))
            for label, gamma, model in contenders(stream.n_tasks, d, args.budget):
                t0 = time.perf_counter()
                y_hat = np.concatenate([model.learn(s.X[:cut], s.y[:cut], tasks=s.tasks[:cut]),
                                        model.learn(s.X[cut:], s.y[cut:], tasks=s.tasks[cut:])])
                seconds[label, gamma] = seconds.get((label, gamma), 0.0) + time.perf_counter() - t0
                errors.setdefault((label, gamma), []).append(100.0 * float(np.mean(y_hat != s.y)))
        for label in dict.fromkeys(lbl for lbl, _ in errors):
            e_none, e_scale = np.array(errors[label, "1/d"]), np.array(errors[label, "scale"])
            rows.append((name, n, d, 1.0 / d, float(np.mean(g_scale)), label, e_none, e_scale,
                         seconds[label, "1/d"] / args.seeds, seconds[label, "scale"] / args.seeds))
            print(f"{name:22s} {label:14s} gamma=1/d {e_none.mean():6.2f}  scale {e_scale.mean():6.2f}", flush=True)
    lines = [
        f"rbf gamma: 1/d (the default before) vs `\"scale\"` (1/(d·Var X)); one prequential pass, {args.seeds} shuffles "
        f"(cumulative error %, mean ± std), MTPerceptron (complete graph, no budget) and MTRBP "
        f"(complete graph, budget {args.budget}); first batch: "
        f"{f'{args.first_batch} rows' if args.first_batch else 'the whole pass'}. `python benches/compare_gamma.py` "
        f"(Python {platform.python_version()}, omtl {omtl.__version__}).",
        "",
        "| data set | n | d | γ = 1/d | γ scale | learner | error, γ = 1/d | error, γ scale | difference | s/pass (1/d, scale) |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    for name, n, d, g_none, g_scale, label, e_none, e_scale, t_none, t_scale in rows:
        lines.append(
            f"| {name} | {n} | {d} | {g_none:.3g} | {g_scale:.3g} | {label} | {e_none.mean():.2f} ± {e_none.std():.2f} "
            f"| {e_scale.mean():.2f} ± {e_scale.std():.2f} | {e_scale.mean() - e_none.mean():+.2f} "
            f"| {t_none:.2f}, {t_scale:.2f} |"
        )
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
