"""A Kineto file's own rank, found without reading its events: cheap enough that every replay process can
learn the ranks of a run before any of them reads one.

The profiler writes ``distributedInfo`` before the events array, so the file's first kilobytes answer.
A file that other tools rewrote may hold it after the events; then the array is skipped (its brackets
counted, no value parsed) to read what follows it, as the full reader does.
"""

from __future__ import annotations

import os

import numpy as np

from gpuan.errors import TraceError
from gpuan.trace.kineto import scanner as sc
from gpuan.trace.kineto.events import distributed_rank
from gpuan.trace.kineto.reader import SLACK, Head, fill, parse_metadata, read_head
from gpuan.trace.source import ByteSource, open_bytes

HEAD_BYTES = 64 << 10  # Kineto's metadata before the events is a few kB
SKIP_BYTES = 4 << 20


def file_rank(path: str | os.PathLike) -> int | None:
    """Return the rank a Kineto file's own metadata gives it (``distributedInfo.rank``, before or after
    its events), or None: it has none, or its metadata cannot be read (reading the file then says why)."""
    path = str(path)
    try:
        with open_bytes(path, ahead=False) as src:
            head = read_head(src, path, HEAD_BYTES)
            if head.text is None:
                return None  # a bare array of events has no metadata
            before = parse_metadata(path, head.text, b"}")
            if "distributedInfo" in before:
                return distributed_rank(before)
            return distributed_rank(parse_metadata(path, head.text, _after_events(src, head)))
    except TraceError:
        return None


def _after_events(src: ByteSource, head: Head) -> bytes:
    """Return the file's bytes after its events array, reading on from `head` (raises TraceError when the
    file ends inside the array)."""
    buf, pos, have, eof = head.buf, head.pos, head.have, head.eof
    state = np.array([1, 0, 0], np.int64)  # inside the array, not in a string
    while True:
        end = sc.array_end(buf, pos, have, state)
        if end >= 0:
            return buf[end:have].tobytes() + (b"" if eof else src.read_rest())
        if eof:
            raise TraceError(src.path, "trace ends in the middle of the events (truncated file)")
        if buf.size < SKIP_BYTES:  # the head's small buffer: fewer, larger reads from here on
            buf = np.empty(SKIP_BYTES + SLACK, np.uint8)
        have, eof = fill(src, buf, 0)
        pos = 0
