"""Scale-out on Dask distributed (``pip install "omtl[dask]"``).

- ``ShardedLearner``: one online multitask model spread over Dask actors by connected
  component of the task graph (``checkpoint()``/``restore()``; a lost shard raises
  ``ShardLostError``).
- ``decision_function`` / ``predict``: score a ``dask.array`` or ``dask.dataframe`` block
  by block with the model broadcast once, returning the same lazy type.
- ``experiment_client``: the Dask client ``omtl reproduce --scheduler/--jobs`` runs its grid on.

See docs/scale-out.md.
"""

from ._plan import COMPONENT_LOCAL, SHARED_STATE, plan_shards, splits_by_component
from .cluster import experiment_client
from .lazy import decision_function, predict
from .sharded import ShardedLearner, ShardError, ShardLostError

__all__ = [
    "COMPONENT_LOCAL",
    "SHARED_STATE",
    "ShardError",
    "ShardLostError",
    "ShardedLearner",
    "decision_function",
    "experiment_client",
    "plan_shards",
    "predict",
    "splits_by_component",
]
