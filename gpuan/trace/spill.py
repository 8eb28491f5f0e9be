"""Event tables larger than memory: each part's rows spilled to disk in the table's order, then merged
back into one stream of pieces in the order of the whole table (kind, then time, then position in the
source), a few batches in memory at a time. The merge reads at most :data:`FAN_IN` runs at once: a kind
spilled in more parts is first merged a group of parts at a time into longer runs on disk, as often as it
takes, so its memory does not grow with the number of parts (the size of the trace).

A kind fills few of the table's columns (a kernel has no input shapes, an operator no grid): each part's
rows of one kind are spilled with only the columns they fill, and the others come back as null columns
whose memory is never touched (:func:`gpuan.trace.table.null_column`); no step of the merge makes them
real memory."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from gpuan.trace.kinds import KINDS
from gpuan.trace.table import dict_column, null_column

#: rows per spilled batch: the merge holds one batch of every run it reads at a time
BATCH_ROWS = 1 << 13
#: the most runs merged at once (a batch of each, a few MB a run): more parts are merged in rounds
FAN_IN = 64
_LAST = np.iinfo(np.int64).max  # missing times sort last
_IPC = pa.ipc.IpcWriteOptions(compression="lz4")


@dataclass
class Spill:
    """The parts of a table spilled to `directory`: for each part, its rows of each kind in an Arrow IPC
    file (lz4) of the columns they fill."""

    directory: Path
    schema: pa.Schema | None = None
    runs: list[dict[int, Path]] = field(default_factory=list)  # per part: kind code -> its file
    rows: int = 0
    _flows: pa.ipc.RecordBatchFileWriter | None = None

    def add(self, table: pa.Table) -> None:
        """Spill one part's table, whose rows are grouped by kind and in time order within each kind."""
        self.schema = self.schema or table.schema
        codes = table["kind"].combine_chunks().indices.to_numpy(zero_copy_only=False)
        bounds = np.flatnonzero(np.diff(codes)) + 1
        files: dict[int, Path] = {}
        for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), codes.size]):
            if b > a:
                piece = table.slice(a, b - a)
                filled = piece.select([c for c in piece.column_names if piece[c].null_count < piece.num_rows])
                path = self.directory / f"part{len(self.runs):06d}-kind{int(codes[a]):02d}.arrow"
                with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, filled.schema, options=_IPC) as out:
                    out.write_table(filled, max_chunksize=BATCH_ROWS)
                files[int(codes[a])] = path
        self.runs.append(files)
        self.rows += table.num_rows

    def add_flows(self, flows: pa.Table) -> None:
        """Spill one part's flow table (the parts' flows stay in the order they are added)."""
        if flows.num_rows == 0:
            return
        flows = flows.cast(_plain(flows.schema))  # one file cannot change a dictionary between parts
        if self._flows is None:
            sink = pa.OSFile(str(self.directory / "flows.arrow"), "wb")
            self._flows = pa.ipc.new_file(sink, flows.schema, options=_IPC)
        self._flows.write_table(flows)

    def flows(self) -> Iterator[pa.Table]:
        """Yield the spilled flow tables, in the order they were added, a batch at a time."""
        from gpuan.trace.schema import FLOW_SCHEMA

        if self._flows is None:
            return
        self._flows.close()
        self._flows = None
        reader = pa.ipc.open_file(pa.OSFile(str(self.directory / "flows.arrow"), "rb"))
        for i in range(reader.num_record_batches):
            yield pa.Table.from_batches([reader.get_batch(i)]).cast(FLOW_SCHEMA)

    def merged(self, piece_rows: int) -> Iterator[pa.Table]:
        """Yield the spilled rows in the whole table's order, kind by kind, as tables of `piece_rows` rows
        (fewer at the end of a kind): ties in time keep the parts' order, so source order breaks them."""
        for code in range(len(KINDS)):
            paths = [files[code] for files in self.runs if code in files]
            level = 0
            while len(paths) > FAN_IN:
                # consecutive parts merge into one run: its place among the runs keeps their order for ties
                level += 1
                groups = [paths[i : i + FAN_IN] for i in range(0, len(paths), FAN_IN)]
                paths = [
                    self._merge_to_file(group, f"kind{code:02d}-level{level}-run{k:06d}")
                    for k, group in enumerate(groups)
                ]
            runs = [_Run(path, part, self.schema) for part, path in enumerate(paths)]
            if runs:
                yield from _pieces(_merge(runs, self.schema), piece_rows, self.schema)

    def _merge_to_file(self, paths: list[Path], name: str) -> Path:
        """Merge the runs in `paths` (in part order) into one run file `name`, of the columns any of them
        fills, and delete them; returns its path. Dictionary columns other than ``kind`` are written as
        their words (an IPC file cannot change a dictionary between batches) and encoded again on reading."""
        runs = [_Run(path, part, self.schema) for part, path in enumerate(paths)]
        filled = set().union(*(r.reader.schema.names for r in runs))
        fields = [f for f in self.schema if f.name in filled]
        schema = pa.schema([f if f.name == "kind" else pa.field(f.name, _value_type(f.type)) for f in fields])
        out = self.directory / f"{name}.arrow"
        with pa.OSFile(str(out), "wb") as sink, pa.ipc.new_file(sink, schema, options=_IPC) as writer:
            for table in _merge(runs, self.schema):
                writer.write_table(table.select([f.name for f in fields]).cast(schema), max_chunksize=BATCH_ROWS)
        for path in paths:
            path.unlink()  # the disk holds each row about once, however many rounds
        return out

    def remove(self) -> None:
        """Delete the spilled files and their directory (also a file half written when an error struck)."""
        if self._flows is not None:
            self._flows.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class _Run:
    """One part's rows of one kind, read a batch at a time."""

    def __init__(self, path: Path, part: int, schema: pa.Schema) -> None:
        self.reader = pa.ipc.open_file(pa.OSFile(str(path), "rb"))
        self.part, self.schema, self.next = part, schema, 0
        self.table: pa.Table | None = None
        self.keys = np.empty(0, np.int64)
        self.at = 0

    def load(self) -> bool:
        """Read the next batch (the columns it lacks as null columns); returns False when the run is done."""
        if self.next >= self.reader.num_record_batches:
            return False
        batch = self.reader.get_batch(self.next)
        self.next += 1
        n = batch.num_rows
        cols = [_column(batch, f) if f.name in batch.schema.names else null_column(n, f.type) for f in self.schema]
        self.table = pa.Table.from_arrays(cols, schema=self.schema)
        ts = self.table["ts"]
        self.keys = (ts.fill_null(_LAST) if ts.null_count else ts).to_numpy()
        self.at = 0
        return True

    def last_key(self) -> tuple[int, int]:
        """The (time, part) of the last row loaded: no row still unread in this run comes before it."""
        return int(self.keys[-1]), self.part


def _column(batch: pa.RecordBatch, field: pa.Field) -> pa.Array:
    """Return the batch's column of `field` in its type: words written plain by a merge round are encoded
    again; a column null throughout as an untouched null column."""
    col = batch.column(field.name)
    if col.null_count == len(col):
        return null_column(len(col), field.type)
    if pa.types.is_dictionary(field.type) and not pa.types.is_dictionary(col.type):
        return col.dictionary_encode().cast(field.type)
    return col


def _merge(runs: list[_Run], schema: pa.Schema) -> Iterator[pa.Table]:
    """Yield the rows of the runs (each in order) in (time, part, row) order, as tables."""
    live = [r for r in runs if r.load()]
    while live:
        # every loaded row up to the smallest last-loaded (time, part) may go out: nothing unread precedes it
        bound_key, bound_part = min(r.last_key() for r in live)
        taken, keys = [], []
        for r in live:
            if r.part == bound_part:
                stop = r.keys.size
            else:
                stop = int(np.searchsorted(r.keys, bound_key, "right" if r.part < bound_part else "left"))
            if stop > r.at:
                taken.append(r.table.slice(r.at, stop - r.at))
                keys.append(r.keys[r.at : stop])
                r.at = stop
        if taken:
            order = np.argsort(np.concatenate(keys), kind="stable")  # runs were taken in part order
            yield _take(_stack(taken, schema), order)
        live = [r for r in live if r.at < r.keys.size or r.load()]


def _pieces(tables: Iterator[pa.Table], rows: int, schema: pa.Schema) -> Iterator[pa.Table]:
    """Yield the rows of `tables` regrouped into tables of `rows` rows (the last may be shorter)."""
    held: list[pa.Table] = []
    count = 0
    for t in tables:
        held.append(t)
        count += t.num_rows
        while count >= rows:
            whole = _stack(held, schema)
            yield whole.slice(0, rows)
            rest = whole.slice(rows)
            held, count = ([rest] if rest.num_rows else []), rest.num_rows
    if count:
        yield _stack(held, schema)


def _stack(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """Return the tables' rows as one table, each column one chunk: a column null throughout as an
    untouched null column, a dictionary column over one sorted dictionary of the words it holds (as the
    readers make them, so that a column does not depend on how the parts were cut)."""
    n = sum(t.num_rows for t in tables)
    cols = []
    for i, f in enumerate(schema):
        chunks = [c for t in tables for c in t.column(i).chunks if len(c)]
        if all(c.null_count == len(c) for c in chunks):
            cols.append(null_column(n, f.type))
        elif pa.types.is_dictionary(f.type) and f.name != "kind":  # kind: the same dictionary, of every kind
            cols.append(_dictionary_concat(chunks, f.type))
        else:
            cols.append(pa.concat_arrays(chunks))
    return pa.Table.from_arrays(cols, schema=schema)


def _dictionary_concat(chunks: list[pa.DictionaryArray], type_: pa.DictionaryType) -> pa.DictionaryArray:
    """Return the dictionary arrays as one, over one sorted dictionary of the words they use. Only the words
    each chunk uses are read: a chunk is a slice of a spilled batch, which carries its part's whole dictionary
    (the merge reads thousands of such slices), and reading all of it for every slice cost the merge 2 us a
    row with 20k distinct input shapes."""
    words: dict[str, int] = {}
    codes = []
    for c in chunks:
        used, local = np.unique(c.indices.fill_null(-1).to_numpy(zero_copy_only=False), return_inverse=True)
        ids = np.full(used.size, -1, np.int64)  # -1: a null code
        valid = used >= 0
        ids[valid] = [words.setdefault(w, len(words)) for w in c.dictionary.take(pa.array(used[valid])).to_pylist()]
        codes.append(ids[local.ravel()])
    return dict_column(np.concatenate(codes), list(words), type_.index_type).cast(type_)


def _take(table: pa.Table, order: np.ndarray) -> pa.Table:
    """Return the table's rows in `order`; null columns stay untouched null columns."""
    index = pa.array(order)
    cols = [
        null_column(order.size, f.type) if col.null_count == len(col) else col.take(index)
        for f, col in zip(table.schema, table.columns)
    ]
    return pa.Table.from_arrays(cols, schema=table.schema)


def _plain(schema: pa.Schema) -> pa.Schema:
    """Return the schema with dictionary columns as their plain value type."""
    return pa.schema([pa.field(f.name, _value_type(f.type)) for f in schema])


def _value_type(t: pa.DataType) -> pa.DataType:
    """Return a dictionary type's value type, any other type as it is."""
    return t.value_type if pa.types.is_dictionary(t) else t
