"""Base-kernel hyper-parameters (ALGORITHMS.md §2.2), named as in scikit-learn's SVC.

``gamma`` is a positive number, ``"scale"`` or ``None`` (the default: ``"scale"`` for rbf, 1 for
poly). ``"scale"`` is 1 / (n_features * Var(X)) as in scikit-learn's SVC, Var over every entry of
the **first batch** a model learns (implicit zeros of a sparse batch included), fixed from then on.
A first batch whose entries are all equal (Var = 0, e.g. one row of one feature, or an all-zero
batch) falls back to 1/n_features rather than SVC's 1.0. ``"scale"`` beat 1/n_features on every
real data set (docs/results/gamma_scale.md); a model file of an older version that stores no
resolved value keeps 1/n_features (CHANGELOG.md). See docs/DECISIONS.md.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from . import _native

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


def scale_gamma(X) -> float:
    """The ``gamma="scale"`` value of a batch: 1 / (n_features * Var(X)), as scikit-learn's SVC.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        The first batch a model learns (finite values; at least one row).

    Returns
    -------
    float
        ``1 / (n_features * Var)``, the variance taken over every entry of ``X`` (implicit zeros of
        a sparse ``X`` included); ``1 / n_features`` when that variance is 0 or the result is not a
        finite positive number.
    """
    # One formula for Python and Rust users: the engine's (omtl::kernel::scale_gamma).
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if not X.has_canonical_format:  # duplicate entries are one entry, their sum
            X = X.copy()
            X.sum_duplicates()
        return _native.scale_gamma((X.indptr.astype(np.int64), X.indices.astype(np.uint32),
                                    np.ascontiguousarray(X.data, dtype=np.float64), X.shape[1]))
    return _native.scale_gamma(np.ascontiguousarray(X, dtype=np.float64))


@dataclass(frozen=True)
class KernelSpec:
    """A resolved base kernel: ``gamma`` is a number (its default depends on the kernel and d)."""

    name: str
    gamma: float
    degree: int
    coef0: float
    normalize: bool

    @classmethod
    def resolve(cls, kernel, gamma, degree, coef0, normalize, n_features: int, *, scaled=None) -> KernelSpec:
        """The kernel the hyper-parameters describe, validated, ``gamma`` made a number.

        Parameters
        ----------
        kernel : {"linear", "poly", "rbf"}
        gamma : float, None or "scale"
            "scale": ``scaled``; None: ``scaled`` for rbf (1/n_features when ``scaled`` is not
            given: a model fitted before "scale" became the default), 1 for poly.
        degree : int
            Polynomial degree, in [1, MAX_DEGREE].
        coef0 : float
            Polynomial offset, finite and >= 0.
        normalize : bool
            Cosine normalisation of the kernel.
        n_features : int
            Number of features d.
        scaled : float, optional
            The value ``gamma="scale"`` stands for (``scale_gamma`` of the first batch);
            required when ``gamma="scale"``, ignored for a number.

        Returns
        -------
        KernelSpec
            With a finite positive ``gamma``.
        """
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        if gamma is None:
            # rbf defaults to "scale" (§2.2's 1/d only for a model fitted before that), poly to 1.
            if kernel != "rbf":
                gamma = 1.0
            else:
                gamma = scaled if scaled is not None else 1.0 / n_features
        elif isinstance(gamma, str) and gamma == "scale":
            if scaled is None:
                raise ValueError('gamma="scale" is resolved from the first batch a model learns')
            gamma = scaled
        if isinstance(gamma, str) or not float(gamma) > 0 or gamma != gamma or float(gamma) == float("inf"):
            raise ValueError(f'gamma must be a positive number, None or "scale", got {gamma!r}')
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
