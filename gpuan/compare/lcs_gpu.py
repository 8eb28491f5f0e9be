"""The GPU twin of :mod:`gpuan.compare.lcs`: every pair of cycles aligned in two batched launches.

``cuda_kernels/lcs_wavefront.cu`` fills LCS tables one anti-diagonal at a time (the cells of a diagonal in
parallel). :func:`alignments` runs ``lcs_lengths`` once over every (pair, rotation) job of the batch, takes
per pair the smallest rotation of the longest length (what :func:`lcs.best_rotation` returns), runs
``lcs_tables`` once for those rotations, and traces each table back on the host with :func:`lcs.backtrack`:
the same table and the same walk give the CPU's alignment, tie for tie.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from gpuan.compare import lcs
from gpuan.compare.lcs import Alignment

KERNELS_DIR = Path(__file__).resolve().parents[2] / "cuda_kernels"
SOURCE = "lcs_wavefront.cu"
#: the first 16 hex digits of the source's SHA-256 (tests/test_compare_gpu.py checks it): part of the
#: compile options, so that CuPy's kernel cache, keyed by code and options, never serves an older build
SOURCE_SHA256 = "f44a063ff05680df"
THREADS = 256
#: dynamic shared memory a block may ask for on sm_80 / sm_90 (three diagonals of ints)
MAX_SHARED = 227 * 1024
#: baselines longer than this do not fit their three diagonals in shared memory: aligned on the CPU
MAX_BASE = MAX_SHARED // (3 * 4) - 1


@lru_cache(maxsize=1)
def _kernels():
    import cupy

    # NVRTC reads the .cu through the include path: this analysis module opens no file itself
    options = ("-std=c++17", f"-I{KERNELS_DIR}", f"-DGPUAN_SOURCE_SHA256=0x{SOURCE_SHA256}ULL")
    module = cupy.RawModule(code=f'#include "{SOURCE}"\n', options=options)
    lengths, tables = module.get_function("lcs_lengths"), module.get_function("lcs_tables")
    lengths.max_dynamic_shared_size_bytes = MAX_SHARED
    return lengths, tables


def _concat(seqs: list[np.ndarray]):
    import cupy

    lens = np.array([s.shape[0] for s in seqs], np.int32)
    off = np.zeros(len(seqs), np.int64)
    np.cumsum(lens[:-1], out=off[1:])
    flat = np.concatenate(seqs).astype(np.int32) if len(seqs) else np.zeros(0, np.int32)
    return cupy.asarray(flat if flat.size else np.zeros(1, np.int32)), cupy.asarray(off), cupy.asarray(lens)


def alignments(pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[Alignment]:
    """Return per pair ``(a, b)`` of id sequences :func:`lcs.alignment`'s result: the rotation of `a` with the longest
    common subsequence with `b` (the smallest among equals), its length, and the alignment that
    :func:`lcs.backtrack` gives on that rotation's table; all pairs in one launch per kernel.

    A pair whose baseline exceeds :data:`MAX_BASE` kernels (its diagonals would not fit in shared memory)
    is aligned by :mod:`gpuan.compare.lcs` on the CPU: the same result.
    """
    import cupy

    out: list[Alignment | None] = [None] * len(pairs)
    on_gpu = [k for k, (a, b) in enumerate(pairs) if 0 < a.shape[0] <= MAX_BASE and b.shape[0] > 0]
    for k, (a, b) in enumerate(pairs):
        if k not in on_gpu:
            out[k] = lcs.alignment(a, b)
    if not on_gpu:
        return out  # type: ignore[return-value]
    lengths_kernel, tables_kernel = _kernels()
    a_seqs = [np.asarray(pairs[k][0]) for k in on_gpu]
    b_seqs = [np.asarray(pairs[k][1]) for k in on_gpu]
    a_all, a_off, a_len = _concat(a_seqs)
    b_all, b_off, b_len = _concat(b_seqs)
    n = np.array([a.shape[0] for a in a_seqs], np.int64)
    m = np.array([b.shape[0] for b in b_seqs], np.int64)
    # every rotation of every pair: one block each
    job_pair = np.repeat(np.arange(len(on_gpu), dtype=np.int32), n)
    job_rot = (np.arange(job_pair.shape[0], dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)).astype(np.int32)
    lengths = cupy.zeros(job_pair.shape[0], np.int32)
    shared = 3 * (int(n.max()) + 1) * 4
    lengths_kernel(
        (job_pair.shape[0],), (THREADS,),
        (a_all, a_off, a_len, b_all, b_off, b_len, cupy.asarray(job_pair), cupy.asarray(job_rot), lengths),
        shared_mem=shared,
    )  # fmt: skip
    host_lengths = lengths.get()
    starts = np.cumsum(n) - n
    best = [int(np.argmax(host_lengths[s : s + c])) for s, c in zip(starts, n)]  # argmax: the first maximum
    common = [int(host_lengths[s + r]) for s, r in zip(starts, best)]
    t_size = (n + 1) * (m + 1)
    t_off = np.zeros(len(on_gpu), np.int64)
    np.cumsum(t_size[:-1], out=t_off[1:])
    tables = cupy.empty(int(t_size.sum()), np.int32)
    tables_kernel(
        (len(on_gpu),), (THREADS,),
        (a_all, a_off, a_len, b_all, b_off, b_len, cupy.asarray(np.array(best, np.int32)), cupy.asarray(t_off),
         tables),
    )  # fmt: skip
    host_tables = tables.get()
    for q, k in enumerate(on_gpu):
        a, b, rot = a_seqs[q], b_seqs[q], best[q]
        table = host_tables[t_off[q] : t_off[q] + t_size[q]].reshape(n[q] + 1, m[q] + 1)
        rotated = a[(np.arange(n[q]) + rot) % n[q]]
        out[k] = (rot, common[q], *lcs.backtrack(table, rotated, b))
    return out  # type: ignore[return-value]
