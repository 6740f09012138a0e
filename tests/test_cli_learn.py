"""`omtl learn` / `omtl predict` on small files the tests write: every format, gzip, standard input,
broken files, models saved from Python; exact equality with learning the same rows in Python."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import omtl
from omtl.cli import main
from omtl.datasets import iter_file
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
    """A separable two-task stream with string task ids: (task, label 0/1, X) rows."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    tasks = np.where(rng.random(n) < 0.5, "east", "west")
    y = np.where(np.where(tasks == "east", X[:, 0], -X[:, 0]) > 0, 1, 0)
    return tasks, y, X


def svm_text(tasks, y, X) -> str:
    return "".join(f"{1 if b else -1} qid:{t} 1:{float(a)!r} 2:{float(c)!r}\n" for t, b, (a, c) in zip(tasks, y, X))


def write_csv(path, tasks, y, X, task="shop", label="bought"):
    lines = [f"{task},x1,{label},x2"] + [f"{t},{float(a)!r},{b},{float(c)!r}" for t, b, (a, c) in zip(tasks, y, X)]
    path.write_text("\n".join(lines) + "\n")


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cli(*argv, stdin=b""):
    """The installed command in a fresh process (standard input, exit codes, no traceback)."""
    return subprocess.run([sys.executable, "-m", "omtl", *map(str, argv)], input=stdin, capture_output=True,
                          timeout=120)


# ---- reading ---------------------------------------------------------------------------------------
def test_svmlight_with_qid_is_read_in_file_order(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text(SVM)
    data = read_data(path)
    assert data.X.shape == (5, 3) and data.zero_based is False
    np.testing.assert_array_equal(data.X.toarray(), [[0.5, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 0.25], [2, 0.5, 0]])
    np.testing.assert_array_equal(data.y, [1, -1, 1, -1, 1])
    assert data.task_labels == ["alice", "bob", "alice", "carol", "bob"]


def test_bom_and_crlf_read_as_plain_lines(tmp_path):
    plain, windows = tmp_path / "p.svm", tmp_path / "w.svm"
    plain.write_text(SVM)
    windows.write_bytes(b"\xef\xbb\xbf" + SVM.replace("\n", "\r\n").encode())
    a, b = read_data(plain), read_data(windows)
    assert (a.X != b.X).nnz == 0 and a.task_labels == b.task_labels and a.y.tolist() == b.y.tolist()
    csv = tmp_path / "e.csv"
    csv.write_bytes(b"\xef\xbb\xbftask,label,x\r\n\"a, b\",1,0.5\r\nc,0,2\r\n")
    data = read_data(csv)
    assert data.task_labels == ["a, b", "c"] and data.X.tolist() == [[0.5], [2.0]] and data.feature_columns == ["x"]


def test_iter_file_chunks_are_bounded_and_add_up_to_the_whole_file(tmp_path):
    tasks, y, X = stream_rows(1000)
    path = tmp_path / "d.svm"
    path.write_text(svm_text(tasks, y, X))
    chunks = list(iter_file(path, chunk_rows=64))
    assert len(chunks) == 16 and all(c.X.shape[0] <= 64 for c in chunks)
    Xs, ys, ts = zip(*chunks)
    np.testing.assert_array_equal(np.vstack([x.toarray() for x in Xs]), X)
    np.testing.assert_array_equal(np.concatenate(ys), np.where(y > 0, 1, -1))
    assert np.concatenate(ts).tolist() == tasks.tolist()
    assert chunks[3].lines.tolist() == list(range(193, 257))
    assert len(list(iter_file(path, chunk_rows=10_000, chunk_bytes=2000))) > 10  # bytes bound too


def test_gzip_is_read_like_the_plain_file(tmp_path):
    plain, packed = tmp_path / "d.svm", tmp_path / "d.svm.gz"
    plain.write_text(SVM)
    packed.write_bytes(gzip.compress(SVM.encode()))
    a, b = read_data(plain), read_data(packed)
    assert (a.X != b.X).nnz == 0 and a.task_labels == b.task_labels


def test_vw_names_hash_as_feature_hasher(tmp_path):
    FeatureHasher = pytest.importorskip("sklearn.feature_extraction").FeatureHasher
    path = tmp_path / "d.vw"
    path.write_text("1 |t alice |s 3:0.5 word |w big:2\n-1 'x|w:0.5 big small:4 |t bob| naked\n0 |t alice\n")
    with pytest.raises(DataFileError, match="line 3: label 0 mixes -1/\\+1 with 0/1"):
        read_data(path)
    path.write_text("1 |t alice |s 3:0.5 word |w big:2\n-1 'x|w:0.5 big small:4 |t bob| naked\n")
    data = read_data(path)
    assert data.task_labels == ["alice", "bob"] and data.X.shape == (2, 2**18)
    hashed = FeatureHasher(n_features=2**18, input_type="dict", alternate_sign=False).transform(
        [{"s^word": 1.0, "w^big": 2.0}, {"w^big": 0.5, "w^small": 2.0, "naked": 1.0}]).toarray()
    hashed[0, 3] = 0.5  # a name of digits is its column index
    np.testing.assert_array_equal(data.X.toarray(), hashed)
    if hasattr(omtl, "hash_features"):
        np.testing.assert_array_equal(omtl.hash_features([{"s^word": 1.0, "w^big": 2.0}]).toarray()[0, 4:],
                                      hashed[0, 4:])
    path.write_text("1 'u7 |s a\n-1 'u8|t ignored\n")
    by_tag = read_data(path, task_namespace=None)
    assert by_tag.task_labels == ["u7", "u8"] and by_tag.X.nnz == 2


def test_huge_and_too_wide_indices_are_clean_errors(tmp_path):
    path = tmp_path / "h.svm"
    path.write_text("1 qid:a 1:1\n1 qid:a 9223372036854775808:1\n")
    with pytest.raises(DataFileError, match="h.svm, line 2: feature index 9223372036854775808 is 2\\^63 or more"):
        read_data(path)
    path.write_text("1 qid:a 1:1\n1 qid:a 9223372036854775807:1\n")
    with pytest.raises(DataFileError, match="the engine takes 1 to 4294967295"):
        read_data(path)
    path.write_text("1 qid:a 5:1\n")
    with pytest.raises(DataFileError, match="line 1: feature index 5 beyond the 3 feature columns"):
        read_data(path, n_features=3)


def test_the_line_cap_is_a_clear_error_or_a_skipped_line(tmp_path, capsys):
    path = tmp_path / "long.svm"
    path.write_text("1 qid:a 1:1\n-1 qid:a " + " ".join(f"{j}:1" for j in range(1, 2000)) + "\n1 qid:b 2:1\n")
    code, _, err = run(capsys, "learn", path, "--max-line-bytes", "1000", "--n-features", "2000")
    assert code == 2 and "long.svm, line 2: line of" in err and "--max-line-bytes" in err
    code, _, err = run(capsys, "learn", path, "--max-line-bytes", "1000", "--n-features", "2000", "--skip-bad-lines",
                       "--quiet")
    assert code == 0 and "skipped 1 bad lines (first:" in err and "line 2" in err


# ---- the command line ------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["svmlight", "vw", "csv"])
def test_learn_predictions_equal_learn_in_python_on_the_same_rows(tmp_path, capsys, fmt):
    tasks, y, X = stream_rows(3000, seed=4)
    tasks[-100:] = "nort"  # a task first seen in the last chunk (grown once, after the first chunk)
    path = tmp_path / f"d.{ {'svmlight': 'svm', 'vw': 'vw', 'csv': 'csv'}[fmt] }"
    if fmt == "svmlight":
        path.write_text(svm_text(tasks, y, X))
    elif fmt == "vw":
        path.write_text("".join(f"{1 if b else -1} |t {t} |s a:{float(p)!r} b:{float(q)!r}\n"
                                for t, b, (p, q) in zip(tasks, y, X)))
    else:
        write_csv(path, tasks, y, X, task="task", label="label")
    preds = tmp_path / "p.txt"
    code, _, err = run(capsys, "learn", path, "-p", preds, "--chunk-rows", "257", "--quiet")
    assert code == 0, err
    data = read_data(path)
    expected = omtl.MTLinear().learn(data.X, data.y, tasks=data.task_labels)  # one call, the whole file
    np.testing.assert_array_equal(np.array(preds.read_text().split(), dtype=int), expected)


def test_report_at_doubling_counts_summary_and_quiet(tmp_path, capsys):
    tasks, y, X = stream_rows(100)
    path = tmp_path / "d.svm"
    path.write_text(svm_text(tasks, y, X))
    code, out, err = run(capsys, "learn", path, "--chunk-rows", "7")
    assert code == 0 and out == ""
    report = [line.split() for line in err.splitlines() if len(line.split()) == 6 and line.split()[2].isdigit()]
    counters = [int(parts[2]) for parts in report]
    assert counters == [1, 2, 4, 8, 16, 32, 64]
    expected = omtl.MTLinear().learn(read_data(path).X, np.where(y > 0, 1, -1), tasks=tasks)
    loss = np.mean(expected != np.where(y > 0, 1, -1))
    assert "number of examples = 100" in err and f"average 0/1 loss = {loss:.6f}" in err and "tasks = 2" in err
    line_64 = report[-1]
    assert float(line_64[0]) == pytest.approx(np.mean((expected != np.where(y > 0, 1, -1))[:64]), abs=1e-6)
    assert float(line_64[1]) == pytest.approx(np.mean((expected != np.where(y > 0, 1, -1))[32:64]), abs=1e-6)
    assert run(capsys, "learn", path, "--quiet")[1:] == ("", "")


def test_passes_and_initial_model_continue_as_python_would(tmp_path, capsys):
    tasks, y, X = stream_rows(300, seed=5)
    first, second = tmp_path / "a.svm", tmp_path / "b.svm"
    first.write_text(svm_text(tasks[:150], y[:150], X[:150]))
    second.write_text(svm_text(tasks[150:], y[150:], X[150:]))
    model_file, preds = tmp_path / "m.omtl", tmp_path / "p.txt"
    assert run(capsys, "learn", first, "--passes", "2", "--save", model_file, "--quiet")[0] == 0
    code, _, err = run(capsys, "learn", second, "--initial-model", model_file, "-p", preds, "--quiet")
    assert code == 0, err
    model, pm1 = omtl.MTLinear(), np.where(y > 0, 1, -1)
    for _ in range(2):
        model.learn(X[:150], pm1[:150], tasks=tasks[:150])
    expected = model.learn(X[150:], pm1[150:], tasks=tasks[150:])
    np.testing.assert_array_equal(np.array(preds.read_text().split(), dtype=int), expected)


def test_csv_learn_then_predict_maps_tasks_and_columns_and_keeps_string_tasks(tmp_path, capsys):
    tasks, y, X = stream_rows(300, seed=1)
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    write_csv(train, tasks, y, X)
    model_file = tmp_path / "m.omtl"
    code, _, err = run(capsys, "learn", train, "--task-column", "shop", "--label-column", "bought",
                       "--save", model_file, "--quiet")
    assert code == 0, err
    model = omtl.load(model_file)
    assert sorted(model.tasks_.tolist()) == ["east", "west"]  # the file's strings, in Python too
    # The test file lists the columns in another order, has no labels and starts with "west".
    t2, _, X2 = stream_rows(40, seed=2)
    order = np.argsort(t2 == "east", kind="stable")
    t2, X2 = t2[order], X2[order]
    test.write_text("x2,shop,x1\n" + "".join(f"{float(c)!r},{t},{float(a)!r}\n" for t, (a, c) in zip(t2, X2)))
    out_file = tmp_path / "pred.txt"
    code, out, err = run(capsys, "predict", test, "--model", model_file, "--predictions", out_file)
    assert code == 0, err
    expected = np.where(model.decision_function(X2, tasks=list(t2)) >= 0, 1, 0)  # 0/1, as the training file
    np.testing.assert_array_equal(np.array(out_file.read_text().split(), dtype=int), expected)
    code, out, err = run(capsys, "predict", test, "--model", model_file)
    assert code == 0 and np.array(out.split(), dtype=int).tolist() == expected.tolist()


def test_predict_with_a_model_saved_from_python_with_open_ended_tasks(tmp_path, capsys):
    tasks, y, X = stream_rows(200, seed=6)
    ids = np.where(tasks == "east", 17, 4)  # integer task labels, n_tasks=None
    model = omtl.MTLinear().partial_fit(X, np.where(y > 0, 1, -1), tasks=ids)
    omtl.save(model, tmp_path / "py.omtl")
    path = tmp_path / "d.svm"
    path.write_text(svm_text(ids, y, X))
    code, out, err = run(capsys, "predict", path, "--model", tmp_path / "py.omtl")
    assert code == 0, err
    expected = np.where(model.decision_function(X, tasks=ids) >= 0, 1, -1)
    assert np.array(out.split(), dtype=int).tolist() == expected.tolist()
    # omtl learn continues it: the file's "17" is its task 17.
    code, _, err = run(capsys, "learn", path, "--initial-model", tmp_path / "py.omtl", "-p", tmp_path / "p.txt",
                       "--quiet")
    assert code == 0, err
    expected = model.learn(X, np.where(y > 0, 1, -1), tasks=ids)
    assert np.array((tmp_path / "p.txt").read_text().split(), dtype=int).tolist() == expected.tolist()
    path.write_text("1 qid:99 1:1\n")
    code, out, err = run(capsys, "predict", path, "--model", tmp_path / "py.omtl")
    assert code == 2 and "line 1: task '99', which the model never saw" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("metadata", [{"omtl_cli": "csv"}, {"omtl_cli": {"format": "xml"}},
                                      {"omtl_cli": {"format": "svmlight", "n_features": 7}},
                                      {"omtl_cli": {"format": "csv", "feature_columns": [1, 2]}}])
def test_bad_cli_metadata_in_a_model_file_is_one_line(tmp_path, capsys, metadata):
    tasks, y, X = stream_rows(50)
    model = omtl.MTLinear().partial_fit(X, np.where(y > 0, 1, -1), tasks=tasks)
    omtl.save(model, tmp_path / "m.omtl", metadata=metadata)
    (tmp_path / "d.svm").write_text(svm_text(tasks, y, X))
    for command in (["predict", tmp_path / "d.svm", "--model"], ["learn", tmp_path / "d.svm", "--initial-model"]):
        code, _, err = run(capsys, *command, tmp_path / "m.omtl")
        assert code == 2 and "omtl_cli metadata is invalid" in err and len(err.strip().splitlines()) == 1, err
    assert load_metadata(tmp_path / "m.omtl") == metadata


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("bad_feature.svm", "1 qid:a 1:1\n1 qid:a x:1\n", "bad_feature.svm, line 2: feature index \"x\""),
        ("bad_label.svm", "1 qid:a 1:1\n\n2 qid:a 1:1\n", "bad_label.svm, line 3: label \"2\""),
        ("negative_index.svm", "1 qid:a -1:1\n", "negative_index.svm, line 1: feature index \"-1\""),
        ("bad_value.svm", "1 qid:a 1:nan\n", "bad_value.svm, line 1: feature \"1:nan\""),
        ("mixed_qid.svm", "1 qid:a 1:1\n-1 1:1\n", "mixed_qid.svm, line 2: no task, unlike line 1"),
        ("mixed_labels.svm", "1 1:1\n-1 1:1\n0 1:1\n", "mixed_labels.svm, line 3: label 0 mixes"),
        ("latin1.svm", "1 qid:a 1:1\n1 qid:\udce9t 1:1\n", "latin1.svm, line 2: a task that is not UTF-8 text"),
        ("text.csv", "task,label,x\na,1,0.5\na,1,oops\n", "text.csv, line 3: column \"x\" holds \"oops\""),
        ("short.csv", "task,label,x\na,1\n", "short.csv, line 2: 2 fields, the header has 3"),
        ("nolabel.csv", "task,y,x\na,1,2\n", "no label column \"label\""),
        ("nobar.vw", "1 |t a |s x\n1 x\n", "nobar.vw, line 2: no '|'"),
        ("weight.vw", "1 0.5 |t a |s x\n", "weight.vw, line 1: importance weight \"0.5\""),
        ("empty.svm", "# nothing\n", "empty.svm: no examples"),
    ],
)
def test_a_bad_file_is_one_line_with_file_and_line_and_exit_code_2(tmp_path, capsys, name, text, expected):
    (tmp_path / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    code, out, err = run(capsys, "learn", tmp_path / name)
    assert code == 2
    assert expected in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_skip_bad_lines_counts_and_reports_them(tmp_path, capsys):
    path = tmp_path / "d.svm"
    path.write_text("1 qid:a 1:1\n1 qid:a x:1\n-1 qid:b 2:1\nfoo\n1 qid:a 1:2\n")
    code, _, err = run(capsys, "learn", path, "--skip-bad-lines")
    assert code == 0 and "number of examples = 3" in err
    assert "skipped bad lines = 2 (first: " in err and "d.svm, line 2: feature index" in err


def test_bad_learner_parameter_missing_file_and_format_are_one_line(tmp_path, capsys):
    data = tmp_path / "d.svm"
    data.write_text(SVM)
    for argv, expected in [
        (["learn", data, "--param", "learning_rat=1"], "learning_rate"),
        (["learn", data, "--param", "learning_rate=-1"], "learning_rate"),
        (["learn", tmp_path / "none.svm"], "none.svm: file not found"),
        (["learn", tmp_path / "d.xyz"], "pass --format"),
        (["learn", "-"], "cannot tell the format of standard input"),
        (["learn", data, "--passes", "0"], "--passes must be an integer >= 1, got 0"),
        (["predict", data, "--model", tmp_path / "none.omtl"], "none.omtl: model file not found"),
        (["predict", data, "--model", data], "not a readable omtl model file"),
    ]:
        code, out, err = run(capsys, *argv)
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("option", ["--chunk-rows", "--passes", "--n-features", "--max-line-bytes", "--bits"])
def test_a_negative_option_value_is_one_line_naming_the_option(tmp_path, capsys, option):
    data = tmp_path / "d.svm"
    data.write_text(SVM)
    for command in (["learn", data], ["predict", data, "--model", tmp_path / "m.omtl"]):
        if option == "--passes" and command[0] == "predict":
            continue
        code, out, err = run(capsys, *command, option, "-3")
        assert code == 2 and err.strip() == f"omtl {command[0]}: {option} must be an integer >= 1, got -3", err


def test_a_fixed_task_learner_from_the_command_line(tmp_path, capsys):
    data, model_file = tmp_path / "d.svm", tmp_path / "m.omtl"
    data.write_text(SVM)
    code, _, err = run(capsys, "learn", data, "--learner", "MTRBP", "--param", "budget=3", "--param", "kernel=rbf",
                       "--param", "gamma=scale", "--param", "n_tasks=3", "--save", model_file, "--quiet")
    assert code == 0, err
    X = read_data(data).X
    model = omtl.load(model_file)
    assert model.kernel_.gamma == pytest.approx(1.0 / (3 * X.toarray().var()))
    assert model.tasks_.tolist() == ["alice", "bob", "carol"]


def test_parquet_with_string_tasks(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    tasks, y, X = stream_rows(80)
    path = tmp_path / "d.parquet"
    pd.DataFrame({"who": tasks, "x1": X[:, 0], "x2": X[:, 1], "label": np.where(y > 0, 1, -1)}).to_parquet(path)
    saved, preds = tmp_path / "m.omtl", tmp_path / "p.txt"
    code, out, err = run(capsys, "learn", path, "--task-column", "who", "--save", saved, "-p", preds)
    assert code == 0 and "number of examples = 80" in err and "tasks = 2" in err, err
    expected = omtl.MTLinear().learn(X, np.where(y > 0, 1, -1), tasks=tasks)
    assert preds.read_text().split() == [str(p) for p in expected]
    # Predicting reads the table with the columns the model was trained on (its task column too),
    # whatever their order; no label column is needed.
    pd.DataFrame({"x2": X[:, 1], "who": tasks, "x1": X[:, 0]}).to_parquet(tmp_path / "t.parquet")
    code, out, err = run(capsys, "predict", tmp_path / "t.parquet", "--model", saved)
    model = omtl.load(saved)
    assert code == 0 and out.split() == [str(p) for p in model.predict(X, tasks=tasks)], err


def test_parquet_without_pandas_says_what_to_install(tmp_path, capsys, monkeypatch):
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    code, out, err = run(capsys, "learn", path)
    assert code == 2 and "reading Parquet needs pandas and pyarrow (pip install pandas pyarrow)" in err


def test_scikit_learn_svmlight_files_zero_based_with_query_id(tmp_path, capsys):
    datasets = pytest.importorskip("sklearn.datasets")
    tasks, y, X = stream_rows(60, seed=3)
    X = np.hstack([X, np.zeros((60, 1))])
    X[::7, 2] = 1.5
    path = tmp_path / "sk.svm"
    datasets.dump_svmlight_file(X, np.where(y > 0, 1, -1), str(path), query_id=np.where(tasks == "east", 0, 1))
    data = read_data(path)
    assert data.zero_based is True
    np.testing.assert_allclose(data.X.toarray(), X, rtol=1e-15)  # written with 16 significant digits
    model_file = tmp_path / "m.omtl"
    assert run(capsys, "learn", path, "--save", model_file, "--quiet")[0] == 0
    code, out, err = run(capsys, "predict", path, "--model", model_file)
    assert code == 0 and len(out.split()) == 60, err
    one_based = tmp_path / "one.svm"
    one_based.write_text("1 qid:a 1:1 2:1\n-1 qid:b 3:1\n")
    assert run(capsys, "learn", one_based, "--save", model_file, "--quiet")[0] == 0
    (tmp_path / "zero.svm").write_text("1 qid:a 1:1\n1 qid:a 0:1\n")
    code, out, err = run(capsys, "predict", tmp_path / "zero.svm", "--model", model_file)
    assert code == 2 and "zero.svm, line 2: feature index 0 in a 1-based file" in err
    (tmp_path / "wide.svm").write_text("1 qid:a 4:1\n")
    code, out, err = run(capsys, "predict", tmp_path / "wide.svm", "--model", model_file)
    assert code == 2 and "wide.svm, line 1: feature index 4 beyond the 3 feature columns" in err


def test_standard_input_plain_and_gzip_in_a_fresh_process(tmp_path):
    tasks, y, X = stream_rows(500, seed=7)
    text = "".join(f"{1 if b else -1} |t {t} |s a:{float(p)!r} b:{float(q)!r}\n" for t, b, (p, q) in zip(tasks, y, X))
    (tmp_path / "d.vw").write_text(text)
    from_file = cli("learn", tmp_path / "d.vw", "-p", tmp_path / "f.txt", "--quiet")
    piped = cli("learn", "-", "--format", "vw", "-p", tmp_path / "s.txt", "--save", tmp_path / "m.omtl",
                stdin=gzip.compress(text.encode()))
    assert from_file.returncode == 0 and piped.returncode == 0, piped.stderr.decode()
    assert (tmp_path / "f.txt").read_text() == (tmp_path / "s.txt").read_text()
    assert b"number of examples = 500" in piped.stderr
    predicted = cli("predict", "-", "--model", tmp_path / "m.omtl", stdin=text.encode())
    assert predicted.returncode == 0 and len(predicted.stdout.split()) == 500
    bad = cli("learn", "-", "--format", "vw", stdin=b"1 |t a |s x\n1 |t a |s x:zz\n")
    assert bad.returncode == 2 and bad.stderr.decode().strip() == (
        'omtl learn: <stdin>, line 2: feature "x:zz": value is not a finite number')
    wide = cli("learn", "-", "--format", "svmlight", "--learner", "MTRBP", "--param", "n_tasks=2", stdin=b"1 1:1\n")
    assert wide.returncode == 2 and b"needs the width of a stream" in wide.stderr and b"--n-features N" in wide.stderr
    assert b"Traceback" not in bad.stderr + wide.stderr


def test_reproduce_writes_to_a_fresh_folder_by_default(tmp_path, monkeypatch):
    from omtl.cli import fresh_results_dir

    monkeypatch.chdir(tmp_path)
    first = fresh_results_dir("table1")
    assert first.parent == Path("omtl-results") and first.name.startswith("table1-") and not first.exists()
    first.mkdir(parents=True)
    second = fresh_results_dir("table1")
    assert second != first and not second.exists()
    assert "docs" not in first.parts


# ---- outputs, edges and rows the learner refuses ------------------------------------------------------
def test_a_failed_run_leaves_no_partial_prediction_file(tmp_path, capsys):
    tasks, y, X = stream_rows(20000, seed=8)
    path = tmp_path / "d.svm"
    path.write_text(svm_text(tasks, y, X) + "1 qid:east 1:zz\n")  # a bad last line, many chunks after the first
    preds, raw = tmp_path / "p.txt", tmp_path / "r.txt"
    code, _, err = run(capsys, "learn", path, "-p", preds, "-r", raw, "--chunk-rows", "100", "--quiet")
    assert code == 2 and "line 20001" in err
    assert not preds.exists() and not raw.exists()
    preds.write_text("kept\n")  # an earlier file stays as it was
    assert run(capsys, "learn", path, "-p", preds, "--quiet")[0] == 2
    assert preds.read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.svm", "p.txt"]  # no temporary file left


def test_predictions_to_standard_output_with_a_dash(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tasks, y, X = stream_rows(50, seed=9)
    (tmp_path / "d.svm").write_text(svm_text(tasks, y, X))
    code, out, err = run(capsys, "learn", "d.svm", "-p", "-", "--quiet")
    assert code == 0, err
    expected = omtl.MTLinear().learn(read_data(tmp_path / "d.svm").X, np.where(y > 0, 1, -1), tasks=tasks)
    assert out.split() == [str(p) for p in expected]
    assert not (tmp_path / "-").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links")
def test_saving_through_a_symlink_writes_its_target(tmp_path, capsys):
    tasks, y, X = stream_rows(50, seed=10)
    (tmp_path / "d.svm").write_text(svm_text(tasks, y, X))
    (tmp_path / "models").mkdir()
    real, link = tmp_path / "models" / "real.omtl", tmp_path / "link.omtl"
    real.write_bytes(b"old")
    link.symlink_to(Path("models") / "real.omtl")  # a relative link
    preds_real, preds_link = tmp_path / "models" / "p.txt", tmp_path / "p.txt"
    preds_link.symlink_to(preds_real)
    assert run(capsys, "learn", tmp_path / "d.svm", "--save", link, "-p", preds_link, "--quiet")[0] == 0
    assert link.is_symlink() and preds_link.is_symlink()
    assert omtl.load(real).n_seen_ == 50 and len(preds_real.read_text().split()) == 50


def test_raw_scores_and_probabilities_while_learning(tmp_path, capsys):
    tasks, y, X = stream_rows(300, seed=11)
    path = tmp_path / "d.svm"
    path.write_text(svm_text(tasks, y, X))
    preds, raw, probs = tmp_path / "p.txt", tmp_path / "r.txt", tmp_path / "q.txt"
    assert run(capsys, "learn", path, "-p", preds, "-r", raw, "--quiet")[0] == 0
    assert run(capsys, "learn", path, "-p", probs, "--probabilities", "--quiet")[0] == 0
    scores = np.array(raw.read_text().split(), dtype=float)
    labels = np.array(preds.read_text().split(), dtype=int)
    assert (np.where(scores >= 0, 1, -1) == labels).all() and np.abs(scores).max() > 0.5
    np.testing.assert_allclose(np.array(probs.read_text().split(), dtype=float), 1 / (1 + np.exp(-scores)),
                               rtol=1e-12)
    code, _, err = run(capsys, "learn", path, "--learner", "MTPerceptron", "--param", "n_tasks=2", "-p", probs,
                       "--probabilities")
    assert code == 2 and "--probabilities: the scores of MTPerceptron are not log-odds" in err


@pytest.mark.parametrize(("line", "expected"), [
    ("1 qid:east 1:1e308 1:1e308\n", "feature column 0 is not finite once its duplicates are summed"),
    ("-1 qid:east 1:1e39\n", "single precision"),
])
def test_a_row_that_cannot_be_learned_names_its_line_and_can_be_skipped(tmp_path, capsys, line, expected):
    tasks, y, X = stream_rows(100, seed=12)
    lines = svm_text(tasks, y, X).splitlines(keepends=True)
    path = tmp_path / "d.svm"
    path.write_text("".join(lines[:50]) + line + "".join(lines[50:]))
    bad_line = 51
    code, _, err = run(capsys, "learn", path, "--quiet")
    assert code == 2 and f"d.svm, line {bad_line}: " in err and expected in err, err
    preds = tmp_path / "p.txt"
    code, _, err = run(capsys, "learn", path, "--skip-bad-lines", "-p", preds, "--quiet")
    assert code == 0 and f"skipped 1 bad lines (first: {path}, line {bad_line}: " in err, err
    expected_preds = omtl.MTLinear().learn(X, np.where(y > 0, 1, -1), tasks=tasks)
    assert preds.read_text().split() == [str(p) for p in expected_preds]


def test_parquet_rows_without_a_task_are_refused_or_skipped(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    tasks, y, X = stream_rows(40)
    who = tasks.astype(object)
    who[5] = None
    path = tmp_path / "d.parquet"
    pd.DataFrame({"who": who, "x1": X[:, 0], "x2": X[:, 1], "label": np.where(y > 0, 1, -1)}).to_parquet(path)
    code, _, err = run(capsys, "learn", path, "--task-column", "who", "--quiet")
    assert code == 2 and "d.parquet, row 6: no task id in column 'who'" in err, err
    code, _, err = run(capsys, "learn", path, "--task-column", "who", "--skip-bad-lines")
    assert code == 0 and "number of examples = 39" in err and "tasks = 2" in err, err
    assert "skipped bad lines = 1" in err and "row 6: no task id" in err


def test_an_unwritable_output_stops_the_run_before_it_learns(tmp_path, capsys):
    tasks, y, X = stream_rows(50, seed=13)
    (tmp_path / "d.svm").write_text(svm_text(tasks, y, X))
    for option in ("-p", "-r"):
        code, out, err = run(capsys, "learn", tmp_path / "d.svm", option, tmp_path / "no" / "p.txt")
        assert code == 2 and "p.txt: cannot be written" in err and "average" not in err, err
        assert len(err.strip().splitlines()) == 1
    code, out, err = run(capsys, "learn", tmp_path / "d.svm", "-p", "-", "-r", "-")
    assert code == 2 and "standard output takes one output" in err


@pytest.mark.skipif(sys.platform == "win32", reason="/dev/fd")
def test_iter_file_reads_a_pipe_once_given_its_width(tmp_path):
    import os
    import threading

    tasks, y, X = stream_rows(500, seed=14)
    text = svm_text(tasks, y, X).encode()
    (tmp_path / "d.svm").write_bytes(text)
    read_end, write_end = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write_end, text), os.close(write_end)), daemon=True)
    writer.start()
    try:
        piped = list(iter_file(f"/dev/fd/{read_end}", fmt="svmlight", n_features=2, chunk_rows=64))
    finally:
        os.close(read_end)
        writer.join(timeout=10)
    whole = read_data(tmp_path / "d.svm")
    assert (sp_vstack([c.X for c in piped]) != whole.X).nnz == 0
    null = os.open(os.devnull, os.O_RDONLY)  # a device: read once, as a pipe
    try:
        with pytest.raises(DataFileError, match="needs the width"):
            list(iter_file(f"/dev/fd/{null}", fmt="svmlight"))
    finally:
        os.close(null)


def sp_vstack(blocks):
    import scipy.sparse as sp

    return sp.vstack(blocks, format="csr")
