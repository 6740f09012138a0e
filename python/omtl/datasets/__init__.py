"""Data streams: the built-in synthetic generator and loaders for the papers' real data sets."""

from ._stream import Stream
from .files import iter_file
from .loaders import (
    default_data_dir,
    load_ecml2006,
    load_landmine,
    load_newsgroups,
    load_pu_spam,
    load_school,
    load_sentiment,
)
from .synthetic import make_multitask_stream

__all__ = [
    "Stream",
    "default_data_dir",
    "iter_file",
    "load_ecml2006",
    "load_landmine",
    "load_newsgroups",
    "load_pu_spam",
    "load_school",
    "load_sentiment",
    "make_multitask_stream",
]
