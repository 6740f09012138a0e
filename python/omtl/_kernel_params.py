"""Base-kernel hyper-parameters (ALGORITHMS.md §2.2), named as in scikit-learn's SVC."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

KERNELS = ("linear", "poly", "rbf")
# Polynomial degrees above this are refused: (gamma <x,x'> + coef0)^degree overflows double
# precision for any row with gamma ||x||^2 + coef0 above 10^(308/degree) (docs/reliability.md).
MAX_DEGREE = 32


def _is_integer(value) -> bool:
    """An int, a NumPy integer, or a float with an integral finite value (not a bool)."""
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, numbers.Integral):
        return True
    return isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer()


@dataclass(frozen=True)
class KernelSpec:
    """A resolved base kernel: ``gamma`` is a number (its default depends on the kernel and d)."""

    name: str
    gamma: float
    degree: int
    coef0: float
    normalize: bool

    @classmethod
    def resolve(cls, kernel, gamma, degree, coef0, normalize, n_features: int) -> KernelSpec:
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        if gamma is None:
            # §2.2: rbf defaults to 1/d, poly to 1.
            gamma = 1.0 / n_features if kernel == "rbf" else 1.0
        if isinstance(gamma, str) or not float(gamma) > 0 or gamma != gamma or float(gamma) == float("inf"):
            raise ValueError(f"gamma must be a positive number or None, got {gamma!r}")
        if not _is_integer(degree) or not 1 <= degree <= MAX_DEGREE:
            raise ValueError(f"degree must be an integer in [1, {MAX_DEGREE}], got {degree!r}")
        if isinstance(coef0, str) or not (float(coef0) >= 0 and math.isfinite(float(coef0))):
            raise ValueError(
                f"coef0 must be a finite number >= 0 (a negative coef0 can make the kernel indefinite), got {coef0!r}"
            )
        return cls(kernel, float(gamma), int(degree), float(coef0), bool(normalize))

    def native(self):
        from . import _native

        return _native.NativeKernel(
            self.name, gamma=self.gamma, degree=self.degree, coef0=self.coef0, normalize=self.normalize
        )
