"""Tests of the real-data loaders (ALGORITHMS.md §7.3) and of Stream.shuffled / Stream.as_rounds.

Data are found through ``OMTL_DATA`` or at ``<repo>/../shared/data``; the tests that need the real
files are skipped when that folder is absent. The counts are those recorded in each data set's
PROVENANCE.md.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from omtl.datasets import loaders
from omtl.datasets._stream import Stream

DATA = Path(os.environ["OMTL_DATA"]) if os.environ.get("OMTL_DATA") else (
    Path(__file__).resolve().parents[1].parent / "shared" / "data"
)
needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"real data folder {DATA} not found (set OMTL_DATA to run these tests)"
)


# ---------------------------------------------------------------------------------------------
# common checks
# ---------------------------------------------------------------------------------------------


def _check_common(s: Stream, n: int, d: int, n_tasks: int, positives: int, per_task=None, task_sizes=None,
                  task_positives=None, nnz=None):
    """The checks every loaded stream passes; ``per_task``: the exact rows per task;
    ``task_sizes``: the fewest and most rows of a task, for a dense stream; ``task_positives``:
    the positives per task; ``nnz``: the non-zeros of a sparse stream (of unit-norm rows)."""
    assert isinstance(s, Stream)
    assert len(s) == n and s.X.shape == (n, d) and s.n_features == d
    assert s.n_tasks == n_tasks and len(s.task_names) == n_tasks
    assert s.y.dtype == np.int8 and s.y.shape == (n,)
    assert set(np.unique(s.y).tolist()) <= {-1, 1}
    assert int((s.y == 1).sum()) == positives
    assert s.tasks.dtype == np.int64 and s.tasks.shape == (n,)
    # file order: tasks concatenated in task order
    assert np.all(np.diff(s.tasks) >= 0) and s.tasks[0] == 0 and s.tasks[-1] == n_tasks - 1
    if per_task is not None:
        np.testing.assert_array_equal(s.task_counts(), per_task)
    assert s.X.dtype == np.float64
    assert s.rounds is None
    if task_positives is not None:
        np.testing.assert_array_equal(_positives_per_task(s), task_positives)
    if nnz is not None:
        assert s.X.nnz == nnz
        _check_csr_unit_rows(s)
    if task_sizes is not None:
        counts = s.task_counts()
        assert (counts.min(), counts.max()) == task_sizes
        assert isinstance(s.X, np.ndarray) and s.X.flags.c_contiguous


def _check_csr_unit_rows(s: Stream):
    X = s.X
    assert sp.isspmatrix_csr(X) or isinstance(X, sp.csr_array)
    assert X.has_sorted_indices
    assert X.has_canonical_format
    # indices strictly increasing inside every row (sorted, no duplicates), checked directly
    inner = np.diff(X.indices)
    row_starts = X.indptr[1:-1]
    mask = np.ones(inner.size, dtype=bool)
    mask[row_starts[(row_starts > 0) & (row_starts <= inner.size)] - 1] = False
    assert np.all(inner[mask] > 0)
    assert np.all(X.data > 0) and np.all(np.isfinite(X.data))
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, rtol=0, atol=1e-12)


def _positives_per_task(s: Stream) -> np.ndarray:
    return np.bincount(s.tasks[s.y == 1], minlength=s.n_tasks)


def _columns_used(X, rows) -> int:
    return int(np.unique(X[rows].indices).size)


# ---------------------------------------------------------------------------------------------
# real data: counts from PROVENANCE.md
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def school():
    return loaders.load_school(DATA)


@pytest.fixture(scope="module")
def landmine():
    return loaders.load_landmine(DATA)


@needs_data
def test_school(school):
    s = school
    _check_common(s, n=15362, d=28, n_tasks=139, positives=3608, task_sizes=(22, 251))
    assert s.X.min() == 0.0 and s.X.max() == 1.0
    # columns 3 and 4 are the non-binary ones, rescaled to exactly [0, 1]
    for j in (3, 4):
        assert s.X[:, j].min() == 0.0 and s.X[:, j].max() == 1.0
        assert np.unique(s.X[:, j]).size > 2
    # every other column is binary {0,1}; column 27 is the bias already in the file
    others = [j for j in range(28) if j not in (3, 4)]
    assert set(np.unique(s.X[:, others]).tolist()) <= {0.0, 1.0}
    np.testing.assert_array_equal(s.X[:, 27], 1.0)
    # labels: pooled 75th percentile of the raw scores is 29, strict inequality
    raw = scipy.io.loadmat(str(DATA / "school" / "school.mat"))
    scores = np.concatenate([np.asarray(v, dtype=float).ravel() for v in raw["Y"][0]])
    assert np.percentile(scores, 75) == 29.0
    np.testing.assert_array_equal(s.y, np.where(scores > 29, 1, -1))
    assert abs((s.y == 1).mean() - 0.235) < 0.001


@needs_data
def test_landmine(landmine):
    s = landmine
    _check_common(s, n=14820, d=10, n_tasks=29, positives=904, task_sizes=(445, 690))
    pos = _positives_per_task(s)
    assert pos.min() == 15 and pos.max() == 48
    np.testing.assert_array_equal(s.X[:, :9].min(axis=0), 0.0)
    np.testing.assert_array_equal(s.X[:, :9].max(axis=0), 1.0)
    np.testing.assert_array_equal(s.X[:, 9], 1.0)


@needs_data
@pytest.mark.parametrize(
    "pair, sizes, positives, nnz",
    [
        ("comp.vs.sci", [1875, 1827], [967, 871], 100922 + 90209),
        ("rec.vs.talk", [1844, 1545], [975, 860], 110726 + 78608),
    ],
)
def test_newsgroups(pair, sizes, positives, nnz):
    s = loaders.load_newsgroups(DATA, pair=pair)
    _check_common(s, n=sum(sizes), d=2000, n_tasks=2, positives=sum(positives), per_task=sizes, task_positives=positives, nnz=nnz)


@needs_data
def test_ecml2006_task_a():
    s = loaders.load_ecml2006(DATA, task="a")
    _check_common(s, n=7500, d=106780, n_tasks=3, positives=3750, per_task=[2500] * 3, task_positives=[1250] * 3, nnz=985927)
    assert np.unique(s.X.indices).size == 39962
    assert [_columns_used(s.X, s.tasks == t) for t in range(3)] == [26580, 27523, 20227]
    # shared dictionary: user u00's ids stop at 48,784 (column 48,783)
    assert s.X[s.tasks == 0].indices.max() == 48783


@needs_data
def test_ecml2006_task_b():
    s = loaders.load_ecml2006(DATA, task="b")
    _check_common(s, n=6000, d=152543, n_tasks=15, positives=3000, per_task=[400] * 15, task_positives=[200] * 15, nnz=922884)
    assert np.unique(s.X.indices).size == 37120


@needs_data
def test_sentiment():
    s = loaders.load_sentiment(DATA)
    _check_common(s, n=8000, d=473856, n_tasks=4, positives=4000, per_task=[2000] * 4, task_positives=[1000] * 4, nnz=1519266)
    assert s.task_names == ("books", "dvd", "electronics", "kitchen")
    # file order: in every domain the positive file comes first
    for t in range(4):
        yt = s.y[s.tasks == t]
        assert np.all(yt[:1000] == 1) and np.all(yt[1000:] == -1)
    assert [_columns_used(s.X, s.tasks == t) for t in range(4)] == [195887, 188778, 111407, 93474]
    # vocabulary in order of first appearance: the first review's first token is "holes"
    first = (DATA / "sentiment" / "books" / "positive.review").open(encoding="utf-8").readline().split()
    assert first[0].rsplit(":", 1)[0] == "holes"
    assert s.X[0, 0] > 0
    # books alone introduces ids 0 .. 195886: books' used columns are exactly that prefix
    books_cols = np.unique(s.X[s.tasks == 0].indices)
    np.testing.assert_array_equal(books_cols, np.arange(195887))


@needs_data
def test_pu_spam():
    s = loaders.load_pu_spam(DATA)
    widths = [24748, 16425, 69600, 24551]
    sizes = [1090, 710, 4130, 1140]
    _check_common(s, n=7070, d=sum(widths), n_tasks=4, positives=3010, per_task=sizes, task_positives=[480, 140, 1820, 570])
    _check_csr_unit_rows(s)
    assert s.task_names == ("pu1", "pu2", "pu3", "pua")
    # per-corpus feature blocks: every task stays inside its own block of columns
    offsets = np.concatenate([[0], np.cumsum(widths)])
    distinct = [24728, 16339, 69414, 24521]
    for t in range(4):
        cols = s.X[s.tasks == t].indices
        assert cols.min() >= offsets[t] and cols.max() < offsets[t + 1]
        assert np.unique(cols).size == distinct[t]


# ---------------------------------------------------------------------------------------------
# Stream.shuffled and Stream.as_rounds
# ---------------------------------------------------------------------------------------------


def _toy_stream() -> Stream:
    rng = np.random.default_rng(0)
    sizes = [5, 1, 8, 3]
    tasks = np.repeat(np.arange(4), sizes)
    n = tasks.size
    return Stream(
        X=rng.normal(size=(n, 3)),
        y=np.where(rng.random(n) < 0.5, 1, -1).astype(np.int8),
        tasks=tasks.astype(np.int64),
        n_tasks=4,
        name="toy",
    )


def _streams(request):
    out = [_toy_stream()]
    if DATA.is_dir():
        out.append(request.getfixturevalue("landmine"))
    return out


def _row_ids(s: Stream) -> np.ndarray:
    """Recover original row indices via a column we add: the rows of X are unique."""
    return s.X[:, -1].astype(np.int64)


def _tagged(s: Stream) -> Stream:
    """Append a column with the original row index so permutations can be traced."""
    X = np.hstack([np.asarray(s.X), np.arange(len(s), dtype=np.float64)[:, None]])
    return Stream(X=X, y=s.y, tasks=s.tasks, n_tasks=s.n_tasks, name=s.name, task_names=s.task_names)


def test_shuffled(request):
    for base in _streams(request):
        s = _tagged(base)
        a, b, c = s.shuffled(7), s.shuffled(7), s.shuffled(8)
        ia, ib, ic = _row_ids(a), _row_ids(b), _row_ids(c)
        np.testing.assert_array_equal(ia, ib)  # reproducible
        np.testing.assert_array_equal(np.sort(ia), np.arange(len(s)))  # a permutation
        assert not np.array_equal(ia, ic)  # different seeds differ
        assert not np.array_equal(ia, np.arange(len(s)))
        # rows, labels and tasks move together
        np.testing.assert_array_equal(a.y, s.y[ia])
        np.testing.assert_array_equal(a.tasks, s.tasks[ia])
        np.testing.assert_array_equal(a.X, s.X[ia])
        assert a.n_tasks == s.n_tasks and len(a) == len(s)


@pytest.mark.parametrize("seed", [None, 0, 3])
def test_as_rounds(request, seed):
    for base in _streams(request):
        s = _tagged(base)
        r = s.as_rounds(seed)
        ids = _row_ids(r)
        counts = s.task_counts()
        assert len(r) == len(s)
        np.testing.assert_array_equal(np.sort(ids), np.arange(len(s)))  # every row exactly once
        np.testing.assert_array_equal(r.tasks, s.tasks[ids])
        np.testing.assert_array_equal(r.y, s.y[ids])
        assert r.rounds is not None and r.rounds.dtype == np.int64
        assert np.all(np.diff(r.rounds) >= 0) and r.rounds[0] == 0  # rounds are consecutive blocks
        n_rounds = int(r.rounds.max()) + 1
        assert n_rounds == counts.max()
        for t in range(n_rounds):
            in_round = r.tasks[r.rounds == t]
            assert np.all(np.diff(in_round) > 0)  # at most one row per task, ascending task order
            np.testing.assert_array_equal(in_round, np.flatnonzero(counts > t))  # P_t = {i : n_i > t}
        if seed is None:  # file order inside each task
            for task in range(s.n_tasks):
                np.testing.assert_array_equal(ids[r.tasks == task], np.flatnonzero(s.tasks == task))
        else:
            again = _row_ids(s.as_rounds(seed))
            np.testing.assert_array_equal(ids, again)
            other = _row_ids(s.as_rounds(seed + 1))
            assert not np.array_equal(ids, other)


# ---------------------------------------------------------------------------------------------
# default_data_dir
# ---------------------------------------------------------------------------------------------


def test_default_data_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("OMTL_DATA", str(tmp_path))
    assert loaders.default_data_dir() == tmp_path


def test_default_data_dir_relative(monkeypatch, tmp_path):
    monkeypatch.delenv("OMTL_DATA", raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    assert loaders.default_data_dir() == (tmp_path / "shared" / "data").resolve()


def test_default_data_dir_missing(monkeypatch, tmp_path):
    monkeypatch.delenv("OMTL_DATA", raising=False)
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    with pytest.raises(FileNotFoundError, match="OMTL_DATA"):
        loaders.default_data_dir()
    with pytest.raises(FileNotFoundError, match="data_dir"):
        loaders.load_school()


# ---------------------------------------------------------------------------------------------
# errors: missing directory, malformed files, bad arguments
# ---------------------------------------------------------------------------------------------

ALL_LOADERS = [
    (loaders.load_school, {}, "school.mat"),
    (loaders.load_landmine, {}, "LandmineData.mat"),
    (loaders.load_newsgroups, {"pair": "comp.vs.sci"}, "task1.mat"),
    (loaders.load_newsgroups, {"pair": "rec.vs.talk"}, "Task1.mat"),
    (loaders.load_ecml2006, {"task": "a"}, "task_a_u00_eval_lab.tf"),
    (loaders.load_ecml2006, {"task": "b"}, "task_b_u00_eval_lab.tf"),
    (loaders.load_sentiment, {}, "positive.review"),
    (loaders.load_pu_spam, {}, "pu_corpora_public.tar.gz"),
]


@pytest.mark.parametrize("loader, kwargs, fname", ALL_LOADERS)
def test_missing_directory(tmp_path, loader, kwargs, fname):
    with pytest.raises(FileNotFoundError, match=fname.replace(".", r"\.")):
        loader(tmp_path / "does_not_exist", **kwargs)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="pair"):
        loaders.load_newsgroups(tmp_path, pair="alt.vs.misc")
    with pytest.raises(ValueError, match="task"):
        loaders.load_ecml2006(tmp_path, task="c")


def _write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "loader, kwargs, relpath",
    [
        (loaders.load_school, {}, "school/school.mat"),
        (loaders.load_landmine, {}, "landmine/LandmineData.mat"),
        (loaders.load_newsgroups, {"pair": "comp.vs.sci"}, "newsgroups_malsar/comp.vs.sci/task1.mat"),
        (loaders.load_pu_spam, {}, "pu_spam/pu_corpora_public.tar.gz"),
    ],
)
def test_garbage_binary_file(tmp_path, loader, kwargs, relpath):
    bad = _write(tmp_path / relpath, b"this is not the expected binary format\n" * 4)
    with pytest.raises(ValueError, match=bad.name.replace(".", r"\.")):
        loader(tmp_path, **kwargs)


def test_mat_missing_variable(tmp_path):
    path = tmp_path / "school" / "school.mat"
    path.parent.mkdir(parents=True)
    scipy.io.savemat(str(path), {"X": np.zeros((3, 2))})
    with pytest.raises(ValueError, match=r"school\.mat.*'Y'"):
        loaders.load_school(tmp_path)


def _cell(arrays):
    out = np.empty((1, len(arrays)), dtype=object)
    for i, a in enumerate(arrays):
        out[0, i] = a
    return out


def test_school_tiny(tmp_path):
    """Percentile, strict threshold, min-max of non-binary columns only, on a hand-made file."""
    x0 = np.array([[1, 10, 0, 1], [0, 20, 5, 1], [1, 30, 5, 1]], dtype=np.uint8)
    x1 = np.array([[0, 40, 0, 1], [1, 250, 5, 1]], dtype=np.uint8)
    y0 = np.array([[10], [20], [30]], dtype=np.uint8)
    y1 = np.array([[40], [50]], dtype=np.uint8)
    path = tmp_path / "school" / "school.mat"
    path.parent.mkdir(parents=True)
    scipy.io.savemat(str(path), {"X": _cell([x0, x1]), "Y": _cell([y0, y1])})
    s = loaders.load_school(tmp_path)
    # pooled 75th percentile of [10,20,30,40,50] is 40: only 50 is strictly above
    np.testing.assert_array_equal(s.y, [-1, -1, -1, -1, 1])
    np.testing.assert_array_equal(s.tasks, [0, 0, 0, 1, 1])
    np.testing.assert_allclose(s.X[:, 1], (np.array([10, 20, 30, 40, 250]) - 10) / 240)  # no uint8 wrap
    np.testing.assert_array_equal(s.X[:, 0], [1, 0, 1, 0, 1])  # binary kept
    np.testing.assert_array_equal(s.X[:, 2], [0, 5, 5, 0, 5])  # two distinct values: kept
    np.testing.assert_array_equal(s.X[:, 3], 1.0)  # constant bias kept


def test_landmine_tiny(tmp_path):
    f0 = np.array([[1.0, 5.0], [3.0, 5.0]])
    f1 = np.array([[2.0, 5.0]])
    path = tmp_path / "landmine" / "LandmineData.mat"
    path.parent.mkdir(parents=True)
    scipy.io.savemat(str(path), {"feature": _cell([f0, f1]),
                                 "label": _cell([np.array([[1], [0]], np.uint8), np.array([[0]], np.uint8)])})
    s = loaders.load_landmine(tmp_path)
    np.testing.assert_allclose(s.X, [[0, 0, 1], [1, 0, 1], [0.5, 0, 1]])  # constant feature -> 0
    np.testing.assert_array_equal(s.y, [1, -1, -1])
    # a label outside {0,1} is an error naming the file
    scipy.io.savemat(str(path), {"feature": _cell([f0]), "label": _cell([np.array([[1], [2]], np.uint8)])})
    with pytest.raises(ValueError, match="LandmineData"):
        loaders.load_landmine(tmp_path)


def _ecml_files(tmp_path, first: str):
    folder = tmp_path / "ecml2006_spam" / "task_a"
    _write(folder / "task_a_u00_eval_lab.tf", first)
    _write(folder / "task_a_u01_eval_lab.tf", "-1 2:1 7:2\n")
    _write(folder / "task_a_u02_eval_lab.tf", "1 1:4\n")


def test_ecml_tiny(tmp_path):
    _ecml_files(tmp_path, "1 1:3 3:4 \n-1 5:2\n")
    s = loaders.load_ecml2006(tmp_path, task="a")
    assert s.X.shape == (4, 7)  # width = largest id over all users
    np.testing.assert_array_equal(s.y, [1, -1, -1, 1])
    np.testing.assert_array_equal(s.tasks, [0, 0, 1, 2])
    dense = s.X.toarray()
    np.testing.assert_allclose(dense[0], [0.6, 0, 0.8, 0, 0, 0, 0])  # id 1 -> column 0
    np.testing.assert_allclose(dense[1], [0, 0, 0, 0, 1, 0, 0])
    np.testing.assert_allclose(dense[2], np.array([0, 1, 0, 0, 0, 0, 2]) / np.sqrt(5))
    _check_csr_unit_rows(s)


@pytest.mark.parametrize("bad", ["1 1:3 x:4\n", "1 1:3 4\n", "spam 1:3\n", "1 0:3\n", "1 2:-1\n"])
def test_ecml_malformed(tmp_path, bad):
    _ecml_files(tmp_path, "-1 1:1\n" + bad)
    with pytest.raises(ValueError, match=r"task_a_u00_eval_lab\.tf, line 2"):
        loaders.load_ecml2006(tmp_path, task="a")


def _sentiment_files(tmp_path, books_positive: str):
    for dom in ("books", "dvd", "electronics", "kitchen"):
        for pol in ("positive", "negative"):
            text = f"common:1 {dom}_{pol}:2 #label#:{pol}\n"
            if dom == "books" and pol == "positive":
                text = books_positive
            _write(tmp_path / "sentiment" / dom / f"{pol}.review", text)


def test_sentiment_tiny(tmp_path):
    _sentiment_files(tmp_path, "a:b:2 c:1 #label#:positive\nc:3 #label#:positive\n")
    s = loaders.load_sentiment(tmp_path)
    # vocabulary in first-appearance order; "a:b:2" is feature "a:b" with count 2
    # ids: a:b 0, c 1, common 2, books_negative 3, dvd_positive 4, ...
    assert s.X.shape == (9, 3 + 7)
    np.testing.assert_array_equal(s.tasks, [0, 0, 0, 1, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(s.y, [1, 1, -1, 1, -1, 1, -1, 1, -1])
    dense = s.X.toarray()
    np.testing.assert_allclose(dense[0, :2], np.array([2, 1]) / np.sqrt(5))
    np.testing.assert_allclose(dense[1, 1], 1.0)
    np.testing.assert_allclose(dense[2, [2, 3]], np.array([1, 2]) / np.sqrt(5))
    np.testing.assert_allclose(dense[3, [2, 4]], np.array([1, 2]) / np.sqrt(5))
    _check_csr_unit_rows(s)


@pytest.mark.parametrize("bad", ["a:1 #label#:negative\n", "a:1 b:x #label#:positive\n", "a:1 b\n"])
def test_sentiment_malformed(tmp_path, bad):
    _sentiment_files(tmp_path, "a:1 #label#:positive\n" + bad)
    with pytest.raises(ValueError, match=r"positive\.review, line 2"):
        loaders.load_sentiment(tmp_path)


def _pu_archive(tmp_path, members: dict[str, str]) -> Path:
    path = tmp_path / "pu_spam" / "pu_corpora_public.tar.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode("ascii")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _pu_members(extra: dict[str, str] | None = None) -> dict[str, str]:
    root = "pu_corpora_public"
    members = {
        f"{root}/readme.txt": "not a message",
        f"{root}/pu1/part10/1legit1.txt": "Subject: 2\n\n2 2\n",
        f"{root}/pu1/part2/9spmsg1.txt": "Subject: 0\n\n1 3\n",
        f"{root}/pu1/unused/5spmsg2.txt": "Subject: 99\n\n99\n",
        f"{root}/pu2/part1/2legit3.txt": "Subject:\n\n0\n",
        f"{root}/pu3/part1/3spmsg4.txt": "Subject: 1 1\n\n",
        f"{root}/pua/part1/4legit5.txt": "Subject: 4\n\n",
    }
    members.update(extra or {})
    return members


def test_pu_tiny(tmp_path):
    _pu_archive(tmp_path, _pu_members())
    s = loaders.load_pu_spam(tmp_path)
    # blocks: pu1 ids 0..3 (width 4; unused/ id 99 ignored), pu2 width 1, pu3 width 2, pua width 5
    assert s.X.shape == (5, 4 + 1 + 2 + 5)
    np.testing.assert_array_equal(s.tasks, [0, 0, 1, 2, 3])
    # inside pu1: part2 before part10 (numeric order)
    np.testing.assert_array_equal(s.y, [1, -1, -1, 1, -1])
    dense = s.X.toarray()
    np.testing.assert_allclose(dense[0, :4], np.array([1, 1, 0, 1]) / np.sqrt(3))  # subject id 0 counted
    np.testing.assert_allclose(dense[1, :4], [0, 0, 1, 0])  # three times id 2
    np.testing.assert_allclose(dense[2, 4], 1.0)
    np.testing.assert_allclose(dense[3, 6], 1.0)  # pu3 id 1 -> column 4 + 1 + 1
    np.testing.assert_allclose(dense[4, 11], 1.0)  # pua id 4 -> column 7 + 4
    _check_csr_unit_rows(s)


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"pu_corpora_public/pu2/part3/7legit9.txt": "Subject: 1\n\n1 x2\n"}, r"7legit9\.txt.*'x2'"),
        ({"pu_corpora_public/pu2/part3/7legit9.txt": "1 2 3\n"}, r"7legit9\.txt.*Subject"),
        ({"pu_corpora_public/pu2/part3/7other9.txt": "Subject: 1\n\n1\n"}, r"7other9\.txt.*spmsg"),
    ],
)
def test_pu_malformed(tmp_path, extra, message):
    _pu_archive(tmp_path, _pu_members(extra))
    with pytest.raises(ValueError, match=message):
        loaders.load_pu_spam(tmp_path)


def test_pu_missing_corpus(tmp_path):
    members = {k: v for k, v in _pu_members().items() if "/pua/" not in k}
    _pu_archive(tmp_path, members)
    with pytest.raises(ValueError, match=r"pu_corpora_public\.tar\.gz.*pua"):
        loaders.load_pu_spam(tmp_path)


def test_newsgroups_tiny(tmp_path):
    folder = tmp_path / "newsgroups_malsar" / "rec.vs.talk"
    folder.mkdir(parents=True)
    scipy.io.savemat(str(folder / "Task1.mat"), {"fea": sp.csc_matrix(np.array([[3.0, 0, 4.0], [0, 2.0, 0]])),
                                                 "gnd": np.array([[1], [2]], np.uint8)})
    scipy.io.savemat(str(folder / "Task2.mat"), {"fea": sp.csc_matrix(np.array([[0, 0, 5.0]])),
                                                 "gnd": np.array([[2]], np.uint8)})
    s = loaders.load_newsgroups(tmp_path, pair="rec.vs.talk")
    np.testing.assert_allclose(s.X.toarray(), [[0.6, 0, 0.8], [0, 1, 0], [0, 0, 1]])
    np.testing.assert_array_equal(s.y, [1, -1, -1])
    np.testing.assert_array_equal(s.tasks, [0, 0, 1])
    assert s.task_names == ("task1", "task2")
    _check_csr_unit_rows(s)
    # gnd outside {1,2} is an error naming the file
    scipy.io.savemat(str(folder / "Task2.mat"), {"fea": sp.csc_matrix(np.array([[0, 0, 5.0]])),
                                                 "gnd": np.array([[3]], np.uint8)})
    with pytest.raises(ValueError, match=r"Task2\.mat"):
        loaders.load_newsgroups(tmp_path, pair="rec.vs.talk")


_WIDE_CSV = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_CPU, (20, 20))  # linear checks take well under a second here
from omtl.datasets.files import DataFileError, _from_columns, read_data

path, n = sys.argv[1], 100_000
names = [f"f{j}" for j in range(n)]
with open(path, "w") as f:
    f.write(",".join(["task", "label", *names]) + "\n")
    f.write(",".join(["0", "1", *("1" for _ in names)]) + "\n")
    f.write(",".join(["1", "-1", *("0" for _ in names)]) + "\n")
data = read_data(path)
assert data.X.shape == (2, n)
assert read_data(path, feature_columns=names[::-1]).X.shape == (2, n)
with open(path, "w") as f:  # a duplicate at the end of a 100,000-column header
    f.write(",".join(["task", "label", *names, names[-1]]) + "\n0,1" + ",1" * (n + 1) + "\n")
try:
    read_data(path)
except DataFileError as exc:
    assert "appears twice" in str(exc), str(exc)[:200]
else:
    raise AssertionError("a duplicate column was accepted")
header = ["task", "label", *names]  # the Python reader of column files (parquet)
file = _from_columns(path, header, [(2, [0, 1, *range(n)])], "task", "label", names[::-1], True, "parquet")
assert file.X.shape == (1, n)
try:
    _from_columns(path, [*header, names[-1]], [], "task", "label", None, True, "parquet")
except DataFileError as exc:
    assert "appears twice" in str(exc)
else:
    raise AssertionError("a duplicate column was accepted")
print("ok")
"""


def test_a_header_of_100000_columns_is_checked_in_linear_time(tmp_path):
    """The header's checks (duplicates, the task, label and feature columns) cost one pass over
    it: 100,000 columns well within a generous CPU limit (quadratic checks took minutes)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _WIDE_CSV, str(tmp_path / "wide.csv")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr[-2000:])
