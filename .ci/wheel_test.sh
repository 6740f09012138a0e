#!/usr/bin/env bash
# The abi3 wheel as a user without Rust gets it: build it (maturin build --release), install it
# into a fresh venv whose PATH has no Rust toolchain, run `omtl demo` and every learner.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf target/wheels
maturin build --release --quiet 2>&1 | tail -n 3
wheel=$(ls target/wheels/omtl-*-abi3-*.whl)
echo "wheel: $wheel"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
# PATH without any folder holding cargo or rustc
no_rust_path=$(python3 -c '
import os, sys
keep = [d for d in os.environ["PATH"].split(os.pathsep)
        if not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc", "rustup"))]
print(os.pathsep.join(keep))')
cp "$wheel" "$work/"
cd "$work"
env PATH="$work/venv/bin:$no_rust_path" bash -euo pipefail -c '
    ! command -v cargo >/dev/null && ! command -v rustc >/dev/null || { echo "a Rust toolchain is still on the PATH"; exit 1; }
    pip install --quiet --disable-pip-version-check omtl-*.whl
    omtl demo --n-samples 600 --no-progress
    python - <<PY
import numpy as np
import omtl
import omtl.learners

assert omtl.__file__.startswith("$work/venv/"), omtl.__file__  # the wheel, not a source tree
s = omtl.datasets.make_multitask_stream(n_samples=400, n_tasks=4, seed=0)
for name in omtl.learners.__all__:
    model = getattr(omtl, name)(n_tasks=4)
    y_hat = model.learn(s.X, s.y, tasks=s.tasks)
    assert y_hat.shape == s.y.shape and set(np.unique(y_hat)) <= {-1, 1}, name
    assert np.array_equal(omtl.loads(omtl.dumps(model)).predict(s.X, tasks=s.tasks), model.predict(s.X, tasks=s.tasks)), name
    print(f"{name:>16}: online error {np.mean(y_hat != s.y):.3f}")
print("wheel smoke test: every learner ok, omtl", omtl.__version__, "from", omtl.__file__)
PY
'
