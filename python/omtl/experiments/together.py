"""Several experiments in one run (``omtl reproduce table1 table2``).

On a Dask cluster (inside ``run_on_dask``) they run at once and share it: every
experiment's data-set loads are queued first, in the experiments' order, on the one load queue of
the cluster, then each experiment is driven from its own thread of this process, so one
experiment's loads and passes fill the workers while another waits on a dependency (its tail, a
long parse). Each experiment writes exactly what it writes when run alone: they share no state but
the cluster and the loaded streams (which are keyed by data set). Elsewhere they run one after the
other.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from . import table1, table2
from .runner import load_streams_ahead, on_dask

#: The experiments, in the papers' order: name -> module (``run_<name>`` and ``data_streams``).
EXPERIMENTS = {"table1": table1, "table2": table2}


def run_experiments(plans: dict[str, dict]) -> dict[str, dict]:
    """Runs ``run_<name>(**kwargs)`` for every ``name: kwargs`` of ``plans`` and returns the results
    by name.

    On a Dask cluster the experiments run at once; one that fails does not stop the others (a
    thread cannot be stopped, and the cluster must stay up until they finish): its exception is
    raised once they have all finished. Elsewhere one after the other, in the order of ``plans``.
    """
    unknown = sorted(set(plans) - set(EXPERIMENTS))
    if unknown:
        raise ValueError(f"unknown experiment(s) {unknown}; choose from {list(EXPERIMENTS)}")
    runs = [(name, getattr(EXPERIMENTS[name], f"run_{name}"), kwargs) for name, kwargs in plans.items()]
    if not on_dask() or len(runs) <= 1:
        return {name: run(**kwargs) for name, run, kwargs in runs}
    streams = [(EXPERIMENTS[name].data_streams(kwargs.get("datasets"), kwargs.get("quick", False)),
                kwargs.get("data_dir")) for name, _, kwargs in runs]  # every experiment's checked first
    for (keys, subsample), data_dir in streams:  # queued in order, before any experiment starts
        load_streams_ahead(keys, data_dir, subsample)
    with ThreadPoolExecutor(max_workers=len(runs), thread_name_prefix="omtl-experiment") as pool:
        futures = [(name, pool.submit(run, **kwargs)) for name, run, kwargs in runs]
        # leaving the block waits for every experiment, so a failure surfaces after the others end
    return {name: future.result() for name, future in futures}
