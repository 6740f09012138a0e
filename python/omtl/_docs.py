"""Docstring fragments shared by the learners' methods: one wording per parameter, filled in by
``@fill_doc`` where a docstring line holds only ``{name}`` (as pandas' and scikit-learn's
docstring templates)."""

from __future__ import annotations

import re

FRAGMENTS = {
    "X": """X : array-like or sparse matrix of shape (n_samples, n_features), or list of dict
    Rows (dense float arrays or any scipy.sparse matrix), or one dict per row, read as
    ``learn_one`` reads a dict (str names hashed as ``omtl.hash_features`` hashes them).""",
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
    # TaskGraph's constructors.
    "graph_edges": """n_tasks : int
    Number of tasks k >= 1.
edges : sequence of (int, int)
    Task pairs, each task in [0, k).
weights : sequence of float, optional
    One nonnegative weight per edge (default 1).""",
    "returns_graph": """Returns
-------
TaskGraph""",
    # The per-event methods' parameters, after learn_one's.
    "x_event": """x : 1-D array-like of n_features numbers, or dict
    As for ``learn_one``.""",
    "task_event": """task : hashable, default=None
    As for ``predict_one``.""",
    # The learners' constructor parameters (class docstrings).
    "n_features": """n_features : int, default=2**18
    The column space of dict rows (``learn_one`` and the other per-event methods): str
    feature names are hashed into this many columns exactly as scikit-learn's
    ``FeatureHasher(n_features, input_type="dict", alternate_sign=False)`` hashes them, and
    int keys are columns below it. Rows of numbers set the width by their length instead.""",
    "n_tasks_open_graph": """n_tasks : int or None, default=None
    None: open-ended task labels (any hashable ids; a new label joins as a new task; graph
    "complete" is then the open-ended complete graph T_ii = 1, T_ij = 1/2; DECISIONS.md).""",
    "n_tasks_fixed": """n_tasks : int, default=None
    The number of tasks; the first fit refuses the default ``None`` with the reason: this
    learner's task relation is sized for a fixed set of tasks (labels may be strings, at most
    n_tasks of them; DECISIONS.md, "Open-ended task sets").""",
    "graph_kernel": """graph, kernel, gamma, degree, coef0, normalize
    The task graph and the base kernel, as for ``MTPerceptron`` (here ``kernel="rbf"``).""",
}

_PLACEHOLDER = re.compile(r"^([ \t]*)\{(\w+)\}[ \t]*$", re.M)


def fill_doc(func):
    """Replaces each line ``{name}`` of ``func``'s docstring (a function's or a class's) by
    ``FRAGMENTS[name]``, indented alike."""

    def expand(match: re.Match) -> str:
        indent, name = match.groups()
        return "\n".join(indent + line if line else line for line in FRAGMENTS[name].splitlines())

    func.__doc__ = _PLACEHOLDER.sub(expand, func.__doc__)
    return func
