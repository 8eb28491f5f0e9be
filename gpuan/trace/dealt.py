"""A run directory read by the processes of an MPI job, each holding only the ranks dealt to it: what
``gpuan info|convert|cycles|sol RUN_DIR`` load under ``mpirun`` in place of the merged trace.

:func:`load_dealt` lists the run (the processes sharing the look at each file's own rank, as the replay
does), deals its ranks (:mod:`gpuan.engine.deal`, round-robin), reads each process's own and puts them on
the run's common clock exactly as :func:`gpuan.trace.load.merge_ranks` does (one ``allreduce`` finds the
earliest base time); process 0 alone gets the merged run's metadata, every rank's metadata crossing as
JSON text. What the merged table's dictionaries would hold, with the words in their order, comes from
:func:`unified_dictionaries` (convert writes them; sol's table of ops carries them).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.engine.deal import owners, read_own
from gpuan.engine.parts import PART, Parts, concat, gather, gather_json, gather_strings, tagged
from gpuan.engine.procs import Procs
from gpuan.errors import TraceError
from gpuan.trace.load import merged_metadata, on_clock, time_base
from gpuan.trace.projection import Projection
from gpuan.trace.table import Trace

_NO_BASE = np.iinfo(np.int64).max


@dataclass
class DealtRun:
    """A run's ranks shared among `procs`: `ranks`, every rank of the run in order; `traces`, this
    process's own, by rank in rank order, each as it is inside the merged run (:func:`on_clock`); `owner`,
    the process of each rank (indexed by rank); `metadata`, on process 0 the merged trace's metadata
    (:func:`gpuan.trace.load.merged_metadata`), None elsewhere."""

    procs: Procs
    ranks: list[int]
    traces: dict[int, Trace]
    owner: np.ndarray
    metadata: dict | None


def dealt_run(path: str | os.PathLike, procs: Procs) -> bool:
    """Whether the trace at `path` is read dealt among `procs`: several processes and a directory of
    per-rank traces (an OTF2 archive, whose ranks one reader merges, and a single file are not)."""
    from gpuan.trace.otf2 import anchor_of

    return procs.size > 1 and Path(path).is_dir() and anchor_of(Path(path)) is None


def load_dealt(
    path: str | os.PathLike,
    procs: Procs,
    *,
    use_cache: bool = True,
    device: str | None = None,
    projection: Projection | None = None,
) -> DealtRun:
    """Return the ranks of the run directory `path` dealt among `procs`, this process's read (by
    :meth:`~gpuan.trace.inputs.RankSource.load`, `use_cache`, `device` and `projection`). Every process
    calls it. Raises the same TraceError on every process for a run that cannot be listed, a rank that cannot
    be read (the lowest bad rank's), or a run without a single event or flow."""
    from gpuan.trace.ranks import load_run

    sources = load_run(path, procs)
    owner = owners(sources, procs.size)
    traces = read_own(sources, owner, procs, use_cache=use_cache, device=device, projection=projection)
    bases = [b for b in map(time_base, traces.values()) if b is not None]
    base = int(procs.allreduce(np.array([min(bases, default=_NO_BASE)], np.int64), "min")[0])
    base = 0 if base == _NO_BASE else base
    if not _rows(procs, traces):
        # none of the projection's kinds is no empty run: the analysis says what it lacks
        whole = traces if projection is None else read_own(sources, owner, procs, use_cache=use_cache)
        if not _rows(procs, whole):
            raise TraceError(path, "empty trace (no events)")  # on every process: they all counted nothing
    traces = {r: on_clock(t, r, base) for r, t in traces.items()}
    metas = gather_json(procs, [[r, t.metadata] for r, t in traces.items()])
    metadata = None
    if metas is not None:
        by_rank = dict(sorted((int(r), m) for r, m in metas))
        metadata = merged_metadata(list(by_rank.values()), list(by_rank), base, str(Path(path)))
    return DealtRun(procs, sources.ranks, traces, owner, metadata)


def _rows(procs: Procs, traces: dict[int, Trace]) -> int:
    """Return, on every process, how many events and flows the ranks of all processes hold."""
    rows = sum(len(t) + t.flow_count for t in traces.values())
    return int(procs.allreduce(np.array([rows], np.int64), "sum")[0])


def map_ranks(run: DealtRun, part: Callable[[Trace], Parts], schemas: dict[str, pa.Schema]) -> Parts | None:
    """Return on process 0 (None elsewhere) `part` of every rank of the run: each process runs it on its
    own ranks, and the tables (of `schemas`, tagged with their rank: :mod:`gpuan.engine.parts`) cross to
    process 0 as typed buffers, in rank order. A process without a rank sends empty tables."""
    if run.traces:
        mine = concat([tagged(part(trace), rank) for rank, trace in run.traces.items()])
    else:
        mine = {name: schema.insert(0, pa.field(PART, pa.int64())).empty_table() for name, schema in schemas.items()}
    return gather(run.procs, mine)


def any_rank(run: DealtRun, holds) -> bool:
    """Return, on every process, whether `holds` (a trace → bool) is true of any rank of the run."""
    mine = any(holds(t) for t in run.traces.values())
    return bool(run.procs.allreduce(np.array([int(mine)], np.int64), "max")[0])


def unified_dictionaries(run: DealtRun, tables: str, columns: list[str]) -> dict[str, pa.Array] | None:
    """Return on process 0 (None elsewhere) the dictionary each of `columns` (dictionary columns of the
    ranks' `tables`: "events" or "flows") has in the merged table (:func:`gpuan.trace.load.concat_ranks`):
    the words of every rank, each where it first appears in rank order. Each process sends the words of
    its ranks once each, with where each first appears among them (its rank, its place in that rank's
    dictionary); the earliest place of a word is its place in the merged run's order."""
    out = {}
    for column in columns:
        words, first_rank, first_at = [], [], []
        for rank, trace in run.traces.items():
            dictionary = _dictionary(getattr(trace, tables)[column])
            words.append(dictionary)
            first_rank.append(np.full(len(dictionary), rank, np.int64))
            first_at.append(np.arange(len(dictionary), dtype=np.int64))
        frame = _first_places(
            pa.concat_arrays(words) if words else pa.array([], pa.string()),
            np.concatenate(first_rank) if first_rank else np.zeros(0, np.int64),
            np.concatenate(first_at) if first_at else np.zeros(0, np.int64),
        )
        got = gather_strings(run.procs, pa.array(frame["word"], pa.string()))
        ranks = run.procs.gatherv(frame["rank"].to_numpy(np.int64))
        places = run.procs.gatherv(frame["at"].to_numpy(np.int64))
        if got is not None:
            merged = _first_places(got, ranks, places)
            out[column] = pa.array(merged["word"], pa.string())
    return out if run.procs.is_root else None


def _dictionary(column: pa.ChunkedArray) -> pa.Array:
    """Return the words of a dictionary column as one dictionary (its chunks' unified, in the order
    their words first appear)."""
    if column.num_chunks == 0:
        return pa.array([], column.type.value_type)
    return pa.table({"c": column}).unify_dictionaries()["c"].chunk(0).dictionary


def _first_places(words: pa.Array, rank: np.ndarray, at: np.ndarray) -> pd.DataFrame:
    """Return each distinct word once, at its earliest (rank, place), the words in that order."""
    frame = pd.DataFrame({"word": words.to_numpy(zero_copy_only=False), "rank": rank, "at": at})
    frame = frame.sort_values(["rank", "at"], kind="stable")
    return frame.drop_duplicates("word", keep="first").reset_index(drop=True)


def with_dictionaries(table: pa.Table, dictionaries: dict[str, pa.Array]) -> pa.Table:
    """Return `table` (one chunk per column) with each of its columns in `dictionaries` re-coded into that
    dictionary (which holds every word the column uses), the column's index type kept."""
    columns = []
    for field in table.schema:
        column = table[field.name]
        if field.name in dictionaries:
            column = _recoded(column, dictionaries[field.name], field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=table.schema)


def _recoded(column: pa.ChunkedArray, dictionary: pa.Array, type_: pa.DataType) -> pa.Array:
    """Return a dictionary `column` as one array over `dictionary`."""
    chunks = []
    for chunk in column.chunks:
        where = pc.index_in(chunk.dictionary, value_set=dictionary)
        chunks.append(pc.take(where, chunk.indices).cast(type_.index_type))
    indices = pa.concat_arrays(chunks) if chunks else pa.array([], type_.index_type)
    return pa.DictionaryArray.from_arrays(indices, dictionary)


def write_parquet(run: DealtRun, path: str | os.PathLike) -> int | None:
    """Write the merged run's Parquet file (what :func:`gpuan.trace.parquet.write` makes of the merged trace,
    byte for byte) from process 0, every process calling; return on process 0 the events written (None
    elsewhere). The ranks' events cross to process 0 one rank at a time (:func:`rank_tables`), are coded
    into the merged table's dictionaries (:func:`unified_dictionaries`) and written as they come, a kind
    that runs on from one rank into the next as one piece, as the merged table is cut; the flows, which
    follow the events in row groups of their own, are gathered whole."""
    from gpuan.trace import parquet
    from gpuan.trace.load import concat_ranks
    from gpuan.trace.schema import SCHEMA

    columns = [f.name for f in SCHEMA if pa.types.is_dictionary(f.type)]
    words = unified_dictionaries(run, "events", columns)
    flows = list(rank_tables(run, "flows"))
    events = rank_tables(run, "events")
    if not run.procs.is_root:
        for _ in events:  # sends this process's ranks
            pass
        return None
    counted = [0]

    def coded() -> Iterator[pa.Table]:
        for table in events:
            counted[0] += table.num_rows
            yield with_dictionaries(table, words).combine_chunks()

    try:
        parquet.write_pieces(kind_runs(coded()), run.metadata, [concat_ranks(flows)], path)
    finally:
        for _ in events:  # the other processes send every rank, whatever happened here
            pass
    return counted[0]


def kind_runs(tables: Iterator[pa.Table]) -> Iterator[pa.Table]:
    """Yield the table that `tables` (sharing their dictionaries) make one after another, cut where the
    kind changes as :func:`gpuan.trace.parquet.write` cuts a table: a kind that runs on from one table into
    the next is one piece. Only an empty table when all are."""
    from gpuan.trace.parquet import _kind_slices

    pending: list[pa.Table] = []
    code, empty = None, None
    for table in tables:
        empty = table if empty is None else empty
        for piece in _kind_slices(table):
            if not piece.num_rows:
                continue
            first = piece["kind"].chunk(0).indices[0].as_py()
            if pending and first != code:
                yield _joined(pending)
                pending = []
            pending.append(piece)
            code = piece["kind"].chunk(0).indices[-1].as_py()
    if pending:
        yield _joined(pending)
    elif empty is not None:
        yield empty


def _joined(pieces: list[pa.Table]) -> pa.Table:
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces).combine_chunks()


def rank_tables(run: DealtRun, tables: str) -> Iterator[pa.Table]:
    """Yield on process 0 each rank's `tables` ("events" or "flows") in rank order, each read from its
    process as an Arrow IPC stream in a numpy byte buffer (what a converted file holds: every event, once);
    on the other processes yield nothing, having sent theirs. Every process runs the loop to its end: the
    ranks cross one at a time, so process 0 holds one other process's rank at a time."""
    procs = run.procs
    for rank in run.ranks:
        owner = int(run.owner[rank])
        if owner == 0:  # process 0's own rank: no exchange
            if procs.is_root:
                yield getattr(run.traces[rank], tables)
            continue
        mine = owner == procs.rank
        data = _ipc(getattr(run.traces[rank], tables)) if mine else np.zeros(0, np.uint8)
        got = procs.gatherv(data)
        if procs.is_root:
            yield pa.ipc.open_stream(pa.py_buffer(got)).read_all()


def _ipc(table: pa.Table) -> np.ndarray:
    """Return `table` as an Arrow IPC stream in a numpy byte array."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return np.frombuffer(sink.getvalue(), np.uint8)
