"""omtl: online multitask binary classification under a memory budget.

Learners follow one API (scikit-learn/River style): ``partial_fit(X, y, *, tasks)``,
``learn(X, y, *, tasks)`` (the predictions made before each update), ``decision_function``,
``predict``. Every learner has a NumPy twin in :mod:`omtl.reference`.
"""

from . import datasets
from .evaluate import EvaluationReport, evaluate
from .graph import TaskGraph
from .learners import MTFORG, MTRBP, KernelPerceptron, MTPerceptron

__version__ = "0.1.0"

__all__ = [
    "EvaluationReport",
    "KernelPerceptron",
    "MTFORG",
    "MTRBP",
    "MTPerceptron",
    "TaskGraph",
    "datasets",
    "evaluate",
]
