"""Model files: ``save(model, path)`` and ``load(path)``, a versioned format that runs no code.

A file is, in order::

    MAGIC            8 bytes  b"\\x89OMTL\\r\\n\\x1a\\n"
    FORMAT_VERSION   4 bytes  little-endian
    header length    8 bytes  little-endian, then the header: UTF-8 JSON
    state length     8 bytes  little-endian, then the native state (``NativeLearner.to_bytes``)
    checksum        32 bytes  SHA-256 of everything before it

The header names the class (from a fixed registry of omtl's native learners), holds the
hyper-parameters as JSON values (a ``TaskGraph`` as its kind and arrays) and the Python-side
bookkeeping of a fitted model. ``load`` trusts none of it: the checksum and every length are
checked, the class must be in the registry, the hyper-parameters are validated by constructing
the class and building a fresh engine from them, the native state is decoded within its own size
and checked invariant by invariant (``NativeLearner.from_bytes``), and it must be the same
algorithm with the same hyper-parameters and agree with the bookkeeping. Anything else raises
``ValueError``. Reference twins (``omtl.reference``) are not supported: ``save`` raises
``TypeError`` for them (pickle them instead: they hold plain NumPy arrays).
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import socket
import stat
import struct
import tempfile
import warnings

import numpy as np

from . import learners as _learners
from ._base import STATE_VERSION, NativeCore
from ._validation import BOOL, PM1, ZERO_ONE
from .graph import TaskGraph

__all__ = ["dumps", "load", "load_metadata", "loads", "save"]

MAGIC = b"\x89OMTL\r\n\x1a\n"
FORMAT_VERSION = 1
_CHECKSUM = 32
# Largest header accepted (the header holds parameters and per-task counts, never model data).
_MAX_HEADER = 1 << 26

# The classes a file may name: omtl's native learners, by class name (aliases share a class).
REGISTRY = {cls.__name__: cls for cls in (getattr(_learners, name) for name in _learners.__all__)}

# The largest dense task kernel (bytes) an unfitted model's file may name (k = 2,896 tasks).
_MAX_DENSE_GRAPH = 1 << 26

_GRAPH_KEY = "__omtl_task_graph__"
_LABEL_FORMS = (PM1, ZERO_ONE, BOOL)


# ---- writing ------------------------------------------------------------------------------------
def _param_to_json(name, value):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"cannot save parameter {name}={value!r}: not a finite number")
        return v
    if isinstance(value, TaskGraph):
        def arr(a, dtype):
            return None if a is None else np.asarray(a, dtype=dtype).tolist()

        return {_GRAPH_KEY: {"kind": value.kind, "n_tasks": int(value.n_tasks), "edges": arr(value.edges, np.int64),
                             "weights": arr(value.weights, np.float64), "matrix": arr(value.matrix, np.float64)}}
    raise TypeError(f"cannot save parameter {name}={value!r}: a file holds numbers, strings, None and TaskGraphs")


def _fitted_header(model) -> dict | None:
    if not model._is_fitted():
        return None
    header = {
        "n_features_in": int(model.n_features_in_),
        "n_seen": int(model.n_seen_),
        "n_mistakes": int(model.n_mistakes_),
        "seen_per_task": [int(c) for c in model._seen_per_task],
        "label_form": list(model._label_form) if isinstance(model._label_form, tuple) else model._label_form,
    }
    if getattr(model, "_radius_warned", False):
        header["radius_warned"] = True
    if "_gamma_scale" in model.__dict__:  # the value gamma="scale" resolved to on the first batch
        header["gamma_scale"] = float(model._gamma_scale)
    if getattr(model, "feature_names_in_", None) is not None:  # from a data frame (scikit-learn)
        header["feature_names_in"] = [str(name) for name in model.feature_names_in_]
    labels = getattr(model, "_task_labels", None)
    if labels is not None:
        for label in labels:
            if isinstance(label, bool) or not isinstance(label, (str, int)):
                raise TypeError(
                    f"cannot save task label {label!r} ({type(label).__name__}): a model file stores str and int "
                    "task labels only (pickle the model instead)"
                )
        header["task_labels"] = list(labels)
    return header


def save(model, path, *, metadata=None) -> None:
    """Writes ``model`` (a native omtl learner, fitted or not) to ``path`` in the omtl model format.

    The model is read at one moment, under its lock: a thread learning meanwhile waits, so the
    file holds the state after some whole call, never a mix. The file is written to a fresh
    temporary file in the same directory, flushed to disk and renamed over ``path``, so an
    existing file at ``path`` is replaced whole or not at all, also by concurrent saves and across
    a crash; it keeps the existing file's permissions. (:func:`dumps` gives the same bytes
    without a file.) docs/reliability.md has the details.

    Parameters
    ----------
    model : omtl learner
        A native omtl learner (not a reference twin), fitted or not.
    path : str or path-like
        Where to write the file.
    metadata : dict, optional
        JSON-serialisable data stored with the model and read back by :func:`load_metadata`
        (``omtl learn --save`` keeps its task-label mapping and input format there); never
        executed, and ignored by :func:`load`.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        For anything but a native omtl learner, or metadata that is not a JSON object.
    ValueError
        If the model cannot be restored (e.g. its numbers overflowed), or the file would be one
        :func:`load` refuses (a header over 64 MiB: millions of long task labels).

    Examples
    --------
    >>> import os, tempfile, numpy as np, omtl
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1]])
    >>> model = omtl.MTPerceptron(n_tasks=2).partial_fit(X, [1, -1, 1], tasks=[0, 1, 1])
    >>> path = os.path.join(tempfile.mkdtemp(), "model.omtl")
    >>> omtl.save(model, path)
    >>> omtl.load(path).predict(X, tasks=[0, 1, 1]).tolist() == model.predict(X, tasks=[0, 1, 1]).tolist()
    True
    """
    data = dumps(model, metadata=metadata)
    _write_atomically(os.fspath(path), data)


# Temporary files: ".<name>.<host>-<pid>-<random>.omtl-tmp" in the target's directory.
_TMP_SUFFIX = ".omtl-tmp"
_HOST_TAG = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def _write_atomically(path: str, data: bytes) -> None:
    """Replaces ``path`` by a file holding ``data``, whole or not at all, also across a crash.

    The bytes go to a fresh temporary file in the target's directory, created with O_EXCL under
    an unpredictable name (so concurrent savers never share one, and a planted symlink is never
    followed), flushed to disk, given the mode of the file it replaces (or the mode a new file
    gets under the umask), and renamed over the target; then the directory entry is flushed.
    A crash leaves the old file or the new one, and at most a temporary file, which a later save
    to the same path removes once its writer process is gone.
    """
    directory, name = os.path.split(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    _remove_stale_temporaries(directory, name)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.{_HOST_TAG}-{os.getpid()}-", suffix=_TMP_SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if hasattr(os, "fchmod"):
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(directory)


def _umask() -> int:
    """The process umask, read without changing it where the system tells it (Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_directory(directory: str) -> None:
    """Flushes a directory's entries (the rename) to disk, where the system can (POSIX)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems do not sync directories; the rename itself is still atomic
    finally:
        os.close(fd)


def _remove_stale_temporaries(directory: str, name: str) -> None:
    """Removes the temporary files of saves to ``name`` whose writer process (on this host) no
    longer exists: what a crash during a save leaves. Other hosts' temporaries are left alone."""
    prefix = f".{name}.{_HOST_TAG}-"
    try:
        entries = [e for e in os.listdir(directory) if e.startswith(prefix) and e.endswith(_TMP_SUFFIX)]
    except OSError:
        return
    for entry in entries:
        pid = entry[len(prefix) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _process_exists(int(pid)):
            continue
        try:
            os.remove(os.path.join(directory, entry))
        except OSError:
            pass


def _process_exists(pid: int) -> bool:
    if os.name != "posix":
        return True  # no harmless existence probe (os.kill would terminate it): keep the file
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # it exists (another user's), or we cannot tell: keep its file
    return True


def dumps(model, *, metadata=None) -> bytes:
    """The contents of the model file :func:`save` writes.

    Parameters
    ----------
    model : omtl learner
        A native omtl learner, fitted or not.
    metadata : dict, optional
        JSON-serialisable data stored with the model (see :func:`save`).

    Returns
    -------
    bytes
        The file's bytes; :func:`loads` reads them back.
    """
    cls = type(model)
    if REGISTRY.get(cls.__name__) is not cls:
        raise TypeError(
            f"omtl.save supports omtl's native learners ({', '.join(sorted(REGISTRY))}), got {cls.__module__}.{cls.__name__}; "
            "pickle a reference learner instead"
        )
    # One moment: the parameters, the bookkeeping and the native state are read under the
    # model's lock, which every learning call holds for its whole batch.
    with model._model_lock():
        params = {name: _param_to_json(name, value) for name, value in model.get_params().items()}
        fitted = _fitted_header(model)
        state = b""
        if fitted is not None:
            if not isinstance(model._core, NativeCore):
                raise TypeError("omtl.save supports models fitted with the native engine")
            try:  # a file we write is a file load() accepts
                model._core._learner.check_state()
                check_restored(model)
            except ValueError as exc:
                raise ValueError(f"cannot save this {cls.__name__}: {exc}") from None
            state = bytes(model._core._learner.to_bytes())
    for value in model.get_params().values():  # what load allows a graph to allocate
        if isinstance(value, TaskGraph) and value.kind in ("edges", "laplacian_pinv") \
                and 8 * value.n_tasks**2 > max(len(state), _MAX_DENSE_GRAPH):
            raise ValueError(
                f"cannot save this unfitted {cls.__name__}: its {value.n_tasks}-task graph's dense task kernel is over "
                f"the {_MAX_DENSE_GRAPH:,} bytes a model file without a fitted state may name; fit it first or pickle it"
            )
    header = {"class": cls.__name__, "state_version": STATE_VERSION, "params": params, "fitted": fitted}
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict (a JSON object), got {type(metadata).__name__}")
        header["metadata"] = metadata
    head = json.dumps(header, allow_nan=False, sort_keys=True).encode("utf-8")
    if len(head) > _MAX_HEADER:  # a file we write is a file load() accepts
        raise ValueError(
            f"cannot save this {cls.__name__}: its header (parameters, per-task counts and task labels) takes "
            f"{len(head):,} bytes, over the {_MAX_HEADER:,} a model file may hold; pickle the model instead"
        )
    body = b"".join([MAGIC, struct.pack("<I", FORMAT_VERSION), struct.pack("<Q", len(head)), head,
                     struct.pack("<Q", len(state)), state])
    return body + hashlib.sha256(body).digest()


# ---- reading ------------------------------------------------------------------------------------
def _fail(msg: str):
    raise ValueError(f"not a valid omtl model file: {msg}")


def _split(data: bytes) -> tuple[dict, bytes]:
    """Checks the framing and checksum; returns the parsed header and the state bytes."""
    fixed = len(MAGIC) + 4 + 8
    if len(data) < fixed + 8 + _CHECKSUM or data[: len(MAGIC)] != MAGIC:
        _fail("wrong magic number or too short")
    (version,) = struct.unpack_from("<I", data, len(MAGIC))
    if version != FORMAT_VERSION:
        _fail(f"format version {version}, this omtl reads version {FORMAT_VERSION}")
    body, checksum = data[:-_CHECKSUM], data[-_CHECKSUM:]
    if hashlib.sha256(body).digest() != checksum:
        _fail("checksum mismatch (the file is corrupted or truncated)")
    (head_len,) = struct.unpack_from("<Q", data, len(MAGIC) + 4)
    if head_len > min(_MAX_HEADER, len(body) - fixed - 8):
        _fail(f"header length {head_len} does not fit the file")
    state_at = fixed + head_len
    (state_len,) = struct.unpack_from("<Q", body, state_at)
    if state_len != len(body) - state_at - 8:
        _fail(f"state length {state_len} does not match the file")
    try:
        header = json.loads(body[fixed:state_at].decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        _fail(f"unreadable header ({exc})")
    if not isinstance(header, dict):
        _fail("the header is not a JSON object")
    return header, body[state_at + 8 :]


def _reject_constant(name):
    _fail(f"the header holds {name}")


def _int(value, what: str, low: int = 0) -> int:
    """A count from the header: an integer in [low, 2**63) (what the engine's counters hold)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**63:
        _fail(f"{what} must be an integer in [{low}, 2**63), got {value!r}")
    return value


def _graph_from_json(spec, dense_budget: int) -> TaskGraph:
    if not isinstance(spec, dict) or set(spec) != {"kind", "n_tasks", "edges", "weights", "matrix"}:
        _fail("malformed task graph")
    kind, k = spec["kind"], _int(spec["n_tasks"], "the task graph's n_tasks", 1)
    matrix_kinds = ("interaction", "psd_plus_identity", "task_kernel")
    if kind not in ("complete", "complete_open", "disconnected", "edges", "laplacian_pinv", *matrix_kinds):
        _fail(f"unknown task graph kind {kind!r}")
    if kind in ("edges", "laplacian_pinv") and 8 * k * k > dense_budget:
        # A graph from edges builds a dense k x k task kernel: a few bytes of header must not
        # make load allocate and factor gigabytes. A fitted model's state holds that kernel, so
        # the file is at least as large; an unfitted one may name up to _MAX_DENSE_GRAPH bytes.
        _fail(f"the task graph's {k} x {k} task kernel is larger than the file allows")
    try:
        if kind == "complete":
            return TaskGraph.complete(k)
        if kind == "disconnected":
            return TaskGraph.disconnected(k)
        if kind == "complete_open":
            return TaskGraph.complete_open(k)
        if kind in ("edges", "laplacian_pinv"):
            edges = [tuple(e) for e in spec["edges"]]
            if kind == "edges":
                return TaskGraph.from_edges(k, edges, spec["weights"])
            with warnings.catch_warnings():  # the user saw the warning when building it
                warnings.simplefilter("ignore", UserWarning)
                return TaskGraph.laplacian_pinv(k, edges, spec["weights"])
        build = {"interaction": TaskGraph.from_interaction, "psd_plus_identity": TaskGraph.from_psd_plus_identity,
                 "task_kernel": TaskGraph.from_task_kernel}[kind]
        graph = build(spec["matrix"])
    except (TypeError, ValueError, OverflowError) as exc:
        _fail(f"invalid task graph ({exc})")
    if graph.n_tasks != k:
        _fail("the task graph's matrix does not match its n_tasks")
    return graph


def _param_from_json(value, dense_budget: int):
    if isinstance(value, dict):
        if set(value) != {_GRAPH_KEY}:
            _fail("a parameter is an unknown object")
        return _graph_from_json(value[_GRAPH_KEY], dense_budget)
    if value is not None and not isinstance(value, (bool, int, float, str)):
        _fail(f"a parameter has the JSON type {type(value).__name__}")
    return value


def _build(header: dict, state_len: int = 0):
    """The estimator the header describes (unfitted), its parameters validated. A dense task
    kernel may take at most max(state_len, _MAX_DENSE_GRAPH) bytes."""
    name = header.get("class")
    cls = REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        _fail(f"class {name!r} is not an omtl learner")
    if header.get("state_version") != STATE_VERSION:
        _fail(f"native state version {header.get('state_version')!r}, this omtl reads {STATE_VERSION}")
    params = header.get("params")
    if not isinstance(params, dict) or set(params) != set(cls._param_names()):
        _fail(f"the parameters do not match those of {name}")
    try:
        dense_budget = max(state_len, _MAX_DENSE_GRAPH)
        return cls(**{k: _param_from_json(v, dense_budget) for k, v in params.items()})
    except (TypeError, ValueError, OverflowError) as exc:
        _fail(f"invalid parameters for {name} ({exc})")


def _is_label_pair(form) -> bool:
    """Two distinct labels (negative, positive) of one type, string or number (not bool)."""
    return (
        isinstance(form, tuple)
        and len(form) == 2
        and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in form)
        and all(isinstance(v, str) or math.isfinite(v) for v in form)
        and (isinstance(form[0], str) == isinstance(form[1], str))
        and form[0] != form[1]
    )


def check_restored(model, *, settings: bool = True) -> None:
    """Checks that a fitted native ``model`` is consistent: its engine's sizes and the
    bookkeeping agree and (``settings``) the engine is the algorithm its hyper-parameters build,
    with the same settings. Raises ``ValueError``. ``load`` and ``save`` check everything;
    unpickling leaves out the settings (``set_params`` after fitting is allowed, and a pickle
    that lies about its class can run code anyway)."""
    if not model._is_fitted():
        return
    core = model._core
    if not isinstance(core, NativeCore):
        return  # a reference twin: plain NumPy state
    learner = core._learner
    n_tasks, d = model._check_n_tasks(), model.n_features_in_
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        _fail(f"n_features_in_ must be an integer >= 1, got {d!r}")
    if (learner.n_tasks, learner.n_features) != (n_tasks, int(d)):
        _fail(f"the engine has {learner.n_tasks} tasks and {learner.n_features} features, "
              f"the estimator {n_tasks} and {d}")
    if settings:
        # Built only now that the sizes are known to be the engine's (bounded by its state).
        try:
            fresh = model._make_core(int(d), False)
        except (TypeError, ValueError, OverflowError) as exc:
            _fail(f"invalid parameters ({exc})")
        if not learner.same_settings(fresh._learner):
            _fail(f"the engine ({learner.kind}) is not the one the parameters of {type(model).__name__} build")
    seen = model._seen_per_task
    if not isinstance(seen, np.ndarray) or seen.shape != (n_tasks,) or seen.dtype.kind not in "iu" or (seen < 0).any():
        _fail("the per-task counts are not n_tasks non-negative integers")
    n_seen, n_mistakes = model.n_seen_, model.n_mistakes_
    if int(seen.sum()) != n_seen or not 0 <= n_mistakes <= n_seen:
        _fail(f"the counts disagree: {n_seen} seen, {n_mistakes} mistakes, per task {int(seen.sum())}")
    if learner.n_updates > n_seen or learner.n_active > n_seen:
        _fail(f"the engine made {learner.n_updates} updates and holds {learner.n_active} elements after {n_seen} examples")
    if not (_is_label_pair(model._label_form) or model._label_form in _LABEL_FORMS):
        _fail(f"unknown label form {model._label_form!r}")
    labels = getattr(model, "_task_labels", None)
    if labels is not None:
        index = getattr(model, "_task_index", None)
        if not isinstance(labels, list) or len(labels) > n_tasks or not isinstance(index, dict) or len(index) != len(labels) \
                or any(index.get(v) != i for i, v in enumerate(labels)):
            _fail("the task labels are not distinct labels of at most n_tasks tasks")
    elif model.n_tasks is None:
        _fail("an open-ended model (n_tasks=None) without its task labels")


def load(path):
    """Reads a model written by :func:`save`. It continues exactly as if never interrupted.

    Nothing in the file is executed.

    Parameters
    ----------
    path : str or path-like
        A file written by :func:`save`.

    Returns
    -------
    omtl learner
        The model, of the class the file names.

    Raises
    ------
    ValueError
        For anything that is not a valid omtl model file (wrong magic number, format version,
        checksum or lengths; a class that is not an omtl learner; invalid parameters; a native
        state that is malformed, breaks an invariant of its learner or disagrees with the
        parameters or counts).
    """
    with open(os.fspath(path), "rb") as f:
        return loads(f.read())


def loads(data: bytes):
    """A model from the contents of a model file (see :func:`load`).

    Parameters
    ----------
    data : bytes
        The bytes :func:`dumps` gave (or a model file's contents).

    Returns
    -------
    omtl learner
        The model; ``ValueError`` as :func:`load` for invalid data.
    """
    header, state = _split(bytes(data))
    model = _build(header, len(state))
    fitted = header.get("fitted")
    if fitted is None:
        if state:
            _fail("an unfitted model with a native state")
        return model
    keys = {"n_features_in", "n_seen", "n_mistakes", "seen_per_task", "label_form"}
    if not isinstance(fitted, dict) or not keys <= set(fitted) <= keys | {"radius_warned", "gamma_scale", "feature_names_in", "task_labels"}:
        _fail("malformed fitted bookkeeping")
    d = _int(fitted["n_features_in"], "n_features_in", 1)
    counts = fitted["seen_per_task"]
    # An open-ended model (n_tasks=None) has as many tasks as its engine (checked below).
    if not isinstance(counts, list) or not counts or (model.n_tasks is not None and len(counts) != model._check_n_tasks()):
        _fail("seen_per_task must hold one count per task")
    counts = np.array([_int(c, "a per-task count") for c in counts], dtype=np.int64)
    from ._native import NativeLearner

    try:
        learner = NativeLearner.from_bytes(state)
    except ValueError as exc:
        _fail(str(exc))
    model._core = NativeCore(learner)
    model.n_features_in_ = d
    model.n_seen_ = _int(fitted["n_seen"], "n_seen")
    model.n_mistakes_ = _int(fitted["n_mistakes"], "n_mistakes")
    model._seen_per_task = counts
    model._n_tasks_at_fit = model.n_tasks
    labels = fitted.get("task_labels")
    if labels is not None:
        if not isinstance(labels, list) or any(
            isinstance(v, bool) or not isinstance(v, (str, int)) or (isinstance(v, int) and not -(2**63) <= v < 2**63)
            for v in labels
        ):
            _fail("task_labels must be a list of strings and 64-bit integers")
        model._task_labels, model._task_index = labels, {v: i for i, v in enumerate(labels)}
    form = fitted["label_form"]
    model._label_form = tuple(form) if isinstance(form, list) else form
    if fitted.get("radius_warned", False) is not False:
        if fitted["radius_warned"] is not True:
            _fail("radius_warned must be true or absent")
        model._radius_warned = True
    if "gamma_scale" in fitted:
        g = fitted["gamma_scale"]
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 < g < math.inf:
            _fail("gamma_scale must be a positive finite number")
        model._gamma_scale = float(g)
    if "feature_names_in" in fitted:
        names = fitted["feature_names_in"]
        if not isinstance(names, list) or len(names) != d or not all(isinstance(n, str) for n in names):
            _fail("feature_names_in must hold one string per feature")
        model.feature_names_in_ = np.asarray(names, dtype=object)
    check_restored(model)
    return model


def load_metadata(path) -> dict:
    """The ``metadata`` a model file was saved with (an empty dict if none).

    Parameters
    ----------
    path : str or path-like
        A file written by :func:`save`.

    Returns
    -------
    dict
        The JSON object given as ``save(..., metadata=...)``. The file's framing and checksum are
        checked (``ValueError`` as :func:`load`); the model itself is not decoded.
    """
    with open(os.fspath(path), "rb") as f:
        header, _ = _split(f.read())
    metadata = header.get("metadata", {})
    if not isinstance(metadata, dict):
        _fail("the metadata is not a JSON object")
    return metadata
