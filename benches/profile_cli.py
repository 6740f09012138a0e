"""Where ``omtl learn FILE``'s CPU time goes: ``perf record`` of the whole process, the symbols
grouped by the part of the run they belong to, written to docs/results/cli_profile.md.

Usage: ``python benches/profile_cli.py [FILE] [--out docs/results/cli_profile.md]``; FILE defaults
to the Sentiment x5 svmlight file ``benches/compare_cli.py`` writes (``/tmp/omtl-cli-bench``).
Needs ``perf`` (linux-perf) and an extension built in release mode.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Symbol (or shared object) fragments -> the part of the run; the first match wins.
GROUPS = {
    "width pass (before reading)": ["io::width::", "resolve_layout"],
    "parser (reader thread; memchr of both passes)": ["svmlight::Parser", "vw::Parser", "csv::Parser", "parse_number", "next_chunk",
                               "source::Lines", "memchr"],
    "learner (the Model: MTLinear and its book of tasks; learning thread)": ["mt_linear", "learner::", "model::",
                                                                              "data::Rows", "simd::", "hashbrown"],
    "kernel: reading the file": ["_copy_to_iter", "filemap", "ksys_read", "copy_page_to_iter"],
    "kernel: memory (page faults, zeroing)": ["clear_page", "page_fault", "folio", "handle_mm"],
    "Python (start-up, argument parsing, report)": ["libpython", "python3", "ld-linux", "_dl_"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", default="/tmp/omtl-cli-bench/sentiment.svm")
    parser.add_argument("--out", default="docs/results/cli_profile.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        command = [sys.executable, "-m", "omtl", "learn", args.file, "--quiet"]
        subprocess.run(["perf", "record", "-F", "4000", "-o", str(data), *command], check=True, capture_output=True)
        report = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", "dso,sym"],
                                check=True, capture_output=True, text=True).stdout
    rows = []
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)", line)
        if m:
            rows.append((float(m[1]), m[2], m[3].strip()))
    totals = dict.fromkeys(GROUPS, 0.0)
    other = 0.0
    for share, dso, sym in rows:
        for group, keys in GROUPS.items():
            if any(k in sym or k in dso for k in keys):
                totals[group] += share
                break
        else:
            other += share
    lines = [
        "# Where `omtl learn FILE`'s CPU time goes",
        "",
        f"`perf record -F 4000` of `omtl learn {Path(args.file).name} --quiet` (the whole process, every thread), "
        "symbols grouped by `python benches/profile_cli.py`. Shares of all CPU samples:",
        "",
        "| part of the run | share |",
        "|---|---:|",
        *[f"| {group} | {share:.1f} % |" for group, share in totals.items()],
        f"| other | {other:.1f} % |",
        "",
        "The hottest symbols:",
        "",
        "| share | object | symbol |",
        "|---:|---|---|",
        *[f"| {share:.2f} % | {dso} | `{sym[:110]}` |" for share, dso, sym in rows[:15]],
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} cores (shared); "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
