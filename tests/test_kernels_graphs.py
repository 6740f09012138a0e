"""Kernels and task relations: INV-K1..K3, INV-G1..G3 and the TaskGraph API."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_graph

import omtl
from omtl import TaskGraph
from omtl.kernels import kernel_matrix, multitask_kernel_matrix
from omtl.reference.graph import task_kernel as reference_task_kernel
from omtl.reference.kernels import kernel_matrix as reference_kernel_matrix

KERNELS = [
    {"kernel": "linear"},
    {"kernel": "poly", "degree": 3, "gamma": 0.5, "coef0": 1.0},
    {"kernel": "poly", "degree": 2, "normalize": True},
    {"kernel": "rbf", "gamma": 0.3},
    {"kernel": "linear", "normalize": True},
]


def sparse_data(n=40, d=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[rng.random((n, d)) > 0.35] = 0.0
    X[3] = 0.0  # a zero row: normalised kernels must give 0, not NaN
    return X


def psd(M, tol=1e-10):
    values = np.linalg.eigvalsh((M + M.T) / 2)
    return values.min() >= -tol * max(1.0, values.max())


@pytest.mark.parametrize("params", KERNELS, ids=lambda p: "-".join(map(str, p.values())))
def test_inv_k1_gram_matrices_are_psd(params):
    X = sparse_data()
    assert psd(kernel_matrix(X, **params))
    tasks = np.arange(len(X)) % 5
    for graph in ["complete", "disconnected", random_graph(5, seed=2, weighted=True)]:
        assert psd(multitask_kernel_matrix(X, tasks, graph=graph, n_tasks=5, **params))


@pytest.mark.parametrize("params", KERNELS, ids=lambda p: "-".join(map(str, p.values())))
def test_inv_k2_sparse_and_dense_agree_and_match_reference(params):
    X = sparse_data(seed=1)
    Xs = sp.csr_matrix(X)
    # an unsorted CSR with a duplicate entry that sums to the same matrix
    coo = Xs.tocoo()
    dup = sp.csr_matrix(
        (np.r_[coo.data[::-1], [1.0, -1.0]], (np.r_[coo.row[::-1], [0, 0]], np.r_[coo.col[::-1], [0, 0]])), shape=X.shape
    )
    dense = kernel_matrix(X, **params)
    for other in (kernel_matrix(Xs, **params), kernel_matrix(X, Xs, **params), kernel_matrix(dup, **params)):
        np.testing.assert_allclose(other, dense, rtol=1e-12, atol=1e-14)
    spec = omtl._kernel_params.KernelSpec.resolve(
        params["kernel"], params.get("gamma"), params.get("degree", 2), params.get("coef0", 1.0), params.get("normalize", False), X.shape[1]
    )
    np.testing.assert_allclose(reference_kernel_matrix(spec, X, X), dense, rtol=1e-12, atol=1e-14)
    assert not np.isnan(dense).any()


def test_float32_input_gives_float64_kernel_values():
    X = sparse_data(seed=4)
    np.testing.assert_allclose(kernel_matrix(X.astype(np.float32), kernel="rbf"), kernel_matrix(X.astype(np.float32).astype(np.float64), kernel="rbf"), rtol=0, atol=0)


@pytest.mark.parametrize("kernel", ["linear", "poly", "rbf"])
def test_inv_k3_normalised_kernels_have_unit_diagonal(kernel):
    X = sparse_data(seed=2)
    diag = np.diag(kernel_matrix(X, kernel=kernel, normalize=True))
    nonzero = np.abs(X).sum(axis=1) > 0
    np.testing.assert_allclose(diag[nonzero], 1.0, rtol=1e-14)


def test_kernel_parameters_are_checked():
    X = sparse_data()
    with pytest.raises(ValueError, match="coef0"):
        kernel_matrix(X, kernel="poly", coef0=-1.0)
    with pytest.raises(ValueError, match="degree"):
        kernel_matrix(X, kernel="poly", degree=0)
    with pytest.raises(ValueError, match="gamma"):
        kernel_matrix(X, kernel="rbf", gamma=0.0)
    with pytest.raises(ValueError, match="kernel"):
        kernel_matrix(X, kernel="sigmoid")


# ---- task graphs -------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_inv_g1_properties_on_random_graphs(seed):
    k = 7
    graph = random_graph(k, seed=seed, weighted=seed % 2 == 1)
    T = graph.task_kernel
    np.testing.assert_allclose(T, reference_task_kernel(graph), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(T.sum(axis=1), 1.0, rtol=1e-12)
    assert (T >= 0).all()
    comp = graph.components
    same = comp[:, None] == comp[None, :]
    assert (T[~same] == 0).all() and (T[same] > 0).all()
    off = ~np.eye(k, dtype=bool)
    assert (np.diag(T)[:, None] > T)[off].all()
    isolated = [i for i in range(k) if not any(i in e for e in graph.edges)]
    np.testing.assert_allclose(np.diag(T)[isolated], 1.0, rtol=1e-14)
    assert graph.c_g == pytest.approx(np.sqrt(np.diag(T).max()))
    if isolated:
        assert graph.c_g == pytest.approx(1.0)


@pytest.mark.parametrize("k", [1, 2, 5, 9])
def test_inv_g1_closed_forms(k):
    C = TaskGraph.complete(k)
    np.testing.assert_allclose(C.task_kernel, (np.eye(k) + np.ones((k, k))) / (k + 1), rtol=1e-15)
    all_edges = TaskGraph.from_edges(k, [(i, j) for i in range(k) for j in range(i + 1, k)])
    np.testing.assert_allclose(all_edges.task_kernel, C.task_kernel, rtol=1e-12)
    np.testing.assert_array_equal(TaskGraph.disconnected(k).task_kernel, np.eye(k))
    np.testing.assert_allclose(TaskGraph.from_edges(k, []).task_kernel, np.eye(k), rtol=1e-15)
    assert C.c_g == pytest.approx(np.sqrt(2 / (k + 1)))
    assert TaskGraph.disconnected(k).c_g == 1.0


def grounded_resistances(L):
    """R'_ab by grounded solves (independent of any pseudo-inverse), §2.6."""
    n = L.shape[0]
    R = np.zeros((n, n))
    for b in range(n):
        keep = [a for a in range(n) if a != b]
        Lred = L[np.ix_(keep, keep)]
        for pos, a in enumerate(keep):
            e = np.zeros(n - 1)
            e[pos] = 1.0
            R[a, b] = np.linalg.solve(Lred, e)[pos]
    return R


@pytest.mark.parametrize("seed", range(4))
def test_inv_g2_proposition_3_1(seed):
    k = 6
    graph = TaskGraph.disconnected(k) if seed == 0 else random_graph(k, seed=seed)
    edges = [] if seed == 0 else [tuple(e) for e in graph.edges]
    n = k + 1
    L = np.zeros((n, n))
    for i, j in edges + [(i, k) for i in range(k)]:
        L[i, j] -= 1
        L[j, i] -= 1
        L[i, i] += 1
        L[j, j] += 1
    R = grounded_resistances(L)
    r = R.sum(axis=1)
    total = R.sum()
    T = graph.task_kernel
    formula = -0.5 * R[:k, :k] + (r[:k, None] + r[None, :k]) / (2 * n) - total / (2 * n**2) + (k + 2) / n**2
    np.testing.assert_allclose(formula, T, atol=1e-10)
    np.testing.assert_allclose(np.linalg.pinv(L)[:k, :k], T - (k + 2) / n**2, atol=1e-10)
    if seed == 0:
        np.testing.assert_allclose(R[:k, :k], 2 * (1 - np.eye(k)), atol=1e-12)


def test_inv_g3_multitask_kernel_is_the_feature_map_inner_product():
    rng = np.random.default_rng(0)
    k, d, n = 4, 5, 12
    graph = random_graph(k, seed=9, weighted=True)
    T = graph.task_kernel
    values, vectors = np.linalg.eigh(T)
    root = (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T
    X = rng.standard_normal((n, d))
    tasks = rng.integers(0, k, n)
    Phi = np.stack([np.kron(root[:, tasks[r]], X[r]) for r in range(n)])
    np.testing.assert_allclose(multitask_kernel_matrix(X, tasks, graph=graph, n_tasks=k, kernel="linear"), Phi @ Phi.T, atol=1e-12)


def test_user_supplied_relations():
    rng = np.random.default_rng(1)
    M = rng.standard_normal((4, 4))
    A = M @ M.T + 4 * np.eye(4)
    np.testing.assert_allclose(TaskGraph.from_interaction(A).task_kernel, np.linalg.inv(A), rtol=1e-10)
    P = M @ M.T
    np.testing.assert_allclose(TaskGraph.from_psd_plus_identity(P).task_kernel, np.linalg.inv(np.eye(4) + P), rtol=1e-10)
    T = np.linalg.inv(A)
    np.testing.assert_allclose(TaskGraph.from_task_kernel(T).task_kernel, T, rtol=1e-14)
    with pytest.raises(ValueError, match="positive definite"):
        TaskGraph.from_interaction(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="symmetric"):
        TaskGraph.from_task_kernel(np.array([[1.0, 0.5], [0.1, 1.0]]))
    with pytest.raises(ValueError, match="semidefinite"):
        TaskGraph.from_task_kernel(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="self loop"):
        TaskGraph.from_edges(3, [(1, 1)])
    with pytest.raises(ValueError):
        TaskGraph.from_edges(3, [(0, 3)])
    with pytest.raises(ValueError):
        TaskGraph.from_edges(3, [(0, 1)], weights=[-1.0])


def test_laplacian_pinv_warns_and_matches_numpy():
    with pytest.warns(UserWarning, match="sum to zero"):
        g = TaskGraph.laplacian_pinv(4, [(0, 1), (1, 2)])
    T = g.task_kernel
    np.testing.assert_allclose(T, reference_task_kernel(g), atol=1e-12)
    assert T[3, 3] == 0.0  # an isolated task scores 0
    np.testing.assert_allclose(T[:3, :3].sum(axis=1), 0.0, atol=1e-12)


def test_huge_complete_graph_is_cheap_and_learns():
    k = 100_000
    g = TaskGraph.complete(k)
    assert g.c_g == pytest.approx(np.sqrt(2 / (k + 1)))
    assert g.components.shape == (k,)
    model = omtl.MTPerceptron(n_tasks=k, graph=g, kernel="rbf", gamma=1.0)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    model.partial_fit(X, np.where(X[:, 0] > 0, 1, -1), tasks=rng.integers(0, k, 50))
    assert model.n_seen_ == 50
    model2 = omtl.MTPerceptron(n_tasks=k, graph="complete")
    model2.partial_fit(X, np.where(X[:, 0] > 0, 1, -1), tasks=rng.integers(0, k, 50))
    assert model2.n_updates_ >= 1


def test_graph_pickles_and_compares():
    import pickle

    g = random_graph(5, seed=1, weighted=True)
    g2 = pickle.loads(pickle.dumps(g))
    assert g2 == g
    np.testing.assert_array_equal(g2.task_kernel, g.task_kernel)
    assert TaskGraph.complete(3) != TaskGraph.disconnected(3)


# ---- graphs of many tasks: sizes checked first, work per component, Ctrl-C honoured ---------------
@pytest.mark.parametrize("k", [10**7, 2**32])
def test_a_graph_too_large_for_memory_is_a_value_error_not_an_abort(k):
    with pytest.raises(ValueError, match="n_tasks=.*available memory"):
        TaskGraph.from_edges(k, [(0, 1)])
    with pytest.raises(ValueError, match="n_tasks=.*available memory"), pytest.warns(UserWarning):
        TaskGraph.laplacian_pinv(k, [(0, 1)])


def test_a_graph_of_many_small_components_is_factored_per_component():
    # 4,000 tasks in pairs and triangles: the whole (I + L) would be a 4,000 x 4,000 factorisation.
    k = 4000
    edges = [(i, i + 1) for i in range(0, k, 2)] + [(i, i + 2) for i in range(0, k - 2, 6)]
    g = TaskGraph.from_edges(k, edges)
    comp = g.components
    T = g.task_kernel
    for block in (range(0, 6), range(6, 12), range(3990, 4000)):
        idx = np.array(block)
        sub = [(i - idx[0], j - idx[0]) for i, j in edges if i in block and j in block]
        np.testing.assert_allclose(T[np.ix_(idx, idx)], TaskGraph.from_edges(len(idx), sub).task_kernel,
                                   rtol=0, atol=1e-14)
    assert (T[comp[:, None] != comp[None, :]] == 0).all()
    np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)


def test_ctrl_c_stops_the_factorisation_of_one_large_component():
    from test_reliability import interrupted

    k = 3000  # one path: a 3,000 x 3,000 factorisation, about a second of work
    path = [(i - 1, i) for i in range(1, k)]
    latency, _ = interrupted(lambda: TaskGraph.from_edges(k, path), delay=0.15)
    assert latency < 1.0, f"KeyboardInterrupt came {latency:.2f} s after the signal"
    with pytest.warns(UserWarning):
        latency, _ = interrupted(lambda: TaskGraph.laplacian_pinv(k, path), delay=0.15)
    assert latency < 1.0, f"KeyboardInterrupt came {latency:.2f} s after the signal (L+)"
