"""Read a Kineto / Chrome-trace JSON file (plain or gzip) into the event table, block by block.

The file streams through one reused buffer. Each block is split into one chunk per thread at likely
event starts; the chunks are scanned in parallel by the compiled scanner, each into its own scratch
columns and string table; then every chunk's start is verified against where the previous chunk really
ended (a wrong guess is re-scanned), and the rows are moved into compact per-block columns. Memory is
bounded by the output columns plus a few fixed-size buffers, never by the input size.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numba
import numpy as np

from gpuan.errors import TraceError
from gpuan.trace.kineto import scanner as sc
from gpuan.trace.source import open_bytes

BLOCK_BYTES = 16 << 20
MIN_PARALLEL_BYTES = 1 << 20
BYTES_PER_ROW = 48  # scratch rows per chunk byte: the smallest realistic event is ~70 bytes

# Columns kept for every event row; every other scratch field is kept sparsely (row index + value).
DENSE64 = ("ts", "dur", "pid", "tid", "correlation", "external_id")
DENSE32 = ("name", "cat")
SPARSE64 = ("stream", "shared_memory", "bytes", "in_msg_nelems", "out_msg_nelems", "seq", "fwd_tid")
SPARSE32 = (
    "pid_str", "tid_str", "device", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "registers", "group_size", "collective", "dtype", "pg_name", "pg_ranks", "input_dims",
    "input_types", "concrete_inputs", "arg_kind", "ph",
)  # fmt: skip
#: scratch fields that hold string ids
STRING_FIELDS = frozenset(
    ["name", "cat", "pid_str", "tid_str", "collective", "dtype", "pg_name", "pg_ranks", "input_dims",
     "input_types", "concrete_inputs", "arg_kind", "arg_name", "arg_labels"]
)  # fmt: skip
_EVENT_PHASES = np.array([ord(c) for c in "XiIBEbenC"], dtype=np.int32)
_FLOW_PHASES = np.array([ord(c) for c in "stf"], dtype=np.int32)


def thread_count() -> int:
    """Return the number of scanner threads: GPUAN_THREADS, else numba's thread count."""
    env = os.environ.get("GPUAN_THREADS")
    return max(1, int(env)) if env else numba.get_num_threads()


@dataclass
class StringTables:
    """The per-thread intern tables of the scanner, grown on demand."""

    threads: int
    keys: np.ndarray = field(init=False)
    vals: np.ndarray = field(init=False)
    pool: np.ndarray = field(init=False)
    uoff: np.ndarray = field(init=False)
    ulen: np.ndarray = field(init=False)
    state: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        t = self.threads
        self.keys = np.zeros((t, 1 << 16), np.uint64)
        self.vals = np.full((t, 1 << 16), -1, np.int32)
        self.pool = np.zeros((t, 1 << 20), np.uint8)
        self.uoff = np.zeros((t, 1 << 15), np.int64)
        self.ulen = np.zeros((t, 1 << 15), np.int64)
        self.state = np.zeros((t, 4), np.int64)

    def grow(self) -> None:
        """Double whatever is nearly full, for all threads, keeping every interned string."""
        t = self.threads
        nu = int(self.state[:, sc.ST_UNIQUE].max())
        used = int(self.state[:, sc.ST_POOL].max())
        if used * 2 > self.pool.shape[1] - (1 << 16):
            self.pool = _grow_cols(self.pool, self.pool.shape[1] * 2 + used)
        if nu * 2 + 2 > self.uoff.shape[1]:
            self.uoff = _grow_cols(self.uoff, self.uoff.shape[1] * 2)
            self.ulen = _grow_cols(self.ulen, self.ulen.shape[1] * 2)
        if 4 * (nu + 1) > self.keys.shape[1]:
            m = self.keys.shape[1] * 4
            self.keys = np.zeros((t, m), np.uint64)
            self.vals = np.full((t, m), -1, np.int32)
            for i in range(t):
                sc.rehash(
                    self.keys[i], self.vals[i], self.pool[i], self.uoff[i], self.ulen[i],
                    int(self.state[i, sc.ST_UNIQUE]),
                )  # fmt: skip

    def strings(self, i: int) -> list[bytes]:
        """Return the raw bytes of every string interned by thread i, in id order."""
        n = int(self.state[i, sc.ST_UNIQUE])
        pool = self.pool[i]
        return [pool[o : o + ln].tobytes() for o, ln in zip(self.uoff[i, :n], self.ulen[i, :n])]


def _grow_cols(a: np.ndarray, width: int) -> np.ndarray:
    b = np.zeros((a.shape[0], width), a.dtype)
    b[:, : a.shape[1]] = a
    return b


@dataclass
class Collected:
    """Rows taken out of the scratch, per block and chunk, in compact form."""

    events: dict[str, list] = field(default_factory=lambda: {n: [] for n in DENSE64 + DENSE32})
    sparse: dict[str, list] = field(default_factory=lambda: {n: [] for n in SPARSE64 + SPARSE32})
    thread: list[int] = field(default_factory=list)  # which thread's strings each piece refers to
    lengths: list[int] = field(default_factory=list)
    flows: list[dict[str, np.ndarray]] = field(default_factory=list)
    meta: list[tuple] = field(default_factory=list)


@dataclass
class RawTrace:
    """What the Kineto reader hands to the event-table builder: columns with string ids, the strings,
    and the file's metadata."""

    length: int  # number of event rows
    columns: dict[str, np.ndarray]  # dense columns, scanner null sentinels for missing values
    sparse: dict[str, tuple[np.ndarray, np.ndarray]]  # (row indexes, values) of the non-null values
    strings: list[str]  # global string table; string columns hold indices into it
    flows: dict[str, np.ndarray]
    process_meta: list[tuple]  # (pid, tid, pid_str, tid_str, metadata name, value)
    metadata: dict


def _take(t: int, o64: np.ndarray, o32: np.ndarray, rows: int, out: Collected) -> None:
    """Move scratch rows [0, rows) of thread t into `out`."""
    if rows == 0:
        return
    ph = o32[sc.I32["ph"], :rows]
    is_event = np.isin(ph, _EVENT_PHASES)
    is_flow = np.isin(ph, _FLOW_PHASES)
    is_meta = ph == ord("M")
    if is_flow.any():
        idx = np.flatnonzero(is_flow)
        out.flows.append(
            {
                "id": o64[sc.I64["flow_id"], idx],
                "cat": o32[sc.I32["cat"], idx],
                "phase": ph[idx].astype(np.int8),
                "ts": o64[sc.I64["ts"], idx],
                "pid": o64[sc.I64["pid"], idx],
                "tid": o64[sc.I64["tid"], idx],
                "pid_str": o32[sc.I32["pid_str"], idx],
                "tid_str": o32[sc.I32["tid_str"], idx],
                "thread": np.full(idx.size, t, np.int32),
            }
        )
    for r in np.flatnonzero(is_meta):
        out.meta.append(
            (
                t,
                int(o64[sc.I64["pid"], r]),
                int(o64[sc.I64["tid"], r]),
                int(o32[sc.I32["pid_str"], r]),
                int(o32[sc.I32["tid_str"], r]),
                int(o32[sc.I32["name"], r]),
                int(o32[sc.I32["arg_name"], r]),
                int(o32[sc.I32["arg_labels"], r]),
                int(o64[sc.I64["sort_index"], r]),
            )
        )
    if is_event.all():
        idx = None
        n = rows
    else:
        idx = np.flatnonzero(is_event)
        n = idx.size
    if n == 0:
        return

    def col(a: np.ndarray) -> np.ndarray:
        return a[:rows].copy() if idx is None else a[idx]

    for name in DENSE64:
        out.events[name].append(col(o64[sc.I64[name]]))
    for name in DENSE32:
        out.events[name].append(col(o32[sc.I32[name]]))
    for name in SPARSE64:
        v = col(o64[sc.I64[name]])
        nz = np.flatnonzero(v != sc.NULL64).astype(np.int32)
        out.sparse[name].append((nz, v[nz]))
    for name in SPARSE32:
        v = col(o32[sc.I32[name]])
        nz = np.flatnonzero(v != sc.NULL32).astype(np.int32)
        out.sparse[name].append((nz, v[nz]))
    out.thread.append(t)
    out.lengths.append(n)


class _Scratch:
    """Per-thread scratch columns the scanner writes into."""

    def __init__(self, threads: int, cap: int) -> None:
        self.o64 = np.empty((threads, len(sc.F64), cap), np.int64)
        self.o32 = np.empty((threads, len(sc.F32), cap), np.int32)


def _scan_serial(buf, pos, end, n, t, scratch, tables, out, row0=0):
    """Scan [pos, end) with thread t's scratch until a final status; returns (status, pos, rows)."""
    row = row0
    while True:
        status, pos, row = sc.scan(
            buf, pos, end, n, scratch.o64[t], scratch.o32[t], row,
            tables.keys[t], tables.vals[t], tables.pool[t], tables.uoff[t], tables.ulen[t],
            tables.state[t],
        )  # fmt: skip
        if status == sc.GROW:
            tables.grow()
            continue
        if status == sc.FULL:
            _take(t, scratch.o64[t], scratch.o32[t], row, out)
            row = 0
            continue
        return status, pos, row


def scan_file(path: str, *, threads: int | None = None, progress: Callable[[int, int], None] | None = None) -> RawTrace:
    """Scan a Kineto/Chrome-trace JSON file (plain or gzip) and return its rows as a :class:`RawTrace`.

    Raises TraceError (naming the file and the problem) for anything that is not a readable trace.
    """
    threads = threads or thread_count()
    chunk_cap = BLOCK_BYTES // threads // BYTES_PER_ROW + 64
    tables = StringTables(threads)
    scratch = _Scratch(threads, chunk_cap)
    out = Collected()
    buf = np.empty(BLOCK_BYTES, np.uint8)
    results = np.zeros((threads, 3), np.int64)

    with open_bytes(path) as src:
        have, eof = _fill(src, buf, 0)
        if have == 0:
            raise TraceError(path, "empty file")
        # the head: find the events array (grow the buffer if the metadata before it is large)
        while True:
            kind, pos = sc.find_events_array(buf, have)
            if kind == -1:
                raise TraceError(path, "not a Chrome/Kineto trace (no traceEvents array)")
            if kind > 0:
                break
            if eof:
                raise TraceError(path, "not a Chrome/Kineto trace (no traceEvents array)")
            buf = _grow_buffer(buf)
            have, eof = _fill(src, buf, have)
        head = buf[: pos - 1].tobytes() if kind == 1 else b""

        done = False
        while not done:
            n = have
            region = n - pos
            if threads == 1 or region < MIN_PARALLEL_BYTES:
                status, pos, rows = _scan_serial(buf, pos, n, n, 0, scratch, tables, out)
                _take(0, scratch.o64[0], scratch.o32[0], rows, out)
            else:
                status, pos = _scan_block_parallel(buf, pos, n, threads, scratch, tables, results, out)
            if progress is not None:
                progress(src.consumed(), src.total)
            if status == sc.ARRAY_END:
                done = True
                break
            if status == sc.BAD:
                raise TraceError(path, f"malformed JSON near byte {src.offset_of(pos)}")
            # NEED_MORE: keep the unfinished event and read on
            if eof:
                raise TraceError(path, "trace ends in the middle of the events (truncated file)")
            keep = n - pos
            if keep * 2 > buf.size:
                buf = _grow_buffer(buf)
            buf[:keep] = buf[pos:n]
            src.advance(pos)
            pos = 0
            have, eof = _fill(src, buf, keep)
        tail = buf[pos:have].tobytes() + (b"" if eof else src.read_rest())

    metadata = _parse_metadata(path, head, tail) if kind == 1 else {}
    return _assemble(out, tables, metadata)


def _scan_block_parallel(buf, pos, n, threads, scratch, tables, results, out):
    """Scan buf[pos:n] in `threads` chunks at once; returns (final status, resume position)."""
    starts = np.empty(threads, np.int64)
    starts[0] = pos
    step = (n - pos) // threads
    for k in range(1, threads):
        starts[k] = max(sc.find_chunk_start(buf, pos + k * step, n), starts[k - 1])
    ends = np.append(starts[1:], n).astype(np.int64)
    sc.scan_parallel(
        buf, starts, ends, n, scratch.o64, scratch.o32,
        tables.keys, tables.vals, tables.pool, tables.uoff, tables.ulen, tables.state, results,
    )  # fmt: skip
    resume = pos
    for k in range(threads):
        status, p, rows = (int(x) for x in results[k])
        if starts[k] != resume:
            # the guessed chunk start was not an event start: its rows are void, scan it again
            status, p, rows = _scan_serial(buf, resume, ends[k], n, k, scratch, tables, out)
        elif status in (sc.GROW, sc.FULL):
            if status == sc.FULL:
                _take(k, scratch.o64[k], scratch.o32[k], rows, out)
                rows = 0
            else:
                tables.grow()
            status, p, rows = _scan_serial(buf, p, ends[k], n, k, scratch, tables, out, rows)
        _take(k, scratch.o64[k], scratch.o32[k], rows, out)
        resume = p
        if status != sc.OK_END:
            return status, p
    return sc.NEED_MORE, resume


def _fill(src, buf: np.ndarray, have: int) -> tuple[int, bool]:
    """Read into buf[have:] until it is full or the source ends; returns (bytes held, at end)."""
    mv = memoryview(buf)
    while have < buf.size:
        got = src.readinto(mv[have:])
        if not got:
            return have, True
        have += got
    return have, False


def _grow_buffer(buf: np.ndarray) -> np.ndarray:
    bigger = np.empty(buf.size * 2, np.uint8)
    bigger[: buf.size] = buf
    return bigger


def _parse_metadata(path: str, head: bytes, tail: bytes) -> dict:
    """Parse everything in the file but the events array (the head before it, the tail after it)."""
    try:
        meta = json.loads(head + b"null" + tail)
    except ValueError:
        raise TraceError(path, "malformed JSON after the traceEvents array") from None
    if not isinstance(meta, dict):
        raise TraceError(path, "not a Chrome/Kineto trace")
    meta.pop("traceEvents", None)
    return meta


def _decode(raw: bytes) -> str:
    if b"\\" in raw:
        return json.loads(b'"' + raw + b'"')
    return raw.decode("utf-8", "replace")


def _assemble(out: Collected, tables: StringTables, metadata: dict) -> RawTrace:
    """Concatenate the collected pieces into dense columns with global string ids."""
    # global string ids: one table for all threads, raw (undecoded) bytes as the key
    gid: dict[bytes, int] = {}
    maps = []
    for t in range(tables.threads):
        raw = tables.strings(t)
        maps.append(np.array([gid.setdefault(s, len(gid)) for s in raw] + [-1], dtype=np.int32))
    strings = [_decode(s) for s in gid]

    def remap(v: np.ndarray, t: int, nullv: int) -> np.ndarray:
        m = maps[t]
        r = m[np.where(v == nullv, m.size - 1, v)]
        return r

    lengths = np.array(out.lengths, np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    total = int(offsets[-1])
    columns: dict[str, np.ndarray] = {}
    for name, pieces in out.events.items():
        if name in STRING_FIELDS:
            pieces[:] = [remap(p, t, sc.NULL32) for p, t in zip(pieces, out.thread)]
        columns[name] = np.concatenate(pieces) if pieces else np.empty(0, np.int64)
        pieces.clear()
    sparse: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, pieces in out.sparse.items():
        idx = [offsets[k] + i for k, (i, _) in enumerate(pieces)]
        vals = [remap(v, out.thread[k], -1) if name in STRING_FIELDS else v for k, (_, v) in enumerate(pieces)]
        idx = np.concatenate(idx) if idx else np.empty(0, np.int64)
        vals = np.concatenate(vals) if vals else np.empty(0, np.int64)
        if name in STRING_FIELDS:  # strings that decode to nothing usable were mapped to -1
            keep = vals >= 0
            idx, vals = idx[keep], vals[keep]
        sparse[name] = (idx, vals)
        pieces.clear()

    flows: dict[str, np.ndarray] = {}
    if out.flows:
        for key in out.flows[0]:
            flows[key] = np.concatenate([f[key] for f in out.flows])
        th = flows.pop("thread")
        for key in ("cat", "pid_str", "tid_str"):
            v = flows[key]
            r = np.full(v.size, -1, np.int32)
            for t in range(tables.threads):
                sel = (th == t) & (v != sc.NULL32)
                r[sel] = maps[t][v[sel]]
            flows[key] = r

    def g(t: int, v: int) -> int:
        return int(maps[t][v]) if v != sc.NULL32 else -1

    meta_rows = [
        (pid, tid, g(t, ps), g(t, ts_), g(t, nm), g(t, an), g(t, al), si)
        for t, pid, tid, ps, ts_, nm, an, al, si in out.meta
    ]
    return RawTrace(total, columns, sparse, strings, flows, meta_rows, metadata)
