"""The engine's `Default` hyper-parameters (src/learner/defaults.rs) equal the Python classes'
defaults: every learner built with its `__init__` defaults hands the engine the parameters that
the Rust `XParams::default()` holds, read through the class's own `_native_params` mapping."""

from __future__ import annotations

import inspect

import pytest

from omtl import learners
from omtl._native import LEARNER_KINDS, _testing

# The budget learners' `budget` is required in some releases of the Python classes; the engine's
# default (`omtl::learner::defaults::DEFAULT_BUDGET`) is the package's value.
DEFAULT_BUDGET = 1000

# Parameters a class fixes rather than takes (two classes share one engine kind): the value the
# engine's default holds, which the class overrides by design.
CLASS_FIXED = {
    "PAGlobal": {"shared": False},
    "TRML": {"regularizer": "l21"},
}

CLASSES = {name: getattr(learners, name) for name in learners.__all__}
CLASSES = {name: cls for name, cls in CLASSES.items() if cls.__name__ == name}  # no aliases


def default_kwargs(cls) -> dict:
    """The arguments a learner needs besides its defaults: n_tasks, and budget when required."""
    kwargs = {"n_tasks": 2}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name in ("self", "n_tasks") or param.default is not inspect.Parameter.empty:
            continue
        assert name == "budget", f"{cls.__name__}.{name} has no default"
        kwargs[name] = DEFAULT_BUDGET
    return kwargs


def native_params(cls, **overrides) -> dict:
    return cls(**default_kwargs(cls), **overrides)._native_params(3, False)


def test_every_kind_is_covered():
    assert {cls._native_kind for cls in CLASSES.values()} == set(LEARNER_KINDS)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_the_engine_default_is_the_python_default(name):
    cls = CLASSES[name]
    params = native_params(cls)
    fixed = CLASS_FIXED.get(name, {})
    for key, value in fixed.items():
        # The fixed parameter does differ from the engine's default (otherwise it need not be listed).
        assert _testing.differs_from_default(cls._native_kind, params) is not None
        params[key] = value
    assert _testing.differs_from_default(cls._native_kind, params) is None


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("MTLinear", {"shared_rate": 1.0}),
        ("MTRBP", {"seed": 1}),
        ("MTBPRJ", {"eta": 0.1}),
        ("ROMCO", {"lambda2": 1e-3}),
        ("OMTRL", {"epoch": 10}),
        ("PAUnique", {"variant": "pa2"}),
    ],
)
def test_a_changed_parameter_is_reported(name, change):
    report = _testing.differs_from_default(CLASSES[name]._native_kind, native_params(CLASSES[name], **change))
    assert report is not None and "default" in report


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown learner kind"):
        _testing.differs_from_default("nope", {})
