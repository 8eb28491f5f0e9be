"""Array helpers of gpuan.arrays against numpy's own (slower) answers."""

from __future__ import annotations

import numpy as np
import pytest

from gpuan import arrays
from gpuan.arrays import unique_rows

NULL64 = np.iinfo(np.int64).min


def _numpys(cols):
    rows, inverse = np.unique(np.stack(cols, 1), axis=0, return_inverse=True)
    return rows.tolist(), inverse.ravel().tolist()


def _check(cols):
    rows, inverse = unique_rows(cols)
    assert (rows.tolist(), inverse.tolist()) == _numpys(cols)
    assert rows.dtype == inverse.dtype == np.int64 and inverse.ndim == 1


@pytest.fixture
def paths(monkeypatch):
    """The path each unique_rows call took: "table" (one pass over a table of the keys' range), "unique"
    (np.unique of one key) or absent (the column-by-column sort, where the range overflows one key)."""
    taken = []
    distinct = arrays._distinct

    def spy(key, span):
        taken.append("table" if span <= 4 * key.shape[0] + 1024 else "unique")
        return distinct(key, span)

    monkeypatch.setattr(arrays, "_distinct", spy)
    return taken


@pytest.mark.parametrize("n", [1, 7, 5000])
@pytest.mark.parametrize("low, high", [(0, 1), (-3, 3), (-40, 40), (-(10**6), 10**6), (-(2**40), 2**40)])
def test_unique_rows_is_numpys_unique_of_the_stacked_rows(paths, n, low, high):
    rng = np.random.default_rng(n * 31 + high)
    cols = [rng.integers(low, high, n, endpoint=True) for _ in range(3)]
    cols[2][:] = cols[2][0]  # one value: a constant column, as the rank of a single file
    _check(cols)
    span = 1
    for c in cols:
        span *= int(c.max()) - int(c.min()) + 1
    assert paths == ([] if span >= 2**63 else ["table" if span <= 4 * n + 1024 else "unique"])


@pytest.mark.parametrize("n", [7, 5000])
def test_nulls_sort_first_as_numpys(paths, n):
    """A null (the int64 minimum) beside values widens a column's range past one key: sorted by columns."""
    rng = np.random.default_rng(n)
    cols = [rng.integers(-5, 5, n), rng.integers(0, 3, n)]
    cols[0][::3] = NULL64
    _check(cols)
    assert paths == []
    _check([np.full(n, NULL64), cols[1]])  # an all-null column is a constant one: one key
    assert paths == ["table"]


@pytest.mark.parametrize("extra", [1023, 1024, 1025])
def test_the_table_bound(paths, extra):
    """Keys spanning 4n + 1023, 4n + 1024 and 4n + 1025 values: both sides of the table's limit."""
    n = 1000
    span = 4 * n + extra
    key = np.random.default_rng(extra).integers(0, span, n)
    key[:2] = (0, span - 1)  # the whole range used
    _check([key - 17])
    assert paths == ["table" if extra <= 1024 else "unique"]


def test_unique_rows_of_few_streams_among_many_events(paths):
    """The case info meets on every trace: ranks, devices and streams of many GPU events, few distinct."""
    rng = np.random.default_rng(0)
    n = 200_000
    _check([np.zeros(n, np.int64), rng.integers(0, 8, n), rng.integers(7, 40, n)])
    assert paths == ["table"]
    assert unique_rows([np.empty(0, np.int64)] * 3)[0].shape == (0, 3)
