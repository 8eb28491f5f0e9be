"""String ids on the GPU: the spans of equal bytes made one id, numbered as the CPU reader numbers them.

Spans are sorted by (hash, length, offset); each run of equal (hash, length) is checked byte for byte
against its first span (``_same_bytes_kernel``, the scanner's own ``_same_bytes`` compiled for CUDA). A
span that differs (a hash collision) is not merged: the spans that differ are grouped again among
themselves, until every span equals its group's first. Each distinct string is then known by its first
occurrence in the file, and ids follow that order, which is the order the CPU reader interns in. The
array code runs on numpy or CuPy (``xp``); the kernel's twin is :func:`same_bytes_numpy`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpuan.trace.kineto.gpu.scanner_cuda import device_functions

THREADS = 128
_same_bytes = device_functions()["_same_bytes"]


@cuda.jit
def _same_bytes_kernel(b64, offsets, lengths, firsts, same):
    first = cuda.grid(1)
    for i in range(first, offsets.shape[0], cuda.gridsize(1)):
        same[i] = _same_bytes(b64, offsets[i], b64, firsts[i], lengths[i])


def same_bytes(xp, buf, offsets, lengths, firsts, *, threads: int = THREADS, blocks: int | None = None):
    """Return a bool per span: buf[offsets[i]:][:lengths[i]] equals buf[firsts[i]:][:lengths[i]]."""
    same = xp.zeros(offsets.size, np.bool_)
    if offsets.size:
        blocks = blocks or -(-offsets.size // threads)
        _same_bytes_kernel[blocks, threads](buf.view(np.uint64), offsets, lengths, firsts, same)
    return same


def same_bytes_numpy(buf: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, firsts: np.ndarray) -> np.ndarray:
    """The CPU twin of :func:`same_bytes`."""
    return np.array(
        [buf[o : o + n].tobytes() == buf[f : f + n].tobytes() for o, n, f in zip(offsets, lengths, firsts)], np.bool_
    )


def first_occurrences(xp, buf, hashes, offsets, lengths, **launch):
    """Return, for each span, the offset of the first span with the same bytes (hashes: their 64-bit
    hashes; equal hashes are verified, never trusted)."""
    first = xp.empty(offsets.size, np.int64)
    todo = xp.arange(offsets.size)
    while todo.size:
        h, o, n = hashes[todo], offsets[todo], lengths[todo]
        # one int64 key array (stacking uint64 with int64 would make floats); only equality of hashes matters
        order = xp.lexsort(xp.stack([o, n, h.view(np.int64)]))
        h, o, n = h[order], o[order], n[order]
        starts = xp.ones(o.size, np.bool_)
        starts[1:] = (h[1:] != h[:-1]) | (n[1:] != n[:-1])
        group_first = o[starts][xp.cumsum(starts) - 1]
        same = same_bytes(xp, buf, o, n, group_first, **launch)
        first[todo[order[same]]] = group_first[same]
        todo = todo[order[~same]]  # collisions: grouped again among themselves
    return first


def string_ids(xp, buf, spans: dict, **launch) -> tuple:
    """Return (ids, offsets, lengths): for every span slot of the events (spans: "hashes", "offsets",
    "lengths", "counts" as :func:`fields_cuda.extract` returns them) its string id (-1 for an unused
    slot), flattened event by event; and where each string's bytes lie, in id order."""
    nev, width = spans["hashes"].shape
    used = xp.flatnonzero((xp.arange(width)[None, :] < spans["counts"][:, None]).ravel())
    offsets = spans["offsets"].ravel()[used]
    lengths = spans["lengths"].ravel()[used]
    first = first_occurrences(xp, buf, spans["hashes"].ravel()[used], offsets, lengths, **launch)
    distinct, ids = xp.unique(first, return_inverse=True)  # sorted: ids in order of first occurrence
    slot_ids = xp.full(nev * width, -1, np.int32)
    slot_ids[used] = ids.ravel().astype(np.int32)
    lengths_of = xp.zeros(distinct.size, np.int64)
    lengths_of[ids.ravel()] = lengths
    return slot_ids, distinct, lengths_of
