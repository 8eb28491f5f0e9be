"""Read a Kineto / Chrome-trace JSON file (plain or gzip) into the event table, block by block.

A gzipped file streams through one reused buffer; a plain one, past its first block, is scanned where it
lies, in its memory map, a block-sized window at a time. Each block is cut into chunks (four per thread) at
likely event starts; the threads take the chunks in turn and the compiled scanner scans each into its own
scratch columns, with the string table of the thread; then every chunk's start is verified against where the
previous chunk really ended (a wrong guess is re-scanned), and the rows are drained into the output columns,
chunk by chunk in file order, while the next block is scanned. Memory is
bounded by the output columns plus a few fixed-size buffers, never by the input size.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from gpuan.errors import TraceError, UsageError
from gpuan.trace.kineto import scanner as sc
from gpuan.trace.memory import PAGE, mapped_empty, release, will_need
from gpuan.trace.source import ByteSource, open_bytes

BLOCK_BYTES = 16 << 20
MIN_PARALLEL_BYTES = 1 << 20
HEADROOM = 1 << 20  # bytes free before a block read ahead, for the unfinished event carried into it
BYTES_PER_ROW = 64  # chunk bytes per scratch row; smaller events just drain the scratch more often
CHUNKS_PER_THREAD = 4  # a block's chunks per scanning thread, taken in turn by whichever thread is free
SLACK = 64  # bytes past the data that the scanner's 8-byte word reads may touch
MIN_EVENT_BYTES = 48  # rows are preallocated for size / 48 (more are added if a file needs them)
MAX_ROWS = 2**31 - 1  # row numbers are int32 in the sparse columns

# Columns kept for every event row; every other scratch field is kept sparsely (row index + value).
DENSE64 = ("ts", "dur", "pid", "tid", "correlation", "external_id")
DENSE32 = ("name", "cat")  # string ids
SPARSE64 = ("stream", "shared_memory", "bytes", "in_msg_nelems", "out_msg_nelems", "seq", "fwd_tid")
SPARSE32 = (
    "pid_str", "tid_str", "device", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "registers", "group_size", "collective", "dtype", "pg_name", "pg_ranks", "input_dims",
    "input_types", "concrete_inputs", "arg_kind", "peer", "mem_device", "mem_device_type",
)  # fmt: skip
#: scratch fields that hold string ids
STRING_FIELDS = frozenset(
    ["name", "cat", "pid_str", "tid_str", "collective", "dtype", "pg_name", "pg_ranks", "input_dims",
     "input_types", "concrete_inputs", "arg_kind", "arg_name", "arg_labels"]
)  # fmt: skip


def thread_count() -> int:
    """Return the number of scanner threads: GPUAN_THREADS, else the cores this process may use. Raises
    :class:`UsageError` if GPUAN_THREADS is set to anything but a whole number of at least 1."""
    env = os.environ.get("GPUAN_THREADS", "").strip()
    if not env:
        return len(os.sched_getaffinity(0))
    if not env.isdigit() or int(env) < 1:
        raise UsageError(f"GPUAN_THREADS: must be a whole number of at least 1, not {env!r}")
    return int(env)


@dataclass
class StringTables:
    """The scanner's intern tables, one per scanning thread (and one for what a block's settling scans
    again), grown on demand."""

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
        self.pool = np.zeros((t, 1 << 17), np.uint64)  # string bytes, read as 8-byte words
        self.uoff = np.zeros((t, 1 << 15), np.int64)
        self.ulen = np.zeros((t, 1 << 15), np.int64)
        self.state = np.zeros((t, 4), np.int64)

    def grow(self) -> None:
        """Double whatever is nearly full, for all tables, keeping every interned string; the string pool
        where nothing is (a string longer than the pool's free bytes asked for more)."""
        t = self.threads
        nu = int(self.state[:, sc.ST_UNIQUE].max())
        used = int(self.state[:, sc.ST_POOL].max()) // 8 + 1
        full_pool = used * 2 > self.pool.shape[1] - (1 << 13)
        if full_pool or (nu * 2 + 2 <= self.uoff.shape[1] and 4 * (nu + 1) <= self.keys.shape[1]):
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

    def of(self, i: int) -> tuple[np.ndarray, ...]:
        """Return thread i's table arrays, in the order the scanner takes them."""
        return self.keys[i], self.vals[i], self.pool[i], self.uoff[i], self.ulen[i], self.state[i]

    def strings(self, i: int, start: int = 0, stop: int | None = None) -> list[bytes]:
        """Return the raw bytes of the strings interned by thread i, in id order, from id `start` to `stop`
        (None: all so far)."""
        n = int(self.state[i, sc.ST_UNIQUE]) if stop is None else stop
        pool = self.pool[i].view(np.uint8)
        return [pool[o : o + ln].tobytes() for o, ln in zip(self.uoff[i, start:n], self.ulen[i, start:n])]


def _grow_cols(a: np.ndarray, width: int) -> np.ndarray:
    """Return a copy of the 2-D array a widened to `width` columns (zeros after the old ones)."""
    b = np.zeros((a.shape[0], width), a.dtype)
    b[:, : a.shape[1]] = a
    return b


@dataclass
class RawTrace:
    """What the Kineto reader hands to the event-table builder: columns with string ids, the strings,
    and the file's metadata."""

    length: int  # number of event rows
    columns: dict[str, np.ndarray]  # dense columns, scanner null sentinels for missing values
    sparse: dict[str, tuple[np.ndarray, np.ndarray]]  # (row indexes, values) of the non-null values
    strings: list[str]  # global string table; string columns hold indices into it (-1: null)
    flows: dict[str, np.ndarray]
    process_meta: list[tuple]  # (pid, tid, pid_str, tid_str, name, arg name, arg labels, sort index)
    metadata: dict
    first_row: int = 0  # the file's event rows before these (a part of a file read in parts)
    last: bool = True  # whether these are the file's last rows (a part of a file read in parts)


class GlobalStrings:
    """One string table for all scanner tables: maps each table's local string ids to global ids, extended
    as the rows scanned with a table are drained, with the strings that table met for the first time."""

    def __init__(self, threads: int) -> None:
        self.index: dict[bytes, int] = {}
        self.maps = [np.full(1, -1, np.int32) for _ in range(threads)]  # last slot: null -> -1
        self._decoded: list[str] = []

    def update(self, t: int, tables: StringTables, upto: int | None = None) -> np.ndarray:
        """Return thread t's local → global id map (its last entry maps null to -1), for its strings up to id
        `upto` (None: all so far; a count taken when a scan ended, while the thread scans on)."""
        known = self.maps[t].size - 1
        fresh = tables.strings(t, start=known, stop=upto)
        if fresh:
            self.maps[t] = np.concatenate([self.maps[t][:-1], self.add(fresh)])
        return self.maps[t]

    def add(self, strings: list[bytes]) -> np.ndarray:
        """Return the global ids of `strings` (raw bytes; new ones are numbered on), then -1 for null."""
        return np.array([self.index.setdefault(s, len(self.index)) for s in strings] + [-1], np.int32)

    def decoded(self) -> list[str]:
        """Return the global strings, JSON escapes resolved (each string decoded once, however often asked:
        a file read in parts asks after every part)."""
        if len(self._decoded) < len(self.index):
            fresh = list(self.index)[len(self._decoded) :]
            self._decoded = self._decoded + [_decode(s) for s in fresh]
        return self._decoded


class Collected:
    """Rows taken out of the scratch, in file order, as growing 2-D numpy arrays (one row per field).

    Arrays are memory maps sized for an upper bound of the row count: pages past the rows actually
    written are never touched, so they cost address space, not memory; and the builder gives each
    field's pages back as soon as it has made its column."""

    def __init__(self, tables: int, expected_rows: int) -> None:
        cap = max(expected_rows, 1024)
        self.rows = 0
        self.d64 = mapped_empty((len(DENSE64), cap), np.int64)
        self.d32 = mapped_empty((len(DENSE32), cap), np.int32)
        self.ph = mapped_empty(cap, np.int8)
        self.s64_idx = mapped_empty((len(SPARSE64), cap), np.int32)
        self.s64_val = mapped_empty((len(SPARSE64), cap), np.int64)
        self.s32_idx = mapped_empty((len(SPARSE32), cap), np.int32)
        self.s32_val = mapped_empty((len(SPARSE32), cap), np.int32)
        self.s_count = np.zeros(len(SPARSE64) + len(SPARSE32), np.int64)
        self.f64 = mapped_empty((4, cap), np.int64)
        self.f32 = mapped_empty((4, cap), np.int32)
        self.f_count = np.zeros(1, np.int64)
        self.meta: list[tuple] = []
        self.strings = GlobalStrings(tables)

    def clear(self) -> None:
        """Forget the rows taken so far (a part of the file handed on), keeping the buffers and the strings."""
        self.rows = 0
        self.s_count[:] = 0
        self.f_count[:] = 0
        self.meta = []

    def reserve(self, n: int) -> None:
        """Make room for n more rows in every array (rarely needed: the first estimate is an upper bound)."""
        used = max(self.rows, int(self.s_count.max()), int(self.f_count[0]))
        if used + n <= self.ph.size:
            return
        if used + n >= MAX_ROWS:
            raise OverflowError(f"more than {MAX_ROWS:,} rows in one trace file")
        cap = min(max(self.ph.size * 3 // 2, used + n), MAX_ROWS)
        for name in ("d64", "d32", "ph", "s64_idx", "s64_val", "s32_idx", "s32_val", "f64", "f32"):
            a = getattr(self, name)
            b = mapped_empty(a.shape[:-1] + (cap,), a.dtype)
            b[..., :used] = a[..., :used]
            setattr(self, name, b)


_D64_SRC = np.array([sc.I64[n] for n in DENSE64], np.int64)
_D32_SRC = np.array([sc.I32[n] for n in DENSE32], np.int64)
# the sparse column of each bit of a scratch row's "written" field (-1: the field is not a sparse one)
_BIT_SLOT = np.full(64, -1, np.int64)
_BIT_SLOT[[sc.I64[n] for n in SPARSE64]] = np.arange(len(SPARSE64))
_BIT_SLOT[[sc.T_BIT0 + sc.I32[n] for n in SPARSE32]] = len(SPARSE64) + np.arange(len(SPARSE32))
_S32_IS_STRING = np.array([n in STRING_FIELDS for n in SPARSE32], np.bool_)
_META_FIELDS = ("pid_str", "tid_str", "name", "arg_name", "arg_labels")


def _take(
    t: int, o64: np.ndarray, o32: np.ndarray, rows: int, out: Collected, tables: StringTables, known: int | None = None
) -> None:
    """Move scratch rows [0, rows) scanned with string table t into `out`, string ids made global (ids up to
    `known`: the table's string count when these rows were written, where its thread may be scanning on)."""
    if rows == 0:
        return
    collect(o64, o32, rows, out.strings.update(t, tables, known), out)


def collect(o64: np.ndarray, o32: np.ndarray, rows: int, gmap: np.ndarray, out: Collected) -> None:
    """Move scratch rows [0, rows) into `out` (events, flows and metadata apart), their string ids made
    global through gmap (its last entry: -1, for null)."""
    out.reserve(rows)
    out.rows += sc.drain(
        o64, o32, rows, gmap, out.d64, _D64_SRC, out.d32, _D32_SRC, out.ph, out.rows,
        out.s64_idx, out.s64_val, out.s32_idx, out.s32_val, _BIT_SLOT, _S32_IS_STRING, out.s_count,
        out.f64, out.f32, out.f_count,
    )  # fmt: skip
    for r in np.flatnonzero(o32[:rows, sc.I32["ph"]] == ord("M")):
        sid = [int(gmap[v]) if v != sc.NULL32 else -1 for v in (o32[r, sc.I32[f]] for f in _META_FIELDS)]
        out.meta.append(
            (int(o64[r, sc.I64["pid"]]), int(o64[r, sc.I64["tid"]]), *sid, int(o64[r, sc.I64["sort_index"]]))
        )


class _Scratch:
    """Scratch columns the scanner writes into, one slot per chunk of a block."""

    def __init__(self, slots: int, cap: int) -> None:
        # one event's fields side by side: the scanner fills a row at a time
        self.o64 = np.empty((slots, cap, len(sc.F64)), np.int64)
        self.o32 = np.empty((slots, cap, len(sc.F32)), np.int32)
        self.bad_at = -1  # where the value of the wrong type starts (status WRONG_TYPE)

    def note_wrong_type(self, status: int, slot: int, row: int) -> None:
        """Keep where the scan into `slot` found a value of the wrong type (the scanner wrote it into the
        row it was filling) before the scratch is reused."""
        if status == sc.WRONG_TYPE:
            self.bad_at = int(self.o64[slot, row, sc.I64["bad_at"]])


def _scan_serial(buf, pos, end, n, t, scratch, tables, out, row0=0, slot=None):
    """Scan [pos, end) with string table t into scratch slot `slot` (default: t) until a final status;
    returns (status, pos, rows)."""
    slot = t if slot is None else slot
    o64, o32 = scratch.o64[slot], scratch.o32[slot]
    row = row0
    while True:
        status, pos, row = sc.scan(buf, sc.words(buf), pos, end, n, o64, o32, row, *tables.of(t))
        if status == sc.GROW:
            tables.grow()
            continue
        if status == sc.FULL:
            _take(t, o64, o32, row, out, tables)
            row = 0
            continue
        return status, pos, row


def scan_file(path: str, *, threads: int | None = None, progress: Callable[[int, int], None] | None = None) -> RawTrace:
    """Scan a Kineto/Chrome-trace JSON file (plain or gzip) and return its rows as a :class:`RawTrace`.

    Raises TraceError (naming the file and the problem) for anything that is not a readable trace.
    """
    (whole,) = scan_parts(path, threads=threads, progress=progress)
    return whole


def scan_parts(
    path: str,
    *,
    part_rows: int | None = None,
    threads: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[RawTrace]:
    """Yield the rows of a Kineto/Chrome-trace JSON file as RawTraces of about `part_rows` rows each
    (events and flows; one part for the whole file when None), in file order.

    Each part is valid only until the next is asked for: its columns are views of buffers that the next
    part reuses, so memory stays at one part's worth whatever the file's size. Every part holds the strings
    met so far (ids are global: a part's ids index its own ``strings``), its own metadata events and its
    first event's row number in the file; only the last part carries the file's metadata (what follows
    the events is read last). Raises TraceError as :func:`scan_file` does."""
    threads = threads or thread_count()
    chunks = 1 if threads == 1 else threads * CHUNKS_PER_THREAD
    chunk_cap = BLOCK_BYTES // chunks // BYTES_PER_ROW + 64
    # one table per scanning thread, and one more for what a parallel block's settling scans again
    tables = StringTables(threads if threads == 1 else threads + 1)
    # two scratch sets when scanning in parallel: one block's rows wait in one while the next fills the other
    scratches = [_Scratch(chunks, chunk_cap) for _ in range(1 if threads == 1 else 2)]

    with open_bytes(path) as src, ThreadPoolExecutor(threads, thread_name_prefix="gpuan-scan") as workers:
        expected = src.expected_size() // MIN_EVENT_BYTES + 1024
        out = Collected(tables.threads, expected if part_rows is None else min(expected, part_rows + BLOCK_BYTES // 16))
        head = read_head(src, path, BLOCK_BYTES)
        buf, have, eof, pos, text = head.buf, head.have, head.eof, head.pos, head.text
        del head
        # past the head, an uncompressed file is scanned where it lies, in its memory map: no copies
        mapped = None if eof else src.mapped()
        released = 0  # the map's pages before this offset were scanned and given back (or are in `behind`)
        behind: np.ndarray | None = None  # scanned pages of the map, given back while the next block is scanned
        spare: np.ndarray | None = None  # the buffer the next block is read into while this one is scanned
        waiting: _Waiting | None = None  # a scanned block's rows, drained while the next block is scanned
        first_row = 0  # the file's event rows before this part
        drained = 0  # events, flows and metadata events drained into earlier parts

        def give_back() -> None:
            nonlocal behind
            if behind is not None:
                release(behind)
                behind = None

        def read_ahead() -> _Ahead | None:
            """Give back the map's pages behind the scan (unmapping a block's pages takes a millisecond: not
            between blocks), or read the next bytes of a file not mapped."""
            nonlocal spare
            give_back()
            if eof or mapped is not None:
                return None
            if spare is None or spare.size < HEADROOM + BLOCK_BYTES + SLACK:
                spare = np.empty(HEADROOM + BLOCK_BYTES + SLACK, np.uint8)
            try:
                held, at_end = fill(src, spare, HEADROOM)
            except TraceError as e:  # unreadable bytes ahead: said when they are needed, after this block's own
                return _Ahead(spare, 0, False, e)
            return _Ahead(spare, held - HEADROOM, at_end)

        while True:
            n = have
            ahead = None
            scratch = next(s for s in scratches if waiting is None or s is not waiting.scratch)
            if threads == 1 or n - pos < MIN_PARALLEL_BYTES:
                _drain(waiting, out, tables)
                waiting = None
                give_back()
                status, pos, rows = _scan_serial(buf, pos, n, n, 0, scratch, tables, out)
                scratch.note_wrong_type(status, 0, rows)
                _take(0, scratch.o64[0], scratch.o32[0], rows, out, tables)
            else:
                status, pos, waiting, ahead = _scan_block_parallel(
                    buf, pos, n, threads, scratch, tables, workers, out, waiting, read_ahead
                )  # fmt: skip
            if progress is not None:
                progress(src.consumed(), src.total)
            if status == sc.ARRAY_END:
                break
            index = drained + out.rows + int(out.f_count[0]) + len(out.meta)  # events drained before pos
            if status == sc.BAD:
                problem = not_an_event(buf, pos, have, index, bare=text is None)
                raise TraceError(path, problem or f"malformed JSON near byte {src.offset_of(pos)}")
            if status == sc.WRONG_TYPE:
                raise TraceError(path, wrong_type(buf, pos, have, scratch.bad_at, index, src.offset_of(pos)))
            # NEED_MORE: keep the unfinished event and read on
            if eof:
                raise TraceError(path, "trace ends in the middle of the events (truncated file)")
            if part_rows is not None and out.rows + int(out.f_count[0]) >= part_rows:
                yield _assemble(out, {}, first_row, last=False)
                first_row += out.rows
                drained = index
                out.clear()
            keep = n - pos
            if ahead is not None:
                buf, spare, pos, have, eof = _carry(src, buf, pos, n, ahead)
                continue
            if mapped is not None:
                at = src.offset_of(pos)
                behind = mapped[released:at]  # the scanned pages, given back while the next block is scanned
                released = at - at % PAGE  # from the page that held `at`, not given back yet
                buf, pos, have, eof = _window(src, mapped, at, keep)
                continue
            if keep * 2 > buf.size - SLACK:
                buf = grow_buffer(buf)
            buf[:keep] = buf[pos:n]
            src.advance(pos)
            pos = 0
            have, eof = fill(src, buf, keep)
        tail = buf[pos:have].tobytes()
        if ahead is not None:
            if ahead.error is not None:
                raise ahead.error
            tail += ahead.buf[HEADROOM : HEADROOM + ahead.got].tobytes()
            eof = ahead.eof
        if not eof:
            tail += src.read_rest() if mapped is None else mapped[src.offset_of(have) :].tobytes()

    del scratches, scratch, buf, spare, behind  # the scratch is as large as a block's rows: free it before assembling
    mapped = None  # unmapped once no array views it
    metadata = parse_metadata(path, text, tail) if text is not None else {}
    yield _assemble(out, metadata, first_row)


class _Scanned(NamedTuple):
    """What a thread's scan of one chunk of a block gave."""

    status: int
    end: int  # where the scan stopped
    rows: int
    table: int  # the string table it scanned with
    known: int  # that table's string count when the scan ended


@dataclass
class _Waiting:
    """A block scanned in parallel whose rows wait in `scratch` to be drained: per chunk, its row count, the
    string table its thread scanned it with and that table's string count when its scan ended."""

    scratch: _Scratch
    rows: list[int]
    table: list[int]
    known: list[int]


@dataclass
class _Ahead:
    """The bytes read ahead into `buf` (from HEADROOM on, `got` of them; `eof`: the file's last ones), or
    why they could not be read."""

    buf: np.ndarray
    got: int
    eof: bool
    error: TraceError | None = None  # the bytes could not be read (raised where they are needed)


def _drain(waiting: _Waiting | None, out: Collected, tables: StringTables) -> None:
    """Move a waiting block's rows (if any) into `out`, chunk by chunk in file order; returns nothing."""
    if waiting is not None:
        for k, rows in enumerate(waiting.rows):
            _take(waiting.table[k], waiting.scratch.o64[k], waiting.scratch.o32[k], rows, out, tables, waiting.known[k])


def _carry(src: ByteSource, buf: np.ndarray, pos: int, n: int, ahead: _Ahead):
    """Put the unfinished event buf[pos:n] just before the bytes read ahead; returns (buffer, spare buffer,
    pos, have, eof) to scan on from. Raises the TraceError met reading ahead."""
    if ahead.error is not None:
        raise ahead.error
    keep = n - pos
    have = HEADROOM + ahead.got
    if keep <= HEADROOM:
        start = HEADROOM - keep
        ahead.buf[start:HEADROOM] = buf[pos:n]
        src.advance(pos - start)
        return ahead.buf, buf, start, have, ahead.eof
    # an event longer than the headroom: one buffer for it and the bytes read ahead, with room to grow
    joined = np.empty(max(2 * (keep + ahead.got), buf.size) + SLACK, np.uint8)
    joined[:keep] = buf[pos:n]
    joined[keep : keep + ahead.got] = ahead.buf[HEADROOM:have]
    src.advance(pos)
    return joined, ahead.buf, 0, keep + ahead.got, ahead.eof


def _window(src: ByteSource, whole: np.ndarray, at: int, unfinished: int) -> tuple[np.ndarray, int, int, bool]:
    """For a file scanned in its memory map `whole`, return (buffer, pos, have, eof) to scan on from file
    offset `at`, whose first `unfinished` bytes hold no whole event: the map itself up to a block further
    (or twice `unfinished`, so that a long event fits), or near its end the file's last bytes copied into
    a padded buffer, since the scanner's word reads past the data need memory that the map's end lacks."""
    end = at + max(BLOCK_BYTES, 2 * unfinished)
    if end <= whole.size - SLACK:
        src.map_at(end)
        will_need(whole[end : end + BLOCK_BYTES])  # the next window's pages read from disk meanwhile
        return whole, at, end, False
    last = np.empty(whole.size - at + SLACK, np.uint8)
    last[: whole.size - at] = whole[at:]
    src.map_at(whole.size)
    src.advance(at)
    return last, 0, whole.size - at, True


@dataclass
class Head:
    """The start of a trace in a read buffer: ``buf[:have]`` holds the file's first bytes (``eof``: all
    of them), the events start at ``pos`` (just after the array's '['), and ``text`` is what precedes the
    ``traceEvents`` value (None for a file that is a bare array of events, which has no metadata)."""

    buf: np.ndarray
    have: int
    eof: bool
    pos: int
    text: bytes | None


def read_head(src: ByteSource, path: str, block: int) -> Head:
    """Read a trace's first `block` bytes (more while the metadata before the events array is larger) and
    return where its events start. Raises TraceError for an empty file or one without a traceEvents array."""
    buf = np.empty(block + SLACK, np.uint8)
    have, eof = fill(src, buf, 0)
    if have == 0:
        raise TraceError(path, "empty file")
    while True:
        kind, pos = sc.find_events_array(buf, have)
        if kind == -1 or (kind == 0 and eof):
            raise TraceError(path, "not a Chrome/Kineto trace (no traceEvents array)")
        if kind > 0:
            return Head(buf, have, eof, pos, buf[: pos - 1].tobytes() if kind == 1 else None)
        buf = grow_buffer(buf)
        have, eof = fill(src, buf, have)


def _scan_block_parallel(buf, pos, n, threads, scratch, tables, workers, out, waiting, read_ahead):
    """Scan buf[pos:n] in chunks, `threads` at once, into `scratch`; meanwhile drain the `waiting` block's
    rows and read the next bytes (`read_ahead`). Returns (final status, resume position, the block's rows if
    they wait to be drained, the bytes read ahead or None).

    Each thread takes the next chunk not yet taken, so a thread slowed down (by the drain beside it, or by
    a costlier part of the block) takes fewer: with one chunk a thread, the threads' ends of a block were
    a third of a chunk's time apart. A thread scans its chunks in file order with its own string table,
    so every table's strings up to a chunk's end were met at or before that chunk, and draining the chunks
    in file order numbers the strings in the order they were met, whichever thread took which: the order of
    first occurrence, but for what a wrong chunk start met (numbered where that chunk is settled)."""
    count = scratch.o64.shape[0]
    starts = np.empty(count, np.int64)
    starts[0] = pos
    step = (n - pos) // count
    for k in range(1, count):
        starts[k] = max(sc.find_chunk_start(buf, pos + k * step, n), starts[k - 1])
    ends = np.append(starts[1:], n).astype(np.int64)
    b64 = sc.words(buf)
    results: list[_Scanned | None] = [None] * count
    taken, lock = itertools.count(), threading.Lock()  # each chunk is taken once

    def next_chunk() -> int:
        with lock:
            return next(taken)

    def scan_chunks(t: int) -> None:
        keys, vals, pool, uoff, ulen, state = tables.of(t)
        while (k := next_chunk()) < count:
            status, p, rows = sc.scan(buf, b64, starts[k], ends[k], n, scratch.o64[k], scratch.o32[k], 0,
                                      keys, vals, pool, uoff, ulen, state)  # fmt: skip
            results[k] = _Scanned(status, p, rows, t, int(state[sc.ST_UNIQUE]))
            if status == sc.GROW:
                return  # its table is full: the chunks it would take next are scanned when the block settles

    futures = [workers.submit(scan_chunks, t) for t in range(threads)]
    # the scanner releases the GIL: while the chunks are scanned, the block before is drained and the
    # next one read, so that neither waits for the other
    _drain(waiting, out, tables)
    ahead = read_ahead()
    for f in futures:
        f.result()
    resume = pos
    clean = True  # every chunk started where the one before ended, and only the last stopped short
    for k in range(count):
        if results[k] is None:
            clean = False
            break
        clean = clean and starts[k] == resume and results[k].status == (sc.NEED_MORE if k == count - 1 else sc.OK_END)
        resume = results[k].end
    if clean:
        waiting = _Waiting(scratch, [r.rows for r in results], [r.table for r in results], [r.known for r in results])
        return sc.NEED_MORE, resume, waiting, ahead
    # settled chunk by chunk: rows a thread scanned are taken with the strings its table held then; what is
    # scanned again uses the extra table, which holds only what was scanned again, in file order
    again = tables.threads - 1
    resume = pos
    for k in range(count):
        table, known = again, None
        if results[k] is None or starts[k] != resume:
            # not scanned, or the guessed chunk start was not an event start (its rows are void): scan it.
            # What the void scan interned is numbered here, wherever its thread scanned it
            if results[k] is not None:
                out.strings.update(results[k].table, tables, results[k].known)
            status, p, rows = _scan_serial(buf, resume, ends[k], n, again, scratch, tables, out, slot=k)
        else:
            status, p, rows, table, known = results[k]
            if status in (sc.GROW, sc.FULL):  # the rows so far, then the rest of the chunk scanned again
                _take(table, scratch.o64[k], scratch.o32[k], rows, out, tables, known)
                if status == sc.GROW:
                    tables.grow()
                status, p, rows = _scan_serial(buf, p, ends[k], n, again, scratch, tables, out, slot=k)
                table, known = again, None
        scratch.note_wrong_type(status, k, rows)
        _take(table, scratch.o64[k], scratch.o32[k], rows, out, tables, known)
        resume = p
        if status != sc.OK_END:
            return status, p, None, ahead
    return sc.NEED_MORE, resume, None, ahead


#: what each checked field must hold, by its key (args keys: those the scanner reads as numbers or lists)
_TOP_LEVEL_EXPECTED = {
    "ts": "a number (microseconds)", "dur": "a number (microseconds)", "pid": "a number or a string",
    "tid": "a number or a string", "ph": "a string", "name": "a string", "cat": "a string", "args": "an object",
}  # fmt: skip
_LIST_ARGS = ("grid", "block")
_KEY_BEFORE = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:\s*$')
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_NAME = re.compile(rb'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


_VALUE_NAMES = {ord("["): "a list", ord('"'): "a string", ord("t"): "true", ord("f"): "false", ord("n"): "null"}


def not_an_event(buf: np.ndarray, pos: int, n: int, index: int, *, bare: bool) -> str | None:
    """Return the problem when the element at buf[pos] of the events array is a whole JSON value but not an
    object (a document that is not a trace: a list of lists, numbers...), else None (malformed JSON)."""
    c = int(buf[pos])
    if c == ord("{") or not (c in _VALUE_NAMES or c == ord("-") or ord("0") <= c <= ord("9")):
        return None
    before = buf[max(pos - 64, 0) : pos].tobytes().rstrip()
    if not before.endswith((b",", b"[")):  # a value where a comma should be: malformed, not another document
        return None
    end = sc.skip_value(buf, sc.words(buf), pos, n)
    after = sc.skip_ws(buf, end, n) if end > 0 else n
    if after >= n or buf[after] not in (ord(","), ord("]")):
        return None
    where = f"element {index:,} of its top-level array" if bare else f"traceEvents[{index:,}]"
    return f"not a Chrome/Kineto trace: {where} is {_VALUE_NAMES.get(c, 'a number')}, not an event object"


def wrong_type(buf: np.ndarray, pos: int, n: int, value_at: int, index: int, offset: int) -> str:
    """Return the one-line problem for the event at buf[pos] (traceEvents[index], at byte `offset` of the
    file) whose value at buf[value_at] has the wrong type: the event, the field, the value, what it must be;
    or that it has no phase (value_at -1)."""
    b64 = sc.words(buf)
    ev_end = sc.skip_value(buf, b64, pos, n)
    event = (
        f"traceEvents[{index:,}]{_event_name(buf[pos : ev_end if ev_end > pos else n].tobytes())} at byte {offset:,}"
    )
    if value_at < 0:
        return f"{event}: no ph (the event's phase: X for a complete event, B/E, i, ...)"
    m = _KEY_BEFORE.search(buf[pos:value_at].tobytes())
    key = _decode(m.group(1)) if m else "?"
    top_level = key in _TOP_LEVEL_EXPECTED  # the args keys gpuan checks are not top-level keys
    if top_level:
        field_name, expected = key, _TOP_LEVEL_EXPECTED[key]
    else:
        field_name = f"args.{key}"
        expected = "a list of integers" if key in _LIST_ARGS else "an integer (a number or a string of digits)"
    end = sc.skip_value(buf, b64, value_at, n)
    value = buf[value_at : end if end > value_at else min(n, value_at + 60)].tobytes().decode("utf-8", "replace")
    if len(value) > 40:
        value = value[:37] + "..."
    if key in ("ts", "dur") and _is_number(value):
        expected = "a time gpuan can hold (int64 nanoseconds: within about 292 years)"
    elif not top_level and _is_number(value):
        expected = "an integer that int64 holds"
    elif key == "ph":
        expected = "one of the Chrome trace phases (X, B, E, i, ...)"
    return f"{event}: {field_name} is {value}, not {expected}"


def _is_number(text: str) -> bool:
    """Whether `text` is a JSON number (not NaN, Infinity or a string)."""
    return _JSON_NUMBER.fullmatch(text) is not None


def _event_name(event: bytes) -> str:
    """Return " 'NAME'" for the event's JSON text (maybe cut short) that has a string name, else ""."""
    try:
        name = json.loads(event).get("name")
    except (ValueError, AttributeError):
        m = _NAME.search(event)
        name = _decode(m.group(1)) if m else None
    if not isinstance(name, str):
        return ""
    return f" {name if len(name) <= 60 else name[:57] + '...'!r}"


def fill(src: ByteSource, buf: np.ndarray, have: int) -> tuple[int, bool]:
    """Read into buf[have:] until it is full or the source ends; returns (bytes held, at end)."""
    mv = memoryview(buf)[: buf.size - SLACK]
    while have < mv.nbytes:
        got = src.readinto(mv[have:])
        if not got:
            return have, True
        have += got
    return have, False


def grow_buffer(buf: np.ndarray) -> np.ndarray:
    """Return a read buffer with twice the data capacity, holding buf's bytes at its start."""
    bigger = np.empty((buf.size - SLACK) * 2 + SLACK, np.uint8)
    bigger[: buf.size] = buf
    return bigger


def parse_metadata(path: str, head: bytes, tail: bytes) -> dict:
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
    """Return the text of a JSON string's raw bytes: escapes resolved where they are valid, kept as
    written where not; never a lone surrogate (Arrow needs valid UTF-8)."""
    if b"\\" in raw:
        try:
            text = json.loads(b'"' + raw + b'"')
        except ValueError:
            return raw.decode("utf-8", "replace")
        return text.encode("utf-8", "replace").decode("utf-8")
    return raw.decode("utf-8", "replace")


def _assemble(out: Collected, metadata: dict, first_row: int = 0, last: bool = True) -> RawTrace:
    """Return the collected rows as a RawTrace (views of the collected arrays, not copies)."""
    n = out.rows
    columns = {name: out.d64[i, :n] for i, name in enumerate(DENSE64)}
    columns.update({name: out.d32[i, :n] for i, name in enumerate(DENSE32)})
    columns["ph"] = out.ph[:n]
    sparse: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for i, name in enumerate(SPARSE64):
        k = int(out.s_count[i])
        sparse[name] = (out.s64_idx[i, :k], out.s64_val[i, :k])
    for i, name in enumerate(SPARSE32):
        k = int(out.s_count[len(SPARSE64) + i])
        sparse[name] = (out.s32_idx[i, :k], out.s32_val[i, :k])
    nf = int(out.f_count[0])
    flows = {}
    if nf:
        flows = {name: out.f64[i, :nf] for i, name in enumerate(("id", "ts", "pid", "tid"))}
        flows.update({name: out.f32[i, :nf] for i, name in enumerate(("cat", "phase", "pid_str", "tid_str"))})
    return RawTrace(n, columns, sparse, out.strings.decoded(), flows, out.meta, metadata, first_row, last)
