"""Cycle detection over one event sequence: segments (phases), their outer cycle, and sub-cycles.

The rules, in order:

1. *Periodic regions.* For candidate periods ``L`` (:func:`periods.candidate_periods`), scored on the
   engine (:func:`match_counts`), a region is a maximal stretch where each instance matches the previous
   one on at least 95 % of its positions. Regions of one pattern that stray events split (an extra
   kernel in one iteration) are chained: less than two instances apart, they make one candidate.
2. *Cover.* Regions are taken greedily, most events covered first (shorter period on ties, so a period
   beats its multiples), each clipped to what earlier picks left free. An outer cycle needs at least 3
   instances and 20 events beyond its first instance (long cycles need few repetitions, short ones
   more); a sub-cycle needs 2 instances and 4 events beyond the first.
3. *Rotation.* A region holding ``k`` whole instances plus ``r`` spare events can start at ``r + 1``
   offsets; the one chosen puts the instance boundaries where the events before them left the most idle
   time (summed over instances after the first: iterations begin after the host has waited) if that is
   at least twice the idle time at the region's first offset; else where the partial instance just
   before the region begins (a first layer that a side stream's kernels interleave), or the region's
   first offset. Instances are exactly where the pattern starts, never a drifting stride.
4. *Phases.* Adjacent picks of one pattern are one segment. A periodic segment
   must cover 5 % of the sequence; shorter ones, and the gaps between periodic segments, are aperiodic
   segments (one pass: a prefill, a warm-up). Each segment gets sub-cycles: the repeating blocks of its
   cycle's consensus instance (a layer inside a step), or of its events if it is aperiodic.
5. *Statistics* per position are taken only over instances whose event there has the pattern's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np

from gpuan.cycles import periods
from gpuan.cycles.sequence import Sequence
from gpuan.engine import CPU, Engine

#: an outer cycle repeats at least this often ...
OUTER_MIN_REPS = 3
#: ... and its instances after the first hold at least this many events
OUTER_MIN_EVIDENCE = 20
SUB_MIN_REPS = 2
SUB_MIN_EVIDENCE = 4
#: a periodic segment covers at least this share of its sequence's events
MIN_SHARE = 0.05
#: at most this many candidate periods get their regions traced (the best-scoring ones)
MAX_TRACED = 64


@dataclass(frozen=True)
class Cycle:
    """A repeating pattern of events and where its instances are.

    ``template`` holds the ids (into the sequence's vocabulary) of the pattern, position by position (the
    majority over instances); ``starts`` the sequence position where each instance begins. A sub-cycle
    also has ``offset`` (its first position inside the parent's pattern) and ``per_parent`` (instances
    per parent instance).
    """

    template: np.ndarray
    starts: np.ndarray
    offset: int = 0
    per_parent: int = 1

    @property
    def length(self) -> int:
        return int(self.template.shape[0])

    @property
    def repetitions(self) -> int:
        return int(self.starts.shape[0])


@dataclass(frozen=True)
class Segment:
    """A phase of the sequence: positions ``[start, end)``; a periodic one has its ``cycle``."""

    start: int
    end: int
    cycle: Cycle | None
    sub_cycles: tuple[Cycle, ...] = field(default_factory=tuple)

    @property
    def periodic(self) -> bool:
        return self.cycle is not None


# ---- helpers over arrays ------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def best_rotation(score: np.ndarray, start: int, period: int, reps: int, spare: int) -> int:
    """The offset in ``[0, spare]`` at which to start instances: the one whose instance starts (after
    the first) have the largest summed `score`, if that is at least twice the score of offset 0 (idle
    time that is mere noise must not move the boundary); else -1 (no offset stands out)."""
    best, best_j, at_zero = -1.0, 0, 0.0
    for j in range(spare + 1):
        s = 0.0
        for m in range(1, reps):
            s += score[start + j + m * period]
        if j == 0:
            at_zero = s
        if s > best:
            best, best_j = s, j
    if best > 0 and best >= 2 * at_zero:
        return best_j
    return -1


@numba.njit(cache=True, nogil=True)
def matched_before(ids: np.ndarray, start: int, period: int, max_skips: int) -> int:
    """How many events of the pattern ``ids[start : start + period]`` (read backwards from its end) the
    events before `start` hold, stepping over up to `max_skips` foreign events (never two in a row
    more than twice): the part of a first instance that interleaved events kept out of the region."""
    j = period - 1
    pos = start - 1
    skips = 0
    run = 0
    matched = 0
    while pos >= 0 and matched < period:
        if ids[pos] == ids[start + j]:
            matched += 1
            j -= 1
            run = 0
        else:
            skips += 1
            run += 1
            if skips > max_skips or run > 2:
                break
        pos -= 1
    return matched


@numba.njit(cache=True, nogil=True)
def summed_at(score: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """``out[j] = sum(score[s + j] for s in starts)``: a per-position score of a pattern's instances."""
    out = np.zeros(length, np.float64)
    for s in starts:
        for j in range(length):
            out[j] += score[s + j]
    return out


def _allowed(period: int) -> int:
    return int(period * periods.TOLERANCE)


def _accept_outer(period: int, reps: int) -> bool:
    return reps >= OUTER_MIN_REPS and (reps - 1) * period >= OUTER_MIN_EVIDENCE


def _accept_sub(period: int, reps: int) -> bool:
    return reps >= SUB_MIN_REPS and (reps - 1) * period >= SUB_MIN_EVIDENCE


def _match_counts(ids: np.ndarray, cands: np.ndarray, engine: Engine) -> np.ndarray:
    if engine.is_gpu and ids.shape[0] > periods.EXHAUSTIVE:
        from gpuan.cycles import periods_cuda

        return periods_cuda.match_counts(ids, cands)
    return periods.match_counts(ids, cands)


def cover(ids: np.ndarray, score: np.ndarray, vocab: int, accept, engine: Engine = CPU) -> list[tuple[int, np.ndarray]]:
    """Greedy cover of `ids` by periodic regions; returns per pick its period and its instances' starts.

    Regions of one period and one pattern that a few stray events split apart (an extra kernel in one
    iteration) are one pick: its instances are found again after the break, where the pattern resumes.
    Picks are sorted by their first instance and never overlap.
    """
    n = ids.shape[0]
    cands = periods.candidate_periods(ids, vocab, n // 2)
    if cands.size == 0:
        return []
    counts = _match_counts(ids, cands, engine)
    # a region of two instances needs about `period` matching comparisons
    viable = counts >= cands - (cands * periods.TOLERANCE).astype(np.int64)
    cands, counts = cands[viable], counts[viable]
    if n > periods.EXHAUSTIVE and cands.size > MAX_TRACED:
        keep = np.sort(np.argsort(-counts, kind="stable")[:MAX_TRACED])
        cands = cands[keep]
    chains = []
    for p in cands:
        L = int(p)
        starts, ends = periods.periodic_regions(ids, L, _allowed(L))
        for pieces in _chains(ids, L, starts.tolist(), ends.tolist()):
            whole = sum((e - s) // L for s, e in pieces)
            if accept(L, whole):
                chains.append((whole * L, L, pieces[0][0], pieces))
    chains.sort(key=lambda c: (-c[0], c[1], c[2]))
    taken: list[tuple[int, int]] = []
    picks = []
    for _, L, _, pieces in chains:
        # a chain is one phase: it takes its whole hull, so nothing else lands between its pieces
        lo, hi = _largest_free(pieces[0][0], pieces[-1][1], taken)
        clipped = [(max(s, lo), min(e, hi)) for s, e in pieces if min(e, hi) - max(s, lo) >= L]
        starts = _place(ids, score, L, clipped)
        if starts.size == 0 or not accept(L, starts.size):
            continue
        taken.append((int(starts[0]), int(starts[-1]) + L))
        taken.sort()
        picks.append((L, starts))
    picks.sort(key=lambda pick: int(pick[1][0]))
    return picks


def _chains(ids: np.ndarray, L: int, starts: list[int], ends: list[int]) -> list[list[tuple[int, int]]]:
    """Group consecutive regions of period `L` that hold one pattern and are less than two instances
    apart (what lies between them is an instance disturbed by stray or missing events)."""
    chains: list[list[tuple[int, int]]] = []
    for s, e in zip(starts, ends):
        if chains:
            ps, pe = chains[-1][-1]
            if s - pe < 2 * L and _rotation_of(ids[ps : ps + L], ids[s : s + L]) is not None:
                chains[-1].append((s, e))
                continue
        chains.append([(s, e)])
    return chains


def _place(ids: np.ndarray, score: np.ndarray, L: int, pieces: list[tuple[int, int]]) -> np.ndarray:
    """Instance starts in the (free parts of the) pieces of a chain, all in one rotation.

    The first piece with a whole instance fixes the rotation: by the idle-time rule, or, where idle time
    marks nothing, at the start of the partial first instance just before the piece (if interleaved
    events kept part of an instance out of the region); later pieces start where that rotation of the
    pattern starts in them.
    """
    out = []
    template = None
    end = 0  # where the last instance placed ends
    for a, b in pieces:
        if b - a < L:
            continue
        if template is None:
            k = (b - a) // L
            j = best_rotation(score, a, L, k, (b - a) - k * L)
            if j < 0:
                # no idle time marks the boundary: a first instance that other events interleave (a side
                # stream's kernels inside the first layer) still shows where the pattern begins
                j = (L - matched_before(ids, a, L, max(2, L // 10))) % L
            a += j
            template = ids[a : a + L]
        else:
            d = _rotation_of(template, ids[a : a + L])
            if d is None:
                continue
            a += d
        k = (b - a) // L
        starts = a + L * np.arange(k, dtype=np.int64)
        # regions may overlap by up to two periods (each is trimmed to its own matches): instances must not
        starts = starts[starts >= end]
        if starts.size:
            out.append(starts)
            end = int(starts[-1]) + L
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _largest_free(s: int, e: int, taken: list[tuple[int, int]]) -> tuple[int, int]:
    """The longest part of ``[s, e)`` that overlaps none of the (sorted, disjoint) `taken` intervals."""
    best = (s, s)
    cur = s
    for a, b in taken:
        if b <= cur:
            continue
        if a >= e:
            break
        if a > cur and a - cur > best[1] - best[0]:
            best = (cur, a)
        cur = max(cur, b)
    if e > cur and e - cur > best[1] - best[0]:
        best = (cur, e)
    return best


def _cycle(ids: np.ndarray, starts: np.ndarray, length: int, offset: int = 0, per_parent: int = 1) -> Cycle:
    return Cycle(periods.consensus(ids, starts, length), starts, offset, per_parent)


def _rotation_of(template: np.ndarray, other: np.ndarray) -> int | None:
    """The shift ``d`` with ``other[d:] + other[:d]`` equal to `template` on >= 95 % of positions."""
    L = template.shape[0]
    d = periods.rotation_of(template, other, L - _allowed(L))
    return None if d < 0 else d


def realigned(starts: np.ndarray, length: int, d: int) -> np.ndarray:
    """Return the starts of the instances of a pattern's rotation by `d` (``starts + d``) that lie whole
    inside the instances at `starts`.

    Such an instance is the tail of one instance and the head of the next, so it exists only where the
    next instance follows right after: not past the last one, nor across a gap of stray events.
    """
    whole = np.append(np.diff(starts) == length, False) | (d == 0)
    return starts[whole] + d


def _merge_runs(ids: np.ndarray, picks: list[tuple[int, np.ndarray]]) -> list[tuple[int, int, Cycle]]:
    """Join consecutive picks of one pattern less than two instances apart; returns (start, end, cycle)."""
    out: list[tuple[int, int, Cycle]] = []
    for L, starts in picks:
        cyc = _cycle(ids, starts, L)
        s, e = int(starts[0]), int(starts[-1]) + L
        if out:
            ps, pe, prev = out[-1]
            if prev.length == L and s - pe < 2 * L:
                d = _rotation_of(prev.template, cyc.template)
                if d is not None:
                    moved = realigned(starts, L, d)
                    if moved.size:
                        joined = np.concatenate([prev.starts, moved])
                        out[-1] = (ps, int(moved[-1]) + L, _cycle(ids, joined, L))
                        continue
        out.append((s, e, cyc))
    return out


def _sub_cycles(seq: Sequence, idle: np.ndarray, seg_start: int, seg_end: int, cycle: Cycle | None) -> tuple:
    """The repeating blocks inside a segment: inside its cycle's pattern, or inside its events."""
    vocab = len(seq.vocab)
    if cycle is None:
        picks = cover(seq.ids[seg_start:seg_end], idle[seg_start:seg_end], vocab, _accept_sub)
        return tuple(
            _cycle(seq.ids, seg_start + st, L, offset=seg_start + int(st[0]), per_parent=st.size) for L, st in picks
        )
    score = summed_at(idle, cycle.starts, cycle.length)
    subs = []
    for L, inner in cover(cycle.template, score, vocab, _accept_sub):
        starts = (cycle.starts[:, None] + inner[None, :]).reshape(-1)
        subs.append(_cycle(seq.ids, starts, L, offset=int(inner[0]), per_parent=inner.size))
    return tuple(subs)


def detect_sequence(seq: Sequence, engine: Engine = CPU, min_share: float = MIN_SHARE) -> list[Segment]:
    """Split one sequence into segments, each with its outer cycle (if periodic) and its sub-cycles."""
    n = len(seq)
    if n == 0:
        return []
    # as float: scores are summed over many instances
    idle = periods.idle_before(seq.ts, seq.dur).astype(np.float64)
    picks = cover(seq.ids, idle, len(seq.vocab), _accept_outer, engine)
    runs = [r for r in _merge_runs(seq.ids, picks) if r[1] - r[0] >= min_share * n]
    bounds: list[tuple[int, int, Cycle | None]] = []
    cur = 0
    for s, e, cyc in runs:
        if s > cur:
            bounds.append((cur, s, None))
        bounds.append((s, e, cyc))
        cur = e
    if cur < n:
        bounds.append((cur, n, None))
    return [Segment(s, e, cyc, _sub_cycles(seq, idle, s, e, cyc)) for s, e, cyc in bounds]
