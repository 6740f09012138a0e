"""``omtl reproduce table2``: ROMCO against its baselines (Yang et al., SDM 2016, Tables 2 and 3, Figs. 1–2).

Protocol P2 (ALGORITHMS.md §1.2): for every data set and shuffle seed, ``stream.as_rounds(seed)``
permutes each task's rows and round t holds the t-th row of every task that still has one. Every
learner sees the same rounds through ``learn_rounds`` (P1 learners flatten them, §1.3). Metrics
(§7.1): final cumulative error rate and macro F1 over tasks (A-R7; micro F1 is kept in the CSV),
mean ± sample std over seeds 0..9, and the wall time of the pass (the paper's Table 3). All
learners are linear (§7.4).

Tuning (§7.5) runs on the held-out shuffle seed 12345 and picks the lowest final cumulative error:
ROMCO by a coordinate search on the paper's grid {1e-7, ..., 1e3} (default) or the full 11^4 grid
(``--full-grid``); CW-COL on its grid (§7.5). PA and OMTL use C = 1; MTFL and TRML their defaults.

The data sets are the substitutes of §7.3: ROMCO's MHC-I and EachMovie could not be obtained.
"""

from __future__ import annotations

import itertools
import math
import time
from pathlib import Path

import numpy as np

from . import paper_numbers as paper
from .figures import cumulative_error_png
from .runner import (
    DATASETS,
    accepted_params,
    available_learners,
    chosen_streams,
    environment,
    fmt_pct,
    load_stream,
    load_streams_ahead,
    log,
    make_learner,
    markdown_table,
    mean_std,
    on_dask,
    per_dataset,
    run_jobs,
    run_jobs_here,
    run_p2,
    run_task,
    stream_summary,
    submit_jobs,
    write_csv,
    write_json,
)

DATASET_KEYS = ["pu_spam", "ecml2006_b", "landmine", "newsgroups_cs", "newsgroups_rt"]

#: (row label, class in omtl, fixed parameters, tuning) in the paper's row order.
LEARNERS = [
    ("MTFL", "MTFL", {}, None),
    ("TRML", "TRML", {}, None),
    ("PA-Global", "PAGlobal", {"C": 1.0, "variant": "pa1"}, None),
    ("PA-Unique", "PAUnique", {"C": 1.0, "variant": "pa1"}, None),
    ("CW-COL", "CWCOL", {}, "cwcol"),
    ("OMTL", "OMTL", {"C": 1.0}, None),
    ("ROMCO", "ROMCO", {"update": "loss"}, "romco"),
    # Optional extra (§6.3), not in the paper's tables: warm-up of half the stream, as §6.3 asks of
    # the experiment runner ("half" is resolved per stream in run_job).
    ("OMTRL", "OMTRL", {"epoch": "half"}, None),
]

#: Rows that are ours, not the paper's (marked in the Markdown).
EXTRA_LEARNERS = {"OMTRL"}

TUNING_SEED = 12345
PAPER_GRID = [10.0 ** e for e in range(-7, 4)]  # {1e-7, ..., 1e3}, 11 values
QUICK_GRID = [1e-3, 1e-1, 10.0]
ROMCO_START = {"lambda1": 1e-4, "lambda2": 1e-4}

#: CW-COL grid of §7.5; each entry lists the parameter names we try, in order, on the class.
CWCOL_GRID = [
    (("eta", "eta_cw", "confidence"), [0.55, 0.65, 0.75, 0.85, 0.95]),
    (("a", "initial_variance"), [0.1, 0.5, 1.0, 2.0]),
    (("omega",), [0.0, 0.25, 0.5, 0.75, 1.0]),
]
CWCOL_QUICK_GRID = [
    (("eta", "eta_cw", "confidence"), [0.75, 0.95]),
    (("a", "initial_variance"), [1.0]),
    (("omega",), [0.0, 0.5, 1.0]),
]

QUICK_ROWS = 300
QUICK_SEEDS = 2


# ---------------------------------------------------------------------------------------------
# worker
# ---------------------------------------------------------------------------------------------


def run_job(job: dict) -> dict:
    stream = load_stream(job["dataset"], job["data_dir"], job["subsample"]).as_rounds(job["seed"])
    params = {k: (len(stream) // 2 if v == "half" else v) for k, v in job["params"].items()}
    model = make_learner(job["class_name"], {"n_tasks": stream.n_tasks, **params})
    record = run_p2(model, stream, progress=job.get("inner_progress", False))
    if not job.get("keep_curve", True):
        record.pop("curve", None)
        record.pop("curve_steps", None)
    return {"dataset": job["dataset"], "seed": job["seed"], "algorithm": job["algorithm"],
            "params": params, **record}


def _label(job: dict) -> str:
    if job.get("tuning"):
        ps = ", ".join(f"{k}={v:g}" for k, v in job["params"].items() if isinstance(v, float))
        return f"tune {job['algorithm']} {ps}"
    return f"{job['algorithm']} seed {job['seed']}"


# ---------------------------------------------------------------------------------------------
# tuning
# ---------------------------------------------------------------------------------------------


#: A search whose passes so far each took less than this (seconds) runs its remaining rounds as one
#: task on a Dask cluster: a round costs a round trip and a task per pass, milliseconds each, which
#: passes this short do not repay. Longer passes keep one task each, so a round runs in parallel.
CHEAP_PASS_SECONDS = 0.05


class _Tuner:
    """Evaluates configurations on the tuning shuffle, memoised, in parallel batches (``here``:
    one after the other in this process, whatever the cluster)."""

    def __init__(self, key, label, cls_name, fixed, base, jobs, progress, here=False):
        self.key, self.label, self.cls_name, self.fixed = key, label, cls_name, fixed
        self.base, self.jobs, self.progress, self.here = base, jobs, progress, here
        self.cache: dict[tuple, float] = {}
        self.trials: list[dict] = []
        self.slowest_pass = 0.0

    def evaluate(self, configs: list[dict], desc: str) -> list[float]:
        todo = []
        for c in configs:
            k = tuple(sorted(c.items()))
            if k not in self.cache and k not in {tuple(sorted(t.items())) for t in todo}:
                todo.append(c)
        if todo:
            jobs = [{**self.base, "tuning": True, "keep_curve": False, "seed": TUNING_SEED, "algorithm": self.label,
                     "class_name": self.cls_name, "params": {**self.fixed, **c}} for c in todo]
            results = (run_jobs_here(run_job, jobs) if self.here else
                       run_jobs(run_job, jobs, n_jobs=self.jobs, desc=desc, progress=self.progress, label=_label))
            for c, res in zip(todo, results):
                err = res.record["error_rate"] if res.record else float("inf")
                if res.record:
                    self.slowest_pass = max(self.slowest_pass, res.record["seconds"])
                self.cache[tuple(sorted(c.items()))] = err
                self.trials.append({"dataset": self.key, "algorithm": self.label, **c,
                                    "error_rate": err, "error": (res.error or "").splitlines()[0] if res.error else ""})
                if res.error and not self.here:
                    log(f"[table2] tuning run failed ({self.label} {c}): {res.error.splitlines()[0]}")
        return [self.cache[tuple(sorted(c.items()))] for c in configs]

    def best(self, configs: list[dict], desc: str) -> dict:
        errs = self.evaluate(configs, desc)
        i = int(np.argmin(errs))  # ties: the first in grid order
        return configs[i]

    def go_on(self, search, *args) -> dict:
        """``search(self, *args)``: the rest of a search. On a Dask cluster, once every pass so far
        was cheap (``CHEAP_PASS_SECONDS``), as one task on a worker, whose trials and cache
        come back here in the order a search in this process makes them."""
        if not on_dask() or not self.trials or self.slowest_pass >= CHEAP_PASS_SECONDS:
            return search(self, *args)
        here = _Tuner(self.key, self.label, self.cls_name, self.fixed, self.base, 1, False, here=True)
        here.cache = dict(self.cache)
        chosen, here = run_task(_search_here, search, here, args, reads=[self.base])
        self.cache = here.cache
        self.trials += here.trials
        for t in here.trials:
            if t["error"]:
                config = {k: v for k, v in t.items() if k not in ("dataset", "algorithm", "error_rate", "error")}
                log(f"[table2] tuning run failed ({self.label} {config}): {t['error']}")
        return chosen


def _search_here(search, tuner: _Tuner, args: tuple):
    return search(tuner, *args), tuner


def tune_romco(tuner: _Tuner, grid: list[float], full: bool) -> dict:
    """§7.5: full grid, or the reduced coordinate search (η1 = η2, then λ1, λ2, then one refinement
    pass over η1, η2, λ1, λ2 one at a time). Returns the chosen ``eta1, eta2, lambda1, lambda2``."""
    title = DATASETS[tuner.key].title
    if full:
        configs = [{"eta1": a, "eta2": b, "lambda1": c, "lambda2": d} for a, b, c, d in itertools.product(grid, repeat=4)]
        return tuner.best(configs, f"{title}: tune ROMCO (full grid)")
    cur = tuner.best([{"eta1": v, "eta2": v, **ROMCO_START} for v in grid], f"{title}: tune ROMCO eta1=eta2")
    return tuner.go_on(_romco_coordinates, cur, grid)


def _romco_coordinates(tuner: _Tuner, cur: dict, grid: list[float]) -> dict:
    """The coordinate rounds of ``tune_romco`` after its first (η1 = η2) round."""
    title = DATASETS[tuner.key].title
    for name in ("lambda1", "lambda2"):
        cur = tuner.best([{**cur, name: v} for v in grid], f"{title}: tune ROMCO {name}")
    for name in ("eta1", "eta2", "lambda1", "lambda2"):
        cur = tuner.best([{**cur, name: v} for v in grid], f"{title}: refine ROMCO {name}")
    return cur


def _cwcol_grid(quick: bool) -> tuple[list[tuple[str, list]], list[str]]:
    accepted = accepted_params("CWCOL") or set()
    grid, notes = [], []
    for names, values in (CWCOL_QUICK_GRID if quick else CWCOL_GRID):
        name = next((n for n in names if n in accepted), None)
        if name is None:
            notes.append(f"CW-COL: no parameter named any of {list(names)}; that axis of the §7.5 grid is not tuned")
        else:
            grid.append((name, values))
    return grid, notes


def tune_cwcol(tuner: _Tuner, grid: list[tuple[str, list]]) -> dict:
    if not grid:
        return {}
    names = [n for n, _ in grid]
    configs = [dict(zip(names, vals)) for vals in itertools.product(*[v for _, v in grid])]
    return tuner.best(configs, f"{DATASETS[tuner.key].title}: tune CW-COL")


# ---------------------------------------------------------------------------------------------
# the experiment
# ---------------------------------------------------------------------------------------------


def table2_learners(labels: list[str] | None = None) -> tuple[list[tuple[str, str, dict, str | None]], list[str]]:
    """The Table 2 learners (all, or those named in ``labels``) that exist in this build, and a
    line for each one that does not."""
    return available_learners(LEARNERS, labels, "learner(s)")


def data_streams(datasets: list[str] | None, quick: bool) -> tuple[list[str], int | None]:
    """The data sets the experiment reads (``datasets``, checked, or all), in its order, and the rows
    it subsamples from each (None: every row)."""
    return chosen_streams(datasets, DATASET_KEYS, QUICK_ROWS if quick else None)


def run_table2(*, out: Path, seeds: int | None = None, quick: bool = False, jobs: int = 1, data_dir=None,
               full_grid: bool = False, datasets: list[str] | None = None, learners: list[str] | None = None,
               progress: bool = True) -> dict:
    """Runs the experiment; writes ``table2.md``, ``table2.csv``, ``table2_runs.csv``,
    ``table2_tuning.csv``, ``table2_settings.json`` and ``fig_cumulative_error_<data set>.png``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n_seeds = seeds if seeds is not None else (QUICK_SEEDS if quick else 10)
    seed_list = list(range(n_seeds))
    keys, subsample = data_streams(datasets, quick)
    grid = QUICK_GRID if quick else PAPER_GRID
    to_run, skipped = table2_learners(learners)
    notes: list[str] = []
    cw_grid: list[tuple[str, list]] = []
    if any(t == "cwcol" for _, _, _, t in to_run):
        cw_grid, cw_notes = _cwcol_grid(quick)
        notes += cw_notes
    for line in skipped + notes:
        log(f"[table2] {line}")
    started = time.time()
    runs, trials, failures, tuned, streams_info = [], [], [], {}, {}
    order = [lab for lab, _, _, _ in LEARNERS]
    figures: dict[str, bytes] = {}  # per data set, its figure (PNG), drawn once it is finished
    plotted: set[str] = set()  # data sets whose figure is written (once, not after every data set)
    def _finish(partial: bool) -> dict:
        """Aggregates and writes every output; called after each data set, so an interrupted run
        still leaves the tables of the data sets it finished."""
        summary = summarise(runs, keys, order)
        settings = {
            "experiment": "table2",
            "source": [paper.TABLE2_SOURCE, paper.TABLE3_SOURCE],
            "quick": quick,
            "subsample_rows": subsample,
            "seeds": seed_list,
            "stream": "Stream.as_rounds(seed): per-task SplitMix64 permutations, round t = t-th row of every task "
                      "that still has one, ascending task order (protocol P2, §1.2-1.3)",
            "metrics": "final cumulative error rate; F1 macro over tasks (A-R7), micro in the CSV; wall time of the pass",
            "tuning": {"seed": TUNING_SEED, "criterion": "lowest final cumulative error rate",
                       "romco": "full 11^4 grid" if full_grid else "reduced coordinate search (§7.5)",
                       "grid": grid, "chosen": tuned},
            "learners": [{"label": a, "class": c, "fixed": f, "tuning": t} for a, c, f, t in to_run],
            "skipped": skipped,
            "notes": notes,
            "datasets": streams_info,
            "jobs": jobs,
            "wall_seconds": time.time() - started,
            "failures": failures,
            "environment": environment(),
            "partial": partial,
        }
        write_outputs(out, summary, runs, trials, settings, plotted=plotted, figures=figures)
        return {"summary": summary, "runs": runs, "trials": trials, "settings": settings}


    def run_dataset(key: str) -> dict:
        """One data set: tune on the tuning shuffle, then every learner on every shuffle."""
        info = stream_summary(key, data_dir, subsample)
        done = {"runs": [], "failures": [], "trials": [], "tuned": {},
                "info": {"title": DATASETS[key].title, **{k: info[k] for k in ("n", "d", "n_tasks", "positives")},
                         "max_task": info["max_task"], "min_task": info["min_task"], "note": DATASETS[key].note}}
        log(f"[table2] {DATASETS[key].title}: {info['repr']}")
        inner = progress and jobs <= 1
        base = {"dataset": key, "data_dir": data_dir, "subsample": subsample, "inner_progress": False}

        def evaluate(learners, desc):
            """Submits every shuffle of ``learners`` ((label, class, parameters) triples)."""
            return submit_jobs(run_job, [{**base, "inner_progress": inner, "seed": s, "algorithm": label,
                                          "class_name": cls_name, "params": params}
                                         for label, cls_name, params in learners for s in seed_list],
                               n_jobs=jobs, desc=f"{DATASETS[key].title}: {desc}", progress=progress, label=_label)

        # The learners with fixed parameters are submitted first: on a cluster they run while the
        # tuning searches go on (elsewhere every pending pass runs when collected).
        pending = [evaluate([(label, cls_name, fixed) for label, cls_name, fixed, tuning in to_run if tuning is None],
                            "learners")]
        for label, cls_name, fixed, tuning in to_run:
            if tuning is None:
                continue
            tuner = _Tuner(key, label, cls_name, fixed, base, jobs, progress)
            chosen = tune_romco(tuner, grid, full_grid) if tuning == "romco" else tune_cwcol(tuner, cw_grid)
            done["tuned"][label] = chosen
            done["trials"] += tuner.trials
            log(f"[table2] {DATASETS[key].title}: {label} tuned on shuffle {TUNING_SEED} -> {chosen} "
                f"(error {tuner.cache.get(tuple(sorted(chosen.items())), float('nan')):.4f}, {len(tuner.trials)} runs)")
            pending.append(evaluate([(label, cls_name, {**fixed, **chosen})], label))
        results = {}
        for batch in pending:
            for res in batch.results():
                results.setdefault(res.job["algorithm"], []).append(res)
        for label, _, _, _ in to_run:  # table order, whatever order the passes ran in
            for res in results.get(label, []):
                if res.error:
                    done["failures"].append({"dataset": key, "job": _label(res.job), "error": res.error})
                    log(f"[table2] FAILED {key} {_label(res.job)}: {res.error.splitlines()[0]}")
                else:
                    done["runs"].append(res.record)
        done["figure"] = run_task(cumulative_error_png, *figure_args(summarise(done["runs"], [key], order), key,
                                                                     len(seed_list)))
        return done

    load_streams_ahead(keys, data_dir, subsample)
    for key, done in per_dataset(keys, run_dataset):
        streams_info[key], tuned[key], figures[key] = done["info"], done["tuned"], done["figure"]
        runs.extend(done["runs"])
        trials.extend(done["trials"])
        failures.extend(done["failures"])
        if key != keys[-1]:
            _finish(partial=True)

    return _finish(partial=False)


# ---------------------------------------------------------------------------------------------
# aggregation and writers
# ---------------------------------------------------------------------------------------------


def summarise(runs: list[dict], keys: list[str], order: list[str]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["algorithm"]), []).append(r)
    rows = []
    for (ds, alg), rs in sorted(groups.items(), key=lambda kv: (keys.index(kv[0][0]) if kv[0][0] in keys else 99,
                                                                 order.index(kv[0][1]) if kv[0][1] in order else 99)):
        err, err_sd, n = mean_std(100 * r["error_rate"] for r in rs)
        f1, f1_sd, _ = mean_std(100 * r["f1_macro"] for r in rs)
        f1u, f1u_sd, _ = mean_std(100 * r["f1_micro"] for r in rs)
        sec, sec_sd, _ = mean_std(r["seconds"] for r in rs)
        counterpart = paper.TABLE2_COUNTERPART.get(ds)
        ref = paper.TABLE2.get(counterpart, {}).get(alg) if counterpart else None
        ref_t = paper.TABLE3.get(counterpart, {}).get(alg) if counterpart else None
        curves = [r for r in rs if r.get("curve")]
        row = {"dataset": ds, "algorithm": alg, "n_seeds": n,
               "error_rate_mean": err, "error_rate_std": err_sd, "f1_macro_mean": f1, "f1_macro_std": f1_sd,
               "f1_micro_mean": f1u, "f1_micro_std": f1u_sd, "seconds_mean": sec, "seconds_std": sec_sd,
               "paper_dataset": counterpart or "",
               "paper_error_rate": ref[0][0] if ref else "", "paper_f1": ref[1][0] if ref else "",
               "paper_seconds": ref_t if ref_t is not None else "",
               "protocol": rs[0].get("protocol", ""), "params": rs[0].get("params", {})}
        if curves and len({len(r["curve"]) for r in curves}) == 1:
            arr = np.array([r["curve"] for r in curves])
            row["_curve"] = (np.array(curves[0]["curve_steps"]), arr.mean(0),
                             arr.std(0, ddof=1) if len(arr) > 1 else None)
        rows.append(row)
    return rows


CSV_FIELDS = ["dataset", "algorithm", "n_seeds", "error_rate_mean", "error_rate_std", "f1_macro_mean", "f1_macro_std",
              "f1_micro_mean", "f1_micro_std", "seconds_mean", "seconds_std", "paper_dataset", "paper_error_rate",
              "paper_f1", "paper_seconds", "protocol", "params"]
RUN_FIELDS = ["dataset", "seed", "algorithm", "n", "error_rate", "f1_macro", "f1_micro", "n_updates", "seconds",
              "examples_per_second", "protocol", "params"]


def _cell(mean, std, ref=None) -> str:
    txt = fmt_pct(mean, std, 2)
    if ref not in (None, "") and not math.isnan(mean):
        txt += f" ({ref:.2f}, {mean - ref:+.2f})"
    return txt


def render_markdown(summary: list[dict], settings: dict) -> str:
    keys = list(settings["datasets"])
    idx = {(r["dataset"], r["algorithm"]): r for r in summary}
    order = [lab for lab, _, _, _ in LEARNERS]
    n_seeds = len(settings["seeds"])
    lines = ["# Table 2 — ROMCO and baselines: cumulative error rate and F1 (%), protocol P2", "",
             f"Each cell: mean ± std (ddof=1) over {n_seeds} shuffle(s). F1 is the macro F1 over tasks (A-R7). "
             "Where our data set has a counterpart in the paper (PU spam ↔ ROMCO's Spam Email) the paper's value "
             "and ours − paper follow in parentheses; the features differ (see notes).", ""]
    if settings.get("partial"):
        lines += [f"**Partial output**: written after the data set(s) {', '.join(settings['datasets'])}; the run "
                  "had not finished (or was interrupted) when this file was written.", ""]
    if settings.get("quick"):
        lines += [f"**Quick run**: a fixed random subsample of {settings['subsample_rows']} rows per data set and a "
                  "tiny tuning grid; numbers are not comparable with the paper.", ""]
    header = ["Algorithm"]
    for k in keys:
        header += [f"{DATASETS[k].label} error", f"{DATASETS[k].label} F1"]
    rows = []
    for alg in order:
        row = [f"{alg} (not in the paper)" if alg in EXTRA_LEARNERS else alg]
        for k in keys:
            r = idx.get((k, alg))
            if r is None:
                row += ["—", "—"]
            else:
                row += [_cell(r["error_rate_mean"], r["error_rate_std"], r["paper_error_rate"]),
                        _cell(r["f1_macro_mean"], r["f1_macro_std"], r["paper_f1"])]
        rows.append(row)
    lines += [markdown_table(header, rows), ""]
    lines += ["## Table 3 — run time (seconds per pass, mean ± std)", "",
              "Wall time of `learn_rounds` over the whole stream in one process; the paper's hardware is unknown, "
              "so only the ordering of the learners is comparable. Paper (Spam Email) in parentheses for PU spam.", ""]
    rows = []
    for alg in order:
        row = [alg]
        for k in keys:
            r = idx.get((k, alg))
            if r is None:
                row.append("—")
            else:
                txt = fmt_pct(r["seconds_mean"], r["seconds_std"], 3)
                if r["paper_seconds"] != "":
                    txt += f" ({r['paper_seconds']:.2f})"
                row.append(txt)
        rows.append(row)
    lines += [markdown_table(["Algorithm"] + [DATASETS[k].label for k in keys], rows), ""]
    lines += ["## Data sets", "", markdown_table(
        ["Data set", "column", "tasks", "samples", "dim", "max/min per task", "positives", "note"],
        [[i["title"], DATASETS[k].label, i["n_tasks"], i["n"], i["d"], f"{i['max_task']}/{i['min_task']}", i["positives"], i["note"]]
         for k, i in settings["datasets"].items()]), ""]
    chosen = settings["tuning"]["chosen"]
    if any(chosen.values()):
        lines += [f"## Tuned hyper-parameters (shuffle {settings['tuning']['seed']}, {settings['tuning']['romco']})", ""]
        for k, per in chosen.items():
            for alg, params in per.items():
                lines.append(f"- {DATASETS[k].title}, {alg}: " + ", ".join(f"{p}={v:g}" for p, v in params.items()))
        lines.append("")
    protos = sorted({(r["algorithm"], r["protocol"]) for r in summary})
    if protos:
        lines += ["## How each learner consumed the rounds", ""] + [f"- {a}: {p}" for a, p in protos] + [""]
    if settings.get("skipped") or settings.get("notes"):
        lines += ["## Not run / not tuned", ""] + [f"- {s}" for s in settings["skipped"] + settings["notes"]] + [""]
    if settings.get("failures"):
        lines += ["## Failed runs", ""] + [f"- {f['dataset']} {f['job']}: {f['error'].splitlines()[0]}"
                                           for f in settings["failures"]] + [""]
    lines += ["## The paper's Tables 2 and 3 (for reference)", "",
              markdown_table(["Algorithm"] + [f"{d} error" for d in paper.TABLE2_DATASETS]
                             + [f"{d} F1" for d in paper.TABLE2_DATASETS] + [f"{d} s" for d in paper.TABLE2_DATASETS],
                             [[a] + [f"{paper.TABLE2[d][a][0][0]:.2f} ({paper.TABLE2[d][a][0][1]:.2f})"
                                     for d in paper.TABLE2_DATASETS]
                              + [f"{paper.TABLE2[d][a][1][0]:.2f} ({paper.TABLE2[d][a][1][1]:.2f})"
                                 for d in paper.TABLE2_DATASETS]
                              + [f"{paper.TABLE3[d][a]:.2f}" for d in paper.TABLE2_DATASETS]
                              for a in paper.TABLE2_LEARNERS]), "",
              f"Sources: {paper.TABLE2_SOURCE}; {paper.TABLE3_SOURCE}.",
              f"Wall time of this run: {settings['wall_seconds']:.1f} s with --jobs {settings['jobs']}.", ""]
    return "\n".join(lines)


def figure_args(summary: list[dict], key: str, n_seeds: int) -> tuple[dict, str]:
    """The arguments of ``cumulative_error_png`` for the data set ``key``."""
    curves = {r["algorithm"]: r["_curve"] for r in summary if r["dataset"] == key and "_curve" in r}
    return curves, f"{DATASETS[key].title}\ncumulative error rate, mean over {n_seeds} shuffle(s)"


def write_outputs(out: Path, summary: list[dict], runs: list[dict], trials: list[dict], settings: dict,
                  plotted: set | None = None, figures: dict[str, bytes] | None = None) -> None:
    """Writes the tables, CSVs, settings and one figure per data set; the data sets in ``plotted``
    (finished ones whose figure is already written) are skipped, and the ones written are added.
    ``figures``: PNGs already drawn, per data set (the others are drawn here)."""
    write_csv(out / "table2.csv", summary, CSV_FIELDS)
    write_csv(out / "table2_runs.csv", runs, RUN_FIELDS)
    trial_fields = ["dataset", "algorithm"] + sorted({k for t in trials for k in t} - {"dataset", "algorithm",
                                                                                      "error_rate", "error"})
    write_csv(out / "table2_tuning.csv", trials, trial_fields + ["error_rate", "error"])
    write_json(out / "table2_settings.json", settings)
    (out / "table2.md").write_text(render_markdown(summary, settings))
    for key in settings["datasets"]:
        if plotted is not None and key in plotted:
            continue
        png = (figures or {}).get(key)
        if png is None:
            png = cumulative_error_png(*figure_args(summary, key, len(settings["seeds"])))
        (out / f"fig_cumulative_error_{key}.png").write_bytes(png)
        if plotted is not None:
            plotted.add(key)
