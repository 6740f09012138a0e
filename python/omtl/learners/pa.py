"""Passive-Aggressive baselines of ROMCO's experiments (ALGORITHMS.md §6.1)."""

from __future__ import annotations

from .._base import OnlineClassifier
from .._constraints import Name, Number

PA_CONSTRAINTS = {
    "C": Number(),
    "variant": Name(),
}


class PAUnique(OnlineClassifier):
    """PA-Unique: one independent Passive-Aggressive classifier per task.

    Crammer, Dekel, Keshet, Shalev-Shwartz & Singer, *Online Passive-Aggressive Algorithms*,
    JMLR 2006. Task i scores ``w_i · x``; after an example with hinge loss
    ``l = max(0, 1 - y w_i·x) > 0``, ``w_i += tau y x`` with ``tau = l/||x||²`` ("pa"),
    ``min(C, l/||x||²)`` ("pa1", PA-I, the default) or ``l/(||x||² + 1/(2C))`` ("pa2", PA-II);
    ``tau = 0`` for ``x = 0``. Linear, no intercept, O(nnz) per example. On round-structured data
    (``learn_rounds``) rounds are flattened row by row (§1.3).

    Parameters
    ----------
    n_tasks : int or None, default=None
        None: open-ended task labels (any hashable ids; a new label joins as a new task).
    C : float, default=1.0
        Aggressiveness (PA-I and PA-II; ROMCO's experiments use 1).
    variant : {"pa", "pa1", "pa2"}, default="pa1"
    {n_features}

    Examples
    --------
    >>> import numpy as np
    >>> from omtl import PAUnique
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.5]])
    >>> PAUnique(n_tasks=2).learn(X, [1, -1, -1], tasks=[0, 1, 0]).tolist()
    [1, 1, 1]
    """

    _global = False
    _shard_state = "component"
    _grows = True  # DECISIONS.md, open-ended task sets

    def __init__(self, *, n_tasks=None, C=1.0, variant="pa1", n_features=2**18):
        self._store_params(locals())

    _native_kind = "passive_aggressive"
    _parameter_constraints = PA_CONSTRAINTS

    def _native_params(self, n_features, sparse):
        return {**self._validated_params(), "shared": self._global}


class PAGlobal(PAUnique):
    """PA-Global: one Passive-Aggressive classifier shared by all tasks (task ids are ignored).

    Same update as ``PAUnique`` (Crammer et al., JMLR 2006), on a single weight vector.

    Parameters
    ----------
    n_tasks, C, variant
        As ``PAUnique``.
    {n_features}

    Examples
    --------
    >>> from omtl import PAGlobal
    >>> PAGlobal(n_tasks=2).learn([[1.0, 0.0], [0.0, 1.0], [1.0, 0.5]], [1, -1, -1], tasks=[0, 1, 0]).tolist()
    [1, 1, 1]
    """

    _global = True
    _shard_state = "shared"
    _coupled_shards = True

    def __init__(self, *, n_tasks=None, C=1.0, variant="pa1", n_features=2**18):
        super().__init__(n_tasks=n_tasks, C=C, variant=variant, n_features=n_features)
