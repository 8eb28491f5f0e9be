"""Kineto / Chrome-trace JSON: the compiled scanner, the block reader and the table builder."""

from __future__ import annotations

from collections.abc import Callable

from gpuan.trace.kineto.events import build_trace
from gpuan.trace.kineto.reader import scan_file
from gpuan.trace.memory import lean_memory
from gpuan.trace.table import Trace


def read_kineto(path: str, *, rank: int | None = None, progress: Callable[[int, int], None] | None = None) -> Trace:
    """Return the Trace of one Kineto / Chrome-trace JSON file (plain or gzip)."""
    with lean_memory():
        return build_trace(scan_file(path, progress=progress), source=str(path), rank=rank)
