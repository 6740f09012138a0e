"""The native (Rust-backed) learners."""

from .baselines import CWCOL, MTFL, OMTL, OMTRL, TRML
from .perceptron import KernelPerceptron, MTPerceptron

__all__ = ["CWCOL", "MTFL", "OMTL", "OMTRL", "TRML", "KernelPerceptron", "MTPerceptron"]
