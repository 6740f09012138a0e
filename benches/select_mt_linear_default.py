"""Choose MTLinear's default update rule and learning rate on selection data only.

The six real data sets of ``benches/compare_vw.py`` are the test sets of the comparison with
Vowpal Wabbit and are never read here. Selection streams: the two MALSAR 20 Newsgroups pairs (``newsgroups_malsar/``, text,
2 tasks each) and three synthetic streams of :func:`omtl.datasets.make_multitask_stream` (dense,
dense with more tasks and noise, sparse text-like). Protocol, as in compare_vw.py: 3 seeded
permutations of each pooled stream, one prequential pass (predict, then learn), cumulative error %.
Every candidate is compared with ``vw --loss_function logistic -q st`` on the same permutations.

Selection rule (fixed before the sweep was run; docs/mt_linear.md M.7): with ``d_s`` the
candidate's error minus VW's on selection stream s (mean over the permutations), keep the
candidates with ``max_s d_s <= 0.3`` (the issue's tolerance; all candidates if none passes) and
choose the one with the smallest mean ``d_s``.

Then, with ``--test``, and only then, the chosen candidate and the library default run on the six
real sets (compare_vw.py's streams and permutations) beside VW; the table is appended.

With ``--shared-rate`` the grid is the pre-registered one of M.7b instead: ``shared_rate`` ρ in
{0.5, 1, 1.5, 2, 3, 4} with VW's own rule fixed (normalized, logistic, learning_rate 0.5); the
same rule, ties (mean differences equal to 0.01) going to the ρ nearest 1 (smallest |ln ρ|, then
the smaller ρ). Its table goes to ``docs/results/mt_linear_shared_rate.md``. ``--shared-rate
--test`` runs no selection: it reads the choice from that file's JSON, checks that it is the
library default (the choice is committed first), and runs the six real sets once with it, beside
ρ = 1.

Usage: ``python benches/select_mt_linear_default.py [--seeds 3] [--test] [--shared-rate] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

import omtl
from omtl import datasets as D

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_vw import DATASETS, run_vw_inprocess, vw_lines  # noqa: E402

TOLERANCE = 0.3

SELECTION = {
    "newsgroups comp.vs.sci": lambda d: D.load_newsgroups(d, pair="comp.vs.sci"),
    "newsgroups rec.vs.talk": lambda d: D.load_newsgroups(d, pair="rec.vs.talk"),
    "synthetic dense": lambda d: D.make_multitask_stream(seed=11),
    "synthetic dense, 100 tasks, noisy": lambda d: D.make_multitask_stream(
        n_samples=8000, n_tasks=100, relatedness=0.5, label_noise=0.1, seed=12),
    "synthetic sparse": lambda d: D.make_multitask_stream(
        n_samples=6000, n_tasks=10, n_features=2000, sparse=True, density=0.02, seed=13),
}


def candidates() -> list[tuple[str, dict]]:
    """The grid: every rule with the losses it is meant for, over a log-spaced learning rate (with
    shared_rate = 1, the rule this sweep was run with, M.7)."""
    out = []
    for loss in ("logistic", "hinge"):
        for lr in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 1.0, 1.5, 2.0):
            out.append((f"normalized {loss} lr={lr}", {"update": "normalized", "loss": loss, "learning_rate": lr}))
    for loss in ("logistic", "hinge"):
        for lr in (0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 5.0):
            out.append((f"adagrad {loss} lr={lr}", {"update": "adagrad", "loss": loss, "learning_rate": lr}))
    for loss in ("logistic", "hinge"):
        for lr in (0.05, 0.1, 0.2, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0):
            out.append((f"arow {loss} lr={lr} (r={1 / lr:.3g})", {"update": "arow", "loss": loss, "learning_rate": lr}))
    return [(label, {**params, "shared_rate": 1.0}) for label, params in out]


SHARED_RATES = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
#: VW's own rule, fixed a priori for the shared_rate grid (docs/mt_linear.md M.7b).
VW_RULE = {"update": "normalized", "loss": "logistic", "learning_rate": 0.5}


def shared_rate_candidates() -> list[tuple[str, dict]]:
    """The pre-registered grid of M.7b: shared_rate over SHARED_RATES, VW's rule fixed."""
    return [(f"shared_rate={rho}", {**VW_RULE, "shared_rate": rho}) for rho in SHARED_RATES]


def choose(rows, grid, shared_rate: bool):
    """M.7's rule: among candidates with max difference <= TOLERANCE (all if none), the smallest
    mean difference; for the shared_rate grid (M.7b) means equal to 0.01 tie, and ties go to the
    rate nearest 1 (smallest |ln rho|, then the smaller rho)."""
    feasible = [r for r in rows if r[2] <= TOLERANCE] or rows
    if not shared_rate:
        return min(feasible, key=lambda r: r[1])
    rho = {label: params["shared_rate"] for label, params in grid}
    return min(feasible, key=lambda r: (round(r[1], 2), abs(math.log(rho[r[0]])), rho[r[0]]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--test", action="store_true", help="then run the chosen candidate on the six real sets")
    ap.add_argument("--shared-rate", action="store_true", help="the shared_rate grid of M.7b")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    args.out = args.out or f"docs/results/mt_linear_{'shared_rate' if args.shared_rate else 'selection'}.md"
    data_dir = os.environ.get("OMTL_DATA")
    if args.shared_rate and args.test:
        return test_shared_rate(args, data_dir)
    grid = shared_rate_candidates() if args.shared_rate else candidates()
    err = {label: {} for label, _ in grid}
    vw = {}
    shapes = {}
    for name, load in SELECTION.items():
        stream = load(data_dir)
        X, tasks, k = stream.X, stream.tasks, stream.n_tasks
        y = np.where(np.asarray(stream.y) > 0, 1.0, -1.0)
        shapes[name] = (len(y), X.shape[1], k)
        vw_err = []
        per = {label: [] for label, _ in grid}
        for seed in range(args.seeds):
            perm = np.random.default_rng(seed).permutation(len(y))
            Xp, yp, tp = X[perm], y[perm], tasks[perm]
            vw_err.append(run_vw_inprocess(vw_lines(Xp, yp, tp), yp, 1)[0])
            for label, params in grid:
                pred = omtl.MTLinear(n_tasks=k, **params).learn(Xp, yp, tasks=tp)
                per[label].append(100.0 * np.mean(pred != yp))
        vw[name] = float(np.mean(vw_err))
        for label in per:
            err[label][name] = float(np.mean(per[label]))
        print(f"[{name}] VW {vw[name]:.2f}", file=sys.stderr)
    rows = []
    for label, _ in grid:
        diffs = [err[label][name] - vw[name] for name in SELECTION]
        rows.append((label, float(np.mean(diffs)), float(np.max(diffs)), diffs))
    chosen = choose(rows, grid, args.shared_rate)
    test = test_sets(dict(grid)[chosen[0]], args.seeds, data_dir) if args.test else None
    write(args, rows, err, vw, shapes, chosen, test)
    return 0


def errors(stream, params_list, seeds):
    """Mean error % over the seeded permutations of VW and of MTLinear with each parameter set."""
    X, tasks, k = stream.X, stream.tasks, stream.n_tasks
    y = np.where(np.asarray(stream.y) > 0, 1.0, -1.0)
    vw_err, mine = [], [[] for _ in params_list]
    for seed in range(seeds):
        perm = np.random.default_rng(seed).permutation(len(y))
        Xp, yp, tp = X[perm], y[perm], tasks[perm]
        vw_err.append(run_vw_inprocess(vw_lines(Xp, yp, tp), yp, 1)[0])
        for out, params in zip(mine, params_list):
            out.append(100.0 * np.mean(omtl.MTLinear(n_tasks=k, **params).learn(Xp, yp, tasks=tp) != yp))
    return float(np.mean(vw_err)), [float(np.mean(e)) for e in mine], 100.0 * float(np.mean(y > 0))


def test_sets(chosen_params, seeds, data_dir) -> dict:
    """The chosen candidate and the library default on the six real sets, beside VW."""
    out = {}
    for name, load in DATASETS.items():
        vw_err, (chosen_err, default_err), negative = errors(load(data_dir), [chosen_params, {}], seeds)
        out[name] = {"vw": vw_err, "chosen": chosen_err, "default": default_err, "always_negative": negative}
        print(f"[test {name}] VW {vw_err:.2f} chosen {chosen_err:.2f} default {default_err:.2f}", file=sys.stderr)
    return out


def test_shared_rate(args, data_dir) -> int:
    """M.7b's one run on the six real sets: the committed choice, which must be the library
    default by then, beside rho = 1 (the default before it)."""
    out = Path(args.out)
    record = json.loads(out.with_suffix(".json").read_text())
    rho = dict(shared_rate_candidates())[record["chosen"]]["shared_rate"]
    default = inspect.signature(omtl.MTLinear).parameters["shared_rate"].default
    if default != rho:
        print(f"the chosen shared_rate={rho} is not the library default ({default}): commit it first", file=sys.stderr)
        return 1
    test = {}
    for name, load in DATASETS.items():
        vw_err, (chosen_err, before_err), negative = errors(load(data_dir), [{}, {**VW_RULE, "shared_rate": 1.0}], args.seeds)
        test[name] = {"vw": vw_err, "chosen": chosen_err, "before": before_err, "always_negative": negative}
        print(f"[test {name}] VW {vw_err:.2f} default (shared_rate={rho}) {chosen_err:.2f} shared_rate=1 {before_err:.2f}",
              file=sys.stderr)
    wins = sum(t["chosen"] <= t["vw"] for t in test.values())
    worst = max(t["chosen"] - t["vw"] for t in test.values())
    lines = [out.read_text().rstrip("\n"), "",
             f"## The library default (shared_rate={rho}) on the six real sets (run once, after the choice was committed)",
             "", f"{args.seeds} permutations each, those of compare_vw.py; `shared_rate=1` is the default before M.7b.", "",
             "| data set | VW error % | default, shared_rate=" + f"{rho:g}" + " | difference | shared_rate=1 | difference | always −1 |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, t in test.items():
        lines.append(f"| {name} | {t['vw']:.2f} | {t['chosen']:.2f} | {t['chosen'] - t['vw']:+.2f} | "
                     f"{t['before']:.2f} | {t['before'] - t['vw']:+.2f} | {t['always_negative']:.2f} |")
    lines += ["", f"At or below VW on {wins} of {len(test)} sets; largest difference {worst:+.2f}.", ""]
    out.write_text("\n".join(lines))
    record["test"] = test
    out.with_suffix(".json").write_text(json.dumps(record, indent=1))
    print(out.read_text())
    return 0


def write(args, rows, err, vw, shapes, chosen, test) -> None:
    names = list(SELECTION)
    title = ("# MTLinear shared_rate default: the pre-registered grid of docs/mt_linear.md M.7b on selection data"
             if args.shared_rate else
             "# MTLinear default: selection sweep on selection data, then the choice on the six real sets")
    ties = (" Ties (mean differences equal to 0.01) go to the rate nearest 1 (smallest |ln ρ|, then the smaller ρ)."
            if args.shared_rate else "")
    lines = [
        title,
        "",
        f"Generated by `benches/select_mt_linear_default.py`: {args.seeds} seeded permutations of each "
        "pooled selection stream, one prequential pass, cumulative error % (mean over the permutations) "
        "minus that of `vw --loss_function logistic -q st` on the same permutations. The six real sets "
        "of compare_vw.py are not read for the choice. Rule: among candidates with max difference <= "
        f"{TOLERANCE}, the smallest mean difference.{ties}",
        "",
        "| stream | n | d | tasks | VW error % |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in names:
        n, d, k = shapes[name]
        lines.append(f"| {name} | {n} | {d} | {k} | {vw[name]:.2f} |")
    lines += ["", "| candidate | " + " | ".join(names) + " | mean diff | max diff |",
              "|---|" + "---:|" * (len(names) + 2)]
    for label, mean, worst, diffs in rows:
        mark = " **(chosen)**" if label == chosen[0] else ""
        cells = " | ".join(f"{err[label][n]:.2f} ({d:+.2f})" for n, d in zip(names, diffs))
        lines.append(f"| {label}{mark} | {cells} | {mean:+.2f} | {worst:+.2f} |")
    lines += ["", f"Chosen: **{chosen[0]}** (mean difference {chosen[1]:+.2f}, max {chosen[2]:+.2f}).", ""]
    if test:
        wins = sum(t["chosen"] <= t["vw"] for t in test.values())
        lines += ["## The chosen candidate on the six real sets (run once, after the choice)", "",
                  "| data set | VW error % | chosen | difference | library default | difference | always −1 |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for name, t in test.items():
            lines.append(f"| {name} | {t['vw']:.2f} | {t['chosen']:.2f} | {t['chosen'] - t['vw']:+.2f} | "
                         f"{t['default']:.2f} | {t['default'] - t['vw']:+.2f} | {t['always_negative']:.2f} |")
        lines += ["", f"The chosen candidate is at or below VW on {wins} of {len(test)} sets.", ""]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    out.with_suffix(".json").write_text(json.dumps({"err": err, "vw": vw, "chosen": chosen[0], "test": test}, indent=1))
    print(out.read_text())


if __name__ == "__main__":
    sys.exit(main())
