"""The Python-side bookkeeping of a fitted native model (sizes, counts, task labels, label form)
and its check against the engine: what a model file's header holds beside the native state, and
what ``load``, ``save`` and unpickling check before a model is used."""

from __future__ import annotations

import json

import numpy as np

from . import _native
from ._tasks import FORGOTTEN, TaskSet


def invalid_model_file(msg: str):
    """Raises the ``ValueError`` of a model file (or a restored model) that is not valid."""
    raise ValueError(f"not a valid omtl model file: {msg}")


def fitted_header(model) -> dict | None:
    """The ``fitted`` object of a model file's header: the Python-side bookkeeping of a fitted
    model (None for an unfitted one). Raises ``TypeError`` for task labels a file cannot hold."""
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


def check_restored(model, *, settings: bool = True) -> None:
    """Checks that a fitted native ``model`` is consistent: its engine's sizes and the
    bookkeeping agree (checked by the crate, as reading a model file checks them) and
    (``settings``) the engine is the algorithm its hyper-parameters build, with the same
    settings. Raises ``ValueError``. ``load`` and ``save`` check everything; unpickling leaves
    out the settings (``set_params`` after fitting is allowed, and a pickle that lies about its
    class can run code anyway). A model without a native engine (a reference twin, plain NumPy
    state) is not checked."""
    if not model._is_fitted() or not isinstance(getattr(model._core, "_learner", None), _native.NativeLearner):
        return
    learner = model._core._learner
    d = model.n_features_in_
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        invalid_model_file(f"n_features_in_ must be an integer >= 1, got {d!r}")
    task_set = getattr(model, "_tasks", None)
    if not isinstance(task_set, TaskSet):
        invalid_model_file("the model's task set is missing")
    seen = task_set.counts
    if not isinstance(seen, np.ndarray) or seen.ndim != 1 or seen.dtype.kind not in "iu" or (seen < 0).any():
        invalid_model_file("the per-task counts are not n_tasks non-negative integers")
    labels = task_set.labels
    if labels is not None:
        index = task_set.index
        live = [(i, v) for i, v in enumerate(labels) if v is not FORGOTTEN] if isinstance(labels, list) else []
        if not isinstance(labels, list) or not isinstance(index, dict) or len(index) != len(live) \
                or any(index.get(v) != i for i, v in live):
            invalid_model_file("the task labels are not distinct labels of at most n_tasks tasks")
    try:
        fitted = json.dumps(fitted_header(model), allow_nan=False)
    except (TypeError, ValueError):
        invalid_model_file(f"unknown label form or task labels ({model._label_form!r})")
    _native.check_bookkeeping(learner, fitted, model.n_tasks is None)
    if settings:
        # Built only now that the sizes are known to be the engine's (bounded by its state).
        try:
            fresh = model._make_core(int(d), False)
        except (TypeError, ValueError, OverflowError) as exc:
            invalid_model_file(f"invalid parameters ({exc})")
        if not learner.same_settings(fresh._learner):
            invalid_model_file(f"the engine ({learner.kind}) is not the one the parameters of {type(model).__name__} build")
