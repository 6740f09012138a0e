"""``omtl serve`` side by side with what a user writes today, in one run, with the same client
and payloads: the in-process engine (no HTTP), a Starlette service on uvicorn calling the same
model's ``decision_function``/``learn`` (no durability), and VW's daemon where it runs. Writes
docs/results/serve.md.

Throughput and latency of predict and learn at batch sizes 1, 10, 100 over 1, 4 and 16
keep-alive connections (wrk drives the HTTP services; a thread per connection with keep-alive
sockets drives VW's line protocol). Learn runs with the default durability (acknowledged =
fsynced) and with a relaxed fsync interval. Group commit: single-event learns over 16
connections against sequential write+fsync of one record in the same state directory. The
kill test (kill -9 at random moments under a 4-client learn load) and 1,000 hostile requests
of more than 20 kinds.

Needs wrk (Debian: apt-get install wrk), and for the anchors ``pip install starlette uvicorn
vowpalwabbit`` (bench only; not dependencies of omtl).

    python benches/compare_serve.py [--quick] [--duration 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

import omtl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from serve_support import ServerProcess, hostile_run, kill_test  # noqa: E402

D, USERS = 20, 50
BATCHES = (1, 10, 100)
CONNECTIONS = (1, 4, 16)

WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open(os.getenv("OMTL_BENCH_BODY"), "rb")
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('RESULT {"requests": %d, "duration_us": %d, "errors": %d, "non2xx": %d, ' ..
    '"p50_us": %d, "p99_us": %d, "mean_us": %f}\\n', summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout, e.status, latency:percentile(50), latency:percentile(99), latency.mean))
end
"""

STARLETTE_APP = '''
import numpy as np
import omtl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

model = omtl.MTLinear()

def rows(events):
    X = np.array([e["features"] for e in events], dtype=np.float64)
    tasks = [e["task"] for e in events]
    return X, tasks

async def predict(request: Request):
    events = (await request.json())["events"]
    X, tasks = rows(events)
    scores = model.decision_function(X, tasks=tasks)
    labels = np.where(scores >= 0, 1, -1)
    return JSONResponse({"predictions": [{"label": int(l), "score": float(s)} for l, s in zip(labels, scores)]})

async def learn(request: Request):
    events = (await request.json())["events"]
    X, tasks = rows(events)
    y = np.array([e["label"] for e in events])
    predictions = model.learn(X, y, tasks=tasks)
    return JSONResponse({"predictions": [{"label": int(p)} for p in predictions], "n_seen": int(model.n_seen_)})

app = Starlette(routes=[Route("/v1/predict", predict, methods=["POST"]), Route("/v1/learn", learn, methods=["POST"])])
'''


def stream(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    w = rng.normal(size=D)
    y = np.where(X @ w > 0, 1, -1)
    tasks = [f"user{t}" for t in rng.integers(0, USERS, size=n)]
    return X, y, tasks


def payload(kind, batch, seed):
    X, y, tasks = stream(batch, seed)
    events = []
    for x, label, t in zip(X, y, tasks):
        event = {"task": t, "features": [round(v, 6) for v in x.tolist()]}
        if kind == "learn":
            event["label"] = int(label)
        events.append(event)
    return json.dumps({"events": events})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


def wrk(url, body_file, connections, duration, script):
    threads = min(connections, 2)
    command = ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{max(1, round(duration))}s", "--timeout", "10s",
               "-s", str(script), url]
    out = subprocess.run(command, capture_output=True, text=True, timeout=duration + 60,
                         env={**os.environ, "OMTL_BENCH_BODY": str(body_file)})
    line = next((text for text in out.stdout.splitlines() if text.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk: {out.stdout} {out.stderr}")
    return json.loads(line[len("RESULT "):])


def measure(name, url, kind, batch, c, body, duration, script):
    r = wrk(f"{url}/v1/{kind}", body, c, duration, script)
    seconds = r["duration_us"] / 1e6
    ok = r["requests"] - r["non2xx"]
    return {"side": name, "kind": kind, "batch": batch, "connections": c, "events_per_s": ok * batch / seconds,
            "requests_per_s": ok / seconds, "p50_ms": r["p50_us"] / 1e3, "p99_ms": r["p99_us"] / 1e3,
            "errors": r["errors"] + r["non2xx"]}


def interleaved(services, bodies, duration, script, repeats):
    """Every cell on every service in turn, ``repeats`` rounds; the best round per service and
    cell (the machine is shared: a side measured while something else ran would lose)."""
    rows = []
    for kind in ("predict", "learn"):
        for batch in BATCHES:
            for c in CONNECTIONS:
                best = {}
                for _ in range(repeats):
                    for name, (url, kinds) in services.items():
                        if kind in kinds:
                            r = measure(name, url, kind, batch, c, bodies[kind, batch], duration, script)
                            if name not in best or r["events_per_s"] > best[name]["events_per_s"]:
                                best[name] = r
                for r in best.values():
                    print(f"  {r['side']:24s} {kind:7s} batch {batch:3d} x{c:2d}: {r['events_per_s']:12,.0f} events/s  "
                          f"p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms  errors {r['errors']}", flush=True)
                rows += best.values()
    return rows


def in_process(duration):
    """The engine in this process, no HTTP: decision_function / learn per batch."""
    rows = []
    for kind in ("predict", "learn"):
        for batch in BATCHES:
            model = omtl.MTLinear()
            X, y, tasks = stream(20_000, 1)
            model.learn(X[:200], y[:200], tasks=tasks[:200])
            n, latencies, start = 0, [], time.perf_counter()
            i = 0
            while time.perf_counter() - start < duration / 2:
                j = (i * batch) % (20_000 - batch)
                t0 = time.perf_counter()
                if kind == "predict":
                    model.decision_function(X[j:j + batch], tasks=tasks[j:j + batch])
                else:
                    model.learn(X[j:j + batch], y[j:j + batch], tasks=tasks[j:j + batch])
                latencies.append(time.perf_counter() - t0)
                n += batch
                i += 1
            seconds = time.perf_counter() - start
            lat = np.array(latencies) * 1e3
            rows.append({"side": "in-process engine", "kind": kind, "batch": batch, "connections": 1,
                         "events_per_s": n / seconds, "requests_per_s": i / seconds,
                         "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)), "errors": 0})
            print(f"  in-process             {kind:7s} batch {batch:3d}    : {rows[-1]['events_per_s']:12,.0f} events/s", flush=True)
    return rows


def vw_lines(kind, batch, seed):
    X, y, tasks = stream(batch, seed)
    lines = []
    for x, label, t in zip(X, y, tasks):
        features = " ".join(f"f{j}:{v:.6f}" for j, v in enumerate(x))
        head = f"{int(label)} " if kind == "learn" else ""
        lines.append(f"{head}|t {t} |s {features}")
    return ("\n".join(lines) + "\n").encode()


def vw_connection(port, data, batch, stop, latencies, counts, errors, k):
    """One VW client: sends ``data`` (``batch`` lines) and reads one answer line per example, on
    one keep-alive socket, until ``stop``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                s.sendall(data)
                got = 0
                while got < batch:
                    chunk = s.recv(1 << 16)
                    if not chunk:
                        raise ConnectionError("closed")
                    got += chunk.count(b"\n")
                latencies[k].append(time.perf_counter() - t0)
                counts[k] += batch
    except OSError:
        errors[k] += 1


def vw_answers(port, timeout=5.0) -> bool:
    """Whether VW's daemon answers one example on a fresh connection."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"1 |t alice |s a:1 b:2\n")
            return s.recv(1000).count(b"\n") >= 1
    except OSError:
        return False


def vw_cells(port, duration, kinds, note):
    """VW's daemon: a thread per connection (``vw_connection``)."""
    rows = []
    if not vw_answers(port):
        import vowpalwabbit

        version = getattr(vowpalwabbit, "__version__", "?")
        note.append(f"VW daemon (pip vowpalwabbit {version}, `python -m vowpalwabbit --daemon --foreground`): accepts a "
                    "connection and closes it without answering (its log shows 0 examples read), so it has no numbers "
                    "here; VW documents about 50,000 predictions per second for its daemon on ~20-feature examples.")
        return rows
    for kind in kinds:
        for batch in BATCHES:
            data = vw_lines(kind, batch, 2)
            for c in CONNECTIONS:
                counts, latencies, errors = [0] * c, [[] for _ in range(c)], [0] * c
                stop = time.monotonic() + duration
                threads = [threading.Thread(target=vw_connection, args=(port, data, batch, stop, latencies, counts, errors, k))
                           for k in range(c)]
                start = time.perf_counter()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(duration + 30)
                seconds = time.perf_counter() - start
                lat = np.array([x for per in latencies for x in per] or [float("nan")]) * 1e3
                rows.append({"side": "VW daemon", "kind": kind, "batch": batch, "connections": c,
                             "events_per_s": sum(counts) / seconds,
                             "requests_per_s": sum(len(per) for per in latencies) / seconds,
                             "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
                             "errors": sum(errors)})
                print(f"  VW daemon              {kind:7s} batch {batch:3d} x{c:2d}: {rows[-1]['events_per_s']:12,.0f} events/s "
                      f"errors {sum(errors)}", flush=True)
                if sum(counts) == 0:
                    note.append(f"VW daemon: no answer on {kind} batch {batch} x{c} (connections closed)")
    return rows


def sequential_fsync_rate(directory, n=200):
    """Appends a 200-byte record and fsyncs, n times, in ``directory``: records per second."""
    path = Path(directory) / "fsync-probe.log"
    record = b"x" * 200
    with open(path, "ab") as f:
        start = time.perf_counter()
        for _ in range(n):
            f.write(record)
            f.flush()
            os.fsync(f.fileno())
        seconds = time.perf_counter() - start
    path.unlink()
    return n / seconds


def table(rows, kind, sides):
    head = "| side | batch | " + " | ".join(f"{c} conn. events/s (p50 / p99 ms)" for c in CONNECTIONS) + " |"
    out = [head, "|---|---:|" + "---:|" * len(CONNECTIONS)]
    for side in sides:
        for batch in BATCHES:
            cells = []
            for c in CONNECTIONS:
                r = next((r for r in rows if r["side"] == side and r["kind"] == kind and r["batch"] == batch
                          and r["connections"] == c), None)
                if r is None and side == "in-process engine" and c == 1:
                    r = next((r for r in rows if r["side"] == side and r["kind"] == kind and r["batch"] == batch), None)
                cells.append("" if r is None else f"{r['events_per_s']:,.0f} ({r['p50_ms']:.2f} / {r['p99_ms']:.2f})"
                             + (f" [{r['errors']} err]" if r["errors"] else ""))
            if any(cells):
                out.append(f"| {side} | {batch} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def cell(rows, side, kind, batch, c):
    r = next((r for r in rows if r["side"] == side and r["kind"] == kind and r["batch"] == batch and r["connections"] == c), None)
    return float("nan") if r is None else r["events_per_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per cell")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2, help="rounds per cell (the best is kept)")
    parser.add_argument("--quick", action="store_true", help="1 s cells, 3 kills, 200 hostile requests")
    parser.add_argument("--out", default=str(ROOT / "docs" / "results" / "serve.md"))
    args = parser.parse_args()
    if args.quick:
        args.duration, args.kills, args.repeats = 1.0, 3, 1
    if shutil.which("wrk") is None:
        sys.exit("compare_serve: needs wrk (apt-get install wrk)")
    root = Path(tempfile.mkdtemp(prefix="omtl-serve-bench-"))
    notes: list[str] = []
    rows = []
    try:
        script = root / "post.lua"
        script.write_text(WRK_SCRIPT)
        bodies = {}
        for kind in ("predict", "learn"):
            for batch in BATCHES:
                path = root / f"{kind}-{batch}.json"
                path.write_text(payload(kind, batch, seed=2))
                bodies[kind, batch] = path
        warm = root / "warm.json"
        warm.write_text(payload("learn", 200, seed=3))

        print("in-process engine", flush=True)
        rounds = [in_process(args.duration) for _ in range(args.repeats)]
        rows += [max(cells, key=lambda r: r["events_per_s"]) for cells in zip(*rounds)]

        print("HTTP services, interleaved cell by cell", flush=True)
        app_dir = root / "app"
        app_dir.mkdir()
        (app_dir / "starlette_app.py").write_text(STARLETTE_APP)
        port = free_port()
        uvicorn = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "starlette_app:app", "--port", str(port), "--log-level", "warning",
             "--no-access-log"], cwd=app_dir, stderr=subprocess.DEVNULL)
        durable = ServerProcess(root / "state-durable", "--learner", "MTLinear")
        relaxed = ServerProcess(root / "state-relaxed", "--learner", "MTLinear", "--fsync-interval", "0.05")
        try:
            wait_listening(port)
            services = {
                "omtl serve": (durable.url, ("predict", "learn")),
                "omtl serve, fsync 50 ms": (relaxed.url, ("learn",)),
                "Starlette + uvicorn": (f"http://127.0.0.1:{port}", ("predict", "learn")),
            }
            for url, _ in services.values():
                wrk(f"{url}/v1/learn", warm, 1, 1, script)
            rows += interleaved(services, bodies, args.duration, script, args.repeats)
            fsync_rate = max(sequential_fsync_rate(durable.state_dir) for _ in range(3))
            for server in (durable, relaxed):
                server.stop()
        finally:
            uvicorn.terminate()
            uvicorn.wait(timeout=30)
            durable.kill()
            relaxed.kill()

        print("VW daemon", flush=True)
        try:
            import vowpalwabbit  # noqa: F401

            port = free_port()
            process = subprocess.Popen(
                [sys.executable, "-m", "vowpalwabbit", "--daemon", "--foreground", "--port", str(port), "--quiet",
                 "--loss_function", "logistic", "-q", "ts", "--num_children", "1"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_listening(port, timeout=30)
                rows += vw_cells(port, args.duration, ("predict", "learn"), notes)
            except TimeoutError:
                notes.append("VW daemon: did not listen (python -m vowpalwabbit --daemon --foreground)")
            finally:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        except ImportError:
            notes.append("vowpalwabbit not installed: pip install vowpalwabbit")

        print(f"kill test: {args.kills} kills", flush=True)
        kills = kill_test(root, n_kills=args.kills, n_clients=4)
        print(f"  {kills}", flush=True)
        print("hostile requests", flush=True)
        hostile_result = hostile_run(root, total=200 if args.quick else 1000)
        print(f"  {hostile_result}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    ours = cell(rows, "omtl serve", "predict", 100, 4)
    theirs = cell(rows, "Starlette + uvicorn", "predict", 100, 4)
    learn16 = cell(rows, "omtl serve", "learn", 100, 16)
    relaxed16 = cell(rows, "omtl serve, fsync 50 ms", "learn", 100, 16)
    starlette16 = cell(rows, "Starlette + uvicorn", "learn", 100, 16)
    single16 = cell(rows, "omtl serve", "learn", 1, 16)
    ip_predict = cell(rows, "in-process engine", "predict", 100, 1)
    ip_learn = cell(rows, "in-process engine", "learn", 100, 1)
    targets = [
        ("predict, batches of 100 over 4 connections, vs Starlette", ours / theirs, 10),
        ("learn (fsynced), batches of 100 over 16 connections, vs Starlette", learn16 / starlette16, 3),
        ("learn (fsync every 50 ms), batches of 100 over 16 connections, vs Starlette", relaxed16 / starlette16, 10),
        ("group commit: single-event learns over 16 connections vs sequential write+fsync", single16 / fsync_rate, 8),
    ]
    sides = ["in-process engine", "omtl serve", "omtl serve, fsync 50 ms", "Starlette + uvicorn", "VW daemon"]
    lines = [
        "# `omtl serve`: throughput and latency",
        "",
        "Written by `benches/compare_serve.py`"
        + (" --quick" if args.quick else "") + f" ({time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"{os.cpu_count()} cores, shared with other work: ratios within one run are what to read). "
        f"Events: {D} dense features, {USERS} users (str task ids), MTLinear with its defaults on every side. "
        f"wrk drives the HTTP services over keep-alive connections ({args.duration:g} s per cell; the services are "
        f"measured in turn, cell by cell, {args.repeats} rounds, the best round kept); "
        "a thread per connection drives VW's line protocol. Events/s counts events in 2xx answers; "
        "latency is per request (a batch).",
        "",
        "## Targets",
        "",
        "| target | ratio | goal | met |",
        "|---|---:|---:|---|",
        *[f"| {name} | {ratio:.1f}x | {goal}x | {'yes' if ratio >= goal else 'no'} |" for name, ratio, goal in targets],
        "",
        f"Sequential write+fsync of a 200-byte record in the same state directory: {fsync_rate:,.0f} records/s "
        f"({1e3 / fsync_rate:.2f} ms per fsync).",
        "",
        f"Floors: the engine in process (no HTTP, no JSON; one thread) scores {ip_predict:,.0f} events/s in "
        f"batches of 100 and learns {ip_learn:,.0f}. The Starlette service reaches {theirs / ip_predict:.0%} of the "
        f"first over 4 connections and {starlette16 / ip_learn:.0%} of the second over 16: ten times its predict "
        f"rate would be {10 * theirs / ip_predict:.1f}x the engine's own scoring rate, three times its learn rate "
        f"{3 * starlette16 / ip_learn:.1f}x the engine's learning rate and ten times {10 * starlette16 / ip_learn:.1f}x "
        "(a server learns on one thread, in log order). `omtl serve` reaches "
        f"{ours / ip_predict:.0%} of the engine's scoring rate and {relaxed16 / ip_learn:.0%} (fsync every 50 ms) and "
        f"{learn16 / ip_learn:.0%} (fsync before every answer) of its learning rate.",
        "",
        "## Predict",
        "",
        table(rows, "predict", sides),
        "",
        "## Learn",
        "",
        "`omtl serve` answers a learn once its log record is flushed to disk (fsync); with `--fsync-interval 0.05` "
        "once it is written (a power cut loses at most 50 ms). The Starlette service and VW's daemon make nothing "
        "durable.",
        "",
        table(rows, "learn", sides),
        "",
        "## Kill -9 under load",
        "",
        f"{kills['kills']} kills at random moments (0.3 to 1.5 s apart) under a 4-client learn load (batches of 5): "
        f"{kills['restarts']} restarts, {kills['failed_restarts']} failed, {kills['lost']} acknowledged events lost, "
        f"{kills['identical']} restarted models bit-identical to an in-process replay of the logged requests; "
        f"{kills['acked']} requests acknowledged in all.",
        "",
        "## Hostile requests",
        "",
        f"{hostile_result['requests']} requests of {hostile_result['kinds']} kinds (bad JSON, wrong types, NaN and "
        "infinity, huge bodies, deep nesting, too many events or features, unknown task of a closed model, unknown "
        "id, bad token, ...): "
        f"{hostile_result['refused_4xx']} answered with the expected 4xx and a JSON error; server alive: {hostile_result['alive']}; "
        f"model unchanged: {hostile_result['unchanged']}; exit code on SIGTERM: {hostile_result['exit_code']}.",
    ]
    if notes:
        lines += ["", "## Notes", "", *[f"- {n}" for n in notes]]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
