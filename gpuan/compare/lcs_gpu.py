"""The GPU twin of :mod:`gpuan.compare.lcs`: every pair of cycles aligned in two batched launches.

``cuda_kernels/lcs_wavefront.cu`` fills LCS tables one anti-diagonal at a time (the cells of a diagonal in
parallel). :func:`alignments` runs ``lcs_lengths`` once over every (pair, rotation) job of the batch, takes
per pair the smallest rotation of the longest length (what :func:`lcs.best_rotation` returns), runs
``lcs_tables`` once for those rotations, and traces each table back on the host with :func:`lcs.backtrack`:
the same table and the same walk give the CPU's alignment, tie for tie.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gpuan.compare import lcs
from gpuan.compare.lcs import Alignment

SOURCE = "lcs_wavefront.cu"
THREADS = 256


def max_base(shared_bytes: int) -> int:
    """Return the longest baseline whose three diagonals of ints fit in `shared_bytes` of shared memory;
    longer ones are aligned on the CPU."""
    return shared_bytes // (3 * 4) - 1


@lru_cache(maxsize=1)
def _kernels():
    """Return (lcs_lengths, lcs_tables, the longest baseline lcs_lengths takes on this device)."""
    import cupy

    from gpuan.engine.kernels import cuda_module

    module = cuda_module(SOURCE)
    lengths, tables = module.get_function("lcs_lengths"), module.get_function("lcs_tables")
    # the device's opt-in limit (227 KiB on sm_90, 163 KiB on sm_80, 99 KiB on sm_89): asking for more fails
    shared = int(cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"])
    lengths.max_dynamic_shared_size_bytes = shared
    return lengths, tables, max_base(shared)


@dataclass(frozen=True)
class Batch:
    """The host side of one batch, numpy only: the pairs' sequences concatenated (``a``, ``b``, with each
    pair's offsets and lengths, as the kernels take them), every (pair, rotation) job of ``lcs_lengths``,
    and each pair's table's place in the buffer of ``lcs_tables``."""

    a: np.ndarray
    a_off: np.ndarray
    n: np.ndarray
    b: np.ndarray
    b_off: np.ndarray
    m: np.ndarray
    job_pair: np.ndarray
    job_rot: np.ndarray
    t_off: np.ndarray
    t_size: np.ndarray

    @classmethod
    def of(cls, pairs: list[tuple[np.ndarray, np.ndarray]]) -> Batch:
        """Return the batch of `pairs` (each side non-empty)."""
        a, a_off, n = _concat([a for a, _ in pairs])
        b, b_off, m = _concat([b for _, b in pairs])
        first_job = np.cumsum(n) - n
        job_pair = np.repeat(np.arange(len(pairs), dtype=np.int32), n)
        job_rot = (np.arange(job_pair.shape[0]) - np.repeat(first_job, n)).astype(np.int32)
        t_size = (n.astype(np.int64) + 1) * (m.astype(np.int64) + 1)
        t_off = np.cumsum(t_size) - t_size
        return cls(a, a_off, n, b, b_off, m, job_pair, job_rot, t_off, t_size)

    def best_rotations(self, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return per pair (the first rotation of the longest length, that length) from the jobs' lengths."""
        first_job = np.cumsum(self.n) - self.n
        best = np.array([int(np.argmax(lengths[f : f + c])) for f, c in zip(first_job, self.n)], np.int32)
        return best, lengths[first_job + best].astype(np.int64)

    def alignments(self, best: np.ndarray, common: np.ndarray, tables: np.ndarray) -> list[Alignment]:
        """Return each pair's :data:`Alignment`: its table (from the buffer `tables`) traced back as the CPU does."""
        out = []
        for q in range(self.n.shape[0]):
            n, m, rot = int(self.n[q]), int(self.m[q]), int(best[q])
            a = self.a[self.a_off[q] : self.a_off[q] + n]
            b = self.b[self.b_off[q] : self.b_off[q] + m]
            table = tables[self.t_off[q] : self.t_off[q] + self.t_size[q]].reshape(n + 1, m + 1)
            rotated = a[lcs.rotation_order(n, rot)]
            out.append((rot, int(common[q]), *lcs.backtrack(table, rotated, b)))
        return out


def _concat(seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lens = np.array([s.shape[0] for s in seqs], np.int32)
    return np.concatenate(seqs).astype(np.int32), (np.cumsum(lens) - lens).astype(np.int64), lens


def alignments(pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[Alignment]:
    """Return per pair ``(a, b)`` of id sequences :func:`lcs.alignment`'s result: the rotation of `a` with
    the longest common subsequence with `b` (the smallest among equals), its length, and the alignment that
    :func:`lcs.backtrack` gives on that rotation's table; all pairs in one launch per kernel.

    A pair whose baseline exceeds :func:`max_base` kernels of this device's shared memory (its diagonals
    would not fit), or with an empty side, is aligned by :mod:`gpuan.compare.lcs` on the CPU: the same result;
    so is a pair whose table alone would take over a quarter of the free GPU memory. Where all the tables
    together would, the batch is cut into groups that fit, one launch per kernel each.
    """
    import cupy

    lengths_kernel, tables_kernel, longest = _kernels()
    # every pair's whole table is on the device at once: the batch is cut where the tables would take more
    # than a quarter of the free memory, and a pair whose table alone would is aligned on the CPU
    budget = cupy.cuda.runtime.memGetInfo()[0] // 4
    fits = [0 < a.shape[0] <= longest and 0 < b.shape[0] and table_bytes(a, b) <= budget for a, b in pairs]
    out = [None if ok else lcs.alignment(a, b) for ok, (a, b) in zip(fits, pairs)]
    on_gpu = [k for k, ok in enumerate(fits) if ok]
    for group in groups_within(np.array([table_bytes(*pairs[k]) for k in on_gpu], np.int64), budget):
        members = [on_gpu[i] for i in group]
        for k, found in zip(members, _launch([pairs[k] for k in members], lengths_kernel, tables_kernel)):
            out[k] = found
    return out  # type: ignore[return-value]


def table_bytes(a: np.ndarray, b: np.ndarray) -> int:
    """Return the bytes of the (n + 1) x (m + 1) int32 table of the pair (a, b)."""
    return (a.shape[0] + 1) * (b.shape[0] + 1) * 4


def groups_within(sizes: np.ndarray, budget: int) -> list[list[int]]:
    """Return the indices of `sizes` cut into consecutive groups whose sizes sum to at most `budget` (each
    size is at most `budget`); one group where all fit, none for no sizes."""
    groups: list[list[int]] = []
    total = budget + 1
    for i, size in enumerate(sizes.tolist()):
        if total + size > budget:
            groups.append([])
            total = 0
        groups[-1].append(i)
        total += size
    return groups


def _launch(pairs: list[tuple[np.ndarray, np.ndarray]], lengths_kernel, tables_kernel) -> list[Alignment]:
    """Return the alignments of `pairs` (all fit the device) from one launch of each kernel."""
    import cupy

    batch = Batch.of(pairs)
    a, a_off, n = cupy.asarray(batch.a), cupy.asarray(batch.a_off), cupy.asarray(batch.n)
    b, b_off, m = cupy.asarray(batch.b), cupy.asarray(batch.b_off), cupy.asarray(batch.m)
    jobs = batch.job_pair.shape[0]
    lengths = cupy.zeros(jobs, np.int32)
    lengths_kernel(
        (jobs,), (THREADS,),
        (a, a_off, n, b, b_off, m, cupy.asarray(batch.job_pair), cupy.asarray(batch.job_rot), lengths),
        shared_mem=3 * (int(batch.n.max()) + 1) * 4,
    )  # fmt: skip
    best, common = batch.best_rotations(lengths.get())
    tables = cupy.empty(int(batch.t_size.sum()), np.int32)
    tables_kernel(
        (len(pairs),), (THREADS,),
        (a, a_off, n, b, b_off, m, cupy.asarray(best), cupy.asarray(batch.t_off), tables),
    )  # fmt: skip
    return batch.alignments(best, common, tables.get())
