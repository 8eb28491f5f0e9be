"""Writing tensor-access logs, for tests and for instrumenting Python code: a pre-sized memory-mapped file
(in tmpfs by default) that entries are appended to until it is full; entries beyond its capacity are
dropped and counted, never wrapped, so readers can rely on time order and on the zero tail.

``gpuan_tensor_log.h`` beside this module is the same writer for C/C++; both leave a
``<log>.meta.json`` sidecar on close with the format, capacity, entries written and entries dropped.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np

from gpuan.options import TENSOR_LOG_FORMATS
from gpuan.trace.tensorlog.formats import DTYPES


def default_path() -> str:
    """Return a log path in tmpfs (``/dev/shm``) when there is one, else in the temporary directory."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else os.environ.get("TMPDIR", "/tmp")
    return os.path.join(base, f"gpuan-tensors-{os.getpid()}.log")


def c_header_path() -> Path:
    """Return the path of ``gpuan_tensor_log.h``, the C/C++ version of this writer."""
    return Path(__file__).with_name("gpuan_tensor_log.h")


class LogWriter:
    """An open log: :meth:`append` entries, then :meth:`close` (or use it as a context manager)."""

    def __init__(self, path: str | os.PathLike, fmt: str, capacity: int) -> None:
        if fmt not in TENSOR_LOG_FORMATS:
            raise ValueError(f"unknown log format {fmt!r}; choose from {', '.join(TENSOR_LOG_FORMATS)}")
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.path, self.format, self.capacity = os.fspath(path), fmt, int(capacity)
        self.dtype = DTYPES[fmt]
        with open(self.path, "wb") as f:
            f.truncate(self.capacity * self.dtype.itemsize)
        self._map = np.memmap(self.path, dtype=self.dtype, mode="r+", shape=(self.capacity,))
        self.written = 0
        self.overflow = 0
        self._lock = threading.Lock()

    def new(self, n: int) -> np.ndarray:
        """Return `n` zeroed entries of this log's dtype to fill in and :meth:`append`."""
        return np.zeros(n, self.dtype)

    def append(self, batch: np.ndarray) -> int:
        """Append the entries of `batch` (a structured array of this log's dtype); return how many were stored
        (the rest, past capacity, are counted in :attr:`overflow`)."""
        if batch.dtype != self.dtype:
            raise TypeError(f"entries must have the {self.format} dtype")
        with self._lock:
            room = min(len(batch), self.capacity - self.written)
            self._map[self.written : self.written + room] = batch[:room]
            self.written += room
            self.overflow += len(batch) - room
        return room

    def close(self) -> None:
        """Flush the entries to the file and write the ``.meta.json`` sidecar."""
        if self._map is None:
            return
        self._map.flush()
        self._map = None
        meta = {
            "format": self.format,
            "entry_bytes": self.dtype.itemsize,
            "capacity": self.capacity,
            "written": self.written,
            "overflow": self.overflow,
        }
        with open(self.path + ".meta.json", "w", encoding="utf-8") as f:
            json.dump(meta, f)

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_writer(path: str | os.PathLike | None = None, fmt: str = "seed64", capacity: int = 1 << 20) -> LogWriter:
    """Create a pre-sized log of `capacity` entries of format `fmt` at `path` (default:
    :func:`default_path`) and return its :class:`LogWriter`."""
    return LogWriter(path or default_path(), fmt, capacity)
