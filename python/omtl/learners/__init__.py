"""The native (Rust-backed) learners."""

from .budget import MTFORG, MTRBP
from .perceptron import KernelPerceptron, MTPerceptron

__all__ = ["MTFORG", "MTRBP", "KernelPerceptron", "MTPerceptron"]
