"""Input checking and conversion shared by every learner (native and reference).

Everything here runs before a model is touched, so a bad call raises and leaves it unchanged.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import scipy.sparse as sp

# Label forms (ALGORITHMS.md §0): how a call's ``y`` was written, so outputs can be written alike.
PM1, ZERO_ONE, BOOL = "pm1", "01", "bool"


def check_X(X, *, n_features: int | None = None, check_finite: bool = True):
    """Returns ``X`` as a C-contiguous float64 2-D array or a canonical float64 CSR matrix that
    is private to the call: no memory shared with the caller's input, so another thread writing
    into the input during the call cannot change what is validated and learned (the array is
    copied when the conversion did not already make a new one).

    ``check_finite=False`` leaves out the scan for NaN and infinity, a full pass over the values:
    only for ``X`` bound for the native engine, whose batch validation scans it (and raises
    "X contains NaN or infinity") before it touches a model. Call ``check_finite`` otherwise.
    """
    if sp.issparse(X):
        # Always a copy, also of a canonical float64 CSR: the caller (or another thread) could
        # write into its arrays during the call, and canonicalising in place would change them.
        # The copy's structure (indptr, indices) is checked in full before any scipy routine
        # that assumes it runs on it: scipy's compiled routines (canonical-format test,
        # sum_duplicates, format conversions) index by indptr unchecked, and a malformed one
        # corrupts the heap. A stale canonical flag cannot mislead the engine either: the native
        # core checks that every row's indices strictly increase before it learns.
        # Whether the input is canonical is asked of the input, where scipy caches the answer,
        # so a matrix passed again is not scanned again; a first answer is computed on the
        # checked copy and cached on the input as scipy itself would.
        canonical = None
        if X.format == "csr":
            source = X
            if not getattr(source, "_has_sorted_indices", True):
                canonical = False
            else:
                canonical = source.__dict__.get("_has_canonical_format")
            # One constructor call on copies of the arrays (csr_matrix(X, copy=True) runs two:
            # most of the cost of a one-row call); the constructor's own check is shallow.
            X = sp.csr_matrix((X.data.astype(np.float64), X.indices.copy(), X.indptr.copy()), shape=X.shape)
            _check_compressed(X)
            if canonical is None:
                canonical = bool(X.has_canonical_format)
                source.has_canonical_format = canonical
        else:
            X = X.copy()  # element-wise copies of the arrays, no compiled routine on them
            if X.format in ("csc", "bsr"):
                _check_compressed(X)
            X = sp.csr_matrix(X, dtype=np.float64, copy=False)
            _check_compressed(X)
            canonical = bool(X.has_canonical_format)
        if canonical:
            X.has_canonical_format = True  # the same arrays as the input's (also sorted)
        else:
            X.sum_duplicates()  # also sorts the indices
            X.sort_indices()
    else:
        if isinstance(X, (str, bytes)):
            raise TypeError("X must be a 2-D array of numbers, got a string")
        try:
            arr = np.asarray(X)
        except Exception as exc:  # ragged lists and the like
            raise ValueError(f"X cannot be converted to a 2-D numeric array: {exc}") from None
        if arr.dtype.kind == "O":  # numbers held as Python objects (a pandas object column)
            try:
                arr = arr.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"X must hold real numbers: {exc}") from None
        if arr.dtype.kind == "c":
            raise ValueError("Complex data not supported: X must hold real numbers")
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"X must hold real numbers, got dtype {arr.dtype}")
        if arr.ndim != 2:
            raise ValueError(
                f"X must be 2-D (n_samples, n_features), got {arr.ndim}-D. Reshape your data: X.reshape(1, -1) for a single sample"
            )
        converted = np.ascontiguousarray(arr, dtype=np.float64)
        # Private: an array numpy built from Python lists, or one the dtype/layout conversion
        # made. Anything else may be the caller's memory (the input itself, a view of it, the
        # buffer an __array__ method hands out) and is copied.
        private = isinstance(X, (list, tuple)) or (converted is not arr and converted.flags.owndata)
        X = converted if private else converted.copy()
    if check_finite:
        check_finite_X(X)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but the model is expecting {n_features} features as input")
    if X.shape[1] == 0 and X.shape[0] > 0:
        raise ValueError(f"X has 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    return X


def _check_compressed(X) -> None:
    """Raises ValueError unless a (private) CSR, CSC or BSR matrix's index structure is well formed:
    one indptr entry per major row plus one, starting at 0, never decreasing and ending at the
    number of stored entries, and every index inside the matrix (what scipy's
    ``check_format(full_check=True)`` checks, in a few vectorised passes for CSR and CSC)."""
    if X.format == "bsr":
        try:
            X.check_format(full_check=True)
        except (ValueError, TypeError, OverflowError, IndexError) as exc:
            raise ValueError(f"X is a malformed sparse matrix: {exc}") from None
        return
    n_major, n_minor = X.shape if X.format == "csr" else X.shape[::-1]
    indptr, indices = X.indptr, X.indices
    if indptr.ndim != 1 or indices.ndim != 1 or indptr.shape[0] != n_major + 1 or indptr.dtype.kind not in "iu" \
            or indices.dtype.kind not in "iu":
        raise ValueError("X is a malformed sparse matrix: indptr or indices have the wrong shape or type")
    nnz = indices.shape[0]
    if indptr[0] != 0 or indptr[-1] != nnz or X.data.shape != (nnz,):
        raise ValueError("X is a malformed sparse matrix: indptr does not span indices and data")
    if n_major > 0 and (indptr[1:] < indptr[:-1]).any():
        raise ValueError("X is a malformed sparse matrix: indptr must be a non-decreasing sequence")
    if nnz and (indices.min() < 0 or indices.max() >= n_minor):
        raise ValueError("X is a malformed sparse matrix: an index is outside the matrix")


def check_finite_X(X) -> None:
    """Raises ValueError if ``X`` (as ``check_X`` returns it) holds NaN or ±inf."""
    values = X.data if sp.issparse(X) else X
    # min/max propagate NaN and expose ±inf without allocating an n x d mask.
    if values.size and not (np.isfinite(values.min()) and np.isfinite(values.max())):
        raise ValueError("X contains NaN or infinity")


def integer_array(values, what: str) -> np.ndarray:
    """``values`` as a 1-D-or-more array of integers in their own dtype (int, uint, integral
    floats, or Python ints of any size as objects), for range checks before any cast to int64."""
    arr = np.asarray(values)
    if arr.dtype.kind == "O" and arr.size and all(
        isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in arr.flat
    ):
        return arr  # Python ints, some beyond int64: compared as Python ints
    if arr.dtype.kind == "f" and arr.size and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        return arr
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{what} must be integers, got dtype {arr.dtype}")
    return arr


def check_tasks(tasks, n_rows: int, n_tasks: int) -> np.ndarray:
    """Returns task ids as int64 of length ``n_rows``; one int applies to every row."""
    if tasks is None:
        if n_tasks == 1:  # a single-task model: every row is task 0 (scikit-learn's plain fit(X, y))
            return np.zeros(n_rows, dtype=np.int64)
        raise TypeError("tasks is required: pass one task id per row, or one int for all rows (optional only when n_tasks=1)")
    if isinstance(tasks, (bool, np.bool_)):
        raise TypeError("tasks must be integers, got a bool")
    if isinstance(tasks, numbers.Integral):
        if n_rows and not 0 <= tasks < n_tasks:
            raise ValueError(f"unknown task id {tasks} at row 0: task ids must lie in [0, {n_tasks})")
        return np.full(n_rows, int(tasks), dtype=np.int64)
    arr = integer_array(tasks, "tasks")
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"tasks must be 1-D, got shape {arr.shape}")
    if arr.shape[0] != n_rows:
        raise ValueError(f"X has {n_rows} rows but tasks has {arr.shape[0]}")
    if arr.size:
        # In the ids' own dtype, so that an id beyond int64 is reported as it was given.
        bad = np.flatnonzero(np.asarray((arr < 0) | (arr >= n_tasks), dtype=bool))
        if bad.size:
            raise ValueError(f"unknown task id {arr[bad[0]]} at row {bad[0]}: task ids must lie in [0, {n_tasks})")
    return arr.astype(np.int64)


def check_rounds(rounds, task_ids: np.ndarray) -> np.ndarray:
    """Returns round ids as int64 (one per row): non-decreasing, each task at most once per round.

    Rows with equal consecutive round ids form one round (protocol P2, ALGORITHMS.md §1.2).
    """
    n_rows = task_ids.shape[0]
    if rounds is None:
        raise TypeError("rounds is required: pass one round id per row (non-decreasing)")
    if isinstance(rounds, (bool, np.bool_)) or isinstance(rounds, numbers.Number):
        raise TypeError("rounds must be an array with one round id per row")
    arr = integer_array(rounds, "rounds")
    if arr.ndim != 1:
        raise ValueError(f"rounds must be 1-D, got shape {arr.shape}")
    if arr.shape[0] != n_rows:
        raise ValueError(f"X has {n_rows} rows but rounds has {arr.shape[0]}")
    if arr.size:
        out = np.flatnonzero(np.asarray((arr < -(2**63)) | (arr >= 2**63), dtype=bool))
        if out.size:
            raise ValueError(f"round id {arr[out[0]]} at row {out[0]} is out of range: round ids must lie in [-2**63, 2**63)")
    arr = arr.astype(np.int64)
    if n_rows > 1:
        down = np.flatnonzero(arr[1:] < arr[:-1])
        if down.size:
            r = down[0] + 1
            raise ValueError(f"rounds must be non-decreasing, but row {r} has round {arr[r]} after round {arr[r - 1]}")
        order = np.lexsort((task_ids, arr))
        same = (arr[order][1:] == arr[order][:-1]) & (task_ids[order][1:] == task_ids[order][:-1])
        if same.any():
            j = order[np.flatnonzero(same)[0] + 1]
            raise ValueError(
                f"task {task_ids[j]} appears twice in round {arr[j]} (row {j}); a round holds at most one example per task"
            )
    return arr


def check_labels(y, n_rows: int, classes: tuple | None = None, new_classes: bool = True) -> tuple[np.ndarray, str | tuple]:
    """Returns labels as float64 in {-1, +1} and the form they were given in (§0).

    Besides -1/+1, 0/1 and bool, any two labels (strings, {1, 2}, ...) are a form: the pair
    ``(negative, positive)``, the sorted pair as in scikit-learn (``classes_[1]`` is positive).
    ``classes``: the model's pair, when it has one; then every label must be one of it.
    ``new_classes``: whether a batch may set up a new pair from its labels (a model's first
    batch; a batch of a single such label cannot, it does not say which label is positive).
    """
    if classes is not None:
        return _labels_of_pair(y, n_rows, classes), classes
    if y is None:
        raise ValueError("this learner requires y to be passed, but the target y is None")
    arr = np.asarray(y)
    if arr.dtype.kind == "O":  # labels held as Python objects: read them in their own type
        arr = np.asarray(arr.tolist())
    arr = _column_as_1d(arr)
    if arr.shape[0] != n_rows:
        raise ValueError(f"X has {n_rows} rows but y has {arr.shape[0]}")
    if arr.dtype == np.bool_:
        return np.where(arr, 1.0, -1.0), BOOL
    if arr.dtype.kind in "US" and new_classes:
        return _labels_as_new_pair(arr)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"labels must be -1/+1, 0/1, bool or two classes, got dtype {arr.dtype}")
    values = arr.astype(np.float64)
    if not np.isfinite(values).all():
        raise ValueError("y contains NaN or infinity")
    is_pm1 = (values == 1.0) | (values == -1.0)
    if is_pm1.all():
        return values, PM1
    is_01 = (values == 0.0) | (values == 1.0)
    if is_01.all():
        return np.where(values == 1.0, 1.0, -1.0), ZERO_ONE
    bad = np.flatnonzero(~(is_pm1 | is_01))
    if not bad.size:
        raise ValueError("labels mix -1 with 0: use -1/+1, 0/1 or bool")
    # The wording scikit-learn's checks look for: a continuous target, more than two classes.
    if not np.all(values == np.round(values)):
        why = "continuous values are not class labels; "
    elif np.unique(values).size > 2:
        why = "Only binary classification is supported. "
    elif new_classes:
        return _labels_as_new_pair(arr)
    else:
        why = "this model learned labels -1/+1, 0/1 or bool: "
    raise ValueError(f"label {arr[bad[0]]!r} at row {bad[0]} is not allowed: {why}labels must be -1/+1, 0/1 or bool")


def _column_as_1d(arr: np.ndarray) -> np.ndarray:
    """y of shape (n, 1) raveled with scikit-learn's DataConversionWarning, as its estimators do;
    any other shape than (n,) is an error. The warning comes before the model changes, so a
    warning turned into an error leaves it as it was."""
    if arr.ndim == 2 and arr.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please change the shape of y to "
            "(n_samples,), for example using ravel().",
            _data_conversion_warning(),
            stacklevel=4,
        )
        return arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {arr.shape}")
    return arr


def _data_conversion_warning() -> type[Warning]:
    try:
        from sklearn.exceptions import DataConversionWarning
    except ImportError:  # scikit-learn is optional; its class is a UserWarning too
        return UserWarning
    return DataConversionWarning


def _labels_as_new_pair(arr: np.ndarray) -> tuple[np.ndarray, tuple]:
    values = np.unique(arr)
    if values.size > 2:
        raise ValueError(f"labels {values[:5].tolist()} are not allowed: Only binary classification is supported.")
    if values.size < 2:
        raise ValueError(
            f"the labels are all {values[0].item()!r}, which does not say which class is positive: pass "
            "classes=[negative, positive] to this first partial_fit (or use labels -1/+1, 0/1 or bool)"
        )
    pair = (values[0].item(), values[1].item())
    return np.where(arr == values[1], 1.0, -1.0), pair


def check_classes_pair(classes) -> tuple | None:
    """``classes`` of ``partial_fit`` as a label pair when it is not a standard form, else None."""
    values = np.unique(np.asarray(classes))
    if values.size != 2:
        raise ValueError(f"classes must hold two labels, got {values.tolist()!r}")
    if values.dtype.kind in "biuf" and values.tolist() in ([-1, 1], [0, 1], [False, True]):
        return None
    if values.dtype.kind not in "iufUS":
        raise TypeError(f"classes must be numbers or strings, got dtype {values.dtype}")
    return (values[0].item(), values[1].item())


def _labels_of_pair(y, n_rows: int, classes: tuple) -> np.ndarray:
    arr = np.asarray(y)
    if arr.dtype.kind == "O":
        arr = np.asarray(arr.tolist())
    arr = _column_as_1d(arr)
    if arr.shape[0] != n_rows:
        raise ValueError(f"X has {n_rows} rows but y has {arr.shape[0]}")
    negative, positive = classes
    is_pos = np.asarray(arr == positive, dtype=bool).reshape(arr.shape)
    ok = is_pos | np.asarray(arr == negative, dtype=bool).reshape(arr.shape)
    bad = np.flatnonzero(~ok)
    if bad.size:
        raise ValueError(f"label {arr[bad[0]]!r} at row {bad[0]} is not one of this model's classes {list(classes)!r}")
    return np.where(is_pos, 1.0, -1.0)


def labels_in_form(pm1: np.ndarray, form) -> np.ndarray:
    """Writes ±1 predictions in a label form."""
    if isinstance(form, tuple):  # (negative, positive)
        return np.asarray(form)[(pm1 > 0).astype(np.intp)]
    if form == BOOL:
        return pm1 > 0
    if form == ZERO_ONE:
        return (pm1 > 0).astype(np.int64)
    return pm1.astype(np.int64)


def classes_of(form) -> np.ndarray:
    if isinstance(form, tuple):
        return np.asarray(form)
    return {BOOL: np.array([False, True]), ZERO_ONE: np.array([0, 1]), PM1: np.array([-1, 1])}[form]


def csr_parts(X: sp.csr_matrix):
    """The canonical CSR as the tuple the native core reads."""
    return (
        X.indptr.astype(np.int64, copy=False),
        X.indices.astype(np.uint32, copy=False),
        X.data,
        int(X.shape[1]),
    )
