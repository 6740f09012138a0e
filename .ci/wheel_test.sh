#!/usr/bin/env bash
# The abi3 wheel as a user without Rust gets it: build it (maturin build --release --out dist), install it
# into a fresh venv whose PATH has no Rust toolchain, run `omtl demo` and every learner.
# WHEEL_PYTHONS="python3 /path/to/python3.9 ...": the interpreters to test the one wheel with.
set -euo pipefail
cd "$(dirname "$0")/.."
# the README's build line (into dist/) and its pick of the newest wheel there
maturin build --release --out dist --quiet 2>&1 | tail -n 3
wheel=$(ls -t dist/omtl-*-abi3-*.whl | head -n 1)
echo "wheel: $wheel"

# PATH without any folder holding cargo or rustc
no_rust_path=$(python3 -c '
import os, sys
keep = [d for d in os.environ["PATH"].split(os.pathsep)
        if not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc", "rustup"))]
print(os.pathsep.join(keep))')
smoke="$(pwd)/.ci/wheel_smoke.py"
for python in ${WHEEL_PYTHONS:-python3}; do
    echo "== the wheel with $($python --version)"
    work=$(mktemp -d)
    "$python" -m venv "$work/venv"
    cp "$wheel" "$work/"
    (cd "$work" && env PATH="$work/venv/bin:$no_rust_path" OMTL_WHEEL_VENV="$work/venv/" SMOKE="$smoke" bash -euo pipefail -c '
        if command -v cargo || command -v rustc; then echo "a Rust toolchain is still on the PATH"; exit 1; fi
        pip install --quiet --disable-pip-version-check omtl-*.whl
        omtl demo --n-samples 600 --no-progress
        python "$SMOKE"
    ')
    rm -rf "$work"
done
