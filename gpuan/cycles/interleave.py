"""Instances of a pattern whose events run on several streams, in another interleaving every time.

Each GPU stream runs its events in the order they were launched, so a training step whose kernels go
to two streams repeats exactly on each stream, while the time order of the two streams together
changes from step to step (a side stream's kernels float against the main stream's, and the next
step's first kernels on one stream may run before the last of the previous step on another). A
multiset match of the merged sequence (:func:`gpuan.cycles.periods.bag_regions`) finds the period;
this module then cuts every stream at its own instance boundaries, so that each instance holds exactly
its step's events of every stream:

- a stream's share of an instance is a fixed number of its events: of the counts near its average
  share of the instance windows, the one whose consecutive chunks hold the most nearly the same
  events;
- the cut starts at the stream's first event launched inside the trace window where the trace began
  with events launched before it (the tail of an earlier iteration, still running on the GPU when the
  profiler started), else at the stream's first event inside the first instance.

An instance's events are its *slots*: the ``j``-th event of stream ``s`` in the instance (or, on a
stream whose own order changes too, the ``k``-th event of each name). Slots are ordered by their median
place in time across instances, which is the pattern's template order.
"""

from __future__ import annotations

import numba
import numpy as np

from gpuan.cycles.periods import TOLERANCE, window_mismatch


def stream_members(
    ids: np.ndarray, vocab: int, stream: np.ndarray, early: np.ndarray | None, starts: np.ndarray, length: int
) -> np.ndarray | None:
    """Return the sequence positions of each instance's events (one row per instance, one column per
    slot in template order) for instances first placed as windows at `starts` of `length` events; or
    None where a stream's events cannot be cut into that many equal shares.
    """
    reps = starts.shape[0]
    bounds = np.array([starts[0], starts[-1] + length])
    pieces = []
    for this in np.unique(stream[bounds[0] : bounds[1]]).tolist():
        pos = np.flatnonzero(stream == this)
        first, end = np.searchsorted(pos, bounds).tolist()
        on_stream = ids[pos]
        share = _share(on_stream, vocab, first, (end - first) / reps, reps)
        if share == 0:
            continue  # a stream with a stray event here and there holds no slot
        launched = 0 if early is None else int(np.count_nonzero(early[pos]))
        if early is not None and launched < pos.shape[0]:
            # the trace began mid-iteration: the grid of instance starts runs through the stream's first
            # event launched in the window (its first event, on a stream that was idle then)
            first = launched + share * int(round((first - launched) / share))
        if first < 0 or first + reps * share > pos.shape[0]:
            return None
        chunk = pos[first : first + reps * share].reshape(reps, share)
        names = on_stream[first : first + reps * share].reshape(reps, share)
        if np.mean(names[1:] == names[:-1]) < 1 - TOLERANCE:
            # the stream's own order changes too (several host threads launching onto it): its slots
            # are the k-th event of each name, not the k-th event
            chunk = np.take_along_axis(chunk, np.argsort(names, axis=1, kind="stable"), axis=1)
        pieces.append(chunk)
    if not pieces:
        return None
    members = np.concatenate(pieces, axis=1)
    # slot order: by median rank in time within the instance (ties: stream, then place on the stream)
    rank = np.argsort(np.argsort(members, axis=1, kind="stable"), axis=1, kind="stable")
    order = np.argsort(np.median(rank, axis=0), kind="stable")
    return np.ascontiguousarray(members[:, order])


def _share(ids: np.ndarray, vocab: int, first: int, estimate: float, reps: int) -> int:
    """The number of a stream's events per instance: of the whole numbers near `estimate`, the one
    whose consecutive chunks from `first` on hold the most nearly the same events (in any order); the
    nearest to the estimate among equals. 0 where the estimate rounds to 0."""
    centre = int(round(estimate))
    if centre == 0:
        return 0
    spread = max(1, min(int(estimate) // 50, 16))
    best, best_miss = 0, -1
    for q in sorted(range(max(centre - spread, 1), centre + spread + 1), key=lambda q: (abs(q - estimate), q)):
        k = min(reps, (ids.shape[0] - first) // q)
        if k < 2:
            continue
        miss = _chunk_mismatch(ids, vocab, first, q, k)
        if best_miss < 0 or miss < best_miss:
            best, best_miss = q, miss
    return best if best else centre


@numba.njit(cache=True, nogil=True)
def _chunk_mismatch(ids: np.ndarray, vocab: int, first: int, q: int, k: int) -> float:
    """Mean number of events of chunk ``m`` (``q`` events from ``first + m q``) without a counterpart in
    chunk ``m + 1``, over the `k` - 1 consecutive pairs."""
    diff = np.zeros(vocab, np.int64)
    total = 0
    for m in range(k - 1):
        total += window_mismatch(ids, diff, first + m * q, first + (m + 1) * q, q)
    return total / (k - 1)


@numba.njit(cache=True, nogil=True)
def _increasing_run(seq: np.ndarray) -> int:
    """Length of the longest strictly increasing subsequence of `seq` (patience sorting)."""
    tails = np.empty(seq.shape[0], seq.dtype)
    size = 0
    for x in seq:
        lo, hi = 0, size
        while lo < hi:
            mid = (lo + hi) // 2
            if tails[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        tails[lo] = x
        if lo == size:
            size += 1
    return size


def moved_share(members: np.ndarray) -> np.ndarray:
    """Per instance, the share of its events that are out of the template's order: the fewest events
    that would have to move for the instance to run in template order (its length minus its longest
    run of slots in template order), over its length. 0 for an instance that runs in template order."""
    reps, length = members.shape
    out = np.zeros(reps)
    if length == 0:
        return out
    for m in range(reps):
        slots_in_time = np.argsort(members[m], kind="stable")
        out[m] = 1.0 - _increasing_run(slots_in_time) / length
    return out
