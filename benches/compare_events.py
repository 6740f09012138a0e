"""One event at a time: the per-event cost (predict, then learn) of omtl against River, Vowpal
Wabbit and scikit-learn, side by side in one run, written to docs/results/events.md.

Two streams: a dense one (20 features, 50 integer task ids) and a bag-of-words one (30 string
words per message out of a Zipf vocabulary, string user ids). Per event, each contender makes a
prediction and then learns the event, as a spam filter does:

- omtl ``MTLinear.learn_one`` (which predicts, then learns) on a NumPy row, an ``{int: value}``
  dict and a ``{str: value}`` dict (names hashed into 2**18 columns); ``predict_one`` alone;
- ``omtl.river.MTLinear`` ``predict_one`` + ``learn_one`` (the task id under ``"task"``);
- River ``LogisticRegression`` and ``PAClassifier`` ``predict_one`` + ``learn_one`` on the same
  events as dicts (one pooled model: River has no task ids);
- Vowpal Wabbit ``Workspace.learn`` on prepared text lines (``--loss_function logistic -q st``:
  features in namespace s, the task in t, as per-task weights);
- scikit-learn ``SGDClassifier.partial_fit`` on one prepared row (pooled);
- omtl ``MTLinear.learn`` in 10-row calls and in one call over the whole stream (per row).

Every contender runs its events ``--repeat`` times, interleaved, and its best run counts.
    python benches/compare_events.py [--n 20000] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

# One thread per BLAS: idle OpenBLAS workers spin and take a core of the two from the loop timed.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import omtl  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "docs" / "results" / "events.md"


def dense_stream(n: int):
    s = omtl.datasets.make_multitask_stream(n_samples=n, n_tasks=50, n_features=20, seed=0)
    return s.X, s.y.astype(np.int64), s.tasks.astype(np.int64)


def bow_stream(n: int, n_words=30, vocabulary=20_000, n_users=1_000, seed=0):
    """Messages of ``n_words`` distinct words (Zipf over the vocabulary), string user ids, and
    labels from a shared word concept plus a per-user flip of a few words."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocabulary + 1)
    p = 1.0 / ranks
    p /= p.sum()
    spamminess = rng.normal(size=vocabulary)
    messages, users, labels = [], [], []
    for _ in range(n):
        words = rng.choice(vocabulary, size=n_words, replace=False, p=p)
        user = int(rng.integers(n_users))
        score = spamminess[words].sum() + (1.0 if user % 7 == 0 else 0.0) * spamminess[words[:3]].sum()
        messages.append({f"w{w}": 1.0 for w in words})
        users.append(f"user{user}")
        labels.append(1 if score + rng.normal() > 0 else -1)
    return messages, users, np.array(labels, dtype=np.int64)


# ---- contenders: each returns seconds for its events ------------------------------------------
def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def omtl_learn_one(events, ys, tasks, **params):
    model = omtl.MTLinear(**params)
    learn_one = model.learn_one

    def run():
        for x, y, t in zip(events, ys, tasks):
            learn_one(x, y, task=t)

    return timed(run)


def omtl_predict_one(events, ys, tasks, **params):
    model = omtl.MTLinear(**params)
    for x, y, t in zip(events[:200], ys[:200], tasks[:200]):
        model.learn_one(x, y, task=t)
    predict_one = model.predict_one

    def run():
        for x, t in zip(events, tasks):
            predict_one(x, task=t)

    return timed(run)


def omtl_river(events_with_task, ys, task_key):
    import omtl.river

    return river_model(lambda: omtl.river.MTLinear(task_key=task_key, hash_bits=18), events_with_task, ys)


def river_model(make, events, ys):
    model = make()

    def run():
        for x, y in zip(events, ys):
            model.predict_one(x)
            model.learn_one(x, y)

    return timed(run)


def river_runs(events, events_with_task, labels, task_key) -> dict:
    """omtl.river.MTLinear and River's two linear models, predict_one + learn_one on the same
    events (the River adapter reads the task from each event's ``task_key``)."""
    from river import linear_model

    return {
        "omtl.river.MTLinear predict_one + learn_one": lambda: omtl_river(events_with_task, labels, task_key),
        "River LogisticRegression predict_one + learn_one": lambda: river_model(linear_model.LogisticRegression, events, labels),
        "River PAClassifier predict_one + learn_one": lambda: river_model(linear_model.PAClassifier, events, labels),
    }


def river_predict_one(make, events, ys):
    model = make()
    for x, y in zip(events[:200], ys[:200]):
        model.learn_one(x, y)

    def run():
        for x in events:
            model.predict_one(x)

    return timed(run)


def vw_learn(lines):
    from vowpalwabbit import Workspace

    vw = Workspace("--loss_function logistic -q st -b 18 --quiet")
    try:
        return timed(lambda: [vw.learn(line) for line in lines])
    finally:
        vw.finish()


def sgd_partial_fit(rows, ys):
    from sklearn.linear_model import SGDClassifier

    model = SGDClassifier(loss="log_loss")
    classes = np.array([-1, 1])
    labels = [np.array([y]) for y in ys]

    def run():
        model.partial_fit(rows[0], labels[0], classes=classes)
        for row, y in zip(rows[1:], labels[1:]):
            model.predict(row)
            model.partial_fit(row, y)

    return timed(run)


def omtl_chunks(X, ys, tasks, chunk, **params):
    model = omtl.MTLinear(**params)
    n = X.shape[0]
    parts = [(X[i : i + chunk], ys[i : i + chunk], tasks[i : i + chunk]) for i in range(0, n, chunk)]

    def run():
        for Xc, yc, tc in parts:
            model.learn(Xc, yc, tasks=tc)

    return timed(run)


# ---- the run ------------------------------------------------------------------------------------
def contenders(n: int):
    from river import linear_model

    X, y, tasks = dense_stream(n)
    ys, ts = y.tolist(), tasks.tolist()
    rows = list(X)
    int_dicts = [{j: float(v) for j, v in enumerate(row)} for row in X]
    names = [f"f{j}" for j in range(X.shape[1])]
    str_dicts = [dict(zip(names, map(float, row))) for row in X]
    with_task = [{**x, "task": t} for x, t in zip(str_dicts, ts)]
    bools = [v > 0 for v in ys]
    vw_dense = [f"{v} |s {' '.join(f'{j}:{x:.6g}' for j, x in enumerate(row))} |t u{t}" for row, v, t in zip(X, ys, ts)]
    sk_rows = [X[i : i + 1] for i in range(n)]

    messages, users, by = bow_stream(n)
    bys = by.tolist()
    bow_with_user = [{**m, "user": u} for m, u in zip(messages, users)]
    bbools = [v > 0 for v in bys]
    vw_bow = [f"{v} |s {' '.join(m)} |t {u}" for m, v, u in zip(messages, bys, users)]
    hashed = omtl.hash_features(messages)
    sk_bow = [hashed[i : i + 1] for i in range(n)]

    dense = {
        "omtl learn_one, NumPy row": lambda: omtl_learn_one(rows, ys, ts),
        "omtl learn_one, {int: value} dict": lambda: omtl_learn_one(int_dicts, ys, ts, n_features=X.shape[1]),
        "omtl learn_one, {str: value} dict (hashed, hash_bits=18)": lambda: omtl_learn_one(
            str_dicts, ys, ts, hash_bits=18),
        **river_runs(str_dicts, with_task, bools, "task"),
        "VW Workspace.learn, prepared line (-q st)": lambda: vw_learn(vw_dense),
        "scikit-learn SGDClassifier predict + partial_fit, one row": lambda: sgd_partial_fit(sk_rows, ys),
        "omtl learn, 10-row calls (per row)": lambda: omtl_chunks(X, y, tasks, 10),
        f"omtl learn, one {n:,}-row call (per row)": lambda: omtl_chunks(X, y, tasks, n),
        "omtl predict_one alone, NumPy row": lambda: omtl_predict_one(rows, ys, ts),
        "River LogisticRegression predict_one alone": lambda: river_predict_one(
            linear_model.LogisticRegression, str_dicts, bools),
    }
    bow = {
        "omtl learn_one, {str: value} dict (hashed, hash_bits=18)": lambda: omtl_learn_one(
            messages, bys, users, hash_bits=18),
        **river_runs(messages, bow_with_user, bbools, "user"),
        "VW Workspace.learn, prepared line (-q st)": lambda: vw_learn(vw_bow),
        "scikit-learn SGDClassifier predict + partial_fit, one hashed row": lambda: sgd_partial_fit(sk_bow, bys),
        "omtl learn, 10-row calls of hash_features (per row)": lambda: omtl_chunks(
            hashed, by, np.array(users), 10, hash_bits=18),
        f"omtl learn, one {n:,}-row call of hash_features (per row)": lambda: omtl_chunks(
            hashed, by, np.array(users), n, hash_bits=18),
    }
    return {"dense": dense, "bow": bow}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="events per stream")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2,000 events, one run, no file written")
    args = parser.parse_args()
    n, repeat = (2_000, 1) if args.quick else (args.n, args.repeat)
    streams = contenders(n)
    load = os.getloadavg()[0]
    best = {stream: {} for stream in streams}
    for _ in range(repeat):  # interleaved, so load changes hit every contender alike
        for stream, runs in streams.items():
            for name, run in runs.items():
                us = run() / n * 1e6
                best[stream][name] = min(us, best[stream].get(name, float("inf")))
    lines = report(best, n, repeat, (load, os.getloadavg()[0]))
    print("\n".join(lines))
    if not args.quick:
        OUT.write_text("\n".join(lines) + "\n")
        print(f"wrote {OUT}")


def report(best, n, repeat, load):
    dense, bow = best["dense"], best["bow"]
    river_lr = dense["River LogisticRegression predict_one + learn_one"]
    lines = [
        "# One event at a time",
        "",
        f"`python benches/compare_events.py --n {n} --repeat {repeat}` on {platform.machine()} "
        f"({platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, load average "
        f"{load[0]:.1f} at the start and {load[1]:.1f} at the end), best of {repeat} interleaved runs; "
        "µs per event (predict, then learn), lower is better; ratio = River LogisticRegression's µs / this µs "
        "(bag-of-words: against River LR on that stream). Named features are hashed into 2**18 columns; "
        "`hash_bits=18` keeps MTLinear's blocks in one table of 2**18 cells, as VW's `-b 18`.",
        "",
    ]
    for title, table, base in (
        ("Dense stream: 20 features, 50 integer task ids", dense, river_lr),
        ("Bag-of-words: 30 string words per message (Zipf over 20,000), 1,000 string user ids", bow,
         bow["River LogisticRegression predict_one + learn_one"]),
    ):
        lines += [f"## {title}", "", "| per event | µs | × River LR |", "|---|---:|---:|"]
        lines += [f"| {name} | {us:.2f} | {base / us:.1f} |" for name, us in table.items()]
        lines.append("")
    vw_dense, vw_bow = dense["VW Workspace.learn, prepared line (-q st)"], bow["VW Workspace.learn, prepared line (-q st)"]
    one = dense["omtl learn_one, NumPy row"]
    chunked = dense["omtl learn, 10-row calls (per row)"]
    whole = dense[f"omtl learn, one {n:,}-row call (per row)"]
    bow_one = bow["omtl learn_one, {str: value} dict (hashed, hash_bits=18)"]
    targets = [
        ("dense learn_one (NumPy row) vs River LR", river_lr / one, 5),
        ("dense learn_one (NumPy row) vs VW", vw_dense / one, 5),
        ("predict_one vs River's predict_one", dense["River LogisticRegression predict_one alone"]
         / dense["omtl predict_one alone, NumPy row"], 3),
        ("bag-of-words learn_one vs River LR", bow["River LogisticRegression predict_one + learn_one"] / bow_one, 2.5),
        ("bag-of-words learn_one vs VW", vw_bow / bow_one, 1.5),
        ("omtl.river.MTLinear vs River LR (dense)", river_lr / dense["omtl.river.MTLinear predict_one + learn_one"], 1.5),
    ]
    lines += ["## Targets", "", "| target | measured | wanted | met |", "|---|---:|---:|---|"]
    lines += [f"| {name} | {ratio:.1f}× | ≥ {want}× | {'yes' if ratio >= want else 'no'} |" for name, ratio, want in targets]
    per_row = chunked / whole
    lines.append(f"| 10-row calls per row / one {n:,}-row call per row | {per_row:.1f}× | ≤ 3× | "
                 f"{'yes' if per_row <= 3 else 'no'} |")
    return lines


if __name__ == "__main__":
    main()
