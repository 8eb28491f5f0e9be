"""The event table's column builders: codes into strings become dictionary columns."""

from __future__ import annotations

import numpy as np
import pytest

from gpuan.trace.table import dict_column, used_codes


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
