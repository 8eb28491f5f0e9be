"""How many threads a load uses; independent column work, and the files of a run, read side by side on them
(reads that are no longer wanted, after Ctrl-C or a failure before them, stop at their next check; once no
read waits to start, the threads of the reads that end go to those still running)."""

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


class _Free:
    """The threads of one :func:`files_side_by_side` call that no running read holds: a read takes its share
    as it starts and gives back all it holds as it ends (some before, :func:`keep_threads`); once no read
    waits to start, those still running may take the rest (:meth:`take`), each its part."""

    def __init__(self, total: int, reads: int) -> None:
        self.lock = threading.Lock()
        self.total = total
        self.count = total
        self.waiting = reads  # reads not started yet
        self.running = 0

    def claim(self, share: int) -> int:
        """Return the threads a read starting now is given: its share (the reads running at once share the
        threads out, so the share is free whenever a read starts)."""
        with self.lock:
            self.waiting -= 1
            self.running += 1
            given = max(1, min(share, self.count))
            self.count -= given
            return given

    def give_back(self, threads: int) -> None:
        """Take back `threads` threads of a running read."""
        with self.lock:
            self.count += threads

    def end(self, held: int) -> None:
        """Take back the `held` threads of a read that has ended."""
        with self.lock:
            self.count += held
            self.running -= 1

    def take(self, held: int, at_most: int | None = None) -> int:
        """Return how many free threads a running read holding `held` takes now (no more than `at_most`):
        none while a read waits to start (they are its share), else its part of them (the free threads over
        the reads running, rounded up: a read that asks again later takes what the others left), up to the
        call's total."""
        with self.lock:
            if self.waiting:
                return 0
            taken = min(-(-self.count // max(1, self.running)), self.total - held)  # its part, up to the total
            taken = max(0, taken if at_most is None else min(taken, at_most))
            self.count -= taken
            return taken


class _Place:
    """A read's place in a :func:`files_side_by_side` call: its index, the call's stop and free threads, and
    how many threads the read holds (those it was given, then those it took)."""

    def __init__(self, stop: _Stop, index: int, free: _Free, held: int) -> None:
        self.stop = stop
        self.index = index
        self.free = free
        self.held = held


#: in a thread that :func:`files_side_by_side` runs a read in: the read's place in that call
_PLACE: ContextVar[_Place | None] = ContextVar("gpuan_read_place", default=None)


def check_stop() -> None:
    """Raise :class:`ReadStopped` if this thread runs a read of :func:`files_side_by_side` whose result is no
    longer wanted; elsewhere a no-op. Long reads call it between blocks."""
    place = _PLACE.get()
    if place is not None and place.stop.stops(place.index):
        raise ReadStopped()


def take_spare_threads(at_most: int | None = None) -> int:
    """Return how many more threads this read may use from now on (`at_most`: no more than that), taken from
    the threads of the same :func:`files_side_by_side` call that no read holds: those of the reads that have
    ended or given some back (none while reads wait to start; this read's part of them, the reads still
    running sharing them; at most the call's threads in all); elsewhere 0. A long read asks between blocks
    and puts what it gets to work."""
    place = _PLACE.get()
    if place is None:
        return 0
    taken = place.free.take(place.held, at_most)
    place.held += taken
    return taken


def keep_threads(most: int) -> None:
    """Give back what this read holds beyond `most` threads (at least one is kept), for the reads of the same
    :func:`files_side_by_side` call still running to take: a read whose next work uses fewer (a table too
    small to build on threads) does not sit on them. Elsewhere a no-op."""
    place = _PLACE.get()
    if place is not None and place.held > max(1, most):
        place.free.give_back(place.held - max(1, most))
        place.held = max(1, most)


def threads_held(threads: int) -> int:
    """Return the threads this read holds now (given, and taken since), in a read of
    :func:`files_side_by_side`; elsewhere `threads`."""
    place = _PLACE.get()
    return threads if place is None else place.held


def most_threads(threads: int) -> int:
    """Return the most threads this read may come to hold: the threads of its :func:`files_side_by_side` call
    (what a read plans its work for, if it would use spare threads); elsewhere `threads`."""
    place = _PLACE.get()
    return threads if place is None else place.free.total


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
    end (results, errors and stops still go by the reads' order). Once no read waits to start, the threads
    of each read that ends are spare, and the reads still running take them (:func:`take_spare_threads`):
    the last reads do not run on one thread each while the others' threads idle. With `one_at_a_time`, they
    run one after another in this thread, each with all the threads. Where reads raise, the exception of
    the first of them (in order) is raised here, once the reads started have ended; reads after a failed
    one are not run, and those running stop at their next :func:`check_stop`, as soon as it fails (the
    reads before it run on: one of them may fail too, and be the error raised). On Ctrl-C (or any other
    exception in this thread), every read running stops there.

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
    stop, free = _Stop(len(reads)), _Free(threads, len(reads))

    def run(index: int, read: Callable[[int], T], its_share: int) -> T:
        place = _Place(stop, index, free, free.claim(its_share))
        token = _PLACE.set(place)
        try:
            if stop.stops(index):  # queued behind larger reads while one before it failed: not wanted
                raise ReadStopped()
            return read(place.held)
        except BaseException:
            stop.fail(index)
            raise
        finally:
            free.end(place.held)
            _PLACE.reset(token)

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
