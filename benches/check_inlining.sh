#!/usr/bin/env bash
# Fails when a SIMD intrinsic, a `Lanes`/`LaneMath` or `Wide` method, the dense dot block
# (`dots_block`), one of MTLinear's generic lane kernels (`*_lanes`, `lane_sum`, ...) or an
# array-building closure survives as a separate function in the release extension. Each of those
# on a hot path is a call (and a
# spill of the vector registers) per use: `dot4_lanes` once summed its lanes through
# `std::array::from_fn`, whose closure is not compiled with the caller's target features, and
# MTRBP ran 3.6x slower. An intrinsic compiled inside a `#[target_feature]` function
# is always inlined, so any such symbol means one escaped its caller's features.
#
#     bash benches/check_inlining.sh [path/to/extension.so]
#
# Default: the extension `make dev` copies into python/omtl, else target/release/libomtl.so.
set -euo pipefail
cd "$(dirname "$0")/.."
so="${1:-}"
if [[ -z "$so" ]]; then
    so=$(ls python/omtl/_native*.so 2>/dev/null | head -n 1 || true)
    [[ -n "$so" ]] || so=target/release/libomtl.so
fi
[[ -f "$so" ]] || { echo "check_inlining: no $so (run: make dev)" >&2; exit 2; }
# CPU detection (`_xgetbv`, `__cpuid`) runs once per process, not on a hot path.
allowed='_xgetbv|__cpuid'
bad=$(nm -C --defined-only "$so" \
    | grep -E 'core::core_arch::|core::array::(try_)?from_fn|as omtl::(linalg::)?simd::(lanes::)?(Lanes|LaneMath)>::|as omtl::kernel::dense_dots::Wide>::|omtl::kernel::dense_dots::dots_block|mt_linear::(lanes::)?[a-z_]+_lanes|mt_linear::(lanes::)?(lane_sum|normalized_rate|write_distinct_stride)\b' \
    | grep -Ev "$allowed" || true)
if [[ -n "$bad" ]]; then
    echo "check_inlining: non-inlined SIMD helpers in $so:" >&2
    echo "$bad" >&2
    exit 1
fi
echo "check_inlining: ok ($so: no out-of-line intrinsic, Lanes/LaneMath/Wide method, dots_block, MTLinear lane kernel or from_fn closure)"
