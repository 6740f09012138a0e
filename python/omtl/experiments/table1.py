"""``omtl reproduce table1``: Cavallanti & Cesa-Bianchi, Table 1 (ALGORITHMS.md §7.2, §7.4, A-C17/A-C18).

For every data set and shuffle seed:

1. run the Perceptron battery (k independent kernel Perceptrons, §3.2) for one pass over
   ``stream.shuffled(seed)``; its active-set size ``N_bat`` gives the budgets
   ``B_p = max(1, round-half-up(p * N_bat))`` for p = 25 %, 10 %, 5 % (§7.2), the same for G = C and D;
2. run MTRBP, MTFORG, MTBPRJ and MTBPRJ-2 with G = complete and G = disconnected at each budget on
   the same shuffle;
3. record the online (prequential) micro F1 (A-C17).

The table reports mean ± sample std (ddof=1) over the seeds, with the paper's number and the
difference beside each cell. The unbounded multitask Perceptron (G = C) is run too, as an extra
reference line that the paper does not print.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from . import paper_numbers as paper
from .figures import f1_vs_budget_png
from .runner import (
    DATASETS,
    available_learners,
    budgets_from_battery,
    chosen_streams,
    environment,
    fmt_pct,
    load_stream,
    load_streams_ahead,
    log,
    make_learner,
    markdown_table,
    mean_std,
    per_dataset,
    run_p1,
    run_task,
    stream_summary,
    submit_jobs,
    write_csv,
    write_json,
)

#: Data sets of Table 1 in the paper's row order.
DATASET_KEYS = ["ecml2006_a", "school", "sentiment"]

PERCENTS = [25, 10, 5]
GRAPHS = {"C": "complete", "D": "disconnected"}

#: (row label, class in omtl, extra constructor parameters). ``seed`` is filled per shuffle.
ALGORITHMS = [
    ("MTRBP", "MTRBP", {}),
    ("MTFORG", "MTFORG", {"radius": 1.0}),
    ("MTBPRJ", "MTBPRJ", {"eta": 0.01}),
    ("MTBPRJ-2", "MTBPRJ2", {"eta": 0.01}),
]

QUICK_ROWS = 300
QUICK_SEEDS = 2


def kernel_params(key: str, n_features: int) -> dict:
    """Base kernel per data set (§7.4): rbf γ = 1/d for School, normalised poly of degree 2 otherwise."""
    if key == "school":
        return {"kernel": "rbf", "gamma": 1.0 / n_features}
    return {"kernel": "poly", "degree": 2, "gamma": 1.0, "coef0": 1.0, "normalize": True}


# ---------------------------------------------------------------------------------------------
# the worker (top level: runs in subprocesses with --jobs)
# ---------------------------------------------------------------------------------------------


def run_job(job: dict) -> dict:
    """One online pass; ``job`` says which (see ``_jobs_reference`` and ``_jobs_budget``)."""
    stream = load_stream(job["dataset"], job["data_dir"], job["subsample"]).shuffled(job["seed"])
    kparams = kernel_params(job["dataset"], stream.n_features)
    if job["kind"] == "battery":
        model = make_learner("KernelPerceptron", {"n_tasks": stream.n_tasks, **kparams})
    elif job["kind"] == "mtperceptron":
        model = make_learner("MTPerceptron", {"n_tasks": stream.n_tasks, "graph": "complete", **kparams})
    else:
        params = {"n_tasks": stream.n_tasks, "budget": job["budget"], "graph": GRAPHS[job["graph"]], **kparams,
                  **job["params"]}
        model = make_learner(job["class_name"], params)
    record = run_p1(model, stream, progress=job.get("inner_progress", False))
    record.pop("curve", None)
    record.pop("curve_steps", None)
    keep = ("kind", "dataset", "seed", "algorithm", "graph", "percent", "budget")
    return {**{k: job.get(k) for k in keep}, **record}


def _label(job: dict) -> str:
    if job["kind"] == "budget":
        return f"{job['algorithm']} G={job['graph']} {job['percent']}% seed {job['seed']}"
    return f"{job['algorithm']} seed {job['seed']}"


# ---------------------------------------------------------------------------------------------
# the experiment
# ---------------------------------------------------------------------------------------------


def available_algorithms(labels: list[str] | None = None) -> tuple[list[tuple[str, str, dict]], list[str]]:
    """The Table 1 learners (all, or those named in ``labels``) that exist in this build, and a
    line for each one that does not (a learner that takes ``seed`` gets the shuffle's)."""
    return available_learners(ALGORITHMS, labels, "algorithm(s)", seeded=True)


def data_streams(datasets: list[str] | None, quick: bool) -> tuple[list[str], int | None]:
    """The data sets the experiment reads (``datasets``, checked, or all), in its order, and the rows
    it subsamples from each (None: every row)."""
    return chosen_streams(datasets, DATASET_KEYS, QUICK_ROWS if quick else None)


def run_table1(*, out: Path, seeds: int | None = None, quick: bool = False, jobs: int = 1, data_dir=None,
               datasets: list[str] | None = None, learners: list[str] | None = None,
               progress: bool = True) -> dict:
    """Runs the experiment and writes ``table1.md``, ``table1.csv``, ``table1_runs.csv``,
    ``table1_settings.json`` and ``fig_f1_vs_budget.png`` into ``out``. Returns the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n_seeds = seeds if seeds is not None else (QUICK_SEEDS if quick else 5)
    seed_list = list(range(n_seeds))
    keys, subsample = data_streams(datasets, quick)
    algorithms, skipped = available_algorithms(learners)
    for line in skipped:
        log(f"[table1] skipped {line}")
    started = time.time()
    runs: list[dict] = []
    failures: list[dict] = []
    budgets: dict[str, dict[int, dict[int, int]]] = {}
    streams_info = {}

    def _finish(partial: bool) -> dict:
        """Aggregates and writes every output; called after each data set, so an interrupted run
        still leaves the tables of the data sets it finished."""
        summary = summarise(runs, keys)
        settings = {
            "experiment": "table1",
            "source": paper.TABLE1_SOURCE,
            "quick": quick,
            "subsample_rows": subsample,
            "seeds": seed_list,
            "stream": "Stream.shuffled(seed): a SplitMix64 permutation of all rows (protocol P1)",
            "metric": "prequential micro F1 (positive class +1), one pass (A-C17)",
            "budget_rule": "B_p = max(1, floor((p% * N_bat + 50) / 100)); N_bat = battery active set after one pass, per shuffle",
            "percents": PERCENTS,
            "graphs": GRAPHS,
            "algorithms": [{"label": a, "class": c, "params": p} for a, c, p in algorithms],
            "skipped": skipped,
            "datasets": streams_info,
            "budgets_per_seed": {k: {str(s): v for s, v in b.items()} for k, b in budgets.items()},
            "jobs": jobs,
            "wall_seconds": time.time() - started,
            "failures": failures,
            "environment": environment(),
            "partial": partial,
        }
        # The figure holds every data set: drawn once, at the end (a partial write keeps the tables).
        figure = None if partial else run_task(figure_of, summary, list(settings["datasets"]))
        write_outputs(out, summary, runs, settings, figure=not partial, figure_png=figure)
        return {"summary": summary, "runs": runs, "settings": settings}


    def run_dataset(key: str) -> dict:
        """One data set: the Perceptrons, then the budget learners at budgets set by the battery."""
        info = stream_summary(key, data_dir, subsample)
        done = {"runs": [], "failures": [], "budgets": {},
                "info": {"title": DATASETS[key].title, "n": info["n"], "d": info["d"],
                         "n_tasks": info["n_tasks"], "positives": info["positives"],
                         "kernel": kernel_params(key, info["d"])}}
        log(f"[table1] {DATASETS[key].title}: {info['repr']}")
        inner = progress and jobs <= 1
        base = {"dataset": key, "data_dir": data_dir, "subsample": subsample, "inner_progress": inner}
        ref_jobs = [{**base, "kind": "battery", "algorithm": "Perceptron battery", "seed": s, "graph": "D"}
                    for s in seed_list]
        ref_jobs += [{**base, "kind": "mtperceptron", "algorithm": "MTPerceptron", "seed": s, "graph": "C"}
                     for s in seed_list]

        def collect(results) -> None:
            for res in results:
                if res.error:
                    done["failures"].append({"job": _label(res.job), "dataset": key, "error": res.error})
                    log(f"[table1] FAILED {key} {_label(res.job)}: {res.error.splitlines()[0]}")
                    continue
                done["runs"].append(res.record)
                if res.job["kind"] == "battery":
                    done["budgets"][res.job["seed"]] = budgets_from_battery(res.record["n_active"], PERCENTS)

        # The budgets need only the battery: the MT Perceptron runs meanwhile (on a cluster) and is
        # collected, in its place in the runs, after the budget passes are submitted.
        batteries = submit_jobs(run_job, ref_jobs[:len(seed_list)], n_jobs=jobs,
                                desc=f"{DATASETS[key].title}: Perceptron battery", progress=progress, label=_label,
                                waited=True)
        mt_perceptrons = submit_jobs(run_job, ref_jobs[len(seed_list):], n_jobs=jobs,
                                     desc=f"{DATASETS[key].title}: MT Perceptron", progress=progress, label=_label)
        collect(batteries.results())
        bud_jobs = []
        for label, cls_name, params in algorithms:
            for seed in seed_list:
                if seed not in done["budgets"]:
                    continue  # the battery failed on this shuffle
                for pct in PERCENTS:
                    for g in GRAPHS:
                        p = {k: (seed if k == "seed" else v) for k, v in params.items()}
                        bud_jobs.append({**base, "kind": "budget", "algorithm": label, "class_name": cls_name,
                                         "params": p, "seed": seed, "graph": g, "percent": pct,
                                         "budget": done["budgets"][seed][pct]})
        budget_runs = submit_jobs(run_job, bud_jobs, n_jobs=jobs, desc=f"{DATASETS[key].title}: budget learners",
                                  progress=progress, label=_label)
        collect(mt_perceptrons.results())
        collect(budget_runs.results())
        return done

    load_streams_ahead(keys, data_dir, subsample)
    for key, done in per_dataset(keys, run_dataset):
        streams_info[key], budgets[key] = done["info"], done["budgets"]
        runs.extend(done["runs"])
        failures.extend(done["failures"])
        if key != keys[-1]:
            _finish(partial=True)

    return _finish(partial=False)


# ---------------------------------------------------------------------------------------------
# aggregation and writers
# ---------------------------------------------------------------------------------------------


def summarise(runs: list[dict], keys: list[str]) -> list[dict]:
    """One row per (data set, algorithm, graph, percent) with mean/std over seeds and the paper's number."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["algorithm"], r["graph"], r.get("percent")), []).append(r)
    rows = []
    order_alg = ["Perceptron battery", "MTPerceptron"] + [a for a, _, _ in ALGORITHMS]
    for (ds, alg, g, pct), rs in sorted(
        groups.items(),
        key=lambda kv: (keys.index(kv[0][0]) if kv[0][0] in keys else 99,
                        order_alg.index(kv[0][1]) if kv[0][1] in order_alg else 99,
                        -(kv[0][3] or 100), kv[0][2]),
    ):
        f1, f1_sd, n = mean_std(100.0 * r["f1_micro"] for r in rs)
        f1m, f1m_sd, _ = mean_std(100.0 * r["f1_macro"] for r in rs)
        err, err_sd, _ = mean_std(100.0 * r["error_rate"] for r in rs)
        bud, _, _ = mean_std(r["budget"] if r.get("budget") is not None else r["n_active"] for r in rs)
        secs, _, _ = mean_std(r["seconds"] for r in rs)
        if alg == "Perceptron battery":
            ref = paper.TABLE1_BATTERY.get(ds)
        else:
            ref = paper.TABLE1.get(ds, {}).get((alg, g, pct))
        rows.append({
            "dataset": ds, "algorithm": alg, "graph": g, "percent": pct if pct is not None else "",
            "f1_micro_mean": f1, "f1_micro_std": f1_sd, "n_seeds": n,
            "paper_f1": ref if ref is not None else "", "diff": (f1 - ref) if ref is not None else "",
            "f1_macro_mean": f1m, "f1_macro_std": f1m_sd, "error_rate_mean": err, "error_rate_std": err_sd,
            "budget_or_active_mean": bud, "seconds_mean": secs,
        })
    return rows


CSV_FIELDS = ["dataset", "algorithm", "graph", "percent", "f1_micro_mean", "f1_micro_std", "n_seeds", "paper_f1", "diff",
              "f1_macro_mean", "f1_macro_std", "error_rate_mean", "error_rate_std", "budget_or_active_mean",
              "seconds_mean"]
RUN_FIELDS = ["dataset", "seed", "kind", "algorithm", "graph", "percent", "budget", "n", "f1_micro", "f1_macro",
              "error_rate", "n_active", "n_updates", "seconds", "examples_per_second"]


def _cell(row: dict | None) -> str:
    if row is None:
        return "—"
    ours = fmt_pct(row["f1_micro_mean"], row["f1_micro_std"])
    if row["paper_f1"] == "":
        return ours
    return f"{ours} ({row['paper_f1']:.1f}, {row['diff']:+.1f})"


def render_markdown(summary: list[dict], settings: dict) -> str:
    idx = {(r["dataset"], r["algorithm"], r["graph"], r["percent"]): r for r in summary}
    n_seeds = len(settings["seeds"])
    header = ["Data set", "Algorithm"] + [f"{g}({p}%)" for g, p in paper.TABLE1_COLUMNS]
    rows = []
    for key in settings["datasets"]:
        title = DATASETS[key].title
        bat = idx.get((key, "Perceptron battery", "D", ""))
        bat_txt = "—" if bat is None else _cell(bat)
        for i, (alg, _, _) in enumerate(ALGORITHMS):
            first = title if i == 0 else (f"battery: {bat_txt}" if i == 1 else "")
            cells = [_cell(idx.get((key, alg, g, p))) for g, p in paper.TABLE1_COLUMNS]
            rows.append([first, alg] + cells)
        mtp = idx.get((key, "MTPerceptron", "C", ""))
        if mtp is not None:
            rows.append(["", f"MT Perceptron, G=C, no budget (not in the paper): {_cell(mtp)}"] + [""] * 6)
    lines = [
        "# Table 1 — Cavallanti & Cesa-Bianchi, online training F-measure (micro F1, %)",
        "",
        f"Each cell: ours, mean ± std (ddof=1) over {n_seeds} shuffle(s) (paper, ours − paper). "
        "C = complete task graph, D = disconnected; B = 25/10/5 % of the Perceptron battery's active set "
        "after one pass on the same shuffle. The battery's own F1 is given under each data-set name.",
        "",
    ]
    if settings.get("partial"):
        lines += [f"**Partial output**: written after the data set(s) {', '.join(settings['datasets'])}; the run "
                  "had not finished (or was interrupted) when this file was written.", ""]
    if settings.get("quick"):
        lines += [f"**Quick run**: a fixed random subsample of {settings['subsample_rows']} rows per data set; "
                  "numbers are not comparable with the paper.", ""]
    lines += [markdown_table(header, rows), ""]
    # budgets
    lines += ["## Budgets", "", markdown_table(
        ["Data set", "n", "d", "k", "kernel", "N_bat (mean)", "B 25%", "B 10%", "B 5%"],
        [[DATASETS[k].title, info["n"], info["d"], info["n_tasks"], _kernel_txt(info["kernel"]),
          _mean_int([v for v in _battery_sizes(summary, k)]),
          *[_budget_range(settings["budgets_per_seed"].get(k, {}), p) for p in PERCENTS]]
         for k, info in settings["datasets"].items()]), ""]
    lines += ["## Shape checks (expected: C ≥ D everywhere, C − D grows as B shrinks, projections best at 5 %)", ""]
    lines += shape_checks(summary, list(settings["datasets"]))
    if settings.get("skipped"):
        lines += ["", "## Not run", ""] + [f"- {s}" for s in settings["skipped"]]
    if settings.get("failures"):
        lines += ["", "## Failed runs", ""] + [f"- {f['dataset']} {f['job']}: {f['error'].splitlines()[0]}"
                                               for f in settings["failures"]]
    lines += ["", f"Source of the paper's numbers: {paper.TABLE1_SOURCE}.",
              f"Wall time of this run: {settings['wall_seconds']:.1f} s with --jobs {settings['jobs']}.", ""]
    return "\n".join(lines)


def _kernel_txt(k: dict) -> str:
    if k["kernel"] == "rbf":
        return f"rbf γ={k['gamma']:.4g}"
    return f"poly deg {k['degree']}, γ={k['gamma']}, c0={k['coef0']}, normalized"


def _battery_sizes(summary, key):
    return [r["budget_or_active_mean"] for r in summary if r["dataset"] == key and r["algorithm"] == "Perceptron battery"]


def _mean_int(vals):
    return f"{vals[0]:.1f}" if vals else "—"


def _budget_range(per_seed: dict, pct: int) -> str:
    vals = sorted(b[pct] if pct in b else b.get(str(pct)) for b in per_seed.values())
    if not vals:
        return "—"
    return str(vals[0]) if vals[0] == vals[-1] else f"{vals[0]}–{vals[-1]}"


def shape_checks(summary: list[dict], keys: list[str]) -> list[str]:
    """Plain statements a reader can check against the expected shape of the results."""
    idx = {(r["dataset"], r["algorithm"], r["graph"], r["percent"]): r["f1_micro_mean"] for r in summary}
    lines = []
    algs = [a for a, _, _ in ALGORITHMS]
    for key in keys:
        have = [a for a in algs if (key, a, "C", 25) in idx]
        if not have:
            lines.append(f"- {DATASETS[key].title}: no budget learner ran.")
            continue
        n_ok = n_all = 0
        gaps = {p: [] for p in PERCENTS}
        for a in have:
            for p in PERCENTS:
                c, d = idx.get((key, a, "C", p)), idx.get((key, a, "D", p))
                if c is None or d is None or math.isnan(c) or math.isnan(d):
                    continue
                n_all += 1
                n_ok += c >= d
                gaps[p].append(c - d)
        gap_txt = ", ".join(f"{p}%: {sum(g) / len(g):+.1f}" for p, g in gaps.items() if g)
        best5 = max(((idx.get((key, a, "C", 5)), a) for a in have if idx.get((key, a, "C", 5)) is not None),
                    default=(None, None))
        lines.append(f"- {DATASETS[key].title}: C ≥ D in {n_ok}/{n_all} cells; mean C − D by budget: {gap_txt}; "
                     f"best at C(5%): {best5[1]}.")
    return lines


def figure_of(summary: list[dict], keys: list[str]) -> bytes:
    """The F1-against-budget figure of the data sets ``keys``, one line per budget algorithm."""
    return f1_vs_budget_png(summary, keys, algorithms=[name for name, _, _ in ALGORITHMS], percents=PERCENTS)


def write_outputs(out: Path, summary: list[dict], runs: list[dict], settings: dict, *, figure: bool = True,
                  figure_png: bytes | None = None) -> None:
    """Writes the table, the CSVs and the settings, and (``figure``) the F1-vs-budget figure:
    ``figure_png`` if it is already drawn, else drawn here."""
    write_csv(out / "table1.csv", summary, CSV_FIELDS)
    write_csv(out / "table1_runs.csv", runs, RUN_FIELDS)
    write_json(out / "table1_settings.json", settings)
    (out / "table1.md").write_text(render_markdown(summary, settings))
    if not figure:
        return
    if figure_png is None:
        figure_png = figure_of(summary, list(settings["datasets"]))
    (out / "fig_f1_vs_budget.png").write_bytes(figure_png)
