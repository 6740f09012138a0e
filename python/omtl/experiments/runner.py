"""Shared machinery of the experiments: budgets, learners, one online pass, aggregation and
outputs; and, re-exported here, the data sets (``.streams``) and the running of jobs
(``.scheduler``).

A *job* is one online pass of one learner over one shuffle of one data set (``.scheduler``).
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ._state import STATE
from .scheduler import (
    PRIORITY_AHEAD,
    PRIORITY_LOAD,
    PRIORITY_WAITED,
    TASKS_PER_WORKER,
    JobResult,
    PendingJobs,
    load_streams_ahead,
    on_dask,
    per_dataset,
    run_jobs,
    run_jobs_here,
    run_on_dask,
    run_task,
    stream_summary,
    submit_jobs,
)
from .streams import DATASETS, QUICK_SUBSAMPLE_SEED, DataSpec, chosen_streams, compact_columns, load_stream

__all__ = [
    "DATASETS", "PRIORITY_AHEAD", "PRIORITY_LOAD", "PRIORITY_WAITED", "QUICK_SUBSAMPLE_SEED", "STATE",
    "TASKS_PER_WORKER", "DataSpec", "JobResult", "PendingJobs", "accepted_params", "budget_from_percent",
    "budgets_from_battery", "chosen_streams", "compact_columns", "environment", "fmt_pct", "load_stream",
    "load_streams_ahead", "log", "make_learner", "markdown_table", "mean_std", "on_dask", "per_dataset",
    "resolve_learner", "run_jobs", "run_jobs_here", "run_on_dask", "run_p1", "run_p2", "run_task", "select",
    "stream_summary", "submit_jobs", "write_csv", "write_json",
]

def select(items: list, labels: list[str] | None, what: str) -> list:
    """The entries of ``items`` (tuples whose first field is a label) named in ``labels``."""
    if labels is None:
        return list(items)
    known = [it[0] for it in items]
    unknown = [lab for lab in labels if lab not in known]
    if unknown:
        raise ValueError(f"unknown {what} {unknown}; choose from {known}")
    return [it for it in items if it[0] in labels]


# ---------------------------------------------------------------------------------------------
# budgets (ALGORITHMS.md §7.2, INV-E2)
# ---------------------------------------------------------------------------------------------


def budget_from_percent(n_battery: int, percent: int) -> int:
    """``B_p = max(1, round(p * N_bat))`` with halves rounded up, in exact integer arithmetic.

    ``percent`` is an integer percentage (25 for p = 0.25), so ``p * N_bat = percent * N_bat / 100``
    and rounding half up is ``floor((percent * N_bat + 50) / 100)``.
    """
    if isinstance(percent, bool) or int(percent) != percent or not 0 < percent <= 100:
        raise ValueError(f"percent must be an integer in (0, 100], got {percent!r}")
    if int(n_battery) != n_battery or n_battery < 0:
        raise ValueError(f"n_battery must be a non-negative integer, got {n_battery!r}")
    return max(1, (int(percent) * int(n_battery) + 50) // 100)


def budgets_from_battery(n_battery: int, percents: Iterable[int] = (25, 10, 5)) -> dict[int, int]:
    return {int(p): budget_from_percent(n_battery, p) for p in percents}


# ---------------------------------------------------------------------------------------------
# learners
# ---------------------------------------------------------------------------------------------


def resolve_learner(class_name: str):
    """The class ``omtl.<class_name>``, or None if it has not landed yet."""
    import omtl

    return getattr(omtl, class_name, None)


def make_learner(class_name: str, params: dict):
    """Instantiates ``omtl.<class_name>(**params)``.

    Raises ``LookupError`` if the class does not exist and ``TypeError`` naming the offending
    parameters if the class does not accept them.
    """
    cls = resolve_learner(class_name)
    if cls is None:
        raise LookupError(f"omtl.{class_name} is not available")
    accepted = set(cls._param_names()) if hasattr(cls, "_param_names") else None
    if accepted is not None:
        unknown = sorted(set(params) - accepted)
        if unknown:
            raise TypeError(f"omtl.{class_name} does not accept {unknown}; it takes {sorted(accepted)}")
    return cls(**params)


def available_learners(rows: list[tuple], labels: list[str] | None, what: str, *, seeded: bool = False) -> tuple[list[tuple], list[str]]:
    """The rows ``(label, class name, parameters, ...)`` of an experiment (all, or those named in
    ``labels``) whose learner exists in this build, without the parameters it does not take, and a
    line for each row left out or changed. ``seeded``: a learner that takes ``seed`` gets
    ``seed=None``, filled with each shuffle's seed."""
    present, skipped = [], []
    for label, cls_name, fixed, *rest in select(rows, labels, what):
        if resolve_learner(cls_name) is None:
            skipped.append(f"{label}: omtl.{cls_name} is not available in this build; its cells are left empty")
            continue
        accepted = accepted_params(cls_name)
        params = dict(fixed)
        if seeded and accepted is not None and "seed" in accepted:
            params["seed"] = None
        if accepted is not None and set(params) - accepted:
            skipped.append(f"{label}: omtl.{cls_name} does not take {sorted(set(params) - accepted)}; "
                           "running it with its defaults for those")
            params = {k: v for k, v in params.items() if k in accepted}
        present.append((label, cls_name, params, *rest))
    return present, skipped


def accepted_params(class_name: str) -> set[str] | None:
    cls = resolve_learner(class_name)
    if cls is None or not hasattr(cls, "_param_names"):
        return None
    return set(cls._param_names())


# ---------------------------------------------------------------------------------------------
# one online pass
# ---------------------------------------------------------------------------------------------


def run_p1(model, stream, *, progress: bool = False) -> dict:
    """Protocol P1 pass (``omtl.evaluate``); the result as a plain dict (curve included)."""
    from ..evaluate import evaluate

    report = evaluate(model, stream, progress=progress)
    return _record_from(report.summary(), report.curve, report.curve_steps, report.per_task)


def run_p2(model, stream, *, progress: bool = False, curve_points: int = 200) -> dict:
    """Protocol P2 pass over a round-structured stream (``stream.rounds`` set), via ``omtl.evaluate``.

    Uses ``model.learn_rounds`` when the learner has it; otherwise the rows are fed to
    ``model.learn`` in the same order, the P2 -> P1 flattening of §1.3. Chunks never split a round.
    """
    from ..evaluate import evaluate

    if stream.rounds is None:
        raise ValueError("run_p2 needs a round-structured stream (Stream.as_rounds)")
    report = evaluate(model, stream, progress=progress, curve_points=curve_points)
    return _record_from(report.summary(), report.curve, report.curve_steps, report.per_task)


def _record_from(summary: dict, curve, steps, counts) -> dict:
    out = dict(summary)
    out["curve"] = [float(v) for v in curve]
    out["curve_steps"] = [int(v) for v in steps]
    out["tasks_with_examples"] = int((counts.n > 0).sum())
    return out


# ---------------------------------------------------------------------------------------------
# aggregation and output helpers
# ---------------------------------------------------------------------------------------------


def mean_std(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean and sample standard deviation (ddof=1; NaN with one value) and the count."""
    vals = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return float("nan"), float("nan"), 0
    mean = statistics.fmean(vals)
    std = statistics.stdev(vals) if len(vals) > 1 else float("nan")
    return mean, std, len(vals)


def environment() -> dict:
    import omtl

    return {
        "omtl_version": getattr(omtl, "__version__", "?"),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": sys.argv,
    }


def write_csv(path: Path, rows: list[dict], fields: list[str]) -> None:
    """``rows`` as CSV with the columns ``fields`` (a missing or None value is an empty cell)."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def fmt_pct(mean: float, std: float | None = None, digits: int = 1) -> str:
    """``12.3 ± 0.4`` (percent values); ``n/a`` for NaN."""
    if mean is None or math.isnan(mean):
        return "n/a"
    if std is None or math.isnan(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def log(msg: str) -> None:
    """A status line on stdout (tqdm bars go to stderr)."""
    print(msg, flush=True)
