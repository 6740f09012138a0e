"""Type stub for the compiled extension ``omtl._native`` (PyO3; sources in src/python/).

Hand-written: tests/test_native_stub.py checks it against the compiled module (names, ``__all__``,
@final, member kinds, and each parameter's name, order, kind and default; defaults are therefore
literals here, not ``...``). The test-only submodule ``_testing`` (src/python/testing.rs) is not
described here. ``python -m mypy.stubtest omtl._native`` also passes. Arrays are taken exactly as the
Rust signatures extract them: the dtype must match (no casting), and batches must be
C-contiguous.
"""

from collections.abc import Mapping, Sequence
from typing import Final, final

import numpy as np
from numpy.typing import NDArray
from typing_extensions import TypeAlias

__all__ = [
    "NativeKernel",
    "NativeTaskKernel",
    "NativeLearner",
    "splitmix64_permutation",
    "scale_gamma",
    "learn_event",
    "decision_event",
    "predict_event",
    "event_row",
    "hash_dicts",
    "learn_small",
    "decision_small",
    "NativeFileReader",
    "scan_svmlight",
    "reader_limits",
    "learn_command",
    "predict_command",
    "data_format",
    "simd_level",
    "detected_simd_level",
    "STATE_VERSION",
    "LEARNER_KINDS",
    "StateError",
    "read_model_file",
    "read_model_header",
    "model_file_length",
    "write_model_file",
    "read_model_pending",
    "shared_track",
    "shared_changes",
    "shared_combine",
    "shared_apply",
    "empty_replica",
    "merge_replicas",
    "shards_of",
    "SHARED_LAYOUT_VERSION",
    "check_bookkeeping",
    "serve",
    "MODEL_FILE_CLASSES",
    "CLASS_ALIASES",
    "MODEL_FILE_MAGIC",
    "MODEL_FILE_VERSION",
]

# Stub-only aliases (no runtime counterpart: import them under ``typing.TYPE_CHECKING``).

_CsrRows: TypeAlias = tuple[NDArray[np.int64], NDArray[np.uint32], NDArray[np.float64], int]
"""A canonical CSR batch ``(indptr, indices, data, n_cols)``."""

_RowsArg: TypeAlias = NDArray[np.float64] | _CsrRows
"""A batch of rows: a C-contiguous 2-D float64 array, or a CSR tuple (src/python/convert.rs)."""

_Edges: TypeAlias = Sequence[tuple[int, int, float]]
"""Weighted task-graph edges ``(i, j, weight)``; each must be a tuple."""

STATE_VERSION: Final[int]
SHARED_LAYOUT_VERSION: Final[int]
"""Bumped whenever the serialised layout of a learner (``NativeLearner.to_bytes``) changes."""

class StateError(ValueError):
    """A model state (a pickle or a model file) that cannot be restored: corrupted, hostile, or of
    another layout version."""

LEARNER_KINDS: Final[tuple]
"""The kinds ``NativeLearner.build`` accepts (the native registry, src/python/registry.rs)."""

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
    """Every native learner; built only by ``NativeLearner.build(kind, params, ...)``.

    Every method holds the model's lock (waited for with the GIL released), so concurrent calls
    run one after the other; a panic in the core raises RuntimeError. ``learn``, ``learn_rounds``
    and ``decision`` release the GIL and poll for signals about every 50 ms: an exception raised
    by a signal handler (KeyboardInterrupt) stops them, carrying in ``omtl_partial_scores`` the
    pre-update scores of the rows learned before it (which the model keeps)."""

    @staticmethod
    def build(
        kind: str,
        params: Mapping[str, object],
        *,
        n_features: int,
        sparse: bool = False,
        n_tasks: int | None = None,
        task_kernel: NativeTaskKernel | None = None,
        kernel: NativeKernel | None = None,
    ) -> NativeLearner:
        """The learner ``kind`` (one of ``LEARNER_KINDS``) with the hyper-parameters in ``params``
        (one item per field of its Rust ``XParams``: e.g. ``mt_rbp`` takes ``budget`` and ``seed``),
        for ``n_features`` features. A linear learner takes ``n_tasks``; a kernel learner takes a
        ``task_kernel`` (which fixes the number of tasks) and a base ``kernel``; ``mt_linear``
        takes a ``task_kernel``."""
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
    def force_rebuild(self) -> None:
        """Recomputes the inverse Gram matrix of a Projectron from scratch (INV-Q2); a no-op for
        learners without one."""
    def radius_exceeded(self, x: _RowsArg) -> bool:
        """Whether some row has ``K'(x, x) > R^2`` (MTFORG only; ValueError for other learners)."""
    def arrays(self) -> dict[str, NDArray[np.float64]]:
        """Learner-specific fitted arrays by name (copies)."""
    def learn_rounds(
        self,
        x: _RowsArg,
        tasks: NDArray[np.int64],
        y: NDArray[np.float64],
        rounds: NDArray[np.int64],
        n_new: int = 0,
    ) -> NDArray[np.float64]:
        """Protocol P2 over a batch (§1.2): rows with equal consecutive round ids form a round.
        Learners without a round rule flatten it (§1.3). Returns the pre-update scores. With
        ``n_new > 0``, ``n_new`` tasks are added first, atomically with the batch."""
    def factors(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """ROMCO's ``(U, V)``, each ``n_features x n_tasks``; ValueError for other learners."""
    def learn(
        self, x: _RowsArg, tasks: NDArray[np.int64], y: NDArray[np.float64], n_new: int = 0
    ) -> NDArray[np.float64]:
        """Online protocol over a batch; returns the pre-update scores. Releases the GIL. With
        ``n_new > 0``, ``n_new`` tasks are added first, atomically with the batch (which may name them)."""
    def decision(self, x: _RowsArg, tasks: NDArray[np.int64], n_new: int = 0) -> NDArray[np.float64]:
        """Scores a batch without changing the model. Releases the GIL. With ``n_new > 0``, as if
        ``n_new`` tasks with no examples had been added (the model is unchanged)."""
    def add_tasks(self, n: int) -> None:
        """Adds ``n`` tasks with no examples (open-ended task sets); atomic. ValueError for a
        learner or task graph that cannot grow."""
    def forget(self, tasks: list[int]) -> int:
        """Forgets the engine tasks ``tasks`` (distinct, below n_tasks): their stored examples
        and own state leave the model; returns the stored examples removed. Atomic. ValueError
        for a learner or task graph that cannot forget."""
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

def learn_event(model: object, x: object, y: object, task: object, skip: object | None = None) -> object:
    """``learn_one`` of a learner (src/python/events.rs): the prediction before the update."""

def decision_event(model: object, x: object, task: object, skip: object | None = None) -> float:
    """``decision_one`` of a learner: the score of one event, the model unchanged."""

def predict_event(model: object, x: object, task: object, skip: object | None = None) -> object:
    """``predict_one`` of a learner: the sign of the score in the model's label form."""

def event_row(x: object, fitted: int | None, dict_width: int, skip: object | None = None) -> tuple:
    """One event's row for the batch path: ``("dense", values)`` or ``("csr", indices, values, width)``."""

def hash_dicts(
    dicts: object, n_features: int
) -> tuple[NDArray[np.int64], NDArray[np.int32], NDArray[np.float64]]:
    """CSR parts ``(indptr, indices, data)`` of dicts of str feature names hashed as scikit-learn's
    ``FeatureHasher(input_type="dict", alternate_sign=False)``."""

def learn_small(
    model: object, x: object, y: object, tasks: object
) -> tuple[NDArray[np.float64], object] | None:
    """``learn`` of a small dense batch of known tasks on a fitted native model: the scores and
    the label form, bookkeeping done; ``None`` for the batch path."""

def decision_small(model: object, x: object, tasks: object) -> NDArray[np.float64] | None:
    """``decision_function`` of a small dense batch of known tasks; ``None`` for the batch path."""

@final
class NativeFileReader:
    """Chunks of a data file (svmlight, VW, CSV; gzip; ``"-"``: standard input), parsed on a
    thread of its own at most two chunks ahead (src/io/); ``omtl.datasets.iter_file`` wraps it."""

    def __new__(cls, path: str, reading: Mapping[str, object], n_features: int, zero_based: bool) -> NativeFileReader:
        """``reading``: ``omtl._file_formats.native_reading``'s dict (format, chunking, line cap,
        bad lines, the VW task namespace, the CSV columns, whether labels are required)."""
    def __iter__(self) -> NativeFileReader: ...
    def __next__(
        self,
    ) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray, int, str | None, int,
        list[str],
    ]:
        """``(indptr, indices, data, labels, task_ids, new_tasks, lines, n_skipped, first_skipped,
        bytes_read, feature_columns)``; a malformed file raises ``ValueError`` naming file and line."""

def scan_svmlight(path: str, max_line_bytes: int) -> tuple[int | None, bool, list[str]]:
    """``(largest index, whether an index 0 appears, the qid tasks in order)`` of an svmlight file
    (not a stream: ValueError); Ctrl-C stops the pass."""

def reader_limits() -> tuple[int, int]:
    """``(widest feature space the engine takes, default line cap in bytes)``."""

def learn_command(
    request: Mapping[str, object], *, report: object, write: object, read_table: object | None = None
) -> dict[str, object]:
    """``omtl learn`` whole (src/io/driver/): ``request`` holds the command line's values; the report
    lines go to ``report(text)``, standard output (``-p -``) to ``write(text)``, a Parquet file is read
    by ``read_table(task_column, label_column, feature_columns, require_labels, skip_bad_lines)``.
    Returns ``{"n", "mistakes", "labelled", "skipped", "first_skipped", "text"}``."""

def predict_command(
    request: Mapping[str, object], *, write: object, read_table: object | None = None
) -> dict[str, object]:
    """``omtl predict`` whole: as :func:`learn_command`, ``request["model"]`` naming the model file."""

def data_format(path: str) -> str | None:
    """The format a file's extension names (``.gz`` looked through), or None."""

def read_model_file(data: bytes, *, max_header: int, max_dense_graph: int) -> tuple[str, NativeLearner | None]:
    """``(header JSON text, learner or None)`` of a model file's bytes, everything checked by the
    crate's ``omtl::model_file``; ValueError otherwise."""

def serve(
    state_dir: str,
    *,
    model: bytes | None,
    learner: str | None,
    params: list[tuple[str, str]],
    host: str,
    port: int,
    vw_port: int | None,
    token: str | None,
    fsync_interval: float | None,
    snapshot_events: int,
    snapshot_interval: float,
    max_body_bytes: int,
    max_events: int,
    max_features: int,
    threads: int,
) -> None:
    """Serves one model until SIGTERM or Ctrl-C, the GIL released (``omtl.serve``; the crate's
    ``omtl::serve``)."""

def read_model_header(data: bytes, *, max_header: int, max_dense_graph: int) -> str:
    """The header JSON text of a model file's bytes (framing, checksum and header checked)."""

def model_file_length(prefix: bytes, size: int | None, *, max_header: int, max_dense_graph: int) -> tuple[int, bool]:
    """``(length, exact)``: how long the model file starting with ``prefix`` is, as far as those bytes
    tell (not ``exact``: at least ``length``; read up to there to learn more), its magic, version and
    lengths checked as soon as ``prefix`` holds them, and against ``size`` when known; ValueError otherwise."""

def write_model_file(
    header: str, learner: NativeLearner | None, *, max_header: int, max_dense_graph: int, pending: tuple | None = None
) -> bytes:
    """A model file's bytes from its header JSON text, native learner and pending events
    (``(events, (max_events, max_bytes, max_age), evicted, expired)``), checked as a reader checks
    them; ValueError for a file the reader would refuse."""

def read_model_pending(data: bytes, *, max_header: int, max_dense_graph: int) -> tuple | None:
    """The pending events of a model file (as ``write_model_file`` takes them), None without."""

def shared_track(learner: NativeLearner) -> None:
    """Starts recording the learner's changes to its shared state (ValueError for a learner that
    keeps none in step)."""

def shared_changes(learner: NativeLearner) -> bytes:
    """The learner's changes to its shared state since its last sync, as bytes."""

def shared_combine(reports: Sequence[bytes], mix: str) -> bytes:
    """The replicas' reports (one per replica, in a fixed order) combined into one update, weights'
    changes added (``mix="sum"``) or averaged (``"mean"``)."""

def shared_apply(learner: NativeLearner, update: bytes) -> None:
    """Brings the learner's shared state in step with an update; on error it is unchanged."""

def empty_replica(data: bytes, n_features: int, label_mode: bool, *, max_header: int, max_dense_graph: int) -> bytes:
    """The model file of a replica that has learned nothing, from the model file of its estimator."""

def merge_replicas(parts: Sequence[bytes], label_form: str, *, max_header: int, max_dense_graph: int) -> bytes:
    """One model file from the model files of replicas in step, its predictions written in
    ``label_form`` (the header's JSON of a label form)."""

def shards_of(labels: NDArray[np.int64] | Sequence[str | int], n_shards: int) -> NDArray[np.int64]:
    """The shard of every task label among ``n_shards``."""

def check_bookkeeping(learner: NativeLearner, fitted: str, open_ended: bool) -> None:
    """Checks a fitted model's bookkeeping (JSON text) against its learner; ValueError otherwise."""

MODEL_FILE_CLASSES: Final[dict]
"""The estimator classes a model file may name, with the learner kind each builds."""

CLASS_ALIASES: Final[dict]
"""Other names of estimator classes (alias -> class name), as ``omtl`` exports them."""

MODEL_FILE_MAGIC: Final[bytes]
"""The first bytes of every model file."""

MODEL_FILE_VERSION: Final[int]
"""The model file format version this omtl reads and writes."""

def splitmix64_permutation(seed: int, n: int) -> list[int]:
    """The permutation ``omtl._rng.SplitMix64(seed).permutation(n)`` computes, natively."""

def simd_level() -> str:
    """The SIMD build the native kernels run: the CPU's widest, capped by ``OMTL_SIMD``
    (``"portable"``, ``"avx2"`` or ``"avx512"``)."""

def detected_simd_level() -> str:
    """The widest SIMD build this CPU runs, whatever ``OMTL_SIMD`` says."""

def scale_gamma(x: np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray, int]) -> float:
    """``gamma="scale"`` of a first batch (dense float64, or ``(indptr, indices, data, n_cols)``)."""
    ...
