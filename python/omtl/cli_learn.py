"""``omtl learn`` and ``omtl predict``: a learner on a data file, without writing Python.

The files are read by :mod:`omtl.datasets.files` (svmlight/libsvm with ``qid:`` tasks, CSV,
Parquet). Task ids may be any strings: they become integer ids in order of first appearance
(:func:`map_tasks`), and ``--save`` keeps that mapping (with the feature columns, the svmlight
indexing and the label form) in the model file's metadata, so ``omtl predict`` reads a file the
same way. A bad file, learner or parameter is one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from .datasets.files import CSV, EXTENSIONS, PARQUET, SVMLIGHT, DataFile, DataFileError, read_data

# The key of the model file's metadata that holds what `omtl learn` read (see save_model).
METADATA_KEY = "omtl_cli"
_BOOLS = {"true": True, "false": False}


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
    if fmt is None and Path(args.data).suffix.lower() not in EXTENSIONS:
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
