"""`omtl learn` and `omtl predict` run whole in the engine (src/io/driver/): for every learner and
format, the same predictions, report, bookkeeping and saved model as the Python estimator API
learning the same chunks; the engine parses `--param`; both commands start without NumPy; a
stream (a pipe, a named pipe, standard input) is read once, its width growing; Ctrl-C is
honoured while waiting on a pipe and during the width pass."""

from __future__ import annotations

import gzip
import importlib
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import omtl
from omtl.cli import main
from omtl.datasets import iter_file
from omtl.datasets.files import read_data


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


EXT = {"svmlight": "svm", "vw": "vw", "csv": "csv"}


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cli(*argv, stdin=b"", timeout=120, **kwargs):
    """The installed command in a fresh process (standard input, exit codes, no traceback)."""
    return subprocess.run([sys.executable, "-m", "omtl", *map(str, argv)], input=stdin, capture_output=True,
                          timeout=timeout, **kwargs)


def learn_through_the_api(model, path, chunk_rows, passes, **reading):
    """What `omtl learn` does, through the estimator API: each chunk of `iter_file` learned."""
    predictions = []
    for _ in range(passes):
        for X, y, tasks in iter_file(path, chunk_rows=chunk_rows, **reading):
            predictions.extend(model.learn(X, y, tasks=tasks).tolist())
    return predictions


def report_lines(err):
    return [line.split() for line in err.splitlines() if len(line.split()) == 6 and line.split()[2].isdigit()]


CASES = [
    ("MTLinear", [], lambda: omtl.MTLinear()),
    ("mtlinear", ["graph=disconnected", "hash_bits=12", "loss=hinge"],
     lambda: omtl.MTLinear(graph="disconnected", hash_bits=12, loss="hinge")),
    ("MTPerceptron", ["n_tasks=400"], lambda: omtl.MTPerceptron(n_tasks=400)),
    ("mtprj", ["n_tasks=400", "budget=50", "kernel=linear"],
     lambda: omtl.MTBPRJ(n_tasks=400, budget=50, kernel="linear")),
    ("PAGlobal", ["n_tasks=400"], lambda: omtl.PAGlobal(n_tasks=400)),
]


@pytest.mark.parametrize("fmt", ["svmlight", "vw", "csv"])
@pytest.mark.parametrize("zero_one", [False, True])
def test_omtl_learn_is_learn_through_the_estimator_api(tmp_path, capsys, fmt, zero_one):
    n_tasks, width = (300, 6000) if fmt != "csv" else (40, 30)
    tasks, y, feats = rows(3000, n_tasks, width, seed=1)
    path = tmp_path / f"d.{EXT[fmt]}"
    write(path, fmt, tasks, y, feats, zero_one)
    preds, saved = tmp_path / "p.txt", tmp_path / "m.omtl"
    bits = ["--bits", "14"] if fmt == "vw" else []  # a smaller hashed width, as fast a test
    code, _, err = run(capsys, "learn", path, "-p", preds, "--save", saved, "--chunk-rows", "97", "--passes", "2",
                       *bits)
    assert code == 0, err
    model = omtl.MTLinear()
    expected = learn_through_the_api(model, path, 97, 2, **({"n_features": 2**14} if bits else {}))
    assert preds.read_text().split() == [str(p) for p in expected]
    truth = np.tile(np.where(np.array(y) > 0, 1, 0 if zero_one else -1), 2)
    wrong = np.array(expected) != truth
    report = report_lines(err)
    assert [int(r[2]) for r in report] == [2**k for k in range(13)]
    for r in report:
        at = int(r[2])
        assert float(r[0]) == pytest.approx(wrong[:at].mean(), abs=1e-6)
        assert (int(r[3]), int(r[4])) == (truth[at - 1], expected[at - 1])
    assert f"average 0/1 loss = {wrong.mean():.6f}" in err and "number of examples = 6000" in err
    loaded = omtl.load(saved)
    assert omtl.dumps(loaded) == omtl.dumps(model)  # the whole model: parameters, book and state


@pytest.mark.parametrize(("learner", "params", "build"), CASES, ids=[c[0] + "-" + "-".join(c[1]) for c in CASES])
def test_every_learner_runs_in_the_engine_as_through_the_api(tmp_path, capsys, learner, params, build):
    tasks, y, feats = rows(600, 30, 40, seed=3)
    path = tmp_path / "d.svm"
    write(path, "svmlight", tasks, y, feats)
    preds, saved = tmp_path / "p.txt", tmp_path / "m.omtl"
    argv = ["learn", path, "--learner", learner, "-p", preds, "--save", saved, "--chunk-rows", "64", "--quiet"]
    code, _, err = run(capsys, *argv, *[a for p in params for a in ("--param", p)])
    assert code == 0, err
    model = build()
    expected = learn_through_the_api(model, path, 64, 1)
    assert preds.read_text().split() == [str(p) for p in expected]
    assert omtl.dumps(omtl.load(saved)) == omtl.dumps(model)


def test_the_engine_parses_learners_and_parameters(tmp_path, capsys):
    path = tmp_path / "d.svm"
    path.write_text("1 qid:a 1:1\n-1 qid:b 2:1\n")
    for argv, expected in [
        (["--param", "learning_rate=-1"], "learning_rate"),
        (["--param", "learning_rate=-1"], "must be a finite number > 0"),
        (["--param", "nope=1"], "valid"),
        (["--param", "learning_rate"], "--param 'learning_rate': expected key=value"),
        (["--learner", "Nope"], "unknown learner"),
        (["--learner", "MTRBP", "--param", "bugdet=3"], "budget"),
        (["--learner", "ROMCO"], "needs n_tasks"),
    ]:
        code, _, err = run(capsys, "learn", path, "--quiet", *argv)
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, (argv, err)
    saved = tmp_path / "m.omtl"
    code, _, err = run(capsys, "learn", path, "--learner", "mtperceptron", "--param", "kernel=rbf", "--param",
                       "gamma=0.5", "--param", "n_tasks=3", "--save", saved, "--quiet")
    assert code == 0, err
    model = omtl.load(saved)
    assert isinstance(model, omtl.MTPerceptron) and model.gamma == 0.5 and model.n_tasks == 3


@pytest.mark.parametrize("command", ["learn", "predict"])
def test_omtl_learn_and_predict_run_without_numpy_or_scipy(tmp_path, command):
    path = tmp_path / "d.svm"
    path.write_text("1 qid:a 1:1\n-1 qid:b 2:1\n")
    saved = tmp_path / "m.omtl"
    assert cli("learn", path, "--save", saved, "--quiet").returncode == 0
    argv = ["learn", str(path), "--quiet"] if command == "learn" else ["predict", str(path), "--model", str(saved)]
    code = (f"import sys; from omtl.cli import main; code = main({argv!r}); "
            "print(code, sorted(m for m in ('numpy', 'scipy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split()[-2:] == ["0", "[]"], done.stderr


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
def test_predict_writes_what_the_loaded_model_predicts(tmp_path, capsys, fmt):
    tasks, y, feats = rows(2000, 30, 40, seed=2)
    train, test = tmp_path / f"a.{EXT[fmt]}", tmp_path / f"b.{EXT[fmt]}"
    write(train, fmt, tasks[:1500], y[:1500], feats[:1500], zero_one=True)
    write(test, fmt, tasks[1500:], y[1500:], feats[1500:], zero_one=True)
    saved = tmp_path / "m.omtl"
    narrow = ["--bits", "12"] if fmt == "vw" else []  # 4,096 hashed columns: a smaller model, as fast a test
    assert run(capsys, "learn", train, "--save", saved, "--quiet", *narrow)[0] == 0
    model = omtl.load(saved)
    data = read_data(test, n_features=model.n_features_in_) if fmt != "csv" else read_data(test)
    scores = model.decision_function(data.X, tasks=data.task_labels)
    raw = tmp_path / "raw.txt"
    code, out, err = run(capsys, "predict", test, "--model", saved, "--chunk-rows", "113", "-r", raw)
    assert code == 0, err
    assert out.split() == [str(v) for v in np.where(scores >= 0, 1, 0)]  # 0/1, as the training file
    assert np.array(raw.read_text().split(), dtype=float).tolist() == scores.tolist()  # exact: shortest repr
    assert "against the file's labels (500 rows): error" in err
    code, out, err = run(capsys, "predict", test, "--model", saved, "--probabilities", "--quiet")
    np.testing.assert_allclose(np.array(out.split(), dtype=float), 1 / (1 + np.exp(-scores)), rtol=1e-12)
    bad = tmp_path / f"c.{EXT[fmt]}"
    write(bad, fmt, ["t1", "t2", "never"], y[:3], feats[:3])
    code, out, err = run(capsys, "predict", bad, "--model", saved)
    assert code == 2 and "line" in err and "task 'never', which the model never saw" in err and out == ""


def svm_lines(n, width, seed):
    tasks, y, feats = rows(n, 7, width, seed)
    return "".join(f"{b} qid:{t} " + " ".join(f"{j}:{0.5 + j % 3}" for j in f) + "\n" for t, b, f in zip(tasks, y, feats))


def test_a_stream_without_its_width_widens_mtlinear(tmp_path):
    text = svm_lines(2000, 500, seed=5)
    (tmp_path / "d.svm").write_text(text)
    from_file = cli("learn", tmp_path / "d.svm", "-p", tmp_path / "f.txt", "--quiet")
    piped = cli("learn", "-", "--format", "svmlight", "-p", tmp_path / "s.txt", "--chunk-rows", "50",
                "--save", tmp_path / "m.omtl", "--quiet", stdin=text.encode())
    assert from_file.returncode == 0 and piped.returncode == 0, piped.stderr
    assert (tmp_path / "f.txt").read_text() == (tmp_path / "s.txt").read_text()
    # A learner that keeps its width says what it needs.
    fixed = cli("learn", "-", "--format", "svmlight", "--learner", "MTPerceptron", "--param", "n_tasks=7",
                stdin=text.encode())
    assert fixed.returncode == 2 and b"needs the width of a stream" in fixed.stderr
    assert b"Traceback" not in fixed.stderr


def test_a_later_file_with_new_indices_widens_the_saved_model(tmp_path, capsys):
    first, second = svm_lines(800, 50, seed=6), svm_lines(800, 90, seed=7)
    (tmp_path / "a.svm").write_text(first)
    (tmp_path / "b.svm").write_text(second)
    (tmp_path / "ab.svm").write_text(first + second)
    saved = tmp_path / "m.omtl"
    assert run(capsys, "learn", tmp_path / "a.svm", "--save", saved, "--quiet")[0] == 0
    code, _, err = run(capsys, "learn", tmp_path / "b.svm", "-i", saved, "-p", tmp_path / "b.txt", "--save", saved,
                       "--quiet")
    assert code == 0, err
    assert run(capsys, "learn", tmp_path / "ab.svm", "-p", tmp_path / "ab.txt", "--quiet")[0] == 0
    assert (tmp_path / "b.txt").read_text().split() == (tmp_path / "ab.txt").read_text().split()[800:]
    assert omtl.load(saved).n_features_in_ == 90
    # A learner that keeps its width names the first line beyond it.
    kept = tmp_path / "k.omtl"
    assert run(capsys, "learn", tmp_path / "a.svm", "--learner", "PAGlobal", "--param", "n_tasks=7", "--save", kept,
               "--quiet")[0] == 0
    code, _, err = run(capsys, "learn", tmp_path / "b.svm", "-i", kept, "--quiet")
    assert code == 2 and "b.svm, line" in err and "beyond the model's 50 feature columns" in err, err


@pytest.mark.skipif(sys.platform == "win32", reason="named pipes and /dev/fd")
@pytest.mark.parametrize("how", ["named pipe", "process substitution"])
def test_a_pipe_is_read_once(tmp_path, how):
    text = svm_lines(3000, 300, seed=8)
    (tmp_path / "d.svm").write_text(text)
    assert cli("learn", tmp_path / "d.svm", "-p", tmp_path / "f.txt", "--quiet").returncode == 0
    if how == "named pipe":
        fifo = tmp_path / "pipe.svm"
        os.mkfifo(fifo)

        def feed():
            with open(fifo, "w") as out:  # blocks until the command opens the pipe
                out.write(text)

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        done = cli("learn", fifo, "-p", tmp_path / "s.txt", "--quiet", timeout=60)
        writer.join(timeout=10)
    else:  # <(zcat f.gz): a /dev/fd path to a pipe
        read_end, write_end = os.pipe()
        writer = threading.Thread(target=lambda: (os.write(write_end, text.encode()), os.close(write_end)),
                                  daemon=True)
        writer.start()
        done = cli("learn", f"/dev/fd/{read_end}", "--format", "svmlight", "-p", tmp_path / "s.txt", "--quiet",
                   timeout=60, pass_fds=(read_end,))
        os.close(read_end)
        writer.join(timeout=10)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "s.txt").read_text() == (tmp_path / "f.txt").read_text()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_ctrl_c_stops_the_engine_loop_waiting_on_a_pipe(tmp_path):
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "omtl", "learn", "-", "--format", "svmlight"],
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


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_ctrl_c_stops_the_width_pass(tmp_path):
    import signal

    # 2.4 GB of svmlight in a small gzip file of identical members: the width pass alone takes
    # seconds; the report's header would show that learning had begun.
    member = gzip.compress(b"1 qid:a 1:1 2:0.5 3:1\n" * 400_000, compresslevel=1)
    path = tmp_path / "big.svm.gz"
    path.write_bytes(member * 300)
    proc = subprocess.Popen([sys.executable, "-m", "omtl", "learn", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        sent = time.perf_counter()
        _, err = proc.communicate(timeout=60)
        waited = time.perf_counter() - sent
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert b"average" not in err  # stopped during the width pass, before learning
    assert waited < 10, waited
