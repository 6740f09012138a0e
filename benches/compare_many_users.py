"""Per-user filters at scale: MTLinear against Vowpal Wabbit (``--loss_function logistic -q st -b 22``)
as the number of users grows.

Two streams of bag-of-words rows (2^18 columns, 30 word draws per row, Zipf-like word frequencies,
binary values; 3 rows per user, users interleaved at random, string user ids):

- ``bow``: the label is a shared concept on the 2^14 most frequent words (Gaussian weights),
  10 % label noise;
- ``per_user``: the shared concept plus a small per-user perturbation (a user bias uniform in
  [-0.5, 0.5] and per-user weights uniform in [-0.25, 0.25] on every word, from a hash of the
  pair), 5 % label noise.

Contenders, each in its own subprocess (so peak RSS is its own): MTLinear with its defaults (exact
cells) and with ``hash_bits=22`` (one table of 2^22 cells for every block), fed ``learn`` calls of
10,000 rows (predict, then learn: the error is progressive); VW's own driver on a text file of the
same rows (``-d``, its prediction file gives the error; the time includes VW's set-up and reading
the text, not writing the file); VW in-process (``Workspace.parse`` + ``learn`` per line, lines
prepared beforehand). At every tenth of the stream MTLinear's cost of a 10-row ``learn`` call of
existing users is timed (median of 15 calls), and of a failing one (the last row's value 1e25 passes
validation, its update is refused: the call must leave the model unchanged, checked by comparing
the pickled state after the largest run).

Usage: ``python benches/compare_many_users.py [--quick] [--out docs/results/many_users.md]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

N_COLS = 2**18
NNZ = 30
ROWS_PER_USER = 3
CHUNK = 10_000
VW_ARGS = "--loss_function logistic -q st -b 22"
ENGINE = "MTLinear hash_bits=22, native core alone (integer ids)"


def word_draws(rng, n):
    """Zipf-like word ids in [0, 2^18): frequent words are shared by many rows."""
    return np.minimum((N_COLS * rng.random((n, NNZ)) ** 3).astype(np.int64), N_COLS - 1)


def mix(a):
    """A 64-bit mix (splitmix64's finaliser) of an integer array: per-(user, word) pseudo-random."""
    a = a.astype(np.uint64)
    with np.errstate(over="ignore"):
        a = (a ^ (a >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        a = (a ^ (a >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return a ^ (a >> np.uint64(31))


class Stream:
    """The stream of ``n_users * 3`` rows, made chunk by chunk from a seed (never held whole)."""

    def __init__(self, kind: str, n_users: int, seed: int = 0):
        self.kind, self.n_users = kind, n_users
        rng = np.random.default_rng(seed)
        # The 2^14 most frequent words carry the concept (about 12 of a row's 30 draws).
        concept = np.where(np.arange(N_COLS) < 2**14, rng.standard_normal(N_COLS), 0.0)
        self.concept = concept
        self.order = rng.permutation(np.repeat(np.arange(n_users), ROWS_PER_USER))
        self.seed = seed

    def __len__(self):
        return len(self.order)

    def chunk(self, start: int, stop: int):
        """Rows start..stop: CSR matrix (canonical), labels ±1, user ids (strings)."""
        rng = np.random.default_rng([self.seed, start])
        users = self.order[start:stop]
        n = len(users)
        cols = np.sort(word_draws(rng, n), axis=1)
        X = sp.csr_matrix((np.ones(n * NNZ), cols.ravel(), np.arange(0, n * NNZ + 1, NNZ)), shape=(n, N_COLS))
        X.sum_duplicates()
        X.data[:] = 1.0  # binary bag of words
        score = X @ self.concept
        noise = 0.10
        if self.kind == "per_user":
            noise = 0.05
            pair = mix(users[np.repeat(np.arange(n), np.diff(X.indptr))].astype(np.uint64) * np.uint64(N_COLS)
                       + X.indices.astype(np.uint64))
            personal = ((pair >> np.uint64(11)).astype(np.float64) / 2.0**53 - 0.5) * 0.5
            score = score + np.add.reduceat(personal, X.indptr[:-1]) * (np.diff(X.indptr) > 0)
            bias = ((mix(users.astype(np.uint64) + np.uint64(7)) >> np.uint64(11)).astype(np.float64) / 2.0**53 - 0.5)
            score = score + bias
        y = np.where(score >= 0, 1, -1)
        flip = rng.random(n) < noise
        y[flip] = -y[flip]
        return X, y, np.array([f"u{u}" for u in users], dtype=object)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def failing(model, X, y, users):
    """The rows with the last one's first value 1e25 and its label against the model's score: it
    passes validation, and its logistic update (gradient about 1 on a value of 1e25) would write
    statistics beyond single precision, so the update is refused."""
    bad = X.copy()
    bad.data[bad.indptr[-2]] = 1e25
    y_bad = y.copy()
    y_bad[-1] = -1 if model.decision_function(bad[-1:], tasks=users[-1:])[0] >= 0 else 1
    return bad, y_bad


def run_mtlinear(stream: Stream, hash_bits, check_identity: bool):
    import omtl

    base_rss = peak_rss_mb()
    model = omtl.MTLinear(hash_bits=hash_bits)
    n = len(stream)
    errors, seconds, costs, chunk_s = 0, 0.0, [], []
    marks = {int(n * f / 10) for f in range(1, 11)}
    probe_rng = np.random.default_rng(99)
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        X, y, users = stream.chunk(start, stop)
        t0 = time.perf_counter()
        pred = model.learn(X, y, tasks=users)
        chunk_s.append(time.perf_counter() - t0)
        seconds += chunk_s[-1]
        errors += int(np.sum(pred != y))
        if any(start < m <= stop for m in marks):
            # 10-row calls of users already seen (rows of this chunk, learnt again).
            ok_times, fail_times = [], []
            for _ in range(15):
                pick = probe_rng.choice(stop - start, 10, replace=False)
                Xs, ys, us = X[pick], y[pick], users[pick]
                t0 = time.perf_counter()
                model.learn(Xs, ys, tasks=us)
                ok_times.append(time.perf_counter() - t0)
                bad, y_bad = failing(model, Xs, ys, us)
                t0 = time.perf_counter()
                try:
                    model.learn(bad, y_bad, tasks=us)
                    raise SystemExit("the failing call did not fail")
                except ValueError:
                    pass
                fail_times.append(time.perf_counter() - t0)
            costs.append({"rows": stop, "ok_ms": 1e3 * float(np.median(ok_times)), "fail_ms": 1e3 * float(np.median(fail_times))})
    identical = None
    if check_identity:
        X, y, users = stream.chunk(0, 10)
        before = pickle.dumps(model)
        new_users = np.array([f"new{i}" for i in range(10)], dtype=object)
        bad, y_bad = failing(model, X, y, users)
        try:
            model.learn(bad, y_bad, tasks=new_users)
            identical = False
        except ValueError:
            identical = pickle.dumps(model) == before
    tenth = max(1, len(chunk_s) // 10)
    return {
        "first_tenth_s": sum(chunk_s[:tenth]),
        "last_tenth_s": sum(chunk_s[-tenth:]),
        "examples_per_s": n / seconds,
        "seconds": seconds,
        "memory_bytes": int(model.memory_bytes_),
        "peak_rss_mb": peak_rss_mb(),
        "rss_growth_mb": peak_rss_mb() - base_rss,
        "error": 100.0 * errors / n,
        "costs": costs,
        "identical_after_failure": identical,
    }


def run_engine_only(stream: Stream, hash_bits):
    """The native core alone, as the binding's per-call path drives it once the Python side's
    per-call work is O(batch): user ids mapped to integers beforehand (outside the clock), new users
    added by the call (``n_new``), 10,000-row calls; and the 10-row call on the grown model."""
    import omtl
    from omtl._validation import csr_parts

    base_rss = peak_rss_mb()
    model = omtl.MTLinear(hash_bits=hash_bits)
    X, y, _ = stream.chunk(0, 1)
    model.partial_fit(X, y, tasks=np.array([0]))  # builds the core
    core = model._core._learner
    n_tasks, ids, chunk_s, errors = core.n_tasks, {}, [], 0
    for start in range(0, len(stream), CHUNK):
        X, y, _ = stream.chunk(start, min(start + CHUNK, len(stream)))
        t = np.array([ids.setdefault(u, len(ids)) for u in stream.order[start:start + len(y)]], dtype=np.int64)
        n_new = max(0, len(ids) - n_tasks)
        parts, yf = csr_parts(X), y.astype(np.float64)
        t0 = time.perf_counter()
        scores = core.learn(parts, t, yf, n_new)
        chunk_s.append(time.perf_counter() - t0)
        errors += int(np.sum(np.where(scores >= 0, 1, -1) != y))
        n_tasks += n_new
    X, y, _ = stream.chunk(0, 10)
    t = np.array([ids[u] for u in stream.order[:10]], dtype=np.int64)
    parts, yf = csr_parts(X), y.astype(np.float64)
    ok = []
    for _ in range(200):
        t0 = time.perf_counter()
        core.learn(parts, t, yf, 0)
        ok.append(time.perf_counter() - t0)
    tenth = max(1, len(chunk_s) // 10)
    return {"examples_per_s": len(stream) / sum(chunk_s), "seconds": sum(chunk_s),
            "memory_bytes": int(core.diagnostics()["memory_bytes"]), "peak_rss_mb": peak_rss_mb(),
            "rss_growth_mb": peak_rss_mb() - base_rss, "error": 100.0 * errors / len(stream),
            "first_tenth_s": sum(chunk_s[:tenth]), "last_tenth_s": sum(chunk_s[-tenth:]),
            "engine_ten_row_ms": 1e3 * float(np.median(ok))}


def vw_text(stream: Stream, path: Path):
    """The stream as VW lines: ``label |s w1 w2 ... |t u<id>`` (binary words need no value)."""
    vocab = np.array([str(j) for j in range(N_COLS)], dtype=object)
    with open(path, "w") as f:
        for start in range(0, len(stream), CHUNK):
            X, y, users = stream.chunk(start, min(start + CHUNK, len(stream)))
            ind, ptr = X.indices, X.indptr
            f.write("".join(f"{y[r]} |s {' '.join(vocab[ind[ptr[r]:ptr[r + 1]]])} |t {users[r]}\n"
                            for r in range(len(y))))


def run_vw_file(stream: Stream):
    from vowpalwabbit import Workspace

    base_rss = peak_rss_mb()
    with tempfile.TemporaryDirectory() as tmp:
        data, preds = Path(tmp) / "data.vw", Path(tmp) / "preds.txt"
        vw_text(stream, data)
        t0 = time.perf_counter()
        ws = Workspace(f"{VW_ARGS} --quiet --holdout_off -d {data} -p {preds}")
        ws.run_parser()
        ws.finish()
        seconds = time.perf_counter() - t0
        pred = np.loadtxt(preds)
    y = np.concatenate([stream.chunk(s, min(s + CHUNK, len(stream)))[1] for s in range(0, len(stream), CHUNK)])
    return {"examples_per_s": len(stream) / seconds, "seconds": seconds, "peak_rss_mb": peak_rss_mb(),
            "rss_growth_mb": peak_rss_mb() - base_rss, "error": 100.0 * np.mean(np.where(pred >= 0, 1, -1) != y)}


def run_vw_inprocess(stream: Stream):
    from vowpalwabbit import Workspace

    base_rss = peak_rss_mb()
    ws = Workspace(f"{VW_ARGS} --quiet")
    seconds, errors = 0.0, 0
    vocab = np.array([str(j) for j in range(N_COLS)], dtype=object)
    for start in range(0, len(stream), CHUNK):
        X, y, users = stream.chunk(start, min(start + CHUNK, len(stream)))
        ind, ptr = X.indices, X.indptr
        lines = [f"{y[r]} |s {' '.join(vocab[ind[ptr[r]:ptr[r + 1]]])} |t {users[r]}" for r in range(len(y))]
        t0 = time.perf_counter()
        for r, line in enumerate(lines):
            ex = ws.parse(line)
            ws.learn(ex)
            errors += int((ex.get_simplelabel_prediction() >= 0) != (y[r] > 0))
            ws.finish_example(ex)
        seconds += time.perf_counter() - t0
    ws.finish()
    return {"examples_per_s": len(stream) / seconds, "seconds": seconds, "peak_rss_mb": peak_rss_mb(),
            "rss_growth_mb": peak_rss_mb() - base_rss, "error": 100.0 * errors / len(stream)}


def worker(spec: dict) -> dict:
    stream = Stream(spec["stream"], spec["users"])
    if spec["who"] == "mtlinear":
        return run_mtlinear(stream, spec["hash_bits"], spec.get("check_identity", False))
    if spec["who"] == "engine":
        return run_engine_only(stream, spec["hash_bits"])
    if spec["who"] == "vw_file":
        return run_vw_file(stream)
    return run_vw_inprocess(stream)


CONTENDERS = {
    "MTLinear (defaults)": {"who": "mtlinear", "hash_bits": None},
    "MTLinear hash_bits=22": {"who": "mtlinear", "hash_bits": 22},
    ENGINE: {"who": "engine", "hash_bits": 22},
    f"VW {VW_ARGS} (file driver)": {"who": "vw_file"},
    f"VW {VW_ARGS} (in-process)": {"who": "vw_inprocess"},
}


def plan(quick: bool):
    """(stream, users, contender) runs. The exact defaults and VW in-process stop at 10^5 users in
    the full run (the defaults' memory grows with the pairs touched; VW in-process is per-line
    Python), the others go to 10^6."""
    sizes = [1_000, 10_000, 30_000] if quick else [1_000, 10_000, 100_000, 1_000_000]
    cap = 30_000 if quick else 100_000
    runs = []
    for stream, stream_sizes in (("bow", sizes), ("per_user", sizes[-2:])):
        for users in stream_sizes:
            for label, spec in CONTENDERS.items():
                if spec["who"] != "vw_file" and spec.get("hash_bits") != 22 and users > cap:
                    continue
                if spec["who"] == "engine" and stream != "bow":
                    continue
                runs.append((stream, users, label, spec))
    return runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10^3..3*10^4 users")
    ap.add_argument("--out", default="docs/results/many_users.md")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    results = []
    biggest = max(users for _, users, _, _ in plan(args.quick))
    for stream, users, label, spec in plan(args.quick):
        spec = {**spec, "stream": stream, "users": users,
                "check_identity": spec["who"] == "mtlinear" and users == biggest}
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            raise SystemExit(f"{label} on {stream} x {users} failed")
        res = json.loads(out.stdout.strip().splitlines()[-1])
        results.append({"stream": stream, "users": users, "label": label, **res})
        print(f"[{stream} {users} users] {label}: {res['examples_per_s']:,.0f} ex/s, error {res['error']:.2f} %, "
              f"peak RSS {res['peak_rss_mb']:.0f} MB ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    write(results, args)
    return 0


def write(results, args) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(out.with_suffix(".json")).write_text(json.dumps(results, indent=1))
    lines = [
        "# Many users: MTLinear against Vowpal Wabbit as the number of users grows",
        "",
        f"Generated by `benches/compare_many_users.py{' --quick' if args.quick else ''}` "
        f"({platform.machine()}, {os.cpu_count()} logical CPUs shared with other jobs; Python "
        f"{platform.python_version()}). Streams: 2^18 columns, {NNZ} word draws per row (binary), "
        f"{ROWS_PER_USER} rows per user, string user ids; MTLinear in `learn` calls of {CHUNK:,} rows "
        "(progressive error). VW's file-driver time includes its set-up and text parsing, not writing "
        "the file. Each contender runs in its own process: peak RSS is the process's peak, RSS growth "
        "its peak less its RSS before the model was made (for VW: before the run). The exact defaults and VW "
        "in-process stop at 10^5 users (see the bench's docstring).",
        "",
        "| stream | users | learner | examples/s | error % | memory_bytes_ | peak RSS MB | RSS growth MB |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        mem = f"{r['memory_bytes']:,}" if "memory_bytes" in r else ""
        lines.append(f"| {r['stream']} | {r['users']:,} | {r['label']} | {r['examples_per_s']:,.0f} | "
                     f"{r['error']:.2f} | {mem} | {r['peak_rss_mb']:.0f} | {r['rss_growth_mb']:.0f} |")
    lines += ["", "## Cost of a 10-row `learn` call as the model grows (median of 15, ms)", "",
              "Successful call (10 rows of users already seen) and failing call (the same rows, the last "
              "one's value 1e25: validated, then refused by the update, the model left as before).", "",
              "| stream | users at the end | learner | rows learnt | ok ms | failing ms |", "|---|---:|---|---:|---:|---:|"]
    for r in results:
        for c in r.get("costs", []):
            lines.append(f"| {r['stream']} | {r['users']:,} | {r['label']} | {c['rows']:,} | {c['ok_ms']:.3f} | "
                         f"{c['fail_ms']:.3f} |")
    checks = [r for r in results if r.get("identical_after_failure") is not None]
    if checks:
        lines += ["", "Pickled state after a failing 10-row call with 10 new users, on the largest model: "
                  + ", ".join(f"{r['label']} ({r['stream']}, {r['users']:,} users): "
                              f"{'bit-identical' if r['identical_after_failure'] else 'CHANGED'}" for r in checks) + "."]
    lines += ["", "## Targets", ""] + targets(results)
    out.write_text("\n".join(lines) + "\n")


def targets(results) -> list[str]:
    """The issue's targets, read off the rows above."""
    def get(stream, users, label):
        return next((r for r in results if (r["stream"], r["users"], r["label"]) == (stream, users, label)), None)

    lines = []
    hashed, vw_file = "MTLinear hash_bits=22", f"VW {VW_ARGS} (file driver)"
    sizes = sorted({r["users"] for r in results if r["stream"] == "bow"})
    big, small = sizes[-1], sizes[0]
    h, v = get("bow", big, hashed), get("bow", big, vw_file)
    if h and v:
        slots = 2**22 * 3 * 4
        lines.append(f"- {big:,} users, hash_bits=22: memory_bytes_ {h['memory_bytes']:,} vs the bound 2^22 cells' state + "
                     f"200 B/user = {slots + 200 * big:,}: {'met' if h['memory_bytes'] <= slots + 200 * big else 'MISSED'}; "
                     f"RSS growth {h['rss_growth_mb']:.0f} MB (target ≤ 1,500); throughput {h['examples_per_s']:,.0f} ex/s "
                     f"= {h['examples_per_s'] / v['examples_per_s']:.2f}× VW's file driver (target ≥ 2×); the last tenth "
                     f"of the calls took {h['last_tenth_s'] / h['first_tenth_s']:.2f}× the first tenth (target ≤ 1.5×).")
        if h["costs"]:
            c0, c1 = h["costs"][0], h["costs"][-1]
            lines.append(f"- 10-row call on the {big:,}-user model: {c1['ok_ms']:.3f} ms at the end vs {c0['ok_ms']:.3f} ms "
                         f"after the first tenth; failing call {c1['fail_ms']:.3f} ms "
                         f"({c1['fail_ms'] / c1['ok_ms']:.2f}× a successful one; target ≤ 2×).")
    hs = get("bow", small, hashed)
    if h and hs and h["costs"] and hs["costs"]:
        a, b = hs["costs"][-1]["ok_ms"], h["costs"][-1]["ok_ms"]
        lines.append(f"- 10-row call with {big:,} users {b:.3f} ms vs {small:,} users {a:.3f} ms: {b / a:.2f}× (target ≤ 2×).")
    e, es = get("bow", big, ENGINE), get("bow", small, ENGINE)
    if e and es and v:
        lines.append(f"- The native core alone (what the Python layer adds excluded): {e['examples_per_s']:,.0f} ex/s with "
                     f"{big:,} users = {e['examples_per_s'] / v['examples_per_s']:.2f}× VW's file driver; last tenth "
                     f"{e['last_tenth_s'] / e['first_tenth_s']:.2f}× the first; 10-row call {e['engine_ten_row_ms']:.4f} ms "
                     f"with {big:,} users vs {es['engine_ten_row_ms']:.4f} ms with {small:,} "
                     f"({e['engine_ten_row_ms'] / es['engine_ten_row_ms']:.2f}×).")
    for users in sorted({r["users"] for r in results if r["stream"] == "per_user"}):
        h, v = get("per_user", users, hashed), get("per_user", users, vw_file)
        if h and v:
            lines.append(f"- per-user stream, {users:,} users: MTLinear hash_bits=22 error {h['error']:.2f} % vs VW "
                         f"{v['error']:.2f} % ({'met' if h['error'] <= v['error'] else 'MISSED'}: target ≤).")
    return lines


if __name__ == "__main__":
    sys.exit(main())
