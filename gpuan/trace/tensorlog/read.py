"""Reading a tensor-access log without copying it: the format (by name or by plausibility), the used part
of a pre-sized file (binary search for the zero tail) and windows of entries as ``numpy.memmap`` views."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from gpuan.errors import TraceError
from gpuan.options import TENSOR_LOG_FORMATS
from gpuan.trace.tensorlog.formats import DTYPES, MAX_EXPERTS, MAX_SOURCES, NO_OFFSET, TOKEN_LIMIT

SAMPLE = 4096  # entries checked for plausibility, spread evenly over the used part
ACCEPT = 0.95  # share of sampled entries a format must explain to be chosen
POINTER_LIMIT = 1 << 48  # user-space pointers on x86-64 and arm64 are below 2^48
PRINTABLE = (ord(" "), ord("~"))  # the first and last printable ASCII bytes


@dataclass(frozen=True)
class TensorLog:
    """An opened log: `entries` used entries of `entry_bytes` each out of `capacity`; `overflow` is the
    writer's count of dropped entries when it left a ``.meta.json`` sidecar (else None); `scores` holds the
    share of sampled entries each candidate format explained when the format was auto-detected."""

    path: str
    format: str
    entry_bytes: int
    entries: int
    capacity: int
    overflow: int | None = None
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def full(self) -> bool:
        """Whether the log reached its capacity (later accesses were dropped)."""
        return self.entries == self.capacity or bool(self.overflow)


def _map(path: str, fmt: str, start: int = 0, stop: int | None = None) -> np.memmap:
    dt = DTYPES[fmt]
    count = (os.path.getsize(path) // dt.itemsize if stop is None else stop) - start
    return np.memmap(path, dtype=dt, mode="r", offset=start * dt.itemsize, shape=(count,))


def used_entries(raw: np.ndarray) -> int:
    """Return how many entries precede the zero tail: the index of the first zero timestamp, found by
    binary search (entries are appended in time order, so the used part has none), touching log2(n) pages."""
    ts = raw["timestamp_ns"]
    lo, hi = 0, len(ts)
    while lo < hi:
        mid = (lo + hi) // 2
        if ts[mid] == 0:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _printable(names: np.ndarray) -> np.ndarray:
    """Per fixed-width byte string: the bytes before the first NUL are printable ASCII and those after are NUL."""
    b = np.ascontiguousarray(names).view(np.uint8).reshape(len(names), -1)
    nul = b == 0
    after = np.cumsum(nul, axis=1) > 0
    return np.all(np.where(after, nul, (b >= PRINTABLE[0]) & (b <= PRINTABLE[1])), axis=1)


def plausible(raw: np.ndarray, fmt: str, file_bytes: int | None = None) -> np.ndarray:
    """Return, per entry of `raw` read as `fmt`, whether its fields look like a real access: timestamps set,
    pointers below 2^48 and 2-byte aligned, file offsets inside the model file (`file_bytes`, when known)
    and, for per-operation entries, at most four sources with printable names and a known memory source."""
    limit = np.uint64(file_bytes if file_bytes else 1 << 40)
    ok = raw["timestamp_ns"] != 0
    if fmt in ("seed64", "packed64"):
        ptr, off, size = raw["tensor_ptr"], raw["file_offset"], raw["size_bytes"].astype(np.uint64)
        ok &= (ptr < POINTER_LIMIT) & (ptr % 2 == 0)
        ok &= (off == 0) | (off == NO_OFFSET) | ((off < limit) & (off + size <= limit))
        return ok
    n = raw["num_sources"]
    ok &= (n <= 4) & _printable(raw["dst_name"])
    src = raw["sources"]
    for k in range(4):
        s = src[:, k]
        used = n > k
        from_disk = s["memory_source"] == 0
        good = (s["memory_source"] <= 1) & _printable(s["name"]) & (s["ptr"] < POINTER_LIMIT)
        good &= ~from_disk | (s["disk_offset_or_buffer_id"] < limit)
        ok &= ~used | good
    if fmt == "op1024":
        ok &= raw["num_experts"] <= 16
    return ok


def _sample(path: str, fmt: str, file_bytes: int | None) -> tuple[int, int, float]:
    """Return (used entries, capacity, share of plausible entries) for `path` read as `fmt`."""
    raw = _map(path, fmt)
    used, capacity = used_entries(raw), len(raw)
    del raw
    if used == 0:
        return 0, capacity, 0.0
    idx = np.unique(np.linspace(0, used - 1, min(SAMPLE, used)).astype(np.int64))
    # read the sample with pread, not through the mapping: each fault on a mapping pulls in its
    # neighbours too (fault-around), which for thousands of spread entries adds up to hundreds of MB
    width = DTYPES[fmt].itemsize
    with open(path, "rb") as f:
        fd = f.fileno()
        picked = np.frombuffer(b"".join(os.pread(fd, width, int(i) * width) for i in idx), DTYPES[fmt])
    ok = plausible(picked, fmt, file_bytes)
    # entries are appended in time order (thread-local batches may reorder a little), so a layout that
    # reads timestamps out of other fields fails here too
    ordered = np.ones(len(idx), bool)
    ordered[1:] = np.diff(picked["timestamp_ns"].astype(np.int64)) >= 0
    return used, capacity, float(np.mean(ok & ordered))


def _sidecar(path: str) -> int | None:
    """Return the writer's count of dropped entries from the log's ``.meta.json`` sidecar, or None when
    there is none. A sidecar that is there but unreadable is an error rather than ignored: ignoring it would
    report a log that lost entries as complete."""
    meta = path + ".meta.json"
    try:
        with open(meta, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(meta, f"cannot read the log's sidecar: {getattr(e, 'strerror', None) or e}") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        problem = f"not JSON ({e.msg}, line {e.lineno} column {e.colno})"
    else:
        overflow = record.get("overflow") if isinstance(record, dict) else None
        if isinstance(overflow, int) and not isinstance(overflow, bool) and overflow >= 0:
            return overflow
        if not isinstance(record, dict):
            problem = "not a JSON object"
        elif "overflow" not in record:
            problem = "no 'overflow' count"
        else:
            problem = f"'overflow' is {json.dumps(overflow)}, not a count of dropped entries"
    raise TraceError(
        meta, f"corrupt sidecar of {os.path.basename(path)}: {problem}; remove it to analyse the log without it"
    )


def _regular_size(path: str) -> int:
    """Return the size of the regular, readable file at `path`; anything else (missing, a directory, a FIFO
    or device, unreadable) is a :class:`TraceError`: it would fail later inside ``numpy.memmap``."""
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise TraceError(path, "is a directory, not a tensor-access log")
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(path, "not a regular file: a tensor-access log is read memory-mapped")
        # opened here (and closed) so a permission problem is reported before the memory mapping
        with open(path, "rb"):
            pass
    except OSError as e:
        raise TraceError(path, f"cannot read: {e.strerror or e}") from None
    return st.st_size


def open_log(path: str | os.PathLike, format: str = "auto", file_bytes: int | None = None) -> TensorLog:
    """Open a tensor-access log and return its :class:`TensorLog`.

    `format` is one of ``seed64``, ``packed64``, ``op256``, ``op1024`` or ``auto``: the format whose fields
    are plausible for at least 95 % of a sample of entries, and clearly more so than any other; never the
    file size alone. `file_bytes` (the GGUF model's size) sharpens the file-offset check."""
    path = os.fspath(path)
    if format != "auto" and format not in TENSOR_LOG_FORMATS:
        raise TraceError(path, f"unknown log format {format!r}; choose from {', '.join(TENSOR_LOG_FORMATS)} or auto")
    size = _regular_size(path)
    if size == 0:
        raise TraceError(path, "empty file: not a tensor-access log")
    candidates = TENSOR_LOG_FORMATS if format == "auto" else (format,)
    scores, found = {}, {}
    for fmt in candidates:
        width = DTYPES[fmt].itemsize
        if size % width:
            if format != "auto":
                raise TraceError(path, f"size {size:,} bytes is not a multiple of the {width}-byte {fmt} entry")
            continue
        used, capacity, score = _sample(path, fmt, file_bytes)
        scores[fmt], found[fmt] = score, (used, capacity)
    if not found:
        raise TraceError(path, f"size {size:,} bytes fits no log format (entries of 64, 256 or 1024 bytes)")
    if format == "auto":
        ranked = sorted(scores, key=scores.get, reverse=True)
        best = ranked[0]
        if found[best][0] == 0:
            raise TraceError(path, "empty log: the first entry's timestamp is 0")
        if scores[best] < ACCEPT:
            raise TraceError(
                path,
                f"not a tensor-access log in any known format (best: {best}, "
                f"{scores[best]:.0%} of entries plausible); give --log-format",
            )
        if len(ranked) > 1 and scores[ranked[1]] >= ACCEPT:
            raise TraceError(path, f"ambiguous log format: both {best} and {ranked[1]} fit; give --log-format")
    else:
        best = format
        if found[best][0] == 0:
            raise TraceError(path, "empty log: the first entry's timestamp is 0")
    used, capacity = found[best]
    _check_tail(path, DTYPES[best].itemsize, used, capacity)
    return TensorLog(path, best, DTYPES[best].itemsize, used, capacity, _sidecar(path), scores)


#: entries after the used part that must be all zero (a few pages: the search stays O(log n) in reads)
TAIL_CHECK = 64


def _check_tail(path: str, width: int, used: int, capacity: int) -> None:
    """Return None when the first :data:`TAIL_CHECK` entries after the used part are all zero bytes, else
    raise a :class:`TraceError`. The binary search for the zero tail can land on a corrupt entry whose
    timestamp is 0 inside the used part; the entries after such an entry are set, where a tail's are not."""
    count = min(TAIL_CHECK, capacity - used)
    if count <= 0:
        return
    with open(path, "rb") as f:
        tail = np.frombuffer(os.pread(f.fileno(), count * width, used * width), np.uint8)
    set_entries = np.flatnonzero(tail.reshape(-1, width).any(axis=1))
    if set_entries.size:
        raise TraceError(
            path,
            f"entry {used:,} (byte {used * width:,}): timestamp 0, but entry {used + int(set_entries[0]):,} "
            "after it is set; a zero timestamp marks only the unused tail, so the entry is corrupt",
        )


def entries(log: TensorLog, start: int = 0, stop: int | None = None) -> np.memmap:
    """Return used entries ``[start, stop)`` of `log` as a read-only structured memmap (nothing is read
    until it is touched)."""
    stop = log.entries if stop is None else min(stop, log.entries)
    return _map(log.path, log.format, start, stop)


def check_tokens(log: TensorLog, start: int, raw: np.ndarray) -> None:
    """Return None when every token id in `raw` (entries of `log` from index `start` on) is a token position
    (below :data:`TOKEN_LIMIT`), else raise a :class:`TraceError` naming the first entry that is not. One
    vectorised pass over the column, so checking a window costs a fraction of analysing it."""
    tokens = raw["token_id"]
    if len(tokens) == 0 or int(tokens.max()) < TOKEN_LIMIT:
        return
    i = int(np.argmax(tokens >= TOKEN_LIMIT))
    at = start + i
    raise TraceError(
        log.path,
        f"entry {at:,} (byte {at * log.entry_bytes:,}): token_id {int(tokens[i]):,} is not a token position "
        f"(at most {TOKEN_LIMIT - 1:,}); the entry is corrupt",
    )


def check_timestamps(log: TensorLog, start: int, raw: np.ndarray) -> None:
    """Return None when no entry in `raw` (entries of `log` from index `start` on, all inside the used part)
    has a zero timestamp, else raise a :class:`TraceError` naming the first. The used part is found by a
    binary search that assumes the zeros are only the unused tail; a zero inside it is a corrupt entry,
    and would make the search's answer depend on where it probes."""
    zero = raw["timestamp_ns"] == 0
    if not zero.any():
        return
    at = start + int(np.argmax(zero))
    raise TraceError(
        log.path,
        f"entry {at:,} (byte {at * log.entry_bytes:,}): timestamp 0 inside the used part (entries up to "
        f"{log.entries:,}); the entry is corrupt",
    )


def check_counts(log: TensorLog, start: int, raw: np.ndarray) -> None:
    """Return None when every per-operation entry in `raw` (entries of `log` from index `start` on) uses at
    most its format's source records (and, in op1024, expert slots), else raise a :class:`TraceError` naming
    the first that claims more: its extra sources do not exist, and reading only the first ones would
    silently drop them. 64-byte entries have no counts."""
    if "num_sources" not in raw.dtype.names:
        return
    over = raw["num_sources"] > MAX_SOURCES
    if "num_experts" in raw.dtype.names:
        over |= raw["num_experts"] > MAX_EXPERTS
    if not over.any():
        return
    at = start + int(np.argmax(over))
    e = raw[at - start]
    experts = f", num_experts {int(e['num_experts'])}" if "num_experts" in raw.dtype.names else ""
    raise TraceError(
        log.path,
        f"entry {at:,} (byte {at * log.entry_bytes:,}): num_sources {int(e['num_sources'])}{experts}, but "
        f"the {log.format} entry holds at most {MAX_SOURCES} sources and {MAX_EXPERTS} experts; the entry is corrupt",
    )


def windows(log: TensorLog, rows: int = 1 << 20) -> Iterator[tuple[int, np.memmap]]:
    """Yield (first entry index, memmap of up to `rows` entries) over the used part. Each window is its own
    mapping, released when the caller drops it, so resident memory stays near one window however big the
    log. Each window is checked first: its timestamps (:func:`check_timestamps`), its per-operation counts
    (:func:`check_counts`) and its token ids
    (:func:`check_tokens`: the analysis sizes its per-token tables by them)."""
    for start in range(0, log.entries, rows):
        window = entries(log, start, start + rows)
        check_timestamps(log, start, window)
        check_counts(log, start, window)
        check_tokens(log, start, window)
        yield start, window
