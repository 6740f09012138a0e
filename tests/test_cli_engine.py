"""`omtl learn FILE` in one engine call (src/io/driver.rs through `_native.learn_file`): the same
predictions, report and saved model as the Python chunk loop on the same rows, in every format;
the command starts without NumPy or SciPy; the lazy top level of the package."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import numpy as np
import pytest

import omtl
import omtl.cli_learn as cli_learn
from omtl.cli import main


def rows(n, n_tasks, width, seed):
    """A sparse stream: many tasks (the engine grows by hundreds), wide rows (sparse storage)."""
    rng = np.random.default_rng(seed)
    tasks = [f"t{int(t)}" for t in rng.integers(0, n_tasks, size=n)]
    feats = [sorted(set(rng.integers(1, width + 1, size=5).tolist())) for _ in range(n)]
    w = rng.normal(size=width + 1)
    y = [1 if sum(w[j] for j in f) > 0 else -1 for f in feats]
    return tasks, y, feats


def write(path, fmt, tasks, y, feats, zero_one=False):
    lab = [(1 if v > 0 else 0) if zero_one else v for v in y]
    if fmt == "svmlight":
        text = "".join(f"{b} qid:{t} " + " ".join(f"{j}:{0.5 + j % 3}" for j in f) + "\n" for t, b, f in zip(tasks, lab, feats))
    elif fmt == "vw":
        text = "".join(f"{b} |t {t} |s " + " ".join(f"f{j}:{0.5 + j % 3}" for j in f) + "\n" for t, b, f in zip(tasks, lab, feats))
    else:
        width = max(max(f) for f in feats)
        head = "task,label," + ",".join(f"x{j}" for j in range(1, width + 1))
        body = []
        for t, b, f in zip(tasks, lab, feats):
            row = ["0"] * width
            for j in f:
                row[j - 1] = str(0.5 + j % 3)
            body.append(f"{t},{b}," + ",".join(row))
        text = head + "\n" + "\n".join(body) + "\n"
    path.write_text(text)


def learn_both(tmp_path, capsys, monkeypatch, path, *extra):
    """Runs `omtl learn` in the engine and through the Python chunk loop; both outputs."""
    out = {}
    for way in ("engine", "python"):
        preds, model = tmp_path / f"{way}.txt", tmp_path / f"{way}.omtl"
        with monkeypatch.context() as m:
            if way == "python":
                m.setattr(cli_learn, "engine_learner", lambda *a: None)
            code = main(["learn", str(path), "-p", str(preds), "--save", str(model), *map(str, extra)])
        _, err = capsys.readouterr()
        assert code == 0, err
        report = [line for line in err.splitlines() if not line.startswith(("seconds", "predictions", "model"))]
        out[way] = (preds.read_text(), omtl.load(model), report)
    return out


@pytest.mark.parametrize("fmt", ["svmlight", "vw", "csv"])
@pytest.mark.parametrize("zero_one", [False, True])
def test_the_engine_loop_gives_the_python_loops_predictions_report_and_model(tmp_path, capsys, monkeypatch, fmt,
                                                                             zero_one):
    tasks, y, feats = rows(3000, 300 if fmt != "csv" else 40, 6000 if fmt != "csv" else 30, seed=1)
    path = tmp_path / f"d.{ {'svmlight': 'svm', 'vw': 'vw', 'csv': 'csv'}[fmt] }"
    write(path, fmt, tasks, y, feats, zero_one)
    out = learn_both(tmp_path, capsys, monkeypatch, path, "--chunk-rows", "97", "--passes", "2")
    (p1, m1, r1), (p2, m2, r2) = out["engine"], out["python"]
    assert p1 == p2 and len(p1.split()) == 6000
    assert r1 == r2
    for name in ("n_seen_", "n_mistakes_", "n_features_in_", "memory_bytes_"):
        assert getattr(m1, name) == getattr(m2, name), name
    assert m1.tasks_.tolist() == m2.tasks_.tolist() and m1.classes_.tolist() == m2.classes_.tolist()
    np.testing.assert_array_equal(m1.n_seen_per_task_, m2.n_seen_per_task_)
    assert m1._core._learner.to_bytes() == m2._core._learner.to_bytes()


def test_parameters_the_engine_cannot_take_fall_back_to_the_learner_class(tmp_path, capsys):
    assert cli_learn.engine_learner("MTLinear", []) == ("mt_linear", cli_learn.ENGINE_MTLINEAR_DEFAULTS, "complete_open")
    assert cli_learn.engine_learner("mtlinear", ["graph=disconnected", "hash_bits=12"])[1:] == (
        {**cli_learn.ENGINE_MTLINEAR_DEFAULTS, "hash_bits": 12}, "disconnected")
    for params in (["learning_rate=-1"], ["n_tasks=3"], ["loss=zzz"], ["fit_intercept=1"], ["hash_bits=true"],
                   ["nope=1"], ["learning_rate"]):
        assert cli_learn.engine_learner("MTLinear", params) is None, params
    assert cli_learn.engine_learner("MTPerceptron", []) is None
    # The class's message, as before.
    path = tmp_path / "d.svm"
    path.write_text("1 qid:a 1:1\n")
    assert main(["learn", str(path), "--param", "learning_rate=-1"]) == 2
    err = capsys.readouterr().err
    assert "learning_rate" in err and "must be a finite number > 0" in err


def test_the_engine_defaults_are_mtlinears():
    signature = inspect.signature(omtl.MTLinear).parameters
    for name, value in cli_learn.ENGINE_MTLINEAR_DEFAULTS.items():
        assert signature[name].default == value, name


def test_omtl_learn_runs_without_numpy_or_scipy(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("1 qid:a 1:1\n-1 qid:b 2:1\n")
    code = ("import sys; from omtl.cli import main; code = main(['learn', sys.argv[1], '--quiet']); "
            "print(code, sorted(m for m in ('numpy', 'scipy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["0", "[]"], done.stderr


def test_the_lazy_package_has_every_public_name():
    code = ("import sys, omtl; print('numpy' in sys.modules); "
            "print(omtl.persistence.save is omtl.save, omtl.graph.TaskGraph is omtl.TaskGraph)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "True"], done.stderr  # submodules load on first use too
    assert list(omtl._LEARNERS) == list(omtl.learners.__all__)
    assert set(omtl.__all__) == set(omtl._PUBLIC) - {"learners"}
    for name in omtl.__all__:
        assert getattr(omtl, name) is not None and name in dir(omtl)
    importlib.import_module("omtl.evaluate")  # the submodule: the public name stays the function
    assert callable(omtl.evaluate) and omtl.evaluate.__name__ == "evaluate"
    with pytest.raises(AttributeError):
        omtl.no_such_name  # noqa: B018


@pytest.mark.parametrize("fmt", ["svmlight", "vw", "csv"])
def test_predict_in_the_engine_writes_what_the_python_loop_writes(tmp_path, capsys, monkeypatch, fmt):
    tasks, y, feats = rows(2000, 30, 40, seed=2)
    ext = {"svmlight": "svm", "vw": "vw", "csv": "csv"}[fmt]
    train, test = tmp_path / f"a.{ext}", tmp_path / f"b.{ext}"
    write(train, fmt, tasks[:1500], y[:1500], feats[:1500], zero_one=True)
    write(test, fmt, tasks[1500:], y[1500:], feats[1500:], zero_one=True)
    model = tmp_path / "m.omtl"
    assert main(["learn", str(train), "--save", str(model), "--quiet"]) == 0
    bad = tmp_path / f"c.{ext}"
    write(bad, fmt, ["t1", "t2", "never"], y[:3], feats[:3])
    outputs = {}
    for way in ("engine", "python"):
        with monkeypatch.context() as m:
            if way == "python":
                m.setattr(cli_learn, "_engine_core", lambda *a: None)
            capsys.readouterr()
            codes = [main(["predict", str(test), "--model", str(model), "--chunk-rows", "113"]),
                     main(["predict", str(bad), "--model", str(model)])]
            outputs[way] = (codes, *capsys.readouterr())
    assert outputs["engine"] == outputs["python"]
    codes, out, err = outputs["engine"]
    assert codes == [0, 2] and set(out.split()) <= {"0", "1"} and len(out.split()) == 500  # the bad file: its one chunk stops
    assert "task 'never', which the model never saw" in err


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_ctrl_c_stops_the_engine_loop_waiting_on_a_pipe(tmp_path):
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "omtl", "learn", "-", "--format", "svmlight", "--n-features", "3"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"1 qid:a 1:1\n" * 10000)  # learned; then the pipe stays open, empty
        proc.stdin.flush()
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.decode().strip().endswith("omtl learn: interrupted")


def test_the_package_pickles_by_name():
    import pickle

    import cloudpickle

    assert pickle.loads(pickle.dumps(omtl)) is omtl
    assert cloudpickle.loads(cloudpickle.dumps(lambda: omtl.__name__))() == "omtl"
