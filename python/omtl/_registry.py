"""The public learners, found rather than listed. A learner is a public class, defined in a public
module of ``omtl.learners`` (native) or ``omtl.reference`` (NumPy twins), that declares its native
kind (``_native_kind``, one of ``omtl._native.LEARNER_KINDS``: the one list of learners, in
src/learner/mod.rs). Both packages export what :func:`discover` finds in them, so a new learner
module joins both without a registration line; ``tests/test_registry.py`` checks that every kind has
a class, a twin, test settings and a README row.
"""

from __future__ import annotations

import importlib
import pkgutil


def discover(package: str, path) -> dict[str, type]:
    """``{name: class}`` of the learners the modules of ``package`` (found on ``path``) define,
    sorted by name; an alias (another public name of the same class, as ``MTPRJ = MTBPRJ``)
    counts as a name."""
    found = {}
    for info in pkgutil.iter_modules(path):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for name, obj in vars(module).items():
            if (
                not name.startswith("_")
                and isinstance(obj, type)
                and obj.__module__ == module.__name__
                and getattr(obj, "_native_kind", "")
            ):
                found[name] = obj
    return dict(sorted(found.items()))


def __getattr__(name: str):
    # LEARNERS (class names), ALIASES ({alias: class name}) and EXPORTS (both, sorted): what
    # omtl.learners exports, read when first asked for (omtl.learners imports this module).
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
