"""omtl.dask against a real Dask LocalCluster (2 worker processes, one shared by the module):
routing and input order, exact equality with per-shard in-process models (every learner) and
with the whole-stream model (learners that split by graph component), refusal of shared-state
learners, failing calls, checkpoint/restore after a lost worker, out-of-core scoring of dask
arrays and data frames, and ``omtl reproduce`` on Dask."""

from __future__ import annotations

import csv
import json
import os
import pickle
import time

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("distributed", reason='Dask distributed is not installed (pip install "omtl[dask]")')

import dask.array as da  # noqa: E402
import pandas as pd  # noqa: E402

try:  # needs pyarrow: only the data-frame tests are skipped without it
    import dask.dataframe as dd
except ImportError as exc:  # pragma: no cover - depends on the environment
    dd, _DD_MISSING = None, str(exc)
needs_dask_dataframe = pytest.mark.skipif(dd is None, reason="dask.dataframe cannot be imported here")
from distributed import Client, LocalCluster  # noqa: E402
from learner_table import LEARNERS  # noqa: E402

import omtl  # noqa: E402
import omtl.reference as ref  # noqa: E402
from omtl.dask import ShardedLearner, ShardError, ShardLostError, plan_shards  # noqa: E402
from omtl.dask._checkpoint import manifest_digest  # noqa: E402
from omtl.dask._plan import COMPONENT_LOCAL, ShardPlan, model_factory, subgraph  # noqa: E402

K = 12


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as c:
        # the worker processes must import this omtl (PYTHONPATH is inherited)
        assert set(c.run(lambda: omtl.__file__).values()) == {omtl.__file__}
        yield c


def grouped_stream(n=240, d=5, k=K, *, seed=0, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    tasks = rng.integers(0, k, size=n)
    W = rng.standard_normal((k, d))
    y = np.where(np.einsum("ij,ij->i", X, W[tasks]) >= 0, 1, -1)
    return (sp.csr_matrix(np.where(np.abs(X) < 0.4, 0.0, X)) if sparse else X), y, tasks


def pair_graph(k=K):
    """Components {0,1}, {2,3}, ...; weighted edges so T is not trivial."""
    return omtl.TaskGraph.from_edges(k, [(i, i + 1) for i in range(0, k, 2)], [1.0 + 0.1 * i for i in range(k // 2)])


def one_per_class():
    seen, out = set(), []
    for name, cls, _, kw in LEARNERS:
        if cls not in seen:
            seen.add(cls)
            out.append((name, cls, kw))
    return out


def in_process_shards(sharded, make_model, graph):
    """The per-shard models a ShardedLearner holds, built and routed here in-process."""
    plan = ShardPlan.from_shard_of(sharded.shard_of_task_, int(sharded.shard_of_task_.max()) + 1)
    factory = model_factory(make_model)
    models = [factory(int(ids.size), subgraph(graph, ids)) for ids in plan.tasks]

    def run(method, X, y, tasks):
        out = np.empty(X.shape[0])
        for s, m in enumerate(models):
            rows = np.flatnonzero(plan.shard_of[tasks] == s)
            if rows.size:
                local = plan.local_of[tasks[rows]]
                if method == "learn":
                    out[rows] = m.learn(X[rows], np.where(y[rows] > 0, 1, -1), tasks=local)
                else:
                    out[rows] = m.decision_function(X[rows], tasks=local)
        return out

    return run


# ---- the plan --------------------------------------------------------------------------------


def test_plan_keeps_components_whole_and_balances():
    g = omtl.TaskGraph.from_edges(10, [(0, 1), (1, 2), (3, 4), (7, 9)])
    plan = plan_shards(g, 3)
    comp = g.components
    for c in np.unique(comp):
        assert np.unique(plan.shard_of[comp == c]).size == 1
    assert sorted(ids.size for ids in plan.tasks) == [3, 3, 4]
    assert np.array_equal(plan_shards(g, 3).shard_of, plan.shard_of)  # deterministic
    for s, ids in enumerate(plan.tasks):
        assert np.array_equal(plan.local_of[ids], np.arange(ids.size)) and np.all(plan.shard_of[ids] == s)
    # by rows: task 5 carries most of the load, so it gets a shard to itself
    heavy = plan_shards(g, 3, weights=[1, 1, 1, 1, 1, 50, 1, 1, 1, 1])
    assert heavy.tasks[heavy.shard_of[5]].tolist() == [5]
    # more shards than components: the empty ones are dropped
    assert plan_shards(omtl.TaskGraph.complete(4), 3).n_shards == 1


@pytest.mark.parametrize("graph", [
    omtl.TaskGraph.from_edges(7, [(0, 3), (3, 5), (1, 2)], [0.5, 2.0, 1.5]),
    omtl.TaskGraph.from_interaction(np.diag([2.0, 3.0, 4.0, 5.0]) + np.kron(np.eye(2), [[0, 0.5], [0.5, 0]])),
])
def test_subgraph_task_kernel_is_the_block_of_the_global_one(graph):
    T = graph.task_kernel
    for ids in plan_shards(graph, 2).tasks:
        np.testing.assert_array_equal(subgraph(graph, ids).task_kernel, T[np.ix_(ids, ids)])


# ---- equality ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name,cls,kw", one_per_class(), ids=[e[0] for e in one_per_class()])
def test_every_learner_equals_its_shards_run_in_process(client, name, cls, kw):
    graph = pair_graph()
    X, y, tasks = grouped_stream()
    proto = cls(n_tasks=K, **kw)
    with ShardedLearner(proto, graph, n_shards=2, client=client, independent_shards=True) as sharded:
        here = in_process_shards(sharded, proto, graph)
        half = X.shape[0] // 2
        for lo, hi in ((0, half), (half, X.shape[0])):  # two batches: state carries over
            got = sharded.learn(X[lo:hi], y[lo:hi], tasks=tasks[lo:hi])
            assert np.array_equal(got, here("learn", X[lo:hi], y[lo:hi], tasks[lo:hi]))
        assert np.array_equal(sharded.decision_function(X, tasks=tasks), here("decision", X, None, tasks))
        assert sharded.n_seen_ == X.shape[0]


WHOLE_STREAM = [
    (omtl.KernelPerceptron, {"kernel": "rbf", "gamma": 0.5}),
    (omtl.MTPerceptron, {}),
    (omtl.MTPerceptron, {"kernel": "rbf", "gamma": 0.7}),
    (omtl.MTPerceptron, {"kernel": "poly", "degree": 2, "normalize": True}),
    (omtl.PAUnique, {"variant": "pa2", "C": 0.5}),
    (omtl.MTRBP, {"budget": 10_000, "kernel": "rbf", "seed": 3}),
    (omtl.MTFORG, {"budget": 10_000, "kernel": "rbf"}),
    (omtl.MTBPRJ, {"budget": 10_000, "kernel": "rbf", "eta": 0.3}),
    (omtl.MTLinear, {}),
    (omtl.MTLinear, {"loss": "hinge", "update": "adagrad"}),
    (omtl.OMTL, {"global_norm": "l1", "C": 0.3}),
    (ref.MTPerceptron, {"kernel": "rbf", "gamma": 0.7}),
]

#: The Projectron solves its projection over the whole active set: sharded, the other components'
#: exact zeros drop out of its sums, whose rounding then differs in the last bits (docs/scale-out.md).
#: The reference MTPerceptron sums over its whole active set, other components' exact zeros included.
LAST_BITS = {omtl.MTBPRJ, ref.MTPerceptron}


@pytest.mark.parametrize("cls,kw", WHOLE_STREAM, ids=[f"{c.__module__.split('.')[1]}.{c.__name__}" for c, _ in WHOLE_STREAM])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_component_local_learners_equal_the_whole_stream_model(client, cls, kw, sparse):
    """Sharded by component, these learners are the one model on the whole stream, exactly."""
    assert cls.__name__ in COMPONENT_LOCAL
    graph = pair_graph()
    X, y, tasks = grouped_stream(seed=1, sparse=sparse)
    whole = cls(n_tasks=K, **({"graph": graph} if "graph" in cls._param_names() else {}), **kw)
    with ShardedLearner(cls(n_tasks=K, **kw), graph, n_shards=2, client=client) as sharded:
        assert np.array_equal(sharded.learn(X, y, tasks=tasks), whole.learn(X, y, tasks=tasks))
        got, want = sharded.decision_function(X, tasks=tasks), whole.decision_function(X, tasks=tasks)
        if cls in LAST_BITS:
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        else:
            assert np.array_equal(got, want)
        assert sharded.n_active_ == whole.n_active_ and sharded.n_mistakes_ == whole.n_mistakes_
        assert np.array_equal(sharded.n_seen_per_task_, whole.n_seen_per_task_)


def test_budget_is_per_shard(client):
    X, y, tasks = grouped_stream(n=400, seed=2)
    with ShardedLearner(omtl.MTRBP(n_tasks=K, budget=5, kernel="rbf"), pair_graph(), n_shards=2,
                        client=client) as sharded:
        sharded.partial_fit(X, y, tasks=tasks)
        stats = sharded.shard_stats()
        assert len(stats) == 2 and all(st["n_active"] == 5 for st in stats) and sharded.n_active_ == 10
        assert {st["worker"] for st in stats} == set(client.scheduler_info()["workers"])  # one shard per worker


# ---- the API -------------------------------------------------------------------------------------


def test_shared_state_learners_are_refused_unless_independent(client):
    graph = pair_graph()
    X, y, tasks = grouped_stream(n=20)
    shared = (omtl.ROMCO(n_tasks=K), omtl.PAGlobal(n_tasks=K), omtl.MTBPRJ2(n_tasks=K, budget=5), omtl.MTLinear(n_tasks=K, hash_bits=4))
    for proto in shared:  # hashed MTLinear: every block in one table
        with ShardedLearner(proto, graph, n_shards=2, client=client) as sharded:
            with pytest.raises(ValueError, match="independent_shards=True"):
                sharded.partial_fit(X, y, tasks=tasks)
    # one shard (a connected graph) changes nothing, so it is allowed
    with ShardedLearner(omtl.ROMCO(n_tasks=4), omtl.TaskGraph.complete(4), n_shards=2, client=client) as one:
        Xc, yc, tc = grouped_stream(n=30, k=4)
        assert np.array_equal(one.learn(Xc, yc, tasks=tc), omtl.ROMCO(n_tasks=4).learn(Xc, yc, tasks=tc))


def test_labels_order_and_a_failing_call(client):
    X, y, tasks = grouped_stream(n=120, seed=3)
    whole = omtl.MTPerceptron(n_tasks=K, graph=pair_graph(), kernel="rbf")
    with ShardedLearner(lambda k, g: omtl.MTPerceptron(n_tasks=k, graph=g, kernel="rbf"), pair_graph(),
                        client=client) as sharded:
        y01 = (y > 0).astype(int)
        got = sharded.learn(X[:60], y01[:60], tasks=tasks[:60])
        expected = whole.learn(X[:60], y01[:60], tasks=tasks[:60])
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
        assert np.array_equal(sharded.predict(X, tasks=tasks), whole.predict(X, tasks=tasks))
        before = sharded.decision_function(X, tasks=tasks)
        bad_tasks = tasks[60:].copy()
        bad_tasks[-1] = K  # unknown task: refused before any shard is touched
        with pytest.raises(ValueError):
            sharded.partial_fit(X[60:], y[60:], tasks=bad_tasks)
        Xnan = X[60:].copy()
        Xnan[5, 0] = np.nan
        with pytest.raises(ValueError):
            sharded.partial_fit(Xnan, y[60:], tasks=tasks[60:])
        assert sharded.n_seen_ == 60 and np.array_equal(sharded.decision_function(X, tasks=tasks), before)
        with pytest.raises(TypeError, match="checkpoint"):
            pickle.dumps(sharded)


def test_checkpoint_restore_and_a_lost_worker(client, tmp_path):
    """Killing the worker of a shard raises ShardLostError; nothing runs until restore(), which
    brings back the state of the last checkpoint on the workers alive."""
    graph = pair_graph()
    X, y, tasks = grouped_stream(n=300, seed=4)
    whole = omtl.MTBPRJ(n_tasks=K, graph=graph, budget=8, kernel="rbf")
    sharded = ShardedLearner(omtl.MTBPRJ(n_tasks=K, budget=8, kernel="rbf"), graph, n_shards=2, client=client)
    try:
        here = in_process_shards(sharded, omtl.MTBPRJ(n_tasks=K, budget=8, kernel="rbf"), graph)
        assert np.array_equal(sharded.learn(X[:200], y[:200], tasks=tasks[:200]), here("learn", X[:200], y[:200], tasks[:200]))
        sharded.checkpoint(tmp_path / "ck")
        assert sorted(p.suffix for p in (tmp_path / "ck").iterdir()) == [".json", ".omtl", ".omtl"]
        sharded.learn(X[200:250], y[200:250], tasks=tasks[200:250])  # after the checkpoint: lost below
        victim = sharded.shard_stats()[0]["worker"]
        try:
            client.run(os._exit, 1, workers=[victim])
        except Exception:  # the worker dies before it can answer
            pass
        deadline = time.time() + 30
        while victim in client.scheduler_info()["workers"] and time.time() < deadline:
            time.sleep(0.1)
        with pytest.raises(ShardLostError, match="restore"):
            sharded.learn(X[250:], y[250:], tasks=tasks[250:])
        with pytest.raises(ShardError, match="restore"):
            sharded.decision_function(X, tasks=tasks)
        sharded.restore()
        assert sharded.n_seen_ == 200
        assert np.array_equal(sharded.decision_function(X, tasks=tasks), here("decision", X, None, tasks))
        # and it learns on exactly as the in-process shards do
        assert np.array_equal(sharded.learn(X[200:], y[200:], tasks=tasks[200:]), here("learn", X[200:], y[200:], tasks[200:]))
    finally:
        sharded.close()
        client.wait_for_workers(2, timeout=180)  # the nanny restarts the killed worker
    del whole


def test_restore_needs_a_checkpoint(client, tmp_path):
    with ShardedLearner(omtl.PAUnique(n_tasks=K), pair_graph(), client=client) as sharded:
        with pytest.raises(ValueError, match="no checkpoint"):
            sharded.restore()
        with pytest.raises(ValueError, match="holds no checkpoint"):
            sharded.restore(tmp_path)


def test_reference_learners_checkpoint_with_pickle(client, tmp_path):
    X, y, tasks = grouped_stream(n=80, seed=5)
    with ShardedLearner(ref.PAUnique(n_tasks=K), pair_graph(), client=client) as sharded:
        sharded.partial_fit(X, y, tasks=tasks)
        before = sharded.decision_function(X, tasks=tasks)
        sharded.checkpoint(tmp_path)
        sharded.partial_fit(X, y, tasks=tasks)
        sharded.restore(tmp_path)
        assert {p.suffix for p in tmp_path.iterdir()} == {".json", ".pkl"}
        assert np.array_equal(sharded.decision_function(X, tasks=tasks), before)


@pytest.mark.parametrize("prototype", [omtl.PAUnique(n_tasks=K), ref.PAUnique(n_tasks=K)], ids=["model-file", "pickle"])
def test_restore_refuses_swapped_duplicated_older_shards_and_an_edited_plan(client, tmp_path, prototype):
    """A checkpoint verifies itself: every shard file names its shard, the plan and the checkpoint,
    and the manifest holds each file's checksum. Anything else is refused and the live model kept."""
    import shutil

    X, y, tasks = grouped_stream(n=160, seed=14)
    with ShardedLearner(prototype, pair_graph(), n_shards=2, client=client) as sharded:
        sharded.partial_fit(X[:60], y[:60], tasks=tasks[:60])
        folder = sharded.checkpoint(tmp_path / "ck")
        older = tmp_path / "older"
        shutil.copytree(folder, older)
        sharded.partial_fit(X[60:120], y[60:120], tasks=tasks[60:120])
        sharded.checkpoint(folder)  # the same folder, a later checkpoint
        sharded.partial_fit(X[120:], y[120:], tasks=tasks[120:])
        live = sharded.decision_function(X, tasks=tasks)
        manifest = json.loads((folder / "checkpoint.json").read_text())
        names = [e["file"] for e in manifest["shards"]]
        old_names = [e["file"] for e in json.loads((older / "checkpoint.json").read_text())["shards"]]

        def tampered(edit, *args):
            case = tmp_path / f"case-{edit.__name__}-{len(list(tmp_path.iterdir()))}"
            shutil.copytree(folder, case)
            edit(case, *args)
            return case

        def swap(case):
            a, b = (case / names[0]).read_bytes(), (case / names[1]).read_bytes()
            (case / names[0]).write_bytes(b)
            (case / names[1]).write_bytes(a)

        def duplicate(case):
            (case / names[1]).write_bytes((case / names[0]).read_bytes())

        def from_older(case, s):
            (case / names[s]).write_bytes((older / old_names[s]).read_bytes())

        def swap_in_manifest(case, fix_digest):
            m = json.loads((case / "checkpoint.json").read_text())
            m["shards"] = m["shards"][::-1]  # the files' names and their checksums, swapped together
            m["plan"]["shard_of"] = [1 - s for s in m["plan"]["shard_of"]]
            if fix_digest:
                m["digest"] = manifest_digest(m)
            (case / "checkpoint.json").write_text(json.dumps(m))

        def edit_plan(case, fix_digest, whole_components):
            m = json.loads((case / "checkpoint.json").read_text())
            shard_of = m["plan"]["shard_of"]
            a = next(t for t in range(0, K, 2) if shard_of[t] == 0)
            b = next(t for t in range(0, K, 2) if shard_of[t] == 1)
            moved = [(a, b), (a + 1, b + 1)] if whole_components else [(a, b)]
            for u, v in moved:  # tasks (or components {u, u+1}) change shards; each shard keeps its size
                shard_of[u], shard_of[v] = 1, 0
            if fix_digest:
                m["digest"] = manifest_digest(m)
            (case / "checkpoint.json").write_text(json.dumps(m))

        cases = [tampered(swap), tampered(duplicate), tampered(from_older, 0), tampered(from_older, 1),
                 tampered(swap_in_manifest, False), tampered(swap_in_manifest, True),
                 tampered(edit_plan, False, True), tampered(edit_plan, True, True), tampered(edit_plan, True, False)]
        for case in cases:
            for restorer in (sharded, ShardedLearner(prototype, pair_graph(), n_shards=2, client=client)):
                with pytest.raises(ValueError, match="checkpoint") as info:
                    restorer.restore(case)
                assert case.name in str(info.value) or "shard" in str(info.value), str(info.value)
            assert sharded.n_seen_ == 160 and np.array_equal(sharded.decision_function(X, tasks=tasks), live)
        other_graph = omtl.TaskGraph.from_edges(K, [(i, i + 1) for i in range(0, K, 2)])  # other weights
        with pytest.raises(ValueError, match="another task graph"):
            ShardedLearner(prototype, other_graph, n_shards=2, client=client).restore(folder)
        # the untouched checkpoints restore to what they hold
        sharded.restore(older)
        assert sharded.n_seen_ == 60
        sharded.restore(folder)
        assert sharded.n_seen_ == 120


# ---- out-of-core scoring -------------------------------------------------------------------------


class CountingPickles(omtl.MTPerceptron):
    """Counts how often the model is serialised to be sent out."""

    pickles = 0

    def __reduce_ex__(self, protocol):
        type(self).pickles += 1
        return super().__reduce_ex__(protocol)


def fitted_model(sparse=False):
    X, y, tasks = grouped_stream(n=300, seed=6, sparse=sparse)
    return omtl.MTPerceptron(n_tasks=K, graph=pair_graph(), kernel="rbf").partial_fit(X, y, tasks=tasks), X, tasks


def test_dask_array_scoring_is_lazy_and_exact(client):
    model, X, tasks = fitted_model()
    Xd, td = da.from_array(X, chunks=(70, 3)), da.from_array(tasks, chunks=100)
    scores = omtl.dask.decision_function(model, Xd, tasks=td)
    assert isinstance(scores, da.Array) and scores.chunks == (Xd.chunks[0],)
    assert np.array_equal(scores.compute(), model.decision_function(X, tasks=tasks))
    labels = omtl.dask.predict(model, Xd, tasks=4)
    assert isinstance(labels, da.Array)
    assert np.array_equal(labels.compute(), model.predict(X, tasks=np.full(X.shape[0], 4)))


def test_dask_array_with_sparse_blocks(client):
    model, X, tasks = fitted_model(sparse=True)
    Xd = da.from_array(X.toarray(), chunks=(64, 5)).map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 5)))
    scores = omtl.dask.decision_function(model, Xd, tasks=da.from_array(tasks, chunks=64))
    np.testing.assert_array_equal(scores.compute(), model.decision_function(X, tasks=tasks))


@needs_dask_dataframe
def test_dask_dataframe_scoring(client):
    model, X, tasks = fitted_model()
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).assign(task=tasks)
    ddf = dd.from_pandas(frame, npartitions=4)
    labels = omtl.dask.predict(model, ddf, tasks="task")
    assert isinstance(labels, dd.Series)
    got = labels.compute()
    assert got.index.equals(frame.index) and np.array_equal(got.to_numpy(), model.predict(X, tasks=tasks))
    scores = omtl.dask.decision_function(model, ddf, tasks=2, columns=[f"x{i}" for i in range(X.shape[1])])
    np.testing.assert_array_equal(scores.compute().to_numpy(), model.decision_function(X, tasks=np.full(len(X), 2)))


def test_the_model_is_sent_once_not_per_block(client):
    X, y, tasks = grouped_stream(n=400, seed=7)
    model = CountingPickles(n_tasks=K, kernel="rbf").partial_fit(X, y, tasks=tasks)
    sent = {}
    for rows in (200, 10):  # 2 blocks, 40 blocks
        CountingPickles.pickles = 0
        scores = omtl.dask.decision_function(model, da.from_array(X, chunks=(rows, 5)),
                                             tasks=da.from_array(tasks, chunks=rows)).compute()
        sent[rows] = CountingPickles.pickles
        assert np.array_equal(scores, model.decision_function(X, tasks=tasks))
    assert sent[10] == sent[200] < 10


def test_scoring_rejects_in_memory_input():
    model, X, tasks = fitted_model()
    with pytest.raises(TypeError, match="dask"):
        omtl.dask.decision_function(model, X, tasks=tasks)


# ---- experiment grids on Dask ----------------------------------------------------------------------


def test_run_jobs_on_dask_keeps_job_order(client):
    from omtl.experiments.runner import run_jobs, run_on_dask

    jobs = [-3, 1, -2, 0, 7, -9, 4, -4, 5, 6, -1, 8, 2, -6, 3, 9, -7, 10, -5]  # more jobs than tasks (TASKS_PER_WORKER per worker)
    with run_on_dask(client):
        results = run_jobs(abs, jobs, progress=False)
    assert [r.job for r in results] == jobs and [r.record for r in results] == [abs(j) for j in jobs]
    with run_on_dask(client):
        failed = run_jobs(abs, ["x"], progress=False)
    assert failed[0].record is None and failed[0].error.startswith("TypeError")


def test_grid_tasks_a_driver_waits_for_go_first(client):
    """On a cluster, jobs a driver thread waits for (run_jobs, run_task) and loads are submitted
    with a higher Dask priority than jobs submitted ahead (submit_jobs); results stay in job order."""
    from omtl.experiments import runner

    seen = []

    class Recording:
        def __init__(self, inner):
            self.inner = inner

        def submit(self, fn, *args, **kwargs):
            seen.append((getattr(fn, "__name__", ""), kwargs.get("priority")))
            return self.inner.submit(fn, *args, **kwargs)

        def map(self, fn, *iterables, **kwargs):
            seen.extend([(getattr(fn, "__name__", ""), kwargs.get("priority"))] * len(iterables[0]))
            return self.inner.map(fn, *iterables, **kwargs)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    with runner.run_on_dask(Recording(client)):
        ahead = runner.submit_jobs(abs, [-1, -2, -3], progress=False)
        waited = runner.run_jobs(abs, [-4, 5], progress=False)
        assert runner.run_task(abs, -6) == 6
        assert [r.record for r in ahead.results()] == [1, 2, 3] and [r.record for r in waited] == [4, 5]
    assert seen == [("_call_many", runner.PRIORITY_AHEAD)] * 3 + [("_call_many", runner.PRIORITY_WAITED)] * 2 + \
        [("_call_with_streams", runner.PRIORITY_WAITED)]
    assert runner.PRIORITY_LOAD > runner.PRIORITY_WAITED > runner.PRIORITY_AHEAD


def _worker_settings(dask_worker):
    import dask

    return "profile" in dask_worker.periodic_callbacks, dask.config.get("distributed.worker.memory.monitor-interval")


def test_embedded_cluster_settings():
    """The LocalCluster of --jobs N starts with omtl's Dask settings (no profiler, slower monitors;
    with several workers, no task sent ahead to a busy worker) and leaves the global Dask
    configuration as it was."""
    import dask

    from omtl.dask.cluster import cluster_config, experiment_client

    assert "distributed.scheduler.worker-saturation" not in cluster_config(1)
    before = {key: dask.config.get(key, None) for key in cluster_config(2)}
    with experiment_client(jobs=2) as c:
        assert set(c.run(_worker_settings).values()) == {(False, "1s")}
        assert c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.WORKER_SATURATION) == 1.0
    assert {key: dask.config.get(key, None) for key in cluster_config(2)} == before


TIMING = {"seconds", "examples_per_second", "seconds_mean", "examples_per_second_mean"}


def _without_timing(path):
    with open(path) as fh:
        return [{k: v for k, v in row.items() if k not in TIMING and not k.startswith("seconds")} for row in csv.DictReader(fh)]


@pytest.mark.parametrize("table,dataset", [("table1", "school"), ("table2", "landmine")])
def test_reproduce_on_a_local_cluster_equals_one_process(client, tmp_path, data_dir, table, dataset):
    """--jobs 2 (a LocalCluster of its own) and, for table1, --scheduler (the module's cluster)
    write the same outputs as --jobs 1, timings aside."""
    from omtl.cli import main

    runs = {"jobs1": ["--jobs", "1"], "jobs2": ["--jobs", "2"]}
    if table == "table1":
        runs["scheduler"] = ["--scheduler", client.cluster.scheduler_address]
    for name, option in runs.items():
        assert main(["reproduce", table, "--quick", "--seeds", "1", "--datasets", dataset, *option,
                     "--out", str(tmp_path / name), "--data-dir", str(data_dir), "--no-progress"]) == 0
    csvs = sorted(p.name for p in (tmp_path / "jobs1").glob("*.csv"))
    assert len(csvs) >= 2
    for name in runs:
        assert sorted(p.name for p in (tmp_path / name).glob("*.csv")) == csvs
        for csv_name in csvs:
            assert _without_timing(tmp_path / name / csv_name) == _without_timing(tmp_path / "jobs1" / csv_name), csv_name


def test_both_tables_in_one_command_equal_two_commands(client, tmp_path, data_dir):
    """``omtl reproduce table1 table2`` on a cluster (both tables at once, sharing it) writes what
    the two commands write one after the other in one process, timings aside."""
    from omtl.cli import main

    common = ["--quick", "--seeds", "1", "--data-dir", str(data_dir), "--no-progress"]
    assert main(["reproduce", "table1", "table2", *common, "--datasets", "school,landmine",
                 "--scheduler", client.cluster.scheduler_address, "--out", str(tmp_path / "together")]) == 0
    for table, dataset in (("table1", "school"), ("table2", "landmine")):
        assert main(["reproduce", table, *common, "--datasets", dataset, "--jobs", "1",
                     "--out", str(tmp_path / "apart")]) == 0
    csvs = sorted(p.name for p in (tmp_path / "apart").glob("*.csv"))
    assert len(csvs) == 5 and sorted(p.name for p in (tmp_path / "together").glob("*.csv")) == csvs
    for csv_name in csvs:
        assert _without_timing(tmp_path / "together" / csv_name) == _without_timing(tmp_path / "apart" / csv_name)
    assert sorted(p.name for p in (tmp_path / "together").glob("*.png")) == \
        sorted(p.name for p in (tmp_path / "apart").glob("*.png"))


def test_experiments_share_one_load_queue(client, data_dir):
    """Loads queued by several experiments (several calls, any threads) form one queue per client:
    every data set loaded once, in queue order, never more loads at a time than workers."""
    from concurrent.futures import ThreadPoolExecutor

    from distributed import get_task_stream

    from omtl.experiments import runner

    first, second = ["sentiment", "school"], ["landmine", "newsgroups_cs", "school"]
    with get_task_stream(client=client) as stream, runner.run_on_dask(client):
        runner.load_streams_ahead(first, data_dir, 60)
        runner.load_streams_ahead(second, data_dir, 60)
        with ThreadPoolExecutor(2) as pool:  # the experiments' threads ask for their streams
            sizes = list(pool.map(lambda k: runner.stream_summary(k, data_dir, 60)["n"], second + first))
        assert len(runner.STATE.load_queues) == 1
        data_set_of = {future.key: ck[0] for ck, (_, future, _) in runner.STATE.stream_futures.items()}
    assert sizes == [60] * 5 and not runner.STATE.loads_ahead and not runner.STATE.load_queues
    loads = sorted((ss["start"], ss["stop"], t["key"]) for t in stream.data for ss in t["startstops"]
                   if str(t["key"]).startswith("load_stream") and ss["action"] == "compute")
    assert len(loads) == 4
    when = {data_set_of[key]: (start, stop) for start, stop, key in loads}
    queued = [when[k] for k in ("sentiment", "school", "landmine", "newsgroups_cs")]
    for i in (2, 3):  # the i-th load waited for a free slot: i - 1 of the loads queued before it had ended
        assert sum(stop <= queued[i][0] for _, stop in queued[:i]) >= i - 1
    assert all(sum(b[0] <= a[0] < b[1] for b in loads) <= 2 for a in loads)  # running when each one starts


def test_streams_loaded_ahead_are_loaded_once(client, data_dir):
    """The data sets' threads wait for the loads load_streams_ahead submits (one per worker at a
    time) instead of submitting their own: one load per data set, whoever asks first."""
    from distributed import get_task_stream

    from omtl.experiments import runner

    keys = ["landmine", "school", "newsgroups_cs"]
    with get_task_stream(client=client) as stream, runner.run_on_dask(client):
        runner.load_streams_ahead(keys, data_dir, 50)
        sizes = [runner.stream_summary(k, data_dir, 50)["n"] for k in reversed(keys)]
    assert sizes == [50, 50, 50] and not runner.STATE.loads_ahead
    assert sum(str(t["key"]).startswith("load_stream") for t in stream.data) == len(keys)


@pytest.mark.parametrize("cheap", [float("inf"), 0.0], ids=["search-as-one-task", "search-round-by-round"])
def test_tuning_search_on_dask_equals_one_process(client, tmp_path, data_dir, monkeypatch, cheap):
    """A tuning search whose passes are cheap runs its later rounds as one task on a worker; its
    trials (order included) and choice are those of the search in this process, either way."""
    from omtl.experiments import run_table2, table2
    from omtl.experiments.runner import run_on_dask

    common = {"quick": True, "seeds": 1, "data_dir": data_dir, "datasets": ["landmine"], "learners": ["ROMCO"],
              "progress": False}
    here = run_table2(out=tmp_path / "here", **common)
    monkeypatch.setattr(table2, "CHEAP_PASS_SECONDS", cheap)
    with run_on_dask(client):
        there = run_table2(out=tmp_path / "there", **common)
    assert there["trials"] == here["trials"] and len(here["trials"]) > len(table2.QUICK_GRID)
    assert there["settings"]["tuning"]["chosen"] == here["settings"]["tuning"]["chosen"]
    assert set(client.run(lambda: len(__import__("omtl.experiments.runner").experiments.runner.STATE.stream_cache)).values()) == {0}


def test_without_a_client_it_starts_and_stops_its_own_cluster(client, monkeypatch):
    import distributed

    def no_client():
        raise ValueError("No clients found")

    monkeypatch.setattr(distributed, "default_client", no_client)
    X, y, tasks = grouped_stream(n=60, seed=8)
    with ShardedLearner(omtl.PAUnique(n_tasks=K), pair_graph(), n_shards=2) as sharded:
        own = sharded._own_cluster
        assert own is not None and sharded.client is not client and len(sharded._workers()) == 2
        assert np.array_equal(sharded.learn(X, y, tasks=tasks), omtl.PAUnique(n_tasks=K).learn(X, y, tasks=tasks))
    assert sharded._own_cluster is None and own.status.name == "closed"


# ---- restore failures and restores racing a lost worker ---------------------------------------------
def test_a_failed_restore_keeps_the_live_model_and_raises(client, tmp_path):
    X, y, tasks = grouped_stream(n=160, seed=11)
    with ShardedLearner(omtl.PAUnique(n_tasks=K), pair_graph(), n_shards=2, client=client) as sharded:
        sharded.partial_fit(X[:60], y[:60], tasks=tasks[:60])
        folder = sharded.checkpoint(tmp_path / "ck")
        sharded.partial_fit(X[60:100], y[60:100], tasks=tasks[60:100])
        before = sharded.decision_function(X, tasks=tasks)
        shard_file = sorted(folder.glob("shard-*"))[0]
        data = bytearray(shard_file.read_bytes())
        data[len(data) // 2] ^= 0x10
        shard_file.write_bytes(bytes(data))
        with pytest.raises(ValueError, match="checksum"):
            sharded.restore()
        # the live shards were kept: same counts, same scores, and learning goes on
        assert sharded.n_seen_ == 100
        assert np.array_equal(sharded.decision_function(X, tasks=tasks), before)
        sharded.partial_fit(X[100:], y[100:], tasks=tasks[100:])
        assert sharded.n_seen_ == 160


class _RunsCode:
    """Pickles as a call that leaves a marker file: what a planted pickle could do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_checkpoint_manifest_cannot_switch_omtl_learners_to_pickle(client, tmp_path):
    X, y, tasks = grouped_stream(n=60, seed=12)
    with ShardedLearner(omtl.PAUnique(n_tasks=K), pair_graph(), n_shards=2, client=client) as sharded:
        sharded.partial_fit(X, y, tasks=tasks)
        folder = sharded.checkpoint(tmp_path / "ck")
        manifest = json.loads((folder / "checkpoint.json").read_text())
        marker = tmp_path / "code-ran"
        for entry in manifest["shards"]:
            (folder / entry["file"]).write_bytes(pickle.dumps(_RunsCode(str(marker))))
        manifest["format"] = "pickle"
        manifest["digest"] = manifest_digest(manifest)  # a planted folder's digest matches its manifest
        (folder / "checkpoint.json").write_text(json.dumps(manifest))
        for restorer in (sharded, ShardedLearner(omtl.PAUnique(n_tasks=K), pair_graph(), n_shards=2, client=client)):
            with pytest.raises(ValueError, match="format"):
                restorer.restore(folder)
        assert not marker.exists()
        assert sharded.n_seen_ == 60


def test_restore_right_after_a_worker_dies_does_not_wait_on_it(client, tmp_path):
    X, y, tasks = grouped_stream(n=120, seed=13)
    sharded = ShardedLearner(omtl.PAUnique(n_tasks=K), pair_graph(), n_shards=2, client=client)
    try:
        sharded.partial_fit(X[:80], y[:80], tasks=tasks[:80])
        sharded.checkpoint(tmp_path / "ck")
        victim = sharded.shard_stats()[0]["worker"]
        try:
            client.run(os._exit, 1, workers=[victim])
        except Exception:  # noqa: BLE001 - the worker dies before it can answer
            pass
        # No wait for the scheduler to notice: the actors must not be bound to the dead worker.
        sharded.restore(timeout=120)
        assert sharded.n_seen_ == 80
        here = omtl.PAUnique(n_tasks=K).partial_fit(X[:80], y[:80], tasks=tasks[:80])
        assert np.array_equal(sharded.decision_function(X, tasks=tasks), here.decision_function(X, tasks=tasks))
    finally:
        sharded.close()
        client.wait_for_workers(2, timeout=180)  # the nanny restarts the killed worker
