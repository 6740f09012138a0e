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
    ("romco-default", omtl.ROMCO, ref.ROMCO, {}),
    ("romco-strong", omtl.ROMCO, ref.ROMCO, {"eta1": 0.2, "eta2": 0.05, "lambda1": 0.5, "lambda2": 0.3}),
    ("romco-mistake", omtl.ROMCO, ref.ROMCO, {"lambda1": 0.05, "lambda2": 0.02, "update": "mistake"}),
    ("romco-lambda1-0", omtl.ROMCO, ref.ROMCO, {"lambda1": 0.0, "lambda2": 0.1}),
    ("pa-global-pa1", omtl.PAGlobal, ref.PAGlobal, {}),
    ("pa-global-pa", omtl.PAGlobal, ref.PAGlobal, {"variant": "pa"}),
    ("pa-unique-pa1", omtl.PAUnique, ref.PAUnique, {"C": 0.3}),
    ("pa-unique-pa2", omtl.PAUnique, ref.PAUnique, {"variant": "pa2", "C": 0.5}),
]

IDS = [entry[0] for entry in LEARNERS]
