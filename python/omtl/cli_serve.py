"""``omtl serve``: one model as a durable HTTP/JSON service (``omtl.serve``; docs/serving.md)."""

from __future__ import annotations

import sys


def add_commands(sub) -> None:
    """Adds ``omtl serve`` to the command line's subcommands."""
    p = sub.add_parser(
        "serve",
        help="serve one model over HTTP/JSON, durably (write-ahead log, snapshots; docs/serving.md)",
        description="Serve one model: /v1/predict, /v1/learn, /v1/label, /v1/model, /v1/snapshot, /healthz, "
        "/metrics. Every acknowledged learn is flushed to the log in --state-dir first; a restart replays it.",
    )
    p.add_argument("--state-dir", required=True, metavar="DIR", help="snapshot and write-ahead log (created if missing)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--model", metavar="FILE", help="the model file to start from when DIR holds none")
    start.add_argument("--learner", metavar="NAME", help="the learner to start from when DIR holds none (e.g. MTLinear)")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="a hyper-parameter of --learner (repeatable)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080; 0: any free port)")
    p.add_argument("--vw-port", type=int, default=None, help="also speak VW's daemon line protocol on this port")
    p.add_argument("--token-file", metavar="F", help="require Authorization: Bearer <the token in F>")
    p.add_argument("--fsync-interval", type=float, default=None, metavar="SECONDS",
                   help="acknowledge once written and flush every SECONDS (a power cut loses at most that); "
                   "default: flush before every acknowledgment")
    p.add_argument("--snapshot-every", type=int, default=100_000, metavar="N", help="snapshot every N events (default 100000)")
    p.add_argument("--snapshot-interval", type=float, default=60.0, metavar="SECONDS",
                   help="snapshot SECONDS after the last one if anything changed (default 60)")
    p.add_argument("--max-body-bytes", type=int, default=16 << 20, help="largest request body (default 16 MiB)")
    p.add_argument("--max-events", type=int, default=10_000, help="most events per request (default 10000)")
    p.add_argument("--max-features", type=int, default=100_000, help="most features per event (default 100000)")
    p.add_argument("--threads", type=int, default=2, help="threads answering requests (default 2)")
    p.set_defaults(func=run_serve)


def run_serve(args) -> int:
    from .serve import serve

    if args.param and args.learner is None:
        print("omtl serve: --param needs --learner", file=sys.stderr)
        return 2
    try:
        serve(
            args.state_dir, args.model, learner=args.learner, params=args.param, host=args.host, port=args.port,
            vw_port=args.vw_port, token_file=args.token_file, fsync_interval=args.fsync_interval,
            snapshot_every=args.snapshot_every, snapshot_interval=args.snapshot_interval,
            max_body_bytes=args.max_body_bytes, max_events=args.max_events, max_features=args.max_features,
            threads=args.threads,
        )
    except (OSError, ValueError) as exc:
        print(f"omtl serve: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: the server has drained and snapshotted
        pass
    return 0
