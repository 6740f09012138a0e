"""Figures of the experiments (PNG, matplotlib's Agg renderer, without pyplot).

- ``plot_f1_vs_budget``: micro F1 against the budget percentage for the budget learners with
  G = C (solid) and G = D (dashed), one panel per data set, the battery as a horizontal line.
- ``plot_cumulative_error``: the cumulative error rate along the stream for each learner,
  averaged over the shuffles (the style of ROMCO's Figs. 1 and 2).

Each figure is rendered to PNG bytes (``*_png``) by a function that needs only its data, so an
experiment grid on a Dask cluster draws it on a worker and this process only writes the file.
A ``matplotlib.figure.Figure`` is used directly, not pyplot: no global figure registry, so
figures may be drawn in several threads (a multi-threaded Dask worker) at once.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np


def _figure(figsize):
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    return buf.getvalue()


def plot_f1_vs_budget(summary: list[dict], keys: list[str], path: Path) -> Path:
    """Writes ``f1_vs_budget_png`` to ``path``."""
    Path(path).write_bytes(f1_vs_budget_png(summary, keys))
    return Path(path)


def f1_vs_budget_png(summary: list[dict], keys: list[str], *, algorithms: list[str], percents: list) -> bytes:
    """One panel per data set: F1 (%) against B (% of the battery's active set), one line per
    budget algorithm and task-relatedness matrix (the experiment's ``algorithms`` and ``percents``)."""
    import matplotlib
    from matplotlib.ticker import NullFormatter

    from .runner import DATASETS

    n = max(1, len(keys))
    fig = _figure((max(9.0, 4.6 * n), 4.2))
    axes = fig.subplots(1, n, squeeze=False)
    idx = {(r["dataset"], r["algorithm"], r["graph"], r["percent"]): r for r in summary}
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, key in zip(axes[0], keys):
        for j, alg in enumerate(algorithms):
            for g, style in (("C", "-"), ("D", "--")):
                pts = [(p, idx[(key, alg, g, p)]) for p in percents if (key, alg, g, p) in idx]
                if not pts:
                    continue
                xs = [p for p, _ in pts]
                ys = np.array([r["f1_micro_mean"] for _, r in pts])
                sd = np.array([0.0 if math.isnan(r["f1_micro_std"]) else r["f1_micro_std"] for _, r in pts])
                ax.errorbar(xs, ys, yerr=sd, fmt=style + "o", color=colors[j % len(colors)], ms=4, capsize=2,
                            label=f"{alg} G={g}")
        bat = idx.get((key, "Perceptron battery", "D", ""))
        if bat is not None:
            ax.axhline(bat["f1_micro_mean"], color="black", lw=1, ls=":", label="battery (no budget)")
        mtp = idx.get((key, "MTPerceptron", "C", ""))
        if mtp is not None:
            ax.axhline(mtp["f1_micro_mean"], color="grey", lw=1, ls="-.", label="MT Perceptron G=C (no budget)")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(percents)
        ax.set_xticklabels([f"{p}%" for p in percents])
        ax.set_xlabel("budget B (% of the battery's active set)")
        ax.set_ylabel("online micro F1 (%)")
        ax.set_title(DATASETS[key].title if key in DATASETS else key)
        ax.grid(alpha=0.3)
    handles, labels = [], []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.2 if handles else 0, 1, 1))
    return _png(fig)


def plot_cumulative_error(curves: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], title: str, path: Path) -> Path:
    """Writes ``cumulative_error_png`` to ``path``."""
    Path(path).write_bytes(cumulative_error_png(curves, title))
    return Path(path)


def cumulative_error_png(curves: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], title: str) -> bytes:
    """``curves[learner] = (steps, mean curve, std curve)``, error rates as fractions; the mean
    over the shuffles is drawn (as in the paper's figures), the std is not."""
    fig = _figure((6.4, 4.2))
    ax = fig.subplots()
    styles = ["-", "--", "-.", ":"]
    for j, (name, (steps, mean, _std)) in enumerate(curves.items()):
        ax.plot(steps, 100 * mean, styles[(j // 10) % len(styles)], label=name, lw=1.5)
    ax.set_xlabel("instances seen (all tasks, in round order)")
    ax.set_ylabel("cumulative error rate (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)
