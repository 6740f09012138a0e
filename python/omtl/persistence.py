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

import json
import math
import numbers
import os
import stat

import numpy as np

from . import _native
from . import learners as _learners
from ._atomic_file import write_atomically
from ._base import STATE_VERSION, NativeCore
from ._bookkeeping import check_restored, fitted_header
from ._bookkeeping import invalid_model_file as _fail
from ._tasks import FORGOTTEN, TaskSet
from .graph import TaskGraph, stored_edges_graph

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


def file_limits() -> dict:
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
    write_atomically(path, data)


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
        fitted = fitted_header(model)
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
            return bytes(_native.write_model_file(head, learner, **file_limits(), pending=model._pending_tuple()))
        except ValueError as exc:
            raise ValueError(str(exc).replace("cannot save this model:", f"cannot save this {cls.__name__}:", 1)) from None


# ---- reading ------------------------------------------------------------------------------------
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
            return stored_edges_graph(k, kind, [tuple(e) for e in spec["edges"]], spec["weights"])
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
            length, exact = _native.model_file_length(prefix, size, **file_limits())
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
    return loads_with_header(data)[0]


def loads_with_header(data: bytes):
    """``(model, header)`` from a model file's bytes: the model as ``loads`` gives it and the
    file's header as a dict (its ``metadata``, as ``save`` was given it)."""
    # Framing, checksum, the header's fields and the native state, checked by the crate.
    head, learner = _native.read_model_file(bytes(data), **file_limits())
    header = json.loads(head)
    model = _build(header)
    fitted = header["fitted"]
    pending = _native.read_model_pending(bytes(data), **file_limits())
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
    header = json.loads(_native.read_model_header(_read_model_file(path), **file_limits()))
    return header.get("metadata", {})
