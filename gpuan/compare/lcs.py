"""Longest common subsequence of two integer sequences, with every rotation of the first tried.

Lengths for all rotations use the bit-parallel recurrence of Hyyrö (``V' = (V + (V & M)) | (V & ~M)``
over the match masks of the second sequence): ``n`` rotations cost ``O(n * n * m / 64)`` word
operations, so a few thousand kernels per cycle stay well under a second. The alignment itself comes
from one full DP table for the chosen rotation. The GPU twin is :mod:`gpuan.compare.lcs_gpu` (an
anti-diagonal wavefront, ``cuda_kernels/lcs_wavefront.cu``).
"""

from __future__ import annotations

import numba
import numpy as np

#: an alignment: the rotation, the common length, then per row the index into the rotated first sequence
#: and into the second (-1 where that side has no element)
Alignment = tuple[int, int, np.ndarray, np.ndarray]

_ONE = np.uint64(1)
_ZERO = np.uint64(0)


@numba.njit(cache=True, nogil=True)
def _match_masks(b: np.ndarray, vocab: int) -> np.ndarray:
    words = (b.shape[0] + 63) // 64
    masks = np.zeros((vocab, max(words, 1)), np.uint64)
    for j in range(b.shape[0]):
        masks[b[j], j // 64] |= _ONE << np.uint64(j % 64)
    return masks


@numba.njit(cache=True, nogil=True)
def _popcount(x: np.uint64) -> int:
    count = 0
    while x != _ZERO:
        x &= x - _ONE
        count += 1
    return count


@numba.njit(cache=True, nogil=True)
def _rotated_length(a: np.ndarray, rot: int, masks: np.ndarray, m: int, v: np.ndarray) -> int:
    n = a.shape[0]
    words = masks.shape[1]
    v[:] = ~_ZERO
    for t in range(n):
        row = a[(t + rot) % n]
        carry = _ZERO
        for w in range(words):
            pm = masks[row, w]
            x = v[w]
            total = x + (x & pm) + carry
            # a wrapped add ends below x (or at x with a carry in): that carry moves into the next word
            if carry == _ZERO:
                carry = _ONE if total < x else _ZERO
            else:
                carry = _ONE if total <= x else _ZERO
            v[w] = total | (x & ~pm)
    zeros = 0
    for w in range(words):
        bits = min(64, m - w * 64)
        if bits <= 0:
            break
        x = v[w]
        if bits < 64:
            x &= (_ONE << np.uint64(bits)) - _ONE
        zeros += bits - _popcount(x)
    return zeros


@numba.njit(cache=True, nogil=True)
def best_rotation(a: np.ndarray, b: np.ndarray, vocab: int) -> tuple[int, int]:
    """Return ``(rotation, length)``: the rotation ``r`` of `a` (``a[(i + r) % n]``) with the longest
    common subsequence with `b`, the smallest ``r`` among equals. Ids are in ``[0, vocab)``."""
    n, m = a.shape[0], b.shape[0]
    if n == 0 or m == 0:
        return 0, 0
    masks = _match_masks(b, vocab)
    v = np.empty(masks.shape[1], np.uint64)
    best, best_len = 0, -1
    ceiling = min(n, m)
    for rot in range(n):
        length = _rotated_length(a, rot, masks, m, v)
        if length > best_len:
            best, best_len = rot, length
            if length == ceiling:
                break
    return best, best_len


@numba.njit(cache=True, nogil=True)
def lcs_table(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Return the ``(n + 1, m + 1)`` int32 table: ``t[i, j]`` = LCS length of ``a[:i]`` and ``b[:j]``."""
    n, m = a.shape[0], b.shape[0]
    t = np.zeros((n + 1, m + 1), np.int32)
    for i in range(1, n + 1):
        ai = a[i - 1]
        for j in range(1, m + 1):
            if ai == b[j - 1]:
                t[i, j] = t[i - 1, j - 1] + 1
            else:
                t[i, j] = max(t[i - 1, j], t[i, j - 1])
    return t


@numba.njit(cache=True, nogil=True)
def backtrack(t: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(ai, bj)``, the alignment in order: index into `a` and into `b` per row, -1 where that
    side has no element. A tie prefers the `b`-only step (taken first from the end)."""
    n, m = a.shape[0], b.shape[0]
    ai = np.empty(n + m, np.int64)
    bj = np.empty(n + m, np.int64)
    k = 0
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0 and a[i - 1] == b[j - 1]:
            i -= 1
            j -= 1
            ai[k], bj[k] = i, j
        elif j > 0 and (i == 0 or t[i, j - 1] >= t[i - 1, j]):
            j -= 1
            ai[k], bj[k] = -1, j
        else:
            i -= 1
            ai[k], bj[k] = i, -1
        k += 1
    return ai[:k][::-1].copy(), bj[:k][::-1].copy()


def rotation_order(n: int, rotation: int) -> np.ndarray:
    """Return the rows of a sequence of `n` in the order of its rotation by `rotation`: row ``i`` of the
    rotated sequence is row ``(i + rotation) % n`` (int64; empty for ``n == 0``)."""
    return (np.arange(n) + rotation) % n


def alignment(a: np.ndarray, b: np.ndarray) -> Alignment:
    """Return the :data:`Alignment` of `a` and `b`: :func:`best_rotation`, then :func:`backtrack` over that
    rotation's :func:`lcs_table` (row ``i`` of the rotated `a` is ``a[(i + rotation) % n]``)."""
    vocab = int(max(a.max(initial=-1), b.max(initial=-1))) + 1
    rotation, common = best_rotation(a, b, vocab)
    rotated = a[rotation_order(a.shape[0], rotation)]
    return int(rotation), int(common), *backtrack(lcs_table(rotated, b), rotated, b)
