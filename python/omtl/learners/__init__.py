"""The native (Rust-backed) learners."""

from .perceptron import KernelPerceptron, MTPerceptron
from .projectron import MTBPRJ, MTBPRJ2, MTPRJ, MTPRJ2

__all__ = ["MTBPRJ", "MTBPRJ2", "MTPRJ", "MTPRJ2", "KernelPerceptron", "MTPerceptron"]
