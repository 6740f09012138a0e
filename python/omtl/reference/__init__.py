"""Reference twins of every learner: plain Python + NumPy, written like the papers' pseudocode.

They share the public API (and its input checking) with the native classes and are the oracle
the tests compare the Rust engine against. They are slow by design.
"""

from .._registry import discover

# Every twin the modules of this package define (omtl._registry.discover), under the names
# omtl.learners exports.
_TWINS = discover(__name__, __path__)
globals().update(_TWINS)
__all__ = list(_TWINS)
