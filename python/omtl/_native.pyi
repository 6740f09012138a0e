"""Type stub for the compiled extension ``omtl._native`` (PyO3; sources in src/python/).

Hand-written: tests/test_native_stub.py checks it against the compiled module (names, ``__all__``,
@final, member kinds, and each parameter's name, order, kind and default; defaults are therefore
literals here, not ``...``). ``python -m mypy.stubtest omtl._native`` also passes. Arrays are taken exactly as the
Rust signatures extract them: the dtype must match (no casting), and batches must be
C-contiguous.
"""

from collections.abc import Sequence
from typing import Final, final

import numpy as np
from numpy.typing import NDArray
from typing_extensions import TypeAlias

__all__ = [
    "NativeKernel",
    "NativeTaskKernel",
    "NativeLearner",
    "splitmix64_permutation",
    "batch_mtl_solve",
    "omtl_tau",
    "_svt_for_tests",
    "simd_level",
    "detected_simd_level",
    "STATE_VERSION",
]

# Stub-only aliases (no runtime counterpart: import them under ``typing.TYPE_CHECKING``).

_CsrRows: TypeAlias = tuple[NDArray[np.int64], NDArray[np.uint32], NDArray[np.float64], int]
"""A canonical CSR batch ``(indptr, indices, data, n_cols)``."""

_RowsArg: TypeAlias = NDArray[np.float64] | _CsrRows
"""A batch of rows: a C-contiguous 2-D float64 array, or a CSR tuple (src/python/convert.rs)."""

_Edges: TypeAlias = Sequence[tuple[int, int, float]]
"""Weighted task-graph edges ``(i, j, weight)``; each must be a tuple."""

STATE_VERSION: Final[int]
"""Bumped whenever the serialised layout of a learner (``NativeLearner.to_bytes``) changes."""

@final
class NativeKernel:
    """A base kernel on feature vectors: "linear", "poly" or "rbf"."""

    def __new__(cls, name: str, *, gamma: float, degree: int, coef0: float, normalize: bool) -> NativeKernel: ...
    def matrix(self, a: _RowsArg, b: _RowsArg) -> NDArray[np.float64]:
        """The kernel matrix ``K'(a_r, b_c)`` between two batches."""

@final
class NativeTaskKernel:
    """The k x k task kernel; built only by the static constructors."""

    @staticmethod
    def complete(k: int) -> NativeTaskKernel: ...
    @staticmethod
    def disconnected(k: int) -> NativeTaskKernel: ...
    @staticmethod
    def complete_open(k: int) -> NativeTaskKernel:
        """The open-ended complete graph: ``T_ii = 1``, ``T_ij = 1/2`` whatever k."""
    @staticmethod
    def from_edges(k: int, edges: _Edges) -> NativeTaskKernel: ...
    @staticmethod
    def laplacian_pinv(k: int, edges: _Edges) -> NativeTaskKernel: ...
    @staticmethod
    def from_interaction(a: NDArray[np.float64]) -> NativeTaskKernel: ...
    @staticmethod
    def from_psd_plus_identity(a: NDArray[np.float64]) -> NativeTaskKernel: ...
    @staticmethod
    def from_task_kernel(t: NDArray[np.float64]) -> NativeTaskKernel: ...
    @property
    def n_tasks(self) -> int: ...
    def get(self, i: int, j: int) -> float: ...
    def c_g(self, radius: float) -> float: ...
    def max_diag(self) -> float: ...
    def to_dense(self) -> NDArray[np.float64]: ...
    def components(self) -> NDArray[np.int64]: ...
    def scaled(self, c: float) -> NativeTaskKernel: ...

@final
class NativeLearner:
    """Every native learner; built only by the static constructors (one per algorithm).

    Every method holds the model's lock (waited for with the GIL released), so concurrent calls
    run one after the other; a panic in the core raises RuntimeError. ``learn``, ``learn_rounds``
    and ``decision`` release the GIL and poll for signals about every 50 ms: an exception raised
    by a signal handler (KeyboardInterrupt) stops them, carrying in ``omtl_partial_scores`` the
    pre-update scores of the rows learned before it (which the model keeps)."""

    @staticmethod
    def mt_perceptron(
        task_kernel: NativeTaskKernel, kernel: NativeKernel, n_features: int, sparse: bool
    ) -> NativeLearner:
        """The unbounded multitask kernel Perceptron (the battery is ``task_kernel = disconnected``)."""
    @staticmethod
    def mt_rbp(
        task_kernel: NativeTaskKernel, kernel: NativeKernel, n_features: int, sparse: bool, budget: int, seed: int
    ) -> NativeLearner:
        """The multitask Randomized Budget Perceptron (§4.1)."""
    @staticmethod
    def mt_forg(
        task_kernel: NativeTaskKernel,
        kernel: NativeKernel,
        n_features: int,
        sparse: bool,
        budget: int,
        radius: float,
    ) -> NativeLearner:
        """The multitask self-tuned Forgetron (§4.2)."""
    @staticmethod
    def mtbprj(
        task_kernel: NativeTaskKernel,
        kernel: NativeKernel,
        n_features: int,
        sparse: bool,
        budget: int,
        eta: float,
        threshold_on: str,
    ) -> NativeLearner:
        """The multitask budget Projectron MTBPRJ (ALGORITHMS.md §4.4)."""
    @staticmethod
    def mtbprj2(
        task_kernel: NativeTaskKernel,
        kernel: NativeKernel,
        n_features: int,
        sparse: bool,
        budget: int,
        eta: float,
        threshold_on: str,
        alg2_literal_line14: bool,
    ) -> NativeLearner:
        """MTBPRJ-2, projection in the base-kernel space with per-task weights (§4.5)."""
    @staticmethod
    def cw_col(n_tasks: int, n_features: int, confidence: float, a: float, omega: float) -> NativeLearner:
        """CW-COL (ALGORITHMS.md §6.4)."""
    @staticmethod
    def omtrl(n_tasks: int, n_features: int, relation_update: str, eta: float, epoch: int) -> NativeLearner:
        """OMTRL (§6.3); ``relation_update`` is "batch", "logdet" or "vonneumann"."""
    @staticmethod
    def omtl(n_tasks: int, n_features: int, c: float, global_norm: str, explicit: bool) -> NativeLearner:
        """OMTL (§6.2); ``global_norm`` is "linf", "l1" or "l2"."""
    @staticmethod
    def batch_mtl(
        n_tasks: int, n_features: int, regularizer: str, rho: float, retrain_every: int, sparse: bool
    ) -> NativeLearner:
        """MTFL (``regularizer="l21"``) or TRML (``"trace"``), retrained periodically (§6.5)."""
    @staticmethod
    def romco(
        n_tasks: int,
        n_features: int,
        *,
        eta1: float,
        eta2: float,
        lambda1: float,
        lambda2: float,
        update: str,
        svt_route: str = "auto",
    ) -> NativeLearner:
        """ROMCO (§5): ``update`` is "loss" or "mistake"; ``svt_route`` ("auto", or "gram", "qr",
        "brand" for tests and benchmarks) selects the SVT implementation of §5.5."""
    @staticmethod
    def passive_aggressive(n_tasks: int, n_features: int, *, shared: bool, c: float, variant: str) -> NativeLearner:
        """PA-Global (``shared=True``) or PA-Unique (§6.1); ``variant`` is "pa", "pa1" or "pa2"."""
    @staticmethod
    def mt_linear(
        task_kernel: NativeTaskKernel,
        n_features: int,
        *,
        loss: str,
        update: str,
        learning_rate: float,
        fit_intercept: bool,
        hash_bits: int | None = None,
    ) -> NativeLearner:
        """MTLinear: online linear learning on the task-graph feature map (docs/mt_linear.md);
        ``loss`` is "logistic", "hinge" or "squared", ``update`` "normalized", "adagrad" or "sgd"."""
    @staticmethod
    def from_bytes(state: bytes) -> NativeLearner:
        """Restores a learner from ``to_bytes``: decoded within the payload's size, then every
        invariant checked; raises ValueError for anything else (another ``STATE_VERSION``
        included)."""
    @property
    def kind(self) -> str:
        """The name of the native algorithm (``"mtbprj"``, ``"romco"``, ...)."""
    def same_settings(self, other: NativeLearner) -> bool:
        """True when ``other`` is the same algorithm with the same hyper-parameters."""
    def check_state(self) -> None:
        """Checks the invariants ``from_bytes`` checks on the current state; raises ValueError."""
    @staticmethod
    def _panic_for_tests() -> None:
        """Panics inside the guard (test hook): raises RuntimeError."""
    def force_rebuild(self) -> None:
        """Recomputes the inverse Gram matrix of a Projectron from scratch (INV-Q2); a no-op for
        learners without one."""
    def radius_exceeded(self, x: _RowsArg) -> bool:
        """Whether some row has ``K'(x, x) > R^2`` (MTFORG only; ValueError for other learners)."""
    def arrays(self) -> dict[str, NDArray[np.float64]]:
        """Learner-specific fitted arrays by name (copies)."""
    def learn_rounds(
        self, x: _RowsArg, tasks: NDArray[np.int64], y: NDArray[np.float64], rounds: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        """Protocol P2 over a batch (§1.2): rows with equal consecutive round ids form a round.
        Learners without a round rule flatten it (§1.3). Returns the pre-update scores."""
    def factors(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """ROMCO's ``(U, V)``, each ``n_features x n_tasks``; ValueError for other learners."""
    def learn(self, x: _RowsArg, tasks: NDArray[np.int64], y: NDArray[np.float64]) -> NDArray[np.float64]:
        """Online protocol over a batch; returns the pre-update scores. Releases the GIL."""
    def decision(self, x: _RowsArg, tasks: NDArray[np.int64]) -> NDArray[np.float64]:
        """Scores a batch without changing the model. Releases the GIL."""
    def add_tasks(self, n: int) -> None:
        """Adds ``n`` tasks with no examples (open-ended task sets); atomic. ValueError for a
        learner or task graph that cannot grow."""
    def learn_grown(
        self, x: _RowsArg, tasks: NDArray[np.int64], y: NDArray[np.float64], n_new: int
    ) -> NDArray[np.float64]:
        """``learn`` after adding ``n_new`` tasks, atomically (the batch may name them)."""
    def learn_rounds_grown(
        self, x: _RowsArg, tasks: NDArray[np.int64], y: NDArray[np.float64], rounds: NDArray[np.int64], n_new: int
    ) -> NDArray[np.float64]:
        """``learn_rounds`` after adding ``n_new`` tasks, atomically."""
    def decision_grown(self, x: _RowsArg, tasks: NDArray[np.int64], n_new: int) -> NDArray[np.float64]:
        """``decision`` as if ``n_new`` tasks with no examples had been added (no change)."""
    @property
    def n_updates(self) -> int: ...
    @property
    def n_active(self) -> int: ...
    @property
    def n_tasks(self) -> int: ...
    @property
    def n_features(self) -> int: ...
    def diagnostics(self) -> dict[str, float]: ...
    def to_bytes(self) -> bytes:
        """The versioned, serialised state (for pickling and ``omtl.save``)."""

def splitmix64_permutation(seed: int, n: int) -> list[int]:
    """The permutation ``omtl._rng.SplitMix64(seed).permutation(n)`` computes, natively."""

def batch_mtl_solve(
    x: _RowsArg,
    tasks: NDArray[np.int64],
    y: NDArray[np.float64],
    n_tasks: int,
    regularizer: str,
    rho: float,
    w0: NDArray[np.float64],
    c0: NDArray[np.float64],
    tol: float,
    max_iter: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64], float, int, float]:
    """The MTFL/TRML solver on one batch (for tests, INV-M1/M2): returns ``(W, c, objective,
    n_iter, final line-search L)`` after an accelerated proximal gradient warm-started from
    ``(w0, c0)``. ``w0`` and the returned ``W`` are flat and task-major (task ``i``'s weights are
    ``W[i * n_features:(i + 1) * n_features]``), so ``W.reshape(n_tasks, n_features)``."""

def omtl_tau(
    losses: Sequence[float] | NDArray[np.float64],
    sq_norms: Sequence[float] | NDArray[np.float64],
    c: float,
    global_norm: str,
    explicit: bool = False,
) -> list[float]:
    """OMTL's step sizes of one round (for tests, INV-O3): ``tau`` for losses and squared norms."""

def _svt_for_tests(m: NDArray[np.float64], theta: float, route: str) -> NDArray[np.float64] | None:
    """Test hook for the singular value thresholding routes of ALGORITHMS.md §5.5: returns
    ``SVT_theta(M)`` for a ``d x k`` matrix by ``route`` ("gram" = (b), "qr" = (a) as ROMCO runs it,
    "explicit" = the literal (a) with Q formed), or None when route (b) declines."""

def simd_level() -> str:
    """The SIMD build the native kernels run: the CPU's widest, capped by ``OMTL_SIMD``
    (``"portable"``, ``"avx2"`` or ``"avx512"``)."""

def detected_simd_level() -> str:
    """The widest SIMD build this CPU runs, whatever ``OMTL_SIMD`` says."""
