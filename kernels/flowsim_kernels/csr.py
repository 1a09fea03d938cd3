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


@njit(cache=True)
def csr_row_value_sums(indptr, indices, per_row, n_cols):
    """Each column's sum of ``per_row[r]`` over the entries ``(r, c)`` of a CSR pattern.

    Adds in entry order, as ``np.bincount(indices, weights=np.repeat(per_row, counts))``
    does, so the sums are the same to the bit, without the per-entry array that needs.

    Parameters
    ----------
    indptr, indices : int64[n_rows + 1], int64[nnz]
        The pattern; not mutated. Each index in ``[0, n_cols)``.
    per_row : float64[n_rows]
    n_cols : int

    Returns
    -------
    float64[n_cols]
    """
    out = np.zeros(n_cols)
    for r in range(indptr.shape[0] - 1):
        value = per_row[r]
        for k in range(indptr[r], indptr[r + 1]):
            out[indices[k]] += value
    return out


@njit(cache=True)
def csr_gather_rows(indptr, indices, rows, out_indptr):
    """The entries of rows ``rows`` of a CSR pattern, one after another: ``out_indptr``
    (int64[len(rows) + 1], the rows' lengths summed, given) points into the returned
    int64[out_indptr[-1]]. Row ``rows[i]`` of the pattern becomes row ``i``."""
    out = np.empty(out_indptr[-1], dtype=np.int64)
    for i in range(rows.shape[0]):
        r = rows[i]
        start = out_indptr[i]
        for k in range(indptr[r], indptr[r + 1]):
            out[start + k - indptr[r]] = indices[k]
    return out


@njit(cache=True)
def csr_row_lengths(indptr):
    """Entries per row (int64[n_rows]), ``np.diff(indptr)`` without the shape checks whose
    error formatting Numba would compile with it (seconds of a first run)."""
    n = indptr.shape[0] - 1
    lengths = np.empty(n, dtype=np.int64)
    for r in range(n):
        lengths[r] = indptr[r + 1] - indptr[r]
    return lengths


@njit(cache=True)
def concatenated_ranges(starts, lengths):
    """``starts[i], starts[i] + 1, ..., starts[i] + lengths[i] - 1`` for each ``i``, one
    after another (int64[lengths.sum()]): the rows of pieces ``i`` laid end to end, in one
    pass where ``np.repeat`` and ``np.arange`` take three.

    Parameters
    ----------
    starts, lengths : int64[n]
        Each piece's first value and its length (>= 0); not mutated.
    """
    total = 0
    for i in range(lengths.shape[0]):
        total += lengths[i]
    out = np.empty(total, dtype=np.int64)
    k = 0
    for i in range(starts.shape[0]):
        first = starts[i]
        for j in range(lengths[i]):
            out[k] = first + j
            k += 1
    return out


@njit(cache=True)
def csr_append_entries(indptr, indices, extra):
    """Each row of a CSR pattern followed by ``extra[r]`` where that is >= 0.

    Parameters
    ----------
    indptr, indices : int64[n_rows + 1], int64[nnz]
        The pattern; not mutated.
    extra : int64[n_rows]
        The entry to append to each row, or -1 for none.

    Returns
    -------
    out_indptr : int64[n_rows + 1]
    out_indices : int64[nnz + (extra >= 0).sum()]
        In one pass each, with no per-entry scratch array.
    """
    n_rows = indptr.shape[0] - 1
    out_indptr = np.empty(n_rows + 1, dtype=np.int64)
    out_indptr[0] = 0
    for r in range(n_rows):
        out_indptr[r + 1] = out_indptr[r] + indptr[r + 1] - indptr[r] + (1 if extra[r] >= 0 else 0)
    out_indices = np.empty(out_indptr[n_rows], dtype=np.int64)
    for r in range(n_rows):
        k = out_indptr[r]
        for j in range(indptr[r], indptr[r + 1]):
            out_indices[k] = indices[j]
            k += 1
        if extra[r] >= 0:
            out_indices[k] = extra[r]
    return out_indptr, out_indices
