"""Loaders for the real multitask binary data sets in ``shared/data`` (ALGORITHMS.md §7.3).

Every loader takes ``data_dir``, the folder that holds the data-set folders (``school/``,
``sentiment/``, ``ecml2006_spam/``, ``pu_spam/``, ``landmine/``, ``newsgroups_malsar/``), and
returns a ``Stream`` in **file order**: the tasks are concatenated in
task order and the rows of a task keep the order of the files. Some files are sorted by label
(Sentiment: all positives of a domain first), so experiments must run on a seeded permutation
(``Stream.shuffled(seed)`` for protocol P1, ``Stream.as_rounds(seed)`` for protocol P2, §1.3).

When ``data_dir`` is ``None`` the folder comes from ``default_data_dir``.

Dense sets (School, Landmine) come as C-contiguous float64 arrays. Text sets (Sentiment, ECML/PKDD
2006 spam, PU, 20 Newsgroups) come as canonical scipy CSR float64 matrices (sorted indices, no
duplicates, no explicit zeros) holding raw term counts with every row scaled to unit L2 norm (no
IDF: it would leak the future into an online run).

A missing file raises ``FileNotFoundError``, a malformed one ``ValueError``; both messages
name the file and what was expected.
"""

from __future__ import annotations

import os
import re
import tarfile
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from ._stream import Stream

DATA_HINT = "pass data_dir=<folder holding the data-set folders> or set the OMTL_DATA environment variable"


# ---------------------------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------------------------


def default_data_dir() -> Path:
    """The folder holding the data-set folders.

    Returns
    -------
    pathlib.Path
        ``$OMTL_DATA`` if that environment variable is set (and non-empty), else
        ``../shared/data`` relative to the current working directory if that folder exists.

    Raises
    ------
    FileNotFoundError
        If ``OMTL_DATA`` is unset and ``../shared/data`` does not exist.
    """
    env = os.environ.get("OMTL_DATA")
    if env:
        return Path(env).expanduser()
    candidate = (Path.cwd() / ".." / "shared" / "data").resolve()
    if candidate.is_dir():
        return candidate
    raise FileNotFoundError(
        f"cannot locate the omtl data folder: OMTL_DATA is not set and {candidate} does not exist; {DATA_HINT}"
    )


def _root(data_dir) -> Path:
    return default_data_dir() if data_dir is None else Path(data_dir).expanduser()


def _require_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found; expected {what} ({DATA_HINT})")
    return path


def _loadmat(path: Path, what: str, keys: tuple[str, ...]) -> dict:
    _require_file(path, what)
    try:
        mat = scipy.io.loadmat(str(path))
    except Exception as exc:  # scipy raises several unrelated types for corrupt files
        raise ValueError(f"{path}: cannot be read as a MATLAB .mat file ({exc}); expected {what}") from exc
    missing = [k for k in keys if k not in mat]
    if missing:
        raise ValueError(f"{path}: variables {missing} missing; expected {what} with variables {list(keys)}")
    return mat


def _cells(mat: dict, key: str, path: Path, what: str) -> list[np.ndarray]:
    """The entries of a MATLAB 1 x k cell array, as a list of ndarrays or sparse matrices."""
    cell = mat[key]
    if not (isinstance(cell, np.ndarray) and cell.dtype == object and cell.ndim == 2 and 1 in cell.shape):
        raise ValueError(f"{path}: variable {key!r} should be a 1 x k cell array ({what}); got {type(cell).__name__} "
                         f"{getattr(cell, 'shape', '')} {getattr(cell, 'dtype', '')}")
    return list(cell.ravel())


def _paired_cells(mat: dict, x_key: str, y_key: str, path: Path, what: str):
    """The cell arrays ``x_key`` (2-D float64 blocks of one width) and ``y_key`` (one value per
    row of the block, flattened) of a MALSAR-style ``.mat`` file, paired by task."""
    xs, ys = _cells(mat, x_key, path, what), _cells(mat, y_key, path, what)
    if len(xs) != len(ys) or not xs:
        raise ValueError(f"{path}: {x_key} has {len(xs)} cells and {y_key} has {len(ys)}; expected {what}")
    blocks, targets = [], []
    for t, (xt, yt) in enumerate(zip(xs, ys)):
        xt, yt = np.asarray(xt, dtype=np.float64), np.asarray(yt).ravel()
        if xt.ndim != 2 or xt.shape[0] != yt.shape[0] or (blocks and xt.shape[1] != blocks[0].shape[1]):
            raise ValueError(f"{path}: cell {t} has {x_key} of shape {xt.shape} and {y_key} of length "
                             f"{yt.shape[0]}; expected {what}")
        blocks.append(xt)
        targets.append(yt)
    return blocks, targets


def _min_max(X: np.ndarray, columns: np.ndarray) -> None:
    """Rescale ``X[:, columns]`` in place to [0, 1]; a constant column becomes 0."""
    for j in columns:
        col = X[:, j]
        lo, hi = col.min(), col.max()
        X[:, j] = (col - lo) / (hi - lo) if hi > lo else 0.0


def _canonical_csr(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape) -> sp.csr_matrix:
    """A canonical CSR matrix (duplicates summed, indices sorted, no explicit zeros), float64."""
    X = sp.csr_matrix(
        (np.asarray(vals, dtype=np.float64), (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))),
        shape=shape,
    )
    return _canonicalise(X)


def _canonicalise(X) -> sp.csr_matrix:
    X = sp.csr_matrix(X, dtype=np.float64)
    X.sum_duplicates()
    X.eliminate_zeros()
    X.sort_indices()
    return X


def _l2_normalise(X: sp.csr_matrix) -> sp.csr_matrix:
    """Scale every non-empty row of a CSR matrix to unit Euclidean norm (in place; returned)."""
    lengths = np.diff(X.indptr)
    rows = np.repeat(np.arange(X.shape[0], dtype=np.int64), lengths)
    sq = np.bincount(rows, weights=X.data * X.data, minlength=X.shape[0])
    sq[lengths == 0] = 1.0  # an empty row stays empty
    X.data /= np.repeat(np.sqrt(sq), lengths)
    return X


def _stream(X, y, tasks, n_tasks: int, name: str, task_names) -> Stream:
    return Stream(
        X=X,
        y=np.asarray(y, dtype=np.int8),
        tasks=np.asarray(tasks, dtype=np.int64),
        n_tasks=int(n_tasks),
        name=name,
        task_names=tuple(task_names),
    )


def _task_ids(sizes) -> np.ndarray:
    return np.repeat(np.arange(len(sizes), dtype=np.int64), np.asarray(sizes, dtype=np.int64))


def _read_text(path: Path, what: str, encoding: str) -> str:
    _require_file(path, what)
    try:
        return path.read_text(encoding=encoding)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not valid {encoding} text ({exc}); expected {what}") from exc


# ---------------------------------------------------------------------------------------------
# School
# ---------------------------------------------------------------------------------------------


def load_school(data_dir=None) -> Stream:
    """School (Inner London Education Authority exam scores), 139 tasks.

    Parameters
    ----------
    data_dir : str or path-like, optional
        Folder holding ``school/school.mat``; default ``default_data_dir``.

    Returns
    -------
    Stream
        Dense float64 ``X`` of shape (15362, 28), in file order: schools in the order of the cell
        array, students in file order within a school. Task names ``school_000`` ... ``school_138``.

    Notes
    -----
    Source: MALSAR ``data/school.mat`` (cells ``X{t}``: n_t x 28 uint8, ``Y{t}``: exam score 1..70),
    the data of Argyriou's ``school_splits`` used by Cavallanti & Cesa-Bianchi.

    Preparation (ALGORITHMS.md §7.3):

    - Labels: ``y = +1`` iff the score is strictly above the 75th percentile of all 15,362 scores
      pooled over every school (``numpy.percentile``, linear interpolation; the value is 29), else
      ``-1``; ties at the threshold are negative.
    - Features: every non-binary column (more than two distinct values: columns 3 and 4) is min-max
      rescaled to [0, 1] over the whole data set (a constant column would become 0). The binary
      columns are kept as {0, 1}. Column 27 of the file is already the constant-1 bias column, so
      no bias is appended and the bias stays 1 (a one-valued column is not "non-binary").

    Counts: 139 tasks, 15,362 rows (22 .. 251 per school), 28 features including the bias,
    3,608 positives (23.5 %).
    """
    path = _root(data_dir) / "school" / "school.mat"
    what = "MALSAR school.mat with 1 x 139 cell arrays X (n_t x 28) and Y (n_t x 1 scores)"
    mat = _loadmat(path, what, ("X", "Y"))
    blocks, scores = _paired_cells(mat, "X", "Y", path, what)
    X = np.ascontiguousarray(np.vstack(blocks), dtype=np.float64)
    score = np.concatenate(scores).astype(np.float64)
    if not np.all(np.isfinite(X)) or not np.all(np.isfinite(score)):
        raise ValueError(f"{path}: non-finite values; expected {what}")
    threshold = np.percentile(score, 75)
    y = np.where(score > threshold, 1, -1)
    n_distinct = np.array([np.unique(X[:, j]).size for j in range(X.shape[1])])
    _min_max(X, np.flatnonzero(n_distinct > 2))
    sizes = [b.shape[0] for b in blocks]
    return _stream(X, y, _task_ids(sizes), len(sizes), "school", (f"school_{t:03d}" for t in range(len(sizes))))


# ---------------------------------------------------------------------------------------------
# Landmine
# ---------------------------------------------------------------------------------------------


def load_landmine(data_dir=None) -> Stream:
    """Landmine detection (Xue, Liao, Carin & Krishnapuram 2007), 29 tasks.

    Parameters
    ----------
    data_dir : str or path-like, optional
        Folder holding ``landmine/LandmineData.mat``; default ``default_data_dir``.

    Returns
    -------
    Stream
        Dense float64 ``X`` of shape (14820, 10), in file order: fields in the order of the cell
        array, rows in file order within a field. Task names ``field_00`` ... ``field_28``.

    Notes
    -----
    Source: ``LandmineData.mat`` (cells ``feature{t}``: n_t x 9 double, ``label{t}``: n_t x 1 in
    {0, 1}). Tasks 0-14 and 15-28 reportedly come from two terrain types.

    Preparation (ALGORITHMS.md §7.3): every one of the 9 features is min-max rescaled to [0, 1]
    over the whole data set (a constant feature would become 0), then a constant-1 bias column is
    appended as column 9. Label 1 (mine) is ``+1``, label 0 is ``-1``.

    Counts: 29 tasks, 14,820 rows (445 .. 690 per task), 10 features (9 + bias),
    904 positives (6.1 %; 15 .. 48 per task).
    """
    path = _root(data_dir) / "landmine" / "LandmineData.mat"
    what = "LandmineData.mat with 1 x 29 cell arrays feature (n_t x 9) and label (n_t x 1 in {0,1})"
    mat = _loadmat(path, what, ("feature", "label"))
    blocks, labels = _paired_cells(mat, "feature", "label", path, what)
    for t, lt in enumerate(labels):
        if not np.all(np.isin(lt, (0, 1))):
            raise ValueError(f"{path}: cell {t} has labels {np.unique(lt)[:5]}; expected {what}")
    X = np.vstack(blocks)
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{path}: non-finite feature values; expected {what}")
    _min_max(X, np.arange(X.shape[1]))
    X = np.ascontiguousarray(np.hstack([X, np.ones((X.shape[0], 1))]), dtype=np.float64)
    y = np.where(np.concatenate(labels) == 1, 1, -1)
    sizes = [b.shape[0] for b in blocks]
    return _stream(X, y, _task_ids(sizes), len(sizes), "landmine", (f"field_{t:02d}" for t in range(len(sizes))))


# ---------------------------------------------------------------------------------------------
# 20 Newsgroups (MALSAR)
# ---------------------------------------------------------------------------------------------

_NEWSGROUP_FILES = {
    "comp.vs.sci": ("task1.mat", "task2.mat"),
    "rec.vs.talk": ("Task1.mat", "Task2.mat"),
}


def load_newsgroups(data_dir=None, *, pair: str = "comp.vs.sci") -> Stream:
    """20 Newsgroups cross-domain pair from MALSAR: one top-category problem, 2 tasks.

    Parameters
    ----------
    data_dir : str or path-like, optional
        Folder holding ``newsgroups_malsar/``; default ``default_data_dir``.
    pair : {"comp.vs.sci", "rec.vs.talk"}
        Which MALSAR pair to load. Each pair is its own multitask data set of **two tasks**: the
        pair's two files (``task1.mat``/``task2.mat``, or ``Task1.mat``/``Task2.mat`` for
        rec.vs.talk) are tasks 0 and 1. The two pairs are not merged.

    Returns
    -------
    Stream
        CSR float64 ``X`` with 2,000 columns, in file order (task 0's rows, then task 1's).
        Task names ``task1``, ``task2``.

    Notes
    -----
    Source: MALSAR ``data/Newsgroup/<pair>/[tT]ask{1,2}.mat`` (``fea``: sparse n x 2000 term counts;
    ``gnd``: class index in {1, 2}). The files do not name the classes; we take class 1 as ``+1``
    (read as the first-named top category, comp resp. rec) and class 2 as ``-1``. Both files of a pair
    have 2,000 columns and are used with aligned columns, as MALSAR does; whether they really share
    one vocabulary is not documented.

    Preparation (ALGORITHMS.md §7.3, text data): raw counts, every row L2-normalised.

    Counts: comp.vs.sci 1,875 + 1,827 = 3,702 rows, positives 967 + 871 = 1,838;
    rec.vs.talk 1,844 + 1,545 = 3,389 rows, positives 975 + 860 = 1,835.
    """
    if pair not in _NEWSGROUP_FILES:
        raise ValueError(f"pair must be one of {sorted(_NEWSGROUP_FILES)}, got {pair!r}")
    folder = _root(data_dir) / "newsgroups_malsar" / pair
    what = "a MALSAR newsgroup task file with variables fea (sparse n x d counts) and gnd (n x 1 in {1,2})"
    blocks, labels = [], []
    for fname in _NEWSGROUP_FILES[pair]:
        path = folder / fname
        mat = _loadmat(path, what, ("fea", "gnd"))
        fea, gnd = mat["fea"], np.asarray(mat["gnd"]).ravel()
        if not (sp.issparse(fea) or (isinstance(fea, np.ndarray) and fea.ndim == 2 and fea.dtype != object)):
            raise ValueError(f"{path}: fea is a {type(fea).__name__}; expected {what}")
        fea = _canonicalise(fea)
        if fea.shape[0] != gnd.shape[0] or not np.all(np.isin(gnd, (1, 2))):
            raise ValueError(f"{path}: fea has {fea.shape[0]} rows, gnd has {gnd.shape[0]} entries with values "
                             f"{np.unique(gnd)[:5]}; expected {what}")
        if blocks and fea.shape[1] != blocks[0].shape[1]:
            raise ValueError(f"{path}: {fea.shape[1]} columns but the first task has {blocks[0].shape[1]}; "
                             f"expected both tasks of {pair} to have the same width")
        if fea.nnz and (fea.data.min() < 0 or not np.all(np.isfinite(fea.data))):
            raise ValueError(f"{path}: negative or non-finite counts; expected {what}")
        blocks.append(fea)
        labels.append(gnd)
    X = _l2_normalise(_canonicalise(sp.vstack(blocks, format="csr")))
    y = np.where(np.concatenate(labels) == 1, 1, -1)
    sizes = [b.shape[0] for b in blocks]
    return _stream(X, y, _task_ids(sizes), 2, f"newsgroups_{pair}",
                   (Path(f).stem.lower() for f in _NEWSGROUP_FILES[pair]))


# ---------------------------------------------------------------------------------------------
# ECML/PKDD 2006 spam
# ---------------------------------------------------------------------------------------------

_ECML_USERS = {"a": 3, "b": 15}


def _parse_svmlight_counts(path: Path, what: str):
    """Parse ``<label> <id>:<count> ...`` lines; returns (labels, row_lengths, ids, counts)."""
    text = _read_text(path, what, "ascii")
    labels, lengths, pairs = [], [], []
    for lineno, line in enumerate(text.split("\n"), start=1):
        toks = line.split()
        if not toks:
            continue
        if toks[0] not in ("1", "-1", "+1"):
            raise ValueError(f"{path}, line {lineno}: label {toks[0][:20]!r}; expected {what}")
        labels.append(1 if toks[0] != "-1" else -1)
        lengths.append(len(toks) - 1)
        pairs.extend(toks[1:])
    if not labels:
        raise ValueError(f"{path}: no examples; expected {what}")
    flat = " ".join(pairs).replace(":", " ").split()
    bad = len(flat) != 2 * len(pairs)
    if not bad:
        try:
            ids = np.array(flat[0::2], dtype=np.int64)
            counts = np.array(flat[1::2], dtype=np.float64)
        except (ValueError, OverflowError):
            bad = True
    if bad or (ids.size and (ids.min() < 1 or counts.min() <= 0 or not np.all(np.isfinite(counts)))):
        # slow path: find the first offending line for the message
        for lineno, line in enumerate(text.split("\n"), start=1):
            for tok in line.split()[1:]:
                i, sep, c = tok.partition(":")
                ok = sep == ":" and i.isdigit() and int(i) >= 1
                try:
                    ok = ok and float(c) > 0 and np.isfinite(float(c))
                except ValueError:
                    ok = False
                if not ok:
                    raise ValueError(f"{path}, line {lineno}: token {tok[:40]!r}; expected {what}")
        raise ValueError(f"{path}: malformed id:count tokens; expected {what}")
    return np.array(labels), np.array(lengths, dtype=np.int64), ids, counts


def load_ecml2006(data_dir=None, *, task: str = "a") -> Stream:
    """ECML/PKDD 2006 Discovery Challenge personalised spam filtering, labeled evaluation inboxes.

    Parameters
    ----------
    data_dir : str or path-like, optional
        Folder holding ``ecml2006_spam/``; default ``default_data_dir``.
    task : {"a", "b"}
        Challenge task: "a" = 3 users x 2,500 e-mails (Cavallanti & Cesa-Bianchi's "PKDD Spam");
        "b" = 15 users x 400 e-mails. Each user's inbox is one task.

    Returns
    -------
    Stream
        CSR float64 ``X``, in file order: users u00, u01, ... in order, e-mails in file order.
        Column ``id - 1`` holds word id ``id``; the width is the largest id over all users of the
        task (the shared dictionary of the task family). Task names ``u00``, ``u01``, ...

    Notes
    -----
    Source: ``ecml2006_spam/task_<t>/task_<t>_uNN_eval_lab.tf`` (svmlight lines
    ``<label> <id>:<count> ...``; label 1 = spam, -1 = non-spam).

    Preparation (ALGORITHMS.md §7.3, text data): raw term counts, every row L2-normalised;
    spam is ``+1``.

    Counts: Task A: 3 tasks x 2,500 = 7,500 rows, 1,250 spam per user, dimension 106,780,
    985,927 non-zeros. Task B: 15 tasks x 400 = 6,000 rows, 200 spam per user, dimension 152,543,
    922,884 non-zeros.
    """
    task = str(task).lower()
    if task not in _ECML_USERS:
        raise ValueError(f"task must be 'a' or 'b', got {task!r}")
    folder = _root(data_dir) / "ecml2006_spam" / f"task_{task}"
    what = "an svmlight file with one e-mail per line: '<1|-1> <id>:<count> ...' (ids >= 1, counts > 0)"
    paths = [folder / f"task_{task}_u{u:02d}_eval_lab.tf" for u in range(_ECML_USERS[task])]
    for path in paths:
        _require_file(path, what)
    parsed = [_parse_svmlight_counts(path, what) for path in paths]
    labels = np.concatenate([p[0] for p in parsed])
    lengths = np.concatenate([p[1] for p in parsed])
    ids = np.concatenate([p[2] for p in parsed])
    counts = np.concatenate([p[3] for p in parsed])
    n, d = labels.size, int(ids.max()) if ids.size else 0
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    X = _l2_normalise(_canonical_csr(rows, ids - 1, counts, (n, d)))
    sizes = [p[0].size for p in parsed]
    return _stream(X, labels, _task_ids(sizes), len(sizes), f"ecml2006_spam_{task}",
                   (f"u{u:02d}" for u in range(len(sizes))))


# ---------------------------------------------------------------------------------------------
# Multi-Domain Sentiment
# ---------------------------------------------------------------------------------------------

_SENTIMENT_DOMAINS = ("books", "dvd", "electronics", "kitchen")
_LABEL_FIELD = "#label#:"


def _parse_sentiment_file(path: Path, polarity: str, vocab: dict, what: str):
    """Parse one ``<polarity>.review`` file, extending ``vocab``; returns (row_lengths, ids, counts)."""
    text = _read_text(path, what, "utf-8")
    expected = _LABEL_FIELD + polarity
    lengths, feats, counts = [], [], []
    for lineno, line in enumerate(text.split("\n"), start=1):
        toks = line.split()
        if not toks:
            continue
        if toks[-1] != expected:
            raise ValueError(f"{path}, line {lineno}: last field is {toks[-1][:40]!r}; expected {expected!r} "
                             f"({what})")
        parts = [tok.rpartition(":") for tok in toks[:-1]]
        lengths.append(len(parts))
        feats.extend(p[0] for p in parts)
        counts.extend(p[2] for p in parts)
    if not lengths:
        raise ValueError(f"{path}: no reviews; expected {what}")
    try:
        values = np.array(counts, dtype=np.int64)
        ok = values.size == 0 or values.min() > 0
    except (ValueError, OverflowError):
        ok = False
    if not ok or any(not f for f in feats):
        for lineno, line in enumerate(text.split("\n"), start=1):
            for tok in line.split()[:-1]:
                f, sep, c = tok.rpartition(":")
                if not (sep and f and c.isdigit() and int(c) > 0):
                    raise ValueError(f"{path}, line {lineno}: token {tok[:40]!r}; expected {what}")
        raise ValueError(f"{path}: malformed feature:count tokens; expected {what}")
    setdefault = vocab.setdefault
    ids = np.fromiter((setdefault(f, len(vocab)) for f in feats), dtype=np.int64, count=len(feats))
    return np.array(lengths, dtype=np.int64), ids, values.astype(np.float64)


def load_sentiment(data_dir=None) -> Stream:
    """Multi-Domain Sentiment (Blitzer, Dredze & Pereira 2007), ``processed_acl`` labeled reviews, 4 tasks.

    Parameters
    ----------
    data_dir : str or path-like, optional
        Folder holding ``sentiment/<domain>/{positive,negative}.review``; default
        ``default_data_dir``.

    Returns
    -------
    Stream
        CSR float64 ``X`` of shape (8000, 473856), in file order: domains books, dvd, electronics,
        kitchen; inside a domain the 1,000 lines of ``positive.review`` and then the 1,000 lines of
        ``negative.review`` (so every domain is sorted by label: shuffle before use). Task names are
        the domain names.

    Notes
    -----
    Source: ``processed_acl`` of the Multi-Domain Sentiment data set; one review per line,
    whitespace-separated ``feature:count`` tokens (unigrams and ``_``-joined bigrams) ending in
    ``#label#:positive`` or ``#label#:negative``.

    Preparation (ALGORITHMS.md §7.3):

    - Every token is split on its **last** ``:`` (features may contain ``:``).
    - The trailing ``#label#:<polarity>`` field is the label, not a feature; it must match the file
      name (else ``ValueError``). A positive review is ``+1``.
    - Vocabulary: feature strings get ids in order of first appearance over the domains in the order
      books, dvd, electronics, kitchen (inside a domain: positive file, then negative file; inside a
      file: line order, token order).
    - Raw counts, every row L2-normalised.

    Counts: 4 tasks x 2,000 reviews (1,000 positive each) = 8,000 rows, 473,856 features,
    1,519,266 non-zeros.
    """
    root = _root(data_dir) / "sentiment"
    what = "one review per line of 'feature:count' tokens ending in '#label#:<polarity>'"
    jobs = [(root / dom / f"{pol}.review", pol) for dom in _SENTIMENT_DOMAINS for pol in ("positive", "negative")]
    for path, _ in jobs:
        _require_file(path, what)
    vocab: dict[str, int] = {}
    lengths, ids, counts, y, sizes = [], [], [], [], [0] * len(_SENTIMENT_DOMAINS)
    for k, (path, pol) in enumerate(jobs):
        ln, i, c = _parse_sentiment_file(path, pol, vocab, what)
        lengths.append(ln)
        ids.append(i)
        counts.append(c)
        y.append(np.full(ln.size, 1 if pol == "positive" else -1, dtype=np.int8))
        sizes[k // 2] += ln.size
    lengths = np.concatenate(lengths)
    n = lengths.size
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    X = _l2_normalise(_canonical_csr(rows, np.concatenate(ids), np.concatenate(counts), (n, len(vocab))))
    return _stream(X, np.concatenate(y), _task_ids(sizes), len(sizes), "sentiment", _SENTIMENT_DOMAINS)


# ---------------------------------------------------------------------------------------------
# PU1 / PU2 / PU3 / PUA
# ---------------------------------------------------------------------------------------------

_PU_CORPORA = ("pu1", "pu2", "pu3", "pua")
_PU_MEMBER = re.compile(r"^(?:\./)?pu_corpora_public/(pu1|pu2|pu3|pua)/part([0-9]+)/([^/]+\.txt)$")


def load_pu_spam(data_dir=None) -> Stream:
    """PU1, PU2, PU3 and PUA spam corpora (Androutsopoulos et al.; ROMCO's "Spam Email"), 4 tasks.

    Parameters
    ----------
    data_dir : str or path-like, optional
        Folder holding ``pu_spam/pu_corpora_public.tar.gz``; default ``default_data_dir``.

    Returns
    -------
    Stream
        CSR float64 ``X`` of shape (7070, 135324), in file order: corpora pu1, pu2, pu3, pua; inside a
        corpus the folders ``part1`` .. ``part10`` in numeric order; inside a folder the files sorted
        by name (the first number of a name is the authors' random shuffle key). Task names are
        the corpus names.

    Notes
    -----
    Source: ``pu_corpora_public.tar.gz``, read in memory with ``tarfile`` (nothing is extracted).
    One message per file: ``Subject: <ids>``, an empty line, then the body as whitespace-separated
    integer token ids (0-based). ``*spmsg*.txt`` is spam (``+1``), ``*legit*.txt`` legitimate
    (``-1``). The ``unused/`` folders (31 messages the authors discarded) are skipped. The literal
    ``Subject:`` is dropped; subject and body ids are counted together.

    Preparation (ALGORITHMS.md §7.3): every corpus has its own encoding, so each corpus gets its own
    block of columns: corpus ``c`` has width ``w_c = 1 + (largest id in its messages)`` and id ``i``
    goes to column ``sum(w_{c'} for c' < c) + i``. Widths: pu1 24,748, pu2 16,425, pu3 69,600,
    pua 24,551 (total 135,324). Raw counts, every row L2-normalised. ROMCO's 1,458-dimensional
    TF-IDF features are not documented and cannot be rebuilt; report this with any result.

    Counts: 1,090 / 710 / 4,130 / 1,140 messages (7,070 in total), spam 480 / 140 / 1,820 / 570
    (3,010); distinct ids used 24,728 / 16,339 / 69,414 / 24,521.
    """
    path = _root(data_dir) / "pu_spam" / "pu_corpora_public.tar.gz"
    what = ("a gzip tar holding pu_corpora_public/{pu1,pu2,pu3,pua}/part1..part10/*{spmsg,legit}*.txt, "
            "each message 'Subject: <ids>' then the body as integer ids")
    _require_file(path, what)
    messages = []  # (corpus index, part, file name, label, token ids)
    try:
        with tarfile.open(path, mode="r:gz") as archive:
            for member in archive:
                if not member.isfile():
                    continue
                m = _PU_MEMBER.match(member.name)
                if m is None:
                    continue  # readme.txt, unused/, anything else
                corpus, part, fname = _PU_CORPORA.index(m.group(1)), int(m.group(2)), m.group(3)
                spam, legit = "spmsg" in fname, "legit" in fname
                if spam == legit:
                    raise ValueError(f"{path}: member {member.name}: name contains neither or both of "
                                     f"'spmsg'/'legit'; expected {what}")
                raw = archive.extractfile(member).read()
                try:
                    text = raw.decode("ascii")
                except UnicodeDecodeError as exc:
                    raise ValueError(f"{path}: member {member.name} is not ASCII; expected {what}") from exc
                if not text.startswith("Subject:"):
                    raise ValueError(f"{path}: member {member.name} does not start with 'Subject:'; expected {what}")
                toks = text[len("Subject:"):].split()
                try:
                    ids = np.array(toks, dtype=np.int64)
                except (ValueError, OverflowError):
                    bad = next((t for t in toks if not t.isdigit()), "?")
                    raise ValueError(f"{path}: member {member.name}: token {bad[:40]!r} is not an integer id; "
                                     f"expected {what}") from None
                if ids.size and ids.min() < 0:
                    raise ValueError(f"{path}: member {member.name}: negative token id; expected {what}")
                messages.append((corpus, part, fname, 1 if spam else -1, ids))
    except (tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{path}: cannot be read as a gzip tar archive ({exc}); expected {what}") from exc
    messages.sort(key=lambda msg: msg[:3])
    sizes = np.bincount([msg[0] for msg in messages], minlength=len(_PU_CORPORA))
    if np.any(sizes == 0):
        missing = [c for c, s in zip(_PU_CORPORA, sizes) if s == 0]
        raise ValueError(f"{path}: no messages for corpora {missing}; expected {what}")
    widths = np.zeros(len(_PU_CORPORA), dtype=np.int64)
    for corpus, _, _, _, ids in messages:
        if ids.size:
            widths[corpus] = max(widths[corpus], int(ids.max()) + 1)
    offsets = np.concatenate([[0], np.cumsum(widths)[:-1]])
    lengths = np.array([msg[4].size for msg in messages], dtype=np.int64)
    cols = np.concatenate([msg[4] + offsets[msg[0]] for msg in messages])
    n = len(messages)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    X = _l2_normalise(_canonical_csr(rows, cols, np.ones(cols.size), (n, int(widths.sum()))))
    y = np.array([msg[3] for msg in messages])
    return _stream(X, y, _task_ids(sizes), len(_PU_CORPORA), "pu_spam", _PU_CORPORA)
