"""The data-file formats ``omtl learn`` reads, told by name or extension (the engine's table of
extensions, ``io::EXTENSIONS``): a module free of NumPy, so that the command line starts without
importing it (``omtl.datasets.files`` reads the files; this module only names them)."""

from __future__ import annotations

from pathlib import Path

SVMLIGHT = "svmlight"
VW = "vw"
CSV = "csv"
PARQUET = "parquet"
FORMATS = (SVMLIGHT, VW, CSV, PARQUET)
#: The width VW-format names are hashed into by default (VW's ``-b 18``, ``FeatureHasher``'s 2**18).
DEFAULT_HASHED_FEATURES = 2**18
#: Rows per chunk by default; a chunk also ends after ``chunk_bytes`` of input.
DEFAULT_CHUNK_ROWS = 8192
DEFAULT_CHUNK_BYTES = 1 << 20


def native_reading(fmt, *, max_line_bytes, chunk_rows=DEFAULT_CHUNK_ROWS, chunk_bytes=DEFAULT_CHUNK_BYTES,
                   skip_bad_lines=False, task_namespace="t", task_column="task", label_column="label",
                   feature_columns=None, require_labels=True) -> dict:
    """How to read a file, as the engine's readers take it (``ReadOptions`` in src/python/io.rs):
    the options of ``omtl.datasets.iter_file`` under the engine's names."""
    return {
        "format": fmt, "chunk_rows": int(chunk_rows), "chunk_bytes": int(chunk_bytes),
        "max_line_bytes": int(max_line_bytes), "skip_bad_lines": bool(skip_bad_lines),
        "vw_task_namespace": task_namespace, "csv_task_column": task_column, "csv_label_column": label_column,
        "csv_feature_columns": None if feature_columns is None else [str(c) for c in feature_columns],
        "require_labels": bool(require_labels),
    }


class DataFileError(ValueError):
    """A data file that cannot be read: the message names the file and, where one is to blame,
    the line."""


def data_format(path, fmt=None) -> str:
    """The format named by ``fmt`` (``"svmlight"``, ``"vw"``, ``"csv"``, ``"parquet"``) or by the
    file's extension (a trailing ``.gz`` looked through).

    Parameters
    ----------
    path : str or path-like
        The data file (``"-"``: standard input, which needs ``fmt``).
    fmt : str, optional
        An explicit format; default from the extension.

    Returns
    -------
    str
        One of ``FORMATS``.
    """
    if fmt is not None:
        if fmt not in FORMATS:
            raise DataFileError(f"{path}: unknown format {fmt!r} (use {', '.join(FORMATS)})")
        return fmt
    if str(path) == "-":
        raise DataFileError("<stdin>: cannot tell the format of standard input; pass --format " + "|".join(FORMATS))
    from . import _native  # the extensions' table: io::EXTENSIONS in the engine

    found = _native.data_format(str(path))
    if found is None:
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix == ".gz":
            suffix = Path(p.stem).suffix.lower()
        raise DataFileError(f"{path}: cannot tell the format from the extension {suffix!r}; "
                            "pass --format " + "|".join(FORMATS))
    return found
