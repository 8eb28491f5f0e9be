"""A trace file's bytes on the device, read once: gzip decompressed on the CPU (python-isal, in a thread of
its own) into pinned host buffers, each copied to the device while the next one fills.

nvCOMP is not used: its Python package (nvidia-nvcomp) is not a gpuan dependency and was not measured
against isal on a GPU; see docs/ingest.md."""

from __future__ import annotations

import numpy as np

from gpuan.trace.source import open_bytes

PAD = 64  # the device buffer ends in at least this many spaces, a multiple of 64 bytes in all
STAGE_BYTES = 64 << 20
_SPACE = 0x20


def padded_size(n: int) -> int:
    """Return the buffer size that holds n bytes and the padding: a multiple of 64, PAD bytes past n at least."""
    return -(-(n + PAD) // 64) * 64


def read_to_host(path: str) -> tuple[np.ndarray, int]:
    """Return (buffer, n): the file's n bytes (decompressed) in a numpy buffer padded with spaces."""
    with open_bytes(path, ahead=False) as src:  # inflated straight into the buffer: nothing to overlap here
        buf = np.empty(padded_size(src.expected_size()), np.uint8)
        n = 0
        while True:
            if n + PAD >= buf.size:
                buf = np.concatenate([buf, np.empty(buf.size, np.uint8)])
            got = src.readinto(memoryview(buf)[n : buf.size - PAD])
            if not got:
                break
            n += got
    buf = buf[: padded_size(n)]
    buf[n:] = _SPACE
    return buf, n


def read_to_device(path: str, xp) -> tuple:
    """Return (buffer, n): the file's n bytes (decompressed) in an xp array padded with spaces. With
    numpy (the simulator) this is :func:`read_to_host`; with CuPy the bytes go through pinned memory."""
    if xp is np:
        return read_to_host(path)
    import cupy

    stages = [np.frombuffer(cupy.cuda.alloc_pinned_memory(STAGE_BYTES), np.uint8, STAGE_BYTES) for _ in range(2)]
    copied = [None, None]  # the event after each stage's last copy: the stage is free again once it is done
    stream = cupy.cuda.Stream(non_blocking=True)
    with open_bytes(path) as src:
        # expected_size is an upper estimate (30x a large gzip): reserving it whole on the device could fail
        # where the real size fits, so at most half the free memory is taken up front; the buffer grows
        free, _ = cupy.cuda.runtime.memGetInfo()
        dev = cupy.empty(padded_size(min(src.expected_size(), free // 2)), np.uint8)
        n, k = 0, 0
        while True:
            if copied[k] is not None:
                copied[k].synchronize()
            got = _fill(src, stages[k])
            if not got:
                break
            if n + got + PAD > dev.size:
                bigger = cupy.empty(padded_size((n + got) * 3 // 2), np.uint8)
                stream.synchronize()
                bigger[:n] = dev[:n]
                dev = bigger
            dev[n : n + got].set(stages[k][:got], stream=stream)
            copied[k] = stream.record()
            n += got
            k ^= 1
        stream.synchronize()
    dev = dev[: padded_size(n)]
    dev[n:] = _SPACE
    return dev, n


def _fill(src, stage: np.ndarray) -> int:
    """Read into the stage until it is full or the file ends; returns the bytes read."""
    mv = memoryview(stage)
    have = 0
    while have < stage.size:
        got = src.readinto(mv[have:])
        if not got:
            break
        have += got
    return have
