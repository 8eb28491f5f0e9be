"""The byte source under every trace reader: gzip inflated ahead of the reads in a thread of its own."""

from __future__ import annotations

import gzip
import resource
import threading

import numpy as np
import pytest
from conftest import DATA, kineto_files

from gpuan.errors import TraceError
from gpuan.trace import memory, source
from gpuan.trace.memory import lean_memory
from gpuan.trace.source import open_bytes


def _read_all(path, sizes: list[int], ahead: bool = True) -> tuple[bytes, threading.Thread | None]:
    """Return the bytes open_bytes gives for `path`, read in pieces of the given sizes in turn, and the
    thread that inflated them (None without `ahead`: the reads inflate them)."""
    out = []
    with open_bytes(path, ahead=ahead) as src:
        thread = src._stream._thread if ahead else None
        k = 0
        while got := src.readinto(memoryview(buf := bytearray(sizes[k % len(sizes)]))):
            out.append(bytes(buf[:got]))
            k += 1
    return b"".join(out), thread


@pytest.mark.parametrize("ahead", [True, False], ids=["inflated ahead", "inflated by the reads"])
@pytest.mark.parametrize("sizes", [[1 << 20], [1, 7, 65_536, 300_001]], ids=["1 MB reads", "odd reads"])
def test_gzip_read_ahead_gives_the_bytes_gzip_gives(tmp_path, monkeypatch, sizes, ahead):
    """A stream of several gzip members, longer than the pieces queued ahead, read in pieces of any size
    that end inside the inflated pieces, gives the bytes Python's gzip gives; no inflate thread is left.
    Inflated by the reads themselves (isal's raw reader, as the Kineto reader reads), the same."""
    monkeypatch.setattr(source, "INFLATE_BLOCK", 4096)
    monkeypatch.setattr(source, "INFLATE_AHEAD", 4096 * 3)
    rng = np.random.default_rng(3)
    members = [rng.integers(0, 40, int(n), dtype=np.uint8).tobytes() for n in (200_000, 0, 1, 333_333)]
    path = tmp_path / "members.json.gz"
    path.write_bytes(b"".join(gzip.compress(m, 6) for m in members))
    data, thread = _read_all(path, sizes, ahead)
    assert data == gzip.decompress(path.read_bytes())
    assert thread is None or not thread.is_alive()


def test_real_gzip_traces_read_ahead_as_gzip_gives_them(data_dir):
    """Every real .json.gz gives the bytes Python's gzip gives."""
    paths = [data_dir / "kineto" / name for name in kineto_files()]
    if not paths:
        pytest.skip(f"no real Kineto traces under {DATA}")
    for path in paths:
        assert _read_all(path, [3 << 20])[0] == gzip.decompress(path.read_bytes()), path.name


@pytest.mark.parametrize("ahead", [True, False], ids=["inflated ahead", "inflated by the reads"])
@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_gzip_raises_at_the_read_that_reaches_it(tmp_path, monkeypatch, damage, ahead):
    """What inflating raises reaches the reader as a TraceError naming the file, after the bytes before it,
    and again at every read after it (never an end of file); the inflate thread ends. Inflated by the reads
    themselves, the same."""
    monkeypatch.setattr(source, "INFLATE_BLOCK", 4096)
    data = np.random.default_rng(5).integers(0, 30, 400_000, dtype=np.uint8).tobytes()
    packed = bytearray(gzip.compress(data, 6))
    if damage == "truncated":
        packed = packed[: len(packed) // 2]
    else:
        packed[len(packed) // 2 : len(packed) // 2 + 64] = bytes(64)
    path = tmp_path / "damaged.json.gz"
    path.write_bytes(bytes(packed))
    got = 0
    buf = memoryview(bytearray(9_999))  # not a divisor of the length: the read that meets the end is a short one
    with open_bytes(path, ahead=ahead) as src:
        thread = src._stream._thread if ahead else None
        with pytest.raises(TraceError, match="gzip") as err:
            while n := src.readinto(buf):
                got += n
        with pytest.raises(TraceError, match="gzip"):
            src.readinto(buf)
    assert str(path) in str(err.value)
    # a corrupt middle can inflate to the full length, found bad only by the CRC at the end: the read that
    # meets the end raises, and what it inflated is not given
    assert 0 < got < len(data)
    assert thread is None or not thread.is_alive()


def test_a_stream_closed_early_stops_its_inflate_thread(tmp_path):
    """Closing the stream after one small read, with the thread inflating ahead, ends the thread."""
    path = tmp_path / "big.json.gz"
    path.write_bytes(gzip.compress(bytes(64 << 20), 1))
    with open_bytes(path) as src:
        assert src.readinto(memoryview(bytearray(100))) == 100
        stream, thread = src._stream, src._stream._thread
        assert thread.is_alive()
    assert not thread.is_alive()
    with pytest.raises(ValueError, match="closed"):
        stream.readinto(memoryview(bytearray(100)))


def test_inflating_under_lean_memory_reuses_its_pieces(tmp_path):
    """The inflated pieces stay under the size lean_memory maps afresh: reading 256 MB of gzip takes a few
    hundred page faults, not one per page of the data (65k)."""
    if memory._libc is None:
        pytest.skip("not glibc: lean_memory cannot set the size malloc maps afresh")
    path = tmp_path / "zeros.json.gz"
    path.write_bytes(gzip.compress(bytes(256 << 20), 1))
    buf = memoryview(bytearray(16 << 20))
    with lean_memory(), open_bytes(path) as src:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        while src.readinto(buf):
            pass
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults < 5_000, faults
