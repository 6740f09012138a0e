"""Coupled sharding on Dask: MTLinear's per-user filter sharded by user, its shared block kept in
step (docs/scale-out.md, "Coupled sharding").

1. **Target.** The ``per_user`` stream of ``benches/compare_many_users.py`` (``--users`` string
   users, 3 rows each, 2^18 columns, 30 word draws per row) in ``learn`` calls of 10,000 rows: one
   ``MTLinear(hash_bits=22)`` in this process, and a ``ShardedLearner`` of 2 shards per worker on a
   LocalCluster of 2 single-threaded workers (4 shards, ``hash_bits=22`` each) at several
   ``sync_every``. Progressive error, examples/s, the shards' time learning and syncing (reports
   and applies: the sync share), the driver's time combining, bytes moved, memory.
2. **Accuracy against shards and sync interval** at the scale this machine reaches:
   ``SimulatedShards`` (the same shards run one after the other in this process: the same model,
   bit for bit, as on a cluster) on the ``per_user`` stream with ``--grid-users`` users, shards
   1..16 x ``sync_every``, the weights' changes added (``mix="sum"``, the default) and averaged
   (``"mean"``).
3. **The cost of a sync** against the positions changed and the number of shards: replicas of
   the target's model, each after an interval of rows; CPU time of a shard's report and apply and
   of the driver's combine, and the bytes of the messages.

Output: a Markdown report on stdout; ``--out`` also writes it and a JSON file beside it.

Usage: ``python benches/bench_dask_coupled.py [--quick] [--out docs/results/dask_coupled.md]``
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_many_users import CHUNK, N_COLS, Stream  # noqa: E402

import omtl  # noqa: E402
from omtl import shared_state  # noqa: E402
from omtl.dask import ShardedLearner, SimulatedShards  # noqa: E402
from omtl.dask.cluster import local_cluster  # noqa: E402

HASH_BITS = 22


def chunks(stream: Stream):
    for start in range(0, len(stream), CHUNK):
        yield stream.chunk(start, min(start + CHUNK, len(stream)))


def run_single(stream: Stream) -> dict:
    model = omtl.MTLinear(hash_bits=HASH_BITS)
    errors, seconds = 0, 0.0
    for X, y, users in chunks(stream):
        t0 = time.perf_counter()
        pred = model.learn(X, y, tasks=users)
        seconds += time.perf_counter() - t0
        errors += int(np.sum(pred != y))
    return {"error": 100.0 * errors / len(stream), "seconds": seconds, "examples_per_s": len(stream) / seconds,
            "memory_bytes": int(model.memory_bytes_)}


def run_sharded(stream: Stream, model, sync_every: int, n_shards: int, client=None, mix="sum") -> dict:
    if client is None:
        sharded = SimulatedShards(model, n_shards=n_shards, sync_every=sync_every, mix=mix)
    else:
        sharded = ShardedLearner(model, n_shards=n_shards, sync_every=sync_every, client=client, mix=mix)
    try:
        errors, seconds = 0, 0.0
        for X, y, users in chunks(stream):
            t0 = time.perf_counter()
            pred = sharded.learn(X, y, tasks=users)
            seconds += time.perf_counter() - t0
            errors += int(np.sum(pred != y))
        stats = sharded.shard_stats()
        learn = sum(st["learn_seconds"] for st in stats)
        sync = sum(st["sync_seconds"] for st in stats)
        out = {"shards": n_shards, "sync_every": sync_every, "mix": mix, "error": 100.0 * errors / len(stream),
               "seconds": seconds, "examples_per_s": len(stream) / seconds, "syncs": sharded.n_syncs_,
               "shard_learn_s": learn, "shard_sync_s": sync, "sync_share": sync / (learn + sync),
               "combine_s": sharded.combine_seconds_, "sync_mb": sharded.sync_bytes_ / 1e6,
               "memory_bytes": [st["memory_bytes"] for st in stats], "users": [st["n_tasks"] for st in stats]}
        if client is not None:
            out["worker_rss_mb"] = sorted(client.run(_rss_mb).values())
        return out
    finally:
        sharded.close()


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 1e6


def sync_costs(stream: Stream, shard_counts, intervals) -> list[dict]:
    """Per shard count and interval: replicas that each learned ``interval`` rows of their own
    users (from the middle of the stream), then one report each, a combine, an apply each (CPU
    seconds, medians over the shards)."""
    out = []
    X, y, users = stream.chunk(len(stream) // 2, len(stream) // 2 + max(shard_counts) * max(intervals) * 2)
    # a message's bytes beyond its positions (layout, lengths): a report and an update of nothing
    blank = shared_state.empty_replica(omtl.MTLinear(hash_bits=HASH_BITS), N_COLS)
    head_report = len(shared_state.changes(blank))
    head_update = len(shared_state.combine([shared_state.changes(blank)]))
    per_position = 8 + 2 * 3 * 4  # the position, then two cells of 3 floats (base and now, base and new)
    for n_shards in shard_counts:
        shard = shared_state.shards_of(users, n_shards)
        for interval in intervals:
            replicas = [shared_state.empty_replica(omtl.MTLinear(hash_bits=HASH_BITS), N_COLS) for _ in range(n_shards)]
            for s, r in enumerate(replicas):
                rows = np.flatnonzero(shard == s)[:interval]
                r.learn(X[rows], y[rows], tasks=users[rows])
            reports, report_s = [], []
            for r in replicas:
                t0 = time.process_time()
                reports.append(shared_state.changes(r))
                report_s.append(time.process_time() - t0)
            t0 = time.process_time()
            update = shared_state.combine(reports)
            combine_s = time.process_time() - t0
            apply_s = []
            for r in replicas:
                t0 = time.process_time()
                shared_state.apply(r, update)
                apply_s.append(time.process_time() - t0)
            out.append({"shards": n_shards, "interval": interval,
                        "report_positions": int(np.median([(len(r) - head_report) // per_position for r in reports])),
                        "update_positions": (len(update) - head_update) // per_position,
                        "report_ms": 1e3 * float(np.median(report_s)), "combine_ms": 1e3 * combine_s,
                        "apply_ms": 1e3 * float(np.median(apply_s)),
                        "report_kb": float(np.median([len(r) for r in reports])) / 1e3, "update_kb": len(update) / 1e3})
            del replicas
    return out


def report(res: dict) -> str:
    lines = [
        "# Coupled sharding: MTLinear's per-user filter on Dask, the shared block kept in step",
        "",
        f"Generated by `benches/bench_dask_coupled.py` ({platform.machine()}, 2 logical CPUs shared with other jobs; "
        f"Python {platform.python_version()}). Stream: `per_user` of `benches/compare_many_users.py`, "
        f"{res['users']:,} string users, {3 * res['users']:,} rows in `learn` calls of {CHUNK:,}; "
        f"`MTLinear(hash_bits={HASH_BITS})` (per shard). Progressive error (each row predicted before it is learned).",
        "",
        "## 1. Two workers x two shards against one model",
        "",
        f"One model in this process: **{res['single']['error']:.2f} %** error, "
        f"{res['single']['examples_per_s']:,.0f} examples/s ({res['single']['seconds']:.1f} s).",
        "",
        "| sync_every | syncs | error % | vs one model (points) | examples/s | vs one model | sync share of the shards' time "
        "| driver's combine s | MB moved | worker RSS MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    single = res["single"]
    for r in res["cluster"]:
        lines.append(
            f"| {r['sync_every']:,} | {r['syncs']:,} | {r['error']:.2f} | {r['error'] - single['error']:+.2f} | "
            f"{r['examples_per_s']:,.0f} | {r['examples_per_s'] / single['examples_per_s']:.2f}x | "
            f"{100 * r['sync_share']:.0f} % | {r['combine_s']:.1f} | {r['sync_mb']:,.0f} | "
            f"{', '.join(f'{m:,.0f}' for m in r.get('worker_rss_mb', []))} |")
    lines += [
        "",
        "The sync share is the shards' time reporting and applying shared changes over their time learning and "
        "syncing; the driver combines the reports while the shards wait. Users per shard: "
        + ", ".join(f"{u:,}" for u in res["cluster"][0]["users"]) + ".",
        "",
        f"## 2. Accuracy against shards and sync interval ({res['grid_users']:,} users, in process)",
        "",
        f"`SimulatedShards` runs the shards of a cluster one after the other in this process (the same model, bit for "
        f"bit). One model: **{res['grid_single']['error']:.2f} %**. Error % (points against the one model):",
        "",
    ]
    intervals = sorted({r["sync_every"] for r in res["grid"]})
    for mix in ("sum", "mean"):
        rows = [r for r in res["grid"] if r["mix"] == mix]
        if not rows:
            continue
        lines += [f"Weights' changes {'added' if mix == 'sum' else 'averaged'} (`mix=\"{mix}\"`):", "",
                  "| shards | " + " | ".join(f"sync_every={i:,}" for i in intervals) + " |",
                  "|---:|" + "---:|" * len(intervals)]
        for n in sorted({r["shards"] for r in rows}):
            cells = []
            for i in intervals:
                r = next((r for r in rows if r["shards"] == n and r["sync_every"] == i), None)
                cells.append("" if r is None else f"{r['error']:.2f} ({r['error'] - res['grid_single']['error']:+.2f})")
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "## 3. The cost of one sync",
        "",
        "Replicas that each learned `interval` rows of their users; CPU milliseconds of one shard's report and apply "
        "(medians over the shards) and of the driver's combine; positions changed per report and in the update.",
        "",
        "| shards | interval (rows per shard) | positions per report | positions in the update | report ms | combine ms "
        "| apply ms | report kB | update kB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res["sync_costs"]:
        lines.append(f"| {r['shards']} | {r['interval']:,} | {r['report_positions']:,} | {r['update_positions']:,} | "
                     f"{r['report_ms']:.1f} | {r['combine_ms']:.1f} | {r['apply_ms']:.1f} | {r['report_kb']:,.0f} | "
                     f"{r['update_kb']:,.0f} |")
    lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--grid-users", type=int, default=100_000)
    parser.add_argument("--sync-every", type=int, nargs="+", default=[4096, 1024, 256])
    parser.add_argument("--grid-sync-every", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    parser.add_argument("--grid-shards", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--quick", action="store_true", help="10^4 users, a small grid (a smoke run)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.users, args.grid_users, args.sync_every = 10_000, 10_000, [4096, 256]
        args.grid_sync_every, args.grid_shards = [256, 4096], [2, 4]
    logging.getLogger("distributed").setLevel(logging.ERROR)
    res = {"users": args.users, "grid_users": args.grid_users}
    stream = Stream("per_user", args.users)
    res["single"] = run_single(stream)
    print("single", res["single"], flush=True)
    res["cluster"] = []
    from distributed import Client

    with local_cluster(2) as cluster, Client(cluster) as client:
        for every in args.sync_every:
            r = run_sharded(stream, omtl.MTLinear(hash_bits=HASH_BITS), every, 4, client=client)
            print("cluster", r, flush=True)
            res["cluster"].append(r)
    grid_stream = Stream("per_user", args.grid_users)
    res["grid_single"] = run_single(grid_stream)
    res["grid"] = []
    for mix, shard_counts in (("sum", args.grid_shards), ("mean", [4])):
        for n in shard_counts:
            for every in args.grid_sync_every:
                r = run_sharded(grid_stream, omtl.MTLinear(hash_bits=HASH_BITS), every, n, mix=mix)
                print("grid", {k: r[k] for k in ("shards", "sync_every", "mix", "error", "sync_share")}, flush=True)
                res["grid"].append({k: v for k, v in r.items() if k not in ("memory_bytes", "users")})
    res["sync_costs"] = sync_costs(grid_stream, [2, 4, 8, 16] if not args.quick else [2, 4], [256, 1024, 4096, 16384])
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    text = report(res)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
