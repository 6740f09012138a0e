"""``omtl.hash_features``: named features as a CSR matrix, hashed as the per-event methods hash
a dict of str names (one hashing, in the native binding's ``hash_dicts``, over the crate's
``omtl::hashing``), so that ``learn`` on the matrix equals ``learn_one`` over the dicts."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._native import hash_dicts

DEFAULT_N_FEATURES = 2**18


def hash_features(dicts, *, n_features=DEFAULT_N_FEATURES):
    """Hashes dicts of named features into a sparse matrix, as scikit-learn's
    ``FeatureHasher(n_features, input_type="dict", alternate_sign=False)`` does.

    A name goes to column ``|murmurhash3_32(name, seed=0)| mod n_features``; a str value ``v`` of
    name ``f`` is the feature ``"f=v"`` with value 1; zero values are left out; names sharing a
    column add up. The learners' per-event methods (``learn_one``) hash a dict of str names the
    same way, into their ``n_features`` columns.

    Parameters
    ----------
    dicts : iterable of dict
        One dict per row: str (or bytes) feature name -> number or str.
    n_features : int, default=2**18
        The number of columns, in ``[1, 2**31 - 1]``.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n_rows, n_features)
        float64 values, sorted indices without duplicates.

    Examples
    --------
    >>> import omtl
    >>> X = omtl.hash_features([{"dog": 1, "cat": 2}, {"dog": 2, "run": 5}], n_features=10)
    >>> X.toarray().tolist()
    [[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0], [0.0, 0.0, 0.0, 2.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0]]
    """
    indptr, indices, data = hash_dicts(dicts, n_features)
    n_rows = indptr.shape[0] - 1
    if indptr[-1] < 2**31:
        indptr = indptr.astype(np.int32)
    return sp.csr_matrix((data, indices, indptr), shape=(n_rows, int(n_features)))
