"""OMTL_SIMD: the SIMD build of the native kernels can be capped, never raised above the CPU's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import omtl
from omtl._simd import LEVELS, supported_simd_levels


def levels_in_fresh_process(value):
    env = {k: v for k, v in os.environ.items() if k != "OMTL_SIMD"}
    if value is not None:
        env["OMTL_SIMD"] = value
    code = "import warnings, omtl; print(omtl.simd_level(), omtl.detected_simd_level())"
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True, check=True)
    level, detected = out.stdout.split()
    return level, detected, out.stderr


def test_levels_are_known_and_ordered():
    assert omtl.detected_simd_level() in LEVELS
    assert omtl.simd_level() in supported_simd_levels()
    assert supported_simd_levels()[0] == "portable"
    assert supported_simd_levels()[-1] == omtl.detected_simd_level()


def test_unset_means_the_widest_build_of_the_cpu():
    level, detected, _ = levels_in_fresh_process(None)
    assert level == detected


@pytest.mark.parametrize("value", LEVELS)
def test_override_caps_the_level_at_the_cpu(value):
    level, detected, err = levels_in_fresh_process(value.upper() + " ")
    assert LEVELS.index(level) == min(LEVELS.index(value), LEVELS.index(detected))
    assert "OMTL_SIMD" not in err


def test_unknown_override_is_ignored_with_a_warning():
    level, detected, err = levels_in_fresh_process("sse9")
    assert level == detected
    assert "OMTL_SIMD='sse9' is not one of portable, avx2, avx512" in err
