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
    # Budget Projectrons (§4.4, §4.5): budgets small enough that the parity streams exercise
    # insertions, projections and evictions. They meet the 1e-9 parity tolerance.
    ("mtbprj-rbf-C", omtl.MTBPRJ, ref.MTBPRJ, {"budget": 10, "gamma": 0.3, "eta": 0.4}),
    ("mtbprj-poly-D-squared", omtl.MTBPRJ, ref.MTBPRJ,
     {"budget": 15, "graph": "disconnected", "kernel": "poly", "normalize": True, "threshold_on": "squared", "eta": 0.3}),
    ("mtbprj2-rbf-C", omtl.MTBPRJ2, ref.MTBPRJ2, {"budget": 10, "gamma": 0.3, "eta": 0.4}),
    ("mtbprj2-linear-D", omtl.MTBPRJ2, ref.MTBPRJ2, {"budget": 12, "graph": "disconnected", "kernel": "linear", "eta": 0.1}),
    ("mtbprj2-literal14", omtl.MTBPRJ2, ref.MTBPRJ2, {"budget": 10, "gamma": 0.3, "eta": 0.4, "alg2_literal_line14": True}),
]

IDS = [entry[0] for entry in LEARNERS]
