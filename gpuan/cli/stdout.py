"""Stdout that a closed pipe cannot stop: ``gpuan sol T -o x.csv | head`` still writes x.csv.

When the reader of stdout goes away (``| head``, ``| true``), the report is no longer wanted, but the
files the user asked for are: the rest of the report goes to /dev/null, the command runs to its end
and its files are put in place, and the exit is quiet (no traceback, no "Exception ignored" at exit).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


class _Guarded:
    """A text stream that forwards to `stream` until a write or flush meets a closed pipe, then sends
    everything (what is buffered too) to /dev/null."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.broken = False

    def _closed(self) -> None:
        self.broken = True
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._closed()
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed()
            with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                self._stream.flush()  # the buffered rest, now to /dev/null

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def tolerant_stdout() -> Iterator[_Guarded]:
    """Run the block with ``sys.stdout`` guarded against a closed pipe; yields the guard (its ``broken``
    says whether the reader went away). Everything printed is flushed before the block ends."""
    original = sys.stdout
    guard = _Guarded(original)
    sys.stdout = guard
    try:
        yield guard
    finally:
        guard.flush()
        sys.stdout = original
