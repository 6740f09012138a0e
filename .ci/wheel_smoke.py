"""Every learner from an installed wheel: one pass, a model-file round trip (run by .ci/wheel_test.sh)."""

import os
import sys

import numpy as np

import omtl
import omtl.learners

venv = os.environ["OMTL_WHEEL_VENV"]
assert omtl.__file__.startswith(venv), f"omtl comes from {omtl.__file__}, not the wheel in {venv}"
s = omtl.datasets.make_multitask_stream(n_samples=400, n_tasks=4, seed=0)
for name in omtl.learners.__all__:
    model = getattr(omtl, name)(n_tasks=4)
    y_hat = model.learn(s.X, s.y, tasks=s.tasks)
    assert y_hat.shape == s.y.shape and set(np.unique(y_hat)) <= {-1, 1}, name
    again = omtl.loads(omtl.dumps(model))
    assert np.array_equal(again.predict(s.X, tasks=s.tasks), model.predict(s.X, tasks=s.tasks)), name
    print(f"{name:>16}: online error {np.mean(y_hat != s.y):.3f}")
print(f"wheel smoke test: every learner ok; omtl {omtl.__version__} from {omtl.__file__}, Python {sys.version.split()[0]}")
