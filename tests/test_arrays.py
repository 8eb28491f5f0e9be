"""Array helpers of gpuan.arrays against numpy's own (slower) answers."""

from __future__ import annotations

import numpy as np
import pytest

from gpuan.arrays import unique_rows

NULL64 = np.iinfo(np.int64).min


@pytest.mark.parametrize("n", [1, 7, 5000])
@pytest.mark.parametrize("high", [1, 3, 40, 10**6, 2**40])
def test_unique_rows_is_numpys_unique_of_the_stacked_rows(n, high):
    """Small value ranges take the one-pass table, wide ones np.unique of one key or the column-by-column
    sort; nulls (the int64 minimum) sort first, as numpy's."""
    rng = np.random.default_rng(n * 31 + high)
    cols = [rng.integers(-high, high, n) for _ in range(3)]
    cols[1][::3] = NULL64  # a column with nulls: its span is the whole int64 range
    cols[2][:] = cols[2][0]  # one value: a constant column, as the rank of a single file
    got_rows, got_inverse = unique_rows(cols)
    want_rows, want_inverse = np.unique(np.stack(cols, 1), axis=0, return_inverse=True)
    assert got_rows.tolist() == want_rows.tolist()
    assert got_inverse.tolist() == want_inverse.ravel().tolist()
    assert got_rows.dtype == got_inverse.dtype == np.int64


def test_unique_rows_of_few_streams_among_many_events():
    """The case info meets on every trace: ranks, devices and streams of many GPU events, few distinct."""
    rng = np.random.default_rng(0)
    n = 200_000
    cols = [np.zeros(n, np.int64), rng.integers(0, 8, n), rng.integers(7, 40, n)]
    rows, inverse = unique_rows(cols)
    want_rows, want_inverse = np.unique(np.stack(cols, 1), axis=0, return_inverse=True)
    assert rows.tolist() == want_rows.tolist() and (inverse == want_inverse.ravel()).all()
    assert unique_rows([np.empty(0, np.int64)] * 3)[0].shape == (0, 3)
