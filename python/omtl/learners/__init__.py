"""The native (Rust-backed) learners: every learner class the modules of this package define
(found by ``omtl._registry.discover``; a new module's classes join without a line here)."""

from .._registry import discover

_LEARNERS = discover(__name__, __path__)
globals().update(_LEARNERS)
__all__ = list(_LEARNERS)
