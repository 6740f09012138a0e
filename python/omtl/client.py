"""``omtl.Client``: a small client of ``omtl serve`` (standard-library HTTP only), with the
estimator's per-event and batch methods (docs/serving.md)."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

__all__ = ["Client"]


def _features(x):
    """An event's features as JSON: a dict of str names, or a list of numbers."""
    if isinstance(x, dict):
        if any(not isinstance(k, str) for k in x):
            raise TypeError("the server takes str feature names; send a row of numbers for columns")
        return {k: (v if isinstance(v, str) else float(v)) for k, v in x.items()}
    if hasattr(x, "tolist"):
        x = x.tolist()
    return [float(v) for v in x]


def _task(task):
    if task is None:
        return None
    if hasattr(task, "item"):  # a NumPy scalar
        task = task.item()
    if isinstance(task, bool) or not isinstance(task, (int, str)):
        raise TypeError(f"a task is an int or a str, got {type(task).__name__}")
    return task


def _label(y):
    if hasattr(y, "item"):
        y = y.item()
    return y


def _rows(X):
    if hasattr(X, "toarray"):  # a SciPy sparse matrix: dense rows
        X = X.toarray()
    if hasattr(X, "tolist"):
        X = X.tolist()
    return list(X)


class Client:
    """A client of ``omtl serve`` at ``url``, with the estimator's methods.

    One keep-alive connection (a client is for one thread at a time; make one per thread).
    Errors are the server's: ``ValueError`` for a bad request (400, 413), ``KeyError`` for an
    unknown id or task (404), ``PermissionError`` for a missing or wrong token (401),
    ``RuntimeError`` when the server cannot make a learn durable (503: nothing was learned; retry
    later) or, for a forget, cannot yet take the forgotten tasks' records off its disk.

    Parameters
    ----------
    url : str
        The server, e.g. ``"http://127.0.0.1:8080"``.
    token : str, optional
        The bearer token, if the server was started with ``--token-file``.
    timeout : float, default=30.0
        Seconds to wait for an answer.

    Examples
    --------
    >>> client = omtl.Client("http://127.0.0.1:8080")  # doctest: +SKIP
    >>> client.learn_one({"cheap": 1, "pills": 1}, "spam", task="alice")  # doctest: +SKIP
    >>> client.predict_one({"cheap": 1}, task="alice", remember="msg-17")  # doctest: +SKIP
    >>> client.learn_label("msg-17", "spam")  # doctest: +SKIP
    """

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 30.0):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http://host:port, got {url!r}")
        self.url = url.rstrip("/")
        self._base = parts.path.rstrip("/")
        connection = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._connection = connection(parts.hostname, parts.port, timeout=timeout)
        self._headers = {"Content-Type": "application/json"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"

    def close(self) -> None:
        """Closes the connection."""
        self._connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body, allow_nan=False).encode()
        for attempt in range(2):
            try:
                self._connection.request(method, self._base + path, body=data, headers=self._headers)
                response = self._connection.getresponse()
                text = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A keep-alive connection the server closed while idle: one fresh try, for
                # requests that change nothing or that the server never received.
                self._connection.close()
                if attempt == 1 or (method == "POST" and path not in ("/v1/predict",)):
                    raise
        if response.status == 200:
            return text.decode() if path == "/metrics" else json.loads(text)
        try:
            message = json.loads(text)["error"]
        except (ValueError, KeyError, TypeError):
            message = text.decode(errors="replace")
        kind = {401: PermissionError, 404: KeyError, 503: RuntimeError}.get(
            response.status, ValueError)
        raise kind(f"{response.status}: {message}")

    # ---- one event ---------------------------------------------------------------------------
    def learn_one(self, x, y, *, task=None):
        """Learns one event; returns the prediction made before the update (as the estimator's)."""
        return self.learn([x], [y], tasks=None if task is None else [task])[0]

    def predict_one(self, x, *, task=None, remember: str | None = None):
        """The predicted label of one event; ``remember``: keep the event under this id until
        ``learn_label`` brings its label."""
        return self._predict([x], None if task is None else [task], remember)[0]["label"]

    def decision_one(self, x, *, task=None) -> float:
        """The score of one event (no update)."""
        return self._predict([x], None if task is None else [task], None)[0]["score"]

    def predict_proba_one(self, x, *, task=None) -> float:
        """P(positive class) of one event, where the model has probabilities (MTLinear with the
        logistic loss)."""
        prediction = self._predict([x], None if task is None else [task], None)[0]
        if "probability" not in prediction:
            raise AttributeError("this model has no probabilities (MTLinear with loss='logistic' has)")
        return prediction["probability"]

    def learn_label(self, id: str, y):
        """Learns the event remembered under ``id`` with its label, as ``learn_one`` would now;
        returns the prediction made before the update (the progressive counters count the one
        served). ``KeyError`` if no event is pending under ``id``."""
        return self.learn_labels([id], [y])[0]

    # ---- batches -----------------------------------------------------------------------------
    def learn(self, X, y, *, tasks=None) -> list:
        """Learns a batch in order (atomic); returns the predictions made before each update."""
        events = []
        rows, labels = _rows(X), list(y)
        if len(rows) != len(labels):
            raise ValueError(f"length mismatch: X has {len(rows)} rows but y has {len(labels)}")
        tasks = self._tasks(tasks, len(rows))
        for i, (x, label) in enumerate(zip(rows, labels)):
            event = {"features": _features(x), "label": _label(label)}
            if tasks is not None:
                event["task"] = tasks[i]
            events.append(event)
        return [p["label"] for p in self._call("POST", "/v1/learn", {"events": events})["predictions"]]

    def predict(self, X, *, tasks=None) -> list:
        """The predicted labels of a batch (no update)."""
        return [p["label"] for p in self._predict(_rows(X), tasks, None)]

    def decision_function(self, X, *, tasks=None) -> list:
        """The scores of a batch (no update)."""
        return [p["score"] for p in self._predict(_rows(X), tasks, None)]

    def learn_labels(self, ids, y) -> list:
        """Learns remembered events with their labels, as one batch (atomic); returns the
        predictions made before each update."""
        labels = [{"id": str(i), "label": _label(v)} for i, v in zip(ids, y)]
        return [p["label"] for p in self._call("POST", "/v1/label", {"labels": labels})["predictions"]]

    def _tasks(self, tasks, n):
        if tasks is None:
            return None
        if isinstance(tasks, (int, str)):
            return [_task(tasks)] * n
        tasks = [_task(t) for t in (tasks.tolist() if hasattr(tasks, "tolist") else tasks)]
        if len(tasks) != n:
            raise ValueError(f"length mismatch: X has {n} rows but tasks has {len(tasks)}")
        return tasks

    def _predict(self, rows, tasks, remember):
        tasks = self._tasks(tasks, len(rows))
        events = []
        for i, x in enumerate(rows):
            event = {"features": _features(x)}
            if tasks is not None:
                event["task"] = tasks[i]
            if remember is not None:
                event["remember"] = remember
            events.append(event)
        return self._call("POST", "/v1/predict", {"events": events})["predictions"]

    # ---- the server --------------------------------------------------------------------------
    def model_info(self) -> dict:
        """The learner, parameters, tasks, counters, memory, pending store and log state."""
        return self._call("GET", "/v1/model")

    def snapshot(self) -> int:
        """Writes a snapshot now; returns the log sequence number it covers."""
        return self._call("POST", "/v1/snapshot", {})["lsn"]

    def forget(self, tasks) -> dict:
        """Forgets tasks, as the estimator's ``forget``: their stored examples, state, counts,
        labels and pending events leave the served model, and their records leave the state
        directory before the answer (docs/serving.md, "Forgetting").

        Parameters
        ----------
        tasks : task id or sequence of task ids
            The tasks (labels, or integer ids), distinct.

        Returns
        -------
        dict
            ``forgotten`` (the ids), ``n_examples`` (their learned examples), ``n_stored``
            (stored examples removed), ``n_pending`` (pending events dropped), ``lsn`` (the
            forget's log record) and ``snapshot_lsn`` (the snapshot that covers it).

        Raises
        ------
        KeyError
            An unknown task (nothing changed).
        ValueError
            A task named twice, a learner that cannot forget, a model that learned nothing.
        """
        if isinstance(tasks, (str, int)) or not hasattr(tasks, "__iter__"):
            tasks = [tasks]
        return self._call("POST", "/v1/forget", {"tasks": [_task(t) for t in tasks]})

    def health(self) -> dict:
        """``{"status": "ok", "learn_available": bool}``."""
        return self._call("GET", "/healthz")

    def metrics(self) -> str:
        """The Prometheus metrics text."""
        return self._call("GET", "/metrics")
