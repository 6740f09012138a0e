"""scikit-learn's side of every learner: ``fit``, ``score``, tags, feature names, metadata routing.

scikit-learn stays optional: nothing here imports it when ``omtl`` is imported. The methods that
must hand scikit-learn its own objects (``__sklearn_tags__``, ``get_metadata_routing``) import it
when scikit-learn calls them, so it is loaded only by code that already uses it.

``tasks`` is *requested by default* by every method that takes it (as ``groups`` is by
scikit-learn's group splitters): with ``sklearn.set_config(enable_metadata_routing=True)``,
``Pipeline``, ``cross_val_score``, ``GridSearchCV`` ... route a ``tasks`` array to ``fit``,
``predict``, ``decision_function``, ``predict_proba`` and ``score`` without any
``set_*_request`` call (which can still rename or refuse it). See docs/sklearn.md.
"""

from __future__ import annotations

import inspect
import numbers
import sys
import warnings

import numpy as np

from ._validation import check_classes_pair, check_labels

# Methods that take ``tasks`` and so consume it under metadata routing.
ROUTED_METHODS = ("fit", "partial_fit", "predict", "decision_function", "predict_proba", "score")
# scikit-learn's sentinel for "leave this request as it is" (``sklearn.utils.metadata_routing.UNCHANGED``).
UNCHANGED = "$UNCHANGED$"
# Metadata each method consumes, with its default request: True (routed when given), None (an
# error when given to a meta-estimator without a request; scikit-learn's default).
_DEFAULT_REQUESTS = {method: {"tasks": True} for method in ROUTED_METHODS}
_DEFAULT_REQUESTS["fit"] = {"tasks": True, "n_epochs": None}
_DEFAULT_REQUESTS["score"] = {"tasks": True, "sample_weight": None}


class MetadataRequests(dict):
    """A learner's routing requests, {method: {param: alias}}; ``sklearn.base.clone`` copies it
    to the clone (it clones ``_metadata_request``, through this hook)."""

    def __sklearn_clone__(self):
        return MetadataRequests({method: dict(requests) for method, requests in self.items()})


class available_if:  # noqa: N801  (named like scikit-learn's decorator it mirrors)
    """A method that exists only when ``check(self)`` is true, so ``hasattr`` tells (as
    ``sklearn.utils.metaestimators.available_if``, which omtl cannot import unconditionally)."""

    def __init__(self, check):
        self.check = check

    def __call__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        return self

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn
        if not self.check(obj):
            raise AttributeError(f"This {type(obj).__name__} has no attribute {self.__name__!r}: {self.check.__doc__}")
        return self.fn.__get__(obj, owner)


def feature_names_of(X) -> np.ndarray | None:
    """The column names of a data frame as an object array when all are strings, else None
    (scikit-learn's rule: names of mixed string and non-string types are an error)."""
    columns = getattr(X, "columns", None)
    if columns is None or not hasattr(X, "shape"):
        return None
    names = np.asarray(list(columns), dtype=object)
    types = sorted({type(v).__qualname__ for v in names})
    if len(types) > 1 and "str" in types:
        raise TypeError(
            "Feature names are only supported if all input features have string names, but your input has "
            f"{types} as feature name / column name types. If you want feature names to be stored and "
            "validated, you must convert them all to strings, by using X.columns = X.columns.astype(str) "
            "for example. Otherwise you can remove feature / column names from your input data, or convert "
            "them all to a non-string data type."
        )
    return names if types == ["str"] else None


def _names_listed(names) -> str:
    shown = [f"- {name}\n" for name in names[:5]]
    return "".join(shown) + ("- ...\n" if len(names) > 5 else "")


def _check_request_alias(param: str, alias) -> None:
    if alias is True or alias is False or alias is None or alias == UNCHANGED:
        return
    if not (isinstance(alias, str) and alias.isidentifier()):
        raise ValueError(
            f"The alias you're setting for `{param}` should be either a valid identifier or one of "
            f"{{None, True, False}}, but given value is: `{alias}`"
        )


def _require_routing(method: str) -> None:
    try:
        import sklearn
    except ImportError:  # pragma: no cover - the method is only useful with scikit-learn
        raise ImportError(f"set_{method}_request needs scikit-learn (pip install 'omtl[sklearn]')") from None
    if not sklearn.get_config().get("enable_metadata_routing", False):
        raise RuntimeError(
            "This method is only available when metadata routing is enabled. You can enable it using "
            "sklearn.set_config(enable_metadata_routing=True)."
        )


class EstimatorRoot:
    """The root of every learner's bases. Once scikit-learn is in use (it asks a learner for its
    tags or routing, ``omtl.sklearn`` is imported, or it was imported before omtl), the learners
    inherit ``sklearn.base.BaseEstimator`` through here (``adopt_base_estimator``), as
    ``check_estimator`` expects, without omtl importing scikit-learn itself. The learners' own
    methods (parameters, pickling, tags, routing, ``__repr__``) come first in their MRO."""


def adopt_base_estimator() -> None:
    """Makes ``sklearn.base.BaseEstimator`` a base of every learner (once; imports scikit-learn)."""
    if SklearnClassifierMixin.__bases__ == (EstimatorRoot,):
        from sklearn.base import BaseEstimator

        # A class whose base is a plain class (not ``object`` itself) may be given new bases.
        SklearnClassifierMixin.__bases__ = (BaseEstimator,)


class SklearnClassifierMixin(EstimatorRoot):
    """``fit``, ``score``, estimator tags, ``feature_names_in_`` and metadata routing, for
    ``OnlineClassifier`` (which provides ``partial_fit``, ``decision_function`` and the state)."""

    _estimator_type = "classifier"  # is_classifier before scikit-learn 1.6

    # ---- fit and score -------------------------------------------------------------------------
    def fit(self, X, y, *, tasks=None, n_epochs=1):
        """Learns a fresh model: ``n_epochs`` online passes (predict, then update) over the rows in
        order, forgetting what was learned before. The model changes only if every pass succeeds
        (an interrupted ``fit`` leaves it as it was; use ``partial_fit`` to keep partial work).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), -1/+1, 0/1 or bool
        tasks : array-like of shape (n_samples,) or int, default=None
            The task of each row; may be left out when ``n_tasks=1``.
        n_epochs : int, default=1
            Passes over the rows, in the given order each time.

        Returns
        -------
        self
        """
        if isinstance(n_epochs, bool) or not isinstance(n_epochs, numbers.Integral) or n_epochs < 1:
            raise ValueError(f"n_epochs must be an integer >= 1, got {n_epochs!r}")
        with self._model_lock():
            fresh = type(self)(**self.get_params())
            for _ in range(int(n_epochs)):
                fresh.partial_fit(X, y, tasks=tasks)
            if not fresh._is_fitted():
                shape = getattr(X, "shape", (0,))
                raise ValueError(f"Found array with 0 sample(s) (shape={tuple(shape)}) while a minimum of 1 is required.")
            # Adopt the fresh model's state. What the last fit left and this one does not set
            # (feature_names_in_ after data without names) goes; attributes others attached
            # (routing requests, the lock, a meta-estimator's context) stay.
            params = set(self._param_names())
            state = {k: v for k, v in fresh.__dict__.items() if k not in params and k != "_lock"}
            stale = [k for k in self.__dict__ if k.endswith("_") and not k.startswith("_") and k not in params]
            for name in stale:
                del self.__dict__[name]
            self.__dict__.update(state)
        return self

    def score(self, X, y, *, tasks=None, sample_weight=None) -> float:
        """Mean accuracy of ``predict`` on ``X`` against ``y`` (any label form; no update).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), -1/+1, 0/1 or bool
        tasks : array-like of shape (n_samples,) or int, default=None
            May be left out when ``n_tasks=1``.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        float
        """
        with self._model_lock():  # the scores and the labels' reading from one state
            scores = self.decision_function(X, tasks=tasks)
            y_pm1, _ = check_labels(y, scores.shape[0], *self._label_context(None))
        if scores.shape[0] == 0:
            raise ValueError("score needs at least one row")
        correct = np.where(scores >= 0.0, 1.0, -1.0) == y_pm1
        return float(np.average(correct, weights=sample_weight))

    def _label_context(self, classes):
        """``(classes, new_classes)`` for ``check_labels``: a model that learned a pair of labels
        keeps it; one that learned -1/+1, 0/1 or bool cannot switch to a pair (a 1 would change
        meaning); an unfitted one takes the pair ``classes`` gives, or sets one up from its batch."""
        given = None if classes is None else check_classes_pair(classes)
        if not self._is_fitted():
            return given, True
        learned = self._label_form if isinstance(self._label_form, tuple) else None
        if classes is not None and given != learned:
            raise ValueError(
                f"classes={np.unique(classes).tolist()!r} differ from the labels this model learned ({self.classes_.tolist()!r})"
            )
        return learned, False

    # ---- feature names (scikit-learn's rules and messages) -------------------------------------
    def _check_columns(self, X):
        """Checks a batch's column names and width against the fitted ones (warning as
        scikit-learn does when only one side has names) and returns its names, which the first
        batch of a model records. Changes nothing."""
        names = feature_names_of(X)
        if not self._is_fitted():
            return names
        shape = getattr(X, "shape", None)
        if isinstance(shape, tuple) and len(shape) == 2 and shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {shape[1]} features, but {type(self).__name__} is expecting {self.n_features_in_} features as input"
            )
        fitted = getattr(self, "feature_names_in_", None)
        if names is None and fitted is None:
            return names
        if fitted is None:
            warnings.warn(f"X has feature names, but {type(self).__name__} was fitted without feature names", stacklevel=4)
        elif names is None:
            warnings.warn(
                f"X does not have valid feature names, but {type(self).__name__} was fitted with feature names", stacklevel=4
            )
        elif len(names) != len(fitted) or np.any(names != fitted):
            unseen, missing = sorted(set(names) - set(fitted)), sorted(set(fitted) - set(names))
            message = "The feature names should match those that were passed during fit.\n"
            if unseen:
                message += "Feature names unseen at fit time:\n" + _names_listed(unseen)
            if missing:
                message += "Feature names seen at fit time, yet now missing:\n" + _names_listed(missing)
            if not unseen and not missing:
                message += "Feature names must be in the same order as they were in fit.\n"
            raise ValueError(message)
        return names

    def _record_feature_names(self, names) -> None:
        """Called once, when the first batch builds the model."""
        if names is not None:
            self.feature_names_in_ = names

    # ---- estimator tags ------------------------------------------------------------------------
    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        adopt_base_estimator()

        return Tags(
            estimator_type="classifier",
            target_tags=TargetTags(required=True),
            classifier_tags=ClassifierTags(multi_class=False),
            # Unfitted models predict with the empty model (every score 0), no NotFittedError.
            requires_fit=False,
            input_tags=InputTags(sparse=True),
        )

    def _more_tags(self) -> dict:
        """Tags for scikit-learn < 1.6."""
        return {"binary_only": True, "requires_y": True, "requires_fit": False}

    def _get_tags(self) -> dict:
        """scikit-learn < 1.6 reads the tags through this when an estimator defines it."""
        try:
            from sklearn.utils._tags import _DEFAULT_TAGS
        except ImportError:
            _DEFAULT_TAGS = {}
        return {**_DEFAULT_TAGS, **self._more_tags()}

    def __sklearn_is_fitted__(self) -> bool:
        return self._is_fitted()

    # ---- metadata routing (scikit-learn's request protocol, SLEP006) ---------------------------
    def _set_request(self, method: str, **aliases):
        _require_routing(method)
        requests = MetadataRequests({m: dict(v) for m, v in getattr(self, "_metadata_request", _DEFAULT_REQUESTS).items()})
        for param, alias in aliases.items():
            _check_request_alias(param, alias)
            if alias != UNCHANGED:
                requests[method][param] = alias
        self._metadata_request = requests
        return self

    def get_metadata_routing(self):
        """The metadata each method consumes (scikit-learn's metadata routing).

        Returns
        -------
        sklearn.utils.metadata_routing.MetadataRequest
        """
        from sklearn.utils.metadata_routing import MetadataRequest

        adopt_base_estimator()
        request = MetadataRequest(owner=self)
        requests = getattr(self, "_metadata_request", _DEFAULT_REQUESTS)
        for method in ROUTED_METHODS:
            if hasattr(self, method):
                for param, alias in requests[method].items():
                    getattr(request, method).add_request(param=param, alias=alias)
        return request


# The request setters, one per routed method (scikit-learn generates its own the same way).
_REQUEST_PARAMS = {"fit": ("tasks", "n_epochs"), "score": ("tasks", "sample_weight")}
_REQUESTED_BY_DEFAULT = {"tasks"}


def _request_setter(method: str, params: tuple):
    def setter(self, **aliases):
        unknown = set(aliases) - set(params)
        if unknown:
            raise TypeError(f"set_{method}_request() got unexpected keyword argument(s) {sorted(unknown)}")
        return self._set_request(method, **{p: aliases.get(p, UNCHANGED) for p in params})

    setter.__name__ = setter.__qualname__ = f"set_{method}_request"
    setter.__qualname__ = f"SklearnClassifierMixin.set_{method}_request"
    setter.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, default=UNCHANGED) for p in params])
    lines = [f"Whether a meta-estimator passes {', '.join(f'``{p}``' for p in params)} to ``{method}`` "
             "(metadata routing).", "", "Parameters", "----------"]
    for p in params:
        default = "requested" if p in _REQUESTED_BY_DEFAULT else "not requested"
        lines += [f"{p} : bool, None or str, optional",
                  "    True: pass it; False: do not; None: error if given; a string: the name it is given",
                  f"    under; unchanged if omitted ({default} by default)."]
    setter.__doc__ = "\n".join(lines + ["", "Returns", "-------", "self"])
    return setter


for _method in ROUTED_METHODS:
    setattr(SklearnClassifierMixin, f"set_{_method}_request", _request_setter(_method, _REQUEST_PARAMS.get(_method, ("tasks",))))


# ---- scikit-learn's check_estimator ------------------------------------------------------------
# Checks of check_estimator that cannot apply to an omtl learner, with the reason each fails: none for
# every learner; a few for learners whose one online pass or batch schedule the check's data defeats.
EXPECTED_FAILED_CHECKS: dict = {}
# Learner-specific ones, by class name.
_EXPECTED_FAILED_BY_LEARNER = {
    "CWCOL": {
        "check_classifiers_train": (
            "one online pass of CW-COL at its default confidence=0.85 reaches 0.80 training accuracy "
            "on the check's 200-row blobs, under its 0.83 bar (0.92 with fit(..., n_epochs=3))"
        ),
    },
}
_UNTRAINED_BATCH_LEARNER = {
    "check_classifiers_classes": (
        "the check fits 30 rows, fewer than retrain_every=100, so the model has not been trained yet "
        "and every score is 0; omtl predicts a score of 0 as the positive class (sign(0) = +1, "
        "ALGORITHMS.md §0), the check reads decision_function > 0 as positive"
    ),
}
_EXPECTED_FAILED_BY_LEARNER["MTFL"] = _UNTRAINED_BATCH_LEARNER
_EXPECTED_FAILED_BY_LEARNER["TRML"] = _UNTRAINED_BATCH_LEARNER


def expected_failed_checks(estimator) -> dict:
    """The checks of ``sklearn.utils.estimator_checks.check_estimator`` that ``estimator`` (a
    learner with ``n_tasks=1``) is expected to fail, each with its reason: pass it as
    ``check_estimator(model, expected_failed_checks=expected_failed_checks(model))``."""
    return {**EXPECTED_FAILED_CHECKS, **_EXPECTED_FAILED_BY_LEARNER.get(type(estimator).__name__, {})}


if "sklearn.base" in sys.modules:  # scikit-learn is in use already: no import to save
    adopt_base_estimator()
