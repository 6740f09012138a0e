"""The native (Rust-backed) learners."""

from .perceptron import KernelPerceptron, MTPerceptron

__all__ = ["KernelPerceptron", "MTPerceptron"]
