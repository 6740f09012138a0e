"""Scale-out on Dask distributed (``pip install "omtl[dask]"``).

- ``ShardedLearner``: one online multitask model spread over Dask actors by connected
  component of the task graph, or, for a model whose tasks share state (MTLinear, PA-Global,
  CW-COL) and no graph, by task label with the shared state kept in step
  (``CoupledShardedLearner``; ``checkpoint()``/``restore()``; a lost shard raises
  ``ShardLostError``).
- ``decision_function`` / ``predict``: score a ``dask.array`` or ``dask.dataframe`` block
  by block with the model broadcast once, returning the same lazy type.
- ``experiment_client``: the Dask client ``omtl reproduce --scheduler/--jobs`` runs its grid on.

See docs/scale-out.md.
"""

from ._plan import COMPONENT_LOCAL, SHARED_STATE, plan_shards, splits_by_component
from .cluster import experiment_client
from .coupled import CoupledShardedLearner, SimulatedShards
from .lazy import decision_function, predict
from .sharded import ShardedLearner, ShardError, ShardLostError

__all__ = [
    "COMPONENT_LOCAL",
    "CoupledShardedLearner",
    "SHARED_STATE",
    "ShardError",
    "ShardLostError",
    "ShardedLearner",
    "SimulatedShards",
    "decision_function",
    "experiment_client",
    "plan_shards",
    "predict",
    "splits_by_component",
]
