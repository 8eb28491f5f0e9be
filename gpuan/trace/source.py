"""Open a trace file as a stream of bytes, decompressing gzip on the fly (python-isal when installed)."""

from __future__ import annotations

import gzip
import io
import mmap
import os
import queue
import stat
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from gpuan.errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"
# The inflate thread hands over each piece as a new bytes object. Under a read's lean_memory (buffers of
# 256 KB and more mapped, and unmapped when freed) isal's threaded reader's 4 MB pieces were fresh pages every
# time: 271k page faults and 1.2 s of system time for the 1 GB gen trace's .json.gz, its inflate 1.6 s
# instead of 0.8, faulting beside the scanning threads. Pieces under that size are reused heap memory
# (0.3-0.7k faults); and that reader keeps two pieces ahead, too few of them to inflate while a block is
# scanned, so the pieces queue here, INFLATE_AHEAD bytes of them.
INFLATE_BLOCK = 128 << 10
INFLATE_AHEAD = 16 << 20

try:  # python-isal decompresses several times faster than zlib
    from isal import igzip as _igzip
    from isal.isal_zlib import error as _isal_error

    _GZIP_ERRORS: tuple[type[Exception], ...] = (_isal_error,)
except ImportError:  # pragma: no cover - isal is a dependency, this is for stripped installs
    _igzip = None
    _GZIP_ERRORS = ()
try:  # the raw reader under igzip's buffered file (private, but since isal 1.4): no copy through that buffer
    from isal.isal_zlib import _GzipReader
except ImportError:  # pragma: no cover - a later isal without it: its buffered file, one copy more
    _GzipReader = None


class ByteSource:
    """Bytes of a (possibly compressed) file, with the bookkeeping the scanner needs for messages and
    progress: how many bytes came before the current buffer, and how far into the file on disk we are."""

    def __init__(self, path: str, raw: io.BufferedReader, stream: io.RawIOBase | io.BufferedIOBase):
        self.path = path
        self._raw = raw
        self._stream = stream
        self.total = os.fstat(raw.fileno()).st_size
        self._mapped_to: int | None = None  # for a mapped file: how far into it the reader is

    def mapped(self, past: int = 0) -> np.ndarray | None:
        """Return the whole file as a byte array over a private memory map where its bytes are the trace's
        own (not compressed) and it can be mapped (a regular file, not a pipe), else None. The array runs on
        `past` bytes past the file's end (zeros) where the map's last page holds them, for reads past the
        data that must not leave the map; it then has ``total + past`` bytes.

        Reading from the map spares the copy of every byte into a read buffer, a copy that costs most
        where other threads are scanning beside it. The array is writable only in type (numba compiles
        apart for read-only arrays); nothing writes to it, so no page is ever copied."""
        if self._stream is not self._raw or self.total == 0:
            return None
        try:
            view = mmap.mmap(self._raw.fileno(), 0, access=mmap.ACCESS_COPY)
        except (OSError, ValueError):
            return None
        whole = np.frombuffer(view, np.uint8)
        self.total = whole.size  # the bytes the map holds (the file may have changed since it was opened)
        if past and (-self.total) % mmap.PAGESIZE >= past:
            # a map covers whole pages: the last one's bytes past the file's end are there, and zero
            whole = np.lib.stride_tricks.as_strided(whole, (self.total + past,), writeable=True)
        return whole

    def map_at(self, upto: int) -> None:
        """Note that the reader now reads from the memory map and holds the file's bytes up to offset `upto`
        (for :meth:`consumed`)."""
        self._mapped_to = upto

    def expected_size(self) -> int:
        """Return an upper estimate of the uncompressed size (exact for plain files)."""
        if self._stream is self._raw:
            return self.total
        # gzip keeps the size mod 2**32 in its last 4 bytes; JSON compresses at most ~30x
        with open(self.path, "rb") as f:
            f.seek(max(0, self.total - 4))
            isize = int.from_bytes(f.read(4), "little")
        while isize < self.total:
            isize += 1 << 32
        return max(isize, self.total * 30) if self.total > (1 << 27) else isize

    def readinto(self, mv: memoryview) -> int:
        """Read into mv; returns the number of bytes read, 0 at the end."""
        try:
            return self._stream.readinto(mv) or 0
        except EOFError:
            raise TraceError(self.path, "truncated gzip stream (file ends before the gzip end marker)") from None
        except (OSError, zlib.error, ValueError, *_GZIP_ERRORS) as e:
            raise TraceError(self.path, f"unreadable gzip data ({e})") from None

    def read_rest(self) -> bytes:
        """Return every remaining byte."""
        chunks = []
        buf = bytearray(1 << 20)
        mv = memoryview(buf)
        while n := self.readinto(mv):
            chunks.append(bytes(mv[:n]))
        return b"".join(chunks)

    def consumed(self) -> int:
        """Return how many bytes of the file on disk have been read."""
        if self._mapped_to is not None:
            return self._mapped_to
        try:
            return self._raw.tell()
        except (OSError, ValueError):
            return self.total


class InflateAhead(io.RawIOBase):
    """A gzip stream inflated in a thread of its own, in pieces of INFLATE_BLOCK bytes, up to INFLATE_AHEAD
    bytes ahead of the reads (python-isal gives up the GIL while it inflates). What inflating raises (a
    truncated or corrupt stream) is raised by the read that reaches it and by every read after it."""

    def __init__(self, gz: io.BufferedIOBase) -> None:
        self._gz = gz
        self._pieces: queue.Queue[bytes | BaseException] = queue.Queue(INFLATE_AHEAD // INFLATE_BLOCK)
        self._piece = memoryview(b"")
        self._at = 0
        self._ended = False
        self._error: BaseException | None = None
        self._stop = threading.Event()
        # the thread holds the stream, not this object: one never closed is still collected (and closed)
        self._thread = threading.Thread(
            target=_inflate, args=(gz, self._pieces, self._stop), name="gpuan-inflate", daemon=True
        )
        self._thread.start()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        """Fill b with the next inflated bytes; returns how many (fewer only at the end of the stream)."""
        if self.closed:
            raise ValueError("read from a closed gzip stream")
        view = memoryview(b).cast("B")
        got = 0
        while got < len(view) and not self._ended:
            if self._at == len(self._piece):
                item = self._pieces.get()
                if isinstance(item, BaseException):
                    self._error, self._ended = item, True
                    break
                self._piece, self._at, self._ended = memoryview(item), 0, not item
                continue
            n = min(len(view) - got, len(self._piece) - self._at)
            view[got : got + n] = self._piece[self._at : self._at + n]
            got += n
            self._at += n
        if self._error is not None and got == 0:
            raise self._error
        return got

    def close(self) -> None:
        """Stop the inflate thread (waiting for the piece it is inflating) and close the gzip stream."""
        if not self.closed:
            self._stop.set()
            while self._thread.is_alive():
                try:
                    self._pieces.get(timeout=0.05)  # room for a put it may be waiting on
                except queue.Empty:
                    pass
            self._gz.close()
        super().close()


def _inflate(gz: io.BufferedIOBase, pieces: queue.Queue, stop: threading.Event) -> None:
    """Put gz's inflated bytes into `pieces`, INFLATE_BLOCK at a time, then b"" (or what inflating raised),
    until the stream ends or `stop` is set."""

    def put(item: bytes | BaseException) -> None:
        while not stop.is_set():
            try:
                pieces.put(item, timeout=0.05)
                return
            except queue.Full:
                pass

    try:
        while not stop.is_set():
            piece = gz.read(INFLATE_BLOCK)
            put(piece)
            if not piece:
                return
    except BaseException as e:  # raised by the read that reaches it
        put(e)


def open_file(path: str | os.PathLike) -> io.BufferedReader:
    """Return the file opened for binary reading; a missing file, a directory, a pipe or a device (which
    cannot be read twice from the start, as a trace is: its format first, then its contents) or any other
    failure to open raises TraceError naming the file."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a trace file") from None
    except OSError as e:
        raise TraceError(path, f"cannot open ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
        f.close()
        raise TraceError(path, "not a regular file (a pipe or a device?): write the trace to a file first")
    return f


@contextmanager
def open_bytes(path: str | os.PathLike, *, ahead: bool = True) -> Iterator[ByteSource]:
    """Open path for streaming reads, decompressing gzip: with `ahead`, blocks of INFLATE_BLOCK bytes in a
    thread of its own (for a reader that works on each piece while the next is inflated, as the GPU upload
    copies them to the device); without, only what is read, straight into the buffer given (for a look at
    the start, where starting that thread and its first block cost milliseconds, for a read into one
    buffer, and for a reader that reads ahead in a thread of its own, as the Kineto reader). Raises
    TraceError if it cannot be opened."""
    path = str(path)
    raw = open_file(path)
    try:
        magic = raw.read(2)
        raw.seek(0)
        if magic == GZIP_MAGIC:
            if _igzip is None:
                gz = gzip.GzipFile(fileobj=raw, mode="rb")
            elif ahead or _GzipReader is None:
                gz = _igzip.open(raw, "rb")
            else:  # isal's reader under its buffered file, which inflates straight into the buffer given
                gz = _GzipReader(raw, _igzip.READ_BUFFER_SIZE)
            stream = InflateAhead(gz) if ahead else gz
        else:
            stream = raw
        try:
            yield ByteSource(path, raw, stream)
        finally:
            if stream is not raw:
                stream.close()
    finally:
        raw.close()
