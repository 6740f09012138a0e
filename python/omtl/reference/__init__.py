"""Reference twins of every learner: plain Python + NumPy, written like the papers' pseudocode.

They share the public API (and its input checking) with the native classes and are the oracle
the tests compare the Rust engine against. They are slow by design.
"""

from .perceptron import KernelPerceptron, MTPerceptron
from .projectron import MTBPRJ, MTBPRJ2, MTPRJ, MTPRJ2

__all__ = ["MTBPRJ", "MTBPRJ2", "MTPRJ", "MTPRJ2", "KernelPerceptron", "MTPerceptron"]
