"""Invariants of the unbounded Perceptrons: INV-P1, INV-P2, INV-P6, INV-P7."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_graph, random_stream

import omtl
import omtl.reference
from omtl import TaskGraph


def linear_perceptron_on_features(Phi, y):
    """A plain linear Perceptron (updates on y f <= 0) over explicit features; returns its scores."""
    w = np.zeros(Phi.shape[1])
    scores = np.empty(len(y))
    for t in range(len(y)):
        scores[t] = w @ Phi[t]
        if y[t] * scores[t] <= 0:
            w += y[t] * Phi[t]
    return scores


@pytest.mark.parametrize("graph_id", ["complete", "disconnected", "random"])
def test_inv_p1_multitask_perceptron_is_a_linear_perceptron_on_the_feature_map(graph_id):
    k, d = 5, 6
    graph = random_graph(k, seed=4, weighted=True) if graph_id == "random" else graph_id
    X, y, tasks = random_stream(n=500, d=d, k=k, seed=2)
    T = omtl.graph.resolve_graph(graph, k).task_kernel
    values, vectors = np.linalg.eigh(T)
    root = (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T
    Phi = np.stack([np.kron(root[:, tasks[t]], X[t]) for t in range(len(y))])
    expected = linear_perceptron_on_features(Phi, y)
    primal = omtl.MTPerceptron(n_tasks=k, graph=graph, kernel="linear")
    dual = omtl.reference.MTPerceptron(n_tasks=k, graph=graph, kernel="linear")
    for model in (primal, dual):
        pred = model.learn(X, y, tasks=tasks)
        np.testing.assert_array_equal(pred, np.where(expected >= 0, 1, -1))
    np.testing.assert_allclose(primal.decision_function(X, tasks=tasks), dual.decision_function(X, tasks=tasks), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kernel", [{"kernel": "linear"}, {"kernel": "rbf", "gamma": 0.4}, {"kernel": "poly", "degree": 3}])
@pytest.mark.parametrize("sparse", [False, True])
def test_inv_p2_disconnected_multitask_perceptron_is_the_battery(kernel, sparse):
    X, y, tasks = random_stream(n=400, d=5, k=4, seed=8, sparse=sparse)
    mt = omtl.MTPerceptron(n_tasks=4, graph="disconnected", **kernel)
    bat = omtl.KernelPerceptron(n_tasks=4, **kernel)
    np.testing.assert_array_equal(mt.learn(X, y, tasks=tasks), bat.learn(X, y, tasks=tasks))
    assert mt.n_active_ == bat.n_active_
    # and the battery is k separate single-task Perceptrons
    for task in range(4):
        rows = np.flatnonzero(tasks == task)
        single = omtl.KernelPerceptron(n_tasks=1, **kernel)
        single.learn(X[rows], y[rows], tasks=0)
        np.testing.assert_allclose(
            single.decision_function(X, tasks=0), bat.decision_function(X, tasks=task), rtol=1e-9, atol=1e-12
        )


@pytest.mark.parametrize("cls", [omtl.KernelPerceptron, omtl.MTPerceptron])
@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_inv_p6_predictions_invariant_to_scaling(cls, kernel):
    k = 4
    X, y, tasks = random_stream(n=400, d=5, k=k, seed=3)
    params = {"kernel": kernel, "gamma": 0.5} if kernel == "rbf" else {"kernel": kernel}
    base_graph = TaskGraph.disconnected(k) if cls is omtl.KernelPerceptron else random_graph(k, seed=1, weighted=True)
    reference = omtl.MTPerceptron(n_tasks=k, graph=base_graph, **params).learn(X, y, tasks=tasks)
    for c in (0.01, 3.7, 250.0):
        scaled = omtl.MTPerceptron(n_tasks=k, graph=base_graph.scaled(c), **params).learn(X, y, tasks=tasks)
        np.testing.assert_array_equal(scaled, reference)
        if kernel == "linear":
            xs = omtl.MTPerceptron(n_tasks=k, graph=base_graph, **params).learn(c * X, y, tasks=tasks)
            np.testing.assert_array_equal(xs, reference)


@pytest.mark.parametrize("kernel", ["linear", "poly", "rbf"])
def test_inv_p7_relabelling_tasks_with_the_graph_changes_nothing(kernel):
    k = 5
    rng = np.random.default_rng(0)
    X, y, tasks = random_stream(n=400, d=5, k=k, seed=6)
    graph = random_graph(k, seed=2, weighted=True)
    perm = rng.permutation(k)  # task i is called perm[i]
    edges = [(perm[i], perm[j]) for i, j in graph.edges]
    relabelled = TaskGraph.from_edges(k, edges, graph.weights)
    a = omtl.MTPerceptron(n_tasks=k, graph=graph, kernel=kernel).learn(X, y, tasks=tasks)
    b = omtl.MTPerceptron(n_tasks=k, graph=relabelled, kernel=kernel).learn(X, y, tasks=perm[tasks])
    np.testing.assert_array_equal(a, b)
