"""Speed of building a task kernel T = (I + L)^-1 (and L^+) from a graph of one connected
component, against NumPy/SciPy's LAPACK (OpenBLAS) on the same matrix in the same run.

Contenders, each single-threaded, CPU time of this process, best of ``--repeat``:

- ``omtl.TaskGraph.from_edges`` / ``laplacian_pinv`` (native: blocked Cholesky ``A = L Lᵀ``,
  ``W = L⁻¹``, ``A⁻¹ = Wᵀ W`` with a register-tiled SIMD micro-kernel, src/linalg/spd_inverse.rs;
  the pseudo-inverse as ``(L + s J/c)⁻¹ - J/(c s)``), the edge list in, T out;
- SciPy's LAPACK on the dense ``A = I + L`` built beforehand: ``dpotrf`` (Cholesky) then
  ``dpotri`` (the inverse from it: the same algorithm as the native code), and
  ``numpy.linalg.inv`` (LU), the one call a user would write.

Graphs (k tasks, one component): the path (chain) ``i -- i+1`` of the issue, whose inverse has
entries decaying as 0.618^|i-j| (underflowing into subnormals, which LAPACK computes with and
the native code flushes), and a random graph (the chain plus two random edges per task, weights
in [0.5, 1.5]), whose inverse has no tiny entries: the factorisation's own speed.

The SIMD level of the native code is ``OMTL_SIMD`` (or the CPU's widest); OpenBLAS picks its
kernels by CPU unless ``OPENBLAS_CORETYPE`` names one (``Haswell`` for AVX2, ``SkylakeX`` for
AVX-512); the script prints both.

    OMTL_SIMD=avx2 OPENBLAS_CORETYPE=Haswell python benches/compare_graph.py
    OMTL_SIMD=avx512 OPENBLAS_CORETYPE=SkylakeX python benches/compare_graph.py
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import scipy.linalg as sl  # noqa: E402

import omtl  # noqa: E402
from omtl import _simd  # noqa: E402
from omtl.reference.graph import laplacian  # noqa: E402

clock = time.process_time


def chain(k):
    return [(i, i + 1) for i in range(k - 1)], np.ones(k - 1)


def random_graph(k, seed=0):
    rng = np.random.default_rng(seed)
    edges = {(i, i + 1) for i in range(k - 1)}
    for i in range(k):
        for j in map(int, rng.choice(k, size=2, replace=False)):
            if i != j:
                edges.add((min(i, j), max(i, j)))
    edges = sorted(edges)
    return edges, rng.uniform(0.5, 1.5, size=len(edges))


def best(repeat, fn):
    times, out = [], None
    for _ in range(repeat):
        start = clock()
        out = fn()
        times.append(clock() - start)
    return min(times), out


def lapack_inverse(a):
    c, info = sl.lapack.dpotrf(a, lower=1)
    assert info == 0
    inv, info = sl.lapack.dpotri(c, lower=1)
    assert info == 0
    return np.tril(inv) + np.tril(inv, -1).T


def openblas_core():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl missing)"
    info = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
    return ", ".join(sorted({f"{i.get('architecture')} x{i.get('num_threads')}" for i in info})) or "not OpenBLAS"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    k = args.tasks
    print(f"k = {k}; native SIMD level {_simd.simd_level()}; OpenBLAS {openblas_core()}; CPU time, best of {args.repeat}")
    print("| graph | contender | seconds | native is x faster | max abs diff from LAPACK |")
    print("|---|---|---:|---:|---|")
    for name, (edges, weights) in (("chain", chain(k)), ("random, 3 edges/task", random_graph(k))):
        a = laplacian(k, edges, weights)
        a[np.diag_indices(k)] += 1.0
        t_native, g = best(args.repeat, lambda e=edges, w=weights: omtl.TaskGraph.from_edges(k, e, w))
        t_potri, ref = best(args.repeat, lambda a=a: lapack_inverse(a))
        t_inv, _ = best(args.repeat, lambda a=a: np.linalg.inv(a))
        diff = np.abs(g.task_kernel - ref).max()
        rows = [
            ("omtl TaskGraph.from_edges (native)", t_native, f"{diff:.1e}"),
            ("LAPACK dpotrf + dpotri", t_potri, ""),
            ("numpy.linalg.inv (LU)", t_inv, ""),
        ]
        lap = laplacian(k, edges, weights)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            t_pinv, gp = best(args.repeat, lambda e=edges, w=weights: omtl.TaskGraph.laplacian_pinv(k, e, w))
        j = np.full((k, k), 1.0 / k)
        t_lp, ref_p = best(args.repeat, lambda lap=lap, j=j: lapack_inverse(lap + j) - j)
        diff_p = np.abs(gp.task_kernel - ref_p).max()
        rows += [
            ("omtl TaskGraph.laplacian_pinv (native)", t_pinv, f"{diff_p:.1e}"),
            ("LAPACK dpotrf + dpotri of L + J/k, minus J/k", t_lp, ""),
        ]
        for who, sec, note in rows:
            native = t_pinv if "pinv" in who or "J/k" in who else t_native
            print(f"| {name} | {who} | {sec:.2f} | {sec / native:.2f}x | {note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
