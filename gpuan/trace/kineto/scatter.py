"""The scanner's sparse fields made Arrow columns in the table's row order, one compiled pass each.

A sparse field comes from the scanner as (file rows, values) of the events that have it. Its column puts
each value at its row's place in the table (`new_row`: the table row of each file row, -1 where the row
was dropped), null elsewhere. numpy took five passes and a bool array of every row for it (map the rows,
drop the dropped ones, scatter the values, scatter the validity, pack it into bits); here the values and
the validity bits are written in one pass, string codes mapped to their dictionary's on the way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
from numba import njit

from gpuan.trace.table import INDEX32, null_column, sorted_dictionary

#: the numba options of these kernels: cached on disk, and no runtime (they allocate nothing, like the scanner)
_JIT = {"cache": True, "nogil": True, "_nrt": False}


@njit(forceinline=True, **_JIT)
def _put(data, bits, r, v):
    """Write v at row r of data and set the row's validity bit; returns 1 if the row had no value yet."""
    data[r] = v
    byte = bits[r >> 3]
    bit = np.uint8(1) << np.uint8(r & 7)
    bits[r >> 3] = byte | bit
    return 0 if byte & bit else 1


@njit(**_JIT)
def _scatter(new_row, idx, vals, data, bits):
    """Write vals[i] at data[new_row[idx[i]]] and set that row's bit, for the rows kept; returns how many
    rows got a value."""
    count = 0
    for i in range(idx.shape[0]):
        r = new_row[idx[i]]
        if r < 0:
            continue
        count += _put(data, bits, r, vals[i])
    return count


@njit(**_JIT)
def _scatter_codes(new_row, idx, codes, remap, data, bits):
    """As _scatter, for string codes: row new_row[idx[i]] gets remap[codes[i]], or stays null where that
    is -1; returns how many rows got a value."""
    count = 0
    for i in range(idx.shape[0]):
        r = new_row[idx[i]]
        if r < 0:
            continue
        v = remap[codes[i]]  # a null code (-1) reads remap's last slot, -1
        if v < 0:
            continue
        count += _put(data, bits, r, v)
    return count


@njit(**_JIT)
def _mark_used(new_row, idx, codes, seen):
    """Set seen[c] for the code c of every row kept (a null code, -1, marks seen's last slot)."""
    for i in range(idx.shape[0]):
        if new_row[idx[i]] >= 0:
            seen[codes[i]] = True


def _buffers(length: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Return zeroed data and validity-bit arrays for a column of `length` rows (untouched zero pages
    until written)."""
    return np.zeros(length, dtype), np.zeros((length + 7) // 8, np.uint8)


def _array(type_: pa.DataType, data: np.ndarray, bits: np.ndarray, count: int) -> pa.Array:
    """Return the Arrow array over `data` with validity `bits`, `count` rows valid."""
    length = data.size
    return pa.Array.from_buffers(type_, length, [pa.py_buffer(bits), pa.py_buffer(data)], null_count=length - count)


def int_column(new_row: np.ndarray, idx: np.ndarray, vals: np.ndarray, length: int, type_: pa.DataType) -> pa.Array:
    """Return the integer column of `type_` of a sparse field (file rows `idx`, values `vals`) in the table's
    row order `new_row` (a table of `length` rows), null where a row has no value."""
    if idx.size == 0:  # most fields of most traces: no pass, no buffers written
        return null_column(length, type_)
    data, bits = _buffers(length, type_.to_pandas_dtype())
    count = _scatter(new_row, idx, vals, data, bits)
    return _array(type_, data, bits, count)


def text_column(
    new_row: np.ndarray,
    idx: np.ndarray,
    codes: np.ndarray,
    length: int,
    strings: Sequence[str],
    form: Callable[[list[str]], list[str]] | None = None,
) -> pa.Array:
    """Return the dictionary column of a sparse field of string codes (into `strings`) in the table's row
    order `new_row` (a table of `length` rows): its dictionary holds the strings its rows use, sorted, as
    :func:`gpuan.trace.table.dict_column` makes it. With `form` (the strings it is given, each put in one
    form), the strings are put in that form first (strings of one form share a code)."""
    if idx.size == 0:
        return null_column(length, pa.dictionary(INDEX32, pa.string()))
    seen = np.zeros(len(strings) + 1, np.bool_)
    _mark_used(new_row, idx, codes, seen)
    used = np.flatnonzero(seen[:-1])
    if form is None:
        remap, dictionary = sorted_dictionary(used, strings)
    else:
        texts: dict[str, int] = {}
        to_text = np.full(len(strings) + 1, -1, np.int64)
        to_text[used] = [texts.setdefault(t, len(texts)) for t in form([strings[i] for i in used.tolist()])]
        lookup, dictionary = sorted_dictionary(np.arange(len(texts)), list(texts))
        remap = lookup[to_text]  # lookup's last slot is -1: a string not used stays -1
    data, bits = _buffers(length, INDEX32.to_pandas_dtype())
    count = _scatter_codes(new_row, idx, codes, remap.astype(np.int32, copy=False), data, bits)
    return pa.DictionaryArray.from_arrays(_array(INDEX32, data, bits, count), dictionary)
