"""Docstring fragments shared by the learners' methods: one wording per parameter, filled in by
``@fill_doc`` where a docstring line holds only ``{name}`` (as pandas' and scikit-learn's
docstring templates)."""

from __future__ import annotations

import re

FRAGMENTS = {
    "X": """X : array-like or sparse matrix of shape (n_samples, n_features)
    Rows (dense float arrays or any scipy.sparse matrix).""",
    "y": """y : array-like of shape (n_samples,)
    Labels: -1/+1, 0/1, bool, or any two labels (the sorted second is positive).""",
    "tasks": """tasks : array-like of shape (n_samples,), scalar or None, default=None
    The task of each row (one label for all rows): integer ids in ``[0, n_tasks)``, or any
    hashable labels (``tasks_``); may be left out when the model has exactly one task.""",
    "x_one": """x : dict
    One example: feature name -> number, with the task id under ``task_key`` (or read by
    ``task_fn``).""",
    "X_frame": """X : pandas.DataFrame
    Examples, one per row, with the task column (``task_key``) unless ``task_fn`` is given.""",
    "predictions": """ndarray of shape (n_samples,)
    The pre-update predictions, in the label form of ``y``.""",
}

_PLACEHOLDER = re.compile(r"^([ \t]*)\{(\w+)\}[ \t]*$", re.M)


def fill_doc(func):
    """Replaces each line ``{name}`` of ``func``'s docstring by ``FRAGMENTS[name]``, indented alike."""

    def expand(match: re.Match) -> str:
        indent, name = match.groups()
        return "\n".join(indent + line if line else line for line in FRAGMENTS[name].splitlines())

    func.__doc__ = _PLACEHOLDER.sub(expand, func.__doc__)
    return func
