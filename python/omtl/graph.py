"""Task relations: the graph G over tasks and the task kernel T it induces (ALGORITHMS.md §2.3).

By default T = (I + L_G)^{-1}, where L_G is the graph Laplacian. The complete and the
disconnected graph use their closed forms, T = (I + 11ᵀ)/(k+1) and T = I, and never build a
k x k matrix unless ``task_kernel`` is read, so ``TaskGraph.complete(100_000)`` is cheap.
"""

from __future__ import annotations

import warnings

import numpy as np

from ._docs import fill_doc


class TaskGraph:
    """How the tasks are related. Build one with a class method, not the constructor.

    Attributes
    ----------
    n_tasks : int
    kind : str
        ``"complete"``, ``"complete_open"``, ``"disconnected"``, ``"edges"``, ``"laplacian_pinv"``, ``"interaction"``,
        ``"psd_plus_identity"`` or ``"task_kernel"``.

    Examples
    --------
    >>> g = TaskGraph.from_edges(3, [(0, 1)])
    >>> g.task_kernel.sum(axis=1).round(12).tolist()
    [1.0, 1.0, 1.0]
    >>> g.components.tolist()
    [0, 0, 1]
    """

    def __init__(self, n_tasks: int, kind: str, *, edges=None, weights=None, matrix=None, _native=None):
        self.n_tasks = int(n_tasks)
        self.kind = kind
        self.edges = edges
        self.weights = weights
        self.matrix = matrix
        self._native_cache = _native

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def complete(cls, n_tasks: int) -> TaskGraph:
        """Every pair of tasks joined by a unit edge: T = (I + 11ᵀ)/(k+1).

        Parameters
        ----------
        n_tasks : int
            Number of tasks k >= 1.

        Returns
        -------
        TaskGraph
            A closed form: no k x k matrix is built unless ``task_kernel`` is asked for.
        """
        return cls._checked(n_tasks, "complete")

    @classmethod
    def complete_open(cls, n_tasks: int) -> TaskGraph:
        """The open-ended complete graph of ``n_tasks=None`` models: T_ii = 1, T_ij = 1/2 for any
        number of tasks (the complete graph's T times (k+1)/2; the shared + own feature map
        ``(x/√2, e_i ⊗ x/√2)``). Adding a task changes no existing entry (DECISIONS.md).

        Parameters
        ----------
        n_tasks : int
            Number of tasks k >= 1 (the current size; the graph grows with ``add_tasks``).

        Returns
        -------
        TaskGraph
            A closed form: no k x k matrix is built unless ``task_kernel`` is asked for.
        """
        return cls._checked(n_tasks, "complete_open")

    @classmethod
    def disconnected(cls, n_tasks: int) -> TaskGraph:
        """No edges: T = I, the tasks are learned independently.

        Parameters
        ----------
        n_tasks : int
            Number of tasks k >= 1.

        Returns
        -------
        TaskGraph
            A closed form: no k x k matrix is built unless ``task_kernel`` is asked for.
        """
        return cls._checked(n_tasks, "disconnected")

    @classmethod
    @fill_doc
    def from_edges(cls, n_tasks: int, edges, weights=None) -> TaskGraph:
        """An undirected graph from ``(i, j)`` pairs with optional nonnegative weights: T = (I + L)^{-1}.

        Parameters
        ----------
        {graph_edges}

        Returns
        -------
        TaskGraph
        """
        edges, weights = _edge_list(n_tasks, edges, weights)
        return cls._checked(n_tasks, "edges", edges=edges, weights=weights)

    @classmethod
    @fill_doc
    def laplacian_pinv(cls, n_tasks: int, edges, weights=None) -> TaskGraph:
        """T = L_G^+ (the footnote variant of the paper). Not recommended: see the warning.

        Parameters
        ----------
        {graph_edges}

        Returns
        -------
        TaskGraph
            Warns (``UserWarning``): L⁺ forces each component's scores to sum to zero.
        """
        warnings.warn(
            "T = pinv(L) forces the scores of each connected component to sum to zero, and an isolated task "
            "always scores 0 (ALGORITHMS.md §2.3); prefer the default T = (I + L)^-1",
            UserWarning,
            stacklevel=2,
        )
        edges, weights = _edge_list(n_tasks, edges, weights)
        return cls._checked(n_tasks, "laplacian_pinv", edges=edges, weights=weights)

    @classmethod
    @fill_doc
    def from_interaction(cls, A) -> TaskGraph:
        """A user-given symmetric positive definite interaction matrix A: T = A^{-1}.

        Parameters
        ----------
        A : array-like of shape (k, k)
            Symmetric positive definite.

        {returns_graph}
        """
        return cls._from_matrix(A, "A", "interaction")

    @classmethod
    @fill_doc
    def from_psd_plus_identity(cls, M) -> TaskGraph:
        """A user-given symmetric PSD matrix M: T = (I + M)^{-1}.

        Parameters
        ----------
        M : array-like of shape (k, k)
            Symmetric positive semi-definite.

        {returns_graph}
        """
        return cls._from_matrix(M, "M", "psd_plus_identity")

    @classmethod
    @fill_doc
    def from_task_kernel(cls, T) -> TaskGraph:
        """A user-given symmetric PSD task kernel T, used as is.

        Parameters
        ----------
        T : array-like of shape (k, k)
            Symmetric positive semi-definite.

        {returns_graph}
        """
        return cls._from_matrix(T, "T", "task_kernel")

    @classmethod
    def _from_matrix(cls, matrix, name: str, kind: str) -> TaskGraph:
        matrix = _square(matrix, name)
        return cls._checked(matrix.shape[0], kind, matrix=matrix)

    @classmethod
    def _checked(cls, n_tasks, kind, *, build=True, **kw) -> TaskGraph:
        """A validated graph. ``build=False`` (a graph from edges read from a file) defers the
        O(k³) factorisation of T to the first use: the edges are already checked."""
        if isinstance(n_tasks, bool) or int(n_tasks) != n_tasks or n_tasks < 1:
            raise ValueError(f"n_tasks must be an integer >= 1, got {n_tasks!r}")
        graph = cls(int(n_tasks), kind, **kw)
        if build or kind not in ("edges", "laplacian_pinv"):
            graph.native()  # validates now, so a bad graph fails where it is built
        return graph

    # -- what learners read -------------------------------------------------------------------
    def native(self):
        """The native task kernel (built once).

        Returns
        -------
        omtl._native.NativeTaskKernel
            What the native learners take.
        """
        if self._native_cache is None:
            from ._native import NativeTaskKernel

            k = self.n_tasks
            if self.kind == "complete":
                native = NativeTaskKernel.complete(k)
            elif self.kind == "complete_open":
                native = NativeTaskKernel.complete_open(k)
            elif self.kind == "disconnected":
                native = NativeTaskKernel.disconnected(k)
            elif self.kind in ("edges", "laplacian_pinv"):
                triples = [(int(i), int(j), float(w)) for (i, j), w in zip(self.edges, self.weights)]
                build = NativeTaskKernel.from_edges if self.kind == "edges" else NativeTaskKernel.laplacian_pinv
                native = build(k, triples)
            elif self.kind == "interaction":
                native = NativeTaskKernel.from_interaction(self.matrix)
            elif self.kind == "psd_plus_identity":
                native = NativeTaskKernel.from_psd_plus_identity(self.matrix)
            elif self.kind == "task_kernel":
                native = NativeTaskKernel.from_task_kernel(self.matrix)
            else:
                raise ValueError(f"unknown task graph kind {self.kind!r}")
            self._native_cache = native
        return self._native_cache

    @property
    def task_kernel(self) -> np.ndarray:
        """The k x k task kernel T (materialised on request)."""
        return self.native().to_dense()

    def c_g_for(self, radius: float = 1.0) -> float:
        """c_G = R sqrt(max_i T_ii) (§2.5).

        Parameters
        ----------
        radius : float
            R, a bound on the base kernel's sqrt(K'(x, x)).

        Returns
        -------
        float
        """
        return float(self.native().c_g(float(radius)))

    @property
    def c_g(self) -> float:
        """c_G for R = 1 (rbf or normalised kernels)."""
        return self.c_g_for(1.0)

    @property
    def components(self) -> np.ndarray:
        """The connected component of each task (numbered by their smallest task)."""
        if self.kind in ("complete", "complete_open"):
            return np.zeros(self.n_tasks, dtype=np.int64)
        if self.kind == "disconnected":
            return np.arange(self.n_tasks, dtype=np.int64)
        return self.native().components()

    def scaled(self, c: float) -> TaskGraph:
        """The same relation with T multiplied by ``c > 0`` (predictions are invariant, INV-P6).

        Parameters
        ----------
        c : float
            A positive factor.

        Returns
        -------
        TaskGraph
        """
        return TaskGraph.from_task_kernel(self.task_kernel * float(c))

    def add_tasks(self, n: int, edges=None, weights=None) -> TaskGraph:
        """A new graph with ``n`` more tasks, numbered ``n_tasks, ..., n_tasks + n - 1``.

        The new tasks are isolated unless ``edges`` (pairs over all ``n_tasks + n`` tasks, with
        optional ``weights``, default 1) join them; ``edges`` are for the edge-list kinds
        (``"edges"``, ``"laplacian_pinv"``, ``"disconnected"``, which becomes ``"edges"``).
        Semantics: the grown graph's task kernel is recomputed as for any graph, so
        ``"complete"`` becomes the complete graph over ``n_tasks + n`` tasks, whose T has new
        values everywhere ((I + 11ᵀ)/(k+n+1)); ``"complete_open"`` and ``"disconnected"`` keep
        every existing entry; a graph whose new tasks are isolated keeps T on the old tasks
        (T is block diagonal), and edges to old tasks change it on their components. For a
        matrix kind the new tasks are isolated: A and T grow by an identity block, M by a zero block.

        Parameters
        ----------
        n : int
            Number of tasks to add (>= 0).
        edges : array-like of shape (m, 2), optional
            Edges over all ``n_tasks + n`` tasks to add (edge-list kinds only).
        weights : array-like of shape (m,), optional
            Nonnegative weights of ``edges`` (default 1).

        Returns
        -------
        TaskGraph
            The grown graph (this one is not changed).
        """
        if isinstance(n, bool) or int(n) != n or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        k2 = self.n_tasks + int(n)
        if edges is None and weights is not None:
            raise ValueError("weights without edges")
        edge_kinds = ("edges", "laplacian_pinv", "disconnected")
        if edges is not None and self.kind not in edge_kinds:
            raise ValueError(f"edges can be added to an edge-list graph ({', '.join(edge_kinds)}), not to {self.kind!r}")
        if self.kind in ("complete", "complete_open", "disconnected") and edges is None:
            return getattr(TaskGraph, self.kind)(k2)
        if self.kind in edge_kinds:
            old_e = np.zeros((0, 2), dtype=np.int64) if self.edges is None else np.asarray(self.edges).reshape(-1, 2)
            old_w = np.zeros(0) if self.weights is None else np.asarray(self.weights, dtype=np.float64)
            new_e, new_w = _edge_list(k2, [] if edges is None else edges, weights)
            all_e, all_w = np.vstack([old_e, new_e]), np.concatenate([old_w, new_w])
            if self.kind == "laplacian_pinv":
                with warnings.catch_warnings():  # the user saw the warning when building it
                    warnings.simplefilter("ignore", UserWarning)
                    return TaskGraph.laplacian_pinv(k2, all_e, all_w)
            return TaskGraph.from_edges(k2, all_e, all_w)
        grown = np.zeros((k2, k2))
        grown[: self.n_tasks, : self.n_tasks] = self.matrix
        if self.kind in ("interaction", "task_kernel"):
            grown[self.n_tasks :, self.n_tasks :] = np.eye(int(n))
        return getattr(TaskGraph, {"interaction": "from_interaction", "psd_plus_identity": "from_psd_plus_identity",
                                   "task_kernel": "from_task_kernel"}[self.kind])(grown)

    # -- plumbing -----------------------------------------------------------------------------
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_native_cache"] = None
        return state

    def __eq__(self, other) -> bool:
        if not isinstance(other, TaskGraph):
            return NotImplemented
        if (self.n_tasks, self.kind) != (other.n_tasks, other.kind):
            return False
        same = lambda a, b: (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))  # noqa: E731
        return same(self.edges, other.edges) and same(self.weights, other.weights) and same(self.matrix, other.matrix)

    __hash__ = None

    def __repr__(self) -> str:
        extra = f", {len(self.edges)} edges" if self.edges is not None else ""
        return f"TaskGraph.{self.kind}(n_tasks={self.n_tasks}{extra})"


def resolve_graph(graph, n_tasks: int, open_ended: bool = False) -> TaskGraph:
    """A learner's ``graph`` argument as a TaskGraph with ``n_tasks`` tasks.

    Parameters
    ----------
    graph : {"complete", "disconnected"} or TaskGraph
        A TaskGraph must have ``n_tasks`` tasks.
    n_tasks : int
        Number of tasks.
    open_ended : bool, default=False
        The model has ``n_tasks=None``: "complete" becomes the open-ended complete graph
        (``TaskGraph.complete_open``).

    Returns
    -------
    TaskGraph
    """
    if isinstance(graph, str):
        if graph == "complete":
            return TaskGraph.complete_open(n_tasks) if open_ended else TaskGraph.complete(n_tasks)
        if graph == "disconnected":
            return TaskGraph.disconnected(n_tasks)
        raise ValueError(f"graph must be 'complete', 'disconnected' or a TaskGraph, got {graph!r}")
    if isinstance(graph, TaskGraph):
        if graph.n_tasks != n_tasks:
            raise ValueError(f"the task graph has {graph.n_tasks} tasks but n_tasks={n_tasks}")
        return graph
    raise TypeError(f"graph must be 'complete', 'disconnected' or a TaskGraph, got {type(graph).__name__}")


def stored_edges_graph(n_tasks: int, kind: str, edges, weights) -> TaskGraph:
    """A graph built from edges, as a model file stores it: the edges are checked now, T is
    factored when a model first needs it (reading a file costs no O(k³) work).

    Parameters
    ----------
    n_tasks : int
        Number of tasks.
    kind : {"edges", "laplacian_pinv"}
        How T is made of the edges (``TaskGraph.from_edges``, ``TaskGraph.laplacian_pinv``).
    edges : iterable of (int, int)
        Undirected edges between tasks.
    weights : array-like of shape (n_edges,) or None
        Non-negative edge weights (None: all 1).

    Returns
    -------
    TaskGraph
    """
    edges, weights = _edge_list(n_tasks, edges, weights)
    return TaskGraph._checked(n_tasks, kind, build=False, edges=edges, weights=weights)


def _edge_list(n_tasks, edges, weights):
    pairs = np.asarray(list(edges), dtype=np.int64).reshape(-1, 2)
    if weights is None:
        w = np.ones(len(pairs))
    else:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.shape[0] != pairs.shape[0]:
            raise ValueError(f"{pairs.shape[0]} edges but {w.shape[0]} weights")
    if pairs.size and (pairs.min() < 0 or pairs.max() >= n_tasks):
        raise ValueError(f"an edge names a task outside [0, {n_tasks})")
    loops = np.flatnonzero(pairs[:, 0] == pairs[:, 1])
    if loops.size:
        raise ValueError(f"self loop on task {pairs[loops[0], 0]}")
    if not np.all(np.isfinite(w) & (w >= 0)):
        raise ValueError(f"edge weights must be finite and >= 0, got {w[~(np.isfinite(w) & (w >= 0))][0]}")
    return pairs, w


def _square(M, name):
    M = np.array(M, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix, got shape {M.shape}")
    return np.ascontiguousarray(M)
