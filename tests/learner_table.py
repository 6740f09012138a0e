"""One table pairing every native learner with its reference twin, and the settings to test.

Each entry: (id, native class, reference class, constructor kwargs without n_tasks). The
conformance suite (test_api.py) and the parity suite (test_parity.py) run over all of them;
a new learner joins both by adding its lines here.
"""

import omtl
import omtl.reference as ref

LEARNERS = [
    ("battery-linear", omtl.KernelPerceptron, ref.KernelPerceptron, {}),
    ("battery-rbf", omtl.KernelPerceptron, ref.KernelPerceptron, {"kernel": "rbf", "gamma": 0.5}),
    ("mtp-linear-C", omtl.MTPerceptron, ref.MTPerceptron, {}),
    ("mtp-poly-D", omtl.MTPerceptron, ref.MTPerceptron, {"graph": "disconnected", "kernel": "poly", "degree": 2, "normalize": True}),
    ("mtp-rbf-C", omtl.MTPerceptron, ref.MTPerceptron, {"kernel": "rbf", "gamma": 0.7}),
    ("rbp-rbf-C-B20", omtl.MTRBP, ref.MTRBP, {"budget": 20, "kernel": "rbf", "gamma": 0.7, "seed": 3}),
    ("rbp-linear-D-B7", omtl.MTRBP, ref.MTRBP, {"budget": 7, "graph": "disconnected", "kernel": "linear", "seed": 12345678901234567890}),
    ("rbp-poly-C-B1", omtl.MTRBP, ref.MTRBP, {"budget": 1, "kernel": "poly", "degree": 3, "normalize": True}),
    ("forg-rbf-C-B20", omtl.MTFORG, ref.MTFORG, {"budget": 20, "kernel": "rbf", "gamma": 0.7}),
    ("forg-linear-D-B7", omtl.MTFORG, ref.MTFORG, {"budget": 7, "graph": "disconnected", "kernel": "linear", "radius": 3.0}),
    ("forg-poly-C-B1", omtl.MTFORG, ref.MTFORG, {"budget": 1, "kernel": "poly", "degree": 2, "normalize": True}),
]

IDS = [entry[0] for entry in LEARNERS]
