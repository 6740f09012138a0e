"""Hyper-parameter plumbing shared by the kernel learners: the task graph and the base kernel."""

from __future__ import annotations

from .._base import locked
from .._kernel_params import KernelSpec, scale_gamma
from ..graph import TaskGraph, resolve_graph


class KernelParamsMixin:
    """Reads ``graph``, ``kernel``, ``gamma``, ``degree``, ``coef0``, ``normalize``."""

    def _task_graph(self) -> TaskGraph:
        graph = getattr(self, "graph", "disconnected")
        return resolve_graph(graph, self._check_n_tasks(), open_ended=self.n_tasks is None)

    def _kernel_spec(self, n_features: int) -> KernelSpec:
        scaled = self.__dict__.get("_gamma_scale")
        return KernelSpec.resolve(
            self.kernel, self.gamma, self.degree, self.coef0, self.normalize, n_features, scaled=scaled
        )

    def _scales_gamma(self) -> bool:
        """Whether gamma is read from the first batch: "scale", and the rbf default (None)."""
        if isinstance(self.gamma, str) and self.gamma == "scale":
            return True
        return self.gamma is None and self.kernel == "rbf"

    def _ensure_core(self, X):
        # gamma="scale" is read from the first batch (X is finite-checked only later, so a
        # non-finite value gives a non-finite variance: scale_gamma then falls back to 1/d, and
        # the batch is refused anyway).
        if not self._is_fitted() and self._scales_gamma():
            self._gamma_scale = scale_gamma(X)
        return super()._ensure_core(X)

    @locked
    def _run_learn(self, *args, **kwargs):
        try:
            return super()._run_learn(*args, **kwargs)
        finally:
            # The value gamma="scale" resolved to belongs to a fitted model only: a first batch
            # that failed leaves the model as it was.
            if not self._is_fitted():
                self.__dict__.pop("_gamma_scale", None)

    def _native_setting(self, n_features: int) -> dict:
        graph, spec = self._task_graph(), self._kernel_spec(n_features)
        return {"task_kernel": graph.native(), "kernel": spec.native()}

    @property
    def task_graph_(self) -> TaskGraph:
        """The task graph in use (resolved from ``graph``)."""
        return self._task_graph()

    @property
    def kernel_(self) -> KernelSpec:
        """The base kernel in use, with ``gamma`` resolved (available after the first batch)."""
        if not hasattr(self, "n_features_in_"):
            raise AttributeError("kernel_ is set on the first non-empty batch")
        return self._kernel_spec(self.n_features_in_)
