"""``omtl learn FILE`` against Vowpal Wabbit's file driver, whole process, side by side in one run.

Regenerates two files and writes each twice, as svmlight with ``qid:`` tasks (what omtl reads) and
in VW's text format (``label |s j:x_j ... |t t<task>``, namespace s the features, t the task):

- School x20: the School rows (``omtl.datasets.load_school``) repeated 20 times, 307,240 rows;
- Sentiment x5: the Sentiment rows repeated 5 times, 40,000 rows, 473,856 feature columns.

Then times ``omtl learn FILE.svm`` (MTLinear defaults, progressive report on stderr) and VW
``--loss_function logistic -q st -d FILE.vw`` (VW's own C++ file driver and parser; no ``vw``
binary ships with the ``vowpalwabbit`` wheel, so it runs as ``python -m vowpalwabbit ...``, which
hands the arguments to that driver in-process: the Python start-up, ~15 MB and ~0.1 s, is in VW's
numbers too), each under ``/usr/bin/time -v`` (wall time, peak RSS), best of ``--repeats`` runs.
omtl also reads the VW file (names hashed into 2^18 columns, as VW's ``-b 18``). Finally a stream of
about ``--stream-gb`` GB (the Sentiment svmlight file repeated) is piped through standard input into
``omtl learn - --format svmlight`` (no width given: MTLinear widens as larger indices arrive); its
peak RSS is compared with the model's ``memory_bytes_``.

Usage: ``python benches/compare_cli.py [--work /tmp/omtl-cli-bench] [--repeats 2] [--stream-gb 1.0]
[--out docs/results/cli.md]``; data from ``$OMTL_DATA``. The files are kept in ``--work`` and
reused when present (they are not committed).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import omtl
from omtl import datasets as D

VW_ARGS = ["--loss_function", "logistic", "-q", "st"]
SETS = {"school": ("School x20", lambda d: D.load_school(d), 20),
        "sentiment": ("Sentiment x5", lambda d: D.load_sentiment(d), 5)}


def write_files(name, work: Path, data_dir):
    """``(svmlight path, vw path, rows, columns)``, written unless present."""
    label, load, times = SETS[name]
    svm, vw, meta = work / f"{name}.svm", work / f"{name}.vw", work / f"{name}.meta"
    if svm.exists() and vw.exists() and meta.exists():
        rows, cols = map(int, meta.read_text().split())
        return svm, vw, rows, cols
    stream = load(data_dir)
    X = sp.csr_matrix(stream.X)
    y = np.where(np.asarray(stream.y) > 0, 1, -1)
    tasks = np.asarray(stream.tasks)
    feats = []
    for r in range(X.shape[0]):
        a, b = X.indptr[r], X.indptr[r + 1]
        feats.append(" ".join(f"{j + 1}:{v:.9g}" for j, v in zip(X.indices[a:b], X.data[a:b]) if v != 0.0))
    svm_block = "".join(f"{y[r]} qid:{tasks[r]} {feats[r]}\n" for r in range(X.shape[0]))
    vw_block = "".join(f"{y[r]} |s {feats[r]} |t t{tasks[r]}\n" for r in range(X.shape[0]))
    with open(svm, "w") as f_svm, open(vw, "w") as f_vw:
        for _ in range(times):
            f_svm.write(svm_block)
            f_vw.write(vw_block)
    meta.write_text(f"{X.shape[0] * times} {X.shape[1]}")
    return svm, vw, X.shape[0] * times, X.shape[1]


def timed(command, *, shell=False):
    """``(wall seconds, peak RSS MB, stderr, CPU seconds)`` of a command under ``/usr/bin/time -v``."""
    argv = ["/usr/bin/time", "-v", *(["sh", "-c", command] if shell else command)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{command} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", proc.stderr).group(1)
    seconds = sum(float(part) * 60**k for k, part in enumerate(reversed(wall.split(":"))))
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): (\S+)", proc.stderr).group(1)) for kind in ("User", "System"))
    return seconds, rss_kb / 1024, proc.stderr, cpu


def best_of(command, repeats, **kw):
    """Fastest wall time, smallest peak RSS, the first run's stderr, least CPU time of ``repeats`` runs."""
    runs = [timed(command, **kw) for _ in range(repeats)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[0][2], min(r[3] for r in runs)


ROOT = Path(__file__).resolve().parent.parent
PHASES_EXAMPLE = ROOT / "target" / "release" / "examples" / "learn_file"


def phases(path: Path) -> list[float]:
    """Seconds of the parts of ``omtl learn``'s engine loop, one after another in one Rust process
    (``examples/learn_file.rs --phases``, built here if missing): the whole run (width pass, then
    reading and learning overlapped), the width pass alone, reading every chunk alone, learning
    the chunks already in memory alone."""
    if not PHASES_EXAMPLE.exists():
        subprocess.run(["cargo", "build", "--release", "--example", "learn_file"], cwd=ROOT, check=True)
    out = subprocess.run([str(PHASES_EXAMPLE), str(path), "--phases"], capture_output=True, text=True, check=True)
    whole = float(re.search(r", (\S+) s$", out.stderr, re.M).group(1))
    parts = re.search(r"width pass (\S+) s, read (\S+) s, learn (\S+) s", out.stderr)
    return [whole, *map(float, parts.groups())]


def model_bytes(path: Path) -> int:
    return int(omtl.load(path).memory_bytes_)


def omtl_command(*args):
    return [sys.executable, "-m", "omtl", "learn", *map(str, args)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/tmp/omtl-cli-bench")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--stream-gb", type=float, default=1.0)
    parser.add_argument("--datasets", default="school,sentiment")
    parser.add_argument("--out", default="docs/results/cli.md")
    args = parser.parse_args()
    if not Path("/usr/bin/time").exists():
        raise SystemExit("needs GNU time at /usr/bin/time (apt-get install time)")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    data_dir = os.environ.get("OMTL_DATA")
    rows_out, stream_row = [], None
    for name in args.datasets.split(","):
        svm, vw, n_rows, n_cols = write_files(name, work, data_dir)
        model_file = work / f"{name}.omtl"
        t_omtl, m_omtl, log, c_omtl = best_of(omtl_command(svm), args.repeats)
        loss = re.search(r"average 0/1 loss = (\S+)", log).group(1)
        t_omtl_vw, m_omtl_vw, _, c_omtl_vw = best_of(omtl_command(vw), args.repeats)
        t_vw, m_vw, vw_log, c_vw = best_of([sys.executable, "-m", "vowpalwabbit", *VW_ARGS, "-d", str(vw)],
                                           args.repeats)
        t_start, _, _, _ = timed([sys.executable, "-c", "pass"])
        vw_loss = re.search(r"average loss = (\S+)", vw_log).group(1)
        subprocess.run(omtl_command(svm, "--quiet", "--save", model_file), check=True)
        mem = model_bytes(model_file) / 2**20
        rows_out.append({
            "set": SETS[name][0], "rows": n_rows, "cols": n_cols, "svm_mb": svm.stat().st_size / 2**20,
            "vw_mb": vw.stat().st_size / 2**20, "t_omtl": t_omtl, "m_omtl": m_omtl, "t_omtl_vw": t_omtl_vw,
            "m_omtl_vw": m_omtl_vw, "t_vw": t_vw, "m_vw": m_vw, "model_mb": mem, "loss": loss, "vw_loss": vw_loss,
            "c_omtl": c_omtl, "c_omtl_vw": c_omtl_vw, "c_vw": c_vw, "t_python": t_start, "phases": phases(svm),
        })
        print(rows_out[-1], flush=True)
        if name == "sentiment" and args.stream_gb > 0:
            copies = max(1, int(np.ceil(args.stream_gb * 2**30 / svm.stat().st_size)))
            cat = " ".join([str(svm)] * copies)
            command = f"cat {cat} | {sys.executable} -m omtl learn - --format svmlight --quiet --save {model_file}"
            t_s, m_s, _, _ = timed(command, shell=True)
            mem_s = model_bytes(model_file) / 2**20
            stream_row = {"gb": copies * svm.stat().st_size / 2**30, "rows": copies * n_rows, "t": t_s, "m": m_s,
                          "model_mb": mem_s}
            print(stream_row, flush=True)
    floors = {name: best_of([sys.executable, "-c", code], args.repeats) for name, code in FLOORS.items()}
    write_report(Path(args.out), rows_out, stream_row, args, floors)
    return 0


# What a Python process pays before reading a byte of data: `omtl learn`'s engine loop needs the
# command's modules and the extension (no NumPy, no SciPy: the NumPy + SciPy line is what it
# would cost with them); VW's file driver runs behind its Python module.
FLOORS = {
    "`import omtl.cli, omtl.cli_learn, omtl._native`": "import omtl.cli, omtl.cli_learn, omtl._native",
    "`import numpy, scipy.sparse`": "import numpy, scipy.sparse",
    "`import vowpalwabbit`": "import vowpalwabbit",
}


def write_report(path: Path, rows, stream_row, args, floors) -> None:
    lines = [
        "# `omtl learn FILE` against Vowpal Wabbit's file driver",
        "",
        "Whole process, wall time and peak RSS (`/usr/bin/time -v`), best of "
        f"{args.repeats} runs, one after another in one run of `python benches/compare_cli.py`. omtl: "
        "`omtl learn FILE.svm` (MTLinear defaults, report on stderr); VW "
        f"{getattr(__import__('vowpalwabbit'), '__version__', '?')}: `python -m vowpalwabbit "
        f"{' '.join(VW_ARGS)} -d FILE.vw` (VW's C++ driver and parser; the wheel ships no `vw` binary, so "
        "the Python start-up is in VW's numbers). Same rows in both files; omtl also reads the VW file "
        "(names hashed into 2^18 columns). Targets: omtl's wall time <= VW's; omtl's peak RSS <= 2 x VW's "
        "+ the model's `memory_bytes_`.",
        "",
        "Each cell: wall time, CPU time (user + system, all threads), peak RSS.",
        "",
        "| file | rows | feature columns | svmlight / VW file | omtl learn FILE.svm | omtl learn FILE.vw | "
        "VW -d FILE.vw | model memory_bytes_ | RSS target | progressive 0/1 loss (omtl) | VW average logistic loss |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        target = 2 * r["m_vw"] + r["model_mb"]
        lines.append(
            f"| {r['set']} | {r['rows']:,} | {r['cols']:,} | {r['svm_mb']:.0f} / {r['vw_mb']:.0f} MB | "
            f"{r['t_omtl']:.2f} s, {r['c_omtl']:.2f} s, {r['m_omtl']:.0f} MB | "
            f"{r['t_omtl_vw']:.2f} s, {r['c_omtl_vw']:.2f} s, {r['m_omtl_vw']:.0f} MB | "
            f"{r['t_vw']:.2f} s, {r['c_vw']:.2f} s, {r['m_vw']:.0f} MB | {r['model_mb']:.2f} MB | {target:.0f} MB | "
            f"{r['loss']} | {r['vw_loss']} |")
    lines += [
        "",
        "Where omtl's time goes (the svmlight file): `examples/learn_file.rs --phases`, the engine loop "
        "without Python, then its parts one after another in the same process (seconds, wall): the width pass; "
        "reading every chunk (parsing, on one thread); learning the chunks already in memory. In `omtl learn` the "
        "width pass comes first, then reading and learning overlap on two threads, so the run's floor is the "
        "start-up + the width pass + the longer of reading and learning.",
        "",
        "| file | Python start-up (`python -c pass`) | whole loop in Rust | width pass | read every chunk | "
        "learn every chunk |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        p = r["phases"]
        lines.append(f"| {r['set']} | {r['t_python']:.2f} | {p[0]:.2f} | {p[1]:.2f} | {p[2]:.2f} | {p[3]:.2f} |")
    start = floors["`import omtl.cli, omtl.cli_learn, omtl._native`"][0]
    lines += [
        "",
        "The floor of `omtl learn FILE` on two free cores, from these parts: the command's start-up "
        f"({start:.2f} s) + the width pass + the longer of reading and learning: "
        + "; ".join(f"{r['set']} {start + r['phases'][1] + max(r['phases'][2], r['phases'][3]):.2f} s "
                    f"(VW's whole run {r['t_vw']:.2f} s)" for r in rows)
        + ". On cores other jobs share, the two threads do not overlap fully and the wall time moves toward "
        "the CPU time. Where the CPU time goes, by `perf record`: docs/results/cli_profile.md "
        "(`python benches/profile_cli.py`).",
    ]
    lines.append("")
    for r in rows:
        target = 2 * r["m_vw"] + r["model_mb"]
        lines.append(
            f"- {r['set']}: wall time {r['t_omtl']:.2f} s vs VW's {r['t_vw']:.2f} s, target "
            f"{'met' if r['t_omtl'] <= r['t_vw'] else 'missed'}; CPU time {r['c_omtl']:.2f} s vs {r['c_vw']:.2f} s; "
            f"peak RSS {r['m_omtl']:.0f} MB vs {target:.0f} MB, target {'met' if r['m_omtl'] <= target else 'missed'}.")
    lines += [
        "",
        "Start-up alone (a process that only imports, best of the same runs; wall, CPU, peak RSS): "
        + "; ".join(f"{name} {t:.2f} s, {c:.2f} s, {m:.0f} MB" for name, (t, m, _, c) in floors.items())
        + ". `omtl learn FILE` imports neither NumPy nor SciPy (`omtl` loads its names on first use).",
    ]
    if stream_row is not None:
        s = stream_row
        lines += [
            "",
            f"**Standard input**: {s['gb']:.2f} GB ({s['rows']:,} rows, the Sentiment svmlight file repeated) piped "
            f"through `omtl learn - --format svmlight --quiet` (no width given: the model widens as it reads): "
            f"{s['t']:.1f} s, peak RSS "
            f"{s['m']:.0f} MB; the model's `memory_bytes_` is {s['model_mb']:.1f} MB, so the target "
            f"(model + 300 MB = {s['model_mb'] + 300:.0f} MB) is {'met' if s['m'] <= s['model_mb'] + 300 else 'missed'}.",
        ]
    lines += ["", f"Machine: {platform.platform()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average at the end "
              f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} (other jobs share the cores).", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    print(path.read_text())


if __name__ == "__main__":
    if shutil.which("sh") is None:
        raise SystemExit("needs sh")
    sys.exit(main())
