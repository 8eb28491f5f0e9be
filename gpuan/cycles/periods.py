"""Whole-array kernels over an integer event sequence: candidate periods and periodic regions.

A sequence is periodic with period ``L`` over a stretch where ``ids[i] == ids[i + L]`` for (nearly) every
``i``. These kernels find the candidate ``L`` (from the gaps between successive occurrences of each id),
count the shifted matches of many candidates at once (the part that has a GPU twin in
:mod:`gpuan.cycles.periods_cuda`), and turn a candidate's matches into maximal periodic regions.

Where events of several streams share one sequence, their order in time is not the program's: a step
repeats as a *multiset* (the same events, in another interleaving). :func:`bag_regions` finds those
stretches: windows of ``L`` events holding the same events as the next window, in any order.
"""

from __future__ import annotations

import numba
import numpy as np

#: a window of one period may hold this share of positions that differ from the previous instance
TOLERANCE = 0.05
#: below this many events every period is a candidate (the search is exhaustive)
EXHAUSTIVE = 4096
#: candidates kept from the gap histogram, by evidence and by coverage each
CANDIDATES = 24


@numba.njit(cache=True, nogil=True)
def _gap_histogram(ids: np.ndarray, vocab: int, max_period: int) -> np.ndarray:
    last = np.full(vocab, -1, np.int64)
    hist = np.zeros(max_period + 1, np.int64)
    for i in range(ids.shape[0]):
        v = ids[i]
        p = last[v]
        if p >= 0:
            g = i - p
            if g <= max_period:
                hist[g] += 1
        last[v] = i
    return hist


def candidate_periods(ids: np.ndarray, vocab: int, max_period: int) -> np.ndarray:
    """Return the candidate periods (ascending int64) for a sequence of ids in ``[0, vocab)``.

    Every period up to `max_period` for short sequences; otherwise the gaps between successive
    occurrences of one id that occur most often, and those whose count times length (the events they
    could cover) is largest, so that a long step that shows up only a few times is not crowded out by
    the short gaps inside a layer.
    """
    n = ids.shape[0]
    max_period = min(max_period, n // 2)
    if max_period < 1:
        return np.zeros(0, np.int64)
    if n <= EXHAUSTIVE:
        return np.arange(1, max_period + 1, dtype=np.int64)
    hist = _gap_histogram(ids, vocab, max_period)
    hist[0] = 0
    hist[hist < 2] = 0
    periods = np.arange(hist.shape[0], dtype=np.int64)
    chosen = set()
    for score in (hist, hist * periods):
        chosen.update(_top(score, CANDIDATES))
    return np.array(sorted(chosen), dtype=np.int64)


def _top(score: np.ndarray, k: int) -> list[int]:
    """The indices of the `k` largest positive scores, the smaller index first among equal scores."""
    nonzero = np.flatnonzero(score > 0)  # a gap histogram is mostly empty
    order = np.argsort(-score[nonzero], kind="stable")[:k]
    return nonzero[order].tolist()


@numba.njit(cache=True, nogil=True, parallel=True)
def match_counts(ids: np.ndarray, periods: np.ndarray) -> np.ndarray:
    """Return, for each period ``L``, how many ``i`` have ``ids[i] == ids[i + L]``."""
    out = np.zeros(periods.shape[0], np.int64)
    n = ids.shape[0]
    for cand in numba.prange(periods.shape[0]):
        L = periods[cand]
        matches = 0
        for i in range(n - L):
            matches += ids[i] == ids[i + L]
        out[cand] = matches
    return out


@numba.njit(cache=True, nogil=True)
def periodic_regions(ids: np.ndarray, period: int, allowed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the maximal periodic regions of `period` as ``(starts, ends)`` (half-open positions).

    A window of `period` consecutive comparisons ``ids[i] == ids[i + period]`` is good when at most
    `allowed` of them fail; a run of good windows makes one region, trimmed so that it begins and ends
    with a matching comparison. A region holds at least two instances.
    """
    n = ids.shape[0]
    L = period
    m = n - L  # comparisons
    starts = []
    ends = []
    if m < L:
        return np.array(starts, np.int64), np.array(ends, np.int64)
    bad = 0
    for i in range(L):
        bad += ids[i] != ids[i + L]
    run_start = -1
    for w in range(m - L + 1):
        if w > 0:
            bad += (ids[w + L - 1] != ids[w + 2 * L - 1]) - (ids[w - 1] != ids[w - 1 + L])
        good = bad <= allowed
        if good and run_start < 0:
            run_start = w
        if run_start >= 0 and (not good or w == m - L):
            last_w = w - 1 if not good else w
            first = run_start
            while ids[first] != ids[first + L]:
                first += 1
            last = last_w + L - 1
            while ids[last] != ids[last + L]:
                last -= 1
            starts.append(first)
            ends.append(last + L + 1)
            run_start = -1
    return np.array(starts, np.int64), np.array(ends, np.int64)


@numba.njit(cache=True, nogil=True, forceinline=True)
def _bump(diff: np.ndarray, k: int, d: int, total: int) -> int:
    total -= abs(diff[k])
    diff[k] += d
    return total + abs(diff[k])


@numba.njit(cache=True, nogil=True)
def bag_regions(keys: np.ndarray, vocab: int, period: int, allowed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the maximal regions where each window of `period` events holds the same events as the
    next window, in any order, as ``(starts, ends, mismatch)``: half-open positions, and the mean number
    of unmatched events per window pair of the region (`keys` in ``[0, vocab)``).

    A pair of windows is good when at most `allowed` events of the first have no counterpart in the
    second. The difference of the two windows' counts is kept up to date as they slide (four counts
    change per step), so a period costs one pass. A region is a run of good pairs: it holds at least two
    instances. Unlike an ordered match, a multiset match tolerates a period a few events off (the
    windows then differ by those few events); the true period is the one with the least mismatch.
    """
    n = keys.shape[0]
    L = period
    starts = []
    ends = []
    mismatch = []
    if n < 2 * L:
        return np.array(starts, np.int64), np.array(ends, np.int64), np.array(mismatch, np.float64)
    diff = np.zeros(vocab, np.int64)  # count in the first window minus count in the second
    for i in range(L):
        diff[keys[i]] += 1
        diff[keys[i + L]] -= 1
    total = 0  # sum of |diff| over keys: twice the unmatched events
    for v in range(vocab):
        total += abs(diff[v])
    run_start = -1
    run_sum = 0
    last = n - 2 * L
    for w in range(last + 1):
        if w > 0:
            # the first window loses keys[w-1] and gains keys[w+L-1]; the second loses that one, gains keys[w+2L-1]
            total = _bump(diff, keys[w - 1], -1, total)
            total = _bump(diff, keys[w + L - 1], 2, total)
            total = _bump(diff, keys[w + 2 * L - 1], -1, total)
        good = total <= 2 * allowed
        if good and run_start < 0:
            run_start = w
            run_sum = 0
        if good:
            run_sum += total // 2
        if run_start >= 0 and (not good or w == last):
            last_w = w - 1 if not good else w
            starts.append(run_start)
            ends.append(last_w + 2 * L)
            mismatch.append(run_sum / (last_w - run_start + 1))
            run_start = -1
    return np.array(starts, np.int64), np.array(ends, np.int64), np.array(mismatch, np.float64)


@numba.njit(cache=True, nogil=True)
def bag_mismatch(keys: np.ndarray, vocab: int, a: int, b: int, length: int) -> int:
    """How many events of ``keys[a : a + length]`` have no counterpart in ``keys[b : b + length]``."""
    return window_mismatch(keys, np.zeros(vocab, np.int64), a, b, length)


@numba.njit(cache=True, nogil=True)
def window_mismatch(keys: np.ndarray, diff: np.ndarray, a: int, b: int, length: int) -> int:
    """:func:`bag_mismatch` with a count array of the caller's (all zero; left all zero), so that many
    window pairs cost their length each, not the vocabulary's size."""
    for j in range(length):
        diff[keys[a + j]] += 1
        diff[keys[b + j]] -= 1
    total = 0
    for j in range(length):
        for k in (keys[a + j], keys[b + j]):
            total += abs(diff[k])
            diff[k] = 0  # each key counted once
    return total // 2


@numba.njit(cache=True, nogil=True)
def consensus(ids: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """Return, per position of a pattern with instances at `starts`, the id most instances hold there.

    Ties go to the id that the earliest instance among the tied holds, which keeps the result
    deterministic.
    """
    k = starts.shape[0]
    out = ids[starts[0] : starts[0] + length].copy()
    # instance by instance (contiguous reads), find the positions where any instance disagrees
    differs = np.zeros(length, np.bool_)
    for start in starts:
        for j in range(length):
            if ids[start + j] != out[j]:
                differs[j] = True
    col = np.empty(k, ids.dtype)
    for j in range(length):
        if not differs[j]:  # the common case: every instance agrees
            continue
        cand, votes = ids[starts[0] + j], 0
        for m in range(k):
            v = ids[starts[m] + j]
            col[m] = v
            # Boyer-Moore vote: a majority, if there is one, is the candidate left standing
            if votes == 0:
                cand, votes = v, 1
            else:
                votes += 1 if v == cand else -1
        count = 0
        for m in range(k):
            count += col[m] == cand
        if 2 * count > k:  # a majority is the unique plurality
            out[j] = cand
            continue
        # a plurality, not only a majority: with 4 instances holding a b b c, the answer is b
        order = np.argsort(col, kind="mergesort")  # stable: each run of one id begins at its earliest instance
        best, best_count, best_first = col[0], 0, k
        a = 0
        while a < k:
            b = a + 1
            while b < k and col[order[b]] == col[order[a]]:
                b += 1
            if b - a > best_count or (b - a == best_count and order[a] < best_first):
                best, best_count, best_first = col[order[a]], b - a, order[a]
            a = b
        out[j] = best
    return out


@numba.njit(cache=True, nogil=True)
def position_stats(
    ids: np.ndarray, dur: np.ndarray, positions: np.ndarray, template: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per position of `template`: (count, sum, min, max, sum of squared deviations) of the durations
    of the instances (rows of `positions`: each instance's sequence position at each template
    position) whose event there has the template's id. Two passes (mean, then deviations) in a fixed
    order, so the results are exact to the last bit on every run."""
    L = template.shape[0]
    count = np.zeros(L, np.int64)
    total = np.zeros(L, np.float64)
    lo = np.full(L, np.inf)
    hi = np.full(L, -np.inf)
    for row in positions:
        for j in range(L):
            if ids[row[j]] == template[j]:
                d = float(dur[row[j]])
                count[j] += 1
                total[j] += d
                lo[j] = min(lo[j], d)
                hi[j] = max(hi[j], d)
    m2 = np.zeros(L, np.float64)
    for row in positions:
        for j in range(L):
            if ids[row[j]] == template[j]:
                dev = float(dur[row[j]]) - total[j] / count[j]
                m2[j] += dev * dev
    return count, total, lo, hi, m2


@numba.njit(cache=True, nogil=True)
def instance_times(
    ts: np.ndarray, end: np.ndarray, dur: np.ndarray, positions: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per instance (row of `positions`): (first start, last end, busy time = summed durations) in ns."""
    k = positions.shape[0]
    first = np.empty(k, np.int64)
    last = np.empty(k, np.int64)
    busy = np.zeros(k, np.int64)
    for m in range(k):
        row = positions[m]
        f = ts[row[0]]
        e = end[row[0]]
        for j in row:
            f = min(f, ts[j])
            e = max(e, end[j])
            busy[m] += dur[j]
        first[m] = f
        last[m] = e
    return first, last, busy


@numba.njit(cache=True, nogil=True)
def rotation_of(template: np.ndarray, other: np.ndarray, need: int) -> int:
    """The smallest ``d`` with ``other[(d + j) % L] == template[j]`` for at least `need` positions ``j``
    (`other` is that rotation of `template`, up to a few differences), or -1 if there is none.

    Every shift is tried (each gives up after too many misses), so one displaced event, even the
    template's first, does not hide the match."""
    L = template.shape[0]
    if other.shape[0] != L:
        return -1
    for d in range(L):
        misses = 0
        for j in range(L):
            if other[(d + j) % L] != template[j]:
                misses += 1
                if misses > L - need:
                    break
        if misses <= L - need:
            return d
    return -1


@numba.njit(cache=True, nogil=True)
def idle_before(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Per event, the idle ns between the latest end of all earlier events and its start (0 if none)."""
    n = ts.shape[0]
    out = np.zeros(n, np.int64)
    if n == 0:
        return out
    latest = ts[0]
    for i in range(n):
        out[i] = max(ts[i] - latest, 0)
        latest = max(latest, ts[i] + dur[i])
    return out
