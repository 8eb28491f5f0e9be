"""Cycle detection over one event sequence: segments (phases), their outer cycle, and sub-cycles.

The rules, in order:

1. *Periodic regions.* For candidate periods ``L`` (:func:`periods.candidate_periods`), scored on the
   engine (:func:`match_counts`), a region is a maximal stretch where each instance matches the previous
   one on at least 95 % of its positions.
2. *Cover.* Regions are taken greedily, most events covered first (shorter period on ties, so a period
   beats its multiples), each clipped to what earlier picks left free. An outer cycle needs at least 3
   instances and 20 events beyond its first instance (long cycles need few repetitions, short ones
   more); a sub-cycle needs 2 instances and 4 events beyond the first.
3. *Rotation.* A region holding ``k`` whole instances plus ``r`` spare events can start at ``r + 1``
   offsets; the one chosen puts the instance boundaries where the events before them left the most idle
   time (summed over instances after the first: iterations begin after the host has waited), the
   earliest offset on ties. Instances are exactly where the pattern starts, never a drifting stride.
4. *Phases.* Adjacent picks of one pattern (split by a stray event) are one segment. A periodic segment
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


def idle_before(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Per event, the idle ns between the latest end of all earlier events and its start (0 if none)."""
    end = ts + dur
    if ts.size == 0:
        return np.zeros(0, np.int64)
    prev_end = np.maximum.accumulate(np.concatenate([[ts[0]], end[:-1]]))
    return np.maximum(ts - prev_end, 0)


@numba.njit(cache=True, nogil=True)
def best_rotation(score: np.ndarray, start: int, period: int, reps: int, spare: int) -> int:
    """The offset in ``[0, spare]`` whose instance starts after the first have the largest summed score."""
    best, best_j = -1.0, 0
    for j in range(spare + 1):
        s = 0.0
        for m in range(1, reps):
            s += score[start + j + m * period]
        if s > best:
            best, best_j = s, j
    return best_j


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


def cover(ids: np.ndarray, score: np.ndarray, vocab: int, accept, engine: Engine = CPU) -> list[tuple[int, int, int]]:
    """Greedy cover of `ids` by periodic regions; returns ``(start, period, reps)`` sorted by start.

    Each pick holds whole instances only: ``[start, start + period * reps)``.
    """
    n = ids.shape[0]
    cands = periods.candidate_periods(ids, vocab, n // 2)
    if cands.size == 0:
        return []
    counts = _match_counts(ids, cands, engine)
    # a region of two instances needs about `period` matching comparisons
    viable = counts >= cands - np.array([_allowed(int(p)) for p in cands])
    cands, counts = cands[viable], counts[viable]
    if n > periods.EXHAUSTIVE and cands.size > MAX_TRACED:
        keep = np.sort(np.argsort(-counts, kind="stable")[:MAX_TRACED])
        cands = cands[keep]
    regions = []
    for p in cands:
        L = int(p)
        starts, ends = periods.periodic_regions(ids, L, _allowed(L))
        for s, e in zip(starts.tolist(), ends.tolist()):
            if accept(L, (e - s) // L):
                regions.append(((e - s) // L * L, L, s, e))
    regions.sort(key=lambda r: (-r[0], r[1], r[2]))
    taken: list[tuple[int, int]] = []
    picks = []
    for _, L, s, e in regions:
        a, b = _largest_free(s, e, taken)
        k = (b - a) // L
        if k < 1 or not accept(L, k):
            continue
        j = best_rotation(score, a, L, k, (b - a) - k * L)
        taken.append((a + j, a + j + k * L))
        taken.sort()
        picks.append((a + j, L, k))
    picks.sort()
    return picks


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
    need = L - _allowed(L)
    for d in np.flatnonzero(other == template[0]).tolist():
        if int(np.count_nonzero(np.roll(other, -d) == template)) >= need:
            return d
    return None


def _merge_runs(ids: np.ndarray, picks: list[tuple[int, int, int]]) -> list[tuple[int, int, Cycle]]:
    """Join consecutive picks of one pattern (a stray event splits a run); returns (start, end, cycle)."""
    out: list[tuple[int, int, Cycle]] = []
    for s, L, k in picks:
        starts = s + L * np.arange(k, dtype=np.int64)
        cyc = _cycle(ids, starts, L)
        if out:
            ps, pe, prev = out[-1]
            if prev.length == L and s - pe < 2 * L:
                d = _rotation_of(prev.template, cyc.template)
                if d is not None:
                    moved = starts + d
                    moved = moved[moved + L <= s + k * L]
                    if moved.size:
                        joined = np.concatenate([prev.starts, moved])
                        out[-1] = (ps, int(moved[-1]) + L, _cycle(ids, joined, L))
                        continue
        out.append((s, s + k * L, cyc))
    return out


def _sub_cycles(seq: Sequence, idle: np.ndarray, seg_start: int, seg_end: int, cycle: Cycle | None) -> tuple:
    """The repeating blocks inside a segment: inside its cycle's pattern, or inside its events."""
    vocab = len(seq.vocab)
    if cycle is None:
        picks = cover(seq.ids[seg_start:seg_end], idle[seg_start:seg_end], vocab, _accept_sub)
        return tuple(
            _cycle(seq.ids, seg_start + s + L * np.arange(k, dtype=np.int64), L, offset=seg_start + s, per_parent=k)
            for s, L, k in picks
        )
    score = summed_at(idle.astype(np.float64), cycle.starts, cycle.length)
    subs = []
    for s, L, k in cover(cycle.template, score, vocab, _accept_sub):
        starts = (cycle.starts[:, None] + (s + L * np.arange(k, dtype=np.int64))[None, :]).reshape(-1)
        subs.append(_cycle(seq.ids, starts, L, offset=s, per_parent=k))
    return tuple(subs)


def detect_sequence(seq: Sequence, engine: Engine = CPU, min_share: float = MIN_SHARE) -> list[Segment]:
    """Split one sequence into segments, each with its outer cycle (if periodic) and its sub-cycles."""
    n = len(seq)
    if n == 0:
        return []
    idle = idle_before(seq.ts, seq.dur)
    picks = cover(seq.ids, idle.astype(np.float64), len(seq.vocab), _accept_outer, engine)
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
