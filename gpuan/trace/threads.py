"""How many threads a load uses; independent column work, and the files of a run, read side by side on them
(reads that are no longer wanted, after Ctrl-C or a failure before them, stop at their next check)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from typing import TypeVar

from gpuan.errors import UsageError

T = TypeVar("T")

#: work over tables of at least this many rows is handed to threads (see :func:`side_by_side`)
PARALLEL_ROWS = 1 << 20


class ReadStopped(Exception):
    """A read given up because its result is not wanted: Ctrl-C came, or a read before it in order failed
    (see :func:`files_side_by_side`)."""


class _Stop:
    """What the reads of one :func:`files_side_by_side` call are told: all of them stop (Ctrl-C), or those
    after the first read in order that failed."""

    def __init__(self, reads: int) -> None:
        self.lock = threading.Lock()
        self.failed = reads  # the index of the first read in order that failed so far
        self.everyone = False

    def fail(self, index: int) -> None:
        """Note that read `index` failed: the reads after it are no longer wanted."""
        with self.lock:
            self.failed = min(self.failed, index)

    def stops(self, index: int) -> bool:
        """Return whether read `index` is to stop."""
        return self.everyone or index > self.failed


#: in a thread that :func:`files_side_by_side` runs a read in: that call's stop, and the read's index
_STOP: ContextVar[tuple[_Stop, int] | None] = ContextVar("gpuan_stop", default=None)


def check_stop() -> None:
    """Raise :class:`ReadStopped` if this thread runs a read of :func:`files_side_by_side` whose result is no
    longer wanted; elsewhere a no-op. Long reads call it between blocks."""
    current = _STOP.get()
    if current is not None and current[0].stops(current[1]):
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
    reads: Sequence[Callable[[int], T]],
    threads: int | None = None,
    *,
    one_at_a_time: bool = False,
    sizes: Sequence[int] | None = None,
) -> list[T]:
    """Return each read's result, in order. Up to `threads` (None: :func:`thread_count`) reads run at once,
    each called with the number of threads it may use itself: the threads shared out among the reads running
    at once (two files at 2 threads: one each; at 3 threads, 2 and 1). With `sizes` (each read's file size),
    the largest start first and get the spare threads: a large file started last would run on alone at the
    end, on its share of the threads, the others' idle (results, errors and stops still go by the reads'
    order). With `one_at_a_time`, they run one after another in this thread, each with all the threads.
    Where reads raise, the exception of the first of them (in order) is raised here, once the reads started
    have ended; reads after a failed one are not run, and those running stop at their next
    :func:`check_stop`, as soon as it fails (the reads before it run on: one of them may fail too, and be
    the error raised). On Ctrl-C (or any other exception in this thread), every read running stops there.

    For the files of a run: a file's read is only partly parallel (its table is built by one thread), so
    two files read at once on one thread each beat two read one after the other on two threads each (a
    generated run of 4 x 64 MB at 2 threads: 0.76 s against 0.92 s, bench/run_read.py). Each read running
    holds its own buffers: at most `threads` files' worth of reading at once."""
    if sizes is not None and len(sizes) != len(reads):
        raise ValueError(f"files_side_by_side: {len(sizes)} sizes for {len(reads)} reads")
    threads = threads or thread_count()
    at_once = 1 if one_at_a_time else min(threads, len(reads))
    if at_once <= 1:
        return [read(threads) for read in reads]
    share, spare = divmod(threads, at_once)
    stop = _Stop(len(reads))

    def run(index: int, read: Callable[[int], T], given: int) -> T:
        token = _STOP.set((stop, index))
        try:
            if stop.stops(index):  # queued behind larger reads while one before it failed: not wanted
                raise ReadStopped()
            return read(given)
        except BaseException:
            stop.fail(index)
            raise
        finally:
            _STOP.reset(token)

    pool = ThreadPoolExecutor(at_once, thread_name_prefix="gpuan-files")
    try:
        # a stable sort: files of one size start in order
        starts = range(len(reads)) if sizes is None else sorted(range(len(reads)), key=lambda i: -sizes[i])
        futures: dict[int, Future[T]] = {}
        for k, i in enumerate(starts):  # the pool starts reads in the order they are submitted
            futures[i] = pool.submit(run, i, reads[i], share + (k % at_once < spare))
        return [futures[i].result() for i in range(len(reads))]
    except BaseException:
        # the reads before a failure raised here have ended well, so every read still running comes after it
        stop.everyone = True
        raise
    finally:
        # the reads not started are dropped; those running stop at their next check, and end before this returns
        pool.shutdown(wait=True, cancel_futures=True)
