"""Kineto / Chrome-trace JSON: the compiled scanner, the block reader and the table builder."""

from __future__ import annotations

from collections.abc import Callable

from gpuan.trace.kineto.events import build_trace
from gpuan.trace.kineto.reader import scan_file
from gpuan.trace.memory import huge_pages, lean_memory
from gpuan.trace.table import Trace
from gpuan.trace.threads import (
    PARALLEL_ROWS,
    check_stop,
    keep_threads,
    take_spare_threads,
    thread_count,
    threads_held,
)


def scanner_is_compiled() -> bool:
    """Return whether numba's on-disk cache already holds the compiled scanner (else the first read
    compiles it, which takes tens of seconds). Best effort: True when it cannot tell."""
    from gpuan.jit_cache import compiled_on_disk
    from gpuan.trace.kineto import scanner

    return compiled_on_disk(scanner.scan)


def read_kineto(
    path: str,
    *,
    rank: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    gpu: bool = False,
    threads: int | None = None,
) -> Trace:
    """Return the Trace of one Kineto / Chrome-trace JSON file (plain or gzip), read on `threads` threads
    (None: :func:`gpuan.trace.threads.thread_count`). With `gpu`, the JSON is parsed on the GPU (CuPy and
    numba-CUDA; the same table), where it is a trace the GPU path takes whole. A read that
    :func:`gpuan.trace.threads.files_side_by_side` runs beside others raises ReadStopped, between blocks or
    before its table build, once its result is no longer wanted; it takes the threads of the reads beside it
    that have ended (:func:`gpuan.trace.threads.take_spare_threads`) between blocks and for a table built on
    threads, and gives back all but one for a table built by one thread."""
    with lean_memory():
        raw = None
        if gpu:
            import cupy

            from gpuan.trace.kineto.gpu.reader import scan_file_gpu

            raw = scan_file_gpu(str(path), cupy)
        if raw is None:
            raw = scan_file(path, threads=threads, progress=progress)
        check_stop()
        # beside other reads: a table built on threads takes those of the reads that have ended; one built by
        # this thread alone gives back the threads it took for its scan, to the reads still scanning
        if raw.length >= PARALLEL_ROWS:
            take_spare_threads()
        else:
            keep_threads(1)
        threads = threads_held(threads or thread_count())
        # the table's columns are written whole: on the 1 GB gen trace 136k -> 58k page faults, the build's
        # system time 0.47-0.54 -> 0.35-0.38 s, its peak RSS the same
        with huge_pages():
            return build_trace(raw, source=str(path), rank=rank, threads=threads)
