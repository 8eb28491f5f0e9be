"""Event tables larger than memory: each part's rows spilled to a file on disk in the table's order, then
merged back into one stream of pieces in the order of the whole table (kind, then time, then position in
the source), a few batches in memory at a time."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from gpuan.trace.kinds import KINDS
from gpuan.trace.table import dict_column

#: rows per spilled batch: the merge holds one batch of every part at a time
BATCH_ROWS = 1 << 14
_LAST = np.iinfo(np.int64).max  # missing times sort last


@dataclass
class Spill:
    """The parts of a table spilled to `directory`, one Arrow IPC file each (lz4), with the batches that
    hold each kind."""

    directory: Path
    files: list[Path] = field(default_factory=list)
    batches: list[dict[int, list[int]]] = field(default_factory=list)  # per part: kind code -> batch numbers
    rows: int = 0
    _flows: pa.ipc.RecordBatchFileWriter | None = None

    def add_flows(self, flows: pa.Table) -> None:
        """Spill one part's flow table (the parts' flows stay in the order they are added)."""
        if flows.num_rows == 0:
            return
        flows = flows.cast(_plain(flows.schema))  # one file cannot change a dictionary between parts
        if self._flows is None:
            sink = pa.OSFile(str(self.directory / "flows.arrow"), "wb")
            options = pa.ipc.IpcWriteOptions(compression="lz4")
            self._flows = pa.ipc.new_file(sink, flows.schema, options=options)
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

    def add(self, table: pa.Table) -> None:
        """Spill one part's table, whose rows are grouped by kind and in time order within each kind."""
        path = self.directory / f"part{len(self.files):06d}.arrow"
        codes = table["kind"].combine_chunks().indices.to_numpy(zero_copy_only=False) if table.num_rows else []
        bounds = np.flatnonzero(np.diff(codes)) + 1 if len(codes) else np.empty(0, np.int64)
        starts = np.concatenate([[0], bounds]).astype(np.int64)
        ends = np.concatenate([bounds, [len(codes)]]).astype(np.int64)
        where: dict[int, list[int]] = {}
        n = 0
        options = pa.ipc.IpcWriteOptions(compression="lz4")
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema, options=options) as writer:
            for a, b in zip(starts.tolist(), ends.tolist()):
                if b <= a:
                    continue
                batches = table.slice(a, b - a).to_batches(max_chunksize=BATCH_ROWS)
                where[int(codes[a])] = list(range(n, n + len(batches)))
                for batch in batches:
                    writer.write_batch(batch)
                n += len(batches)
        self.files.append(path)
        self.batches.append(where)
        self.rows += table.num_rows

    def merged(self, piece_rows: int) -> Iterator[pa.Table]:
        """Yield the spilled rows in the whole table's order, kind by kind, as tables of `piece_rows` rows
        (fewer at the end of a kind): ties in time keep the parts' order, so source order breaks them."""
        readers = [pa.ipc.open_file(pa.OSFile(str(p), "rb")) for p in self.files]
        for code in range(len(KINDS)):
            runs = [_Run(readers[i], where[code], i) for i, where in enumerate(self.batches) if code in where]
            if runs:
                yield from _pieces(_merge(runs), piece_rows)

    def remove(self) -> None:
        """Delete the spilled files and their directory."""
        if self._flows is not None:
            self._flows.close()
        (self.directory / "flows.arrow").unlink(missing_ok=True)
        for p in self.files:
            p.unlink(missing_ok=True)
        try:
            os.rmdir(self.directory)
        except OSError:
            pass


class _Run:
    """One part's rows of one kind, read a batch at a time."""

    def __init__(self, reader: pa.ipc.RecordBatchFileReader, batches: list[int], order: int) -> None:
        self.reader, self.todo, self.order = reader, list(batches), order
        self.table: pa.Table | None = None
        self.keys = np.empty(0, np.int64)
        self.at = 0

    def load(self) -> bool:
        """Read the next batch; returns False when the run is done."""
        if not self.todo:
            return False
        batch = self.reader.get_batch(self.todo.pop(0))
        self.table = pa.Table.from_batches([batch])
        ts = batch.column(batch.schema.get_field_index("ts"))
        self.keys = (ts.fill_null(_LAST) if ts.null_count else ts).to_numpy(zero_copy_only=False)
        self.at = 0
        return True

    def last_key(self) -> tuple[int, int]:
        """The (time, part) of the last row loaded: no row still unread in this run comes before it."""
        return int(self.keys[-1]), self.order


def _merge(runs: list[_Run]) -> Iterator[pa.Table]:
    """Yield the rows of the runs (each in order) in (time, part, row) order, as tables."""
    live = [r for r in runs if r.load()]
    while live:
        # every loaded row up to the smallest last-loaded (time, part) may go out: nothing unread precedes it
        bound_key, bound_run = min(r.last_key() for r in live)
        taken, keys = [], []
        for r in live:
            side = "right" if r.order <= bound_run else "left"
            stop = r.keys.size if r.order == bound_run else int(np.searchsorted(r.keys, bound_key, side))
            if stop > r.at:
                taken.append(r.table.slice(r.at, stop - r.at))
                keys.append(r.keys[r.at : stop])
                r.at = stop
        if taken:
            order = np.argsort(np.concatenate(keys), kind="stable")  # runs were taken in part order
            yield _unified(taken).take(pa.array(order))
        live = [r for r in live if r.at < r.keys.size or r.load()]


def _pieces(tables: Iterator[pa.Table], rows: int) -> Iterator[pa.Table]:
    """Yield the rows of `tables` regrouped into tables of `rows` rows (the last may be shorter)."""
    held: list[pa.Table] = []
    count = 0
    for t in tables:
        held.append(t)
        count += t.num_rows
        while count >= rows:
            whole = _unified(held)
            yield _sorted_dictionaries(whole.slice(0, rows))
            rest = whole.slice(rows)
            held, count = ([rest] if rest.num_rows else []), rest.num_rows
    if count:
        yield _sorted_dictionaries(_unified(held))


def _plain(schema: pa.Schema) -> pa.Schema:
    """Return the schema with dictionary columns as their plain value type."""
    return pa.schema([pa.field(f.name, _value_type(f.type)) for f in schema])


def _value_type(t: pa.DataType) -> pa.DataType:
    """Return a dictionary type's value type, any other type as it is."""
    return t.value_type if pa.types.is_dictionary(t) else t


def _unified(tables: list[pa.Table]) -> pa.Table:
    """Return the tables as one, each column one chunk over one dictionary."""
    return pa.concat_tables(tables).unify_dictionaries().combine_chunks()


def _sorted_dictionaries(table: pa.Table) -> pa.Table:
    """Return the table with each dictionary column's dictionary holding only its words, sorted (as the
    readers make them), so that a piece's column does not depend on how the parts were cut."""
    cols = []
    for col in table.columns:
        if pa.types.is_dictionary(col.type) and table.column_names[len(cols)] != "kind":  # kind: every kind
            arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
            codes = arr.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
            col = dict_column(codes, arr.dictionary.to_pylist(), col.type.index_type).cast(col.type)
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=table.schema)
