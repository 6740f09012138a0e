"""Online evaluation (INV-E1), the synthetic stream and the demo command."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_stream
from sklearn.metrics import f1_score

import omtl
import omtl.reference as ref
from omtl.cli import main
from omtl.evaluate import online_metrics


def test_inv_e1_metrics_match_scikit_learn():
    rng = np.random.default_rng(0)
    n, k = 500, 6
    y = rng.choice([-1, 1], n)
    pred = np.where(rng.random(n) < 0.8, y, -y)
    tasks = rng.integers(0, k - 1, n)  # task k-1 never appears: excluded from the macro mean
    mistakes, err, micro, macro, counts, curve, steps = online_metrics(y, pred, tasks, k, curve_points=50)
    assert err == pytest.approx((counts.fp.sum() + counts.fn.sum()) / n)
    assert mistakes == int((pred != y).sum())
    assert micro == pytest.approx(f1_score(y, pred, pos_label=1, zero_division=0))
    per_task = [f1_score(y[tasks == i], pred[tasks == i], pos_label=1, zero_division=0) for i in range(k - 1)]
    np.testing.assert_allclose(counts.f1[: k - 1], per_task)
    assert macro == pytest.approx(np.mean(per_task))
    assert counts.n[k - 1] == 0
    assert steps[-1] == n and curve[-1] == pytest.approx(err)
    np.testing.assert_allclose(curve, np.cumsum(pred != y)[steps - 1] / steps)
    assert len(steps) <= 51


def test_all_negative_task_has_f1_zero():
    y = np.array([-1, -1, 1])
    pred = np.array([-1, -1, 1])
    *_, counts, _, _ = online_metrics(y, pred, np.array([0, 0, 1]), 2)
    assert counts.f1.tolist() == [0.0, 1.0]


def test_evaluate_runs_the_online_protocol():
    stream = omtl.datasets.make_multitask_stream(n_samples=900, n_tasks=5, n_features=6, seed=1)
    model = omtl.KernelPerceptron(n_tasks=5)
    report = omtl.evaluate(model, stream, chunk_size=64)
    again = omtl.KernelPerceptron(n_tasks=5).learn(stream.X, stream.y, tasks=stream.tasks)
    np.testing.assert_array_equal(report.predictions, again)
    assert report.n == 900 and report.mistakes == int((again != stream.y).sum())
    assert report.n_active is None and model.n_active_ > 0  # the linear kernel runs in primal form: no active set
    assert report.examples_per_second > 0 and report.seconds >= 0
    assert 0 <= report.error_rate < 0.5


def test_synthetic_stream_is_seeded_and_related():
    a = omtl.datasets.make_multitask_stream(n_samples=500, seed=3)
    b = omtl.datasets.make_multitask_stream(n_samples=500, seed=3)
    c = omtl.datasets.make_multitask_stream(n_samples=500, seed=4)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(a.X, c.X)
    s = omtl.datasets.make_multitask_stream(n_samples=300, n_features=200, sparse=True, density=0.05)
    assert sp.isspmatrix_csr(s.X) and s.X.nnz == 300 * 10
    np.testing.assert_allclose(np.sqrt(s.X.multiply(s.X).sum(axis=1)).A.ravel(), 1.0)
    assert 0.3 < (s.y > 0).mean() < 0.7
    with pytest.raises(ValueError):
        omtl.datasets.make_multitask_stream(relatedness=2.0)


def test_demo_prints_a_table(capsys):
    assert main(["demo", "--n-samples", "300", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "| learner |" in out and "KernelPerceptron (rbf)" in out and "examples/s" in out
    # What the stream is, what the columns mean, and which learner did best.
    assert out.startswith("omtl demo: every learner makes one online pass") and "Stream(" not in out
    assert "error rate: the fraction of examples predicted wrongly" in out and "\nlowest error: " in out
    # MTLinear stores no example: its active set is "none", a budget learner's a count.
    rows = {line.split("|")[1].strip(): line.split("|")[5].strip() for line in out.splitlines()
            if line.startswith("| ") and "learner" not in line}
    assert rows["MTLinear (logistic, normalized)"] == "none"
    assert rows["MTRBP G=C (rbf, B=200)"].isdigit()


def test_demo_shows_no_progress_when_not_on_a_terminal():
    """A log (stderr not a TTY) gets no progress bars, so no carriage returns or escapes."""
    proc = subprocess.run(
        [sys.executable, "-m", "omtl", "demo", "--n-samples", "300"], capture_output=True, text=True, check=True
    )
    assert "\r" not in proc.stderr + proc.stdout and "\x1b" not in proc.stderr + proc.stdout


def test_reproduce_without_data_is_one_line_naming_the_flag(tmp_path, capsys):
    rc = main(["reproduce", "table1", "--quick", "--data-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "Traceback" not in err and "data_dir=" not in err
    assert "--data-dir" in err and "OMTL_DATA" in err and "docs/data.md" in err
    assert len(err.strip().splitlines()) == 2  # the missing file, then where to point omtl


def test_report_repr_is_short_and_metrics_are_plain_floats():
    stream = omtl.datasets.make_multitask_stream(n_samples=500, n_tasks=4, seed=1)
    report = omtl.evaluate(omtl.PAUnique(n_tasks=4), stream)
    text = repr(report)
    assert len(text) < 300 and "curve" not in text and text.startswith("EvaluationReport(learner='PAUnique'")
    for name in ("error_rate", "f1_micro", "f1_macro", "seconds", "examples_per_second"):
        assert type(getattr(report, name)) is float, name


def test_evaluate_runs_rounds_when_the_stream_has_them():
    stream = omtl.datasets.make_multitask_stream(n_samples=700, n_tasks=5, n_features=6, seed=2).as_rounds(3)
    report = omtl.evaluate(omtl.ROMCO(n_tasks=5, lambda1=0.05), stream, chunk_size=7)
    direct = omtl.ROMCO(n_tasks=5, lambda1=0.05).learn_rounds(stream.X, stream.y, tasks=stream.tasks, rounds=stream.rounds)
    np.testing.assert_array_equal(report.predictions, direct)
    flat = omtl.ROMCO(n_tasks=5, lambda1=0.05).learn(stream.X, stream.y, tasks=stream.tasks)
    assert not np.array_equal(direct, flat)  # the joint round update is a different protocol
    with pytest.raises(ValueError, match="rounds"):
        omtl.evaluate(omtl.ROMCO(n_tasks=5), stream.X, stream.y, tasks=stream.tasks, rounds=stream.rounds[:-1])


# ---- open-ended models and task labels --------------------------------------------------------------
@pytest.mark.parametrize("labels", ["integers", "strings"])
def test_evaluate_an_open_ended_model_with_any_task_labels(labels):
    X, y, t = random_stream(n=300, k=4, seed=5)
    tasks = t if labels == "integers" else np.array([f"user-{i}" for i in t])
    model = omtl.MTPerceptron(n_tasks=None)
    report = omtl.evaluate(model, X, y, tasks=tasks, chunk_size=50)
    twin = omtl.MTPerceptron(n_tasks=None)
    expected = twin.learn(X, y, tasks=list(tasks))
    np.testing.assert_array_equal(report.predictions, expected)
    assert report.n == 300 and model.n_seen_ == 300
    # Per-task counts are indexed by the model's task index, named by tasks_.
    for index, label in enumerate(model.tasks_):
        assert report.per_task.n[index] == int(np.sum(tasks == label))


def test_evaluate_string_task_ids_on_a_fixed_size_model():
    X, y, t = random_stream(n=200, k=3, seed=6)
    tasks = [("abc")[i] for i in t]
    report = omtl.evaluate(omtl.MTPerceptron(n_tasks=3), X, y, tasks=tasks)
    assert report.per_task.n.sum() == 200 and report.per_task.n.shape == (3,)


@pytest.mark.parametrize("n_tasks", [3, None])
def test_task_ids_the_model_refuses_are_refused_before_the_pass_changes_it(n_tasks):
    X, y, t = random_stream(n=200, k=3, seed=7)
    model = omtl.MTPerceptron(n_tasks=n_tasks).partial_fit(X[:10], y[:10], tasks=t[:10])
    before = model.decision_function(X, tasks=t)
    bad = t.copy() if n_tasks is not None else t.astype(object)
    bad[-1] = 7 if n_tasks is not None else float("nan")
    with pytest.raises((ValueError, TypeError)):
        omtl.evaluate(model, X, y, tasks=bad, chunk_size=20)
    assert model.n_seen_ == 10
    np.testing.assert_array_equal(model.decision_function(X, tasks=t), before)


@pytest.mark.parametrize("module", [omtl, ref], ids=["native", "reference"])
def test_n_active_is_reported_only_for_learners_that_store_examples(module):
    """MTLinear stores no example: a report of its 'active set' (its update count) misleads, so
    evaluate reports None there, the budget size for a budget learner; every learner that stores
    none has n_active_ == n_updates_ (docs/learners.md)."""
    from learner_table import LEARNERS

    from omtl.evaluate import stores_examples

    s = omtl.datasets.make_multitask_stream(n_samples=300, n_tasks=4, seed=3)
    assert omtl.evaluate(module.MTLinear(n_tasks=4), s).n_active is None
    report = omtl.evaluate(module.MTRBP(n_tasks=4, budget=20), s)
    assert report.n_active == 20 and report.summary()["n_active"] == 20
    for name, native, twin, kw in LEARNERS:
        model = (native if module is omtl else twin)(n_tasks=4, **kw)
        n_active = omtl.evaluate(model, s).n_active
        if stores_examples(model):
            assert n_active == model.n_active_, name
        else:
            assert n_active is None and model.n_active_ == model.n_updates_, name
