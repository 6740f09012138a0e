"""``omtl learn`` and ``omtl predict``: a learner on a data file, without writing Python, as a Vowpal
Wabbit user expects (docs/cli.md).

Both commands run whole in the engine (``omtl._native.learn_command`` and ``predict_command``,
src/io/driver/): it builds the learner from ``--learner``/``--param`` (the class table of
src/model/estimator/table.rs) or reads the saved model, streams the file (a reader thread parses
the next chunk while the model learns the current one), writes the per-example outputs and saves
the model with how the file was read (the ``omtl_cli`` metadata), so that ``omtl predict`` reads
a file the same way. This module parses the command line, reads a Parquet file (pandas) when
the engine asks for it, and shows what the engine reports. A bad file, learner or parameter is
one line on stderr and exit code 2; Ctrl-C exits with code 130.
"""

from __future__ import annotations

import argparse
import sys

from ._file_formats import FORMATS, PARQUET, DataFileError

#: The key of a model file's metadata that holds how ``omtl learn`` read the training file.
METADATA_KEY = "omtl_cli"

#: The integer options that must be at least 1 (``--bits`` also at most 32).
_AT_LEAST_ONE = ("passes", "chunk_rows", "max_line_bytes", "n_features", "bits")


def _check_counts(args) -> None:
    """One clear line for an integer option out of range (the engine takes unsigned sizes)."""
    for name in _AT_LEAST_ONE:
        value = getattr(args, name, None)
        option = "--" + name.replace("_", "-")
        if value is not None and value < 1:
            raise ValueError(f"{option} must be an integer >= 1, got {value}")
    if getattr(args, "bits", None) is not None and args.bits > 32:
        raise ValueError(f"--bits must be at most 32 (2^32 columns), got {args.bits}")


def _request(args, **extra) -> dict:
    """The command line's values as the engine takes them (``Request`` in src/python/stream.rs)."""
    _check_counts(args)
    n_features = args.n_features
    if n_features is None and args.bits is not None:
        n_features = 2**args.bits
    return {
        "data": str(args.data), "format": args.format, "n_features": n_features, "zero_based": args.zero_based,
        "task_namespace": args.task_namespace, "task_tag": args.task_tag, "task_column": args.task_column,
        "label_column": args.label_column, "skip_bad_lines": args.skip_bad_lines,
        "max_line_bytes": args.max_line_bytes, "chunk_rows": args.chunk_rows, "quiet": args.quiet,
        "predictions": args.predictions, "raw_predictions": args.raw_predictions,
        "probabilities": args.probabilities, **extra,
    }


def _table_reader(path):
    """What the engine calls to read a Parquet file: the table as one chunk of rows (CSR arrays,
    labels, the task of every row, row numbers, feature columns, rows skipped)."""

    def read_table(task_column, label_column, feature_columns, require_labels, skip_bad_lines):
        import numpy as np
        import scipy.sparse as sp

        from .datasets.files import read_data

        data = read_data(path, fmt=PARQUET, task_column=task_column, label_column=label_column,
                         feature_columns=feature_columns, require_labels=require_labels,
                         skip_bad_lines=skip_bad_lines)
        X = sp.csr_matrix(np.asarray(data.X, dtype=np.float64))
        n = X.shape[0]
        y = np.full(n, np.nan) if data.y is None else np.asarray(data.y, dtype=np.float64)
        return (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64), y,
                [str(t) for t in data.task_labels], np.asarray(data.rows, dtype=np.int64),
                list(data.feature_columns), int(data.n_skipped), data.first_skipped)

    return read_table


def _one_line_errors(run):
    """A bad file, learner or parameter is the user's to fix: one line on stderr, exit code 2,
    no traceback (Ctrl-C: exit code 130; a closed standard output, ``| head``: exit code 0)."""

    def wrapper(args) -> int:
        try:
            return run(args)
        except BrokenPipeError:
            sys.stderr.close()
            return 0
        except (ValueError, TypeError, OSError, MemoryError, OverflowError) as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            print(f"omtl {args.command}: {message}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"omtl {args.command}: interrupted", file=sys.stderr)
            return 130

    wrapper.__doc__ = run.__doc__
    return wrapper


def _show(summary) -> None:
    if summary["text"]:
        print(summary["text"], file=sys.stderr)


@_one_line_errors
def run_learn(args) -> int:
    """``omtl learn``: progressive (predict, then learn) passes over a data file, streamed."""
    from . import _native

    err = sys.stderr
    request = _request(args, learner=args.learner, params=list(args.param), passes=args.passes,
                       initial_model=args.initial_model, save=args.save)
    try:
        summary = _native.learn_command(request, report=lambda text: print(text, file=err), write=sys.stdout.write,
                                        read_table=_table_reader(args.data))
    finally:
        sys.stdout.flush()
    _show(summary)
    return 0


@_one_line_errors
def run_predict(args) -> int:
    """``omtl predict``: labels for every example of a data file from a saved model, no update."""
    from . import _native

    try:
        summary = _native.predict_command(_request(args, model=args.model), write=sys.stdout.write,
                                          read_table=_table_reader(args.data))
    finally:
        sys.stdout.flush()
    _show(summary)
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
        "learn", help="progressive passes of a learner over a data file (svmlight with qid:, VW, CSV), streamed",
        description="Streams DATA (a file, or - for standard input; gzip is recognised) through a learner: each "
        "example is predicted, then learned (progressive validation), and a report at examples 1, 2, 4, ... goes "
        "to stderr, as Vowpal Wabbit prints it. Formats: svmlight/libsvm ('<label> qid:<task> <index>:<value> "
        "...'), VW ('<label> |t <task> |s <name>[:<value>] ...'), CSV (a task column, a label column, numeric "
        "features), Parquet. Task ids may be strings. docs/cli.md has the details.",
    )
    learn.add_argument("data", metavar="DATA", help="the data file (- : standard input)")
    learn.add_argument("--learner", default=None,
                       help="learner class, case-insensitive (default MTLinear; the classes of omtl.learners)")
    learn.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="a hyper-parameter, repeatable (values: int, float, true/false, none or text)")
    learn.add_argument("--passes", type=int, default=1, help="passes over the data (default 1; a file, not stdin)")
    learn.add_argument("--initial-model", "-i", metavar="FILE", default=None,
                       help="continue learning from this model file (omtl learn --save, or omtl.save)")
    learn.add_argument("--predictions", "-p", metavar="FILE", default=None,
                       help="write the prediction made before each update, one per line (- : standard output)")
    learn.add_argument("--save", "-f", metavar="FILE", default=None, help="write the trained model (omtl.save)")
    _data_options(learn)
    learn.set_defaults(func=run_learn)
    predict = sub.add_parser("predict", help="predict the examples of a data file with a saved model, streamed",
                             description="Predicts every example of DATA with the saved model (no update); the "
                             "file is read as the model's training file was (format, width, task ids, columns).")
    predict.add_argument("data", metavar="DATA", help="the data file (- : standard input)")
    predict.add_argument("--model", "-i", required=True, metavar="FILE", help="a model file (omtl learn --save)")
    predict.add_argument("--predictions", "-p", metavar="FILE", default=None,
                         help="write the predictions here, one per line (default: standard output)")
    _data_options(predict)
    predict.set_defaults(func=run_predict)


def _data_options(parser) -> None:
    parser.add_argument("--raw-predictions", "-r", metavar="FILE", default=None,
                        help="write each example's raw score (the decision function; VW's -r), one per line")
    parser.add_argument("--probabilities", action="store_true",
                        help="write P(label = +1) instead of the label to the predictions (MTLinear's logistic "
                        "loss; VW's --link logistic)")
    parser.add_argument("--format", choices=list(FORMATS), default=None,
                        help="file format (default: from the extension, .gz looked through)")
    parser.add_argument("--quiet", action="store_true", help="no report on stderr")
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="skip malformed lines, and rows the learner refuses (counted and reported), instead of "
                        "stopping at the first")
    parser.add_argument("--n-features", type=int, default=None, metavar="N",
                        help="svmlight: the width (default: the largest index; a stream read by MTLinear widens as "
                        "it goes); VW: the hashed width (default 2^18)")
    parser.add_argument("--bits", "-b", type=int, default=None, metavar="B",
                        help="VW: hash names into 2^B columns (VW's -b; default 18)")
    parser.add_argument("--zero-based", action="store_true",
                        help="svmlight: index 0 is column 0 (default: 0-based if an index 0 appears in a file; a "
                        "stream is 1-based)")
    parser.add_argument("--task-namespace", default=None, metavar="NS",
                        help="VW: the namespace whose one name is the task (default t)")
    parser.add_argument("--task-tag", action="store_true", help="VW: the tag ('tag) is the task")
    parser.add_argument("--task-column", default=None, help="CSV/Parquet: the column holding the task id (default task)")
    parser.add_argument("--label-column", default=None,
                        help="CSV/Parquet: the column holding the label, -1/+1 or 0/1 (default label)")
    parser.add_argument("--max-line-bytes", type=int, default=None, metavar="N",
                        help="the longest line accepted (default 64 MiB)")
    parser.add_argument("--chunk-rows", type=int, default=8192, metavar="N", help="rows per chunk (default 8192)")
    parser.add_argument("--no-progress", action="store_true", help=argparse.SUPPRESS)


__all__ = ["METADATA_KEY", "DataFileError", "add_commands", "run_learn", "run_predict"]
