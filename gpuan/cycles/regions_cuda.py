"""The GPU twin of :func:`gpuan.cycles.periods.periodic_regions`, for all traced candidates in one launch.

Verifying a candidate period ``L`` means sliding a window of ``L`` comparisons ``ids[i] == ids[i + L]``
over the whole sequence and keeping the maximal runs of windows with at most ``allowed`` mismatches: on
the CPU one pass per candidate, and the step of cycle detection that takes most of its time. Here every
(candidate, chunk of windows) pair is one thread: it counts the mismatches of the window before its chunk
once, slides through the chunk (two comparisons per step, as the CPU does), and reports each run that
begins or ends in its chunk, trimmed exactly as the CPU trims it. Runs are disjoint and ordered, so the
k-th start and the k-th end (each sorted) are one region: the result is the CPU's, integer for integer.

The counts are exact integers, not window hashes: a window may differ from the next in 5 % of its
positions and still be good, which equality of hashes cannot tell (see docs/cycles.md). A candidate with
more run boundaries than the buffers hold is traced on the host instead (same result). The kernel runs
unchanged in numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which is how CI checks it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from gpuan.cycles import periods, periods_cuda

THREADS = 128
#: windows per thread, at least (a thread's first window costs ``L`` comparisons, so a chunk is >= ``L``)
CHUNK = 1024
#: region starts (and ends) kept per candidate, at most; a candidate with more is traced on the host. A
#: region spans two instances, so a sequence of n events holds about n / (2 L) of them: a short layer's
#: period in a long trace (13 events, 10M kernels: 23k regions, one per step) fits.
CAPACITY = 1 << 16
#: most blocks along the sequence (threads stride over the chunks beyond)
MAX_BLOCKS = 512


@cuda.jit(device=True)
def _changed(ids, w, L):
    """How the mismatch count changes from window ``w - 1`` to window ``w``: the comparison at
    ``w + L - 1`` enters, the one at ``w - 1`` leaves."""
    d = 0
    if ids[w + L - 1] != ids[w + 2 * L - 1]:
        d += 1
    if ids[w - 1] != ids[w - 1 + L]:
        d -= 1
    return d


@cuda.jit
def _regions_kernel(ids, cands, allowed, chunk_min, starts, ends, counts):
    cand = cuda.blockIdx.y
    L = cands[cand]
    limit = allowed[cand]
    n = ids.shape[0]
    last = n - 2 * L  # the last window (windows are w = 0 .. last)
    if last < 0:
        return
    # (no max/min builtins: numba's CUDA target types them only over an iterable)
    chunk = chunk_min if chunk_min > L else L
    chunks = last // chunk + 1
    cap = starts.shape[1]
    k = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.gridDim.x * cuda.blockDim.x
    while k < chunks:
        w0 = k * chunk
        w1 = w0 + chunk if w0 + chunk < last + 1 else last + 1
        # the mismatches of the window before the chunk tell whether the chunk's first window begins a run
        w = w0 - 1 if w0 > 0 else 0
        bad = 0
        for i in range(w, w + L):
            if ids[i] != ids[i + L]:
                bad += 1
        prev_good = w0 > 0 and bad <= limit
        if w0 > 0:
            w = w0
            bad += _changed(ids, w, L)
        while w < w1:
            if w > w0:
                bad += _changed(ids, w, L)
            good = bad <= limit
            if good and not prev_good:
                first = w
                while ids[first] != ids[first + L]:
                    first += 1
                slot = cuda.atomic.add(counts, (cand, 0), 1)
                if slot < cap:
                    starts[cand, slot] = first
            # a run ends at the window before this bad one, or at the last window
            if (prev_good and not good) or (good and w == last):
                end = (w if good else w - 1) + L - 1
                while ids[end] != ids[end + L]:
                    end -= 1
                slot = cuda.atomic.add(counts, (cand, 1), 1)
                if slot < cap:
                    ends[cand, slot] = end + L + 1
            prev_good = good
            w += 1
        k += stride


def periodic_regions(
    ids: Any,
    cands: np.ndarray,
    allowed: np.ndarray,
    *,
    host_ids: np.ndarray | None = None,
    chunk: int | None = None,
    capacity: int | None = None,
    threads: int | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Return, per candidate period, :func:`gpuan.cycles.periods.periodic_regions` ``(starts, ends)``
    with ``allowed[c]`` mismatches per window, all computed in one launch on the GPU.

    `ids` is a host array or a device array (CuPy, numba); `host_ids` is its host copy, needed only where
    a candidate overflows the buffers (it is then traced on the host). `chunk`, `capacity` and `threads`
    (default :data:`CHUNK`, the shortest candidate's regions up to :data:`CAPACITY`, :data:`THREADS`)
    shape the launch, never the result (the tests make them small to cross many chunk boundaries and
    overflow the buffers).
    """
    chunk, threads = chunk or CHUNK, threads or THREADS
    if len(cands) == 0:
        return []
    d_ids = periods_cuda.device_ids(ids)
    n = d_ids.shape[0]
    cands = np.ascontiguousarray(cands, dtype=np.int64)
    allowed = np.ascontiguousarray(allowed, dtype=np.int64)
    shortest = int(cands.min())
    capacity = capacity or min(CAPACITY, n // (2 * shortest) + 64)
    most_chunks = max(1, (n - 2 * shortest) // max(chunk, shortest) + 1)
    blocks = min(MAX_BLOCKS, -(-most_chunks // threads))
    d_starts = cuda.device_array((len(cands), capacity), np.int64)
    d_ends = cuda.device_array((len(cands), capacity), np.int64)
    d_counts = cuda.to_device(np.zeros((len(cands), 2), np.int64))
    _regions_kernel[(blocks, len(cands)), threads](
        d_ids, cuda.to_device(cands), cuda.to_device(allowed), chunk, d_starts, d_ends, d_counts
    )
    counts = d_counts.copy_to_host()
    out = []
    for c, L in enumerate(cands.tolist()):
        if counts[c].max() > capacity:
            if host_ids is None:
                host_ids = d_ids.copy_to_host()
            out.append(periods.periodic_regions(host_ids, L, int(allowed[c])))
            continue
        # only the rows' used parts come back (the buffers are mostly empty)
        out.append((_sorted_prefix(d_starts, c, int(counts[c, 0])), _sorted_prefix(d_ends, c, int(counts[c, 1]))))
    return out


def _sorted_prefix(d_rows: Any, row: int, count: int) -> np.ndarray:
    """The first `count` values of row `row` of a device array, on the host, sorted."""
    if count == 0:
        return np.zeros(0, np.int64)
    return np.sort(d_rows[row, :count].copy_to_host())
