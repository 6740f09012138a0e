"""``omtl learn`` and ``omtl predict``: a learner on a data file, without writing Python, as a Vowpal
Wabbit user expects (docs/cli.md).

The file is streamed (:func:`omtl.datasets.iter_file`: svmlight/libsvm with ``qid:`` tasks, VW's text
format, CSV; gzip; ``-`` for standard input): a reader thread parses the next chunk while the
learner learns the current one, so memory is the model plus a few chunks, whatever the file's size.
Task ids are the strings the file holds: the learner keeps them (``tasks_``; learners with a fixed
``n_tasks`` take up to that many), and ``--save`` stores how the file was read (format, width,
indexing, columns, label form) in the model file's metadata, so ``omtl predict`` reads a file the
same way. A bad file, learner or parameter is one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

# NumPy, SciPy and the learner classes are imported where they are used: the common run, a file
# learned by MTLinear, never needs them (``_learn_in_engine``), so it starts without them.
from ._file_formats import CSV, EXTENSIONS, FORMATS, PARQUET, SVMLIGHT, DataFileError, data_format, native_reading

if TYPE_CHECKING:
    import numpy as np

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
    import numpy as np

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


def build_learner(name: str, params, n_tasks=None):
    """The learner ``--learner NAME --param k=v ...`` describes, for ``n_tasks`` tasks.

    Parameters
    ----------
    name : str
        A class name of :func:`learner_classes` (case-insensitive).
    params : list of str
        ``"key=value"`` strings (values through :func:`parse_value`).
    n_tasks : int or None
        The number of tasks (None: open-ended task labels; a ``--param n_tasks=K`` overrides).

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
    kwargs = {"n_tasks": n_tasks}
    for pair in params or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--param {pair!r}: expected key=value")
        if key not in valid and key != "n_tasks":
            raise ValueError(f"{cls.__name__} has no parameter {key!r}; valid: {', '.join(valid)}")
        kwargs[key] = parse_value(value)
    return cls(**kwargs)


# ---- reading a file the way a model was trained on it ----------------------------------------------
def reading_options(args, saved=None) -> dict:
    """The :func:`iter_file` options from the command line, completed by a model's ``saved`` metadata."""
    saved = saved or {}
    fmt = args.format
    if fmt is None and (args.data == "-" or _suffix(args.data) not in EXTENSIONS):
        fmt = saved.get("format")  # standard input or an unknown extension: the format the model read
    fmt = data_format(args.data, fmt)
    if args.task_tag:
        namespace = None
    else:
        namespace = args.task_namespace or saved.get("task_namespace", "t")
    n_features = args.n_features
    if n_features is None and args.bits is not None:
        n_features = 2**args.bits
    return {
        "fmt": fmt,
        "n_features": n_features if n_features is not None else saved.get("n_features"),
        "zero_based": True if args.zero_based else saved.get("zero_based"),
        "task_namespace": namespace,
        "task_column": args.task_column or saved.get("task_column", "task"),
        "label_column": args.label_column or saved.get("label_column", "label"),
        "feature_columns": saved.get("feature_columns") or None,
        "skip_bad_lines": args.skip_bad_lines,
        "max_line_bytes": args.max_line_bytes,
        "chunk_rows": args.chunk_rows,
    }


def _suffix(path) -> str:
    p = Path(path)
    suffix = p.suffix.lower()
    return Path(p.stem).suffix.lower() if suffix == ".gz" else suffix


def chunks_of(data, options, *, require_labels=True):
    """The chunks of ``data``: streamed, or (Parquet) the whole file as one chunk."""
    import numpy as np

    from .datasets.files import FileChunk, iter_file, read_data

    if options["fmt"] == PARQUET:
        whole = read_data(data, fmt=PARQUET, task_column=options["task_column"], label_column=options["label_column"],
                          feature_columns=options["feature_columns"], require_labels=require_labels)
        yield FileChunk(whole.X, whole.y, np.asarray(whole.task_labels, dtype=object),
                        lines=np.arange(1, len(whole.task_labels) + 1), n_skipped=0, first_skipped=None,
                        bytes_read=0, feature_columns=whole.feature_columns, n_features=whole.X.shape[1],
                        zero_based=None)
        return
    yield from iter_file(data, require_labels=require_labels, **options)


#: What the CLI metadata of a model file holds, and the type of each entry.
_METADATA_TYPES = {
    "format": str, "n_features": int, "zero_based": (bool, type(None)), "task_namespace": (str, type(None)),
    "task_column": str, "label_column": str, "feature_columns": list, "zero_one_labels": bool,
}


def checked_metadata(path, model) -> dict:
    """The model file's ``omtl learn`` metadata, checked against the model (``{}`` for a model
    saved from Python); a malformed entry is a one-line error naming the file."""
    from .persistence import load_metadata

    saved = load_metadata(path).get(METADATA_KEY)
    if saved is None:
        return {}

    def bad(why):
        return ValueError(f"{path}: the model file's {METADATA_KEY} metadata is invalid ({why}); "
                          "save the model again with omtl learn --save")

    if not isinstance(saved, dict):
        raise bad(f"not an object but {type(saved).__name__}")
    for key, kind in _METADATA_TYPES.items():
        if key in saved and (not isinstance(saved[key], kind) or (kind is int and isinstance(saved[key], bool))):
            raise bad(f"{key} = {str(saved[key])[:40]!r}")
    if saved.get("format") not in FORMATS:
        raise bad(f"format {saved.get('format')!r}")
    if not all(isinstance(c, str) for c in saved.get("feature_columns", [])):
        raise bad("feature_columns must be strings")
    width = getattr(model, "n_features_in_", None)
    if width is not None and saved.get("n_features", width) != width:
        raise bad(f"n_features {saved['n_features']} but the model has {width} features")
    if saved.get("feature_columns") and width is not None and len(saved["feature_columns"]) != width:
        raise bad(f"{len(saved['feature_columns'])} feature columns but the model has {width} features")
    return saved


def load_model(path):
    """A model file for ``--model``/``--initial-model``: one-line errors for anything wrong with it."""
    import omtl

    try:
        model = omtl.load(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: model file not found") from None
    except (ValueError, TypeError, OSError, KeyError) as exc:
        raise ValueError(f"{path}: not a readable omtl model file ({exc})") from None
    except Exception as exc:  # the native decoder's StateError and kin
        raise ValueError(f"{path}: not a readable omtl model file ({type(exc).__name__}: {exc})") from None
    return model, checked_metadata(path, model)


# ---- the progressive report ------------------------------------------------------------------------
class Progress:
    """VW's progressive report on stderr: a line at examples 1, 2, 4, 8, ... with the average
    0/1 loss (mistakes made before each update) since the last line and overall."""

    def __init__(self, out, quiet: bool):
        self.out, self.quiet = out, quiet
        self.n, self.mistakes = 0, 0
        self.next_line, self.last_n, self.last_mistakes = 1, 0, 0

    def _header(self) -> None:
        print(f"{'average':<12} {'since':<12} {'example':>12} {'current':>8} {'current':>8} {'current':>8}\n"
              f"{'0/1 loss':<12} {'last':<12} {'counter':>12} {'label':>8} {'predict':>8} {'features':>8}",
              file=self.out)

    def add(self, predictions, y, X) -> None:
        import numpy as np

        wrong = np.asarray(predictions) != np.asarray(y)
        cum = np.cumsum(wrong)
        n0, m = self.n, len(wrong)
        while not self.quiet and self.next_line <= n0 + m:
            if self.next_line == 1:
                self._header()
            r = self.next_line - n0 - 1
            total = self.mistakes + int(cum[r])
            since = (total - self.last_mistakes) / (self.next_line - self.last_n)
            nnz = int(X.indptr[r + 1] - X.indptr[r]) if hasattr(X, "indptr") else int(np.count_nonzero(X[r]))
            print(f"{total / self.next_line:<12.6f} {since:<12.6f} {self.next_line:>12d} {int(y[r]):>8d} "
                  f"{int(predictions[r]):>8d} {nnz:>8d}", file=self.out)
            self.last_n, self.last_mistakes = self.next_line, total
            self.next_line *= 2
        self.n += m
        self.mistakes += int(cum[-1]) if m else 0

    @property
    def loss(self) -> float:
        return self.mistakes / self.n if self.n else 0.0


def _skipped_note(chunk, state) -> None:
    if chunk.n_skipped:
        state["skipped"] += chunk.n_skipped
        state["first_skipped"] = state["first_skipped"] or chunk.first_skipped


# ---- the two commands ----------------------------------------------------------------------------
def _one_line_errors(run):
    """A bad file, learner or parameter is the user's to fix: one line on stderr, exit code 2,
    no traceback (Ctrl-C: exit code 130)."""

    def wrapper(args) -> int:
        try:
            return run(args)
        except (ValueError, TypeError, OSError, MemoryError, OverflowError) as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            print(f"omtl {args.command}: {message}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"omtl {args.command}: interrupted", file=sys.stderr)
            return 130

    wrapper.__doc__ = run.__doc__
    return wrapper


def _open_output(path):
    return sys.stdout if path in (None, "-") else open(path, "w", buffering=1 << 20)


@_one_line_errors
def run_learn(args) -> int:
    """``omtl learn``: progressive (predict, then learn) passes over a data file, streamed."""
    import time

    if args.passes < 1:
        raise ValueError("--passes must be >= 1")
    if args.passes > 1 and args.data == "-":
        raise ValueError("--passes > 1 reads the data again: give a file, not standard input")
    engine = None if args.initial_model else engine_learner(args.learner, args.param)
    if engine is not None:
        options = reading_options(args)
        if options["fmt"] != PARQUET:
            return _learn_in_engine(args, options, *engine)
    saved = {}
    if args.initial_model:
        model, saved = load_model(args.initial_model)
        if args.learner != "MTLinear" or args.param:
            raise ValueError("--initial-model continues the saved learner: leave out --learner and --param")
    else:
        model = build_learner(args.learner, args.param)
    options = reading_options(args, saved)
    if getattr(model, "n_features_in_", None) is not None:
        if options["n_features"] not in (None, model.n_features_in_) and options["fmt"] != CSV:
            raise ValueError(f"--n-features {options['n_features']}: the model has {model.n_features_in_} features")
        if options["fmt"] != CSV:
            options["n_features"] = model.n_features_in_
    # A model saved from Python may name its tasks by other values than strings (ints): the
    # file's "17" is its task 17.
    relabel = None
    if getattr(model, "n_features_in_", None) is not None:
        lookup = _task_lookup(model)
        if any(not isinstance(label, str) for label in lookup.values()):
            relabel = lookup
    known_tasks = None
    if options["fmt"] == SVMLIGHT and args.data != "-":
        # One quick pass finds the width, the indexing and every task: an open-ended learner then
        # grows to all the file's tasks once, after its first chunk, instead of at each new task
        # (each growth copies the model's state: twice the memory for a moment).
        from .datasets.files import scan_svmlight, svmlight_layout

        scan = scan_svmlight(args.data, max_line_bytes=options["max_line_bytes"])
        options["n_features"], options["zero_based"] = svmlight_layout(
            args.data, n_features=options["n_features"], zero_based=options["zero_based"], scan=scan)
        known_tasks = scan[2]
    err = sys.stderr
    progress = Progress(err, args.quiet)
    state = {"skipped": 0, "first_skipped": None}
    out = open(args.predictions, "w", buffering=1 << 20) if args.predictions else None
    start, layout = time.perf_counter(), None
    try:
        for _ in range(args.passes):
            for chunk in chunks_of(args.data, options):
                X, y, tasks = chunk
                layout = chunk
                _skipped_note(chunk, state)
                if X.shape[0] == 0:
                    continue
                if relabel is not None:
                    tasks = [relabel.get(t, t) for t in tasks]
                predictions = model.learn(X, y, tasks=tasks)
                if known_tasks:
                    _grow_to(model, known_tasks)
                    known_tasks = None
                progress.add(predictions, y, X)
                if out is not None:
                    out.write("\n".join(map(str, predictions.tolist())) + "\n")
            if layout is not None:  # later passes read the file with the layout of the first
                options["n_features"], options["zero_based"] = layout.n_features, layout.zero_based
                options["feature_columns"] = layout.feature_columns or None
    finally:
        if out is not None:
            out.close()
    seconds = time.perf_counter() - start
    if progress.n == 0:
        raise DataFileError(f"{args.data}: no examples")
    if args.save:
        save_model(model, args.save, options, layout, saved)
    _finished(args, progress.n, progress.loss, len(model.tasks_), model.n_features_in_, seconds, state["skipped"],
              state["first_skipped"])
    return 0


# ---- the whole loop in the engine ------------------------------------------------------------------
#: MTLinear's hyper-parameters as the engine takes them, with the class's defaults (a test holds
#: them equal to ``MTLinear``'s signature).
ENGINE_MTLINEAR_DEFAULTS = {
    "loss": "logistic", "update": "normalized", "learning_rate": 0.5, "fit_intercept": True, "hash_bits": None,
    "shared_rate": 2.0,
}
_ENGINE_CHOICES = {"loss": ("logistic", "hinge", "squared"), "update": ("normalized", "adagrad", "sgd", "arow")}


def _positive_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")


def engine_learner(name: str, params):
    """``(kind, parameters, graph)`` when ``--learner NAME --param ...`` can learn a file wholly in
    the engine (:func:`_learn_in_engine`): MTLinear with open-ended tasks, on the complete or
    disconnected graph, every parameter of the right type and range. ``None`` otherwise, and for
    anything the learner class would refuse: the class then says why, in its own words.

    Parameters
    ----------
    name : str
        ``--learner``.
    params : list of str
        ``--param`` pairs.

    Returns
    -------
    tuple or None
    """
    if name.lower() != "mtlinear":
        return None
    native, graph = dict(ENGINE_MTLINEAR_DEFAULTS), "complete"
    for pair in params or []:
        key, sep, text = pair.partition("=")
        key, value = key.strip(), parse_value(text)
        if not sep:
            return None
        if key in _ENGINE_CHOICES:
            ok = isinstance(value, str) and value in _ENGINE_CHOICES[key]
        elif key in ("learning_rate", "shared_rate"):
            ok = _positive_number(value)
        elif key == "fit_intercept":
            ok = isinstance(value, bool)
        elif key == "hash_bits":
            ok = value is None or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 31)
        elif key == "graph":
            ok, graph = value in ("complete", "disconnected"), value
        elif key == "n_tasks":
            ok = value is None
        elif key == "n_features":  # the column space of dict rows: no bearing on a file
            ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 2**31 - 1
        else:
            ok = False
        if not ok:
            return None
        if key in native:
            native[key] = value
    return "mt_linear", native, "complete_open" if graph == "complete" else "disconnected"


def _learn_in_engine(args, options, kind, native_params, graph) -> int:
    """``omtl learn`` in one native call (src/io/driver.rs): reading, learning, the report and the
    predictions all run in the engine, the file parsed on a thread of its own; Python comes back
    for ``--save`` only. The same rows, tasks and outputs as the chunk loop of :func:`run_learn`."""
    import time

    from . import _native

    err = sys.stderr
    if args.predictions:
        open(args.predictions, "w").close()  # an unwritable path fails here, in Python's words
    start = time.perf_counter()
    learner, summary = _native.learn_file(
        str(args.data), _engine_reading(options, require_labels=True), n_features=options["n_features"],
        zero_based=options["zero_based"], kind=kind, params=native_params, graph=graph, passes=args.passes,
        quiet=args.quiet, report=lambda text: print(text, file=err), predictions=args.predictions)
    seconds = time.perf_counter() - start
    n = summary["n_seen"]
    if n == 0:
        raise DataFileError(f"{args.data}: no examples")
    if args.save:
        from types import SimpleNamespace

        model = _model_from_engine(args, learner, summary)
        layout = SimpleNamespace(zero_based=summary["zero_based"], feature_columns=summary["feature_columns"])
        save_model(model, args.save, options, layout, {})
    _finished(args, n, summary["n_mistakes"] / n, len(summary["task_labels"]), summary["n_features"], seconds,
              summary["n_skipped"], summary["first_skipped"])
    return 0


def _finished(args, n, loss, n_tasks, n_features, seconds, skipped, first_skipped) -> None:
    """The last lines of ``omtl learn`` on stderr (VW's "finished run"; only the skipped lines
    with ``--quiet``)."""
    err = sys.stderr
    if not args.quiet:
        print(f"\nfinished run\nnumber of examples = {n}\npasses = {args.passes}\n"
              f"average 0/1 loss = {loss:.6f} (each prediction made before learning the example)\n"
              f"tasks = {n_tasks}\nfeature columns = {n_features}\n"
              f"seconds = {seconds:.3f} ({n / max(seconds, 1e-9):,.0f} examples/s)", file=err)
        if skipped:
            print(f"skipped bad lines = {skipped} (first: {first_skipped})", file=err)
        if args.predictions:
            print(f"predictions written to {args.predictions}", file=err)
        if args.save:
            print(f"model written to {args.save} (omtl predict DATA --model {args.save}; or omtl.load in Python)",
                  file=err)
    elif skipped:
        print(f"omtl learn: skipped {skipped} bad lines (first: {first_skipped})", file=err)


def _engine_reading(options, *, require_labels) -> dict:
    """The engine's reading options (``native_reading``) from the command line's ``options``."""
    from . import _native

    cap = options["max_line_bytes"] or _native.reader_limits()[1]
    return native_reading(options["fmt"], max_line_bytes=cap, chunk_rows=options["chunk_rows"],
                          skip_bad_lines=options["skip_bad_lines"], task_namespace=options["task_namespace"],
                          task_column=options["task_column"], label_column=options["label_column"],
                          feature_columns=options["feature_columns"], require_labels=require_labels)


def _model_from_engine(args, learner, summary):
    """The learner class's model holding the engine's ``learner`` with the bookkeeping of the rows
    it learned (what ``learn`` on the same chunks records; ``omtl.persistence.loads`` restores the
    same fields), checked as a restored model is."""
    import numpy as np

    from ._base import NativeCore
    from ._tasks import TaskSet
    from ._validation import PM1, ZERO_ONE
    from .persistence import check_restored

    model = build_learner(args.learner, args.param)
    counts = np.asarray(summary["seen_per_task"], dtype=np.int64)
    model._core = NativeCore(learner)
    model.n_features_in_ = int(summary["n_features"])
    model.n_seen_ = int(summary["n_seen"])
    model.n_mistakes_ = int(summary["n_mistakes"])
    model._tasks = TaskSet(counts, model.n_tasks, list(summary["task_labels"]))
    model._label_form = ZERO_ONE if summary["zero_one"] else PM1
    check_restored(model)
    return model


def _grow_to(model, labels) -> None:
    """Adds the file's tasks the model does not have yet, in file order, where the learner grows
    by task labels (the tasks it would add one by one as they arrive; the same model)."""
    import numpy as np

    if model.n_tasks is not None:
        return
    have = {str(label) for label in np.asarray(model.tasks_).tolist()}
    missing = [label for label in labels if label not in have]
    if missing:
        try:
            model.add_tasks(missing)
        except ValueError:  # a learner or graph that cannot grow a fitted model: tasks join as they come
            pass


def save_model(model, path, options, layout, saved) -> None:
    """``omtl.save`` with what ``omtl predict`` needs to read a file the same way."""
    import numpy as np

    import omtl

    form = getattr(model, "classes_", np.array([-1, 1]))
    metadata = {METADATA_KEY: {
        "format": options["fmt"],
        "n_features": int(model.n_features_in_),
        "zero_based": layout.zero_based if layout is not None else saved.get("zero_based"),
        "task_namespace": options["task_namespace"],
        "task_column": options["task_column"],
        "label_column": options["label_column"],
        "feature_columns": list(layout.feature_columns) if layout is not None else saved.get("feature_columns", []),
        "zero_one_labels": bool(0 in np.asarray(form).tolist()),  # predict writes labels as the training file did
    }}
    omtl.save(model, path, metadata=metadata)


def _task_lookup(model):
    """File task strings -> the model's task labels (a model saved from Python may hold ints)."""
    import numpy as np

    return {str(label): label for label in np.asarray(model.tasks_).tolist()}


@_one_line_errors
def run_predict(args) -> int:
    """``omtl predict``: labels for every example of a data file from a saved model, no update."""
    import numpy as np

    model, saved = load_model(args.model)
    if not model._is_fitted():
        raise ValueError(f"{args.model}: the model was never trained")
    options = reading_options(args, saved)
    if options["fmt"] != CSV:
        options["n_features"] = int(model.n_features_in_)
    zero_one = saved.get("zero_one_labels", 0 in np.asarray(model.classes_).tolist())
    out = _open_output(args.predictions)
    try:
        predict = _predict_in_chunks if _engine_core(model, options) is None else _predict_in_engine
        n, labelled, mistakes, state = predict(args, model, options, zero_one, out)
    except BrokenPipeError:  # omtl predict ... | head
        sys.stderr.close()
        return 0
    finally:
        if out is not sys.stdout:
            out.close()
        else:
            sys.stdout.flush()
    if n == 0:
        raise DataFileError(f"{args.data}: no examples")
    if not args.quiet:
        where = f"written to {args.predictions}" if args.predictions else "written to standard output"
        print(f"{args.data}: {n} predictions {where}", file=sys.stderr)
        if labelled:
            print(f"against the file's labels ({labelled} rows): error {100 * mistakes / labelled:.2f} %",
                  file=sys.stderr)
    if state["skipped"]:
        print(f"omtl predict: skipped {state['skipped']} bad lines (first: {state['first_skipped']})", file=sys.stderr)
    return 0


def _engine_core(model, options):
    """The native learner of ``model`` when ``omtl predict`` can run in one engine call (a native
    model, a streamed format), else None."""
    from ._base import NativeCore

    core = getattr(model, "_core", None)
    return core._learner if options["fmt"] != PARQUET and isinstance(core, NativeCore) else None


def _predict_in_engine(args, model, options, zero_one, out):
    """The predictions of ``omtl predict`` in one native call (src/io/driver.rs), the labels written
    through ``out.write`` chunk by chunk; ``(rows, labelled rows, mistakes, skipped-lines state)``."""
    import numpy as np

    from . import _native

    names = [str(label) for label in np.asarray(model.tasks_).tolist()]
    n, labelled, mistakes, skipped, first = _native.predict_file(
        _engine_core(model, options), str(args.data), _engine_reading(options, require_labels=False),
        n_features=options["n_features"], zero_based=options["zero_based"], task_names=names,
        zero_one=bool(zero_one), write=out.write)
    return n, labelled, mistakes, {"skipped": skipped, "first_skipped": first}


def _predict_in_chunks(args, model, options, zero_one, out):
    """The predictions of ``omtl predict`` chunk by chunk through the model's Python API (Parquet,
    models without a native learner)."""
    import numpy as np

    lookup = _task_lookup(model)
    state = {"skipped": 0, "first_skipped": None}
    n = mistakes = labelled = 0
    for chunk in chunks_of(args.data, options, require_labels=False):
        X, y, tasks = chunk
        _skipped_note(chunk, state)
        if X.shape[0] == 0:
            continue
        if options["fmt"] == CSV and X.shape[1] != model.n_features_in_:
            raise DataFileError(f"{args.data}: {X.shape[1]} feature columns, the model was trained on "
                                f"{model.n_features_in_}")
        try:
            labels = [lookup[t] for t in tasks]
        except KeyError:
            r = next(i for i, t in enumerate(tasks) if t not in lookup)
            shown = ", ".join(list(lookup)[:10]) + (", ..." if len(lookup) > 10 else "")
            raise DataFileError(f"{args.data}, line {chunk.lines[r]}: task {str(tasks[r])!r}, which the model never saw "
                                f"(its {len(lookup)} tasks: {shown})") from None
        pm1 = np.where(model.decision_function(X, tasks=labels) >= 0.0, 1, -1)  # as predict: a score of 0 is +1
        written = np.where(pm1 > 0, 1, 0 if zero_one else -1)
        out.write("\n".join(map(str, written.tolist())) + "\n")
        n += len(pm1)
        if y is not None:
            truth = np.asarray(y, dtype=np.float64)
            known = ~np.isnan(truth)
            labelled += int(known.sum())
            mistakes += int(np.count_nonzero(np.where(truth[known] > 0, 1, -1) != pm1[known]))
    return n, labelled, mistakes, state


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
    learn.add_argument("--learner", default="MTLinear", help="learner class (default MTLinear)")
    learn.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="a hyper-parameter, repeatable (values: int, float, true/false, none or text)")
    learn.add_argument("--passes", type=int, default=1, help="passes over the data (default 1; a file, not stdin)")
    learn.add_argument("--initial-model", "-i", metavar="FILE", default=None,
                       help="continue learning from this model file (omtl learn --save, or omtl.save)")
    learn.add_argument("--predictions", "-p", metavar="FILE", default=None,
                       help="write the prediction made before each update, one per line")
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
    parser.add_argument("--format", choices=list(FORMATS), default=None,
                        help="file format (default: from the extension, .gz looked through)")
    parser.add_argument("--quiet", action="store_true", help="no report on stderr")
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="skip malformed lines (counted and reported) instead of stopping at the first")
    parser.add_argument("--n-features", type=int, default=None, metavar="N",
                        help="svmlight: the width (default: the largest index; needed for stdin); VW: the hashed "
                        "width (default 2^18)")
    parser.add_argument("--bits", "-b", type=int, default=None, metavar="B",
                        help="VW: hash names into 2^B columns (VW's -b; default 18)")
    parser.add_argument("--zero-based", action="store_true",
                        help="svmlight: index 0 is column 0 (default: 0-based if an index 0 appears, else 1-based)")
    parser.add_argument("--task-namespace", default=None, metavar="NS",
                        help="VW: the namespace whose one name is the task (default t)")
    parser.add_argument("--task-tag", action="store_true", help="VW: the tag ('tag) is the task")
    parser.add_argument("--task-column", default=None, help="CSV/Parquet: the column holding the task id (default task)")
    parser.add_argument("--label-column", default=None,
                        help="CSV/Parquet: the column holding the label, -1/+1 or 0/1 (default label)")
    parser.add_argument("--max-line-bytes", type=int, default=None, metavar="N",
                        help="the longest line accepted (default 64 MiB)")
    parser.add_argument("--chunk-rows", type=int, default=8192, metavar="N", help="rows per chunk (default 8192)")
    parser.add_argument("--no-progress", action="store_true", help=argparse_suppress())


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS
