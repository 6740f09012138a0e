"""Native learners against their NumPy reference twins on the same seeded streams (tie-aware:
see parity.py)."""

from __future__ import annotations

import pytest
from conftest import random_graph, random_stream
from learner_table import IDS, LEARNERS
from parity import assert_same_run

import omtl
import omtl.reference as ref


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("entry", LEARNERS, ids=IDS)
def test_native_matches_reference(entry, sparse):
    _, native_cls, ref_cls, params = entry
    X, y, tasks = random_stream(n=240, d=7, k=4, seed=5, sparse=sparse)
    assert_same_run(native_cls(n_tasks=4, **params), ref_cls(n_tasks=4, **params), X, y, tasks)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("kernel", ["linear", "poly", "rbf"])
def test_mt_perceptron_parity_on_random_graphs(kernel, weighted):
    k = 6
    graph = random_graph(k, seed=3, weighted=weighted)
    X, y, tasks = random_stream(n=300, d=6, k=k, seed=11)
    params = {"graph": graph, "kernel": kernel}
    assert_same_run(omtl.MTPerceptron(n_tasks=k, **params), ref.MTPerceptron(n_tasks=k, **params), X, y, tasks)
