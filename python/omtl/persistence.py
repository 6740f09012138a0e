"""Model files: ``save(model, path)`` and ``load(path)``, a versioned format that runs no code.

A file is, in order::

    MAGIC            9 bytes  b"\\x89OMTL\\r\\n\\x1a\\n"
    FORMAT_VERSION   4 bytes  little-endian
    header length    8 bytes  little-endian, then the header: UTF-8 JSON
    state length     8 bytes  little-endian, then the native state (``NativeLearner.to_bytes``)
    checksum        32 bytes  SHA-256 of everything before it

The header names the class (from a fixed registry of omtl's native learners), holds the
hyper-parameters as JSON values (a ``TaskGraph`` as its kind and arrays) and the Python-side
bookkeeping of a fitted model. The format is the Rust crate's (``omtl::model_file``, which
frames, checksums and checks the bytes for Python, the command line and Rust alike; a file
crosses between them both ways). ``load`` trusts none of it: the checksum and every length are
checked, the class must be in the registry, the native state is decoded within its own size and
checked invariant by invariant, and it must be the learner the class builds and agree with the
bookkeeping (all in the crate); the hyper-parameters are validated here by constructing the class
and building a fresh engine from them, which must have the same settings. Anything else raises
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
import tempfile

import numpy as np

from . import _native
from . import learners as _learners
from ._base import STATE_VERSION, NativeCore
from ._tasks import FORGOTTEN, TaskSet
from .graph import TaskGraph, _edge_list

__all__ = ["dumps", "load", "load_metadata", "loads", "save"]

MAGIC = _native.MODEL_FILE_MAGIC
FORMAT_VERSION = _native.MODEL_FILE_VERSION
# Largest header accepted (the header holds parameters and per-task counts, never model data).
_MAX_HEADER = 1 << 26

# The classes a file may name: omtl's native learners, by class name (aliases share a class).
REGISTRY = {cls.__name__: cls for cls in (getattr(_learners, name) for name in _learners.__all__)}

# The largest dense task kernel (bytes) an unfitted model's file may name (k = 2,896 tasks).
_MAX_DENSE_GRAPH = 1 << 26

_GRAPH_KEY = "__omtl_task_graph__"


def _limits() -> dict:
    return {"max_header": _MAX_HEADER, "max_dense_graph": _MAX_DENSE_GRAPH}


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
        "seen_per_task": [int(c) for c in model._tasks.counts],
        "label_form": list(model._label_form) if isinstance(model._label_form, tuple) else model._label_form,
    }
    if getattr(model, "_radius_warned", False):
        header["radius_warned"] = True
    if "_gamma_scale" in model.__dict__:  # the value gamma="scale" resolved to on the first batch
        header["gamma_scale"] = float(model._gamma_scale)
    if getattr(model, "feature_names_in_", None) is not None:  # from a data frame (scikit-learn)
        header["feature_names_in"] = [str(name) for name in model.feature_names_in_]
    labels = model._tasks.labels
    if labels is not None:
        labels = [v for v in labels if v is not FORGOTTEN]
        for label in labels:
            if isinstance(label, bool) or not isinstance(label, (str, int)):
                raise TypeError(
                    f"cannot save task label {label!r} ({type(label).__name__}): a model file stores str and int "
                    "task labels only (pickle the model instead)"
                )
        header["task_labels"] = labels
        free = model._tasks.free_tasks()
        if free:
            header["free_tasks"] = free
    if model._tasks.n_forgotten:
        header["n_forgotten"] = int(model._tasks.n_forgotten)
    return header


def save(model, path, *, metadata=None) -> None:
    """Writes ``model`` (a native omtl learner, fitted or not) to ``path`` in the omtl model format.

    The model is read at one moment, under its lock: a thread learning meanwhile waits, so the
    file holds the state after some whole call, never a mix. The file is written to a fresh
    temporary file in the same directory, flushed to disk and renamed over ``path``, so an
    existing file at ``path`` is replaced whole or not at all, also by concurrent saves and across
    a crash; it keeps the existing file's permissions. (``dumps`` gives the same bytes
    without a file.) docs/reliability.md has the details.

    Parameters
    ----------
    model : omtl learner
        A native omtl learner (not a reference twin), fitted or not.
    path : str or path-like
        Where to write the file.
    metadata : dict, optional
        JSON-serialisable data stored with the model and read back by ``load_metadata``
        (``omtl learn --save`` keeps its task-label mapping and input format there); never
        executed, and ignored by ``load``.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        For anything but a native omtl learner, or metadata that is not a JSON object.
    ValueError
        If the model cannot be restored (e.g. its numbers overflowed), or the file would be one
        ``load`` refuses (a header over 64 MiB: millions of long task labels).

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
    """The contents of the model file ``save`` writes.

    Parameters
    ----------
    model : omtl learner
        A native omtl learner, fitted or not.
    metadata : dict, optional
        JSON-serialisable data stored with the model (see ``save``).

    Returns
    -------
    bytes
        The file's bytes; ``loads`` reads them back.
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
        learner = None
        if fitted is not None:
            try:  # a file we write is a file load() accepts
                check_restored(model)
            except ValueError as exc:
                raise ValueError(f"cannot save this {cls.__name__}: {exc}") from None
            learner = model._core._learner
        header = {"class": cls.__name__, "state_version": STATE_VERSION, "params": params, "fitted": fitted}
        if metadata is not None:
            if not isinstance(metadata, dict):
                raise TypeError(f"metadata must be a dict (a JSON object), got {type(metadata).__name__}")
            header["metadata"] = metadata
        head = json.dumps(header, allow_nan=False, sort_keys=True)
        # Framing, checksum and the reader's checks of the header and state: the crate's.
        try:
            return bytes(_native.write_model_file(head, learner, **_limits(), pending=model._pending_tuple()))
        except ValueError as exc:
            raise ValueError(str(exc).replace("cannot save this model:", f"cannot save this {cls.__name__}:", 1)) from None


# ---- reading ------------------------------------------------------------------------------------
def _fail(msg: str):
    raise ValueError(f"not a valid omtl model file: {msg}")


def _graph_from_json(spec) -> TaskGraph:
    """The TaskGraph of a header's graph (its shape and size already checked by the crate)."""
    kind, k = spec["kind"], spec["n_tasks"]
    try:
        if kind == "complete":
            return TaskGraph.complete(k)
        if kind == "disconnected":
            return TaskGraph.disconnected(k)
        if kind == "complete_open":
            return TaskGraph.complete_open(k)
        if kind in ("edges", "laplacian_pinv"):
            # Checked, not factored: T is built when the model first needs it (an unfitted
            # model's first learning call; a fitted model's settings check, whose state holds T).
            edges, weights = _edge_list(k, [tuple(e) for e in spec["edges"]], spec["weights"])
            return TaskGraph._checked(k, kind, build=False, edges=edges, weights=weights)
        build = {"interaction": TaskGraph.from_interaction, "psd_plus_identity": TaskGraph.from_psd_plus_identity,
                 "task_kernel": TaskGraph.from_task_kernel}[kind]
        graph = build(spec["matrix"])
    except (TypeError, ValueError, OverflowError) as exc:
        _fail(f"invalid task graph ({exc})")
    if graph.n_tasks != k:
        _fail("the task graph's matrix does not match its n_tasks")
    return graph


def _param_from_json(value):
    if isinstance(value, dict):  # the crate checked it is {_GRAPH_KEY: graph}
        return _graph_from_json(value[_GRAPH_KEY])
    return value


def _build(header: dict):
    """The estimator the header describes (unfitted), its parameters validated by the class."""
    name = header["class"]
    cls = REGISTRY.get(name)
    if cls is None:
        _fail(f"class {name!r} is not an omtl learner")
    params = header["params"]
    # A file written before a parameter existed holds the others: the new one takes its default
    # (``n_features``, the column space of dict rows, changes nothing a file records).
    if not set(cls._param_names()) - {"n_features"} <= set(params) <= set(cls._param_names()):
        _fail(f"the parameters do not match those of {name}")
    try:
        return cls(**{k: _param_from_json(v) for k, v in params.items()})
    except (TypeError, ValueError, OverflowError) as exc:
        _fail(f"invalid parameters for {name} ({exc})")


def check_restored(model, *, settings: bool = True) -> None:
    """Checks that a fitted native ``model`` is consistent: its engine's sizes and the
    bookkeeping agree (checked by the crate, as reading a model file checks them) and
    (``settings``) the engine is the algorithm its hyper-parameters build, with the same
    settings. Raises ``ValueError``. ``load`` and ``save`` check everything; unpickling leaves
    out the settings (``set_params`` after fitting is allowed, and a pickle that lies about its
    class can run code anyway). Reference twins (plain NumPy state) are not checked."""
    if REGISTRY.get(type(model).__name__) is not type(model) or not model._is_fitted():
        return
    learner = model._core._learner
    d = model.n_features_in_
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        _fail(f"n_features_in_ must be an integer >= 1, got {d!r}")
    task_set = getattr(model, "_tasks", None)
    if not isinstance(task_set, TaskSet):
        _fail("the model's task set is missing")
    seen = task_set.counts
    if not isinstance(seen, np.ndarray) or seen.ndim != 1 or seen.dtype.kind not in "iu" or (seen < 0).any():
        _fail("the per-task counts are not n_tasks non-negative integers")
    labels = task_set.labels
    if labels is not None:
        index = task_set.index
        live = [(i, v) for i, v in enumerate(labels) if v is not FORGOTTEN] if isinstance(labels, list) else []
        if not isinstance(labels, list) or not isinstance(index, dict) or len(index) != len(live) \
                or any(index.get(v) != i for i, v in live):
            _fail("the task labels are not distinct labels of at most n_tasks tasks")
    try:
        fitted = json.dumps(_fitted_header(model), allow_nan=False)
    except (TypeError, ValueError):
        _fail(f"unknown label form or task labels ({model._label_form!r})")
    _native.check_bookkeeping(learner, fitted, model.n_tasks is None)
    if settings:
        # Built only now that the sizes are known to be the engine's (bounded by its state).
        try:
            fresh = model._make_core(int(d), False)
        except (TypeError, ValueError, OverflowError) as exc:
            _fail(f"invalid parameters ({exc})")
        if not learner.same_settings(fresh._learner):
            _fail(f"the engine ({learner.kind}) is not the one the parameters of {type(model).__name__} build")


def load(path):
    """Reads a model written by ``save``. It continues exactly as if never interrupted.

    Nothing in the file is executed.

    Parameters
    ----------
    path : str or path-like
        A file written by ``save``.

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
    return loads(_read_model_file(path))


# A stream (a pipe) of unknown length is read in chunks of this size, never more than its lengths say.
_CHUNK = 1 << 24


def _read_model_file(path) -> bytes:
    """A model file's bytes, read no further than its first bytes say: the magic number, version
    and lengths are checked (by the crate) as soon as they are read and against a regular file's
    size, so ``/dev/zero`` or a length of terabytes is refused after a few bytes."""
    with open(os.fspath(path), "rb") as f:
        info = os.fstat(f.fileno())
        size = info.st_size if stat.S_ISREG(info.st_mode) else None
        prefix = b""
        while True:  # the framing and the header: at most the header limit
            length, exact = _native.model_file_length(prefix, size, **_limits())
            if exact:
                break
            more = f.read(length - len(prefix))
            prefix += more
            if len(prefix) < length:
                _fail(f"the file is truncated: it ends after {len(prefix)} bytes, its lengths say at least {length}")
        if size is not None:  # all of it at once: `size` is the file's length (checked by the crate)
            f.seek(0)
            data = f.read(length)
        else:
            buffer = bytearray(prefix)
            while len(buffer) < length and (chunk := f.read(min(length - len(buffer), _CHUNK))):
                buffer += chunk
            data = bytes(buffer)
        if len(data) < length:
            _fail(f"the file is truncated: it ends after {len(data)} bytes, its lengths say {length}")
        if f.read(1):
            _fail(f"its lengths say {length} bytes, the file goes on: bytes after the checksum")
    return data


def loads(data: bytes):
    """A model from the contents of a model file (see ``load``).

    Parameters
    ----------
    data : bytes
        The bytes ``dumps`` gave (or a model file's contents).

    Returns
    -------
    omtl learner
        The model; ``ValueError`` as ``load`` for invalid data.
    """
    return _loads_with_header(data)[0]


def _loads_with_header(data: bytes):
    """``(model, header)`` from a model file's bytes (the header as a dict: its metadata)."""
    # Framing, checksum, the header's fields and the native state, checked by the crate.
    head, learner = _native.read_model_file(bytes(data), **_limits())
    header = json.loads(head)
    model = _build(header)
    fitted = header["fitted"]
    pending = _native.read_model_pending(bytes(data), **_limits())
    if pending is not None:
        model._restore_pending(pending, fitted["n_features_in"] if fitted is not None else model._dict_width())
    if fitted is None:
        return model, header
    if model.n_tasks is not None and len(fitted["seen_per_task"]) != model._check_n_tasks():
        _fail("seen_per_task must hold one count per task")
    model._core = NativeCore(learner)
    model.n_features_in_ = fitted["n_features_in"]
    model.n_seen_ = fitted["n_seen"]
    model.n_mistakes_ = fitted["n_mistakes"]
    labels = fitted.get("task_labels")
    if labels is not None and fitted.get("free_tasks"):
        # The forgotten labels' tasks (checked by the crate: distinct, among the tasks).
        live, free = iter(labels), set(fitted["free_tasks"])
        labels = [FORGOTTEN if i in free else next(live) for i in range(len(labels) + len(free))]
    model._tasks = TaskSet(np.array(fitted["seen_per_task"], dtype=np.int64), model.n_tasks, labels)
    model._tasks.n_forgotten = int(fitted.get("n_forgotten", 0))
    form = fitted["label_form"]
    model._label_form = tuple(form) if isinstance(form, list) else form
    if fitted.get("radius_warned", False):
        model._radius_warned = True
    if "gamma_scale" in fitted:
        model._gamma_scale = float(fitted["gamma_scale"])
    if "feature_names_in" in fitted:
        model.feature_names_in_ = np.asarray(fitted["feature_names_in"], dtype=object)
    check_restored(model)
    return model, header


def load_metadata(path) -> dict:
    """The ``metadata`` a model file was saved with (an empty dict if none).

    Parameters
    ----------
    path : str or path-like
        A file written by ``save``.

    Returns
    -------
    dict
        The JSON object given as ``save(..., metadata=...)``. The file's framing, checksum and
        header are checked (``ValueError`` as ``load``); the model itself is not decoded.
    """
    header = json.loads(_native.read_model_header(_read_model_file(path), **_limits()))
    return header.get("metadata", {})
