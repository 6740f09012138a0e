"""The Perceptron battery and the multitask kernel Perceptron: their conformance settings (the
invariants are in test_perceptron_invariants.py)."""

import omtl
import omtl.reference as ref

# This module's learners in the conformance and parity suites (see learner_table.py).
CONFORMANCE = [
    ("battery-linear", omtl.KernelPerceptron, ref.KernelPerceptron, {}),
    ("battery-rbf", omtl.KernelPerceptron, ref.KernelPerceptron, {"kernel": "rbf", "gamma": 0.5}),
    ("mtp-linear-C", omtl.MTPerceptron, ref.MTPerceptron, {}),
    ("mtp-poly-D", omtl.MTPerceptron, ref.MTPerceptron, {"graph": "disconnected", "kernel": "poly", "degree": 2, "normalize": True}),
    ("mtp-rbf-C", omtl.MTPerceptron, ref.MTPerceptron, {"kernel": "rbf", "gamma": 0.7}),
]
