"""Data files a user brings: svmlight/libsvm with ``qid:`` tasks, CSV and Parquet (``omtl learn``).

- svmlight/libsvm (``.svm``, ``.svmlight``, ``.libsvm``, ``.txt``, ``.dat``): one example per line,
  ``<label> [qid:<task>] <index>:<value> ...`` and an optional ``# comment``; ``qid`` is the task
  (every line has one, or none does: then the whole file is one task). Indices are 1-based (index
  i is column i - 1) unless an index 0 appears, then 0-based (as scikit-learn's
  ``load_svmlight_file(zero_based="auto")``; its ``dump_svmlight_file`` writes 0-based files).
- CSV (``.csv``): a header row naming the columns; a task column and a label column, every other
  column a numeric feature. Read with the csv module (no pandas), so errors carry line numbers.
- Parquet (``.parquet``, ``.pq``): the same columns; needs pandas and pyarrow.

Labels are -1/+1 or 0/1, tasks are kept as the strings the file holds. A bad file raises
:class:`DataFileError`, one line naming the file and, where one is to blame, the line. Rows are
neither scaled nor normalised (the loaders of the papers' data sets do that for their sets).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SVMLIGHT = "svmlight"
CSV = "csv"
PARQUET = "parquet"
EXTENSIONS = {
    ".svm": SVMLIGHT, ".svmlight": SVMLIGHT, ".libsvm": SVMLIGHT, ".txt": SVMLIGHT, ".dat": SVMLIGHT,
    ".csv": CSV, ".parquet": PARQUET, ".pq": PARQUET,
}
_LABELS = {"1": 1, "+1": 1, "-1": -1, "0": 0, "1.0": 1, "+1.0": 1, "-1.0": -1, "0.0": 0}


class DataFileError(ValueError):
    """A data file that cannot be read: the message names the file and, where one is to blame,
    the line."""


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


# ---- reading -----------------------------------------------------------------------------------
def data_format(path, fmt=None) -> str:
    """The format named by ``fmt`` (``"svmlight"``, ``"csv"``, ``"parquet"``) or by the file's
    extension.

    Parameters
    ----------
    path : str or path-like
        The data file.
    fmt : str, optional
        An explicit format; default from the extension.

    Returns
    -------
    str
        ``"svmlight"``, ``"csv"`` or ``"parquet"``.
    """
    if fmt is not None:
        if fmt not in (SVMLIGHT, CSV, PARQUET):
            raise DataFileError(f"{path}: unknown format {fmt!r} (use svmlight, csv or parquet)")
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix not in EXTENSIONS:
        raise DataFileError(f"{path}: cannot tell the format from the extension {suffix!r}; "
                            "pass --format svmlight|csv|parquet")
    return EXTENSIONS[suffix]


def read_data(path, *, fmt=None, task_column="task", label_column="label", n_features=None,
              feature_columns=None, require_labels=True, zero_based=None) -> DataFile:
    """Reads a data file (see the module docstring for the formats).

    Parameters
    ----------
    path : str or path-like
        The data file.
    fmt : str, optional
        ``"svmlight"``, ``"csv"`` or ``"parquet"``; default from the extension.
    task_column, label_column : str
        CSV/Parquet: the columns holding the task and the label.
    n_features : int, optional
        svmlight: the width of X (a model's ``n_features_in_``); an index beyond it is an error.
        Default: the largest index in the file.
    feature_columns : list of str, optional
        CSV/Parquet: the feature columns a model was trained on, in its order (the file must have
        them all, in any order). Default: every column but the task and label columns.
    require_labels : bool
        CSV/Parquet: whether the label column must be present (``omtl predict`` does not need it).
    zero_based : bool, optional
        svmlight: whether index 0 is column 0 (else index 1 is). Default: 0-based if an index 0
        appears in the file, else 1-based.

    Returns
    -------
    DataFile
        X (float64; CSR for svmlight), y (-1/+1 or 0/1 as written, ``None`` without a label column),
        the task of every row as written in the file.

    Raises
    ------
    DataFileError
        One line naming the file and, where one is to blame, the line number.
    """
    fmt = data_format(path, fmt)
    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"{path}: file not found")
    if fmt == SVMLIGHT:
        return _read_svmlight(path, n_features, zero_based)
    if fmt == CSV:
        header, rows = _csv_rows(path)
        return _from_columns(path, header, rows, task_column, label_column, feature_columns, require_labels, fmt)
    return _read_parquet(path, task_column, label_column, feature_columns, require_labels)


def _read_svmlight(path: Path, n_features, zero_based) -> DataFile:
    from .loaders import _canonical_csr

    what = "'<label> [qid:<task>] <index>:<value> ...' (label -1/+1 or 0/1, integer indices >= 0)"
    labels, linenos, tasks, lengths, cols, vals = [], [], [], [], [], []
    with_qid, first_line = None, 0
    with open(path, "rb") as f:  # bytes: a line that is not UTF-8 is reported with its number
        for lineno, line in enumerate(f, start=1):
            line = _decoded(line, path, lineno)
            toks = line.split("#", 1)[0].split()
            if not toks:
                continue
            label = _LABELS.get(toks[0])
            if label is None:
                raise DataFileError(f"{path}, line {lineno}: label {toks[0][:30]!r}; expected {what}")
            has_qid = len(toks) > 1 and toks[1].startswith("qid:")
            if with_qid is None:
                with_qid, first_line = has_qid, lineno
            elif has_qid != with_qid:
                raise DataFileError(f"{path}, line {lineno}: {'a' if has_qid else 'no'} qid: field, unlike line "
                                    f"{first_line} (either every line names its task or none does)")
            if has_qid:
                task = toks[1][4:]
                if not task:
                    raise DataFileError(f"{path}, line {lineno}: empty qid:; expected {what}")
                tasks.append(task)
            feats = toks[2:] if has_qid else toks[1:]
            for tok in feats:
                index, sep, value = tok.partition(":")
                try:
                    j, v = int(index), float(value)
                except ValueError:
                    j, v = 0, math.nan
                if not sep or j < 0 or not math.isfinite(v):
                    raise DataFileError(f"{path}, line {lineno}: feature {tok[:40]!r}; expected {what}")
                if j == 0 and zero_based is False:
                    raise DataFileError(f"{path}, line {lineno}: feature index 0, but the model was trained on a "
                                        "1-based file")
                if n_features is not None and j - (0 if zero_based else 1) >= n_features:
                    raise DataFileError(f"{path}, line {lineno}: feature index {j} beyond the model's "
                                        f"{n_features} features")
                cols.append(j)
                vals.append(v)
            labels.append(label)
            linenos.append(lineno)
            lengths.append(len(feats))
    if not labels:
        raise DataFileError(f"{path}: no examples; expected lines {what}")
    y = _label_array(path, labels, linenos)
    cols = np.array(cols, dtype=np.int64)
    if zero_based is None:
        zero_based = bool(cols.size) and int(cols.min()) == 0
    if not zero_based:
        cols -= 1
    width = n_features if n_features is not None else (int(cols.max()) + 1 if cols.size else 1)
    rows = np.repeat(np.arange(len(labels), dtype=np.int64), lengths)
    X = _canonical_csr(rows, cols, np.array(vals, dtype=np.float64), (len(labels), width))
    task_labels = tasks if with_qid else ["0"] * len(labels)
    return DataFile(X=X, y=y, task_labels=task_labels, fmt=SVMLIGHT, zero_based=zero_based)


def _decoded(line: bytes, path: Path, lineno: int) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        raise DataFileError(f"{path}, line {lineno}: not UTF-8 text") from None


def _label_array(path: Path, labels, linenos) -> np.ndarray:
    """Labels as written: all in {-1, +1} or all in {0, 1}; else an error at the first line that
    breaks the form the file started with."""
    y = np.array(labels, dtype=np.int64)
    has_minus, has_zero = (y == -1), (y == 0)
    if has_minus.any() and has_zero.any():
        first = int(np.flatnonzero(has_zero if np.argmax(has_minus) < np.argmax(has_zero) else has_minus)[0])
        raise DataFileError(f"{path}, line {linenos[first]}: label {labels[first]} mixes -1/+1 with 0/1 labels")
    return y


def _csv_rows(path: Path):
    """The header and the data rows of a CSV file, each row with its line number."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise DataFileError(f"{path}: empty file; expected a header row naming the columns")
            rows = [(reader.line_num, row) for row in reader if row]
    except UnicodeDecodeError:
        raise DataFileError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise DataFileError(f"{path}: {exc}") from None
    return [h.strip() for h in header], rows


def _from_columns(path, header, rows, task_column, label_column, feature_columns, require_labels, fmt) -> DataFile:
    """A DataFile from named columns (CSV, or Parquet converted to rows of strings and numbers)."""
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise DataFileError(f"{path}: column {dup!r} appears twice in the header")
    if task_column not in header:
        raise DataFileError(f"{path}: no task column {task_column!r} (columns: {', '.join(header)}); "
                            "name it with --task-column")
    has_label = label_column in header
    if require_labels and not has_label:
        raise DataFileError(f"{path}: no label column {label_column!r} (columns: {', '.join(header)}); "
                            "name it with --label-column")
    if feature_columns is None:
        feature_columns = [h for h in header if h not in (task_column, label_column)]
        if not feature_columns:
            raise DataFileError(f"{path}: no feature columns besides {task_column!r} and {label_column!r}")
    missing = [c for c in feature_columns if c not in header]
    if missing:
        raise DataFileError(f"{path}: feature columns {missing} of the model are missing")
    where = {name: i for i, name in enumerate(header)}
    t_at, l_at = where[task_column], where.get(label_column) if has_label else None
    f_at = [where[c] for c in feature_columns]
    X = np.empty((len(rows), len(f_at)), dtype=np.float64)
    tasks, labels, linenos = [], [], []
    for r, (lineno, row) in enumerate(rows):
        if len(row) != len(header):
            raise DataFileError(f"{path}, line {lineno}: {len(row)} fields, the header has {len(header)}")
        for c, at in enumerate(f_at):
            value = row[at]
            try:
                v = float(value)
            except (TypeError, ValueError):
                v = math.nan
            if not math.isfinite(v):
                raise DataFileError(f"{path}, line {lineno}: column {header[at]!r} holds {str(value)[:30]!r}; "
                                    "expected a finite number")
            X[r, c] = v
        task = str(row[t_at]).strip()
        if not task:
            raise DataFileError(f"{path}, line {lineno}: empty task in column {task_column!r}")
        tasks.append(task)
        if l_at is not None:
            label = _LABELS.get(str(row[l_at]).strip())
            if label is None:
                raise DataFileError(f"{path}, line {lineno}: label {str(row[l_at])[:30]!r} in column "
                                    f"{label_column!r}; expected -1/+1 or 0/1")
            labels.append(label)
        linenos.append(lineno)
    if not rows:
        raise DataFileError(f"{path}: no examples after the header")
    y = _label_array(path, labels, linenos) if l_at is not None else None
    return DataFile(X=X, y=y, task_labels=tasks, fmt=fmt, feature_columns=list(feature_columns))


def _read_parquet(path, task_column, label_column, feature_columns, require_labels) -> DataFile:
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
    rows = [(r + 1, ["" if v is None else v for v in values]) for r, values in enumerate(frame.itertuples(index=False))]
    try:
        return _from_columns(path, header, rows, task_column, label_column, feature_columns, require_labels, PARQUET)
    except DataFileError as exc:
        raise DataFileError(str(exc).replace(", line ", ", row ")) from None
