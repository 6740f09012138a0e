"""`omtl learn` / `omtl predict` on small files the tests write (svmlight with qid, CSV, Parquet,
broken files)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import omtl
from omtl.cli import main
from omtl.cli_learn import build_learner, map_tasks, parse_value
from omtl.datasets.files import DataFileError, read_data
from omtl.persistence import load_metadata

SVM = """\
# a comment line
1 qid:alice 1:0.5 3:1.0
-1 qid:bob 2:1 # trailing comment
+1 qid:alice 1:1
-1 qid:carol 3:0.25
1 qid:bob 1:2 2:0.5
"""


def stream_rows(n=200, seed=0):
    """A separable two-task stream with string task ids: (task, label, x1, x2) rows."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    tasks = np.where(rng.random(n) < 0.5, "east", "west")
    y = np.where(np.where(tasks == "east", X[:, 0], -X[:, 0]) > 0, 1, 0)
    return tasks, y, X


def write_csv(path, tasks, y, X, task="shop", label="bought"):
    lines = [f"{task},x1,{label},x2"] + [f"{t},{float(a)!r},{b},{float(c)!r}" for t, b, (a, c) in zip(tasks, y, X)]
    path.write_text("\n".join(lines) + "\n")


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_svmlight_with_qid_is_read_in_file_order(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text(SVM)
    data = read_data(path)
    assert data.X.shape == (5, 3)
    np.testing.assert_array_equal(data.X.toarray(), [[0.5, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 0.25], [2, 0.5, 0]])
    np.testing.assert_array_equal(data.y, [1, -1, 1, -1, 1])
    assert data.task_labels == ["alice", "bob", "alice", "carol", "bob"]
    ids, mapping = map_tasks(data.task_labels)
    np.testing.assert_array_equal(ids, [0, 1, 0, 2, 1])
    assert mapping == ["alice", "bob", "carol"]


def test_svmlight_without_qid_is_one_task(tmp_path):
    path = tmp_path / "d.libsvm"
    path.write_text("1 1:1\n0 2:1\n")
    data = read_data(path)
    assert data.task_labels == ["0", "0"] and data.y.tolist() == [1, 0]


def test_map_tasks_with_a_known_mapping_rejects_a_new_task():
    ids, _ = map_tasks(["b", "a"], ["a", "b"])
    assert ids.tolist() == [1, 0]
    with pytest.raises(DataFileError, match="'z', which the model never saw"):
        map_tasks(["a", "z"], ["a", "b"], path="f.csv")


def test_parse_value_and_unknown_parameters():
    assert [parse_value(v) for v in ("3", "0.5", "true", "False", "none", "rbf", "1e-3")] == [
        3, 0.5, True, False, None, "rbf", 1e-3]
    model = build_learner("mtperceptron", ["kernel=rbf", "gamma=0.5"], n_tasks=3)
    assert isinstance(model, omtl.MTPerceptron) and model.gamma == 0.5 and model.n_tasks == 3
    with pytest.raises(ValueError, match=r"MTRBP has no parameter 'bugdet'; valid: .*budget"):
        build_learner("MTRBP", ["bugdet=10"], n_tasks=2)
    with pytest.raises(ValueError, match="unknown learner 'Nope'; choose one of: .*MTLinear"):
        build_learner("Nope", [], n_tasks=2)
    with pytest.raises(ValueError, match="key=value"):
        build_learner("MTLinear", ["learning_rate"], n_tasks=2)


def test_learn_svmlight_prints_metrics_writes_predictions_and_model(tmp_path, capsys):
    tasks, y, X = stream_rows()
    lines = [f"{1 if b else -1} qid:{t} 1:{float(a)!r} 2:{float(c)!r}" for t, b, (a, c) in zip(tasks, y, X)]
    data = tmp_path / "s.svm"
    data.write_text("\n".join(lines) + "\n")
    preds, model_file = tmp_path / "p.txt", tmp_path / "m.omtl"
    code, out, err = run(capsys, "learn", data, "--learner", "MTPerceptron", "--param", "graph=disconnected",
                         "--predictions", preds, "--save", model_file, "--no-progress")
    assert code == 0, err
    assert "200 examples, 2 features, 2 tasks" in out and "error " in out and "F1 micro" in out and "examples/s" in out
    written = np.array(preds.read_text().split(), dtype=int)
    # The same pass in Python, by hand: the file's predictions are the pre-update predictions.
    ids, _ = map_tasks(list(tasks))
    expected = omtl.MTPerceptron(n_tasks=2, graph="disconnected").learn(X, np.where(y > 0, 1, -1), tasks=ids)
    np.testing.assert_array_equal(written, expected)
    error = float(np.mean(expected != np.where(y > 0, 1, -1)))
    assert f"error {100 * error:.2f} %" in out
    saved = omtl.load(model_file)
    assert isinstance(saved, omtl.MTPerceptron) and saved.n_seen_ == 200
    assert load_metadata(model_file)["omtl_cli"]["tasks"] == ["east" if tasks[0] == "east" else "west",
                                                              "west" if tasks[0] == "east" else "east"]


def test_learn_csv_then_predict_maps_tasks_and_columns_the_same_way(tmp_path, capsys):
    tasks, y, X = stream_rows(300, seed=1)
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    write_csv(train, tasks, y, X)
    model_file = tmp_path / "m.omtl"
    code, out, err = run(capsys, "learn", train, "--task-column", "shop", "--label-column", "bought",
                         "--save", model_file, "--no-progress")
    assert code == 0, err
    # The test file lists the columns in another order, has no labels and starts with "west".
    t2, _, X2 = stream_rows(40, seed=2)
    order = np.argsort(t2 == "east", kind="stable")
    t2, X2 = t2[order], X2[order]
    test.write_text("x2,shop,x1\n" + "".join(f"{float(c)!r},{t},{float(a)!r}\n" for t, (a, c) in zip(t2, X2)))
    out_file = tmp_path / "pred.txt"
    code, out, err = run(capsys, "predict", test, "--model", model_file, "--predictions", out_file)
    assert code == 0, err
    model = omtl.load(model_file)
    mapping = load_metadata(model_file)["omtl_cli"]["tasks"]
    ids = np.array([mapping.index(t) for t in t2])
    expected = np.where(model.decision_function(X2, tasks=ids) >= 0, 1, 0)  # 0/1, as the training file
    np.testing.assert_array_equal(np.array(out_file.read_text().split(), dtype=int), expected)
    # Without --predictions they go to standard output, one per line.
    code, out, err = run(capsys, "predict", test, "--model", model_file)
    assert code == 0 and np.array(out.split(), dtype=int).tolist() == expected.tolist()


def test_predict_an_unknown_task_is_one_line(tmp_path, capsys):
    tasks, y, X = stream_rows(50)
    train = tmp_path / "t.csv"
    write_csv(train, tasks, y, X, task="task", label="label")
    model_file = tmp_path / "m.omtl"
    assert run(capsys, "learn", train, "--save", model_file, "--no-progress")[0] == 0
    other = tmp_path / "o.csv"
    write_csv(other, ["north"], [1], X[:1], task="task", label="label")
    code, out, err = run(capsys, "predict", other, "--model", model_file)
    assert code == 2 and "'north', which the model never saw" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("bad_feature.svm", "1 qid:a 1:1\n1 qid:a x:1\n", "bad_feature.svm, line 2: feature 'x:1'"),
        ("bad_label.svm", "1 qid:a 1:1\n\n2 qid:a 1:1\n", "bad_label.svm, line 3: label '2'"),
        ("negative_index.svm", "1 qid:a -1:1\n", "negative_index.svm, line 1: feature '-1:1'"),
        ("mixed_qid.svm", "1 qid:a 1:1\n-1 1:1\n", "mixed_qid.svm, line 2: no qid: field, unlike line 1"),
        ("mixed_labels.svm", "1 1:1\n-1 1:1\n0 1:1\n", "mixed_labels.svm, line 3: label 0 mixes"),
        ("text.csv", "task,label,x\na,1,0.5\na,1,oops\n", "text.csv, line 3: column 'x' holds 'oops'"),
        ("short.csv", "task,label,x\na,1\n", "short.csv, line 2: 2 fields, the header has 3"),
        ("nolabel.csv", "task,y,x\na,1,2\n", "no label column 'label'"),
        ("empty.svm", "# nothing\n", "empty.svm: no examples"),
    ],
)
def test_a_bad_file_is_one_line_with_file_and_line_and_exit_code_2(tmp_path, capsys, name, text, expected):
    (tmp_path / name).write_text(text)
    code, out, err = run(capsys, "learn", tmp_path / name, "--no-progress")
    assert code == 2
    assert expected in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_learner_parameter_missing_file_and_format_are_one_line(tmp_path, capsys):
    data = tmp_path / "d.svm"
    data.write_text(SVM)
    for argv, expected in [
        (["learn", data, "--param", "learning_rat=1"], "valid: graph, loss, update, learning_rate"),
        (["learn", data, "--param", "learning_rate=-1"], "learning_rate"),
        (["learn", tmp_path / "none.svm"], "none.svm: file not found"),
        (["learn", tmp_path / "d.xyz"], "pass --format"),
        (["predict", data, "--model", tmp_path / "none.omtl"], "none.omtl"),
    ]:
        code, out, err = run(capsys, *argv, *(["--no-progress"] if argv[0] == "learn" else []))
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err


def test_parquet_with_string_tasks(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    tasks, y, X = stream_rows(80)
    path = tmp_path / "d.parquet"
    pd.DataFrame({"who": tasks, "x1": X[:, 0], "x2": X[:, 1], "label": np.where(y > 0, 1, -1)}).to_parquet(path)
    code, out, err = run(capsys, "learn", path, "--task-column", "who", "--no-progress")
    assert code == 0 and "80 examples, 2 features, 2 tasks" in out, err


def test_gamma_scale_from_the_command_line_round_trips_through_the_model_file(tmp_path, capsys):
    data, model_file = tmp_path / "d.svm", tmp_path / "m.omtl"
    data.write_text(SVM)
    code, _, err = run(capsys, "learn", data, "--learner", "MTRBP", "--param", "budget=3", "--param", "kernel=rbf",
                       "--param", "gamma=scale", "--save", model_file, "--no-progress")
    assert code == 0, err
    X = read_data(data).X
    model = omtl.load(model_file)
    assert model.kernel_.gamma == pytest.approx(1.0 / (3 * X.toarray().var()))


def test_reproduce_writes_to_a_fresh_folder_by_default(tmp_path, monkeypatch):
    from omtl.cli import fresh_results_dir

    monkeypatch.chdir(tmp_path)
    first = fresh_results_dir("table1")
    assert first.parent == Path("omtl-results") and first.name.startswith("table1-") and not first.exists()
    first.mkdir(parents=True)
    second = fresh_results_dir("table1")
    assert second != first and not second.exists()
    # The committed outputs are never the default.
    assert "docs" not in first.parts


def test_scikit_learn_svmlight_files_zero_based_with_query_id(tmp_path, capsys):
    datasets = pytest.importorskip("sklearn.datasets")
    tasks, y, X = stream_rows(60, seed=3)
    X = np.hstack([X, np.zeros((60, 1))])
    X[::7, 2] = 1.5
    path = tmp_path / "sk.svm"
    ids, _ = map_tasks(list(tasks))
    datasets.dump_svmlight_file(X, np.where(y > 0, 1, -1), str(path), query_id=ids)  # 0-based indices
    data = read_data(path)
    assert data.zero_based is True
    np.testing.assert_allclose(data.X.toarray(), X, rtol=1e-15)  # written with 16 significant digits
    model_file = tmp_path / "m.omtl"
    assert run(capsys, "learn", path, "--save", model_file, "--no-progress")[0] == 0
    # predict reads the same indexing; a 1-based model refuses an index 0.
    code, out, err = run(capsys, "predict", path, "--model", model_file)
    assert code == 0 and len(out.split()) == 60, err
    one_based = tmp_path / "one.svm"
    one_based.write_text("1 qid:a 1:1 2:1\n-1 qid:b 3:1\n")
    assert run(capsys, "learn", one_based, "--save", model_file, "--no-progress")[0] == 0
    (tmp_path / "zero.svm").write_text("1 qid:a 1:1\n1 qid:a 0:1\n")
    code, out, err = run(capsys, "predict", tmp_path / "zero.svm", "--model", model_file)
    assert code == 2 and "zero.svm, line 2: feature index 0, but the model was trained on a 1-based file" in err
    (tmp_path / "wide.svm").write_text("1 qid:a 4:1\n")
    code, out, err = run(capsys, "predict", tmp_path / "wide.svm", "--model", model_file)
    assert code == 2 and "wide.svm, line 1: feature index 4 beyond the model's 3 features" in err


def test_no_progress_noise_off_a_terminal_and_non_utf8_is_one_line(tmp_path, capsys):
    data = tmp_path / "d.svm"
    data.write_text(SVM)
    code, out, err = run(capsys, "learn", data)  # capsys is not a terminal: no bar, nothing on stderr
    assert code == 0 and err == ""
    bad = tmp_path / "latin1.svm"
    bad.write_bytes(b"1 qid:a 1:1\n1 qid:\xe9t\xe9 1:1\n")
    code, out, err = run(capsys, "learn", bad)
    assert code == 2 and "latin1.svm, line 2: not UTF-8 text" in err


def test_parquet_without_pandas_says_what_to_install(tmp_path, capsys, monkeypatch):
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    code, out, err = run(capsys, "learn", path)
    assert code == 2 and "reading Parquet needs pandas and pyarrow (pip install pandas pyarrow)" in err
