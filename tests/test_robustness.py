"""Hostile inputs that once reached memory-unsafe or NaN-producing code: malformed sparse matrices
(checked before scipy's compiled routines see them) and tampered native states that pass the
checksum (refused by the state validation, docs/reliability.md)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

MALFORMED_SPARSE = textwrap.dedent(
    """
    import numpy as np, scipy.sparse as sp, omtl

    def csr(indptr, indices, fmt="csr"):
        cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
        X = cls((np.ones(len(indices)), np.array(indices, dtype=np.int32), np.array(indptr, dtype=np.int32)),
                shape=(3, 3))
        return X

    cases = [
        ([0, 2, 1, 3], [0, 1, 2]),          # indptr decreases
        ([0, 3, 0, 3], [0, 1, 2]),          # decreases to 0 in the middle
        ([0, 1, 2, 3], [0, 7, 1]),          # an index outside the matrix
        ([0, 1, 2, 3], [0, -1, 1]),         # a negative index
        ([0, 1, 9, 3], [2, 1, 0]),          # indptr beyond the stored entries
    ]
    refused = 0
    for fmt in ("csr", "csc"):
        for indptr, indices in cases:
            try:
                X = csr(indptr, indices, fmt)
            except ValueError:
                refused += 1  # scipy's own constructor check caught it
                continue
            model = omtl.MTPerceptron(n_tasks=1)
            try:
                model.partial_fit(X, [1, -1, 1], tasks=[0, 0, 0])
            except ValueError as exc:
                assert "malformed" in str(exc) or "X" in str(exc), exc
                assert not hasattr(model, "n_seen_")
                refused += 1
    print("refused", refused)
    """
)


def test_a_malformed_sparse_matrix_is_a_value_error_and_the_process_survives():
    # The heap corruption of scipy's sum_duplicates on a non-monotone indptr shows only when the
    # process exits ("double free or corruption"): run in a child and check its exit status.
    proc = subprocess.run([sys.executable, "-c", MALFORMED_SPARSE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "refused 10"
