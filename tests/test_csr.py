import numpy as np

from flowsim_kernels.csr import (
    concatenated_ranges,
    csr_append_entries,
    csr_row_lengths,
    csr_row_value_sums,
    csr_transpose,
)


def transpose_reference(indptr, indices, n_cols):
    rows_of = [[] for _ in range(n_cols)]
    for r in range(len(indptr) - 1):
        for k in range(indptr[r], indptr[r + 1]):
            rows_of[indices[k]].append(r)
    t_indptr = np.cumsum([0] + [len(rows) for rows in rows_of])
    return t_indptr, np.array([r for rows in rows_of for r in rows], dtype=np.int64)


def test_transpose_hand_case():
    # rows: 0 -> {1, 2}, 1 -> {}, 2 -> {0, 2}
    t_indptr, t_indices = csr_transpose(np.array([0, 2, 2, 4]), np.array([1, 2, 0, 2]), 3)
    assert t_indptr.tolist() == [0, 1, 2, 4]
    assert t_indices.tolist() == [2, 0, 0, 2]


def test_transpose_matches_twin(rng):
    lengths = rng.integers(0, 7, 300)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = rng.integers(0, 50, indptr[-1]).astype(np.int64)
    got = csr_transpose(indptr, indices, 50)
    want = transpose_reference(indptr, indices, 50)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_row_value_sums_hand_case():
    # rows: 0 -> {1, 2}, 1 -> {}, 2 -> {0, 2, 2}; values 1, 10, 100
    sums = csr_row_value_sums(np.array([0, 2, 2, 5]), np.array([1, 2, 0, 2, 2]), np.array([1.0, 10.0, 100.0]), 4)
    assert sums.tolist() == [100.0, 1.0, 201.0, 0.0]


def test_row_value_sums_equal_bincount_to_the_bit(rng):
    # The twin the kernel replaced: each entry's row value, summed per column in entry order.
    lengths = rng.integers(0, 7, 300)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = rng.integers(0, 50, indptr[-1]).astype(np.int64)
    values = rng.random(300) * 10.0 ** rng.integers(-6, 9, 300)
    want = np.bincount(indices, weights=np.repeat(values, lengths), minlength=50)
    np.testing.assert_array_equal(csr_row_value_sums(indptr, indices, values, 50), want)


def test_row_lengths_hand_case_and_twin(rng):
    assert csr_row_lengths(np.array([0, 2, 2, 5], dtype=np.int64)).tolist() == [2, 0, 3]
    assert csr_row_lengths(np.array([0], dtype=np.int64)).tolist() == []
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 9, 200))]).astype(np.int64)
    np.testing.assert_array_equal(csr_row_lengths(indptr), np.diff(indptr))


def test_concatenated_ranges_hand_case():
    got = concatenated_ranges(np.array([5, 0, 9, 2], dtype=np.int64), np.array([3, 0, 1, 2], dtype=np.int64))
    assert got.tolist() == [5, 6, 7, 9, 2, 3]
    assert concatenated_ranges(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)).tolist() == []


def test_concatenated_ranges_match_repeat_and_arange(rng):
    # The twin the kernel replaced: each piece's start less the pieces before it, repeated
    # over the piece, plus the running position.
    lengths = rng.integers(0, 9, 500).astype(np.int64)
    starts = rng.integers(-1000, 10**9, 500).astype(np.int64)
    before = np.cumsum(lengths) - lengths
    want = np.repeat(starts - before, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
    np.testing.assert_array_equal(concatenated_ranges(starts, lengths), want)


def test_append_entries_hand_case():
    # rows: 0 -> {3}, 1 -> {}, 2 -> {0, 1}; append 7 to row 0, nothing to row 1, 5 to row 2
    indptr, indices = csr_append_entries(np.array([0, 1, 1, 3]), np.array([3, 0, 1]), np.array([7, -1, 5]))
    assert indptr.tolist() == [0, 2, 2, 5]
    assert indices.tolist() == [3, 7, 0, 1, 5]


def test_append_entries_match_the_numpy_layout(rng):
    # The twin the kernel replaced (flowsim.budgets until 2026-12-04): each row's entries
    # moved on by the appended entries before it, then each appended entry at its row's end.
    lengths = rng.integers(0, 6, 400)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = rng.integers(0, 50, indptr[-1]).astype(np.int64)
    extra = np.where(rng.random(400) < 0.5, rng.integers(50, 60, 400), -1).astype(np.int64)
    has = extra >= 0
    want_indptr = np.zeros(401, dtype=np.int64)
    np.cumsum(lengths + has, out=want_indptr[1:])
    want = np.empty(int(want_indptr[-1]), dtype=np.int64)
    before = np.cumsum(has) - has
    want[np.arange(indices.size) + np.repeat(before, lengths)] = indices
    want[want_indptr[1:][has] - 1] = extra[has]
    got_indptr, got = csr_append_entries(indptr, indices, extra)
    np.testing.assert_array_equal(got_indptr, want_indptr)
    np.testing.assert_array_equal(got, want)
