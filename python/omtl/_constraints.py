"""Declarative hyper-parameter constraints, in the manner of scikit-learn's
``_parameter_constraints`` (scikit-learn is not a dependency of the core package).

A learner class maps each hyper-parameter it validates to a constraint; the base class
(``OnlineClassifier._validated_params``) checks them once, in declaration order, when the core is
built, and hands the normalised values (Python ``int``/``float``/``bool``/``str``) on. The messages
are the package's: ``"<name> must be ..., got <value!r>"``.

The *range* of an engine parameter is not checked here: a learner declares its numbers as
``Number()`` (any real number), its counts as ``Integer(0, width)`` (what the engine's field
holds) and its options as ``Name()`` (a str), and the engine's parameter check (and the
``parse`` of its option types) (``XParams::check``, src/learner/spec.rs) is the one
place of the rules and their messages, for the native classes and their reference twins alike
(DECISIONS.md, "Hyper-parameter rules in one place").
"""

from __future__ import annotations

import math
import numbers

import numpy as np


def _not_a_number(value, kind) -> bool:
    # bool is an Integral, numpy's bool_ is not a number at all; neither counts as one here.
    return isinstance(value, (bool, np.bool_, str)) or not isinstance(value, kind)


class Constraint:
    """Checks one hyper-parameter and returns it normalised, or raises ValueError."""

    def __call__(self, name: str, value):
        raise NotImplementedError

    def _fail(self, message: str, name: str, value, **extra):
        raise ValueError(message.format(name=name, value=value, **extra))


class Integer(Constraint):
    """An integer in ``[low, high]``. ``message`` replaces the default one for every failure;
    ``too_large`` (if given) is the message for a value above ``high``."""

    def __init__(self, low: int, high: int = 2**63 - 1, *, message: str | None = None, too_large: str | None = None):
        self.low, self.high, self.message, self.too_large = low, high, message, too_large

    def __call__(self, name, value):
        message = self.message or "{name} must be an integer in [{low}, {high}], got {value!r}"
        if _not_a_number(value, numbers.Integral) or value < self.low:
            self._fail(message, name, value, low=self.low, high=self.high)
        if value > self.high:
            self._fail(self.too_large or message, name, value, low=self.low, high=self.high)
        return int(value)


class Real(Constraint):
    """A finite real number, optionally bounded (``low_open``/``high_open``: strict bounds).
    Without ``message``: "must be a finite real number", then "must be >= low" and so on."""

    def __init__(self, low=None, high=None, *, low_open=False, high_open=False, message: str | None = None):
        self.low, self.high, self.low_open, self.high_open, self.message = low, high, low_open, high_open, message

    def __call__(self, name, value):
        try:
            v = None if _not_a_number(value, numbers.Real) else float(value)
        except OverflowError:  # an int beyond float's range
            v = None
        if v is None or not math.isfinite(v):
            self._fail(self.message or "{name} must be a finite real number, got {value!r}", name, value)
        if self.low is not None and (v < self.low or (self.low_open and v == self.low)):
            op = ">" if self.low_open else ">="
            self._fail(self.message or "{name} must be {op} {bound}, got {value!r}", name, value, op=op, bound=self.low)
        if self.high is not None and (v > self.high or (self.high_open and v == self.high)):
            op = "<" if self.high_open else "<="
            self._fail(self.message or "{name} must be {op} {bound}, got {value!r}", name, value, op=op, bound=self.high)
        return v


class Number(Constraint):
    """A real number (not a bool or str), handed on as a float whatever its value: the engine
    checks its range (finite, positive, ...)."""

    def __call__(self, name, value):
        try:
            v = None if _not_a_number(value, numbers.Real) else float(value)
        except OverflowError:  # an int beyond float's range
            v = None
        if v is None:
            self._fail("{name} must be a real number, got {value!r}", name, value)
        return v


class Name(Constraint):
    """The name of an option (a str): the engine parses it (the one list of the names, with its
    message for an unknown one)."""

    def __call__(self, name, value):
        if not isinstance(value, str):
            self._fail("{name} must be the name of an option (a str), got {value!r}", name, value)
        return value


class Boolean(Constraint):
    """A Python or NumPy bool (``lenient``: anything, taken for its truth value)."""

    def __init__(self, *, lenient: bool = False):
        self.lenient = lenient

    def __call__(self, name, value):
        if not self.lenient and not isinstance(value, (bool, np.bool_)):
            self._fail("{name} must be a bool, got {value!r}", name, value)
        return bool(value)


class Optional(Constraint):
    """None (kept, or replaced by ``default``) or what ``inner`` accepts; ``message`` replaces
    the inner message."""

    def __init__(self, inner: Constraint, *, default=None, message: str | None = None):
        self.inner, self.default, self.message = inner, default, message

    def __call__(self, name, value):
        if value is None:
            return self.default
        if self.message is None:
            return self.inner(name, value)
        try:
            return self.inner(name, value)
        except ValueError:
            self._fail(self.message, name, value)


def validate(constraints: dict[str, Constraint], est) -> dict:
    """The hyper-parameters of ``est`` named in ``constraints``, checked in order and normalised."""
    return {name: check(name, getattr(est, name)) for name, check in constraints.items()}
