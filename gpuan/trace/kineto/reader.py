"""Read a Kineto / Chrome-trace JSON file (plain or gzip) into the event table, block by block.

A plain file is scanned where it lies, in its memory map, a block-sized window at a time. A gzipped one (or
any file that cannot be mapped) is read by a thread of its own, inflating straight into the next block's
buffer (of three) while the block before is scanned, in blocks that start at 1 MB and double up to 16 MB, so
that the first scans wait for a few MB of inflate, not 32. A file is scanned by as many threads as it has 2 MB
for (`MIN_PARALLEL_BYTES` each, up to the threads asked for); at two or more, each block of 2 MB or more is cut
into chunks (four per thread) at likely event starts and its chunks are queued behind the block
before's; each scanning thread takes the next queued chunk and the compiled scanner scans it into the chunk's
scratch columns, with the thread's own string table. Meanwhile the main thread takes and queues the next
block (where it scans alone, at one thread or in a file under 4 MB, and the file is read: after settling the
block); then it settles the block: the event carried from the block before is scanned, and each chunk, as
soon as it is scanned, has its start verified against where the previous chunk really ended (a wrong guess
is scanned again) and its rows drained into the output columns, chunk by chunk in file order, while the
threads scan on. A read beside other reads of a run (:func:`gpuan.trace.threads.files_side_by_side`) takes
the threads of those that have ended between blocks: more scanning threads, or, where it scanned alone,
scanning threads from its next block on. Memory is bounded by the output columns plus a few fixed-size
buffers, never by the input size.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from gpuan.errors import TraceError
from gpuan.trace.kineto import scanner as sc
from gpuan.trace.memory import PAGE, mapped_empty, release, will_need
from gpuan.trace.source import ByteSource, open_bytes
from gpuan.trace.threads import check_stop, keep_threads, most_threads, take_spare_threads, thread_count

BLOCK_BYTES = 16 << 20
# a compressed file's first block: its scan waits for its inflate (16 MB: 11 ms), so blocks start small and
# double up to BLOCK_BYTES, each inflated while the one before is scanned
FIRST_READ_BYTES = 1 << 20
MIN_PARALLEL_BYTES = 2 << 20  # the least of a file a scanning thread is given (a block under it is not cut)
HEADROOM = 1 << 20  # bytes free before a block read ahead, for the unfinished event carried into it
BYTES_PER_ROW = 64  # chunk bytes per scratch row; smaller events just drain the scratch more often
# scratch rows of a scan by the main thread alone, drained each time they fill: 1 MB, not a block's worth of
# rows (65 MB), whose fresh pages cost a fault each (the 28 real traces: 43k faults a pass, not 64k)
SERIAL_ROWS = 4096
CHUNKS_PER_THREAD = 4  # a block's chunks per scanning thread, taken in turn by whichever thread is free
SLACK = 64  # bytes past the data that the scanner's 8-byte word reads may touch
MIN_EVENT_BYTES = 48  # rows are preallocated for size / 48 (more are added if a file needs them)
FULL_TABLE_BYTES = 4 << 20  # a file of more than half this size starts with full-size string tables
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


class StringTable:
    """One of the scanner's intern tables, grown on demand by the one thread that scans with it.

    The main thread reads a table's strings up to a count taken when a scan ended while its thread scans
    (and maybe grows it) on: growing copies the strings to the same offsets of larger arrays and swaps
    them in, so old and new arrays both hold every string up to that count."""

    def __init__(self, file_bytes: int = FULL_TABLE_BYTES) -> None:
        # sized for the file (it grows on demand): a full-size table's hash slots alone are 768 KB, mostly
        # written, where a 1 MB trace meets a few hundred strings
        shift = max(0, min(6, (FULL_TABLE_BYTES // max(file_bytes, 1)).bit_length() - 1))
        self.keys = np.zeros(1 << (16 - shift), np.uint64)
        self.vals = np.full(1 << (16 - shift), -1, np.int32)
        self.pool = np.zeros(1 << (17 - shift), np.uint64)  # string bytes, read as 8-byte words
        self.uoff = np.zeros(1 << (15 - shift), np.int64)
        self.ulen = np.zeros(1 << (15 - shift), np.int64)
        # a cache line apart from any other allocation: the scanner writes it, beside other threads' tables
        self.state = np.zeros(24, np.int64)[8:12]

    def grow(self) -> None:
        """Double whatever is nearly full, keeping every interned string; the string pool where nothing is
        (a string longer than the pool's free bytes asked for more)."""
        nu = int(self.state[sc.ST_UNIQUE])
        used = int(self.state[sc.ST_POOL]) // 8 + 1
        full_pool = used * 2 > self.pool.size - min(1 << 13, self.pool.size // 4)
        if full_pool or (nu * 2 + 2 <= self.uoff.size and 4 * (nu + 1) <= self.keys.size):
            self.pool = _grown(self.pool, self.pool.size * 2 + used)
        if nu * 2 + 2 > self.uoff.size:
            self.uoff, self.ulen = _grown(self.uoff, self.uoff.size * 2), _grown(self.ulen, self.ulen.size * 2)
        if 4 * (nu + 1) > self.keys.size:
            keys = np.zeros(self.keys.size * 4, np.uint64)
            vals = np.full(self.keys.size * 4, -1, np.int32)
            sc.rehash(keys, vals, self.pool, self.uoff, self.ulen, nu)
            self.keys, self.vals = keys, vals

    def arrays(self) -> tuple[np.ndarray, ...]:
        """Return the table's arrays, in the order the scanner takes them."""
        return self.keys, self.vals, self.pool, self.uoff, self.ulen, self.state

    def count(self) -> int:
        """Return the number of strings interned so far."""
        return int(self.state[sc.ST_UNIQUE])

    def strings(self, start: int = 0, stop: int | None = None) -> list[bytes]:
        """Return the raw bytes of the interned strings from id `start` to `stop` (None: all so far)."""
        uoff, ulen, pool = self.uoff, self.ulen, self.pool  # offsets first: a pool swapped in since holds them
        n = self.count() if stop is None else stop
        if n <= start:
            return []
        # the strings lie one after another in the pool: one copy, then slices of it (a numpy slice and
        # tobytes per string took 1 us each)
        first = int(uoff[start])
        ends = (uoff[start:n] + ulen[start:n] - first).tolist()
        data = pool.view(np.uint8)[first : first + ends[-1]].tobytes()
        return [data[a:b] for a, b in zip([0, *ends[:-1]], ends)]


def _grown(a: np.ndarray, size: int) -> np.ndarray:
    """Return a copy of the array a lengthened to `size` (zeros after the old elements)."""
    b = np.zeros(size, a.dtype)
    b[: a.size] = a
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

    def add_table(self) -> None:
        """Make room for the map of one more scanner table (a thread that joins a scan)."""
        self.maps.append(np.full(1, -1, np.int32))

    def update(self, t: int, tables: list[StringTable], upto: int | None = None) -> np.ndarray:
        """Return thread t's local → global id map (its last entry maps null to -1), for its strings up to id
        `upto` (None: all so far; a count taken when a scan ended, while the thread scans on)."""
        known = self.maps[t].size - 1
        fresh = tables[t].strings(known, upto)
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
            self._decoded = self._decoded + _decode_all(fresh)
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
# a metadata event's string fields and integer fields, in the order of RawTrace.process_meta's tuples
_META32 = [sc.I32[f] for f in ("pid_str", "tid_str", "name", "arg_name", "arg_labels")]
_META64 = [sc.I64[f] for f in ("pid", "tid", "sort_index")]


def _take(
    t: int, o64: np.ndarray, o32: np.ndarray, rows: int, out: Collected, tables: list[StringTable],
    known: int | None = None,
) -> None:  # fmt: skip
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
    at = np.flatnonzero(o32[:rows, sc.I32["ph"]] == ord("M"))
    if at.size:
        ids = o32[at][:, _META32]
        sid = gmap[np.where(ids == sc.NULL32, -1, ids)]  # gmap's last slot: null -> -1
        pid, tid, order = o64[at][:, _META64].T.tolist()
        out.meta += zip(pid, tid, *sid.T.tolist(), order)


GAP = -1  # the scratch slot for what is scanned between a block's chunks (the event carried into it, ...)
MAIN = 0  # the main thread's string table, for what it scans (all of a file scanned without chunks)


class _Scratch:
    """Scratch columns the scanner writes into: one slot per chunk of a block, and the GAP slot."""

    def __init__(self, slots: int, cap: int) -> None:
        # one event's fields side by side: the scanner fills a row at a time
        self.o64 = np.empty((slots + 1, cap, len(sc.F64)), np.int64)
        self.o32 = np.empty((slots + 1, cap, len(sc.F32)), np.int32)
        self.bad_at = -1  # where the value of the wrong type starts (status WRONG_TYPE)

    def trim(self, limit: int) -> None:
        """Give back the pages of each slot's rows past those that fit `limit` bytes over all the slots (the
        first rows of each slot stay as they are, written pages kept)."""
        slots = self.o64.shape[0]
        keep = limit // (ROW_BYTES * slots)
        for k in range(slots):
            release(self.o64[k, keep:])
            release(self.o32[k, keep:])

    def fits(self, slots: int, cap: int) -> bool:
        """Return whether this scratch has the shape a scan of `slots` chunks of `cap` rows asks for."""
        return self.o64.shape[:2] == (slots + 1, cap)

    def note_wrong_type(self, status: int, slot: int, row: int) -> None:
        """Keep where the scan into `slot` found a value of the wrong type (the scanner wrote it into the
        row it was filling) before the scratch is reused."""
        if status == sc.WRONG_TYPE:
            self.bad_at = int(self.o64[slot, row, sc.I64["bad_at"]])


ROW_BYTES = len(sc.F64) * 8 + len(sc.F32) * 4  # one scratch row
# Scratches of finished scans, their first rows' pages written: the next scan in the process reuses them. A
# parallel scan writes each row of a file into scratch memory, and fresh memory costs a page fault (3-5 us
# on a VM) per 16 rows: over the 28 real traces at 2 threads a pass took 46-51k faults and 220-245 ms of system
# time with fresh scratches, 19.5-26k and 124-188 ms with kept ones. Each keeps at most KEPT_BYTES of written pages
# (the rest given back), three are kept: a parallel scan's two and a serial scan's one.
_KEPT: list[_Scratch] = []
_KEPT_LOCK = threading.Lock()
KEPT_BYTES = 16 << 20


def _useful(size: int, block: _Block, pos: int, workers: _Workers) -> int:
    """Return how many more threads would each scan MIN_PARALLEL_BYTES or more of the file from `pos` in
    `block` on, beyond those scanning now (the main thread alone counts as one); 0 or less: none."""
    return (size - block.base - pos) // MIN_PARALLEL_BYTES - max(1, workers.count)


def _scratches(chunks: int) -> list[_Scratch]:
    """Return the scratches of a scan whose blocks are cut into `chunks` chunks: two, one for the block
    being settled and one for the block after it; one of SERIAL_ROWS rows for a scan without chunks."""
    if not chunks:
        return [_lend_scratch(0, SERIAL_ROWS)]
    cap = BLOCK_BYTES // chunks // BYTES_PER_ROW + 64
    return [_lend_scratch(chunks, cap) for _ in range(2)]


def _lend_scratch(slots: int, cap: int) -> _Scratch:
    """Return a kept scratch of that shape (its pages already written once), else a new one."""
    with _KEPT_LOCK:
        for i, kept in enumerate(_KEPT):
            if kept.fits(slots, cap):
                kept.bad_at = -1
                return _KEPT.pop(i)
    return _Scratch(slots, cap)


def _keep_scratches(scratches: list[_Scratch]) -> None:
    """Keep the scratches of a finished scan for the next scan, each trimmed to KEPT_BYTES of written pages."""
    for scratch in scratches:
        scratch.trim(KEPT_BYTES)
    with _KEPT_LOCK:
        _KEPT[:] = (scratches + _KEPT)[:3]


def _scan_serial(buf, pos, end, n, t, scratch, slot, tables, out):
    """Scan [pos, end) with string table t into scratch slot `slot`, rows taken into `out` as they fill it,
    until a final status; returns (status, pos, rows left in the slot)."""
    o64, o32 = scratch.o64[slot], scratch.o32[slot]
    row = 0
    while True:
        status, pos, row = sc.scan(buf, sc.words(buf), pos, end, n, o64, o32, row, *tables[t].arrays())
        if status == sc.GROW:
            tables[t].grow()
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
    with ExitStack() as stack:
        src = stack.enter_context(open_bytes(path, ahead=False))
        size = src.expected_size()
        # each scanning thread has MIN_PARALLEL_BYTES or more to scan, and a file too small for two is scanned by
        # this thread alone: starting and stopping the scanning threads took 1.3 ms of a 3.4 ms scan of a 17 KB
        # trace, the real 1.7-1.8 MB traces' scans at 2 threads took 1.05-1.28x the time of one, and loads of
        # 2.5-3.5 MB cuts of a real trace 1.06-1.16x (2026-12-03)
        threads = max(1, min(threads, size // MIN_PARALLEL_BYTES))
        keep_threads(threads)  # beside other reads, the threads this file has no share for go to them now
        # a read beside others (files_side_by_side) may take their threads as they end, between blocks
        may_grow = size >= MIN_PARALLEL_BYTES and most_threads(threads) > threads
        chunks = 0 if threads == 1 else threads * CHUNKS_PER_THREAD
        # the main thread's table (MAIN, for what it scans), then one per scanning thread
        tables = [StringTable(size) for _ in range(1 + (threads if chunks else 0))]
        # in parallel, the next block is scanned into one scratch while the block's chunks are taken from the other
        scratches = _scratches(chunks)
        workers = stack.enter_context(_Workers(threads if chunks else 0, tables, size))
        expected = size // MIN_EVENT_BYTES + 1024
        out = Collected(len(tables), expected if part_rows is None else min(expected, part_rows + BLOCK_BYTES // 16))
        # an uncompressed file is scanned where it lies, in its memory map: no copies (its head too, where
        # the map holds the bytes the scanner's word reads touch past the data)
        mapped = src.mapped(past=SLACK)
        head = _head_in_map(path, mapped, src.total) if mapped is not None else None
        step = BLOCK_BYTES if mapped is not None else min(FIRST_READ_BYTES, BLOCK_BYTES)
        if head is None:
            head = read_head(src, path, step)
        else:
            src.map_at(head.have)
        text = head.text
        # a compressed file's blocks are inflated in a thread of their own, each while the one before is scanned
        pool = None if mapped is not None else stack.enter_context(ThreadPoolExecutor(1, "gpuan-read"))
        reads = _Reads(src, None if head.eof else mapped, head, tables, step, pool)
        del mapped  # held by the reads (and the head) while needed, not past them
        block = _plan(head.buf, head.pos, head.have, 0, head.eof, scratches[0], chunks, exact=True)
        workers.queue(block)
        del head
        pos = block.lo  # where the rows not yet taken start, in block.buf
        following: _Block | None = None  # the block after `block`, read and queued while `block` is scanned
        # a block that this thread scans alone is read after it: the read thread reads ahead of it already, and
        # a read before the scan would wait for the inflate of two blocks before the first is scanned
        ahead = bool(chunks) or reads.mapped is not None
        first_row = 0  # the file's event rows before this part
        drained = 0  # events, flows and metadata events drained into earlier parts
        try:
            while True:
                check_stop()  # a read beside others that were stopped (Ctrl-C) ends here, within a block
                if may_grow and not block.eof and (taken := take_spare_threads(_useful(size, block, pos, workers))):
                    if not chunks:
                        # scanned alone so far (the block in hand too): from the next block on, scanning threads
                        # scan chunks (as many as the main thread and the threads taken), the main thread settles
                        taken, ahead = taken + 1, True
                    workers.add(taken, out.strings)
                    # the next blocks are cut for every scanning thread (the block in hand keeps its scratch)
                    chunks = workers.count * CHUNKS_PER_THREAD
                    scratches = _scratches(chunks)
                # the scanner releases the GIL: the next block is read and queued, so that the threads go on
                # to it without a pause, and the block's chunks are drained as they are scanned
                reads.give_back()
                scratch = next((s for s in scratches if s is not block.scratch), block.scratch)
                following = None if block.eof or not ahead else reads.next_block(block, pos, scratch, chunks)
                if following is not None:
                    workers.queue(following)
                start = pos  # where the block's rows start: the next block's size depends on it
                status, pos = _settle(block, pos, tables, out)
                if progress is not None:
                    progress(src.consumed(), src.total)
                if status == sc.ARRAY_END:
                    break
                index = drained + out.rows + int(out.f_count[0]) + len(out.meta)  # events drained before pos
                if status == sc.BAD:
                    problem = not_an_event(block.buf, pos, block.n, index, bare=text is None)
                    raise TraceError(path, problem or f"malformed JSON near byte {block.base + pos}")
                if status == sc.WRONG_TYPE:
                    bad_at = block.scratch.bad_at
                    raise TraceError(path, wrong_type(block.buf, pos, block.n, bad_at, index, block.base + pos))
                # NEED_MORE: the block's last event goes on into the next block
                if not ahead and not block.eof:
                    following = reads.next_block(block, start, scratch, chunks)
                if following is None:
                    raise TraceError(path, "trace ends in the middle of the events (truncated file)")
                if following.unreadable is not None:
                    raise following.unreadable
                if part_rows is not None and out.rows + int(out.f_count[0]) >= part_rows:
                    yield _assemble(out, {}, first_row, last=False)
                    first_row += out.rows
                    drained = index
                    out.clear()
                reads.scanned_to(block, pos)
                pos, block = reads.carry(block, pos, following, out)
            tail = block.buf[pos : block.n].tobytes() + reads.rest(block, following)
        finally:
            for b in (block, following):
                if b is not None:
                    b.cancel()  # no thread writes into the scratches once it returns
    _keep_scratches(scratches)
    del scratches, scratch, block, following, reads  # the map and buffers given back before the table is built
    metadata = parse_metadata(path, text, tail) if text is not None else {}
    yield _assemble(out, metadata, first_row)


class _Scanned(NamedTuple):
    """What a thread's scan of one chunk of a block gave."""

    status: int
    end: int  # where the scan stopped
    rows: int
    table: int  # the string table it scanned with
    known: int  # that table's string count when the scan ended


@dataclass(eq=False)
class _Block:
    """The bytes buf[lo:n] of the events array (buf[0] is the file's byte `base`; `eof`: the file ends at n),
    cut at guessed event starts into chunks [starts[k], ends[k]), which the scanning threads take in turn,
    each into its own slot of `scratch`; or, with no chunks, scanned by the main thread when settled."""

    buf: np.ndarray
    lo: int
    n: int
    base: int
    eof: bool
    scratch: _Scratch
    starts: np.ndarray
    ends: np.ndarray
    results: list[_Scanned | None] = field(init=False)
    unreadable: TraceError | None = None  # why the block has no bytes: they could not be read
    error: BaseException | None = None  # what a thread's scan raised
    cancelled: bool = False  # its chunks are no longer wanted: the threads skip those not started
    _left: int = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _done: threading.Event = field(init=False, default_factory=threading.Event)
    _chunk_done: list[threading.Event] = field(init=False)

    def __post_init__(self) -> None:
        self.results = [None] * len(self.starts)
        self._chunk_done = [threading.Event() for _ in self.results]
        self._left = len(self.starts)
        if not self._left:
            self._done.set()

    def finish_one(self, k: int) -> None:
        """Note that a thread is done with chunk k."""
        self._chunk_done[k].set()
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self._done.set()

    def wait(self) -> None:
        """Wait until every chunk is scanned; raise what a thread's scan raised."""
        self._done.wait()
        if self.error is not None:
            raise self.error

    def wait_chunk(self, k: int) -> _Scanned | None:
        """Wait until chunk k is scanned and return what its scan gave; raise what a thread's scan raised."""
        self._chunk_done[k].wait()
        if self.error is not None:
            raise self.error
        return self.results[k]

    def cancel(self) -> None:
        """Have the threads skip the chunks not started, and wait for those being scanned."""
        self.cancelled = True
        self._done.wait()


def _plan(buf, lo, n, base, eof, scratch, chunks, *, exact, unreadable=None) -> _Block:
    """Return the block buf[lo:n] cut into `chunks` chunks (none if it is small): the first starts at lo
    where `exact` (lo is an event start), else, like the others, at the first likely event start found."""
    count = chunks if n - lo >= MIN_PARALLEL_BYTES else 0
    starts = np.empty(count, np.int64)
    step = (n - lo) // max(count, 1)
    for k in range(count):
        guess = lo if k == 0 and exact else sc.find_chunk_start(buf, lo, lo + k * step, n)
        starts[k] = max(guess, starts[k - 1]) if k else guess
    ends = np.append(starts[1:], n).astype(np.int64)
    return _Block(buf, lo, n, base, eof, scratch, starts, ends, unreadable=unreadable)


class _Workers:
    """The scanning threads: each takes the next chunk queued (of any block), scans it with its own string
    table (`tables[t]` for thread t, from 1: tables[MAIN] is the main thread's) into the chunk's scratch
    slot, and takes the next. Threads may join while they scan (:meth:`add`)."""

    def __init__(self, threads: int, tables: list[StringTable], size: int) -> None:
        self._count = threads
        self._tables = tables
        self._size = size  # the file's size, which sizes a joining thread's string table
        self._tasks: queue.SimpleQueue[tuple[_Block, int] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    @property
    def count(self) -> int:
        """Return the number of scanning threads started."""
        return len(self._threads)

    def add(self, threads: int, strings: GlobalStrings) -> None:
        """Start `threads` more scanning threads, each with a string table of its own (and its map in
        `strings`); they take the chunks queued from now on."""
        for _ in range(threads):
            self._tables.append(StringTable(self._size))
            strings.add_table()
            self._start(len(self._tables) - 1)

    def queue(self, block: _Block) -> None:
        """Queue the block's chunks, in file order."""
        k = 0
        try:
            for k in range(block.starts.size):
                self._tasks.put((block, k))
        except BaseException:  # (an interrupt) the chunks not queued count as done, so that no one waits for them
            for left in range(k, block.starts.size):
                block.finish_one(left)
            raise

    def __enter__(self) -> _Workers:
        try:
            for t in range(1, self._count + 1):
                self._start(t)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self, t: int) -> None:
        th = threading.Thread(target=self._work, args=(t,), name=f"gpuan-scan-{t}", daemon=True)
        th.start()
        self._threads.append(th)

    def __exit__(self, *exc) -> None:
        for _ in self._threads:
            self._tasks.put(None)
        for th in self._threads:
            th.join()

    def _work(self, t: int) -> None:
        table = self._tables[t]
        while (task := self._tasks.get()) is not None:
            block, k = task
            try:
                if not block.cancelled:
                    block.results[k] = _scan_chunk(block, k, t, table)
            except BaseException as e:  # raised in the main thread, by block.wait_chunk() or block.wait()
                block.error = e
            finally:
                block.finish_one(k)


def _scan_chunk(block: _Block, k: int, t: int, table: StringTable) -> _Scanned:
    """Scan chunk k of the block with string table t (growing it as it fills) into the chunk's slot."""
    buf, o64, o32 = block.buf, block.scratch.o64[k], block.scratch.o32[k]
    b64, pos, row = sc.words(buf), int(block.starts[k]), 0
    while True:
        status, pos, row = sc.scan(buf, b64, pos, block.ends[k], block.n, o64, o32, row, *table.arrays())
        if status != sc.GROW:
            return _Scanned(status, pos, row, t, table.count())
        table.grow()


def _settle(block: _Block, pos: int, tables: list[StringTable], out: Collected) -> tuple[int, int]:
    """Take the rows of the block from `pos` on (the first event not taken yet), in file order, each chunk's
    as soon as its thread has scanned it (while the threads scan the chunks after it); returns (final
    status, where it stopped).

    What lies before the first chunk (the event carried from the block before) is scanned here, and each
    chunk's start is checked against where the chunk before really ended: a guessed start that was not an
    event start makes the chunk's rows void, and the chunk is scanned again from there. A thread scans its
    chunks in file order with its own string table, so every table's strings up to a chunk's end were met
    at or before that chunk, and taking the chunks in file order numbers the strings in the order they were
    met, whichever thread took which: the order of first occurrence, but for what a wrong chunk start met
    (numbered where that chunk is settled)."""
    buf, n, scratch, again = block.buf, block.n, block.scratch, MAIN
    starts, ends, results = block.starts, block.ends, block.results
    count = starts.size
    if count == 0 or pos < starts[0]:
        status, pos, rows = _scan_serial(buf, pos, starts[0] if count else n, n, again, scratch, GAP, tables, out)
        scratch.note_wrong_type(status, GAP, rows)
        _take(again, scratch.o64[GAP], scratch.o32[GAP], rows, out, tables)
        if status != sc.OK_END or count == 0:
            block.wait()
            _number_strings(results, out, tables)
            return status, pos
    # rows a thread scanned are taken with the strings its table held then; what is scanned again uses the
    # main thread's table
    for k in range(count):
        r = block.wait_chunk(k)
        if r is None or starts[k] != pos:
            # not scanned, or the guessed chunk start was not an event start (its rows are void): scan it.
            # What the void scan interned is numbered here, wherever its thread scanned it
            if r is not None:
                out.strings.update(r.table, tables, r.known)
            status, pos, rows = _scan_serial(buf, pos, ends[k], n, again, scratch, k, tables, out)
            table, known = again, None
        else:
            status, pos, rows, table, known = r
            if status == sc.FULL:  # the rows so far, then the rest of the chunk scanned again
                _take(table, scratch.o64[k], scratch.o32[k], rows, out, tables, known)
                status, pos, rows = _scan_serial(buf, pos, ends[k], n, again, scratch, k, tables, out)
                table, known = again, None
        scratch.note_wrong_type(status, k, rows)
        _take(table, scratch.o64[k], scratch.o32[k], rows, out, tables, known)
        if status != sc.OK_END:
            block.wait()
            _number_strings(results[k + 1 :], out, tables)
            return status, pos
    return sc.NEED_MORE, pos


def _number_strings(results: list[_Scanned | None], out: Collected, tables: list[StringTable]) -> None:
    """Number the strings that chunk scans whose rows are dropped met, in file order: otherwise they would be
    numbered when their tables' next chunks are taken, in an order that depends on which thread took what."""
    for r in results:
        if r is not None:
            out.strings.update(r.table, tables, r.known)


class _Reads:
    """Where the next block's bytes come from: past the head, a window of the file's memory map (its last
    bytes copied into a padded buffer), or for a compressed file the next bytes inflated by a thread of
    their own straight into a free buffer, the block after the last one given out, while that one is
    scanned; and the map's pages given back once scanned."""

    def __init__(
        self,
        src: ByteSource,
        mapped: np.ndarray | None,
        head: Head,
        tables: list[StringTable],
        step: int,
        pool: ThreadPoolExecutor | None,
    ) -> None:
        self.src = src
        self.size = src.total  # the file's bytes (`mapped` may hold SLACK zeros past them)
        self.mapped = mapped
        self.tables = tables
        self.read = head.have  # the file's bytes read or mapped so far
        self.released = 0  # the map's pages before this offset were given back (or are in `behind`)
        self.behind: np.ndarray | None = None  # scanned pages of the map, given back during the next scan
        self.step = step  # the last block's size: the next is twice that, up to BLOCK_BYTES
        self.pool = pool  # the thread that reads ahead (None for a mapped file)
        self.buffers: list[np.ndarray] = []  # read buffers: the blocks' in use, and the one read ahead
        self.ahead: tuple[np.ndarray, int, Future] | None = None  # (buffer, size, its read) of the next block
        if mapped is None and not head.eof:
            self._read_ahead(min(BLOCK_BYTES, 2 * step), (head.buf,))

    def next_block(self, block: _Block, pos: int, scratch: _Scratch, chunks: int) -> _Block:
        """Return the bytes after the block's as a block planned into `scratch` (the bytes that cannot be
        read: a block without bytes whose `unreadable` says why, raised where they are needed). `pos` is
        where the block's rows start (whether it is settled yet or not: the blocks are the same either way,
        and so is what a damaged file is reported with). Where the event carried into the block from `pos`
        is already longer than half a block, the block after it is made twice as long as that event so far,
        without chunks: the event is scanned from its start again in each block it reaches, so blocks
        growing with it keep that linear in its length. Blocks read (not mapped) start at FIRST_READ_BYTES
        and double up to BLOCK_BYTES."""
        carried = block.lo - pos
        self.step = step = min(BLOCK_BYTES, 2 * self.step)
        size = step if carried <= step // 2 else max(BLOCK_BYTES, 2 * (block.n - pos))
        chunks = chunks if size == step else 0
        if self.mapped is not None:
            return self._window(size, scratch, chunks)
        base = self.read - HEADROOM
        try:
            buf, held, at_end = self._take(size, block.buf)
        except TraceError as e:  # unreadable bytes ahead: said when they are needed, after this block's own
            empty = np.zeros(HEADROOM + SLACK, np.uint8)
            return _plan(empty, HEADROOM, HEADROOM, base, False, scratch, 0, exact=False, unreadable=e)
        return _plan(buf, HEADROOM, held, base, at_end, scratch, chunks, exact=False)

    def _take(self, size: int, current: np.ndarray) -> tuple[np.ndarray, int, bool]:
        """Return (buffer, bytes held, at end) of the next `size` bytes, which start at the buffer's HEADROOM:
        the block read ahead (lengthened here where a long event asks for more), then start reading the one
        after it. Raises the TraceError met reading them."""
        if self.ahead is None:
            self._read_ahead(size, (current,))
        buf, asked, reading = self.ahead
        self.ahead = None
        held, at_end = reading.result()
        if not at_end and asked < size:
            if buf.size < HEADROOM + size + SLACK:
                longer = np.empty(HEADROOM + size + SLACK, np.uint8)
                longer[:held] = buf[:held]
                buf = longer
            held, at_end = fill(self.src, buf[: HEADROOM + size + SLACK], held)
        self.read += held - HEADROOM
        if not at_end:
            self._read_ahead(min(BLOCK_BYTES, 2 * self.step), (current, buf))
        return buf, held, at_end

    def _read_ahead(self, size: int, busy: tuple[np.ndarray, ...]) -> None:
        """Start reading the next `size` bytes, in the read thread, into a buffer that no block in `busy` holds."""
        free = [b for b in self.buffers if all(b is not x for x in busy) and b.size >= HEADROOM + size + SLACK]
        # room for a whole block even where this one is shorter: the buffer is used again, and pages never
        # filled cost nothing
        buf = free[0] if free else np.empty(HEADROOM + max(size, BLOCK_BYTES) + SLACK, np.uint8)
        self.buffers = [b for b in self.buffers if any(b is x for x in busy)] + [buf]
        self.ahead = (buf, size, self.pool.submit(fill, self.src, buf[: HEADROOM + size + SLACK], HEADROOM))

    def carry(self, block: _Block, pos: int, following: _Block, out: Collected) -> tuple[int, _Block]:
        """Put the unfinished event block.buf[pos:n] just before the following block's bytes; returns (where
        the following block's rows start, the following block, or one in its stead where the event is longer
        than the room before those bytes: both in one new buffer, without chunks, the strings the following
        block's chunk scans met numbered in file order)."""
        if following.buf is self.mapped:  # a window of the file's map, which holds the event just before it
            return block.base + pos, following
        keep = block.n - pos
        if keep <= following.lo:
            following.buf[following.lo - keep : following.lo] = block.buf[pos : block.n]
            return following.lo - keep, following
        following.wait()
        _number_strings(following.results, out, self.tables)
        got = following.n - following.lo
        joined = np.empty(keep + got + SLACK, np.uint8)
        joined[:keep] = block.buf[pos : block.n]
        joined[keep : keep + got] = following.buf[following.lo : following.n]
        # lo: where the following block's bytes start, so that the next block knows how long the event is
        return 0, _plan(joined, keep, keep + got, block.base + pos, following.eof, following.scratch, 0, exact=True)

    def _window(self, size: int, scratch: _Scratch, chunks: int) -> _Block:
        """The map's next `size` bytes (up to the file's end where the map holds SLACK bytes past it); or near
        the end of a map without them, the file's last bytes copied into a padded buffer (with room before
        them for the event carried into it), since the scanner's word reads past the data need memory that
        such a map's end lacks."""
        at, whole, total = self.read, self.mapped, self.size
        end = min(at + size, total)
        if end + SLACK <= whole.size:
            self.read = end
            self.src.map_at(end)
            will_need(whole[end : end + BLOCK_BYTES])  # the next window's pages read from disk meanwhile
            return _plan(whole, at, end, 0, end == total, scratch, chunks, exact=False)
        last = np.empty(HEADROOM + total - at + SLACK, np.uint8)
        last[HEADROOM : HEADROOM + total - at] = whole[at:total]
        self.read = total
        self.src.map_at(total)
        return _plan(last, HEADROOM, HEADROOM + total - at, at - HEADROOM, True, scratch, chunks, exact=False)

    def scanned_to(self, block: _Block, pos: int) -> None:
        """Note that the file's bytes before block.buf[pos] are scanned: the map's pages before it are given
        back while the next block is scanned (unmapping a block's pages takes a millisecond: not between
        blocks)."""
        if self.mapped is not None and block.buf is self.mapped:
            self.behind = self.mapped[self.released : pos]
            self.released = pos - pos % PAGE  # from the page that held `pos`, not given back yet

    def give_back(self) -> None:
        """Give back the map's pages scanned and noted, if any."""
        if self.behind is not None:
            release(self.behind)
            self.behind = None

    def rest(self, block: _Block, following: _Block | None) -> bytes:
        """Return the file's bytes after the block's (those of the following block, if read, then the rest),
        for what follows the events array. Raises the TraceError met reading them."""
        rest = b""
        if following is not None:
            following.cancel()
            if following.unreadable is not None:
                raise following.unreadable
            rest = following.buf[following.lo : following.n].tobytes()
            block = following
        if block.eof:
            return rest
        if self.mapped is not None:
            return rest + self.mapped[self.read : self.size].tobytes()
        if self.ahead is not None:
            buf, _, reading = self.ahead
            self.ahead = None
            held, at_end = reading.result()
            rest += buf[HEADROOM:held].tobytes()
            if at_end:
                return rest
        return rest + self.src.read_rest()


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


def _head_in_map(path: str, mapped: np.ndarray, size: int) -> Head | None:
    """Return the head of a trace of `size` bytes that `mapped` holds (see :func:`read_head`), in the map
    itself: no read, no copy; or None where the scanner's word reads past the head would leave the map (a
    file that ends near its last page's end, read instead)."""
    have = min(size, BLOCK_BYTES)
    while have + SLACK <= mapped.size:
        head = _head_found(path, mapped, have, have == size)
        if head is not None:
            will_need(mapped[:have])
            return head
        have = min(size, have * 2)
    return None


def read_head(src: ByteSource, path: str, block: int) -> Head:
    """Read a trace's first `block` bytes (more while the metadata before the events array is larger) and
    return where its events start. Raises TraceError for an empty file or one without a traceEvents array."""
    buf = np.empty(block + SLACK, np.uint8)
    have, eof = fill(src, buf, 0)
    if have == 0:
        raise TraceError(path, "empty file")
    while (head := _head_found(path, buf, have, eof)) is None:
        buf = grow_buffer(buf)
        have, eof = fill(src, buf, have)
    return head


def _head_found(path: str, buf: np.ndarray, have: int, eof: bool) -> Head | None:
    """Return the head of a trace whose first bytes are buf[:have] (`eof`: all of them), None where the
    events array does not start in them; raises TraceError where they are no trace."""
    kind, pos = sc.find_events_array(buf, have)
    if kind == -1 or (kind == 0 and eof):
        raise TraceError(path, "not a Chrome/Kineto trace (no traceEvents array)")
    if kind == 0:
        return None
    return Head(buf, have, eof, pos, buf[: pos - 1].tobytes() if kind == 1 else None)


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


def _decode_all(raws: list[bytes]) -> list[str]:
    """Return :func:`_decode` of each of `raws`: the valid UTF-8 ones without escapes (nearly all) decoded in
    one call, 0.1 against 1 us a string."""
    joined = b"\x00".join(raws)  # NUL ends any UTF-8 sequence: the whole is valid iff every string is
    try:
        texts = joined.decode("utf-8").split("\x00")
    except UnicodeDecodeError:
        return [_decode(raw) for raw in raws]
    if len(texts) != len(raws):  # a string held a NUL byte
        return [_decode(raw) for raw in raws]
    if b"\\" in joined:
        return [_decode(raw) if "\\" in text else text for text, raw in zip(texts, raws)]
    return texts


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
