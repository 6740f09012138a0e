"""Reference twins of every learner: plain Python + NumPy, written like the papers' pseudocode.

They share the public API (and its input checking) with the native classes and are the oracle
the tests compare the Rust engine against. They are slow by design. Every name of
``omtl.learners.__all__`` has its twin here, under the same name, defined in the module of the
same name as the native class's (``omtl.learners.pa.PAGlobal``: ``omtl.reference.pa.PAGlobal``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .. import learners as _learners

__all__ = list(_learners.__all__)


def _twin(name: str) -> type:
    module = getattr(_learners, name).__module__.rsplit(".", 1)[1]
    return getattr(importlib.import_module(f".{module}", __name__), name)


globals().update({name: _twin(name) for name in __all__})

if TYPE_CHECKING:  # the twins, for type checkers: found above from the learner list
    from .._base import OnlineClassifier

    def __getattr__(name: str) -> type[OnlineClassifier]: ...
