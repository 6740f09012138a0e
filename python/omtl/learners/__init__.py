"""The native (Rust-backed) learners."""

from .pa import PAGlobal, PAUnique
from .perceptron import KernelPerceptron, MTPerceptron
from .romco import ROMCO

__all__ = ["KernelPerceptron", "MTPerceptron", "PAGlobal", "PAUnique", "ROMCO"]
