"""Reference twins of every learner: plain Python + NumPy, written like the papers' pseudocode.

They share the public API (and its input checking) with the native classes and are the oracle
the tests compare the Rust engine against. They are slow by design.
"""

from .._registry import EXPORTS
from .baselines import CWCOL, MTFL, OMTL, OMTRL, TRML  # noqa: F401 (re-exported)
from .budget import MTFORG, MTRBP  # noqa: F401 (re-exported)
from .mt_linear import MTLinear  # noqa: F401 (re-exported)
from .pa import PAGlobal, PAUnique  # noqa: F401 (re-exported)
from .perceptron import KernelPerceptron, MTPerceptron  # noqa: F401 (re-exported)
from .projectron import MTBPRJ, MTBPRJ2, MTPRJ, MTPRJ2  # noqa: F401 (re-exported)
from .romco import ROMCO  # noqa: F401 (re-exported)

# The names come from the one registry (omtl._registry).
__all__ = list(EXPORTS)
