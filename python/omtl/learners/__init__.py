"""The native (Rust-backed) learners, one module per family. A new learner class is imported
here and named in ``__all__``; ``omtl._registry``, ``omtl.reference`` and ``omtl.river`` derive
from this list, and ``tests/test_registry.py`` fails on a learner class a module defines but this
list lacks."""

from .baselines import CWCOL, MTFL, OMTL, OMTRL, TRML
from .budget import MTFORG, MTRBP
from .mt_linear import MTLinear
from .pa import PAGlobal, PAUnique
from .perceptron import KernelPerceptron, MTPerceptron
from .projectron import MTBPRJ, MTBPRJ2, MTPRJ, MTPRJ2
from .romco import ROMCO

# Sorted by name (the order omtl's top level and the registry list them in).
__all__ = [
    "CWCOL", "KernelPerceptron", "MTBPRJ", "MTBPRJ2", "MTFL", "MTFORG", "MTLinear", "MTPRJ", "MTPRJ2",
    "MTPerceptron", "MTRBP", "OMTL", "OMTRL", "PAGlobal", "PAUnique", "ROMCO", "TRML",
]  # fmt: skip
