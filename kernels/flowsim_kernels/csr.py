"""Sparse incidence helpers (compressed sparse rows, scipy's naming)."""

import numpy as np
from numba import njit


@njit(cache=True)
def csr_transpose(indptr, indices, n_cols):
    """Transpose a CSR pattern (no values) by counting sort.

    Parameters
    ----------
    indptr : int64[n_rows + 1]
        Row pointers; not mutated.
    indices : int64[nnz]
        Column of each entry, each in ``[0, n_cols)``; not mutated.
    n_cols : int
        Number of columns.

    Returns
    -------
    t_indptr : int64[n_cols + 1]
    t_indices : int64[nnz]
        Rows of each column, ascending within a column.

    Notes
    -----
    Two passes over the entries: O(nnz + n_rows + n_cols).
    """
    n_rows = indptr.shape[0] - 1
    t_indptr = np.zeros(n_cols + 1, dtype=np.int64)
    for k in range(indices.shape[0]):
        t_indptr[indices[k] + 1] += 1
    for c in range(n_cols):
        t_indptr[c + 1] += t_indptr[c]
    fill = t_indptr[:-1].copy()
    t_indices = np.empty(indices.shape[0], dtype=np.int64)
    for r in range(n_rows):
        for k in range(indptr[r], indptr[r + 1]):
            c = indices[k]
            t_indices[fill[c]] = r
            fill[c] += 1
    return t_indptr, t_indices
