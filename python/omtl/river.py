"""River adapters: every omtl learner as a ``river.base.Classifier`` (``learn_one``/``predict_one``).

    from river import compose, evaluate, metrics, preprocessing
    import omtl.river

    model = omtl.river.MTLinear(n_tasks=12, task_key="task")
    evaluate.progressive_val_score(dataset, model, metrics.Accuracy())

Each adapter takes the learner's own hyper-parameters plus where the task id and the features
come from (docs/sklearn.md#river):

- ``task_key`` (default ``"task"``): the key of ``x`` holding the task id, which is not a
  feature; or ``task_fn``, a function ``x -> task id`` (then no key is removed). With neither
  (``task_key=None``) every example is task 0, for a single-task model (``n_tasks=1``). The id is
  handed to the learner as it is (a label), so whatever the learner accepts as a task id works.
- ``features``: ``None`` (default) hashes every feature name into the learner's ``n_features``
  columns (``2**18`` by default) exactly as scikit-learn's ``FeatureHasher(input_type="dict",
  alternate_sign=False)`` does, so a name first seen late in the stream is learned, never
  dropped (a str value ``v`` of feature ``f`` is the indicator ``"f=v"``, a category, as
  scikit-learn's hasher reads it); or the feature names, in order, for a fixed row of numbers (a
  key missing from an example counts as 0, a key not in the list is ignored).
- **A text is not split into words**: ``{"text": "cheap pills now"}`` is the one feature
  ``"text=cheap pills now"``, so every new message is a new feature and nothing is learned from
  its words (about 50 % accuracy on a spam stream). Put River's ``BagOfWords`` in front:
  ``compose.Select("user") + feature_extraction.BagOfWords(on="text") | omtl.river.MTLinear(task_key="user")``
  (docs/sklearn.md#river). The adapter warns once (``UserWarning``) when a str value among the
  first examples it learns holds whitespace.

Labels are -1/+1, 0/1 or bool (River's binary datasets use bool), one form per stream (fixed by
the first bool, 0 or -1 seen); predictions come back in that form, as ``True`` before the first
label (the empty model's score 0) and as -1/+1 while only 1s were seen. Any other two labels
(``"spam"``/``"ham"``) need ``classes=[...]`` up front, since one example cannot tell which is
positive; the larger (sorted) one is positive, as in scikit-learn.
Each ``*_one`` call runs the learner's own per-event method (``learn_one``, ``decision_one``);
``learn_many``/``predict_many``/``predict_proba_many`` (River's ``MiniBatchClassifier``, pandas
data frames with the task id in column ``task_key``) run it once per frame, at batch speed (a
missing column counts as 0, a NaN is an error). Bad input raises ``ValueError`` or
``TypeError``. River is an optional dependency (``pip install 'omtl[river]'``).
"""

from __future__ import annotations

import itertools
import warnings
from typing import TYPE_CHECKING

import numpy as np

try:
    from river import base as _river_base
except ImportError as exc:  # pragma: no cover - exercised only without River
    raise ImportError("omtl.river needs River: pip install 'omtl[river]' (or pip install river)") from exc

from . import learners as _learners
from ._docs import fill_doc
from ._hashing import hash_features
from ._native import decision_event, learn_event
from ._registry import LEARNERS
from ._validation import check_classes_pair

_ZEROS = itertools.repeat(0.0)
# Examples whose str values are looked at for text (whitespace): a text feature shows from the
# first examples, and the check stays off the per-event path after them.
_TEXT_CHECKS = 1000


def _text_warning(name, value) -> None:
    warnings.warn(
        f"feature {name!r} holds a text ({str(value)[:40]!r}): it is hashed whole as the one categorical feature "
        f"'{name}=...', not as its words, so each new text is a new feature and its words teach nothing. Split it "
        f"first, e.g. compose.Select(<task key>) + feature_extraction.BagOfWords(on={name!r}) | <this model> "
        "(docs/sklearn.md#river)",
        UserWarning,
        stacklevel=4,  # the caller of learn_one / learn_many
    )


class RiverClassifier(_river_base.MiniBatchClassifier):
    """An omtl learner behind River's ``Classifier`` interface (and ``MiniBatchClassifier``'s
    ``learn_many``/``predict_many``, one native call per batch); subclasses name the learner."""

    _learner_class: type = None  # the omtl learner a subclass adapts

    def __init__(self, *, task_key="task", task_fn=None, features=None, classes=None, **params):
        self.task_key = task_key
        self.task_fn = task_fn
        self.features = features
        self.classes = classes
        self.params = params  # the learner's hyper-parameters (River's clone reads them back)
        self.learner = self._learner_class(**params)
        self._names = None if features is None else list(features)
        # (negative, positive): given by ``classes`` or fixed by the first label that tells the form
        self._labels = None if classes is None else tuple(np.unique(np.asarray(classes)).tolist())
        self._custom_labels = classes is not None and check_classes_pair(classes) is not None
        self._text_checks = 0 if features is None else _TEXT_CHECKS  # listed features are numbers

    def _check_text(self, x) -> None:
        """Warns once if a str value of ``x`` looks like a text (holds whitespace)."""
        self._text_checks += 1
        for name, value in x.items():
            if isinstance(value, str) and name != self.task_key and any(c.isspace() for c in value.strip()):
                self._text_checks = _TEXT_CHECKS
                _text_warning(name, value)
                return

    # ---- one example -> the learner's per-event input ------------------------------------------
    def _task(self, x):
        if self.task_fn is not None:
            return self.task_fn(x)
        if self.task_key is None:
            return None
        try:
            return x[self.task_key]
        except KeyError:
            raise ValueError(
                f"x has no task key {self.task_key!r}: pass task_key= (the key holding the task id), "
                "task_fn= (a function x -> task id), or task_key=None for a single-task model"
            ) from None
        except TypeError:
            raise TypeError(f"x must be a dict of features, got {type(x).__name__}") from None

    def _features(self, x):
        """``x`` as the learner's ``learn_one`` reads it: the dict without the task key (names
        hashed), or the row of the listed features."""
        if not isinstance(x, dict):
            raise TypeError(f"x must be a dict of features, got {type(x).__name__}")
        if self._names is not None:
            return list(map(x.get, self._names, _ZEROS))  # numbers only (checked by the learner)
        if self.task_key is not None and self.task_fn is None:
            x = x.copy()
            del x[self.task_key]  # present: _task read it first
        return x

    def _event(self, x):
        """``(features, skip)`` for the learner's per-event functions: the dict as it is with its
        task key skipped (no copy), or the row of the listed features."""
        if self._names is not None or not isinstance(x, dict):
            return self._features(x), None
        return x, (self.task_key if self.task_fn is None else None)

    # ---- River's interface ---------------------------------------------------------------------
    def _label_pair(self, y):
        """The labels of the stream, fixed by the first label that tells the form (every bool; a
        0 or a -1; a lone 1 does not), so that predictions keep one form whatever the next label
        is (the learner, fed one row at a time, would read a 1 of a 0/1 stream as -1/+1)."""
        if self._custom_labels:
            return self._labels  # the learner checks that y is one of them
        if isinstance(y, (bool, np.bool_)):
            pair = (False, True)
        elif y == 0:
            pair = (0, 1)
        elif y == -1:
            pair = (-1, 1)
        else:
            return self._labels  # a 1 (any form) or a bad label, which the learner reports
        if self._labels is not None and pair != self._labels:
            raise ValueError(f"label {y!r} mixes label forms: this stream's labels are {self._labels}")
        return pair

    @fill_doc
    def learn_one(self, x, y):
        """Updates the model with one example (River's ``learn_one``; as in every omtl pass,
        the learner scores the row before its update).

        Parameters
        ----------
        {x_one}
        y : bool or label
            Its label.

        Returns
        -------
        None
        """
        labels = self._label_pair(y)
        task = self._task(x)
        features, skip = self._event(x)
        if self._text_checks < _TEXT_CHECKS and isinstance(x, dict):
            self._check_text(x)
        if self.learner._is_fitted() or self.classes is None:
            learn_event(self.learner, features, y, task, skip)  # the learner's learn_one
        else:  # the first label of a custom pair needs the pair (classes=) to be read
            rows = self.learner._event_rows(features, skip)
            self.learner.partial_fit(rows, [y], tasks=None if task is None else [task], classes=self.classes)
        self._labels = labels

    @fill_doc
    def predict_one(self, x, **kwargs):
        """The predicted label of one example (no update).

        Parameters
        ----------
        {x_one}
        **kwargs
            Ignored (River passes extra arguments to some models).

        Returns
        -------
        label
            In the form of the stream's labels (bool before the first example).
        """
        task = self._task(x)
        features, skip = self._event(x)
        score = decision_event(self.learner, features, task, skip)  # the learner's decision_one
        if not self.learner._is_fitted():
            return True  # the empty model's score 0 predicts the positive class
        negative, positive = self._labels or (-1, 1)
        return positive if score >= 0.0 else negative

    @fill_doc
    def predict_proba_one(self, x, **kwargs):
        """``{negative: P, positive: P}`` where the learner has probabilities (``MTLinear`` with
        ``loss="logistic"``); otherwise ``NotImplementedError``, River's convention.

        Parameters
        ----------
        {x_one}
        **kwargs
            Ignored.

        Returns
        -------
        dict
            Label -> probability.
        """
        if not hasattr(self.learner, "predict_proba"):
            raise NotImplementedError(f"{type(self.learner).__name__} with these settings gives no probabilities")
        task = self._task(x)
        p = self.learner.predict_proba_one(self._features(x), task=task)
        negative, positive = self._labels or (False, True)
        return {negative: 1.0 - p, positive: p}

    # ---- River's mini-batch interface: one call of the learner per data frame ------------------
    def _rows(self, X):
        names = self._names
        if names is None:  # every column but the task's, names hashed as learn_one hashes them
            drop = [self.task_key] if self.task_key in X.columns and self.task_fn is None else []
            width = self.learner._dict_width()
            return hash_features(X.drop(columns=drop).to_dict(orient="records"), n_features=width)
        frame = X.reindex(columns=names, fill_value=0.0)  # a missing column counts as 0
        if any(dtype.kind not in "biuf" for dtype in frame.dtypes):
            raise TypeError("features must be numbers (a listed column holds other values)")
        return frame.to_numpy(dtype=np.float64)

    def _tasks_many(self, X):
        if self.task_fn is not None:
            return [self.task_fn(x) for x in X.to_dict(orient="records")]
        if self.task_key is None:
            return None
        if self.task_key not in X.columns:
            raise ValueError(f"X has no task column {self.task_key!r}: pass task_key=, task_fn= or task_key=None")
        return X[self.task_key].to_numpy()

    def _label_pair_many(self, y: np.ndarray):
        """``_label_pair`` for a batch (its bools, 0s or -1s tell the form)."""
        if self._custom_labels or y.size == 0:
            return self._labels
        if y.dtype == np.bool_:
            pair = (False, True)
        elif y.dtype.kind in "iuf" and (y == 0).any() != (y == -1).any():
            pair = (0, 1) if (y == 0).any() else (-1, 1)
        else:
            return self._labels  # all 1s, or labels the learner reports
        if self._labels is not None and pair != self._labels:
            raise ValueError(f"labels {np.unique(y).tolist()} mix label forms: this stream's labels are {self._labels}")
        return pair

    def _check_text_many(self, X) -> None:
        """``_check_text`` on the str columns of a frame's first rows."""
        head = X.iloc[: _TEXT_CHECKS - self._text_checks]
        self._text_checks += len(head)
        for name in head.columns:
            if name == self.task_key or head[name].dtype.kind not in "OSU":
                continue
            for value in head[name]:
                if isinstance(value, str) and any(c.isspace() for c in value.strip()):
                    self._text_checks = _TEXT_CHECKS
                    _text_warning(name, value)
                    return

    @fill_doc
    def learn_many(self, X, y):
        """Learns a mini-batch in row order (River's mini-batch interface; one learner call).

        Parameters
        ----------
        {X_frame}
        y : pandas.Series or array-like
            The labels.

        Returns
        -------
        None
        """
        y = np.asarray(y)
        labels = self._label_pair_many(y)
        if self._text_checks < _TEXT_CHECKS:
            self._check_text_many(X)
        classes = None if self.learner._is_fitted() else self.classes
        self.learner.partial_fit(self._rows(X), y, tasks=self._tasks_many(X), classes=classes)
        self._labels = labels

    @fill_doc
    def predict_many(self, X):
        """The predicted labels of a mini-batch (no update).

        Parameters
        ----------
        {X_frame}

        Returns
        -------
        pandas.Series
        """
        import pandas as pd

        if not self.learner._is_fitted():
            return pd.Series([True] * len(X), index=X.index)
        scores = self.learner.decision_function(self._rows(X), tasks=self._tasks_many(X))
        negative, positive = self._labels or (-1, 1)
        return pd.Series(np.where(scores >= 0.0, positive, negative), index=X.index)

    @fill_doc
    def predict_proba_many(self, X):
        """Class probabilities of a mini-batch, where the learner has them (else ``NotImplementedError``).

        Parameters
        ----------
        {X_frame}

        Returns
        -------
        pandas.DataFrame
            One column per label.
        """
        import pandas as pd

        if not hasattr(self.learner, "predict_proba"):
            raise NotImplementedError(f"{type(self.learner).__name__} with these settings gives no probabilities")
        p = self.learner.predict_proba(self._rows(X), tasks=self._tasks_many(X))
        negative, positive = self._labels or (False, True)
        return pd.DataFrame({negative: p[:, 0], positive: p[:, 1]}, index=X.index)

    @property
    def _multiclass(self) -> bool:
        return False

    @classmethod
    def _unit_test_params(cls):
        yield {"n_tasks": 1, "task_key": None, **({"budget": 50} if "budget" in cls._learner_class._param_names() else {})}


def _adapter(learner_class):
    # ``predict_proba_one`` answers where the learner has ``predict_proba``.
    extra = ", ``predict_proba_one`` (with the settings that give ``predict_proba``)" if hasattr(learner_class, "predict_proba") else ""
    doc = (
        f"River adapter of ``omtl.{learner_class.__name__}``: ``learn_one``/``predict_one``{extra}.\n\n"
        "    Takes the learner's keyword hyper-parameters, plus ``task_key``, ``task_fn`` and\n"
        "    ``features`` (see ``omtl.river``). The learner is ``self.learner``.\n"
    )
    return type(learner_class.__name__, (RiverClassifier,), {"_learner_class": learner_class, "__doc__": doc,
                                                             "__module__": __name__})


#: One adapter per learner class (``omtl._registry.LEARNERS``), of the same name.
__all__ = list(LEARNERS)
globals().update({name: _adapter(getattr(_learners, name)) for name in __all__})

if TYPE_CHECKING:  # the adapters, for type checkers: made above from the learner list

    def __getattr__(name: str) -> type[RiverClassifier]: ...
