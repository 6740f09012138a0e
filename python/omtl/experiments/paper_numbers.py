"""The papers' published numbers, transcribed from the sources (no computation here).

Table 1 of Cavallanti & Cesa-Bianchi, *Memory Constraint Online Multitask Classification*
(arXiv, April 2022), section 5: online training F-measure (%) after one pass, for the budget
learners with G = C (complete graph) or D (disconnected graph) and B = 25 %, 10 %, 5 % of the
Perceptron battery's active set; the battery's own F-measure is printed under each data-set name.

Tables 2 and 3 of Yang, Li, Zhao, Li & Das Gollapalli, *Learning Correlative and Personalized
Structure for Online Multi-Task Classification* (SDM 2016), section 5.2: cumulative error rate (%)
and F1-measure (%) as mean (standard deviation) over 10 shuffles, and run time in seconds.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------------------------
# Cavallanti & Cesa-Bianchi, Table 1
# ---------------------------------------------------------------------------------------------

TABLE1_SOURCE = "Cavallanti & Cesa-Bianchi (arXiv 2022), Table 1 (online training F-measure, %)"

#: Battery (k independent kernel Perceptrons) F-measure, printed under each data-set name.
TABLE1_BATTERY = {
    "ecml2006_a": 92.0,
    "school": 39.1,
    "sentiment": 71.5,
}

#: Column order of the paper's Table 1: (graph, budget percent).
TABLE1_COLUMNS = [("C", 25), ("D", 25), ("C", 10), ("D", 10), ("C", 5), ("D", 5)]

#: Row order of the paper's Table 1.
TABLE1_ALGORITHMS = ["MTRBP", "MTFORG", "MTBPRJ", "MTBPRJ-2"]

_T1_ROWS = {
    "ecml2006_a": {
        "MTRBP": [84.8, 81.4, 78.0, 73.1, 72.8, 66.7],
        "MTFORG": [85.1, 81.7, 77.9, 73.0, 72.3, 66.7],
        "MTBPRJ": [91.6, 89.4, 87.8, 84.0, 83.4, 76.0],
        "MTBPRJ-2": [91.6, 90.3, 89.3, 87.3, 85.4, 82.3],
    },
    "school": {
        "MTRBP": [40.4, 35.0, 38.6, 30.9, 37.3, 26.0],
        "MTFORG": [39.7, 35.1, 38.0, 31.5, 36.9, 25.9],
        "MTBPRJ": [40.6, 37.4, 40.2, 32.6, 39.4, 23.8],
        "MTBPRJ-2": [41.2, 39.1, 40.9, 39.0, 39.6, 37.9],
    },
    "sentiment": {
        "MTRBP": [66.8, 63.3, 62.0, 58.3, 59.4, 56.1],
        "MTFORG": [66.7, 63.4, 62.3, 58.8, 58.8, 56.5],
        "MTBPRJ": [71.4, 67.7, 66.6, 63.6, 64.0, 60.6],
        "MTBPRJ-2": [71.7, 68.5, 67.9, 64.9, 64.5, 61.7],
    },
}

#: ``TABLE1[dataset][(algorithm, graph, percent)]`` = the paper's F-measure in %.
TABLE1 = {
    ds: {(alg, g, p): v for alg, vals in rows.items() for (g, p), v in zip(TABLE1_COLUMNS, vals)}
    for ds, rows in _T1_ROWS.items()
}

# ---------------------------------------------------------------------------------------------
# Yang et al. (ROMCO), Tables 2 and 3
# ---------------------------------------------------------------------------------------------

TABLE2_SOURCE = "Yang et al. (SDM 2016), Table 2 (cumulative error rate and F1-measure, %, mean (std) over 10 shuffles)"
TABLE3_SOURCE = "Yang et al. (SDM 2016), Table 3 (run time in seconds)"

#: The paper's data sets, in its column order.
TABLE2_DATASETS = ["Spam Email", "MHC-I", "EachMovie"]

#: Row order of the paper's Tables 2 and 3 (our learner names).
TABLE2_LEARNERS = ["MTFL", "TRML", "PA-Global", "PA-Unique", "CW-COL", "OMTL", "ROMCO"]

#: ``TABLE2[paper_dataset][learner]`` = ((error mean, error std), (F1 mean, F1 std)) in %.
TABLE2 = {
    "Spam Email": {
        "MTFL": ((13.40, 3.47), (88.39, 4.67)),
        "TRML": ((16.21, 3.77), (86.02, 5.27)),
        "PA-Global": ((7.08, 2.28), (94.04, 2.28)),
        "PA-Unique": ((6.35, 2.04), (94.71, 1.70)),
        "CW-COL": ((5.94, 1.67), (94.93, 1.93)),
        "OMTL": ((6.20, 2.31), (94.79, 2.19)),
        "ROMCO": ((4.97, 2.00), (95.92, 1.55)),
    },
    "MHC-I": {
        "MTFL": ((43.84, 0.50), (51.04, 0.40)),
        "TRML": ((44.26, 0.52), (50.50, 0.46)),
        "PA-Global": ((44.70, 0.40), (45.44, 0.34)),
        "PA-Unique": ((41.62, 0.21), (51.08, 0.28)),
        "CW-COL": ((41.32, 0.37), (50.89, 0.49)),
        "OMTL": ((41.56, 0.20), (51.13, 0.28)),
        "ROMCO": ((37.55, 0.24), (55.43, 0.31)),
    },
    "EachMovie": {
        "MTFL": ((27.51, 12.25), (79.18, 12.87)),
        "TRML": ((26.58, 11.82), (79.89, 12.49)),
        "PA-Global": ((31.80, 5.87), (74.43, 8.61)),
        "PA-Unique": ((19.68, 7.39), (82.97, 9.35)),
        "CW-COL": ((25.45, 6.96), (78.89, 9.30)),
        "OMTL": ((19.44, 7.28), (83.18, 9.29)),
        "ROMCO": ((18.03, 6.57), (84.68, 8.39)),
    },
}

#: ``TABLE3[paper_dataset][learner]`` = run time in seconds (the paper's hardware, not reported).
TABLE3 = {
    "Spam Email": {"TRML": 202.19, "MTFL": 271.84, "PA-Global": 0.86, "PA-Unique": 0.73, "CW-COL": 0.86,
                   "OMTL": 24.62, "ROMCO": 11.49},
    "MHC-I": {"TRML": 361.42, "MTFL": 198.90, "PA-Global": 1.79, "PA-Unique": 1.53, "CW-COL": 3.13,
              "OMTL": 42.92, "ROMCO": 11.45},
    "EachMovie": {"TRML": 4804.25, "MTFL": 8548.12, "PA-Global": 11.27, "PA-Unique": 11.46, "CW-COL": 10.65,
                  "OMTL": 50.01, "ROMCO": 17.92},
}

#: Which of the paper's columns one of our data sets stands in for (only PU spam has a counterpart:
#: the same four PU corpora, but ROMCO's 1,458-dimensional TF-IDF features cannot be rebuilt).
TABLE2_COUNTERPART = {"pu_spam": "Spam Email"}
