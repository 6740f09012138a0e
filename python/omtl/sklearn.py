"""Helpers for using omtl learners with scikit-learn (docs/sklearn.md).

- ``make_task_scorer``: a scorer that hands ``tasks`` to the learner's ``predict`` (or
  ``decision_function``/``predict_proba``) under metadata routing; scikit-learn's own scorers
  (``scoring="f1"`` ...) call ``predict(X)`` without metadata, which a multitask model refuses.
- ``expected_failed_checks``: the checks of ``check_estimator`` an omtl learner cannot pass,
  each with its reason.

The learners themselves need nothing from here: ``fit``, ``score``, tags and routing are their
own methods. Importing this module makes ``sklearn.base.BaseEstimator`` a base of the learners
where scikit-learn is installed (``omtl._sklearn.EstimatorRoot``).
"""

from __future__ import annotations

from ._sklearn import EXPECTED_FAILED_CHECKS, adopt_base_estimator, expected_failed_checks

__all__ = ["EXPECTED_FAILED_CHECKS", "TaskScorer", "expected_failed_checks", "make_task_scorer"]

_RESPONSES = ("predict", "decision_function", "predict_proba")


class TaskScorer:
    """``scorer(estimator, X, y, tasks=...)``: ``score_func(y, response)`` with the response of
    ``estimator`` computed with ``tasks`` (``predict_proba``: the positive column). Requests
    ``tasks`` for scoring, so ``cross_val_score``/``cross_validate``/``GridSearchCV`` route it."""

    def __init__(self, score_func, *, response_method="predict", sign=1, kwargs=None):
        if response_method not in _RESPONSES:
            raise ValueError(f"response_method must be one of {_RESPONSES}, got {response_method!r}")
        self.score_func = score_func
        self.response_method = response_method
        self.sign = sign
        self.kwargs = dict(kwargs or {})

    def __call__(self, estimator, X, y_true, tasks=None):
        response = getattr(estimator, self.response_method)(X, tasks=tasks)
        if self.response_method == "predict_proba":
            response = response[:, 1]
        return self.sign * self.score_func(y_true, response, **self.kwargs)

    def get_metadata_routing(self):
        from sklearn.utils.metadata_routing import MetadataRequest

        request = MetadataRequest(owner=self)
        request.score.add_request(param="tasks", alias=True)
        return request

    def __repr__(self) -> str:
        name = getattr(self.score_func, "__name__", repr(self.score_func))
        return f"make_task_scorer({name}, response_method={self.response_method!r})"


def make_task_scorer(score_func, *, response_method="predict", greater_is_better=True, **kwargs) -> TaskScorer:
    """A scorer for multitask learners, like ``sklearn.metrics.make_scorer``.

    Parameters
    ----------
    score_func : callable
        ``score_func(y_true, y_response, **kwargs)``, e.g. ``sklearn.metrics.f1_score``.
    response_method : {"predict", "decision_function", "predict_proba"}, default="predict"
        What of the learner ``score_func`` reads (``roc_auc_score``: ``"decision_function"``).
    greater_is_better : bool, default=True
        False negates the score (for losses), as scikit-learn's scorers do.
    **kwargs
        Passed on to ``score_func``.

    Returns
    -------
    TaskScorer
        Use it as ``scoring=`` with ``sklearn.set_config(enable_metadata_routing=True)``.
    """
    return TaskScorer(score_func, response_method=response_method, sign=1 if greater_is_better else -1, kwargs=kwargs)


try:  # the learners inherit scikit-learn's BaseEstimator where it is installed
    adopt_base_estimator()
except ImportError:  # pragma: no cover - exercised only without scikit-learn
    pass
