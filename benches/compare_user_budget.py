"""A user's life in the model: MTLinear's byte budget over users against exact storage and
``hash_bits`` on a stream of Zipf-distributed user activity; the cost and the guarantees of
``forget`` on every learner with 1,000 tasks; the cost of delayed labels.

Stream: ``benches/compare_many_users.py``'s ``per_user`` rows (bag of words over 2^18 columns, 30
word draws per row, a shared concept plus a per-user bias and per-user word weights, 5 % label
noise), with users drawn by a Zipf law over 10^6 ids (``P(rank r) ~ r^-1.1``: a few heavy users,
a long tail). Contenders (open-ended complete graph, ``learn`` calls of 10,000 rows, progressive
error): exact storage; ``hash_bits`` at several sizes; ``max_bytes`` at an eighth of the exact
model's final memory, without and with a hashed tail (``tail_bits``), and ``hash_bits`` at the
same memory. Memory is ``memory_bytes_``, read after every call (its peak is reported).

Forgetting: every class with 1,000 tasks (dense rows of 8 distinct random values, 8 rows per
task; rbf kernel with a fixed gamma and the disconnected graph where the class has them), 10
tasks forgotten: the time of ``forget`` against one 10-row ``learn`` call, a byte search of the
saved file for every value of the forgotten rows (as float64 and float32), the model learning and
saving afterwards, bit-identity with a model that never saw those rows (for the learners
docs/lifecycle.md says are exact), and the influence the shared part keeps (RMS difference, on
the forgotten tasks' rows, between the forgetting model's scores and the never-seen model's,
relative to the RMS score).

Delayed labels: ``predict_one(remember=...)`` + ``learn_label`` against ``learn_one`` per event.

Usage: ``python benches/compare_user_budget.py [--quick] [--out docs/results/user_budget.md]``.
"""

from __future__ import annotations

import argparse
import pickle
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_many_users import CHUNK, N_COLS, Stream  # noqa: E402

import omtl  # noqa: E402

ZIPF_S = 1.1


class ZipfStream(Stream):
    """``Stream("per_user", ...)`` with users drawn by a Zipf law over ``n_users`` ids."""

    def __init__(self, n_users: int, n_rows: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.kind, self.n_users, self.seed = "per_user", n_users, seed
        self.concept = np.where(np.arange(N_COLS) < 2**14, rng.standard_normal(N_COLS), 0.0)
        cdf = np.cumsum(np.arange(1, n_users + 1, dtype=np.float64) ** -ZIPF_S)
        ranks = np.searchsorted(cdf, rng.random(n_rows) * cdf[-1])
        self.order = rng.permutation(n_users)[ranks]  # heavy users anywhere among the ids


def run_linear(stream: ZipfStream, **params) -> dict:
    model = omtl.MTLinear(**params)
    errors, seconds, peak = 0, 0.0, 0
    n = len(stream)
    for start in range(0, n, CHUNK):
        X, y, users = stream.chunk(start, min(start + CHUNK, n))
        t0 = time.perf_counter()
        pred = model.learn(X, y, tasks=users)
        seconds += time.perf_counter() - t0
        errors += int(np.sum(pred != y))
        peak = max(peak, int(model.memory_bytes_))
    out = {"error": 100.0 * errors / n, "memory": int(model.memory_bytes_), "peak": peak, "seconds": seconds,
           "users": len(model.tasks_)}
    if params.get("max_bytes") is not None:
        out["evicted"] = int(model.n_evicted_users_)
        out["resident"] = int(model.n_resident_users_)
    return out


def budget_section(quick: bool) -> tuple[list[str], dict]:
    n_users, n_rows = (100_000, 300_000) if quick else (1_000_000, 2_000_000)
    stream = ZipfStream(n_users, n_rows)
    seen = len(np.unique(stream.order))
    exact = run_linear(stream)
    budget = exact["memory"] // 8
    # hash_bits with a table at about the budget (normalized update: 12 bytes a cell).
    same_bits = int(np.floor(np.log2(budget / 12)))
    rows = [("exact storage (defaults)", {}, exact)]
    for bits in sorted({same_bits - 2, same_bits, same_bits + 2}):
        rows.append((f"hash_bits={bits}", {"hash_bits": bits}, run_linear(stream, hash_bits=bits)))
    tail_bits = same_bits - 2  # a quarter of the budget for the tail
    for label, params in [(f"max_bytes={budget:,}", {"max_bytes": budget}),
                          (f"max_bytes={budget:,}, tail_bits={tail_bits}", {"max_bytes": budget, "tail_bits": tail_bits})]:
        rows.append((label, params, run_linear(stream, **params)))
    lines = [
        f"Stream: {n_rows:,} rows, users drawn by Zipf (s = {ZIPF_S}) over {n_users:,} ids ({seen:,} of them seen; "
        f"the heaviest user has {np.bincount(stream.order).max():,} rows), per-user concept. Budget: an eighth of the "
        f"exact model's final memory ({budget:,} bytes); `hash_bits={same_bits}` is the table of the same memory.",
        "",
        "| storage | error % | memory_bytes_ (end) | peak memory_bytes_ | seconds in learn | per-call cost vs exact | users evicted |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, _, r in rows:
        lines.append(f"| {label} | {r['error']:.2f} | {r['memory']:,} | {r['peak']:,} | {r['seconds']:.1f} | "
                     f"{r['seconds'] / exact['seconds']:.2f}x | {r.get('evicted', '')} |")
    facts = {"budget": budget, "rows": rows, "same_bits": same_bits}
    return lines, facts


# ---- forgetting ------------------------------------------------------------------------------------
KERNEL = {"kernel": "rbf", "gamma": 0.5}
CLASSES = [
    ("MTLinear", {"graph": "disconnected"}, True),
    ("MTLinear", {}, False),
    ("KernelPerceptron", KERNEL, True),
    ("MTPerceptron", {"graph": "disconnected", **KERNEL}, True),
    ("MTPerceptron", KERNEL, False),
    ("MTRBP", {"graph": "disconnected", **KERNEL, "budget": 20_000}, True),
    ("MTFORG", {"graph": "disconnected", **KERNEL}, False),
    ("MTBPRJ", {"graph": "disconnected", **KERNEL}, False),
    ("MTBPRJ2", {"graph": "disconnected", **KERNEL}, False),
    ("PAUnique", {}, True),
    ("PAGlobal", {}, False),
    ("CWCOL", {}, False),
    ("OMTL", {}, True),
    ("OMTRL", {"n_tasks": 1000}, False),
    ("MTFL", {"n_tasks": 1000, "retrain_every": 2000}, False),
    # TRML's retrain eigendecomposes its k x k task covariance at every step: at k = 1,000 one
    # retrain takes minutes here (k = 300: 44 s for 4 retrains), so its row keeps the stored
    # rows without retraining (forgetting removes the same stored rows either way).
    ("TRML", {"n_tasks": 1000, "retrain_every": 1_000_000}, False),
    ("ROMCO", {"n_tasks": 1000}, False),
]
K, D, PER_TASK = 1000, 8, 8


def forget_stream(seed=0):
    rng = np.random.default_rng(seed)
    n = K * PER_TASK
    X = rng.uniform(-1, 1, (n, D))
    users = rng.permutation(np.repeat(np.arange(K), PER_TASK))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] * np.where(users % 2 == 0, 1, -1) > 0, 1, -1)
    return X, y, np.array([f"user{u}!" for u in users], dtype=object)


def forget_row(name, kwargs, exact, X, y, users, gone) -> dict:
    model = getattr(omtl, name)(**kwargs)
    model.partial_fit(X, y, tasks=users)
    t0 = time.perf_counter()
    model.learn(X[:10], y[:10], tasks=users[:10])  # (rows of forgotten users are forgotten too)
    learn_s = time.perf_counter() - t0
    stored = int(model.n_active_)
    t0 = time.perf_counter()
    model.forget(list(gone))
    forget_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.omtl"
        omtl.save(model, path)
        data = path.read_bytes() + pickle.dumps(model)
        rows = X[np.isin(users, list(gone))]
        found = sum(np.float64(v).tobytes() in data or np.float32(v).tobytes() in data for v in rows.ravel())
        labels_found = sum(g.encode() in data for g in gone)
        model.partial_fit(X[:200], y[:200], tasks=users[:200])
        omtl.save(model, path)
        omtl.load(path)
    # Against a model that never saw the forgotten rows.
    fresh = model.__class__(**kwargs)
    again = model.__class__(**kwargs)
    keep = ~np.isin(users, list(gone))
    fresh.partial_fit(X[keep], y[keep], tasks=users[keep])
    again.partial_fit(X, y, tasks=users)
    again.forget(list(gone))
    others = keep
    same = again.decision_function(X[others], tasks=users[others]).tobytes() == \
        fresh.decision_function(X[others], tasks=users[others]).tobytes()
    mine = ~keep
    a = again.decision_function(X[mine], tasks=users[mine])
    b = fresh.decision_function(X[mine], tasks=users[mine])
    scale = np.sqrt(np.mean(b**2)) or 1.0
    kept = float(np.sqrt(np.mean((a - b) ** 2)) / scale)
    return {"stored": stored, "forget_ms": 1e3 * forget_s, "learn10_ms": 1e3 * learn_s, "found": int(found),
            "labels_found": int(labels_found), "identical": same, "exact": exact, "kept": kept,
            "removed_rows": int(rows.shape[0])}


def forget_section(quick: bool) -> list[str]:
    X, y, users = forget_stream()
    gone = [f"user{u}!" for u in range(0, 1000, 100)]
    lines = [
        f"{K:,} tasks, {K * PER_TASK:,} rows of {D} distinct random values, tasks `user0!`, `user100!`, ... (10) "
        "forgotten at once. \"Rows found\": values of the forgotten rows found byte-wise (float64 or float32) in the "
        "saved file and the pickle afterwards. \"Equal\": the other tasks' scores bit-identical to a model that never "
        "saw the forgotten rows. \"Influence kept\": RMS difference of the forgotten tasks' scores between the two, "
        "relative to the RMS score. TRML runs without a retrain (`retrain_every` past the stream): one retrain "
        "at 1,000 tasks takes minutes on this machine.",
        "",
        "| class | settings | stored examples before | forget ms | one 10-row learn ms | rows found | labels found | equal to never seen | influence kept |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for name, kwargs, exact in CLASSES if not quick else CLASSES[:6] + CLASSES[9:13]:
        r = forget_row(name, kwargs, exact, X, y, users, gone)
        settings = ", ".join(f"{k}={v}" for k, v in kwargs.items()) or "defaults"
        equal = ("yes" if r["identical"] else "NO (docs say exact)") if exact else ("yes" if r["identical"] else "no")
        lines.append(f"| {name} | {settings} | {r['stored']:,} | {r['forget_ms']:.2f} | {r['learn10_ms']:.2f} | "
                     f"{r['found']} of {r['removed_rows'] * D} | {r['labels_found']} | {equal} | {r['kept']:.3f} |")
    return lines


def delayed_section(quick: bool) -> list[str]:
    n = 5_000 if quick else 20_000
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, 20))
    y = np.where(X[:, 0] > 0, 1, -1)
    users = [f"u{u}" for u in rng.integers(0, 500, n)]
    lines = ["| path | events | µs per event |", "|---|---:|---:|"]
    for label, run in [
        ("learn_one", lambda m: [m.learn_one(X[i], y[i], task=users[i]) for i in range(n)]),
        ("predict_one(remember=id), then learn_label(id, y)", lambda m: (
            [m.predict_one(X[i], task=users[i], remember=f"e{i}", now=0.0) for i in range(n)],
            [m.learn_label(f"e{i}", y[i], now=1.0) for i in range(n)])),
    ]:
        model = omtl.MTLinear()
        model.partial_fit(X[:10], y[:10], tasks=users[:10])
        t0 = time.perf_counter()
        run(model)
        lines.append(f"| {label} | {n:,} | {1e6 * (time.perf_counter() - t0) / n:.1f} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10^5 users, fewer learners")
    ap.add_argument("--out", default="docs/results/user_budget.md")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    budget_lines, _ = budget_section(args.quick)
    forget_lines = forget_section(args.quick)
    delayed_lines = delayed_section(args.quick)
    head = [
        "# A user's life in the model: the user budget, forgetting, delayed labels",
        "",
        f"Generated by `benches/compare_user_budget.py{' --quick' if args.quick else ''}` ({platform.machine()}, "
        f"2 logical CPUs shared with other jobs; Python {platform.python_version()}; {time.perf_counter() - t0:.0f} s). "
        "docs/lifecycle.md explains the three.",
        "",
        "## MTLinear's byte budget over users",
        "",
    ]
    text = "\n".join(head + budget_lines + ["", "## Forgetting, every learner", ""] + forget_lines
                     + ["", "## Delayed labels (MTLinear, 20 dense features, one event at a time)", ""] + delayed_lines) + "\n"
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
