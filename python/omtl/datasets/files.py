"""Data files a user brings: svmlight/libsvm with ``qid:`` tasks, Vowpal Wabbit's text format, CSV and
Parquet (``omtl learn``), read in chunks of bounded size by the engine's streaming readers
(``omtl._native.NativeFileReader``, src/io/), plain or gzip-compressed, from a file or standard
input (``"-"``).

- svmlight/libsvm (``.svm``, ``.svmlight``, ``.libsvm``, ``.txt``, ``.dat``): one example per line,
  ``<label> [qid:<task>] <index>:<value> ...`` and an optional ``# comment``; ``qid`` is the task
  (every line has one, or none does: then the whole file is one task, ``"0"``). Indices are 1-based
  (index i is column i - 1) unless an index 0 appears, then 0-based (as scikit-learn's
  ``load_svmlight_file(zero_based="auto")``); the width is the largest index. Both are found by a
  quick first pass over a file; standard input or a pipe cannot be read twice, so there
  ``n_features`` is needed and indices are 1-based unless ``zero_based=True`` (``omtl learn``
  needs no width there: MTLinear widens as it reads).
- Vowpal Wabbit (``.vw``): ``<label> [1] ['tag]|<namespace>[:scale] <name>[:<value>] ...``; the task is
  the one name in the namespace ``t`` (``task_namespace``), or the tag (``task_namespace=None``). A
  name is hashed into ``n_features`` columns (default ``2**18``) exactly as
  ``omtl.hash_features`` hashes the key ``name`` (default namespace) or ``namespace^name``
  (scikit-learn's ``FeatureHasher``, MurmurHash3 seed 0); a name of digits only is its own column
  index (modulo ``n_features``, as VW masks indices). Importance weights other than 1 are refused.
- CSV (``.csv``): a header row naming the columns; a task column and a label column, every other
  column a numeric feature. Quoted fields may not span lines.
- Parquet (``.parquet``, ``.pq``): the same columns; needs pandas and pyarrow (read whole).

A ``.gz`` suffix is looked through for the format (``a.svm.gz`` is svmlight); compression itself is
recognised by its magic bytes. Labels are -1/+1 or 0/1, tasks are the strings the file holds. A
UTF-8 byte-order mark and CRLF line ends are accepted. A bad file raises ``DataFileError``, one
line naming the file and, where one is to blame, the line. Rows are neither scaled nor normalised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .._file_formats import (  # noqa: F401  (re-exported: the names of this module's interface)
    CSV,
    DEFAULT_CHUNK_BYTES,
    DEFAULT_CHUNK_ROWS,
    DEFAULT_HASHED_FEATURES,
    FORMATS,
    PARQUET,
    SVMLIGHT,
    VW,
    DataFileError,
    data_format,
    native_reading,
)

_LABELS = {"1": 1, "+1": 1, "-1": -1, "0": 0, "1.0": 1, "+1.0": 1, "-1.0": -1, "0.0": 0}


@dataclass
class DataFile:
    """What a data file holds: features, labels (``None`` where a file has none) and the task of
    every row as it is written in the file."""

    X: object  # ndarray or CSR matrix
    y: np.ndarray | None
    task_labels: list
    fmt: str
    feature_columns: list = field(default_factory=list)  # CSV/Parquet: the feature columns' names
    zero_based: bool | None = None  # svmlight: whether index 0 is column 0
    rows: list = field(default_factory=list)  # Parquet: each row's number in the table (from 1)
    n_skipped: int = 0  # Parquet: rows skipped (skip_bad_lines), and the first one's message
    first_skipped: str | None = None


class FileChunk(tuple):
    """One chunk of ``iter_file``: unpacks as ``(X, y, tasks)``; also carries ``lines`` (the
    line number of each row), ``n_skipped`` and ``first_skipped`` (bad lines passed over with
    ``skip_bad_lines``, and the first one's message), ``bytes_read`` (input bytes so far) and
    ``feature_columns`` (CSV)."""

    def __new__(cls, X, y, tasks, **info):
        chunk = super().__new__(cls, (X, y, tasks))
        chunk.__dict__.update(info)
        return chunk

    @property
    def X(self):
        return self[0]

    @property
    def y(self):
        return self[1]

    @property
    def tasks(self):
        return self[2]


# ---- reading -----------------------------------------------------------------------------------
def _native():
    from .. import _native

    return _native


def scan_svmlight(path, *, max_line_bytes=None):
    """A quick pass over an svmlight file: its width, indexing and tasks, before reading it.

    Parameters
    ----------
    path : str or path-like
        The file (not standard input, which cannot be read twice).
    max_line_bytes : int, optional
        The line cap of the pass.

    Returns
    -------
    (int or None, bool, list of str)
        The largest feature index (None without features), whether an index 0 appears, and the
        ``qid:`` tasks in order of first appearance.
    """
    limit = max_line_bytes or _native().reader_limits()[1]
    try:
        return _native().scan_svmlight(str(path), int(limit))
    except ValueError as exc:
        raise DataFileError(str(exc)) from None


def svmlight_layout(path, *, n_features=None, zero_based=None, max_line_bytes=None, scan=None):
    """The width and indexing of an svmlight file: what is given, the rest from a quick pass.

    Parameters
    ----------
    path : str or path-like
        The file (``"-"``: standard input, which cannot be read twice).
    n_features : int, optional
        The width; default the largest index (+ 1 when 0-based).
    zero_based : bool, optional
        Default: 0-based if an index 0 appears, else 1-based.
    max_line_bytes : int, optional
        The line cap of the pass.
    scan : tuple, optional
        A ``scan_svmlight`` result already at hand.

    Returns
    -------
    (int, bool)
        ``(n_features, zero_based)``.
    """
    if n_features is not None and zero_based is not None:
        return int(n_features), bool(zero_based)
    if _is_stream(path):
        if n_features is None:
            name = "<stdin>" if str(path) == "-" else str(path)
            raise DataFileError(f"{name}: reading svmlight from standard input or a pipe needs the width "
                                "(n_features): a stream cannot be read ahead to find its largest index")
        return int(n_features), bool(zero_based)
    largest, has_zero, _ = scan if scan is not None else scan_svmlight(path, max_line_bytes=max_line_bytes)
    if zero_based is None:
        zero_based = has_zero
    if n_features is None:
        n_features = 1 if largest is None else max(1, largest + (1 if zero_based else 0))
    return int(n_features), bool(zero_based)


def _is_stream(path) -> bool:
    """Whether ``path`` can be read once only: standard input, a pipe, a named pipe, a device."""
    import os
    import stat

    if str(path) == "-":
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


class _Labels:
    """Task labels in id order, grown by doubling, as a NumPy str array: a chunk's tasks are one
    gather, and a str array is taken by the learners without a per-row type check."""

    def __init__(self):
        self.values = np.empty(16, dtype="<U1")
        self.n = 0

    def extend(self, new):
        if not new:
            return
        added = np.array(new, dtype=str)
        kind = np.promote_types(self.values.dtype, added.dtype)
        if self.n + len(new) > self.values.shape[0] or kind != self.values.dtype:
            grown = np.empty(max(2 * self.values.shape[0], self.n + len(new)), dtype=kind)
            grown[: self.n] = self.values[: self.n]
            self.values = grown
        self.values[self.n : self.n + len(new)] = added
        self.n += len(new)


def iter_file(path, *, chunk_rows=DEFAULT_CHUNK_ROWS, fmt=None, n_features=None, zero_based=None,
              task_namespace="t", task_column="task", label_column="label", feature_columns=None,
              require_labels=True, skip_bad_lines=False, max_line_bytes=None, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """Reads a data file in chunks of bounded size, parsing on a thread of its own.

    Memory holds a few chunks, whatever the file's size: a learner can learn a file larger than
    memory chunk by chunk (``partial_fit(X, y, tasks=tasks)`` on each).

    Parameters
    ----------
    path : str or path-like
        The data file (svmlight, VW or CSV; plain or gzip-compressed); ``"-"`` reads standard input.
    chunk_rows : int, default=8192
        Rows per chunk at most.
    fmt : str, optional
        ``"svmlight"``, ``"vw"`` or ``"csv"``; default from the extension (required for ``"-"``).
    n_features : int, optional
        The width of X. svmlight: default the largest index found by a first pass (required for
        standard input); VW: the hashed width, default ``2**18``; CSV: the feature columns.
    zero_based : bool, optional
        svmlight: whether index 0 is column 0; default 0-based if an index 0 appears (1-based on
        standard input).
    task_namespace : str or None, default="t"
        VW: the namespace holding the task's name; ``None``: the tag is the task.
    task_column : str, default="task"
        CSV: the column of the task.
    label_column : str, default="label"
        CSV: the column of the label.
    feature_columns : list of str, optional
        CSV: the feature columns in model order; default every other column, in file order.
    require_labels : bool, default=True
        Whether a row without a label is an error (``False``: its label is NaN).
    skip_bad_lines : bool, default=False
        Skip malformed lines (counted in each chunk's ``n_skipped``) instead of raising.
    max_line_bytes : int, optional
        The longest line accepted (default 64 MiB).
    chunk_bytes : int, default=1 MiB
        A chunk ends once it holds this many bytes of input.

    Returns
    -------
    iterator of FileChunk
        Each ``(X, y, tasks)``: X a CSR matrix (float64, ``n_features`` columns), y the labels as
        written (int64 -1/+1 or 0/1; ``None`` when no row of the chunk has one, float64 with NaN
        when some lack one), tasks a NumPy str array of the task labels as written.

    Raises
    ------
    DataFileError
        One line naming the file and, where one is to blame, the line.
    """
    fmt = data_format(path, fmt)
    if fmt == PARQUET:
        raise DataFileError(f"{path}: Parquet is read whole (read_data), not streamed")
    native = _native()
    max_columns, default_cap = native.reader_limits()
    cap = default_cap if max_line_bytes is None else int(max_line_bytes)
    if fmt == SVMLIGHT:
        n_features, zero_based = svmlight_layout(path, n_features=n_features, zero_based=zero_based,
                                                 max_line_bytes=cap)
    elif fmt == VW:
        n_features = DEFAULT_HASHED_FEATURES if n_features is None else int(n_features)
    else:
        n_features = max_columns if n_features is None else int(n_features)
    if not 1 <= n_features <= max_columns:
        raise DataFileError(f"{path}: {n_features} feature columns; the engine takes 1 to {max_columns}")
    try:
        reading = native_reading(fmt, max_line_bytes=cap, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes,
                                 skip_bad_lines=skip_bad_lines, task_namespace=task_namespace, task_column=task_column,
                                 label_column=label_column, feature_columns=feature_columns,
                                 require_labels=require_labels)
        reader = native.NativeFileReader(str(path), reading, n_features, bool(zero_based))
    except (ValueError, OverflowError) as exc:
        raise DataFileError(str(exc)) from None
    labels = _Labels()
    columns = None
    while True:
        try:
            item = next(reader, None)
        except ValueError as exc:
            raise DataFileError(str(exc)) from None
        if item is None:
            return
        indptr, indices, data, y, task_ids, new_tasks, lines, n_skipped, first_skipped, bytes_read, names = item
        if names:
            columns = names
        width = len(columns) if fmt == CSV and columns else n_features
        X = sp.csr_matrix((data, indices, indptr), shape=(len(y), width))
        X.has_sorted_indices = True  # the reader sorts every row and sums duplicates
        X.has_canonical_format = True
        labels.extend(new_tasks)
        tasks = labels.values[task_ids]
        missing = np.isnan(y)
        if not missing.any():
            y = y.astype(np.int64)
        elif missing.all():
            y = None
        yield FileChunk(X, y, tasks, lines=lines, n_skipped=n_skipped, first_skipped=first_skipped,
                        bytes_read=bytes_read, feature_columns=list(columns or []), n_features=width,
                        zero_based=zero_based if fmt == SVMLIGHT else None)


def read_data(path, *, fmt=None, task_column="task", label_column="label", n_features=None,
              feature_columns=None, require_labels=True, zero_based=None, task_namespace="t",
              skip_bad_lines=False) -> DataFile:
    """Reads a whole data file (see the module docstring for the formats), through ``iter_file``.

    Parameters
    ----------
    path : str or path-like
        The data file.
    fmt : str, optional
        ``"svmlight"``, ``"vw"``, ``"csv"`` or ``"parquet"``; default from the extension.
    task_column, label_column : str
        CSV/Parquet: the columns holding the task and the label.
    n_features : int, optional
        The width of X (a model's ``n_features_in_``); an index beyond it is an error. Default:
        svmlight the largest index in the file, VW ``2**18``.
    feature_columns : list of str, optional
        CSV/Parquet: the feature columns a model was trained on, in its order (the file must have
        them all, in any order). Default: every column but the task and label columns.
    require_labels : bool
        Whether the labels must be present (``omtl predict`` does not need them).
    zero_based : bool, optional
        svmlight: whether index 0 is column 0 (else index 1 is). Default: 0-based if an index 0
        appears in the file, else 1-based.
    task_namespace : str or None
        VW: the namespace naming the task (``None``: the tag).
    skip_bad_lines : bool
        Skip a malformed line (a Parquet row without a task id, say) instead of raising (counted in
        ``n_skipped``).

    Returns
    -------
    DataFile
        X (float64; CSR for svmlight and VW, dense for CSV), y (-1/+1 or 0/1 as written, ``None``
        without labels), the task of every row as written in the file.

    Raises
    ------
    DataFileError
        One line naming the file and, where one is to blame, the line number.
    """
    fmt = data_format(path, fmt)
    if str(path) != "-" and not Path(path).is_file():
        raise DataFileError(f"{path}: file not found")
    if fmt == PARQUET:
        return _read_parquet(Path(path), task_column, label_column, feature_columns, require_labels, skip_bad_lines)
    chunks = list(iter_file(path, fmt=fmt, n_features=n_features, zero_based=zero_based, task_column=task_column,
                            label_column=label_column, feature_columns=feature_columns,
                            require_labels=require_labels, task_namespace=task_namespace, chunk_rows=1 << 16,
                            skip_bad_lines=skip_bad_lines))
    if not chunks or sum(c.X.shape[0] for c in chunks) == 0:
        raise DataFileError(f"{path}: no examples")
    X = sp.vstack([c.X for c in chunks], format="csr")
    ys = [c.y for c in chunks]
    y = None if all(v is None for v in ys) else np.concatenate(
        [np.full(c.X.shape[0], np.nan) if v is None else v for c, v in zip(chunks, ys)])
    if y is not None and y.dtype.kind == "f" and not np.isnan(y).any():
        y = y.astype(np.int64)
    tasks = list(np.concatenate([c.tasks for c in chunks]))
    columns = chunks[-1].feature_columns
    if fmt == CSV:
        X = X.toarray()
    skipped = [c for c in chunks if c.n_skipped]
    return DataFile(X=X, y=y, task_labels=tasks, fmt=fmt, feature_columns=columns,
                    zero_based=chunks[0].zero_based, n_skipped=sum(c.n_skipped for c in chunks),
                    first_skipped=skipped[0].first_skipped if skipped else None)


def _label_array(path: Path, labels, linenos) -> np.ndarray:
    """Labels as written: all in {-1, +1} or all in {0, 1}; else an error at the first line that
    breaks the form the file started with."""
    y = np.array(labels, dtype=np.int64)
    has_minus, has_zero = (y == -1), (y == 0)
    if has_minus.any() and has_zero.any():
        first = int(np.flatnonzero(has_zero if np.argmax(has_minus) < np.argmax(has_zero) else has_minus)[0])
        raise DataFileError(f"{path}, line {linenos[first]}: label {labels[first]} mixes -1/+1 with 0/1 labels")
    return y


def _missing(value) -> bool:
    """Whether a table cell holds no value (None, NaN, pandas' NA/NaT)."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and its kin are the values not equal to themselves
    except (TypeError, ValueError):
        return False


def _from_columns(path, header, rows, task_column, label_column, feature_columns, require_labels, fmt,
                  skip_bad_lines=False) -> DataFile:
    """A DataFile from named columns (CSV, or Parquet converted to rows of strings and numbers); a
    bad row is an error, or with ``skip_bad_lines`` skipped and counted."""
    where = {}  # name -> column, one pass (a wide header has 10⁵ columns)
    for i, name in enumerate(header):
        if where.setdefault(name, i) != i:
            raise DataFileError(f"{path}: column {name!r} appears twice in the header")
    if task_column not in where:
        raise DataFileError(f"{path}: no task column {task_column!r} (columns: {', '.join(header)}); "
                            "name it with --task-column")
    has_label = label_column in where
    if require_labels and not has_label:
        raise DataFileError(f"{path}: no label column {label_column!r} (columns: {', '.join(header)}); "
                            "name it with --label-column")
    if feature_columns is None:
        feature_columns = [h for h in header if h not in (task_column, label_column)]
        if not feature_columns:
            raise DataFileError(f"{path}: no feature columns besides {task_column!r} and {label_column!r}")
    missing = [c for c in feature_columns if c not in where]
    if missing:
        raise DataFileError(f"{path}: feature columns {missing} of the model are missing")
    t_at, l_at = where[task_column], where.get(label_column) if has_label else None
    f_at = [where[c] for c in feature_columns]
    X = np.empty((len(rows), len(f_at)), dtype=np.float64)
    tasks, labels, linenos = [], [], []
    skipped, first_skipped = 0, None
    for lineno, row in rows:
        try:
            x, task, label = _row_of(path, header, lineno, row, f_at, t_at, l_at, task_column, label_column)
        except DataFileError as exc:
            if not skip_bad_lines:
                raise
            skipped += 1
            first_skipped = first_skipped or str(exc)
            continue
        X[len(tasks)] = x
        tasks.append(task)
        if label is not None:
            labels.append(label)
        linenos.append(lineno)
    if not rows:
        raise DataFileError(f"{path}: no examples after the header")
    y = _label_array(path, labels, linenos) if l_at is not None else None
    return DataFile(X=X[: len(tasks)], y=y, task_labels=tasks, fmt=fmt, feature_columns=list(feature_columns),
                    rows=linenos, n_skipped=skipped, first_skipped=first_skipped)


def _row_of(path, header, lineno, row, f_at, t_at, l_at, task_column, label_column):
    """One row's features, task and label (None without a label column); a DataFileError naming the
    line for a bad one."""
    if len(row) != len(header):
        raise DataFileError(f"{path}, line {lineno}: {len(row)} fields, the header has {len(header)}")
    x = np.empty(len(f_at), dtype=np.float64)
    for c, at in enumerate(f_at):
        value = row[at]
        try:
            v = float(value)
        except (TypeError, ValueError):
            v = math.nan
        if not math.isfinite(v):
            raise DataFileError(f"{path}, line {lineno}: column {header[at]!r} holds {str(value)[:30]!r}; "
                                "expected a finite number")
        x[c] = v
    if _missing(row[t_at]):
        raise DataFileError(f"{path}, line {lineno}: no task id in column {task_column!r}")
    task = str(row[t_at]).strip()
    if not task:
        raise DataFileError(f"{path}, line {lineno}: empty task in column {task_column!r}")
    label = None
    if l_at is not None:
        label = _LABELS.get(str(row[l_at]).strip())
        if label is None:
            raise DataFileError(f"{path}, line {lineno}: label {str(row[l_at])[:30]!r} in column "
                                f"{label_column!r}; expected -1/+1 or 0/1")
    return x, task, label


def _read_parquet(path, task_column, label_column, feature_columns, require_labels, skip_bad_lines=False) -> DataFile:
    try:
        import pandas as pd
    except ImportError:
        raise DataFileError(f"{path}: reading Parquet needs pandas and pyarrow (pip install pandas pyarrow)") from None
    try:
        frame = pd.read_parquet(path)
    except ImportError as exc:
        raise DataFileError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow): {exc}") from None
    except Exception as exc:  # pyarrow raises its own error types for corrupt files
        raise DataFileError(f"{path}: cannot be read as Parquet ({type(exc).__name__}: {exc})") from None
    header = [str(c) for c in frame.columns]
    # Row r of the frame is reported as "line r + 2" would be in a CSV; Parquet has no lines, so
    # the rows are numbered from 1 instead.
    rows = [(r + 1, list(values)) for r, values in enumerate(frame.itertuples(index=False))]
    try:
        data = _from_columns(path, header, rows, task_column, label_column, feature_columns, require_labels, PARQUET,
                             skip_bad_lines)
    except DataFileError as exc:
        raise DataFileError(str(exc).replace(", line ", ", row ")) from None
    if data.first_skipped:
        data.first_skipped = data.first_skipped.replace(", line ", ", row ")
    return data
