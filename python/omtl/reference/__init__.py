"""Reference twins of every learner: plain Python + NumPy, written like the papers' pseudocode.

They share the public API (and its input checking) with the native classes and are the oracle
the tests compare the Rust engine against. They are slow by design. Every name of
``omtl.learners.__all__`` has its twin here, under the same name (``tests/test_registry.py``).
"""

from .baselines import CWCOL, MTFL, OMTL, OMTRL, TRML
from .budget import MTFORG, MTRBP
from .mt_linear import MTLinear
from .pa import PAGlobal, PAUnique
from .perceptron import KernelPerceptron, MTPerceptron
from .projectron import MTBPRJ, MTBPRJ2, MTPRJ, MTPRJ2
from .romco import ROMCO

__all__ = [
    "CWCOL", "KernelPerceptron", "MTBPRJ", "MTBPRJ2", "MTFL", "MTFORG", "MTLinear", "MTPRJ", "MTPRJ2",
    "MTPerceptron", "MTRBP", "OMTL", "OMTRL", "PAGlobal", "PAUnique", "ROMCO", "TRML",
]  # fmt: skip
