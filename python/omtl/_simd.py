"""Which SIMD build the native kernels run, and the ``OMTL_SIMD`` override.

The native engine picks the widest build the CPU runs (AVX-512, AVX2 + FMA, or portable); the
fused builds change the last bits of some results. ``OMTL_SIMD=portable|avx2|avx512`` caps the
level (never above what the CPU has), so results of another machine's build can be reproduced
and every build tested on one machine. It is read once, when the engine first needs it.
"""

from __future__ import annotations

import os
import warnings

from . import _native

LEVELS = ("portable", "avx2", "avx512")


def simd_level() -> str:
    """The SIMD build the native kernels run.

    Returns
    -------
    str
        ``"portable"``, ``"avx2"`` or ``"avx512"``: the CPU's widest, capped by the ``OMTL_SIMD``
        environment variable.
    """
    return _native.simd_level()


def detected_simd_level() -> str:
    """The widest SIMD build this CPU runs, whatever ``OMTL_SIMD`` says.

    Returns
    -------
    str
        ``"portable"``, ``"avx2"`` or ``"avx512"``.
    """
    return _native.detected_simd_level()


def supported_simd_levels() -> list[str]:
    """Every level ``OMTL_SIMD`` can select on this CPU, narrowest first.

    Returns
    -------
    list of str
    """
    return list(LEVELS[: LEVELS.index(detected_simd_level()) + 1])


def warn_on_bad_override() -> None:
    value = os.environ.get("OMTL_SIMD")
    if value is not None and value.strip().lower() not in LEVELS:
        warnings.warn(
            f"OMTL_SIMD={value!r} is not one of {', '.join(LEVELS)}; it is ignored "
            f"(the native kernels use {simd_level()!r})",
            RuntimeWarning,
            stacklevel=3,
        )
