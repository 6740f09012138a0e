"""Scale-out on Dask: 1 worker against 2 workers on this machine, and the router's overhead.

1. The ``--quick`` experiment grid, as one command (``omtl reproduce table1 table2 --quick``: on
   Dask both tables run at once, sharing the cluster), on a LocalCluster of 1 and of 2 single-threaded worker processes
   started as ``omtl reproduce --jobs N`` starts it (``omtl.dask.cluster.local_cluster``, its Dask settings; started beforehand,
   its start-up timed apart), and in this process (``--jobs 1``) for reference.
2. A sharded stream of 200 disconnected task groups (5 tasks each, chained by edges; a multitask
   kernel Perceptron, rbf) learned in batches by a ``ShardedLearner`` with 1 shard on 1 worker
   and with 2 shards on 2 workers, and by one model in this process.
3. The router's overhead: a cheap learner (PA-Unique) in batches of several sizes, one shard on
   one worker against the same model in this process; the difference per batch is what routing,
   serialising and the round trip to the actor cost.

Every timing is the best of ``--repeat`` runs, contenders alternating in one process, so other
load on the machine hits them alike. Each grid run starts with no data set loaded anywhere (it
parses its data sets, as ``omtl reproduce`` does) and with every process's imports done. Output: a Markdown report on stdout (``--out`` also writes
it and a JSON file).

Usage: ``PYTHONPATH=python OMTL_DATA=... python benches/bench_dask.py [--repeat 2] [--out docs/results/dask]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np


def grouped_stream(n, n_groups=200, group_size=5, d=20, seed=0):
    rng = np.random.default_rng(seed)
    k = n_groups * group_size
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    tasks = rng.integers(0, k, size=n)
    W = np.repeat(rng.standard_normal((n_groups, d)), group_size, axis=0) + 0.5 * rng.standard_normal((k, d))
    y = np.where(np.einsum("ij,ij->i", X, W[tasks]) >= 0, 1, -1)
    return X, y, tasks, k


def group_graph(n_groups=200, group_size=5):
    import omtl

    edges = [(g * group_size + i, g * group_size + i + 1) for g in range(n_groups) for i in range(group_size - 1)]
    return omtl.TaskGraph.from_edges(n_groups * group_size, edges)


def best_of(repeat, fn):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), times


def quick_grid(out, common):
    """``omtl reproduce table1 table2 --quick``: one command, so on Dask both tables' passes share
    the cluster (in process, one table after the other)."""
    from omtl.experiments.together import run_experiments

    run_experiments({table: {"out": Path(out), "quick": True, **common} for table in ("table1", "table2")})


def school_grid(out, common):
    """``omtl reproduce table1 --datasets school --seeds 2``: full data, where the passes dominate."""
    from omtl.experiments import run_table1

    run_table1(out=Path(out) / "t1", datasets=["school"], seeds=2, **common)


def _forget_loaded_streams():
    from omtl.experiments import runner

    runner.STATE.stream_cache.clear()


def bench_grid(clients, repeat, data_dir, run_grid=quick_grid):
    """Wall time of ``run_grid`` per contender, best of ``repeat`` (contenders alternating), and
    the work of the best runs on Dask (from the task stream).

    Every timed run starts from the same state, that of ``omtl reproduce`` in a fresh process but
    with the modules imported: no data set loaded, neither here nor on any worker (each run parses
    its data sets), and every process has imported what the grid uses (an untimed first run per
    contender), so no contender's run is the one paying for the imports."""
    from omtl.experiments.runner import run_on_dask

    def grid(client, n_workers):
        _forget_loaded_streams()
        if client is not None:
            client.run(_forget_loaded_streams)
        with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):  # the tables' log
            common = {"data_dir": data_dir, "progress": False, "jobs": n_workers}
            cpu, t = time.process_time(), time.perf_counter()
            if client is None:
                run_grid(out, common)
                return time.perf_counter() - t, None
            from distributed import get_task_stream

            with get_task_stream(client=client) as stream, run_on_dask(client):
                run_grid(out, common)
            wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        return wall, work_of(stream.data, wall, cpu)

    for client, n in clients.values():  # imports everywhere (not timed)
        grid(client, n)
    rows, work = {}, {}
    for _ in range(repeat):  # alternate the contenders
        for name, (client, n) in clients.items():
            t, w = grid(client, n)
            if t < min(rows.get(name, [float("inf")])) and w is not None:
                work[name] = w
            rows.setdefault(name, []).append(t)
    return {name: min(ts) for name, ts in rows.items()}, rows, work


def work_of(task_stream, wall, client_cpu):
    """What a grid run on Dask did: seconds of task compute in all (and per kind of task), busy
    seconds per worker, and the CPU seconds of this process (the driver, and the LocalCluster's
    scheduler, which runs in it)."""
    per_kind, per_worker = {}, {}
    for task in task_stream:
        for ss in task["startstops"]:
            if ss["action"] == "compute":
                seconds = ss["stop"] - ss["start"]
                kind = str(task["key"]).split("-")[0]
                per_kind[kind] = per_kind.get(kind, 0.0) + seconds
                per_worker[task["worker"]] = per_worker.get(task["worker"], 0.0) + seconds
    return {"wall_s": wall, "task_s": sum(per_kind.values()), "task_s_per_kind": per_kind,
            "busy_s_per_worker": sorted(per_worker.values(), reverse=True), "driver_cpu_s": client_cpu}


def bench_sharded(clients, repeat, n, batch):
    import omtl
    from omtl.dask import ShardedLearner

    X, y, tasks, k = grouped_stream(n, d=50)
    graph = group_graph()
    proto = omtl.MTPerceptron(n_tasks=k, kernel="rbf", gamma=0.5)

    def in_process():
        model = omtl.MTPerceptron(n_tasks=k, graph=graph, kernel="rbf", gamma=0.5)
        for lo in range(0, n, batch):
            model.partial_fit(X[lo:lo + batch], y[lo:lo + batch], tasks=tasks[lo:lo + batch])
        return model.n_mistakes_

    def sharded(client, n_shards):
        with ShardedLearner(proto, graph, n_shards=n_shards, client=client) as model:
            model.partial_fit(X[:1], y[:1], tasks=tasks[:1])  # actors started (not timed below)
            t = time.perf_counter()
            for lo in range(1, n, batch):
                model.partial_fit(X[lo:lo + batch], y[lo:lo + batch], tasks=tasks[lo:lo + batch])
            model.shard_stats()  # waits for every shard
            return time.perf_counter() - t

    times = {}
    for _ in range(repeat):
        times.setdefault("in process (one model)", []).append(best_of(1, in_process)[0])
        for name, (client, n_workers) in clients.items():
            if client is not None:
                times.setdefault(f"{name}, {n_workers} shard(s)", []).append(sharded(client, n_workers))
    return {name: min(ts) for name, ts in times.items()}, times, {"n": n, "batch": batch, "n_tasks": k, "groups": 200}


def bench_router(client, repeat, n, batches):
    import omtl
    from omtl.dask import ShardedLearner

    X, y, tasks, k = grouped_stream(n, d=20, seed=1)
    graph = group_graph()
    out = []
    for batch in batches:
        def in_process(batch=batch):
            model = omtl.PAUnique(n_tasks=k)
            for lo in range(0, n, batch):
                model.partial_fit(X[lo:lo + batch], y[lo:lo + batch], tasks=tasks[lo:lo + batch])

        def routed(batch=batch):
            with ShardedLearner(omtl.PAUnique(n_tasks=k), graph, n_shards=1, client=client) as model:
                model.partial_fit(X[:1], y[:1], tasks=tasks[:1])
                t = time.perf_counter()
                for lo in range(0, n, batch):
                    model.partial_fit(X[lo:lo + batch], y[lo:lo + batch], tasks=tasks[lo:lo + batch])
                return time.perf_counter() - t

        t_in = min(best_of(1, in_process)[0] for _ in range(repeat))
        t_routed = min(routed() for _ in range(repeat))
        n_batches = -(-n // batch)
        out.append({"batch": batch, "batches": n_batches, "in_process_rows_per_s": n / t_in,
                    "routed_rows_per_s": n / t_routed, "overhead_ms_per_batch": 1e3 * (t_routed - t_in) / n_batches})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the sharded stream")
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--skip-grid", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from distributed import Client

    from omtl.dask.cluster import local_cluster

    logging.getLogger("distributed").setLevel(logging.WARNING)

    data_dir = os.environ.get("OMTL_DATA")
    clusters, clients, startup = {}, {"in process (--jobs 1)": (None, 1)}, {}
    for w in (1, 2):
        t = time.perf_counter()
        # the cluster `omtl reproduce --jobs w` starts (omtl.dask.cluster.local_cluster: its Dask settings)
        clusters[w] = local_cluster(w, silence_logs=logging.WARNING)
        client = Client(clusters[w], set_as_default=False)
        client.wait_for_workers(w)
        startup[w] = time.perf_counter() - t
        clients[f"LocalCluster {w} worker(s)"] = (client, w)
    try:
        report = {"machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                              "loadavg_at_start": os.getloadavg()}, "cluster_startup_s": startup}
        if not args.skip_grid:
            report["grid_s"], report["grid_runs_s"], report["grid_work"] = bench_grid(clients, args.repeat, data_dir)
            report["school_grid_s"], report["school_grid_runs_s"], report["school_grid_work"] = bench_grid(
                clients, args.repeat, data_dir, school_grid)
        dask_clients = {k: v for k, v in clients.items() if v[0] is not None}
        report["sharded_s"], report["sharded_runs_s"], report["sharded_setup"] = bench_sharded(
            dask_clients, args.repeat, args.rows, args.batch)
        report["router"] = bench_router(clients["LocalCluster 1 worker(s)"][0], args.repeat, 20_000, [100, 1_000, 10_000])
        report["machine"]["loadavg_at_end"] = os.getloadavg()
    finally:
        for client, _ in clients.values():
            if client is not None:
                client.close()
        for cluster in clusters.values():
            cluster.close()
    text = render(report)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_dask.md").write_text(text)
        (out / "bench_dask.json").write_text(json.dumps(report, indent=2) + "\n")


def render(r):
    lines = ["# omtl.dask bench (benches/bench_dask.py)", "",
             f"Machine: {r['machine']['cpu_count']} cores, {r['machine']['platform']}; load average "
             f"{r['machine']['loadavg_at_start'][0]:.1f} at start, {r['machine']['loadavg_at_end'][0]:.1f} at end "
             "(the machine is shared). Best of the repeats; contenders alternate.", "",
             f"LocalCluster start-up: {r['cluster_startup_s'][1]:.1f} s (1 worker), {r['cluster_startup_s'][2]:.1f} s "
             "(2 workers), not included below.", ""]
    for key, title in (("grid_s", "`--quick` grid (`omtl reproduce table1 table2 --quick`, one command)"),
                       ("school_grid_s", "table1 on the full School data, 2 shuffles (`--datasets school --seeds 2`)")):
        if key not in r:
            continue
        g = r[key]
        one, two = g["LocalCluster 1 worker(s)"], g["LocalCluster 2 worker(s)"]
        lines += [f"## {title}", "", "| runs on | seconds |", "|---|---:|"]
        lines += [f"| {name} | {t:.1f} |" for name, t in g.items()]
        lines += ["", f"**2 workers vs 1 worker: {one / two:.2f}x** (vs in process: {g['in process (--jobs 1)'] / two:.2f}x)", ""]
        work = r.get(key[:-len("_s")] + "_work", {})
        if work:
            lines += ["Work of the best runs on Dask (task stream): task compute in all and by kind, busy time per "
                      "worker, CPU of the driver process (which also runs the LocalCluster's scheduler).", "",
                      "| runs on | wall s | task s | by kind | busy s per worker | driver CPU s |",
                      "|---|---:|---:|---|---|---:|"]
            for name, w in work.items():
                kinds = ", ".join(f"{k} {v:.2f}" for k, v in sorted(w["task_s_per_kind"].items(), key=lambda kv: -kv[1]))
                busy = " / ".join(f"{b:.2f}" for b in w["busy_s_per_worker"])
                lines.append(f"| {name} | {w['wall_s']:.2f} | {w['task_s']:.2f} | {kinds} | {busy} | "
                             f"{w['driver_cpu_s']:.2f} |")
            lines.append("")
    s, setup = r["sharded_s"], r["sharded_setup"]
    one, two = s["LocalCluster 1 worker(s), 1 shard(s)"], s["LocalCluster 2 worker(s), 2 shard(s)"]
    lines += [f"## Sharded stream: {setup['groups']} disconnected task groups ({setup['n_tasks']} tasks), "
              f"{setup['n']:,} rows in batches of {setup['batch']:,}, MTPerceptron (rbf)", "",
              "| runs on | seconds | rows/s |", "|---|---:|---:|"]
    lines += [f"| {name} | {t:.2f} | {setup['n'] / t:,.0f} |" for name, t in s.items()]
    lines += ["", f"**2 workers (2 shards) vs 1 worker (1 shard): {one / two:.2f}x**", "",
              "## Router overhead (PA-Unique, one shard on one worker vs the same model in process)", "",
              "| batch rows | in process rows/s | routed rows/s | overhead per batch (ms) |", "|---:|---:|---:|---:|"]
    lines += [f"| {x['batch']:,} | {x['in_process_rows_per_s']:,.0f} | {x['routed_rows_per_s']:,.0f} | "
              f"{x['overhead_ms_per_batch']:.2f} |" for x in r["router"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
