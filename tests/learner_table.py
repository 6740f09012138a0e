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
    ("cwcol", omtl.CWCOL, ref.CWCOL, {}),
    ("cwcol-w0", omtl.CWCOL, ref.CWCOL, {"omega": 0.0, "confidence": 0.9}),
    ("cwcol-w1", omtl.CWCOL, ref.CWCOL, {"omega": 1.0, "a": 0.5}),
    ("omtrl-batch", omtl.OMTRL, ref.OMTRL, {"epoch": 40}),
    ("omtrl-logdet", omtl.OMTRL, ref.OMTRL, {"relation_update": "logdet", "epoch": 40, "eta": 1e-2}),
    ("omtrl-vonneumann", omtl.OMTRL, ref.OMTRL, {"relation_update": "vonneumann", "epoch": 40}),
    ("omtl-linf", omtl.OMTL, ref.OMTL, {}),
    ("omtl-l2-explicit", omtl.OMTL, ref.OMTL, {"global_norm": "l2", "explicit": True, "C": 0.5}),
    ("omtl-l1", omtl.OMTL, ref.OMTL, {"global_norm": "l1", "C": 0.3}),
    ("mtfl", omtl.MTFL, ref.MTFL, {"retrain_every": 30}),
    ("trml", omtl.TRML, ref.TRML, {"retrain_every": 40, "rho": 0.05}),
    ("romco-default", omtl.ROMCO, ref.ROMCO, {}),
    ("romco-strong", omtl.ROMCO, ref.ROMCO, {"eta1": 0.2, "eta2": 0.05, "lambda1": 0.5, "lambda2": 0.3}),
    ("romco-mistake", omtl.ROMCO, ref.ROMCO, {"lambda1": 0.05, "lambda2": 0.02, "update": "mistake"}),
    ("romco-lambda1-0", omtl.ROMCO, ref.ROMCO, {"lambda1": 0.0, "lambda2": 0.1}),
    ("pa-global-pa1", omtl.PAGlobal, ref.PAGlobal, {}),
    ("pa-global-pa", omtl.PAGlobal, ref.PAGlobal, {"variant": "pa"}),
    ("pa-unique-pa1", omtl.PAUnique, ref.PAUnique, {"C": 0.3}),
    ("pa-unique-pa2", omtl.PAUnique, ref.PAUnique, {"variant": "pa2", "C": 0.5}),
    ("rbp-rbf-C-B20", omtl.MTRBP, ref.MTRBP, {"budget": 20, "kernel": "rbf", "gamma": 0.7, "seed": 3}),
    ("rbp-linear-D-B7", omtl.MTRBP, ref.MTRBP, {"budget": 7, "graph": "disconnected", "kernel": "linear", "seed": 12345678901234567890}),
    ("rbp-poly-C-B1", omtl.MTRBP, ref.MTRBP, {"budget": 1, "kernel": "poly", "degree": 3, "normalize": True}),
    ("forg-rbf-C-B20", omtl.MTFORG, ref.MTFORG, {"budget": 20, "kernel": "rbf", "gamma": 0.7}),
    ("forg-linear-D-B7", omtl.MTFORG, ref.MTFORG, {"budget": 7, "graph": "disconnected", "kernel": "linear", "radius": 3.0}),
    ("forg-poly-C-B1", omtl.MTFORG, ref.MTFORG, {"budget": 1, "kernel": "poly", "degree": 2, "normalize": True}),
    # MTLinear: every loss and update rule, the three factor shapes, hashing with collisions.
    ("mtlinear-default", omtl.MTLinear, ref.MTLinear, {}),
    ("mtlinear-hinge-D", omtl.MTLinear, ref.MTLinear, {"loss": "hinge", "graph": "disconnected"}),
    ("mtlinear-squared-adagrad", omtl.MTLinear, ref.MTLinear, {"loss": "squared", "update": "adagrad", "learning_rate": 0.2}),
    ("mtlinear-sgd-nobias", omtl.MTLinear, ref.MTLinear, {"update": "sgd", "fit_intercept": False, "learning_rate": 1.0}),
    ("mtlinear-hash2", omtl.MTLinear, ref.MTLinear, {"hash_bits": 2}),
    ("mtlinear-graph", omtl.MTLinear, ref.MTLinear,
     {"graph": omtl.TaskGraph.from_edges(4, [(0, 1), (1, 2)], [1.0, 0.5]), "loss": "hinge"}),
]

IDS = [entry[0] for entry in LEARNERS]
