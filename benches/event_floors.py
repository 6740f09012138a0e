"""Where the time of one ``learn_one`` goes: the floor of a Python -> Rust per-event call on this
machine, layer by layer, on the dense stream of ``compare_events.py`` (20 features, 50 integer
task ids, NumPy rows; labels and task ids as NumPy integers, as a loop over arrays yields them).

Each layer is timed over the whole stream, best of ``--repeat`` runs, per event:

- a Python loop alone and a no-op Python function with the same arguments;
- a no-op native function with ``learn_event``'s arguments (the PyO3 call floor);
- a native function summing a NumPy row (the call floor plus reading the row);
- a native function taking the model's lock as ``learn_event`` does (its ``__dict__``, the
  lock's ``acquire`` and ``release``);
- ``decision_event`` / ``learn_event`` called directly, then through ``decision_one`` /
  ``learn_one`` (the Python method);
- the engine's own cost per row: ``learn`` and ``decision_function`` in one call over the stream.

    python benches/event_floors.py [--n 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import omtl  # noqa: E402
from omtl._native import _testing, decision_event, learn_event  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    s = omtl.datasets.make_multitask_stream(n_samples=args.n, n_tasks=50, n_features=20, seed=0)
    X, y, tasks = s.X, s.y.astype(np.int64), s.tasks.astype(np.int64)
    events = list(zip(list(X), list(y), list(tasks)))
    n = len(events)

    def per_event(run) -> float:
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - start)
        return best / n * 1e6

    model = omtl.MTLinear()
    model.learn(X[:200], y[:200], tasks=tasks[:200])

    def noop(x, y, task=None):
        return 0.0

    call, row, locked = _testing.event_floor_call, _testing.event_floor_row, _testing.event_floor_locked
    learn_one, decision_one = model.learn_one, model.decision_one
    layers = {
        "Python loop alone": lambda: [None for x, yy, t in events],
        "no-op Python function, same arguments": lambda: [noop(x, yy, task=t) for x, yy, t in events],
        "no-op native function, same arguments": lambda: [call(model, x, yy, t) for x, yy, t in events],
        "native function summing the NumPy row": lambda: [row(x) for x, yy, t in events],
        "native function taking the model's lock": lambda: [locked(model, x, yy, t) for x, yy, t in events],
        "decision_event (native, direct)": lambda: [decision_event(model, x, t) for x, yy, t in events],
        "decision_one (Python method)": lambda: [decision_one(x, task=t) for x, yy, t in events],
        "learn_event (native, direct)": lambda: [learn_event(model, x, yy, t) for x, yy, t in events],
        "learn_one (Python method)": lambda: [learn_one(x, yy, task=t) for x, yy, t in events],
    }
    results = {name: per_event(run) for name, run in layers.items()}
    fresh = omtl.MTLinear()
    results["engine: learn, one call over the stream (per row)"] = per_event(lambda: fresh.learn(X, y, tasks=tasks))
    results["engine: decision_function, one call (per row)"] = per_event(
        lambda: fresh.decision_function(X, tasks=tasks)
    )
    print(f"load average {os.getloadavg()[0]:.2f}, {n} events, best of {args.repeat}")
    print("| layer | µs per event |\n|---|---:|")
    for name, us in results.items():
        print(f"| {name} | {us:.3f} |")


if __name__ == "__main__":
    main()
