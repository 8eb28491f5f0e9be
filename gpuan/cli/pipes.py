"""Stdout and stderr that a closed pipe cannot stop: ``gpuan sol T -o x.csv 2>&1 | head`` still writes
x.csv, and bad input still exits 2.

When the reader of stdout or stderr goes away (``| head``, ``| true``), or the stream was closed before
the start (``2>&-``), the report and the
messages are no longer read, but the files the user asked for are wanted, and the exit code still says
how the run went: the rest of that stream goes to /dev/null, the command runs to its end, its files are
put in place, and the exit is quiet (no traceback, no "Exception ignored" at exit).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator


def _gone(e: OSError) -> bool:
    """Whether `e` says the stream has no reader (a closed pipe, a closed descriptor), rather than that
    writing failed (a full disk), which stays an error."""
    return isinstance(e, BrokenPipeError) or e.errno == errno.EBADF


class _Guarded:
    """A text stream that forwards to `stream` until a write or flush finds no reader (:func:`_gone`),
    then sends everything (what is buffered too) to /dev/null."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._broken = False

    def _closed(self) -> None:
        self._broken = True
        # the file descriptor itself, so that Python's flush at exit meets /dev/null too, not the pipe
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def write(self, text: str) -> int:
        if not self._broken:
            try:
                return self._stream.write(text)
            except OSError as e:
                if not _gone(e):
                    raise
                self._closed()
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            if not _gone(e):
                raise
            self._closed()
            with contextlib.suppress(OSError, ValueError):
                self._stream.flush()  # the buffered rest, now to /dev/null

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def tolerant_output() -> Iterator[None]:
    """Run the block with ``sys.stdout`` and ``sys.stderr`` guarded against a closed pipe. Everything
    printed is flushed before the block ends."""
    originals = sys.stdout, sys.stderr
    with contextlib.ExitStack() as stack:
        # None where Python started without that descriptor (``>&- 2>&-``): /dev/null stands in, so that
        # code that asks the stream (``sys.stderr.isatty()``) runs as for any other stream
        streams = (s if s is not None else stack.enter_context(open(os.devnull, "w")) for s in originals)
        sys.stdout, sys.stderr = (_Guarded(s) for s in streams)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = originals
