"""Hyper-parameter plumbing shared by the kernel learners: the task graph and the base kernel."""

from __future__ import annotations

from .._kernel_params import KernelSpec
from ..graph import TaskGraph, resolve_graph


class KernelParamsMixin:
    """Reads ``graph``, ``kernel``, ``gamma``, ``degree``, ``coef0``, ``normalize``."""

    def _task_graph(self) -> TaskGraph:
        graph = getattr(self, "graph", "disconnected")
        return resolve_graph(graph, self._check_n_tasks())

    def _kernel_spec(self, n_features: int) -> KernelSpec:
        return KernelSpec.resolve(self.kernel, self.gamma, self.degree, self.coef0, self.normalize, n_features)

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
