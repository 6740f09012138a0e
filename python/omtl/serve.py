"""``omtl.serve``: one model as a durable HTTP/JSON service (the crate's server; docs/serving.md).

Every acknowledged learn, label and remembered prediction is written to a write-ahead log and
flushed to disk before the answer; snapshots (a model file) bound the log; a restart replays it.
"""

from __future__ import annotations

import os
from pathlib import Path


def _params_text(params) -> list[tuple[str, str]]:
    """``--param k=v`` pairs from a dict or from ``"k=v"`` strings."""
    if params is None:
        return []
    if isinstance(params, dict):
        return [(str(k), str(v)) for k, v in params.items()]
    pairs = []
    for item in params:
        name, sep, value = str(item).partition("=")
        if not sep or not name:
            raise ValueError(f"a parameter is name=value, got {item!r}")
        pairs.append((name, value))
    return pairs


def _model_bytes(model) -> bytes | None:
    """A model file's bytes: from a path, or from a native omtl estimator (``omtl.dumps``)."""
    if model is None:
        return None
    if isinstance(model, (str, os.PathLike)):
        return Path(model).read_bytes()
    from .persistence import dumps

    return dumps(model)


def serve(
    state_dir,
    model=None,
    *,
    learner: str | None = None,
    params=None,
    host: str = "127.0.0.1",
    port: int = 8080,
    vw_port: int | None = None,
    token_file=None,
    fsync_interval: float | None = None,
    snapshot_every: int = 100_000,
    snapshot_interval: float = 60.0,
    max_body_bytes: int = 16 << 20,
    max_events: int = 10_000,
    max_features: int = 100_000,
    threads: int = 2,
) -> None:
    """Serves one model over HTTP until SIGTERM or Ctrl-C (blocking; the GIL is released).

    On start the server loads the last snapshot in ``state_dir`` and replays the write-ahead log
    after it; a directory without a snapshot starts from ``model`` (or ``learner``). On SIGTERM
    or Ctrl-C it answers the requests in flight, writes a snapshot and returns. The listening
    address is printed to stderr. docs/serving.md describes the API and what a crash can lose.

    Parameters
    ----------
    state_dir : path
        The directory of the snapshot (``model.omtl``) and the log (created if missing; one
        server per directory).
    model : path or omtl estimator, optional
        The model to start from when ``state_dir`` holds none: a model file, or a native omtl
        estimator (fitted or not).
    learner : str, optional
        Instead of ``model``: a learner class name (``"MTLinear"``), built with ``params``.
    params : dict or list of "name=value", optional
        The learner's hyper-parameters, as the command line's ``--param`` gives them.
    host : str, default="127.0.0.1"
        The address to listen on (loopback unless told otherwise).
    port : int, default=8080
        The HTTP port (0: any free port, printed).
    vw_port : int, optional
        Also serve Vowpal Wabbit's daemon line protocol on this port.
    token_file : path, optional
        A file holding a token: every request must then carry ``Authorization: Bearer <token>``.
    fsync_interval : float, optional
        Seconds. By default every acknowledged operation is flushed to disk first (a flush is
        shared by the requests that wait together). With an interval, operations are
        acknowledged once written to the operating system (they survive a crash of the server)
        and flushed every ``fsync_interval`` seconds: a power cut loses at most that interval.
    snapshot_every : int, default=100000
        Write a snapshot after this many events learned or remembered...
    snapshot_interval : float, default=60.0
        ... or this many seconds after the last one, if anything changed.
    max_body_bytes : int, default=16 MiB
        The largest request body.
    max_events : int, default=10000
        The most events (labels, tasks) in one request.
    max_features : int, default=100000
        The most features in one event.
    threads : int, default=2
        Threads answering requests.

    Returns
    -------
    None
        Once the server has stopped (SIGTERM or Ctrl-C), its last snapshot written.

    Raises
    ------
    OSError
        The address is in use, the state directory is locked by another server, or its log is
        corrupt (the message names the file and the offset).
    ValueError
        Invalid arguments, or a model file that is not one.
    """
    from ._native import serve as native_serve

    token = None
    if token_file is not None:
        token = Path(token_file).read_text(encoding="utf-8").strip()
        if not token:
            raise ValueError(f"token file {token_file} is empty")
    if model is not None and learner is not None:
        raise ValueError("give model= or learner=, not both")
    native_serve(
        os.fspath(state_dir),
        model=_model_bytes(model),
        learner=learner,
        params=_params_text(params),
        host=host,
        port=int(port),
        vw_port=None if vw_port is None else int(vw_port),
        token=token,
        fsync_interval=None if fsync_interval is None else float(fsync_interval),
        snapshot_events=int(snapshot_every),
        snapshot_interval=float(snapshot_interval),
        max_body_bytes=int(max_body_bytes),
        max_events=int(max_events),
        max_features=int(max_features),
        threads=int(threads),
    )
