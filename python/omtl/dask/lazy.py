"""Out-of-core scoring: a fitted learner applied block by block to a ``dask.array`` (dense or
scipy.sparse blocks) or partition by partition to a ``dask.dataframe``.

The model enters the task graph once, as one ``dask.delayed`` object every block depends on, so
a distributed scheduler ships it to each worker once, not once per block.
"""

from __future__ import annotations

import numpy as np


def decision_function(model, X, *, tasks, columns=None):
    """Scores of ``model`` (no update) for a dask collection, as the same lazy type.

    Parameters
    ----------
    model : fitted omtl learner (anything with ``decision_function(X, *, tasks)``)
    X : dask.array.Array (2-D; blocks dense or scipy.sparse) or dask.dataframe.DataFrame
    tasks : int, or a 1-D dask array / numpy array of task ids aligned with X's rows (an array is
        rechunked to X's row blocks); for a DataFrame also the name of its task column
    columns : list of str, optional
        DataFrame only: the feature columns (default: every column but the task column).

    Returns
    -------
    dask.array.Array of float64 (one score per row, chunked as X's rows) or dask Series.
    """
    return _apply(model, X, tasks, columns, "decision_function", np.dtype(np.float64))


def predict(model, X, *, tasks, columns=None):
    """Labels of ``model`` (in its label form) for a dask collection, as the same lazy type."""
    d = getattr(model, "n_features_in_", None) or 1
    dtype = np.asarray(model.predict(np.zeros((0, d)), tasks=np.zeros(0, dtype=np.int64))).dtype
    return _apply(model, X, tasks, columns, "predict", dtype)


def _apply(model, X, tasks, columns, method, dtype):
    import dask
    import dask.array as da

    shared = dask.delayed(model, pure=True)  # one key for the model, however many blocks
    if isinstance(X, da.Array):
        return _apply_array(shared, X, tasks, method, dtype)
    try:
        import dask.dataframe as dd
    except ImportError:  # dask.dataframe needs pyarrow; without it X cannot be a data frame
        dd = None
    if dd is not None and isinstance(X, dd.DataFrame):
        return _apply_frame(shared, X, tasks, columns, method, dtype)
    raise TypeError(f"X must be a dask.array.Array or a dask.dataframe.DataFrame, got {type(X).__name__} "
                    "(for in-memory data call the model's own method)")


def _score_block(X, tasks, model, method):
    if np.ndim(tasks) == 0:
        tasks = np.full(X.shape[0], int(tasks), dtype=np.int64)
    return np.asarray(getattr(model, method)(X, tasks=np.asarray(tasks)))


def _apply_array(shared, X, tasks, method, dtype):
    import dask.array as da

    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got {X.ndim}-D")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # a row block must hold whole rows
    if isinstance(tasks, (int, np.integer)) and not isinstance(tasks, bool):
        return da.blockwise(_score_block, "i", X, "ij", tasks, None, shared, None, method, None,
                            dtype=dtype, concatenate=True, meta=np.empty(0, dtype=dtype))
    tasks = da.asarray(tasks)
    if tasks.ndim != 1 or tasks.shape[0] != X.shape[0]:
        raise ValueError(f"tasks must hold one id per row of X ({X.shape[0]}), got shape {tasks.shape}")
    tasks = tasks.rechunk((X.chunks[0],))
    return da.blockwise(_score_block, "i", X, "ij", tasks, "i",
                        shared, None, method, None, dtype=dtype, concatenate=True, meta=np.empty(0, dtype=dtype))


def _apply_frame(shared, df, tasks, columns, method, dtype):
    import pandas as pd

    if isinstance(tasks, str):
        task_col = tasks
        features = list(columns) if columns is not None else [c for c in df.columns if c != task_col]
    elif isinstance(tasks, (int, np.integer)) and not isinstance(tasks, bool):
        task_col = None
        features = list(columns) if columns is not None else list(df.columns)
    else:
        raise TypeError("with a DataFrame, tasks must be the name of its task column or one int for all rows")
    name = "score" if method == "decision_function" else "label"

    def partition(part, model):
        X = part[features].to_numpy(dtype=np.float64)
        t = part[task_col].to_numpy() if task_col is not None else tasks
        return pd.Series(_score_block(X, t, model, method), index=part.index, name=name)

    return df.map_partitions(partition, shared, meta=pd.Series([], dtype=dtype, name=name))
