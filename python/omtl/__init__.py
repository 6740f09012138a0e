"""omtl: online multitask binary classification under a memory budget.

Learners follow one API (scikit-learn/River style): ``partial_fit(X, y, *, tasks)``,
``learn(X, y, *, tasks)`` (the predictions made before each update), ``decision_function``,
``predict``. Every learner has a NumPy twin in :mod:`omtl.reference`.
"""

from . import datasets, kernels
from .evaluate import EvaluationReport, evaluate
from .graph import TaskGraph
from .learners import CWCOL, MTFL, OMTL, OMTRL, ROMCO, TRML, KernelPerceptron, MTPerceptron, PAGlobal, PAUnique

__version__ = "0.1.0"

__all__ = [
    "CWCOL",
    "MTFL",
    "OMTL",
    "OMTRL",
    "TRML",
    "EvaluationReport",
    "KernelPerceptron",
    "MTPerceptron",
    "PAGlobal",
    "PAUnique",
    "ROMCO",
    "TaskGraph",
    "datasets",
    "evaluate",
    "kernels",
]
