"""How many threads a load uses, and independent column work run side by side on them."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from gpuan.errors import UsageError

T = TypeVar("T")

#: work over tables of at least this many rows is handed to threads (see :func:`side_by_side`)
PARALLEL_ROWS = 1 << 20


def thread_count() -> int:
    """Return the number of threads a load uses: GPUAN_THREADS, else the cores this process may use. Raises
    :class:`UsageError` if GPUAN_THREADS is set to anything but a whole number of at least 1."""
    env = os.environ.get("GPUAN_THREADS", "").strip()
    if not env:
        return len(os.sched_getaffinity(0))
    if not env.isdigit() or int(env) < 1:
        raise UsageError(f"GPUAN_THREADS: must be a whole number of at least 1, not {env!r}")
    return int(env)


def side_by_side(calls: Sequence[Callable[[], T]], rows: int) -> list[T]:
    """Return each call's result, in order. Where calls raise, the exception of the first of them (in
    order) is raised here; on threads, every call has run by then.

    The calls must be independent. numpy gives up the GIL for large copies, gathers and sorts, so for a
    table of `rows` rows at or above :data:`PARALLEL_ROWS` they run on :func:`thread_count` threads; a
    smaller table's run here, in order, as handing them to threads costs more than they take (5-9 ms a
    table of a few thousand rows, measured; a wash at 600k rows)."""
    threads = 1 if rows < PARALLEL_ROWS else min(thread_count(), len(calls))  # small tables: no affinity call
    if threads <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(threads, thread_name_prefix="gpuan-columns") as pool:
        return list(pool.map(lambda call: call(), calls))
