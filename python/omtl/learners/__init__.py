"""The native (Rust-backed) learners."""

from .baselines import CWCOL, MTFL, OMTL, OMTRL, TRML
from .pa import PAGlobal, PAUnique
from .perceptron import KernelPerceptron, MTPerceptron
from .romco import ROMCO

__all__ = ["CWCOL", "MTFL", "OMTL", "OMTRL", "ROMCO", "TRML", "KernelPerceptron", "MTPerceptron", "PAGlobal", "PAUnique"]
