"""Kineto / Chrome-trace JSON: the compiled scanner, the block reader and the table builder."""

from __future__ import annotations

from collections.abc import Callable

from gpuan.trace.kineto.events import build_trace
from gpuan.trace.kineto.reader import scan_file
from gpuan.trace.memory import lean_memory
from gpuan.trace.table import Trace


def scanner_is_compiled() -> bool:
    """Return whether numba's on-disk cache already holds the compiled scanner (else the first read
    compiles it, which takes tens of seconds). Best effort: True when it cannot tell."""
    from gpuan.jit_cache import compiled_on_disk
    from gpuan.trace.kineto import scanner

    return compiled_on_disk(scanner.scan)


def read_kineto(path: str, *, rank: int | None = None, progress: Callable[[int, int], None] | None = None) -> Trace:
    """Return the Trace of one Kineto / Chrome-trace JSON file (plain or gzip)."""
    with lean_memory():
        return build_trace(scan_file(path, progress=progress), source=str(path), rank=rank)
