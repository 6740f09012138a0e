"""The experiments' data sets: their descriptions, and their streams loaded once per process
(a fixed random subsample for ``--quick``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ._state import STATE


@dataclass(frozen=True)
class DataSpec:
    """One data set of an experiment: how to load it and how to describe it."""

    key: str
    title: str
    loader: str  # name of the function in omtl.datasets
    loader_kwargs: tuple = ()
    note: str = ""
    short: str = ""

    @property
    def label(self) -> str:
        """A short column header."""
        return self.short or self.title


DATASETS = {
    "school": DataSpec("school", "School binary", "load_school"),
    "sentiment": DataSpec("sentiment", "Sentiment", "load_sentiment"),
    "ecml2006_a": DataSpec("ecml2006_a", "Pkdd06 Spam A", "load_ecml2006", (("task", "a"),)),
    "ecml2006_b": DataSpec("ecml2006_b", "ECML/PKDD 2006 Spam B", "load_ecml2006", (("task", "b"),),
                           note="substitute for MHC-I / EachMovie", short="ECML B"),
    "pu_spam": DataSpec(
        "pu_spam", "PU spam (ROMCO's Spam Email)", "load_pu_spam",
        note="same 4 PU corpora as ROMCO's Spam Email, but raw term counts (L2-normalised, per-corpus "
             "feature blocks) instead of ROMCO's undocumented 1,458-d TF-IDF features",
        short="PU spam",
    ),
    "landmine": DataSpec("landmine", "Landmine", "load_landmine", note="substitute for MHC-I / EachMovie"),
    "newsgroups_cs": DataSpec("newsgroups_cs", "20 Newsgroups comp.vs.sci", "load_newsgroups",
                              (("pair", "comp.vs.sci"),), note="substitute for MHC-I / EachMovie",
                              short="NG comp/sci"),
    "newsgroups_rt": DataSpec("newsgroups_rt", "20 Newsgroups rec.vs.talk", "load_newsgroups",
                              (("pair", "rec.vs.talk"),), note="substitute for MHC-I / EachMovie",
                              short="NG rec/talk"),
}

#: Seed of the fixed random subsample used by ``--quick`` (the same rows for every shuffle seed).
QUICK_SUBSAMPLE_SEED = 4242


def stream_key(key: str, data_dir, subsample) -> tuple:
    return (key, None if data_dir is None else str(data_dir), subsample)


def load_stream(key: str, data_dir=None, subsample: int | None = None):
    """The data set ``key`` in file order, or a fixed random subsample of ``subsample`` rows
    (kept in file order), cached per process."""
    cache_key = stream_key(key, data_dir, subsample)
    if cache_key not in STATE.stream_cache:
        from .. import datasets

        spec = DATASETS[key]
        stream = getattr(datasets, spec.loader)(data_dir, **dict(spec.loader_kwargs))
        if subsample is not None and subsample < len(stream):
            from .._rng import SplitMix64

            rows = np.sort(np.asarray(SplitMix64(QUICK_SUBSAMPLE_SEED).permutation(len(stream))[:subsample]))
            stream = compact_columns(stream.take(rows))
        STATE.stream_cache[cache_key] = stream
    return STATE.stream_cache[cache_key]


def compact_columns(stream):
    """Drops the sparse columns that are zero in every row (dense streams are returned as is).

    Exact for every learner here: a column that is zero in every row never enters an inner
    product, a distance, a gradient or a proximal step (its weights stay 0), so predictions do not
    change. It makes a text subsample's feature space thousands instead of ~150,000 wide, which
    matters for the learners that keep dense d x k matrices (ROMCO, MTFL, TRML).
    """
    if not stream.is_sparse:
        return stream
    used = np.unique(stream.X.indices)
    X = stream.X[:, used].tocsr()
    X.sum_duplicates()
    X.sort_indices()
    return replace(stream, X=X)


def chosen_streams(datasets: list[str] | None, known: list[str], subsample: int | None) -> tuple[list[str], int | None]:
    """``datasets`` checked against an experiment's ``known`` data sets (all of them when None), and
    the rows ``subsample``d from each (None: every row): what a table's ``data_streams`` returns."""
    keys = list(datasets or known)
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise ValueError(f"unknown data set(s) {unknown}; this experiment uses {known}")
    return keys, subsample
