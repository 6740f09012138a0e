"""Every public function of omtl documents its parameters and its result (numpydoc sections)."""

from __future__ import annotations

import inspect
import re

import pytest

import omtl
import omtl.datasets
import omtl.evaluate
import omtl.graph
import omtl.kernels
import omtl.persistence

# The modules whose public names make up the API, and the classes whose public methods do.
MODULES = (omtl, omtl.datasets, omtl.evaluate, omtl.graph, omtl.kernels, omtl.persistence)
CLASSES = (omtl.TaskGraph, omtl.datasets.Stream, omtl.EvaluationReport,
           # the learners' shared methods, MTLinear's own, and the River adapters'
           omtl._base.OnlineClassifier, omtl._sklearn.SklearnClassifierMixin,
           *(getattr(omtl.learners, name) for name in omtl.learners.__all__))
try:
    import omtl.river

    CLASSES += (omtl.river.RiverClassifier,)
except ImportError:  # River is an optional extra
    pass


def public_names(module) -> list[str]:
    """``__all__``, or else the names a module defines itself without a leading underscore."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [n for n, obj in vars(module).items()
            if not n.startswith("_") and getattr(obj, "__module__", None) == module.__name__]


def public_functions() -> dict:
    found = {}
    for module in MODULES:
        for name in public_names(module):
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    for cls in CLASSES:
        for name, attr in vars(cls).items():
            func = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            func = getattr(func, "fn", func)  # available_if-style descriptors (predict_proba)
            if not name.startswith("_") and inspect.isfunction(func):
                found[f"{cls.__module__}.{cls.__qualname__}.{name}"] = func
    return found


FUNCTIONS = public_functions()


def test_the_walk_finds_the_api():
    names = set(FUNCTIONS)
    for expected in ("omtl.evaluate.evaluate", "omtl.persistence.save", "omtl.persistence.loads",
                     "omtl.datasets.loaders.load_school", "omtl.graph.TaskGraph.from_edges",
                     "omtl.kernels.kernel_matrix", "omtl._simd.simd_level", "omtl.datasets._stream.Stream.shuffled"):
        assert expected in names


def section(doc: str, title: str) -> bool:
    return re.search(rf"^{title}\n-{{{len(title)}}}$", doc, re.M) is not None


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_public_function_has_parameters_and_returns_sections(name):
    func = FUNCTIONS[name]
    doc = inspect.getdoc(func) or ""
    params = [p for p in inspect.signature(func).parameters if p not in ("self", "cls")]
    if params:
        assert section(doc, "Parameters"), f"{name}: no Parameters section"
        for p in params:
            assert re.search(rf"^\**{p}\b", doc, re.M), f"{name}: parameter {p!r} is not documented"
    assert section(doc, "Returns"), f"{name}: no Returns section"
