"""``omtl learn`` and ``omtl predict``: a learner on a data file, without writing Python.

Files (the format comes from the extension, or ``--format``):

- svmlight/libsvm (``.svm``, ``.svmlight``, ``.libsvm``, ``.txt``, ``.dat``): one example per line,
  ``<label> [qid:<task>] <index>:<value> ...`` and an optional ``# comment``; ``qid`` is the task
  (every line has one, or none does: then the whole file is one task). Indices are 1-based (index
  i is column i - 1) unless an index 0 appears, then 0-based (as scikit-learn's
  ``load_svmlight_file(zero_based="auto")``; its ``dump_svmlight_file`` writes 0-based files).
- CSV (``.csv``): a header row naming the columns; ``--task-column`` and ``--label-column`` name the
  task and the label, every other column is a numeric feature.
- Parquet (``.parquet``, ``.pq``): the same columns; needs pandas and pyarrow.

Labels are -1/+1 or 0/1. Task ids may be any strings: they become integer ids in order of first
appearance (:func:`map_tasks`), and ``--save`` keeps that mapping (and the feature columns) in the
model file's metadata, so ``omtl predict`` maps a file the same way. A bad file raises
:class:`DataFileError`, which the command line prints as one line naming the file and line.
"""

from __future__ import annotations

import csv
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SVMLIGHT = "svmlight"
CSV = "csv"
PARQUET = "parquet"
_EXTENSIONS = {
    ".svm": SVMLIGHT, ".svmlight": SVMLIGHT, ".libsvm": SVMLIGHT, ".txt": SVMLIGHT, ".dat": SVMLIGHT,
    ".csv": CSV, ".parquet": PARQUET, ".pq": PARQUET,
}
_LABELS = {"1": 1, "+1": 1, "-1": -1, "0": 0, "1.0": 1, "+1.0": 1, "-1.0": -1, "0.0": 0}
# The key of the model file's metadata that holds what `omtl learn` read (see save_model).
METADATA_KEY = "omtl_cli"
_BOOLS = {"true": True, "false": False}


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
    if suffix not in _EXTENSIONS:
        raise DataFileError(f"{path}: cannot tell the format from the extension {suffix!r}; "
                            "pass --format svmlight|csv|parquet")
    return _EXTENSIONS[suffix]


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
    from .datasets.loaders import _canonical_csr

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


# ---- task labels -------------------------------------------------------------------------------
def map_tasks(task_labels, known=None, *, path="") -> tuple[np.ndarray, list]:
    """Integer task ids for the tasks as written in a file.

    Parameters
    ----------
    task_labels : sequence of str
        The task of every row, as written.
    known : list of str, optional
        A model's mapping (task ``known[i]`` is id ``i``). Default: a new mapping, tasks numbered
        in order of first appearance.
    path : str
        The file, for the message of an unknown task.

    Returns
    -------
    ids : ndarray of int64
        One id per row.
    mapping : list of str
        The labels in id order (``known`` itself when given).

    Raises
    ------
    DataFileError
        With ``known``, for a task the model has not seen.
    """
    if known is None:
        index: dict = {}
        ids = np.fromiter((index.setdefault(t, len(index)) for t in task_labels), dtype=np.int64, count=len(task_labels))
        return ids, list(index)
    index = {t: i for i, t in enumerate(known)}
    ids = np.empty(len(task_labels), dtype=np.int64)
    for r, t in enumerate(task_labels):
        i = index.get(t)
        if i is None:
            shown = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
            raise DataFileError(f"{path}: example {r + 1} has task {t!r}, which the model never saw "
                                f"(its {len(known)} tasks: {shown})")
        ids[r] = i
    return ids, list(known)


# ---- learners and their parameters -------------------------------------------------------------
def learner_classes() -> dict:
    """The learners ``--learner`` accepts: omtl's native learner classes (and aliases) by name.

    Returns
    -------
    dict
        Name -> class.
    """
    from . import learners

    return {name: getattr(learners, name) for name in learners.__all__}


def parse_value(text: str):
    """A ``--param`` value: int, float, bool (true/false), None (none) or else the string.

    Parameters
    ----------
    text : str
        The text after ``=``.

    Returns
    -------
    int, float, bool, None or str
    """
    low = text.strip().lower()
    if low in _BOOLS:
        return _BOOLS[low]
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def build_learner(name: str, params, n_tasks: int):
    """The learner ``--learner NAME --param k=v ...`` describes, for ``n_tasks`` tasks.

    Parameters
    ----------
    name : str
        A class name of :func:`learner_classes` (case-insensitive).
    params : list of str
        ``"key=value"`` strings (values through :func:`parse_value`).
    n_tasks : int
        Number of tasks in the data.

    Returns
    -------
    omtl learner
        Unfitted; its parameters are validated on the first batch.

    Raises
    ------
    ValueError
        One line: an unknown learner or parameter (listing the valid ones), or a malformed pair.
    """
    classes = learner_classes()
    by_lower = {k.lower(): k for k in classes}
    if name.lower() not in by_lower:
        raise ValueError(f"unknown learner {name!r}; choose one of: {', '.join(classes)}")
    cls = classes[by_lower[name.lower()]]
    valid = [p for p in cls._param_names() if p != "n_tasks"]
    kwargs = {}
    for pair in params or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--param {pair!r}: expected key=value")
        if key == "n_tasks":
            raise ValueError("--param n_tasks: the number of tasks comes from the data file")
        if key not in valid:
            raise ValueError(f"{cls.__name__} has no parameter {key!r}; valid: {', '.join(valid)}")
        kwargs[key] = parse_value(value)
    return cls(n_tasks=n_tasks, **kwargs)


# ---- the two commands ----------------------------------------------------------------------------
def _write_predictions(path, predictions) -> None:
    Path(path).write_text("".join(f"{int(p)}\n" for p in predictions))


def _labels_as_written(pm1: np.ndarray, y: np.ndarray) -> np.ndarray:
    """±1 predictions in the label form of the file (a file with a 0 label gets 0/1)."""
    return np.where(pm1 > 0, 1, 0 if (y == 0).any() else -1)


def _one_line_errors(run):
    """A bad file, learner or parameter is the user's to fix: one line on stderr, exit code 2,
    no traceback."""

    def wrapper(args) -> int:
        try:
            return run(args)
        except (ValueError, TypeError, OSError) as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            print(f"omtl {args.command}: {message}", file=sys.stderr)
            return 2

    wrapper.__doc__ = run.__doc__
    return wrapper


@_one_line_errors
def run_learn(args) -> int:
    """``omtl learn``: one prequential pass over a data file, then a summary line."""
    import omtl

    from .cli import show_progress

    data = read_data(args.data, fmt=args.format, task_column=args.task_column, label_column=args.label_column)
    ids, mapping = map_tasks(data.task_labels, path=args.data)
    model = build_learner(args.learner, args.param, len(mapping))
    report = omtl.evaluate(model, data.X, data.y, tasks=ids, progress=show_progress(args))
    print(
        f"{args.data}: {report.n} examples, {data.X.shape[1]} features, {len(mapping)} tasks; "
        f"{type(model).__name__}, one prequential pass (each example predicted before learning from it)"
    )
    print(
        f"error {100 * report.error_rate:.2f} % ({report.mistakes} mistakes), F1 micro {report.f1_micro:.4f}, "
        f"F1 macro {report.f1_macro:.4f}, {report.examples_per_second:,.0f} examples/s ({report.seconds:.3f} s)"
    )
    if args.predictions:
        _write_predictions(args.predictions, _labels_as_written(report.predictions, data.y))
        print(f"predictions (made before each update) written to {args.predictions}")
    if args.save:
        save_model(model, args.save, data, mapping, args)
        print(f"model written to {args.save} (omtl predict DATA --model {args.save}; or omtl.load in Python)")
    return 0


def save_model(model, path, data: DataFile, mapping, args) -> None:
    """``omtl.save`` with what ``omtl predict`` needs to read a file the same way."""
    import omtl

    metadata = {METADATA_KEY: {
        "format": data.fmt,
        "tasks": mapping,
        "feature_columns": data.feature_columns,
        "task_column": args.task_column,
        "label_column": args.label_column,
        "zero_one_labels": bool((data.y == 0).any()),  # predict writes labels as the training file did
        "zero_based": data.zero_based,  # svmlight indexing, so predict reads a file the same way
    }}
    omtl.save(model, path, metadata=metadata)


@_one_line_errors
def run_predict(args) -> int:
    """``omtl predict``: labels for every example of a data file from a saved model, no update."""
    import omtl
    from omtl.persistence import load_metadata

    model = omtl.load(args.model)
    saved = load_metadata(args.model).get(METADATA_KEY, {})
    if not model._is_fitted():
        raise ValueError(f"{args.model}: the model was never trained")
    fmt = args.format
    if fmt is None and Path(args.data).suffix.lower() not in _EXTENSIONS:
        fmt = saved.get("format")  # a file without a known extension: the format learn read
    data = read_data(
        args.data,
        fmt=fmt,
        task_column=args.task_column or saved.get("task_column", "task"),
        label_column=args.label_column or saved.get("label_column", "label"),
        n_features=int(model.n_features_in_),
        feature_columns=saved.get("feature_columns") or None,
        require_labels=False,
        zero_based=saved.get("zero_based"),
    )
    if data.X.shape[1] != model.n_features_in_:
        raise DataFileError(f"{args.data}: {data.X.shape[1]} feature columns, the model was trained on "
                            f"{model.n_features_in_}")
    known = saved.get("tasks")
    if known is None:  # a model saved from Python: the file's tasks are the model's integer ids
        known = [str(i) for i in range(model.n_tasks)]
    ids, _ = map_tasks(data.task_labels, known, path=args.data)
    pm1 = np.where(model.decision_function(data.X, tasks=ids) >= 0.0, 1, -1)  # as predict: a score of 0 is +1
    predictions = np.where(pm1 > 0, 1, 0 if saved.get("zero_one_labels") else -1)
    # The predictions go to the file or to standard output; the summary to wherever they do not.
    summary = sys.stdout if args.predictions else sys.stderr
    if args.predictions:
        _write_predictions(args.predictions, predictions)
        print(f"{args.data}: {len(ids)} predictions written to {args.predictions}", file=summary)
    else:
        sys.stdout.write("".join(f"{int(p)}\n" for p in predictions))
    if data.y is not None:
        from .evaluate import online_metrics

        _, err, f1_micro, f1_macro, *_ = online_metrics(np.where(data.y > 0, 1, -1), pm1, ids, len(known))
        print(f"against the file's labels: error {100 * err:.2f} %, F1 micro {f1_micro:.4f}, F1 macro {f1_macro:.4f}",
              file=summary)
    return 0


def add_commands(sub) -> None:
    """Adds ``learn`` and ``predict`` to the ``omtl`` command's subparsers.

    Parameters
    ----------
    sub : argparse subparsers action
        From ``ArgumentParser.add_subparsers``.

    Returns
    -------
    None
    """
    learn = sub.add_parser(
        "learn", help="one prequential pass of a learner over a data file (svmlight with qid:, CSV, Parquet)",
        description="Runs one prequential pass (predict each example, then learn from it) over DATA and prints the "
        "error rate, F1 and throughput. Formats: svmlight/libsvm ('<label> qid:<task> <index>:<value> ...'), "
        "CSV and Parquet (a task column, a label column, numeric features). Task ids may be strings.",
    )
    learn.add_argument("data", metavar="DATA", help="the data file")
    learn.add_argument("--learner", default="MTLinear", help="learner class (default MTLinear)")
    learn.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="a hyper-parameter, repeatable (values: int, float, true/false, none or text)")
    _data_options(learn)
    learn.add_argument("--predictions", metavar="FILE", default=None,
                       help="write the prediction made before each update, one per line")
    learn.add_argument("--save", metavar="FILE", default=None, help="write the trained model (omtl.save)")
    learn.add_argument("--no-progress", action="store_true", help="no progress bar (shown on a terminal only)")
    learn.set_defaults(func=run_learn)
    predict = sub.add_parser("predict", help="predict the examples of a data file with a model saved by omtl learn",
                             description="Predicts every example of DATA with the saved model (no update); the "
                             "task ids and feature columns are mapped as when the model was trained.")
    predict.add_argument("data", metavar="DATA", help="the data file")
    predict.add_argument("--model", required=True, metavar="FILE", help="a model file (omtl learn --save)")
    _data_options(predict, defaults=False)
    predict.add_argument("--predictions", metavar="FILE", default=None,
                         help="write the predictions here, one per line (default: standard output)")
    predict.set_defaults(func=run_predict)


def _data_options(parser, defaults=True) -> None:
    parser.add_argument("--format", choices=[SVMLIGHT, CSV, PARQUET], default=None,
                        help="file format (default: from the extension)")
    parser.add_argument("--task-column", default="task" if defaults else None,
                        help="CSV/Parquet: the column holding the task id (default task)")
    parser.add_argument("--label-column", default="label" if defaults else None,
                        help="CSV/Parquet: the column holding the label, -1/+1 or 0/1 (default label)")
