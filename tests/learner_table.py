"""One table pairing every native learner with its reference twin, and the settings to test.

Each entry: (id, native class, reference class, constructor kwargs without n_tasks). The
conformance suite (test_api.py) and the parity suite (test_parity.py) run over all of them. The
entries are not listed here: the learners of ``omtl/learners/<module>.py`` declare theirs as
``CONFORMANCE`` in their own test file, ``tests/test_<module>.py``, so a new learner joins both
suites from its test file (test_registry.py checks that every learner has entries).
"""

import importlib

import omtl.learners


def learner_modules() -> list[str]:
    """The modules of omtl.learners that define a learner, by name."""
    classes = (getattr(omtl.learners, name) for name in omtl.learners.__all__)
    return sorted({cls.__module__.rsplit(".", 1)[1] for cls in classes})


def settings(module: str) -> list:
    """The ``CONFORMANCE`` entries of ``tests/test_<module>.py``."""
    return importlib.import_module(f"test_{module}").CONFORMANCE


LEARNERS = [entry for module in learner_modules() for entry in settings(module)]

IDS = [entry[0] for entry in LEARNERS]
