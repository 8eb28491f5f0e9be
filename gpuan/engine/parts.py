"""Per-rank partial results and how they reach process 0: named Arrow tables, each row tagged with the
part (the rank) it came from, gathered column by column as typed numpy buffers.

A command over a run's ranks under ``mpirun`` (``gpuan info|cycles|sol RUN_DIR``) runs the per-rank part
of its analysis on each process's own ranks; the partial tables cross to process 0, which combines them
into what the one-process analysis of the merged run gives. Nothing is pickled: a numeric column crosses
as its values and a validity mask, a string column as its UTF-8 bytes concatenated with their lengths (a
vocabulary of its own words), a list column as its values and lengths, each one :meth:`Procs.gatherv`.
A dictionary column crosses as its strings and arrives dictionary-encoded in the order its words first
appear (the combining step gives it another dictionary where the words' order matters).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from gpuan.engine.procs import Procs

#: named tables: an analysis's partial result of one rank (or of several, concatenated)
Parts = dict[str, pa.Table]
#: the column that says which part (rank) a row of gathered :data:`Parts` came from
PART = "part"


def tagged(parts: Parts, part: int) -> Parts:
    """Return `parts` with the :data:`PART` column (`part`, int64) put first in every table."""
    return {name: t.add_column(0, PART, pa.array(np.full(t.num_rows, part, np.int64))) for name, t in parts.items()}


def concat(parts: list[Parts]) -> Parts:
    """Return the tables of several parts (each of the same names and schemas), one after another."""
    names = parts[0].keys() if parts else ()
    return {name: pa.concat_tables([p[name] for p in parts]).combine_chunks() for name in names}


def gather(procs: Procs, parts: Parts) -> Parts | None:
    """Return on process 0 every process's `parts` (tagged with :data:`PART`) concatenated and ordered by
    part, each part's rows in their order; None elsewhere. Every process passes tables of the same names and
    schemas (those of an empty part too)."""
    gathered = {name: gather_table(procs, table) for name, table in parts.items()}
    if not procs.is_root:
        return None
    return {name: _by_part(table) for name, table in gathered.items()}


def _by_part(table: pa.Table) -> pa.Table:
    """Return the rows in the order of their part (stable: a part's rows keep their order)."""
    part = table[PART].to_numpy()
    if part.size < 2 or bool((part[1:] >= part[:-1]).all()):
        return table
    return table.take(pa.array(np.argsort(part, kind="stable")))


def gather_table(procs: Procs, table: pa.Table) -> pa.Table | None:
    """Return on process 0 every process's `table` (one schema on all) concatenated in process order, None
    elsewhere; each column crosses as typed numpy buffers (see the module docstring)."""
    if procs.comm is None:
        return table
    columns = [_gather_column(procs, table[f.name], f.type) for f in table.schema]
    return pa.Table.from_arrays(columns, schema=_plain(table.schema)) if procs.is_root else None


def _plain(schema: pa.Schema) -> pa.Schema:
    """`schema` as gathered tables have it: its dictionary columns dictionary-encoded over strings, int32."""
    return pa.schema(
        [f.with_type(pa.dictionary(pa.int32(), pa.string())) if pa.types.is_dictionary(f.type) else f for f in schema]
    )


def _gather_column(procs: Procs, column: pa.ChunkedArray, type_: pa.DataType) -> pa.Array | None:
    """Return on process 0 every process's `column` (of `type_`) concatenated, None elsewhere."""
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    valid = procs.gatherv(_valid(array))
    if pa.types.is_dictionary(type_):
        array = array.cast(type_.value_type)
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        got = gather_strings(procs, array)
        if got is None:
            return None
        return got.dictionary_encode() if pa.types.is_dictionary(type_) else got.cast(type_)
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        lengths = procs.gatherv(pc.fill_null(pc.list_value_length(array), 0).to_numpy().astype(np.int64))
        values = procs.gatherv(_values(array.flatten()))
        if not procs.is_root:
            return None
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        child = _array(values, np.ones(values.size, bool), type_.value_type)
        out = pa.LargeListArray.from_arrays(pa.array(offsets), child, mask=pa.array(valid == 0))
        return out.cast(type_)
    if pa.types.is_null(type_):
        return pa.nulls(valid.size) if procs.is_root else None
    values = procs.gatherv(_values(array))
    return _array(values, valid.astype(bool), type_) if procs.is_root else None


def gather_strings(procs: Procs, array: pa.Array) -> pa.Array | None:
    """Return on process 0 every process's strings (`array`, nulls kept) concatenated in process order, None
    elsewhere: they cross as their UTF-8 bytes, one buffer, and their lengths (-1 for null)."""
    array = array.cast(pa.large_string())
    valid = _valid(array)
    lengths = np.where(valid, pc.fill_null(pc.binary_length(array), 0).to_numpy(), -1).astype(np.int64)
    data = np.frombuffer(array.buffers()[2] or b"", np.uint8) if len(array) else np.zeros(0, np.uint8)
    offsets = np.frombuffer(array.buffers()[1], np.int64)[array.offset : array.offset + len(array) + 1]
    data = data[offsets[0] : offsets[-1]] if len(array) else data
    lengths, data = procs.gatherv(lengths), procs.gatherv(np.ascontiguousarray(data))
    if not procs.is_root:
        return None
    return strings(data, lengths)


def strings(data: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Return the string array of UTF-8 `data` cut at `lengths` (-1: null)."""
    offsets = np.concatenate(([0], np.cumsum(np.maximum(lengths, 0)))).astype(np.int64)
    mask = lengths < 0
    bitmap = pa.py_buffer(np.packbits(~mask, bitorder="little")) if mask.any() else None
    out = pa.LargeStringArray.from_buffers(
        lengths.size, pa.py_buffer(offsets), pa.py_buffer(data), bitmap, int(mask.sum())
    )
    return out.cast(pa.string())


def gather_json(procs: Procs, items: list) -> list | None:
    """Return on process 0 every process's `items` (JSON-able small metadata: a rank's metadata dict, never
    event records) in process order, None elsewhere; each item crosses as JSON text (``default=str``, as
    gpuan writes metadata into its Parquet files)."""
    texts = pa.array([json.dumps(item, default=str) for item in items], pa.string())
    got = gather_strings(procs, texts)
    return None if got is None else [json.loads(text) for text in got.to_pylist()]


def _valid(array: pa.Array) -> np.ndarray:
    """The validity of each element of `array` as uint8 (1 valid)."""
    if array.null_count == 0:
        return np.ones(len(array), np.uint8)
    return array.is_valid().to_numpy(zero_copy_only=False).astype(np.uint8)


def _values(array: pa.Array) -> np.ndarray:
    """The values of a numeric or boolean `array` as numpy (nulls as zero; booleans as uint8)."""
    if pa.types.is_boolean(array.type):
        return pc.fill_null(array, False).to_numpy(zero_copy_only=False).astype(np.uint8)
    if array.null_count:
        array = pc.fill_null(array, pa.scalar(0, array.type))
    return np.ascontiguousarray(array.to_numpy(zero_copy_only=False))


def _array(values: np.ndarray, valid: np.ndarray, type_: pa.DataType) -> pa.Array:
    """Return an Arrow array of `type_` from gathered `values` and their validity."""
    if pa.types.is_boolean(type_):
        values = values.astype(bool)
    mask = None if valid.all() else ~valid
    return pa.array(values, type_, mask=mask)
