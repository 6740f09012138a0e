"""Tests of ``omtl.experiments`` and ``omtl reproduce`` (ALGORITHMS.md §7).

- the budget rule of §7.2 (halves round up, B >= 1) and its reproducibility per seed (INV-E2);
- the aggregation and the table / CSV / settings / figure writers on tiny runs;
- the P2 runner (rounds are never split, ``learn_rounds`` is used when the learner has it);
- ROMCO's reduced tuning search (§7.5) on a synthetic error surface;
- ``omtl reproduce table1 --quick`` and ``table2 --quick`` end to end on the real data: every
  learner that exists in this build must run; the ones that have not landed are reported as skipped.

Learners that have not landed yet are replaced by stand-ins (subclasses of MTPerceptron) in the
tests of the plumbing only, never in the end-to-end tests.
"""

from __future__ import annotations

import csv
import json
from fractions import Fraction

import numpy as np
import pytest

import omtl
from omtl.cli import main
from omtl.evaluate import round_chunks
from omtl.experiments import budget_from_percent, budgets_from_battery, runner, table1, table2

# ---------------------------------------------------------------------------------------------
# budgets (§7.2, INV-E2)
# ---------------------------------------------------------------------------------------------


def _reference_budget(n, percent):
    exact = Fraction(percent, 100) * n
    floor = exact.numerator // exact.denominator
    return max(1, floor + (1 if exact - floor >= Fraction(1, 2) else 0))


@pytest.mark.parametrize(
    "n, percent, expected",
    [
        (10, 5, 1),  # 0.5 -> 1 (half up, and B >= 1)
        (30, 5, 2),  # 1.5 -> 2
        (50, 5, 3),  # 2.5 -> 3 (Python's round() would give 2)
        (90, 5, 5),  # 4.5 -> 5 (round() would give 4)
        (4594, 25, 1149),  # 1148.5 -> 1149
        (4593, 25, 1148),  # 1148.25 -> 1148
        (4599, 10, 460),  # 459.9 -> 460
        (0, 25, 1),  # empty battery: still B >= 1
        (1, 5, 1),
        (9, 5, 1),  # 0.45 -> 0 -> clamped to 1
    ],
)
def test_budget_rule_rounds_half_up_and_is_at_least_one(n, percent, expected):
    assert budget_from_percent(n, percent) == expected


def test_budget_rule_matches_exact_rational_rounding():
    for n in range(0, 2001):
        for p in (25, 10, 5):
            assert budget_from_percent(n, p) == _reference_budget(n, p), (n, p)
    assert budgets_from_battery(586) == {25: 147, 10: 59, 5: 29}


@pytest.mark.parametrize("bad", [0, 101, 2.5, -5, True])
def test_budget_rule_rejects_bad_percent(bad):
    with pytest.raises(ValueError):
        budget_from_percent(100, bad)


def test_budgets_are_reproducible_per_seed():
    """INV-E2: the battery on the same shuffle gives the same N_bat, hence the same budgets."""
    stream = omtl.datasets.make_multitask_stream(n_samples=800, seed=3)
    sizes = {}
    for seed in (0, 1, 2):
        got = []
        for _ in range(2):
            model = omtl.KernelPerceptron(n_tasks=stream.n_tasks, kernel="rbf")
            report = omtl.evaluate(model, stream.shuffled(seed))
            got.append(budgets_from_battery(report.n_active))
        assert got[0] == got[1]
        assert all(b >= 1 for b in got[0].values())
        sizes[seed] = got[0]
    assert len({tuple(v.values()) for v in sizes.values()}) > 1, "different shuffles should give different N_bat"


# ---------------------------------------------------------------------------------------------
# stand-ins for learners that have not landed (plumbing tests only)
# ---------------------------------------------------------------------------------------------


class _FakeBudget(omtl.MTPerceptron):
    def __init__(self, *, n_tasks, budget, graph="complete", kernel="linear", gamma=None, degree=2, coef0=1.0,
                 normalize=False, seed=0, eta=0.01, radius=1.0):
        super().__init__(n_tasks=n_tasks, graph=graph, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                         normalize=normalize)
        self.budget, self.seed, self.eta, self.radius = budget, seed, eta, radius


class _FakeP2(omtl.MTPerceptron):
    """A linear learner with ROMCO-like parameters and a learn_rounds that checks its chunks."""

    calls = 0

    def __init__(self, *, n_tasks, eta1=0.1, eta2=0.1, lambda1=1e-4, lambda2=1e-4, update="loss", C=1.0,
                 variant="pa1"):
        super().__init__(n_tasks=n_tasks, graph="disconnected")
        self.eta1, self.eta2, self.lambda1, self.lambda2 = eta1, eta2, lambda1, lambda2
        self.update, self.C, self.variant = update, C, variant

    def learn_rounds(self, X, y, *, tasks, rounds):
        type(self).calls += 1
        last = getattr(self, "_last_round", -1)
        assert rounds[0] > last, "a round was split across two calls"
        self._last_round = int(rounds[-1])
        return self.learn(X, y, tasks=tasks)


class _NoRounds:
    """A learner seen without ``learn_rounds`` (the runner must then flatten through ``learn``)."""

    def __init__(self, model):
        self._model = model
        self.n_tasks = model.n_tasks

    def learn(self, X, y, *, tasks):
        return self._model.learn(X, y, tasks=tasks)

    @property
    def n_active_(self):
        return self._model.n_active_

    @property
    def n_updates_(self):
        return self._model.n_updates_


@pytest.fixture
def fake_learners(monkeypatch):
    for name in ("MTRBP", "MTFORG", "MTBPRJ", "MTBPRJ2"):
        if getattr(omtl, name, None) is None:
            monkeypatch.setattr(omtl, name, _FakeBudget, raising=False)
    for name in ("ROMCO", "PAGlobal"):
        if getattr(omtl, name, None) is None:
            monkeypatch.setattr(omtl, name, _FakeP2, raising=False)
    monkeypatch.setattr(runner, "_STREAM_CACHE", {})


# ---------------------------------------------------------------------------------------------
# P2 runner and chunking
# ---------------------------------------------------------------------------------------------


def test_round_chunks_never_split_a_round():
    rng = np.random.default_rng(0)
    rounds = np.repeat(np.arange(400), rng.integers(1, 9, size=400))
    chunks = list(round_chunks(len(rounds), 37, rounds))
    assert chunks[0][0] == 0 and chunks[-1][1] == len(rounds)
    for (_, b), (c, _) in zip(chunks, chunks[1:]):
        assert b == c and rounds[b - 1] != rounds[b]
    assert list(round_chunks(0, 10, np.zeros(0, dtype=np.int64))) == []


def test_run_p2_uses_learn_rounds_and_matches_flattening():
    stream = omtl.datasets.make_multitask_stream(n_samples=1500, seed=1).as_rounds(0)
    _FakeP2.calls = 0
    rec = runner.run_p2(_FakeP2(n_tasks=stream.n_tasks), stream)
    assert _FakeP2.calls > 1 and rec["protocol"].startswith("P2 (learn_rounds)")
    flat = runner.run_p2(_NoRounds(omtl.MTPerceptron(n_tasks=stream.n_tasks, graph="disconnected")), stream)
    assert flat["protocol"].startswith("P2 flattened")
    assert rec["error_rate"] == flat["error_rate"] and rec["f1_macro"] == flat["f1_macro"]
    assert rec["curve_steps"][-1] == len(stream) and abs(rec["curve"][-1] - rec["error_rate"]) < 1e-12
    with pytest.raises(ValueError):
        runner.run_p2(_FakeP2(n_tasks=stream.n_tasks), stream.shuffled(0))


def test_compact_columns_is_exact():
    """Dropping all-zero sparse columns (done for --quick subsamples) changes no prediction."""
    import scipy.sparse as sp

    rng = np.random.default_rng(5)
    X = sp.random(400, 3000, density=0.002, format="csr", random_state=6)
    X.data = rng.uniform(0.1, 1.0, size=X.nnz)
    tasks = rng.integers(0, 3, size=400)
    y = np.where(rng.random(400) < 0.4, 1, -1).astype(np.int8)
    stream = omtl.datasets.Stream(X=X, y=y, tasks=tasks, n_tasks=3, name="sparse")
    small = runner.compact_columns(stream)
    assert small.n_features == len(np.unique(X.indices)) < 3000
    assert runner.compact_columns(omtl.datasets.make_multitask_stream(n_samples=50)).n_features == 20
    for make in (lambda: omtl.MTPerceptron(n_tasks=3, kernel="poly", normalize=True),
                 lambda: omtl.MTPerceptron(n_tasks=3, kernel="rbf", gamma=0.5)):
        a = make().learn(stream.X, stream.y, tasks=stream.tasks)
        b = make().learn(small.X, small.y, tasks=small.tasks)
        np.testing.assert_array_equal(a, b)


def test_learner_selection(tmp_path):
    assert [a for a, *_ in runner.select(table2.LEARNERS, ["ROMCO", "PA-Global"], "learner(s)")] == ["PA-Global",
                                                                                                   "ROMCO"]
    with pytest.raises(ValueError, match="unknown learner"):
        table2.run_table2(out=tmp_path, learners=["Romco"], progress=False)
    with pytest.raises(ValueError, match="unknown algorithm"):
        table1.run_table1(out=tmp_path, learners=["MTPRJ"], progress=False)


# ---------------------------------------------------------------------------------------------
# tuning search (§7.5)
# ---------------------------------------------------------------------------------------------


class _SurfaceTuner(table2._Tuner):
    """Error = distance of log10 parameters from a target; counts distinct evaluations."""

    target = {"eta1": -2, "eta2": 0, "lambda1": -5, "lambda2": 1}

    def __init__(self):
        super().__init__("pu_spam", "ROMCO", "ROMCO", {}, {}, 1, False)

    def evaluate(self, configs, desc):
        out = []
        for c in configs:
            key = tuple(sorted(c.items()))
            if key not in self.cache:
                self.cache[key] = sum(abs(np.log10(c[k]) - t) for k, t in self.target.items())
                self.trials.append(dict(c))
            out.append(self.cache[key])
        return out


def test_reduced_romco_search_finds_the_separable_optimum():
    tuner = _SurfaceTuner()
    chosen = table2.tune_romco(tuner, table2.PAPER_GRID, full=False)
    assert chosen == {"eta1": 1e-2, "eta2": 1.0, "lambda1": 1e-5, "lambda2": 10.0}
    # 11 (tied etas) + 11 + 11 + 4 x 11 refinement, minus repeats of already-seen configurations
    assert len(tuner.trials) <= 77 and len(tuner.trials) >= 33


def test_full_grid_search_evaluates_every_configuration():
    tuner = _SurfaceTuner()
    grid = [1e-2, 1.0, 10.0]
    chosen = table2.tune_romco(tuner, grid, full=True)
    assert len(tuner.trials) == 3**4
    assert chosen == {"eta1": 1e-2, "eta2": 1.0, "lambda1": 1e-2, "lambda2": 10.0}


# ---------------------------------------------------------------------------------------------
# writers on tiny synthetic runs
# ---------------------------------------------------------------------------------------------


def _t1_runs():
    runs = []
    for seed, (fb, fc, fd) in enumerate([(0.39, 0.41, 0.36), (0.41, 0.43, 0.38), (0.40, 0.39, 0.37)]):
        base = {"dataset": "school", "seed": seed, "n": 100, "f1_macro": 0.3, "error_rate": 0.2, "seconds": 0.1,
                "examples_per_second": 1000.0, "n_updates": 10}
        runs.append({**base, "kind": "battery", "algorithm": "Perceptron battery", "graph": "D", "percent": None,
                     "budget": None, "f1_micro": fb, "n_active": 40 + seed})
        for pct in table1.PERCENTS:
            runs.append({**base, "kind": "budget", "algorithm": "MTRBP", "graph": "C", "percent": pct,
                         "budget": 10, "f1_micro": fc, "n_active": 10})
            runs.append({**base, "kind": "budget", "algorithm": "MTRBP", "graph": "D", "percent": pct,
                         "budget": 10, "f1_micro": fd, "n_active": 10})
    return runs


def test_table1_summary_and_writers(tmp_path):
    runs = _t1_runs()
    summary = table1.summarise(runs, ["school"])
    row = next(r for r in summary if r["algorithm"] == "MTRBP" and r["graph"] == "C" and r["percent"] == 25)
    assert row["n_seeds"] == 3
    assert row["f1_micro_mean"] == pytest.approx(41.0)
    assert row["f1_micro_std"] == pytest.approx(np.std([41, 43, 39], ddof=1))
    assert row["paper_f1"] == 40.4 and row["diff"] == pytest.approx(41.0 - 40.4)
    bat = next(r for r in summary if r["algorithm"] == "Perceptron battery")
    assert bat["paper_f1"] == 39.1 and bat["f1_micro_mean"] == pytest.approx(40.0)
    settings = {"seeds": [0, 1, 2], "quick": False, "subsample_rows": None, "jobs": 1, "wall_seconds": 1.0,
                "datasets": {"school": {"title": "School binary", "n": 100, "d": 28, "n_tasks": 139, "positives": 25,
                                        "kernel": {"kernel": "rbf", "gamma": 1 / 28}}},
                "budgets_per_seed": {"school": {0: {25: 10, 10: 4, 5: 2}}}, "skipped": ["MTFORG: missing"],
                "failures": []}
    table1.write_outputs(tmp_path, summary, runs, settings)
    md = (tmp_path / "table1.md").read_text()
    assert "41.0 ± 2.0 (40.4, +0.6)" in md
    assert "battery: 40.0 ± 1.0 (39.1, +0.9)" in md
    assert "C ≥ D in 3/3 cells" in md and "MTFORG: missing" in md
    with open(tmp_path / "table1.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == table1.CSV_FIELDS and len(rows) == len(summary)
    with open(tmp_path / "table1_runs.csv") as fh:
        assert len(list(csv.DictReader(fh))) == len(runs)
    assert json.loads((tmp_path / "table1_settings.json").read_text())["seeds"] == [0, 1, 2]
    assert (tmp_path / "fig_f1_vs_budget.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table2_summary_and_writers(tmp_path):
    runs = []
    for seed, err in enumerate([0.05, 0.07]):
        runs.append({"dataset": "pu_spam", "seed": seed, "algorithm": "ROMCO", "n": 4, "error_rate": err,
                     "f1_macro": 0.95, "f1_micro": 0.96, "n_updates": 1, "seconds": 0.5, "examples_per_second": 8.0,
                     "protocol": "P2 (learn_rounds)", "params": {"eta1": 0.1},
                     "curve": [0.0, err / 2, err], "curve_steps": [1, 2, 4]})
    summary = table2.summarise(runs, ["pu_spam"], [lab for lab, *_ in table2.LEARNERS])
    (row,) = summary
    assert row["error_rate_mean"] == pytest.approx(6.0) and row["error_rate_std"] == pytest.approx(np.sqrt(2.0))
    assert row["paper_error_rate"] == 4.97 and row["paper_f1"] == 95.92 and row["paper_seconds"] == 11.49
    np.testing.assert_allclose(row["_curve"][1], [0.0, 0.03, 0.06])
    settings = {"seeds": [0, 1], "quick": True, "subsample_rows": 4, "jobs": 1, "wall_seconds": 1.0,
                "datasets": {"pu_spam": {"title": "PU spam", "n": 4, "d": 10, "n_tasks": 4, "positives": 2,
                                         "max_task": 1, "min_task": 1, "note": "substitute"}},
                "tuning": {"seed": 12345, "romco": "reduced", "chosen": {"pu_spam": {"ROMCO": {"eta1": 0.1}}}},
                "skipped": [], "notes": [], "failures": []}
    table2.write_outputs(tmp_path, summary, runs, [{"dataset": "pu_spam", "algorithm": "ROMCO", "eta1": 0.1,
                                                    "error_rate": 0.06, "error": ""}], settings)
    md = (tmp_path / "table2.md").read_text()
    assert "6.00 ± 1.41 (4.97, +1.03)" in md and "ROMCO: eta1=0.1" in md
    with open(tmp_path / "table2.csv") as fh:
        assert list(csv.DictReader(fh))[0]["paper_dataset"] == "Spam Email"
    assert (tmp_path / "table2_tuning.csv").read_text().startswith("dataset,algorithm,eta1,error_rate")
    assert (tmp_path / "fig_cumulative_error_pu_spam.png").read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------------------------
# end to end on the real data
# ---------------------------------------------------------------------------------------------


def _read(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_reproduce_table1_quick_end_to_end(tmp_path, data_dir, capsys):
    out = tmp_path / "t1"
    rc = main(["reproduce", "table1", "--quick", "--out", str(out), "--data-dir", str(data_dir), "--no-progress"])
    assert rc == 0
    for name in ("table1.md", "table1.csv", "table1_runs.csv", "table1_settings.json", "fig_f1_vs_budget.png"):
        assert (out / name).stat().st_size > 0
    summary, runs = _read(out / "table1.csv"), _read(out / "table1_runs.csv")
    settings = json.loads((out / "table1_settings.json").read_text())
    assert settings["seeds"] == [0, 1] and settings["failures"] == []
    for key in table1.DATASET_KEYS:
        assert any(r["dataset"] == key and r["algorithm"] == "Perceptron battery" for r in summary)
        for b in settings["budgets_per_seed"][key].values():
            assert all(v >= 1 for v in b.values())
    text = capsys.readouterr().out
    for label, cls_name, _ in table1.ALGORITHMS:
        if getattr(omtl, cls_name, None) is None:
            assert f"omtl.{cls_name} is not available" in text
            continue
        mine = [r for r in runs if r["algorithm"] == label]
        assert len(mine) == len(table1.DATASET_KEYS) * 2 * len(table1.PERCENTS) * 2
        assert all(int(r["n_active"]) <= int(r["budget"]) for r in mine)


def test_reproduce_table1_is_reproducible_and_parallel(tmp_path, data_dir):
    """Same seeds -> same budgets and F1, whether the seeds run in one process or two (INV-E2)."""
    a = table1.run_table1(out=tmp_path / "a", quick=True, data_dir=data_dir, datasets=["school"], progress=False)
    b = table1.run_table1(out=tmp_path / "b", quick=True, data_dir=data_dir, datasets=["school"], progress=False,
                          jobs=2)
    assert a["settings"]["budgets_per_seed"] == b["settings"]["budgets_per_seed"]
    key = lambda r: (r["algorithm"], r["graph"], r["percent"], r["seed"])  # noqa: E731
    fa = {key(r): r["f1_micro"] for r in a["runs"]}
    fb = {key(r): r["f1_micro"] for r in b["runs"]}
    assert fa == fb


def test_reproduce_table2_quick_end_to_end(tmp_path, data_dir, capsys):
    out = tmp_path / "t2"
    rc = main(["reproduce", "table2", "--quick", "--out", str(out), "--data-dir", str(data_dir), "--no-progress"])
    assert rc == 0
    for name in ("table2.md", "table2.csv", "table2_runs.csv", "table2_tuning.csv", "table2_settings.json"):
        assert (out / name).exists()
    for key in table2.DATASET_KEYS:
        assert (out / f"fig_cumulative_error_{key}.png").stat().st_size > 0
    settings = json.loads((out / "table2_settings.json").read_text())
    assert settings["failures"] == [] and settings["seeds"] == [0, 1]
    runs = _read(out / "table2_runs.csv")
    text = capsys.readouterr().out
    for label, cls_name, _, tuning in table2.LEARNERS:
        if getattr(omtl, cls_name, None) is None:
            assert f"omtl.{cls_name} is not available" in text
            continue
        assert len([r for r in runs if r["algorithm"] == label]) == len(table2.DATASET_KEYS) * 2
        if tuning == "romco":
            assert set(settings["tuning"]["chosen"][table2.DATASET_KEYS[0]][label]) == {"eta1", "eta2", "lambda1",
                                                                                       "lambda2"}


def test_table_plumbing_with_stand_in_learners(tmp_path, data_dir, fake_learners):
    """Budget cells and P2 learners (with tuning) fill in once the classes exist (stand-ins here)."""
    r1 = table1.run_table1(out=tmp_path / "t1", quick=True, seeds=2, data_dir=data_dir, datasets=["ecml2006_a"],
                           progress=False)
    assert r1["settings"]["failures"] == []
    cells = [r for r in r1["summary"] if r["algorithm"] in {a for a, _, _ in table1.ALGORITHMS}]
    assert len(cells) == 4 * 2 * 3
    md = (tmp_path / "t1" / "table1.md").read_text()
    assert "| Pkdd06 Spam A | MTRBP | " in md and "(84.8, " in md
    r2 = table2.run_table2(out=tmp_path / "t2", quick=True, seeds=2, data_dir=data_dir, datasets=["landmine"],
                           progress=False)
    assert r2["settings"]["failures"] == []
    chosen = r2["settings"]["tuning"]["chosen"]["landmine"]["ROMCO"]
    assert set(chosen) == {"eta1", "eta2", "lambda1", "lambda2"}
    assert all(r["params"]["eta1"] == chosen["eta1"] for r in r2["runs"] if r["algorithm"] == "ROMCO")
    assert {r["algorithm"] for r in r2["runs"]} >= {"ROMCO", "PA-Global"}
    assert all(r["protocol"].startswith("P2 (learn_rounds)") for r in r2["runs"] if r["algorithm"] == "ROMCO")


def test_unknown_dataset_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown data set"):
        table1.run_table1(out=tmp_path, datasets=["mhc1"], progress=False)


def test_outputs_are_written_after_each_data_set(tmp_path, data_dir, monkeypatch):
    """A long run leaves the finished data sets' tables behind if it is interrupted later."""
    calls = []
    real = table1.write_outputs

    def spy(out, summary, runs, settings, **kwargs):
        calls.append((settings["partial"], list(settings["datasets"]), {r["dataset"] for r in runs}))
        real(out, summary, runs, settings, **kwargs)

    monkeypatch.setattr(table1, "write_outputs", spy)
    table1.run_table1(out=tmp_path, quick=True, seeds=2, data_dir=data_dir, datasets=["ecml2006_a", "school"],
                      progress=False)
    assert calls == [(True, ["ecml2006_a"], {"ecml2006_a"}), (False, ["ecml2006_a", "school"], {"ecml2006_a", "school"})]
    assert "Partial output" not in (tmp_path / "table1.md").read_text()


def test_reproduce_several_tables_splits_the_subsets_among_them(tmp_path, data_dir, capsys):
    """``omtl reproduce table1 table2`` (or ``all``): each table gets the --datasets/--learners it
    knows and writes its outputs into the one folder, as it would alone; a name no table knows, or
    a table left with none, is refused before anything runs."""
    from omtl.cli import chosen_tables

    assert chosen_tables(["table2", "table1", "table2"]) == ["table1", "table2"] == chosen_tables(["all"])
    assert chosen_tables(["table2"]) == ["table2"]
    for subsets, message in ((["--datasets", "school,mhc1"], "unknown \\['mhc1'\\]"),
                             (["--datasets", "school"], "nothing of table2"),
                             (["--learners", "ROMCO"], "nothing of table1")):
        with pytest.raises(SystemExit, match=message):
            main(["reproduce", "all", "--quick", *subsets, "--out", str(tmp_path / "refused"), "--no-progress"])
    assert not (tmp_path / "refused").exists()
    common = ["--quick", "--seeds", "1", "--data-dir", str(data_dir), "--no-progress"]
    assert main(["reproduce", "all", "--datasets", "school,landmine", "--learners", "MTRBP,PA-Unique", *common,
                 "--out", str(tmp_path / "both")]) == 0
    printed = capsys.readouterr().out
    assert printed.index("# Table 1") < printed.index("# Table 2")
    assert {r["dataset"] for r in _read(tmp_path / "both" / "table1_runs.csv")} == {"school"}
    assert {r["algorithm"] for r in _read(tmp_path / "both" / "table2_runs.csv")} == {"PA-Unique"}
    assert (tmp_path / "both" / "fig_f1_vs_budget.png").exists()
    assert (tmp_path / "both" / "fig_cumulative_error_landmine.png").exists()


def test_a_failed_reproduce_leaves_no_empty_results_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "table1", "--quick", "--data-dir", str(tmp_path / "no-data"), "--no-progress"]) != 0
    assert list(tmp_path.iterdir()) == []  # neither omtl-results/ nor the run's folder
    out = tmp_path / "given" / "run"
    assert main(["reproduce", "table1", "--quick", "--out", str(out), "--data-dir", str(tmp_path / "no-data"),
                 "--no-progress"]) != 0
    assert list(tmp_path.iterdir()) == []
