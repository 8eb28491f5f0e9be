"""Memory habits for reading GB-sized traces into columns.

Ingest preallocates columns for an upper bound of rows and relies on untouched pages costing nothing;
numpy's huge-page advice (2 MB pages) would defeat that, so it is switched off for the duration of a
read. glibc keeps freed medium-sized buffers in its heap; the read asks it to map buffers of 256 KB and
more instead, a process-wide setting that stays (glibc cannot be put back to its adaptive default).
numpy's advice is process-wide too, and files of a run are read side by side: while any thread builds a
table it is on, else while any thread reads it is off, else as it was.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

try:
    from numpy._core.multiarray import _get_madvise_hugepage, _set_madvise_hugepage
except ImportError:  # pragma: no cover - older numpy
    _get_madvise_hugepage = _set_madvise_hugepage = None

_M_MMAP_THRESHOLD = -3
_libc = None
try:
    _name = ctypes.util.find_library("c")
    if _name:
        _libc = ctypes.CDLL(_name)
        _libc.mallopt  # noqa: B018 - glibc only; other C libraries lack it
        _libc.malloc_trim  # noqa: B018
except (OSError, AttributeError):  # pragma: no cover - not glibc
    _libc = None


@contextmanager
def lean_memory() -> Iterator[None]:
    """Within the block: numpy allocations use small pages, buffers of 256 KB and more are mapped (and
    so returned to the system when freed); afterwards free heap memory is handed back."""
    if _libc is not None:
        _libc.mallopt(_M_MMAP_THRESHOLD, 256 << 10)
    try:
        with _numpy_huge_pages(False):
            yield
    finally:
        if _libc is not None:
            _libc.malloc_trim(0)


@contextmanager
def prompt_collection() -> Iterator[None]:
    """Within the block, Python's garbage collector runs as often as CPython 3.10-3.13 runs it by default
    (700, 10, 10; the command line makes it rarer, for its start: :func:`gpuan.cli.run`): a memory ceiling
    counts on what falls out of use being freed, and a reference cycle holding a part's buffers is freed only
    when it is collected."""
    import gc

    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextmanager
def huge_pages() -> Iterator[None]:
    """Within the block (inside :func:`lean_memory`, which turns it off), numpy asks the kernel to back
    arrays of 4 MB and more with 2 MB pages, where transparent huge pages are on for such requests: a page
    fault for every 2 MB instead of every 4 KB, for arrays written whole, as the event table's columns are."""
    with _numpy_huge_pages(True):
        yield


class SharedSetting:
    """A process-wide setting that blocks in several threads ask for at once (a run's files are read side
    by side): while any block is open, the setting is the value of highest priority among those the open
    blocks asked for; once none is, the value from before the first of them."""

    def __init__(self, get: Callable[[], Any], put: Callable[[Any], None]) -> None:
        self._get, self._put = get, put
        self._lock = threading.Lock()
        self._open: list[tuple[int, Any]] = []  # (priority, value) of each block open
        self._before: Any = None

    @contextmanager
    def asked(self, value: Any, priority: int = 0) -> Iterator[None]:
        """Within the block, the setting is `value` unless a block open in another thread asked for a value
        of higher priority."""
        with self._lock:
            if not self._open:
                self._before = self._get()
            self._open.append((priority, value))
            self._put(max(self._open, key=lambda asked: asked[0])[1])
        try:
            yield
        finally:
            with self._lock:
                self._open.remove((priority, value))
                self._put(max(self._open, key=lambda asked: asked[0])[1] if self._open else self._before)


#: numpy's advice; where threads want both, on wins: a table built beside a scan keeps its 2 MB pages, and the
#: scan's buffers allocated meanwhile (sized for more rows than it writes) cost at most one 2 MB page beyond
#: what is written, at the end each is written to, as their pages are touched in order
_NUMPY_ADVICE = SharedSetting(_get_madvise_hugepage, _set_madvise_hugepage) if _set_madvise_hugepage else None


@contextmanager
def _numpy_huge_pages(on: bool) -> Iterator[None]:
    """Within the block, numpy's huge-page advice for its large allocations is `on` (on wins over another
    thread's off); once no block is open in any thread, as it was before."""
    if _NUMPY_ADVICE is None:
        yield
        return
    with _NUMPY_ADVICE.asked(on, priority=int(on)):
        yield


_MADV_WILLNEED = 3
_MADV_DONTNEED = 4
PAGE = mmap.PAGESIZE  #: the memory page size, the unit that memory is given back in


def mapped_empty(shape: int | tuple[int, ...], dtype) -> np.ndarray:
    """Return an uninitialised array backed by its own anonymous memory map.

    Its pages cost memory only once written, and :func:`release` hands any part of it back at once —
    unlike heap memory, whose freed pieces glibc may keep."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = int(np.prod(shape))
    # private: released pages are really freed (a shared mapping would keep them in shmem)
    mm = mmap.mmap(-1, max(count * np.dtype(dtype).itemsize, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(mm, dtype, count=count).reshape(shape)


def release(a: np.ndarray) -> None:
    """Give back the memory pages that lie wholly inside the contiguous array `a`, a view into an
    array from :func:`mapped_empty` (reading them afterwards gives zeros) or into a private map of a file
    (reading them afterwards reads the file again). A no-op where it cannot."""
    if _libc is None or a.nbytes < PAGE or not a.flags.c_contiguous:
        return
    start = (a.ctypes.data + PAGE - 1) // PAGE * PAGE
    end = (a.ctypes.data + a.nbytes) // PAGE * PAGE
    if end > start:
        _libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_DONTNEED)


def will_need(a: np.ndarray) -> None:
    """Ask the kernel to start reading the file pages under `a`, a view into a map of a file, so that a
    scan reaching them later does not wait on the disk page by page. A no-op where it cannot."""
    if _libc is None or a.nbytes == 0:
        return
    start = a.ctypes.data // PAGE * PAGE
    _libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(a.ctypes.data + a.nbytes - start), _MADV_WILLNEED)
