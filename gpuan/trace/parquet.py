"""The Parquet cache: the event table, its flows and metadata in one Parquet file.

The flow table and the metadata ride in the file's key-value metadata (flows as a zstd-compressed Arrow
IPC stream), so a single file carries the whole Trace.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gpuan.errors import TraceError
from gpuan.trace.schema import FLOW_SCHEMA, SCHEMA
from gpuan.trace.table import Trace

META_KEY = b"gpuan.metadata"
FLOWS_KEY = b"gpuan.flows"
FORMAT_VERSION = 1


def cache_path(source: str | os.PathLike) -> Path:
    """Return where the Parquet cache of `source` lives: beside it, or in $GPUAN_CACHE_DIR."""
    source = Path(source)
    name = source.name + ".gpuan.parquet"
    cache_dir = os.environ.get("GPUAN_CACHE_DIR")
    return Path(cache_dir) / name if cache_dir else source.with_name(name)


def is_fresh(cache: Path, source: str | os.PathLike) -> bool:
    """Return whether `cache` exists and was written from `source` as it is now."""
    try:
        meta = pq.read_schema(cache).metadata or {}
        info = json.loads(meta[META_KEY]).get("cached_from", {})
        st = os.stat(source)
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return False
    return info.get("size") == st.st_size and info.get("mtime_ns") == st.st_mtime_ns


def write(trace: Trace, path: str | os.PathLike, *, source: str | os.PathLike | None = None) -> Path:
    """Write the trace to a Parquet file (atomically: a reader never sees half a file); returns its path.

    With `source`, the file records the source's size and mtime so that :func:`is_fresh` can tell
    whether it still stands for it."""
    path = Path(path)
    meta = dict(trace.metadata)
    meta["gpuan_parquet_version"] = FORMAT_VERSION
    if source is not None:
        st = os.stat(source)
        meta["cached_from"] = {"path": str(source), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, trace.flows.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_table(trace.flows)
    table = trace.events.replace_schema_metadata(
        {META_KEY: json.dumps(meta, default=str).encode(), FLOWS_KEY: sink.getvalue().to_pybytes()}
    )
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd", row_group_size=1 << 20)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read(path: str | os.PathLike) -> Trace:
    """Return the Trace stored in a gpuan Parquet file."""
    path = str(path)
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise TraceError(path, f"unreadable Parquet file ({str(e).splitlines()[0]})") from None
    meta_raw = table.schema.metadata or {}
    if META_KEY not in meta_raw:
        raise TraceError(path, "a Parquet file that gpuan did not write (no gpuan metadata)")
    missing = [f.name for f in SCHEMA if f.name not in table.column_names]
    if missing:
        raise TraceError(path, f"Parquet file lacks columns {', '.join(missing)}")
    meta = json.loads(meta_raw[META_KEY])
    flows = FLOW_SCHEMA.empty_table()
    if FLOWS_KEY in meta_raw:
        flows = pa.ipc.open_stream(pa.py_buffer(meta_raw[FLOWS_KEY])).read_all()
    events = table.select(list(SCHEMA.names)).replace_schema_metadata(None)
    return Trace(events, flows, meta)
