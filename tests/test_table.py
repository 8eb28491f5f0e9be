"""The event table's column builders: codes into strings become dictionary columns, and the Kineto
scanner's sparse fields columns in the table's row order (compiled, checked against the numpy builders)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from gpuan.trace.kineto import scatter
from gpuan.trace.kineto.shapes import one_line, one_line_each
from gpuan.trace.table import dict_column, sparse_column, used_codes


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_used_codes_are_the_distinct_non_null_codes(dtype):
    rng = np.random.default_rng(7)
    codes = rng.integers(-1, 500, 100_000).astype(dtype)
    codes[codes == 250] = 499  # a gap in the middle, and the last code used
    assert used_codes(codes, 500).tolist() == np.unique(codes[codes >= 0]).tolist()
    assert used_codes(np.full(10, -1, dtype), 5).size == 0
    assert used_codes(np.empty(0, dtype), 0).size == 0


def test_dict_column_decodes_to_the_strings_with_a_sorted_dictionary():
    strings = ["zeta", "alpha", "unused", "mid"]
    codes = np.array([0, -1, 3, 1, 0, -1], np.int32)
    col = dict_column(codes, strings)
    assert col.to_pylist() == ["zeta", None, "mid", "alpha", "zeta", None]
    assert col.dictionary.to_pylist() == ["alpha", "mid", "zeta"]  # only the strings used, sorted
    sparse = dict_column(np.array([3, 1], np.int32), strings, idx=np.array([1, 4]), length=6)
    assert sparse.to_pylist() == [None, "mid", None, None, "alpha", None]


def _sparse_field(rng, rows: int):
    """A table order that drops a tenth of `rows` file rows, and the rows of a sparse field over a third of
    them (int32, as the scanner gives them)."""
    kept = np.flatnonzero(rng.random(rows) > 0.1)
    order = rng.permutation(kept)
    new_row = np.full(rows, -1, np.int64)
    new_row[order] = np.arange(order.size)
    idx = np.sort(rng.choice(rows, rows // 3, replace=False)).astype(np.int32)
    return new_row, order.size, idx


@pytest.mark.parametrize("dtype, type_", [(np.int32, pa.int32()), (np.int64, pa.int64()), (np.int64, pa.int32())])
def test_compiled_sparse_int_column_is_the_numpy_one(dtype, type_):
    rng = np.random.default_rng(3)
    new_row, n, idx = _sparse_field(rng, 20_000)
    bound = 2**40 if dtype == np.int64 else 2**31  # int64 values into an int32 column wrap as numpy's do
    vals = rng.integers(-bound, bound, idx.size).astype(dtype)
    got = scatter.int_column(new_row, idx, vals, n, type_)
    rows = new_row[idx]
    want = sparse_column(n, rows[rows >= 0], vals[rows >= 0], type_)
    assert got.equals(want) and got.null_count == want.null_count == n - int((rows >= 0).sum())


@pytest.mark.parametrize("form", [None, one_line_each])
def test_compiled_sparse_text_column_decodes_to_the_strings(form):
    rng = np.random.default_rng(5)
    strings = ["[1, 2]", "[1,\n 2]", "b", "a", "unused", '["x",  "y"]', "b "]
    new_row, n, idx = _sparse_field(rng, 20_000)
    codes = rng.choice([0, 1, 2, 3, 5, 6, -1], idx.size).astype(np.int32)
    codes[new_row[idx] < 0] = 4  # "unused" appears only on dropped rows: not in the dictionary
    col = scatter.text_column(new_row, idx, codes, n, strings, form)
    text = one_line if form else (lambda s: s)  # each string in its form, judged alone
    want = [None] * n
    for r, c in zip(new_row[idx].tolist(), codes.tolist()):
        if r >= 0 and c >= 0:
            want[r] = text(strings[c])
    assert col.to_pylist() == want
    assert col.dictionary.to_pylist() == sorted({w for w in want if w is not None})
    if form is None:  # the same column as the numpy path builds
        rows = new_row[idx]
        assert col.equals(dict_column(codes[rows >= 0], strings, idx=rows[rows >= 0], length=n))


@pytest.mark.parametrize("form", [None, one_line_each])
def test_a_sparse_field_no_event_has_is_a_null_column_of_its_type(form):
    new_row = np.arange(1000, dtype=np.int64)
    none = np.empty(0, np.int32)
    for type_ in (pa.int32(), pa.int64()):
        col = scatter.int_column(new_row, none, none.astype(type_.to_pandas_dtype()), 1000, type_)
        assert col.type == type_ and col.null_count == 1000 and col.equals(pa.nulls(1000, type_))
    text = scatter.text_column(new_row, none, none, 1000, ["a", "b"], form)
    assert text.type == pa.dictionary(pa.int32(), pa.string()) and text.null_count == 1000
    assert text.dictionary.to_pylist() == [] and text.to_pylist() == [None] * 1000
    # the same column a field with values on dropped rows only gives (the full pass)
    dropped = np.full(1000, -1, np.int64)
    assert text.equals(
        scatter.text_column(dropped, np.array([3], np.int32), np.array([1], np.int32), 1000, ["a", "b"], form)
    )
