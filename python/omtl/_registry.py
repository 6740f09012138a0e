"""The public learners, read from the explicit list ``omtl.learners.__all__`` (native classes;
``omtl.reference`` exports their twins under the same names). A learner is a public class that
declares its native kind (``_native_kind``, one of ``omtl._native.LEARNER_KINDS``: the one list of
learners, in src/learner/mod.rs); ``tests/test_registry.py`` checks that every kind has a class, a
twin, test settings and a README row, and that no module defines a learner the list lacks.
"""

from __future__ import annotations


def __getattr__(name: str):
    # LEARNERS (class names), ALIASES ({alias: class name}) and EXPORTS (both, sorted): what
    # omtl.learners exports, read when first asked for (so that importing this module is free).
    from . import learners

    classes = {n: getattr(learners, n) for n in learners.__all__}
    table = {
        "LEARNERS": tuple(n for n, c in classes.items() if c.__name__ == n),
        "ALIASES": {n: c.__name__ for n, c in classes.items() if c.__name__ != n},
        "EXPORTS": list(classes),
    }
    if name not in table:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return table[name]
