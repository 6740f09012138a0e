"""Reference twins of every learner: plain Python + NumPy, written like the papers' pseudocode.

They share the public API (and its input checking) with the native classes and are the oracle
the tests compare the Rust engine against. They are slow by design.
"""

from .budget import MTFORG, MTRBP
from .perceptron import KernelPerceptron, MTPerceptron

__all__ = ["MTFORG", "MTRBP", "KernelPerceptron", "MTPerceptron"]
