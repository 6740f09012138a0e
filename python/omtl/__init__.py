"""omtl: online multitask binary classification under a memory budget.

Learners follow one API (scikit-learn/River style): ``partial_fit(X, y, *, tasks)``,
``learn(X, y, *, tasks)`` (the predictions made before each update), ``decision_function``,
``predict``. Every learner has a NumPy twin in ``omtl.reference``. ``save``/``load`` write and
read model files (``omtl.persistence``).
"""

# The public names are imported on first use (PEP 562): ``import omtl`` alone, as the ``omtl``
# command does, loads neither NumPy nor SciPy, so ``omtl learn FILE`` starts in the time of the
# Python interpreter (docs/DECISIONS.md, "A lazy top-level package"). ``_PUBLIC`` is the one table
# of the names and the module each comes from; type checkers read the imports below.

import sys as _sys
import types as _types
from typing import TYPE_CHECKING

from ._native import CLASS_ALIASES as _ALIASES
from ._native import MODEL_FILE_CLASSES as _CLASSES
from ._simd import warn_on_bad_override

__version__ = "0.1.0"

#: The learner classes and their aliases, sorted: the engine's class table (src/model/estimator/,
#: read without importing a learner; a test holds it equal to ``omtl.learners.__all__``).
_LEARNERS = tuple(sorted([*_CLASSES, *_ALIASES]))

#: Public name -> the submodule defining it (``None``: the name is the submodule itself).
_PUBLIC = {
    "Client": ".client",
    "EvaluationReport": ".evaluate",
    "StateError": "._native",
    "TaskGraph": ".graph",
    "datasets": None,
    "detected_simd_level": "._simd",
    "dumps": ".persistence",
    "evaluate": ".evaluate",
    "evaluate_delayed": "._delayed",
    "hash_features": "._hashing",
    "kernels": None,
    "learners": None,
    "load": ".persistence",
    "loads": ".persistence",
    "save": ".persistence",
    "serve": ".serve",
    "simd_level": "._simd",
    **dict.fromkeys(_LEARNERS, ".learners"),
}

__all__ = [
    "Client",
    "EvaluationReport",
    "StateError",
    "TaskGraph",
    "datasets",
    "detected_simd_level",
    "dumps",
    "evaluate",
    "evaluate_delayed",
    "hash_features",
    "kernels",
    "load",
    "loads",
    "save",
    "serve",
    "simd_level",
]

if TYPE_CHECKING:
    from . import datasets, kernels
    from . import learners as learners  # public, not in __all__
    from ._delayed import evaluate_delayed
    from ._hashing import hash_features
    from ._native import StateError
    from ._simd import detected_simd_level, simd_level
    from .client import Client
    from .evaluate import EvaluationReport, evaluate
    from .graph import TaskGraph
    from .learners import *  # noqa: F403 (the learner classes: omtl.learners.__all__)
    from .persistence import dumps, load, loads, save
    from .serve import serve

    __all__ += learners.__all__  # the learner classes, as type checkers read them
else:
    __all__ += _LEARNERS
del TYPE_CHECKING


def __getattr__(name: str):
    import importlib
    import importlib.util

    module = _PUBLIC.get(name)
    if name not in _PUBLIC:
        # A submodule not yet imported (``omtl.persistence`` after ``import omtl``), as the eager
        # package had them all.
        if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module 'omtl' has no attribute {name!r}")
    value = importlib.import_module(f".{name}" if module is None else module, __name__)
    if module is not None:
        value = getattr(value, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted({*globals(), *_PUBLIC})


class _Package(_types.ModuleType):
    """The package's module type: importing the submodule ``omtl.evaluate`` sets the package's
    attribute ``evaluate`` to that module; the public name is its function, which it keeps (as the
    eager ``from .evaluate import evaluate`` left it)."""

    def __setattr__(self, name, value):
        if isinstance(value, _types.ModuleType) and _PUBLIC.get(name) == f".{name}":
            value = getattr(value, name)
        super().__setattr__(name, value)

    def __reduce__(self):
        # Pickled by name, as pickle and cloudpickle treat plain modules (a function that refers
        # to ``omtl`` ships to Dask workers so).
        import importlib

        return importlib.import_module, (self.__name__,)


_sys.modules[__name__].__class__ = _Package


warn_on_bad_override()
