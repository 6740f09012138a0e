"""omtl: online multitask binary classification under a memory budget.

Learners follow one API (scikit-learn/River style): ``partial_fit(X, y, *, tasks)``,
``learn(X, y, *, tasks)`` (the predictions made before each update), ``decision_function``,
``predict``. Every learner has a NumPy twin in :mod:`omtl.reference`. ``save``/``load`` write and
read model files (:mod:`omtl.persistence`).
"""

from . import datasets, kernels, learners
from ._hashing import hash_features
from ._native import StateError
from ._simd import _warn_on_bad_override, detected_simd_level, simd_level
from .evaluate import EvaluationReport, evaluate
from .graph import TaskGraph
from .learners import *  # noqa: F403  (the learner classes; listed in learners.__all__)
from .persistence import dumps, load, loads, save

__version__ = "0.1.0"

__all__ = [
    "EvaluationReport",
    "StateError",
    "TaskGraph",
    "datasets",
    "detected_simd_level",
    "dumps",
    "evaluate",
    "hash_features",
    "kernels",
    "load",
    "loads",
    "save",
    "simd_level",
    *learners.__all__,
]

_warn_on_bad_override()
