"""The Trace: the event table, the flow table and the trace-level metadata, plus the helpers every
reader uses to build columns of the schema's types."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.errors import UsageError
from gpuan.trace.kinds import KINDS
from gpuan.trace.schema import FLOW_SCHEMA, SCHEMA

INDEX32 = pa.int32()
#: the "missing" marker of int64 columns while they are numpy arrays (Arrow columns use real nulls)
NULL64 = np.iinfo(np.int64).min


@dataclass
class Trace:
    """A loaded trace.

    ``events``: the event table (Arrow, columns of :data:`gpuan.trace.schema.SCHEMA`), rows grouped by
    kind and in time order within a kind; ``flows``: flow arrows (``ph`` s/t/f); ``metadata``:
    trace-level facts (``source``, ``format``, ``base_time_ns``, ``device_properties``,
    ``distributed_info``, process and thread names). A reader may hand over the flows as a function that
    makes them: they are then made on first use (most analyses never need them); with their number, if it
    knows it without making them (``flow_rows``).
    """

    events: pa.Table
    _flows: pa.Table | Callable[[], pa.Table] = field(default_factory=lambda: FLOW_SCHEMA.empty_table())
    metadata: dict[str, Any] = field(default_factory=dict)
    flow_rows: int | None = None

    @property
    def flows(self) -> pa.Table:
        """The flow table (made now if the reader deferred it)."""
        if callable(self._flows):
            self._flows = self._flows()
        return self._flows

    @property
    def flow_count(self) -> int:
        """The number of flows, without making them where the reader counted them."""
        if callable(self._flows) and self.flow_rows is not None:
            return self.flow_rows
        return self.flows.num_rows

    def __len__(self) -> int:
        return self.events.num_rows

    def to_pandas(self):
        """Return the event table as a pandas DataFrame (dictionary columns become categoricals)."""
        return self.events.to_pandas()

    def of_kind(self, *kinds: str) -> pa.Table:
        """Return the rows whose ``kind`` is one of ``kinds``."""
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown kind(s) {sorted(unknown)}; kinds are {', '.join(KINDS)}")
        return rows_of_kinds(self.events, kinds)

    def column(self, name: str, engine=None):
        """Return one column as an array of the engine's namespace (numpy on the CPU, CuPy on the GPU).

        Integer columns come back with nulls as the dtype's minimum; dictionary columns as their int
        codes (-1 for null)."""
        from gpuan.engine import current

        # through columns(): a table loaded with device="gpu" hands over its resident array
        return (engine or current()).columns(self.events, [name])[name]

    def to_cudf(self):
        """Return the event table as a cuDF DataFrame on the GPU (dictionary columns become categoricals).
        Raises UsageError where RAPIDS cuDF is not installed."""
        try:
            import cudf
        except ImportError as e:
            raise UsageError("Trace.to_cudf: RAPIDS cuDF is not installed (https://docs.rapids.ai/install)") from e
        return cudf.DataFrame.from_arrow(self.events)


def rows_of_kinds(table: pa.Table, kinds: Sequence[str]) -> pa.Table:
    """Return the rows of `table` whose ``kind`` is one of `kinds`: the table itself, not a copy, where every
    row is."""
    keep = kind_mask(table["kind"], kinds)
    return table.filter(keep) if keep.false_count else table


def is_one_of(column: pa.ChunkedArray | pa.Array, values: Sequence[str]) -> np.ndarray:
    """Return, as numpy, whether each value of the string `column` is one of `values` (False where it is
    null), as ``pc.is_in`` of the decoded strings says. A dictionary column (as the readers write ``kind``
    and ``name``) is decided once per dictionary entry and gathered by the codes, not by decoding and hashing
    millions of strings, and not gathered at all where no entry is one of them."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    value_set = pa.array(list(values), pa.string())
    if not pa.types.is_dictionary(column.type):
        return pc.is_in(column, value_set).fill_null(False).to_numpy(zero_copy_only=False)
    hit = pc.is_in(column.dictionary, value_set).to_numpy(zero_copy_only=False)
    if not hit.any():
        return np.zeros(len(column), bool)
    indices = column.indices
    if indices.null_count:
        return hit[indices.fill_null(0).to_numpy()] & indices.is_valid().to_numpy(zero_copy_only=False)
    # numpy's gather of the codes: 0.75 against 1.4 ms with Arrow's take and fill_null over 200k rows
    return hit[indices.to_numpy()]


def kind_mask(kind: pa.ChunkedArray | pa.Array, kinds: Sequence[str]) -> pa.Array:
    """Return :func:`is_one_of` of the dictionary column `kind` as an Arrow boolean array (a table's filter)."""
    return pa.array(is_one_of(kind, kinds))


def kind_time_order(kind: np.ndarray, ts: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Return the row order of the event table: by kind code, then by time (missing times, given as the
    int64 minimum, last), then by source position; rows where `keep` is False are left out. (The Kineto
    build finds the same order in compiled passes, :func:`gpuan.trace.kineto.order.table_order`; the
    other readers keep this one, as they do not load numba.)"""
    order = np.argsort(kind, kind="stable")  # a radix sort for int8
    if keep is not None:
        order = order[keep[order]]
    kinds = kind[order]
    bounds = np.flatnonzero(np.diff(kinds)) + 1
    for a, b in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [order.size]])):
        seg = ts[order[a:b]]
        seg = np.where(seg == NULL64, np.iinfo(np.int64).max, seg)  # missing times last
        if seg.size > 1 and (seg[1:] < seg[:-1]).any():
            order[a:b] = order[a:b][np.argsort(seg, kind="stable")]
    return order


def _bitmap(valid: np.ndarray | None) -> pa.Buffer | None:
    """Return an Arrow validity bitmap for a boolean mask (None when all are valid)."""
    if valid is None:
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def int_column(values: np.ndarray, null: int | None, type_: pa.DataType) -> pa.Array:
    """Return an Arrow integer column from numpy values, with `null` (a sentinel) as missing.

    The data buffer is shared with `values` when the dtype already matches (no copy)."""
    invalid = None if null is None else values == null
    if invalid is not None and not invalid.any():
        invalid = None
    np_type = type_.to_pandas_dtype()
    if values.dtype != np_type:
        values = values.astype(np_type)
    valid = None if invalid is None else ~invalid
    nulls = 0 if valid is None else int(invalid.sum())
    return pa.Array.from_buffers(type_, values.size, [_bitmap(valid), pa.py_buffer(values)], null_count=nulls)


def sparse_column(length: int, idx: np.ndarray, values: np.ndarray, type_: pa.DataType) -> pa.Array:
    """Return a column of `length` rows, null except rows `idx`, which hold `values`.

    Buffers start as untouched zero pages, so a mostly-null column costs memory only around its values."""
    data = np.zeros(length, type_.to_pandas_dtype())
    data[idx] = values
    valid = np.zeros(length, bool)
    valid[idx] = True
    return pa.Array.from_buffers(type_, length, [_bitmap(valid), pa.py_buffer(data)], null_count=length - idx.size)


def null_column(length: int, type_: pa.DataType) -> pa.Array:
    """Return an all-null column whose buffers are untouched zero pages (pa.nulls would fill them)."""
    if pa.types.is_dictionary(type_):
        return pa.DictionaryArray.from_arrays(null_column(length, type_.index_type), pa.array([], type_.value_type))
    width = type_.bit_width // 8
    zeros = pa.py_buffer(np.zeros(length * width + 8, np.uint8))
    bitmap = pa.py_buffer(np.zeros((length + 7) // 8 + 8, np.uint8))
    return pa.Array.from_buffers(type_, length, [bitmap, zeros], null_count=length)


def used_codes(codes: np.ndarray, count: int) -> np.ndarray:
    """Return the distinct non-null codes of a column of codes below `count` (-1 = null), ascending: one
    mark per code, O(n), where np.unique sorts (and np.bincount first copies the codes into int64)."""
    seen = np.zeros(count + 1, bool)
    seen[codes] = True  # null (-1) marks the extra last slot
    return np.flatnonzero(seen[:count])


def dict_column(
    codes: np.ndarray,
    strings: Sequence[str],
    index_type: pa.DataType = INDEX32,
    idx: np.ndarray | None = None,
    length: int | None = None,
) -> pa.Array:
    """Return a dictionary column from integer codes into `strings` (-1 = null).

    With `idx` and `length`, the codes are those of rows `idx` of a column of `length` rows, the rest
    null. The dictionary holds only the strings used, sorted, so that the same data gives the same column
    however it was read."""
    lookup, dictionary = sorted_dictionary(used_codes(codes, len(strings)), strings, index_type)
    new = lookup[codes]
    if idx is None:
        indices = int_column(new, -1, index_type)
    else:
        keep = new >= 0
        indices = sparse_column(length, idx[keep], new[keep], index_type)
    return pa.DictionaryArray.from_arrays(indices, dictionary)


def sorted_dictionary(
    used: np.ndarray, strings: Sequence[str], index_type: pa.DataType = INDEX32
) -> tuple[np.ndarray, pa.Array]:
    """Return (lookup, dictionary) for the distinct codes `used` (ascending) into `strings`: the dictionary
    holds their strings sorted, and lookup (one slot per string, plus a last one) gives each used code its
    place there, -1 for the others; so lookup[codes] maps a column's codes, null codes (-1) to -1."""
    words = [strings[i] for i in used.tolist()]
    # Python's stable sort, as numpy's of an object array compares (by <), in a third of the time
    order = sorted(range(len(words)), key=words.__getitem__)
    lookup = np.full(len(strings) + 1, -1, index_type.to_pandas_dtype())
    lookup[used[order]] = np.arange(used.size)
    return lookup, pa.array([words[i] for i in order], pa.string())


def build_table(columns: dict[str, pa.Array | np.ndarray], length: int, schema: pa.Schema = SCHEMA) -> pa.Table:
    """Return a table of `schema` from the given columns; the schema's other columns are all null."""
    arrays = []
    for f in schema:
        col = columns.get(f.name)
        if col is None:
            arrays.append(null_column(length, f.type))
            continue
        if isinstance(col, np.ndarray):
            col = pa.array(col)
        if col.type != f.type:
            col = col.cast(f.type)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)
