"""The Parquet cache: the event table, its flows and metadata in one Parquet file.

The events come first, in row groups of one kind each. The flows follow in row groups of their own, as rows
of the event schema of kind ``flow`` (:func:`_flow_rows`), decoded only when used; the footer records how
many row groups they fill. The metadata rides in the file's key-value metadata. So a single file carries
the whole Trace, is written in one streaming pass however many flows it holds, and its footer stays small.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gpuan.errors import TraceError, UsageError
from gpuan.trace.kinds import KINDS
from gpuan.trace.memory import SharedSetting
from gpuan.trace.projection import Projection
from gpuan.trace.schema import FLOW_SCHEMA, SCHEMA
from gpuan.trace.table import Trace, kind_mask, null_column

META_KEY = b"gpuan.metadata"
FLOWS_KEY = b"gpuan.flows"  # format 8 and before: the flows as a small Parquet file in the footer
#: how many row groups at the end of the file hold the flows (format 9 on)
FLOW_GROUPS_KEY = b"gpuan.flow_row_groups"
#: the kind of the rows that hold flows, in those row groups only
FLOW_KIND = "flow"
#: the event column each flow column is stored in
_FLOW_IN = {"id": "correlation", "cat": "cat", "phase": "name", "ts": "ts", "pid": "pid", "tid": "tid", "rank": "rank"}
#: per row group, the columns that are null throughout it (written by gpuan, so the reader never asks
#: pyarrow for a column chunk's statistics: on a corrupt footer that aborts the process)
NULLS_KEY = b"gpuan.null_columns"
FORMAT_VERSION = 9  # 2: peer and tag columns; 3: ProfilerStep ranges are annotations in every Kineto version;
# 4: kernel grids in workgroups (ROCm work-item launches divided, gpuan/trace/launch_dims.py); 5: shapes in
# one line (gpuan/trace/kineto/shapes.py); 6: ROCm GPU agent ids as device indexes (gpuan/trace/kineto/agents.py);
# 7: a rank's distributedInfo as evidence of its agent's device; 8: the null columns of each row group;
# 9: the flows in row groups of their own, not in the footer
ROW_GROUP_ROWS = 1 << 20
# Integer columns that rise within a kind: delta encoding makes them small and several times faster to
# decode than plain values under a general-purpose compressor (ts: 60 ms -> 6 ms per 2M rows here).
DELTA_COLUMNS = ("ts", "dur", "pid", "tid", "correlation", "external_id", "seq")
USE_THREADS = True


def cache_path(source: str | os.PathLike) -> Path:
    """Return where the Parquet cache of `source` lives: beside it, or in $GPUAN_CACHE_DIR. Raises
    :class:`UsageError` if GPUAN_CACHE_DIR is set to anything but an existing directory."""
    source = Path(source)
    name = source.name + ".gpuan.parquet"
    cache_dir = os.environ.get("GPUAN_CACHE_DIR")
    if not cache_dir:
        return source.with_name(name)
    # said once, for the variable, rather than as a missing cache on every load and a file that cannot
    # be written on every convert
    if not os.path.isdir(cache_dir):
        why = "is not a directory" if os.path.exists(cache_dir) else "does not exist"
        raise UsageError(f"GPUAN_CACHE_DIR: {cache_dir} {why}; it must name an existing directory")
    return Path(cache_dir) / name


def is_fresh(cache: Path, source: str | os.PathLike) -> bool:
    """Return whether `cache` exists and was written from `source` as it is now."""
    try:
        meta = json.loads((_open(cache).schema_arrow.metadata or {})[META_KEY])
        info = meta.get("cached_from", {})
        st = os.stat(source)
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return False
    return (
        meta.get("gpuan_parquet_version") == FORMAT_VERSION
        and info.get("path") == str(Path(source).resolve())
        and info.get("size") == st.st_size
        and info.get("mtime_ns") == st.st_mtime_ns
    )


def write(trace: Trace, path: str | os.PathLike, *, source: str | os.PathLike | None = None) -> Path:
    """Write the trace to a Parquet file (atomically: a reader never sees half a file); returns its path.

    With `source`, the file records the source's size and mtime so that :func:`is_fresh` can tell
    whether it still stands for it."""
    return write_pieces(_kind_slices(trace.events), trace.metadata, [trace.flows], path, source=source)


def write_pieces(
    pieces: Iterable[pa.Table],
    metadata: dict,
    flows: Iterable[pa.Table],
    path: str | os.PathLike,
    *,
    source: str | os.PathLike | None = None,
) -> Path:
    """Write the event table given as `pieces` (in the table's order, each of one kind; a piece becomes
    row groups of :data:`ROW_GROUP_ROWS` rows) to a Parquet file, then the trace's flow tables `flows` (in
    order; each of FLOW_SCHEMA) in row groups of their own, with the trace's metadata, atomically; returns
    its path. Only one piece or flow table is held at a time, so a table larger than memory is written from
    pieces made one after another (:mod:`gpuan.trace.kineto.parts`)."""
    path = Path(path)
    meta = dict(metadata)
    meta["gpuan_parquet_version"] = FORMAT_VERSION
    if source is not None:
        st = os.stat(source)
        meta["cached_from"] = {"path": str(Path(source).resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    pieces = iter(pieces)
    first = next(pieces, None)
    if first is None:
        first = SCHEMA.empty_table()
    schema = first.schema.with_metadata({META_KEY: json.dumps(meta, default=str).encode()})
    try:
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise TraceError(path, f"cannot write here ({e.strerror})") from None
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # a cache others on the node can read, as any file the user writes
    try:
        with pq.ParquetWriter(
            tmp,
            schema,
            compression="lz4",
            use_dictionary=[f.name for f in schema if pa.types.is_dictionary(f.type)],
            column_encoding={name: "DELTA_BINARY_PACKED" for name in DELTA_COLUMNS},
        ) as writer:
            writer.write_table(first, row_group_size=ROW_GROUP_ROWS)
            nulls = _null_columns(first)
            for piece in pieces:
                if piece.num_rows:
                    writer.write_table(piece, row_group_size=ROW_GROUP_ROWS)
                    nulls += _null_columns(piece)
            event_groups = len(nulls)
            for table in _regrouped(flows, ROW_GROUP_ROWS):
                piece = _flow_rows(table)
                writer.write_table(piece, row_group_size=ROW_GROUP_ROWS)
                nulls += _null_columns(piece)
            writer.add_key_value_metadata(
                {NULLS_KEY: json.dumps(nulls).encode(), FLOW_GROUPS_KEY: str(len(nulls) - event_groups).encode()}
            )
        os.replace(tmp, path)
    except IsADirectoryError:
        raise TraceError(path, "is a directory") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _regrouped(tables: Iterable[pa.Table], rows: int) -> Iterator[pa.Table]:
    """Yield the rows of `tables` (of one schema), in order, as tables of `rows` rows (the last one shorter):
    the same row groups however the rows came cut."""
    held, count = [], 0
    for table in tables:
        while table.num_rows:
            take = min(rows - count, table.num_rows)
            held.append(table.slice(0, take))
            count, table = count + take, table.slice(take)
            if count == rows:
                yield pa.concat_tables(held)
                held, count = [], 0
    if count:
        yield pa.concat_tables(held)


def _flow_rows(flows: pa.Table) -> pa.Table:
    """Return the flow table (FLOW_SCHEMA) as rows of the event schema, of kind FLOW_KIND: each flow column in
    the event column of :data:`_FLOW_IN`, the others null."""
    n = flows.num_rows
    kind = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)), pa.array([FLOW_KIND]))
    stored = {event: flows[flow] for flow, event in _FLOW_IN.items()}
    cols = [
        kind if f.name == "kind" else _as(stored[f.name], f.type) if f.name in stored else null_column(n, f.type)
        for f in SCHEMA
    ]
    return pa.Table.from_arrays(cols, schema=SCHEMA)


def _file_identity(path: str) -> tuple[int, int, int]:
    """Return what tells a file apart from one written in its place since: inode, size, modification time."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def _read_flows(path: str, groups: range, identity: tuple[int, int, int]) -> pa.Table:
    """Return the flows stored in row groups `groups` of the gpuan Parquet file at `path` (an absolute path;
    `identity`: :func:`_file_identity` when its events were read) as a table of FLOW_SCHEMA."""
    try:
        if _file_identity(path) != identity:
            raise TraceError(path, "the Parquet file changed after its events were read; load it again")
        pf = _open(path)
        got = pf.read_row_groups(list(groups), columns=list(dict.fromkeys(_FLOW_IN.values())), use_threads=USE_THREADS)
        cols = [_as(got[_FLOW_IN[f.name]], f.type) for f in FLOW_SCHEMA]
        for col in cols:
            if pa.types.is_dictionary(col.type):
                for chunk in col.chunks:
                    chunk.dictionary.validate(full=True)  # Parquet does not check UTF-8
        return pa.Table.from_arrays(cols, schema=FLOW_SCHEMA)
    except (OSError, ValueError, pa.ArrowException) as e:
        raise TraceError(path, f"unreadable flows in the Parquet file ({str(e).splitlines()[0]})") from None


def _null_columns(piece: pa.Table) -> list[list[str]]:
    """Return, for each row group that writing `piece` makes (:data:`ROW_GROUP_ROWS` rows each), the names
    of its columns that are null throughout."""
    groups = [piece.slice(at, ROW_GROUP_ROWS) for at in range(0, piece.num_rows, ROW_GROUP_ROWS)] or [piece]
    return [[c for c in g.column_names if g[c].null_count == g.num_rows] for g in groups]


def _kind_slices(table: pa.Table) -> list[pa.Table]:
    """Return the table cut where the kind changes (rows are grouped by kind): each piece becomes its
    own row groups, in which the columns other kinds fill are entirely null."""
    if table.num_rows == 0:
        return [table]
    codes = table["kind"].combine_chunks().indices.to_numpy(zero_copy_only=False)
    cuts = np.flatnonzero(np.diff(codes)) + 1
    bounds = np.concatenate([[0], cuts, [codes.size]])
    return [table.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]


def stored_format(path: str | os.PathLike) -> str:
    """Return the format of the trace a gpuan Parquet file was written from (its metadata's ``format``),
    reading only the file's footer; "parquet" when the footer does not say (:func:`read` tells why)."""
    return str(_stored_metadata(path).get("format") or "parquet")


def stored_rank(path: str | os.PathLike) -> int | None:
    """Return the rank of the trace a gpuan Parquet file holds (its metadata's ``rank``), reading only the
    file's footer; None when it holds no single rank or the footer does not say."""
    rank = _stored_metadata(path).get("rank")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def _stored_metadata(path: str | os.PathLike) -> dict:
    """Return the gpuan metadata in a Parquet file's footer ({} where there is none to read)."""
    try:
        meta = json.loads((_open(path).schema_arrow.metadata or {})[META_KEY])
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return {}
    return meta if isinstance(meta, dict) else {}


def read(path: str | os.PathLike, projection: Projection | None = None) -> Trace:
    """Return the Trace stored in a gpuan Parquet file.

    Column chunks that are entirely null (as the writer recorded them) are not decoded: they become null
    columns whose memory is never touched, so a reload costs about what the data holds. With `projection`
    (what an analysis reads), only its columns are decoded, the others null, and only the row groups that
    hold its kinds, keeping just those rows: the table :func:`gpuan.trace.projection.apply` makes of the
    whole one."""
    path = str(path)
    try:
        identity = _file_identity(path)
        pf = _open(path)
        schema = pf.schema_arrow
        meta_raw = schema.metadata or {}
        if META_KEY not in meta_raw:
            raise TraceError(path, "a Parquet file that gpuan did not write (no gpuan metadata)")
        missing = [f.name for f in SCHEMA if f.name not in schema.names]
        if missing:
            raise TraceError(path, f"Parquet file lacks columns {', '.join(missing)}")
        # the columns are assembled under the event schema: another type would be misread, not converted
        wrong = [f"{f.name} is {schema.field(f.name).type}, not {f.type}" for f in SCHEMA if not _fits(schema, f)]
        if wrong:
            raise TraceError(path, f"Parquet column {wrong[0]}")
        footer = pf.metadata.metadata or {}  # the footer's key-values
        nulls = _recorded_nulls(footer, pf.num_row_groups)
        if nulls is None:
            raise TraceError(path, "unreadable record of the null columns in the Parquet file")
        flow_groups = _recorded_flow_groups(footer, pf.num_row_groups)
        if flow_groups is None:
            raise TraceError(path, "unreadable record of the flows' row groups in the Parquet file")
        event_groups = pf.num_row_groups - flow_groups
        with _steady_memory_pool():
            groups = [_read_row_group(pf, nulls[i], i, projection) for i in range(event_groups)]
        pieces = [events for events, _ in groups if events is not None]
    except (OSError, ValueError, pa.ArrowException) as e:  # ValueError: a column path that is no UTF-8
        raise TraceError(path, f"unreadable Parquet file ({str(e).splitlines()[0]})") from None
    try:
        meta = json.loads(meta_raw[META_KEY])
    except ValueError:
        meta = None
    if not isinstance(meta, dict):
        raise TraceError(path, "unreadable gpuan metadata in the Parquet file")
    flows = FLOW_SCHEMA.empty_table  # called on first use, like the functions below
    if flow_groups:

        def flows() -> pa.Table:
            return _read_flows(os.path.abspath(path), range(event_groups, event_groups + flow_groups), identity)

    elif FLOWS_KEY in meta_raw:  # a file of format 8 or before
        blob = meta_raw[FLOWS_KEY]

        def flows() -> pa.Table:
            try:
                return pq.read_table(pa.BufferReader(blob))
            except (OSError, pa.ArrowException) as e:
                raise TraceError(path, f"unreadable flows in the Parquet file ({str(e).splitlines()[0]})") from None

    events = pa.concat_tables(pieces) if pieces else SCHEMA.empty_table()
    unknown = set(pc.unique(events["kind"]).to_pylist()).union(*(k for _, k in groups)) - set(KINDS)
    if unknown:  # analyses select by kind: an unknown one would silently drop out of every result
        raise TraceError(path, f"unknown event kinds in the Parquet file: {', '.join(sorted(map(str, unknown)))}")
    counted = sum(pf.metadata.row_group(i).num_rows for i in range(event_groups, pf.num_row_groups))
    return Trace(events, flows, meta, flow_rows=counted if flow_groups else None)


def _open(path: str | os.PathLike) -> pq.ParquetFile:
    """Open a Parquet file whose footer may be large: up to format 8 the flows rode in it (86 MB for the 21M
    flow events of a 36 GiB trace, and twice over, as pyarrow also keeps the schema's metadata in its own
    key), past Thrift's default limit of 100 MB."""
    return pq.ParquetFile(path, thrift_string_size_limit=_THRIFT_LIMIT, thrift_container_size_limit=_THRIFT_LIMIT)


_THRIFT_LIMIT = 2**31 - 1


_ARROW_POOL = SharedSetting(pa.default_memory_pool, pa.set_memory_pool)


@contextmanager
def _steady_memory_pool() -> Iterator[None]:
    """Decode with Arrow's jemalloc pool where pyarrow has it: measured here, a fresh process reads a
    1 GB trace's file in a steady 0.18 s with it and anywhere from 0.13 to 0.45 s with mimalloc. The pool is
    process-wide and a run's files are read side by side: the last block to close puts the one before back."""
    try:
        pool = pa.jemalloc_memory_pool()
    except (NotImplementedError, pa.ArrowNotImplementedError):
        yield
        return
    with _ARROW_POOL.asked(pool):
        yield


def _recorded_nulls(meta: dict, groups: int) -> list[set[str]] | None:
    """Return the writer's null columns of each of the `groups` row groups (none, so every column is
    decoded, for a file written without the record); None where the record does not fit the file."""
    if NULLS_KEY not in meta:
        return [set() for _ in range(groups)]
    try:
        nulls = json.loads(meta[NULLS_KEY])
    except ValueError:
        return None
    names = {f.name for f in SCHEMA}
    fits = isinstance(nulls, list) and len(nulls) == groups
    if not fits or not all(isinstance(g, list) and set(g) <= names for g in nulls):
        return None
    return [set(g) for g in nulls]


def _recorded_flow_groups(meta: dict, groups: int) -> int | None:
    """Return how many of the file's `groups` row groups (the last ones) hold flows, as the writer recorded
    it (0 for a file written without the record); None where the record does not fit the file."""
    if FLOW_GROUPS_KEY not in meta:
        return 0
    record = meta[FLOW_GROUPS_KEY]
    if not record.isdigit() or int(record) > groups:
        return None
    return int(record)


def _read_row_group(
    pf: pq.ParquetFile, nulls: set[str], i: int, projection: Projection | None
) -> tuple[pa.Table | None, set[str]]:
    """Read row group i with the event schema; the columns in `nulls`, and those `projection` does not read,
    are not decoded but made null. Returns the table (None where the group holds none of `projection`'s
    kinds) and the kinds of the rows left out."""
    n = pf.metadata.row_group(i).num_rows
    keep, dropped, kind = None, set(), None
    if projection is not None and projection.kinds is not None:
        if "kind" in nulls:
            return None, set()  # rows of no kind are of none of the projection's kinds
        kind = pf.read_row_group(i, columns=["kind"], use_threads=USE_THREADS)["kind"]
        keep = kind_mask(kind, sorted(projection.kinds))
        if keep.true_count == n:
            keep = None
        else:
            dropped = set(pc.unique(kind.filter(pc.invert(keep))).to_pylist())
            if keep.true_count == 0:
                return None, dropped
    wanted = [f.name for f in SCHEMA if f.name not in nulls and (projection is None or f.name in projection.columns)]
    got = pf.read_row_group(i, columns=[c for c in wanted if kind is None or c != "kind"], use_threads=USE_THREADS)
    if kind is not None:
        got = got.append_column("kind", kind)
    for f in SCHEMA:
        if f.name in got.column_names and pa.types.is_dictionary(f.type):
            for chunk in got[f.name].chunks:
                chunk.dictionary.validate(full=True)  # Parquet does not check UTF-8; the words are few
    if keep is not None:
        got, n = got.filter(keep), keep.true_count
    cols = [_as(got[f.name], f.type) if f.name in got.column_names else null_column(n, f.type) for f in SCHEMA]
    return pa.Table.from_arrays(cols, schema=SCHEMA), dropped


def _fits(schema: pa.Schema, field: pa.Field) -> bool:
    """Return whether the file's column for `field` holds its type: the same type, or for a dictionary
    column the same value type (another writer may choose a wider index)."""
    have = schema.field(field.name).type
    if pa.types.is_dictionary(have) and pa.types.is_dictionary(field.type):
        return have.value_type == field.type.value_type
    return have == field.type


def _as(column: pa.ChunkedArray, type_: pa.DataType) -> pa.ChunkedArray:
    """Return the column with the event schema's type (a dictionary's index width is all that may differ)."""
    return column if column.type == type_ else column.cast(type_)
