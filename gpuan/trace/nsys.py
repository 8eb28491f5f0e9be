"""Read an Nsight Systems SQLite export (``nsys export --type sqlite``) into the event table.

Kernels, memcpys, memsets, CUDA runtime/driver calls and NVTX ranges come from their tables where the
export has them (absent tables are skipped). SQL selects the columns, numpy builds them; names stay
integer ``StringIds`` ids until the one dictionary column is made. Column sets differ between Nsight
versions, so every query is written against the columns the file really has.

Times: Nsight writes int64 ns in one clock for every table; ``ts`` is relative to the earliest event
read and ``metadata["base_time_ns"]`` holds that earliest time in the file's own clock.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.errors import TraceError
from gpuan.trace.kinds import GPU_KINDS, KIND_CODE, KINDS
from gpuan.trace.schema import kind_codes
from gpuan.trace.source import open_file
from gpuan.trace.table import NULL64, Trace, build_table, dict_column, int_column, kind_time_order

NULL = NULL64  # SQL NULL in the int64 arrays

KERNEL, MEMCPY, MEMSET = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME, NVTX = "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"
EVENT_TABLES = (KERNEL, MEMCPY, MEMSET, RUNTIME, NVTX)
#: tables every Nsight Systems export has, whatever was traced
NSIGHT_MARKS = ("StringIds", "ThreadNames", "EXPORT_META_DATA", "META_DATA_EXPORT", "ProcessStreams")
NO_ACTIVITY = (
    "an Nsight Systems export without CUDA or NVTX activity (no kernels, copies, fills, CUDA runtime calls "
    "or NVTX ranges): record them with nsys profile --trace=cuda,nvtx"
)

#: CUpti_ActivityMemcpyKind, used when the export has no ENUM_CUDA_MEMCPY_OPER table
COPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}

# Nsight's "CUDA Event Class Values" (used when the export has no ENUM_NSYS_EVENT_CLASS table).
EVENT_CLASS_DRIVER = frozenset({1, 13})  # CUDA_DRIVER, CUDA_EGL_DRIVER
EVENT_CLASS_BACKTRACE = 67  # CUDABACKTRACE: a copy of a call that carries its call stack, not another call

# Nsight's "NVTX Event Type Values": NvtxPushPopRange, NvtxStartEndRange (marks, thread names and domain
# creation are not ranges)
NVTX_RANGE_TYPES = (59, 60)

# runtime API names carry the CUDA version that introduced them (cudaMemcpy_v3020); driver names such as
# cuMemcpyHtoD_v2 are real symbol names and keep theirs
_API_VERSION_SUFFIX = re.compile(r"_v\d{4,}$")
_COPY_ENUM_NAME = re.compile(r"([A-Z])TO([A-Z])$")


@dataclass
class Part:
    """The rows of one source table: int64 columns (NULL = missing) plus names as codes into ``names``."""

    cat: str
    cols: dict[str, np.ndarray]
    name_codes: np.ndarray
    names: list[str]
    memcpy_kind: np.ndarray | None = None  # codes into ``memcpy_words``
    memcpy_words: list[str] = field(default_factory=list)

    @property
    def length(self) -> int:
        """Return the number of rows."""
        return self.name_codes.size


def read_nsys(path: str) -> Trace:
    """Return the Trace of an Nsight Systems SQLite export at ``path``.

    Raises TraceError for a missing, corrupt or non-Nsight file."""
    path = str(path)
    conn = _connect(path)
    try:
        tables = _tables(conn, path)
        if not tables.intersection(EVENT_TABLES):
            if tables.intersection(NSIGHT_MARKS) or any(t.startswith("TARGET_INFO_") for t in tables):
                raise TraceError(path, NO_ACTIVITY)
            raise TraceError(path, "an SQLite file without Nsight Systems tables")
        try:
            return _read(conn, path, tables)
        except (sqlite3.DatabaseError, ValueError, TypeError) as e:
            # a table without the columns Nsight writes surfaces as a value of the wrong type
            raise TraceError(path, f"unreadable Nsight Systems export ({_one_line(e)})") from None
    finally:
        conn.close()


def nsys_rank(path: str | os.PathLike) -> int | None:
    """Return the MPI rank an Nsight Systems export holds (its MPI_RANKS table, written when MPI was
    traced, names one rank), or None; a file that cannot be read answers None (reading it says why)."""
    try:
        conn = _connect(str(path))
    except TraceError:
        return None
    try:
        return _mpi_rank(conn, _tables(conn, str(path)))
    except (TraceError, sqlite3.DatabaseError):
        return None
    finally:
        conn.close()


def _mpi_rank(conn: sqlite3.Connection, tables: set[str]) -> int | None:
    """Return the one rank of the MPI_RANKS table, or None (no such table, or not one rank)."""
    if "MPI_RANKS" not in tables or "rank" not in _columns(conn, "MPI_RANKS"):
        return None
    ranks = [r for (r,) in conn.execute("SELECT DISTINCT rank FROM MPI_RANKS") if isinstance(r, int)]
    return ranks[0] if len(ranks) == 1 else None


def _connect(path: str) -> sqlite3.Connection:
    """Return a read-only connection to the file (never creating or changing it)."""
    with open_file(path):  # missing file, directory, no permission: the readers' one wording
        pass
    if os.path.getsize(path) == 0:
        raise TraceError(path, "empty file")
    try:
        conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise TraceError(path, f"cannot open as SQLite ({_one_line(e)})") from None
    conn.text_factory = _text  # strings are read leniently, as in the Kineto reader
    return conn


def _text(raw: bytes) -> str:
    """Return SQLite text as a string, invalid UTF-8 replaced by U+FFFD."""
    return raw.decode("utf-8", "replace")


def _tables(conn: sqlite3.Connection, path: str) -> set[str]:
    """Return the names of the file's tables; a file SQLite cannot read raises TraceError."""
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:  # (SQLite's message may quote corrupt bytes)
        raise TraceError(path, f"not a readable SQLite database ({_one_line(e)})") from None


def _one_line(e: BaseException) -> str:
    """Return the exception's message on one line."""
    return " ".join(str(e).split()) or type(e).__name__


def _read(conn: sqlite3.Connection, path: str, tables: set[str]) -> Trace:
    """Return the Trace built from the event tables the file has."""
    strings = _StringIds(conn, tables)
    readers = ((KERNEL, _kernels), (MEMCPY, _memcpys), (MEMSET, _memsets), (RUNTIME, _runtime), (NVTX, _nvtx))
    parts: list[Part] = []
    for table, reader in readers:
        if table in tables:
            parts.extend(reader(conn, tables, strings))
    parts = [p for p in parts if p.length]
    if not parts:
        raise TraceError(path, NO_ACTIVITY)
    table, base = _assemble(parts)
    meta = _metadata(conn, path, tables, base, table)
    if meta["rank"] is not None:
        i = table.schema.get_field_index("rank")
        table = table.set_column(i, "rank", pa.array(np.full(table.num_rows, meta["rank"], np.int32)))
    return Trace(table, metadata=meta)


class _StringIds:
    """The StringIds table, read once on first use."""

    def __init__(self, conn: sqlite3.Connection, tables: set[str]) -> None:
        self._conn = conn
        self._has = "StringIds" in tables
        self._map: dict[int, str] | None = None

    def lookup(self, ids: np.ndarray) -> list[str | None]:
        """Return the string of each id (None where the id is unknown)."""
        if self._map is None:
            self._map = dict(self._conn.execute("SELECT id, value FROM StringIds")) if self._has else {}
        return [self._map.get(int(i)) for i in ids]


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """Return the column names of ``table``."""
    return {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}


def _first(have: set[str], *names: str) -> str:
    """Return the first of ``names`` that the table has, as an SQL expression (NULL if none)."""
    return next((f'"{n}"' for n in names if n in have), "NULL")


def _select(
    conn: sqlite3.Connection, table: str, exprs: dict[str, str], where: str = "", text: str | None = None
) -> tuple[dict[str, np.ndarray], list[str | None]]:
    """Return each integer SQL expression's values over ``table`` as an int64 array (NULL for SQL NULL),
    and the values of the ``text`` expression as a list (empty without one)."""
    # SQLite reads a double-quoted name that is not a column as a string literal: check them first
    have = _columns(conn, table)
    lacking = sorted({n for e in [*exprs.values(), text or ""] for n in re.findall(r'"(\w+)"', e)} - have)
    if lacking:
        raise sqlite3.OperationalError(f"table {table} has no column {', '.join(lacking)}")
    # a REAL or TEXT where Nsight writes integers is a corrupt export: name the first such value
    odd = " OR ".join(f"typeof({e}) NOT IN ('integer', 'null')" for e in exprs.values())
    check = f"{where} AND ({odd})" if where else f"WHERE {odd}"
    found = conn.execute(f'SELECT rowid, {", ".join(exprs.values())} FROM "{table}" {check} LIMIT 1').fetchone()
    if found is not None:
        name, value = next((k, v) for k, v in zip(exprs, found[1:]) if v is not None and type(v) is not int)
        raise ValueError(f"{table} row {found[0]}: {name} is {value!r}, where Nsight writes an integer")
    if "start" in exprs and "end" in exprs:
        # every row counts, also those a reader then drops (backtrace copies): a row that ends before it
        # starts means the export is corrupt
        s, e = exprs["start"], exprs["end"]
        order = f"{s} IS NOT NULL AND {e} IS NOT NULL AND {e} < {s}"
        check = f"{where} AND ({order})" if where else f"WHERE {order}"
        found = conn.execute(f'SELECT rowid, {s}, {e} FROM "{table}" {check} LIMIT 1').fetchone()
        if found is not None:
            raise ValueError(f"{table} row {found[0]}: ends at {found[2]} ns, before it starts at {found[1]} ns")
    sql = ", ".join([f"COALESCE({e}, :null)" for e in exprs.values()] + ([text] if text else []))
    rows = conn.execute(f'SELECT {sql} FROM "{table}" {where}', {"null": int(NULL)}).fetchall()
    cols = list(zip(*rows)) if rows else [()] * (len(exprs) + bool(text))
    ints = {k: np.array(c, dtype=np.int64) for k, c in zip(exprs, cols)}
    return ints, list(cols[-1]) if text else []


def _names_from_ids(
    ids: np.ndarray, strings: _StringIds, clean: Callable[[str], str] | None = None
) -> tuple[np.ndarray, list[str]]:
    """Return (codes, names) for StringIds ids: each distinct id looked up once, ``clean`` applied to it;
    unknown ids get code -1 (null)."""
    valid = ids != NULL
    used, inverse = np.unique(ids[valid], return_inverse=True)
    found = strings.lookup(used)
    if clean is not None:
        found = [None if s is None else clean(s) for s in found]
    words = sorted({s for s in found if s is not None})
    index = {w: i for i, w in enumerate(words)}
    lookup = np.array([index.get(s, -1) if s is not None else -1 for s in found], dtype=np.int64)
    codes = np.full(ids.size, -1, np.int64)
    codes[valid] = lookup[inverse.reshape(-1)]
    return codes, words


def _gpu_cols(c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Return the columns every GPU activity shares: pid = device, tid = stream (as Nsight shows them)."""
    return {
        "start": c["start"],
        "end": c["end"],
        "device": c["device"],
        "stream": c["stream"],
        "pid": c["device"],
        "tid": c["stream"],
        "correlation": c["correlation"],
    }


_GPU_EXPRS = {
    "start": '"start"',
    "end": '"end"',
    "device": '"deviceId"',
    "stream": '"streamId"',
    "correlation": '"correlationId"',
}


def _kernels(conn: sqlite3.Connection, tables: set[str], strings: _StringIds) -> list[Part]:
    """Return the kernels (name: demangled, else short, else mangled)."""
    have = _columns(conn, KERNEL)
    shared = [f'"{n}"' for n in ("staticSharedMemory", "dynamicSharedMemory") if n in have]
    exprs = dict(_GPU_EXPRS)
    exprs.update(
        name=f"COALESCE({_first(have, 'demangledName')}, {_first(have, 'shortName')}, {_first(have, 'mangledName')})",
        grid_x=_first(have, "gridX"),
        grid_y=_first(have, "gridY"),
        grid_z=_first(have, "gridZ"),
        block_x=_first(have, "blockX"),
        block_y=_first(have, "blockY"),
        block_z=_first(have, "blockZ"),
        registers=_first(have, "registersPerThread"),
        shared_memory=" + ".join(shared) or "NULL",
    )
    c, _ = _select(conn, KERNEL, exprs)
    codes, names = _names_from_ids(c.pop("name"), strings)
    cols = _gpu_cols(c)
    cols.update({k: v for k, v in c.items() if k not in _GPU_EXPRS})
    return [Part("kernel", cols, codes, names)]


def _copy_kind_names(conn: sqlite3.Connection, tables: set[str]) -> dict[int, str]:
    """Return copyKind → direction (HtoD, DtoH, ...), from the export's enum table where it has one."""
    kinds = dict(COPY_KINDS)
    if "ENUM_CUDA_MEMCPY_OPER" in tables:
        have = _columns(conn, "ENUM_CUDA_MEMCPY_OPER")
        if {"id", "name"} <= have:
            for ident, name in conn.execute('SELECT id, name FROM "ENUM_CUDA_MEMCPY_OPER"'):
                # names look like CUDA_MEMCPY_KIND_HTOD; gpuan spells the direction HtoD
                m = _COPY_ENUM_NAME.search(str(name or ""))
                if m:
                    kinds[int(ident)] = f"{m.group(1)}to{m.group(2)}"
    return kinds


def _memcpys(conn: sqlite3.Connection, tables: set[str], strings: _StringIds) -> list[Part]:
    """Return the memcpys, named like nvprof and Nsight's own reports: ``[CUDA memcpy HtoD]``."""
    have = _columns(conn, MEMCPY)
    exprs = dict(_GPU_EXPRS, bytes=_first(have, "bytes"), copy_kind=_first(have, "copyKind"))
    c, _ = _select(conn, MEMCPY, exprs)
    kinds = _copy_kind_names(conn, tables)
    used, inverse = np.unique(c["copy_kind"], return_inverse=True)
    found = [kinds.get(int(k)) for k in used]
    words = sorted({w for w in found if w is not None})
    index = {w: i for i, w in enumerate(words)}
    kind_codes = np.array([index.get(w, -1) if w else -1 for w in found] + [-1], np.int64)[inverse.reshape(-1)]
    names = [f"[CUDA memcpy {w}]" for w in words] + ["[CUDA memcpy]"]
    name_codes = np.where(kind_codes >= 0, kind_codes, len(words))
    cols = _gpu_cols(c)
    cols["bytes"] = c["bytes"]
    return [Part("gpu_memcpy", cols, name_codes, names, kind_codes, words)]


def _memsets(conn: sqlite3.Connection, tables: set[str], strings: _StringIds) -> list[Part]:
    """Return the memsets, named ``[CUDA memset]``."""
    have = _columns(conn, MEMSET)
    c, _ = _select(conn, MEMSET, dict(_GPU_EXPRS, bytes=_first(have, "bytes")))
    cols = _gpu_cols(c)
    cols["bytes"] = c["bytes"]
    return [Part("gpu_memset", cols, np.zeros(c["start"].size, np.int64), ["[CUDA memset]"])]


def _thread_cols(start: np.ndarray, end: np.ndarray, global_tid: np.ndarray) -> dict[str, np.ndarray]:
    """Return start/end and the pid/tid packed into Nsight's globalTid (bits 24-47 pid, 0-23 tid)."""
    known = global_tid != NULL
    pid = np.where(known, (global_tid >> 24) & 0xFFFFFF, NULL)
    tid = np.where(known, global_tid & 0xFFFFFF, NULL)
    return {"start": start, "end": end, "pid": pid, "tid": tid}


def _event_classes(conn: sqlite3.Connection, tables: set[str]) -> tuple[set[int], set[int]]:
    """Return the (driver, backtrace) eventClass values, from ENUM_NSYS_EVENT_CLASS where present."""
    driver, backtrace = set(EVENT_CLASS_DRIVER), {EVENT_CLASS_BACKTRACE}
    if "ENUM_NSYS_EVENT_CLASS" in tables and {"id", "name"} <= _columns(conn, "ENUM_NSYS_EVENT_CLASS"):
        rows = list(conn.execute('SELECT id, name FROM "ENUM_NSYS_EVENT_CLASS"'))
        driver = {int(i) for i, n in rows if "DRIVER" in str(n)}
        backtrace = {int(i) for i, n in rows if "BACKTRACE" in str(n)}
    return driver, backtrace


def _runtime(conn: sqlite3.Connection, tables: set[str], strings: _StringIds) -> list[Part]:
    """Return CUDA runtime calls and, as a second part, driver calls.

    Backtrace records (eventClass CUDABACKTRACE) repeat a call with its stack and are dropped, or every
    call would be counted twice. Names lose Nsight's API version suffix (cudaMemcpy_v3020 → cudaMemcpy),
    as Nsight's own reports and CUPTI/Kineto traces name them."""
    have = _columns(conn, RUNTIME)
    exprs = {
        "start": '"start"',
        "end": '"end"',
        "global_tid": _first(have, "globalTid"),
        "correlation": _first(have, "correlationId"),
        "name": _first(have, "nameId"),
        "event_class": _first(have, "eventClass"),
    }
    c, _ = _select(conn, RUNTIME, exprs)
    driver_classes, backtrace_classes = _event_classes(conn, tables)
    cls = c["event_class"]
    is_driver = np.isin(cls, list(driver_classes))
    keep = ~np.isin(cls, list(backtrace_classes))
    codes, names = _names_from_ids(c["name"], strings, clean=lambda s: _API_VERSION_SUFFIX.sub("", s))
    parts = []
    for cat, sel in (("cuda_runtime", keep & ~is_driver), ("cuda_driver", keep & is_driver)):
        cols = _thread_cols(c["start"][sel], c["end"][sel], c["global_tid"][sel])
        cols["correlation"] = c["correlation"][sel]
        parts.append(Part(cat, cols, codes[sel], names))
    return parts


def _nvtx(conn: sqlite3.Connection, tables: set[str], strings: _StringIds) -> list[Part]:
    """Return NVTX ranges that ended (push/pop and start/end); the name is the message text, or the
    registered string it refers to."""
    have = _columns(conn, NVTX)
    if "end" not in have:
        return []
    where = 'WHERE "end" IS NOT NULL'
    if "eventType" in have:
        where += f' AND "eventType" IN ({", ".join(map(str, NVTX_RANGE_TYPES))})'
    exprs = {
        "start": '"start"',
        "end": '"end"',
        "global_tid": _first(have, "globalTid"),
        "text_id": _first(have, "textId"),
    }
    c, texts = _select(conn, NVTX, exprs, where, text=_first(have, "text"))
    id_codes, id_names = _names_from_ids(c["text_id"], strings)
    # the message is either inline text or a registered string; arrow encodes the text without a Python loop
    encoded = pa.array(texts, pa.string()).dictionary_encode()
    text_words = encoded.dictionary.to_pylist()
    names = sorted(set(id_names) | set(text_words))
    index = {w: i for i, w in enumerate(names)}
    from_ids = np.array([index[w] for w in id_names] + [-1], np.int64)[id_codes]
    from_text = np.array([index[w] for w in text_words] + [-1], np.int64)[encoded.indices.fill_null(-1).to_numpy()]
    codes = np.where(from_text >= 0, from_text, from_ids)
    return [Part("nvtx", _thread_cols(c["start"], c["end"], c["global_tid"]), codes, names)]


def _merge_strings(
    parts: list[Part], codes_of: Callable[[Part], np.ndarray | None], words_of: Callable[[Part], list[str]]
) -> tuple[np.ndarray, list[str]]:
    """Return one code array and one string list for a string field split over parts (no duplicates)."""
    index: dict[str, int] = {}
    out = []
    for p in parts:
        local_words, local_codes = words_of(p), codes_of(p)
        if local_codes is None:
            out.append(np.full(p.length, -1, np.int64))
            continue
        remap = np.array([index.setdefault(w, len(index)) for w in local_words] + [-1], np.int64)
        out.append(remap[np.where(local_codes >= 0, local_codes, len(local_words))])
    return (np.concatenate(out) if out else np.empty(0, np.int64)), list(index)


def _concat(parts: list[Part], name: str) -> np.ndarray:
    """Return column ``name`` over all parts (NULL where a part has no such column)."""
    pieces = [p.cols.get(name, np.full(p.length, NULL, np.int64)) for p in parts]
    return np.concatenate(pieces) if pieces else np.empty(0, np.int64)


def _assemble(parts: list[Part]) -> tuple[pa.Table, int]:
    """Return the event table of all parts, rows grouped by kind in time order, and the base time."""
    start, end = _concat(parts, "start"), _concat(parts, "end")
    valid = start != NULL
    base = int(start[valid].min()) if valid.any() else 0

    cats = sorted({p.cat for p in parts})
    cat_codes = np.concatenate([np.full(p.length, cats.index(p.cat), np.int64) for p in parts]) if parts else None
    kind_of = kind_codes(cats)
    order = kind_time_order(kind_of[cat_codes], start) if parts else np.empty(0, np.int64)
    name_codes, names = _merge_strings(parts, lambda p: p.name_codes, lambda p: p.names)
    copy_codes, copy_words = _merge_strings(parts, lambda p: p.memcpy_kind, lambda p: p.memcpy_words)

    ts = np.where(valid, start - base, NULL)
    dur = np.where(valid & (end != NULL), end - start, NULL)
    n = start.size
    cat_codes = cat_codes if cat_codes is not None else np.empty(0, np.int64)
    cols: dict[str, Any] = {
        "ts": int_column(ts[order], NULL, pa.int64()),
        "dur": int_column(dur[order], NULL, pa.int64()),
        "name": dict_column(name_codes[order], names),
        "cat": dict_column(cat_codes[order], cats),
        "kind": pa.DictionaryArray.from_arrays(pa.array(kind_of[cat_codes][order], pa.int8()), pa.array(KINDS)),
        "memcpy_kind": dict_column(copy_codes[order], copy_words),
    }
    int_types = {
        "pid": pa.int64(),
        "tid": pa.int64(),
        "device": pa.int16(),
        "stream": pa.int64(),
        "correlation": pa.int64(),
        "grid_x": pa.int32(),
        "grid_y": pa.int32(),
        "grid_z": pa.int32(),
        "block_x": pa.int32(),
        "block_y": pa.int32(),
        "block_z": pa.int32(),
        "registers": pa.int32(),
        "shared_memory": pa.int64(),
        "bytes": pa.int64(),
    }
    for name, type_ in int_types.items():
        cols[name] = int_column(_concat(parts, name)[order], NULL, type_)
    return build_table(cols, n), base


# TARGET_INFO_GPU column → Kineto deviceProperties key, so that every reader describes devices alike
_DEVICE_KEYS = {
    "id": "id",
    "name": "name",
    "totalMemory": "totalGlobalMem",
    "computeMajor": "computeMajor",
    "computeMinor": "computeMinor",
    "maxThreadsPerBlock": "maxThreadsPerBlock",
    "maxRegistersPerBlock": "regsPerBlock",
    "maxRegistersPerSm": "regsPerMultiprocessor",
    "threadsPerWarp": "warpSize",
    "maxShmemPerBlock": "sharedMemPerBlock",
    "maxShmemPerSm": "sharedMemPerMultiprocessor",
    "smCount": "numSms",
    "numSms": "numSms",
    "maxShmemPerBlockOptin": "sharedMemPerBlockOptin",
    "clockRate": "clockRate",
    "memoryBandwidth": "memoryBandwidth",
    "l2CacheSize": "l2CacheSize",
    "chipName": "chipName",
    "busLocation": "busLocation",
    "uuid": "uuid",
}


def _device_properties(conn: sqlite3.Connection, tables: set[str]) -> list[dict[str, Any]]:
    """Return one dict per GPU with Kineto's deviceProperties keys (plus a few Nsight extras), from
    TARGET_INFO_GPU, else TARGET_INFO_CUDA_GPU."""
    for table in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"):
        have = _columns(conn, table) if table in tables else set()
        if "id" not in have:
            continue
        cols = sorted(have & set(_DEVICE_KEYS))
        exprs = [f'"{c}"' for c in cols]
        if {"maxWarpsPerSm", "threadsPerWarp"} <= have:
            cols.append("maxThreadsPerMultiprocessor")
            exprs.append('"maxWarpsPerSm" * "threadsPerWarp"')
        rows = conn.execute(f'SELECT {", ".join(exprs)} FROM "{table}" ORDER BY "id"')
        keys = [_DEVICE_KEYS.get(c, c) for c in cols]
        return [{k: v for k, v in zip(keys, row) if v is not None and v != ""} for row in rows]
    return []


def _thread_names(conn: sqlite3.Connection, tables: set[str]) -> dict[str, dict[str, str]]:
    """Return {"pid:tid": {"name": ...}} from ThreadNames (as the Kineto reader keys its thread names)."""
    if not {"ThreadNames", "StringIds"} <= tables:
        return {}
    rows = conn.execute(
        "SELECT (t.globalTid >> 24) & 16777215, t.globalTid & 16777215, s.value "
        "FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId WHERE t.globalTid IS NOT NULL"
    )
    return {f"{pid}:{tid}": {"name": name} for pid, tid, name in rows}


def _process_names(conn: sqlite3.Connection, tables: set[str], events: pa.Table) -> dict[str, dict[str, str]]:
    """Return {pid: {"name": ...}} from PROCESSES, for the processes that have CPU-side events."""
    if "PROCESSES" not in tables or not {"pid", "name"} <= _columns(conn, "PROCESSES"):
        return {}
    kinds = events["kind"].combine_chunks().indices.to_numpy()
    on_cpu = ~np.isin(kinds, [KIND_CODE[k] for k in GPU_KINDS])
    seen = set(pc.unique(events["pid"].filter(pa.array(on_cpu))).drop_null().to_pylist())
    return {str(pid): {"name": name} for pid, name in conn.execute("SELECT pid, name FROM PROCESSES") if pid in seen}


def _export_info(conn: sqlite3.Connection, tables: set[str]) -> dict[str, Any]:
    """Return the export's own facts: EXPORT_META_DATA and the session start (UTC epoch ns)."""
    info: dict[str, Any] = {}
    if "EXPORT_META_DATA" in tables:
        info.update({str(k): v for k, v in conn.execute("SELECT name, value FROM EXPORT_META_DATA")})
    if "TARGET_INFO_SESSION_START_TIME" in tables and "utcEpochNs" in _columns(conn, "TARGET_INFO_SESSION_START_TIME"):
        row = conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        if row and row[0] is not None:
            info["session_start_utc_ns"] = int(row[0])
    return info


def _metadata(conn: sqlite3.Connection, path: str, tables: set[str], base: int, events: pa.Table) -> dict[str, Any]:
    """Return the trace-level metadata."""
    return {
        "source": path,
        "format": "nsys",
        "base_time_ns": base,
        "device_properties": _device_properties(conn, tables),
        "distributed_info": {},
        "rank": _mpi_rank(conn, tables),
        "processes": _process_names(conn, tables, events),
        "threads": _thread_names(conn, tables),
        "file": _export_info(conn, tables),
    }
