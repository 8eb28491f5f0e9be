"""How many threads a load uses; independent column work, and the files of a run, read side by side on them."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import TypeVar

from gpuan.errors import UsageError

T = TypeVar("T")

#: work over tables of at least this many rows is handed to threads (see :func:`side_by_side`)
PARALLEL_ROWS = 1 << 20

#: the stop of the reads beside this one, in a thread that :func:`files_side_by_side` runs a read in
_STOP: ContextVar[threading.Event | None] = ContextVar("gpuan_stop", default=None)


class ReadStopped(Exception):
    """A read given up because the reads beside it were stopped: Ctrl-C, or a failure that is reported
    in its place (see :func:`files_side_by_side`)."""


def check_stop() -> None:
    """Raise :class:`ReadStopped` if this thread runs a read of :func:`files_side_by_side` that was asked to
    stop; elsewhere a no-op. Long reads call it between blocks."""
    stop = _STOP.get()
    if stop is not None and stop.is_set():
        raise ReadStopped()


def thread_count() -> int:
    """Return the number of threads a load uses: GPUAN_THREADS, else the cores this process may use. Raises
    :class:`UsageError` if GPUAN_THREADS is set to anything but a whole number of at least 1."""
    env = os.environ.get("GPUAN_THREADS", "").strip()
    if not env:
        return len(os.sched_getaffinity(0))
    if not env.isdigit() or int(env) < 1:
        raise UsageError(f"GPUAN_THREADS: must be a whole number of at least 1, not {env!r}")
    return int(env)


def side_by_side(calls: Sequence[Callable[[], T]], rows: int, threads: int | None = None) -> list[T]:
    """Return each call's result, in order. Where calls raise, the exception of the first of them (in
    order) is raised here; on threads, every call has run by then.

    The calls must be independent. numpy gives up the GIL for large copies, gathers and sorts, so for a
    table of `rows` rows at or above :data:`PARALLEL_ROWS` they run on `threads` threads (None:
    :func:`thread_count`); a smaller table's run here, in order, as handing them to threads costs more
    than they take (5-9 ms a table of a few thousand rows, measured; a wash at 600k rows)."""
    threads = 1 if rows < PARALLEL_ROWS else min(threads or thread_count(), len(calls))  # small: no affinity call
    if threads <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(threads, thread_name_prefix="gpuan-columns") as pool:
        return list(pool.map(lambda call: call(), calls))


def files_side_by_side(
    reads: Sequence[Callable[[int], T]], threads: int | None = None, *, one_at_a_time: bool = False
) -> list[T]:
    """Return each read's result, in order. Up to `threads` (None: :func:`thread_count`) reads run at once,
    each called with the number of threads it may use itself: the threads shared out among the reads running
    at once (two files at 2 threads: one each; at 3 threads, 2 and 1). With `one_at_a_time`, they run one
    after another in this thread, each with all the threads. Where reads raise, the exception of the first
    of them (in order) is raised here, once the reads started have ended; reads not started are not run,
    and those running that come after it stop at their next :func:`check_stop`. On Ctrl-C (or any other
    exception in this thread), every read running stops there.

    For the files of a run: a file's read is only partly parallel (its table is built by one thread), so
    two files read at once on one thread each beat two read one after the other on two threads each (a
    generated run of 4 x 64 MB at 2 threads: 0.76 s against 0.92 s, bench/run_read.py). Each read running
    holds its own buffers: at most `threads` files' worth of reading at once."""
    threads = threads or thread_count()
    at_once = 1 if one_at_a_time else min(threads, len(reads))
    if at_once <= 1:
        return [read(threads) for read in reads]
    share, spare = divmod(threads, at_once)
    stop = threading.Event()

    def run(read: Callable[[int], T], given: int) -> T:
        token = _STOP.set(stop)
        try:
            return read(given)
        finally:
            _STOP.reset(token)

    pool = ThreadPoolExecutor(at_once, thread_name_prefix="gpuan-files")
    try:
        futures = [pool.submit(run, read, share + (i % at_once < spare)) for i, read in enumerate(reads)]
        # the reads before a failure have ended well by the time it is raised here, so what is still running
        # comes after it in order: its result and its errors are not wanted
        return [f.result() for f in futures]
    except BaseException:
        stop.set()
        raise
    finally:
        # the reads not started are dropped; those running stop at their next check, and end before this returns
        pool.shutdown(wait=True, cancel_futures=True)
