"""A user's life in a model: forgetting tasks (docs/lifecycle.md).

``ForgetMixin`` gives every learner ``forget(tasks)``: the tasks' stored examples, per-task
state, counts and labels leave the model (what each learner keeps is stated per learner in
docs/lifecycle.md). The core does the learner's part (``forget``, atomic); the task set drops
the counts and labels only once it succeeded.
"""

from __future__ import annotations

import numpy as np

from ._tasks import label_list


class ForgetMixin:
    """``forget(tasks)`` and ``n_forgotten_`` (mixed into ``OnlineClassifier``)."""

    def forget(self, tasks):
        """Forgets tasks: a user who leaves takes their data with them (docs/lifecycle.md).

        The model drops every stored example of the tasks (the active set of a kernel or budget
        learner, the stored rows of MTFL/TRML) with the caches derived from them, their own
        state (their weights, blocks, per-task counters) and their counts; in label mode their
        labels are gone from ``tasks_`` and a label that comes back later is a new task with no
        examples; their pending events (delayed labels) are dropped. State shared with other tasks (a shared block, a task relation, other tasks'
        coefficients) keeps their past influence; on the disconnected graph, for the learners
        whose tasks share nothing, the model then equals the one that never saw their examples.
        ``n_seen_`` and ``n_mistakes_`` keep counting every example learned; ``n_forgotten_``
        counts those of forgotten tasks. Atomic: an unknown task, or a learner or graph that
        cannot forget, raises and changes nothing.

        Parameters
        ----------
        tasks : label or sequence of labels
            The tasks (labels, or integer ids in ``[0, n_tasks)``), distinct.

        Returns
        -------
        self
        """
        with self._model_lock():
            if not self._is_fitted():
                raise ValueError("forget: the model has learned nothing yet")
            if isinstance(tasks, (str, bytes)) or not hasattr(tasks, "__iter__"):
                tasks = [tasks]
            ids = label_list(list(tasks), len(tasks))
            task_set = self._tasks
            engine, named = [], set()
            for label in ids:
                if task_set.label_mode:
                    index = task_set.index.get(label)
                else:
                    ok = isinstance(label, (int, np.integer)) and 0 <= label < task_set.n_engine_tasks
                    index = int(label) if ok else None
                if index is None:
                    raise ValueError(f"forget: unknown task {label!r}")
                if index in named:
                    raise ValueError(f"forget: task {label!r} is named twice")
                named.add(index)
                engine.append(index)
            self._core.forget(engine)
            task_set.forget(engine)
            self._forget_pending(ids)
            return self

    @property
    def n_forgotten_(self) -> int:
        """Examples of forgotten tasks (still counted in ``n_seen_``)."""
        with self._model_lock():
            return int(self._tasks.n_forgotten) if self._is_fitted() else 0
