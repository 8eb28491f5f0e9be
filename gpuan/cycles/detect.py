"""Cycle detection over one event sequence: segments (phases), their outer cycle, and sub-cycles.

The rules, in order:

1. *Periodic regions.* For candidate periods ``L`` (:func:`periods.candidate_periods`), scored on the
   engine (:func:`match_counts`) and traced there (:func:`periods.periodic_regions`, on the GPU
   :mod:`gpuan.cycles.regions_cuda`), a region is a maximal stretch where each instance matches the previous
   one on at least 95 % of its positions. Regions of one pattern that stray events split (an extra
   kernel in one iteration) are chained: less than two instances apart, they make one candidate.
   In a sequence of several streams whose ordered regions leave more than a tenth of it uncovered, or
   whose best one is ragged (its instances match the next in under 99 % of positions), regions where
   each window holds the same events as the next *in any order*
   (:func:`periods.bag_regions`) are candidates too: the streams' kernels interleave differently in
   every instance. Where both kinds cover the same events, the ordered region wins.
2. *Cover.* Regions are taken greedily, most events covered first (shorter period on ties, so a period
   beats its multiples), each clipped to what earlier picks left free. An outer cycle needs at least 3
   instances and 20 events beyond its first instance (long cycles need few repetitions, short ones
   more), or 2 instances of at least 100 events; a sub-cycle needs 2 instances and 4 events beyond
   the first.
3. *Rotation.* A region holding ``k`` whole instances plus ``r`` spare events can start at several
   offsets. Where the trace began while the GPU still ran events launched before it (the tail of an
   earlier iteration), the instances start at the first event launched inside the trace: profilers
   open their window at an iteration boundary. Else the boundaries go where the events before them
   left the most idle time (summed over instances after the first: iterations begin after the host has
   waited) if that is at least twice the idle time at the region's first offset; else where the partial
   instance just before the region begins (a first layer that a side stream's kernels interleave), or
   the region's first offset. Instances are exactly where the pattern starts, never a drifting stride.
   An instance of an unordered region is cut per stream (:mod:`gpuan.cycles.interleave`), so that it
   holds exactly its iteration's events of every stream.
4. *Phases.* Adjacent picks of one pattern are one segment. A periodic segment
   must cover 5 % of the sequence; shorter ones, and the gaps between periodic segments, are aperiodic
   segments (one pass: a prefill, a warm-up). Each segment gets sub-cycles: the repeating blocks of its
   cycle's consensus instance (a layer inside a step), or of its events if it is aperiodic.
5. *Statistics* per position are taken only over instances whose event there has the pattern's name.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numba
import numpy as np

from gpuan.cycles import interleave, periods
from gpuan.cycles.sequence import Sequence
from gpuan.cycles.sequence import sequences as split_sequences
from gpuan.engine import CPU, Engine, current
from gpuan.trace.table import Trace

#: an outer cycle repeats at least this often ...
OUTER_MIN_REPS = 3
#: ... and its instances after the first hold at least this many events
OUTER_MIN_EVIDENCE = 20
#: a pattern this long is an outer cycle from two instances on (two training steps, two model passes)
OUTER_PAIR_LENGTH = 100
SUB_MIN_REPS = 2
SUB_MIN_EVIDENCE = 4
#: a periodic segment covers at least this share of its sequence's events
MIN_SHARE = 0.05
#: at most this many candidate periods get their regions traced (the best-scoring ones)
MAX_TRACED = 64
#: unordered (multiset) regions are looked for where ordered ones cover less than this share of a
#: multi-stream sequence ...
ORDERED_ENOUGH = 0.9
#: ... or where consecutive instances of the best ordered one match in fewer than this share of positions
EXACT_ENOUGH = 0.99


@dataclass(frozen=True)
class Cycle:
    """A repeating pattern of events and where its instances are.

    ``template`` holds the ids (into the sequence's vocabulary) of the pattern, position by position (the
    majority over instances); ``starts`` the sequence position where each instance begins. An instance
    holds the ``length`` events from its start, unless ``members`` is set: then row ``m`` holds the
    sequence positions of instance ``m``'s events, slot by slot in template order (a pattern whose
    streams interleave differently in every instance; ``starts`` is then each row's first position). A
    sub-cycle also has ``offset`` (its first position inside the parent's pattern) and ``per_parent``
    (instances per parent instance).
    """

    template: np.ndarray
    starts: np.ndarray
    offset: int = 0
    per_parent: int = 1
    members: np.ndarray | None = None

    @property
    def ordered(self) -> bool:
        """Whether every instance is a contiguous run of events in template order."""
        return self.members is None

    def positions(self) -> np.ndarray:
        """The sequence position of every instance's event at every slot: (repetitions, length) int64."""
        if self.members is not None:
            return self.members
        return self.starts[:, None] + np.arange(self.length, dtype=np.int64)[None, :]

    def span(self) -> tuple[int, int]:
        """The first position of the first instance and one past the last position of the last."""
        if self.members is not None:
            return int(self.members.min()), int(self.members.max()) + 1
        return int(self.starts[0]), int(self.starts[-1]) + self.length

    @property
    def length(self) -> int:
        """The number of events in one instance."""
        return int(self.template.shape[0])

    @property
    def repetitions(self) -> int:
        """The number of instances."""
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
        """Whether the segment has an outer cycle."""
        return self.cycle is not None


@dataclass(frozen=True)
class SequenceCycles:
    """The segments found in one sequence (a device's stream group, or a CPU thread)."""

    sequence: Sequence
    segments: list[Segment]


# ---- helpers over arrays ------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def best_rotation(score: np.ndarray, start: int, period: int, reps: int, spare: int) -> int:
    """The offset in ``[0, spare]`` at which to start instances: the one whose instance starts (after
    the first) have the largest summed `score`, if that is at least twice the score of offset 0 (idle
    time that is mere noise must not move the boundary); else -1 (no offset stands out)."""
    best, best_j, at_zero = -1.0, 0, 0.0
    for j in range(spare + 1):
        total = 0.0
        for m in range(1, reps):
            total += score[start + j + m * period]
        if j == 0:
            at_zero = total
        if total > best:
            best, best_j = total, j
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
    """``out[j] = sum(score[first + j] for first in starts)``: a per-position score of a pattern's instances."""
    out = np.zeros(length, np.float64)
    for first in starts:
        for j in range(length):
            out[j] += score[first + j]
    return out


def _allowed(period: int) -> int:
    return int(period * periods.TOLERANCE)


def _accept_outer(period: int, reps: int) -> bool:
    if reps == 2:
        return period >= OUTER_PAIR_LENGTH
    return reps >= OUTER_MIN_REPS and (reps - 1) * period >= OUTER_MIN_EVIDENCE


def _accept_sub(period: int, reps: int) -> bool:
    return reps >= SUB_MIN_REPS and (reps - 1) * period >= SUB_MIN_EVIDENCE


def _on_gpu(ids: np.ndarray, engine: Engine) -> bool:
    # below EXHAUSTIVE events a launch costs more than the whole CPU pass
    return engine.is_gpu and ids.shape[0] > periods.EXHAUSTIVE


def _match_counts(ids: np.ndarray, device_ids, cands: np.ndarray, engine: Engine) -> np.ndarray:
    if _on_gpu(ids, engine):
        from gpuan.cycles import periods_cuda

        return periods_cuda.match_counts(device_ids, cands)
    return periods.match_counts(ids, cands)


def traced_periods(ids: np.ndarray, vocab: int, engine: Engine = CPU, device_ids=None) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(candidates, traced)``: the candidate periods of `ids`, and those whose regions are traced
    (scored on `engine`: those with about a period of matching comparisons, at most :data:`MAX_TRACED` of
    them, the best-scoring, above :data:`periods.EXHAUSTIVE` events). `device_ids` is `ids` on the GPU
    where the engine is (:func:`to_device`)."""
    n = ids.shape[0]
    every = periods.candidate_periods(ids, vocab, n // 2)
    if every.size == 0:
        return every, every
    counts = _match_counts(ids, ids if device_ids is None else device_ids, every, engine)
    # an ordered region of two instances needs about `period` matching comparisons (an unordered one
    # may have few: its events interleave differently every time)
    viable = counts >= every - (every * periods.TOLERANCE).astype(np.int64)
    cands, counts = every[viable], counts[viable]
    if n > periods.EXHAUSTIVE and cands.size > MAX_TRACED:
        keep = np.sort(np.argsort(-counts, kind="stable")[:MAX_TRACED])
        cands = cands[keep]
    return every, cands


def traced_regions(
    ids: np.ndarray, cands: np.ndarray, engine: Engine = CPU, device_ids=None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Return :func:`periods.periodic_regions` ``(starts, ends)`` of every candidate period (the
    verification of the candidates): one launch on the GPU, one pass each on the CPU; the same integers."""
    allowed = [_allowed(int(L)) for L in cands]
    if _on_gpu(ids, engine):
        from gpuan.cycles import regions_cuda

        on_device = ids if device_ids is None else device_ids
        return regions_cuda.periodic_regions(on_device, cands, np.array(allowed, np.int64), host_ids=ids)
    if len(cands) < 2 or ids.shape[0] <= periods.EXHAUSTIVE:
        return [periods.periodic_regions(ids, int(L), a) for L, a in zip(cands, allowed)]
    # periodic_regions releases the GIL: one candidate per thread, as many threads as numba's pool
    with ThreadPoolExecutor(max_workers=numba.get_num_threads()) as pool:
        return list(pool.map(lambda c: periods.periodic_regions(ids, int(cands[c]), allowed[c]), range(len(cands))))


def to_device(ids: np.ndarray, engine: Engine, device_ids=None):
    """Return `ids` on the GPU, copied once for both launches (the host array where the CPU runs them);
    `device_ids`, the same ids already on the GPU (a sequence built there), is used as it is."""
    if not _on_gpu(ids, engine):
        return ids
    from gpuan.cycles import periods_cuda

    return periods_cuda.device_ids(ids if device_ids is None else device_ids)


@dataclass(frozen=True)
class Pick:
    """A periodic region chosen by :func:`cover`: its period, its instances' starts, and whether its
    instances match in order (else as multisets: the same events in another interleaving)."""

    period: int
    starts: np.ndarray
    ordered: bool = True


def cover(
    ids: np.ndarray,
    score: np.ndarray,
    vocab: int,
    accept: Callable[[int, int], bool],
    engine: Engine = CPU,
    *,
    first_launched: int = 0,
    streams: np.ndarray | None = None,
    device_ids=None,
) -> list[Pick]:
    """Greedy cover of `ids` by periodic regions; returns the picks, sorted by first instance, disjoint.

    Regions of one period and one pattern that a few stray events split apart (an extra kernel in one
    iteration) are one pick: its instances are found again after the break, where the pattern resumes.
    `streams` (the stream of each event, for a sequence of several) lets unordered regions compete where
    ordered ones cover too little; `first_launched` is the position of the first event launched inside
    the trace window where earlier ones were launched before it (else 0); `device_ids`: `ids` already on
    the GPU, if they are.
    """
    n = ids.shape[0]
    on_device = to_device(ids, engine, device_ids)
    every, cands = traced_periods(ids, vocab, engine, on_device)
    if every.size == 0:
        return []
    chains = []  # (events covered, period, ordered first, first start, pieces)
    for p, (starts, ends) in zip(cands, traced_regions(ids, cands, engine, on_device)):
        L = int(p)
        for pieces in _chains(ids, L, starts.tolist(), ends.tolist()):
            whole = sum((end - start) // L for start, end in pieces)
            if accept(L, whole):
                chains.append((whole * L, L, 0, pieces[0][0], pieces))
    if streams is not None and not _ordered_enough(ids, chains, n):
        chains += _unordered_chains(ids, vocab, streams, every, accept)
    chains.sort(key=lambda chain: chain[:4])
    chains.sort(key=lambda chain: -chain[0])  # stable: ties keep (period, ordered first, start)
    taken: list[tuple[int, int]] = []
    picks = []
    for _, L, unordered, _, pieces in chains:
        # a chain is one phase: it takes its whole hull, so nothing else lands between its pieces
        lo, hi = _largest_free(pieces[0][0], pieces[-1][1], taken)
        clipped = [(max(start, lo), min(end, hi)) for start, end in pieces if min(end, hi) - max(start, lo) >= L]
        starts = _place(ids, score, L, clipped, first_launched, ordered=not unordered)
        if starts.size == 0 or not accept(L, starts.size):
            continue
        taken.append((int(starts[0]), int(starts[-1]) + L))
        taken.sort()
        picks.append(Pick(L, starts, not unordered))
    picks.sort(key=lambda pick: int(pick.starts[0]))
    return picks


def _ordered_enough(ids: np.ndarray, chains: list, n: int) -> bool:
    """Whether the best ordered chain leaves no room for an unordered one: it covers nearly all of the
    sequence, and its instances match the next one in order nearly everywhere (streams that interleave
    differently each time leave an ordered match of a multiple of the period, or a ragged one)."""
    if not chains:
        return False
    covered, L, _, _, pieces = max(chains, key=lambda chain: (chain[0], -chain[1]))
    if covered < ORDERED_ENOUGH * n:
        return False
    same = sum(int(np.count_nonzero(ids[start : end - L] == ids[start + L : end])) for start, end in pieces)
    return same >= EXACT_ENOUGH * sum(end - start - L for start, end in pieces)


def _stream_keys(ids: np.ndarray, vocab: int, streams: np.ndarray) -> tuple[np.ndarray, int]:
    """Ids that tell streams apart (one name on two streams is two keys), and their number."""
    known = np.unique(streams)
    return np.searchsorted(known, streams).astype(np.int64) * vocab + ids, known.size * vocab


def _chains(ids: np.ndarray, L: int, starts: list[int], ends: list[int]) -> list[list[tuple[int, int]]]:
    """Group consecutive regions of period `L` that hold one pattern and are less than two instances
    apart (what lies between them is an instance disturbed by stray or missing events)."""
    chains: list[list[tuple[int, int]]] = []
    for start, end in zip(starts, ends):
        if chains:
            ps, pe = chains[-1][-1]
            if start - pe < 2 * L and _rotation_of(ids[ps : ps + L], ids[start : start + L]) is not None:
                chains[-1].append((start, end))
                continue
        chains.append([(start, end)])
    return chains


def _unordered_chains(ids: np.ndarray, vocab: int, streams: np.ndarray, cands: np.ndarray, accept) -> list:
    """The chains of unordered (multiset) regions of the candidate periods, as :func:`cover` ranks them.

    A multiset match also accepts periods a few events off the true one; of the chains that overlap and
    whose periods are within a tenth of each other, only the one with the least mismatch per window is
    kept."""
    keys, key_vocab = _stream_keys(ids, vocab, streams)
    found = []  # (mismatch, covered, period, pieces)
    for p in cands:
        L = int(p)
        starts, ends, mismatch = periods.bag_regions(keys, key_vocab, L, _allowed(L))
        windows = ends - starts - 2 * L + 1
        chains: list[list[int]] = []  # region indexes
        for i, start in enumerate(starts.tolist()):
            if chains:
                j = chains[-1][-1]
                ps, pe = int(starts[j]), int(ends[j])
                if start - pe < 2 * L and periods.bag_mismatch(keys, key_vocab, ps, start, L) <= _allowed(L):
                    chains[-1].append(i)
                    continue
            chains.append([i])
        for chain in chains:
            pieces: list[tuple[int, int]] = []
            for i in chain:
                start, end = int(starts[i]), int(ends[i])
                if pieces and start <= pieces[-1][1]:
                    # overlapping regions are one run that a single bad window pair interrupted
                    pieces[-1] = (pieces[-1][0], end)
                else:
                    pieces.append((start, end))
            whole = sum((end - start) // L for start, end in pieces)
            if accept(L, whole):
                mean = float(np.average(mismatch[chain], weights=windows[chain]))
                found.append((mean, whole * L, L, pieces))
    kept = []
    for m, covered, L, pieces in found:
        lo, hi = pieces[0][0], pieces[-1][1]
        sharper = any(
            m2 < m or (m2 == m and L2 < L)
            for m2, _, L2, p2 in found
            if L2 != L and abs(L2 - L) <= L // 10 and min(hi, p2[-1][1]) - max(lo, p2[0][0]) > (hi - lo) // 2
        )
        if not sharper:
            kept.append((covered, L, 1, lo, pieces))
    return kept


def _first_offset(
    ids: np.ndarray, score: np.ndarray, L: int, a: int, b: int, first_launched: int, ordered: bool
) -> int:
    """Where in the piece ``[a, b)`` the first instance starts (an offset from `a`), by the rotation rules."""
    k = (b - a) // L
    spare = (b - a) - k * L
    if 0 < first_launched and a <= first_launched < b - L:
        # the trace window opened at an iteration boundary while the GPU ran the earlier iteration's tail
        return (first_launched - a) % L
    j = best_rotation(score, a, L, k, spare)
    if j >= 0:
        return j
    if ordered:
        # no idle time marks the boundary: a first instance that other events interleave (a side
        # stream's kernels inside the first layer) still shows where the pattern begins
        return (L - matched_before(ids, a, L, max(2, L // 10))) % L
    return 0


def _place(
    ids: np.ndarray, score: np.ndarray, L: int, pieces: list[tuple[int, int]], first_launched: int, ordered: bool
) -> np.ndarray:
    """Instance starts in the (free parts of the) pieces of a chain, all in one rotation.

    The first piece with a whole instance fixes the rotation (:func:`_first_offset`); later pieces start
    where that rotation of the pattern starts in them (unordered pieces: by the same rules as the first).
    """
    out = []
    template = None
    end = 0  # where the last instance placed ends
    for a, b in pieces:
        if b - a < L:
            continue
        if template is None or not ordered:
            a += _first_offset(ids, score, L, a, b, first_launched, ordered)
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


def _largest_free(start: int, end: int, taken: list[tuple[int, int]]) -> tuple[int, int]:
    """The longest part of ``[start, end)`` that overlaps none of the (sorted, disjoint) `taken` intervals."""
    best = (start, start)
    cur = start
    for a, b in taken:
        if b <= cur:
            continue
        if a >= end:
            break
        if a > cur and a - cur > best[1] - best[0]:
            best = (cur, a)
        cur = max(cur, b)
    if end > cur and end - cur > best[1] - best[0]:
        best = (cur, end)
    return best


def _cycle(ids: np.ndarray, starts: np.ndarray, length: int, offset: int = 0, per_parent: int = 1) -> Cycle:
    return Cycle(periods.consensus(ids, starts, length), starts, offset, per_parent)


def member_cycle(ids: np.ndarray, members: np.ndarray, offset: int = 0, per_parent: int = 1) -> Cycle:
    """The cycle whose instance ``m`` is the events at ``members[m]`` (slots in template order)."""
    reps, length = members.shape
    rows = np.ascontiguousarray(ids[members]).reshape(-1)
    template = periods.consensus(rows, np.arange(reps, dtype=np.int64) * length, length)
    return Cycle(template, members.min(axis=1), offset, per_parent, members)


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


def _outer_cycles(seq: Sequence, picks: list[Pick]) -> list[tuple[int, int, Cycle]]:
    """The cycle of each pick as (first position, end, cycle), consecutive picks of one ordered pattern
    less than two instances apart joined; an unordered pick's instances are cut per stream."""
    ids = seq.ids
    out: list[tuple[int, int, Cycle]] = []
    for pick in picks:
        L, starts = pick.period, pick.starts
        if not pick.ordered:
            members = interleave.stream_members(seq.ids, len(seq.vocab), seq.event_streams, seq.early, starts, L)
            cyc = _cycle(ids, starts, L) if members is None else member_cycle(ids, members)
            out.append((*cyc.span(), cyc))
            continue
        cyc = _cycle(ids, starts, L)
        start, end = cyc.span()
        if out:
            ps, pe, prev = out[-1]
            if prev.ordered and prev.length == L and start - pe < 2 * L:
                d = _rotation_of(prev.template, cyc.template)
                if d is not None:
                    moved = realigned(starts, L, d)
                    if moved.size:
                        joined = np.concatenate([prev.starts, moved])
                        out[-1] = (ps, int(moved[-1]) + L, _cycle(ids, joined, L))
                        continue
        out.append((start, end, cyc))
    return out


def _sub_cycles(seq: Sequence, idle: np.ndarray, seg_start: int, seg_end: int, cycle: Cycle | None) -> tuple:
    """The repeating blocks inside a segment: inside its cycle's pattern, or inside its events."""
    vocab = len(seq.vocab)
    if cycle is None:
        picks = cover(seq.ids[seg_start:seg_end], idle[seg_start:seg_end], vocab, _accept_sub)
        return tuple(
            _cycle(seq.ids, seg_start + p.starts, p.period, offset=seg_start + int(p.starts[0]),
                   per_parent=p.starts.size)
            for p in picks
        )  # fmt: skip
    if cycle.ordered:
        score = summed_at(idle, cycle.starts, cycle.length)
    else:
        score = idle[cycle.members].sum(axis=0)
    subs = []
    for p in cover(cycle.template, score, vocab, _accept_sub):
        L, inner = p.period, p.starts
        if cycle.ordered:
            starts = (cycle.starts[:, None] + inner[None, :]).reshape(-1)
            subs.append(_cycle(seq.ids, starts, L, offset=int(inner[0]), per_parent=inner.size))
        else:
            slots = inner[:, None] + np.arange(L, dtype=np.int64)[None, :]
            members = cycle.members[:, slots].reshape(-1, L)
            subs.append(member_cycle(seq.ids, members, offset=int(inner[0]), per_parent=inner.size))
    return tuple(subs)


def detect_sequence(
    seq: Sequence, engine: Engine = CPU, min_share: float = MIN_SHARE, sub_cycles: bool = True
) -> list[Segment]:
    """Split one sequence into segments, each with its outer cycle (if periodic) and its sub-cycles (none
    without `sub_cycles`: a caller that wants the steps alone skips their search)."""
    n = len(seq)
    if n == 0:
        return []
    # as float: scores are summed over many instances
    idle = periods.idle_before(seq.ts, seq.dur).astype(np.float64)
    first_launched = 0
    if seq.early is not None and not seq.early.all():
        first_launched = int(np.argmin(seq.early))
    streams = seq.event_streams if seq.multi_stream else None
    picks = cover(seq.ids, idle, len(seq.vocab), _accept_outer, engine, first_launched=first_launched,
                  streams=streams, device_ids=seq.device_ids)  # fmt: skip
    runs = [r for r in _outer_cycles(seq, picks) if r[1] - r[0] >= min_share * n]
    bounds: list[tuple[int, int, Cycle | None]] = []
    cur = 0
    for start, end, cyc in runs:
        start = max(start, cur)  # an interleaved instance may reach back into the previous segment's events
        if start > cur:
            bounds.append((cur, start, None))
        bounds.append((start, end, cyc))
        cur = end
    if cur < n:
        bounds.append((cur, n, None))
    return [
        Segment(start, end, cyc, _sub_cycles(seq, idle, start, end, cyc) if sub_cycles else ())
        for start, end, cyc in bounds
    ]


def detect(
    trace: Trace,
    kind: str = "kernel",
    *,
    sequences: str = "group",
    ops: str = "top",
    engine: Engine | None = None,
    sub_cycles: bool = True,
) -> list[SequenceCycles]:
    """Find the cycles of `trace`: one :class:`SequenceCycles` per sequence that has events.

    `kind` is any event kind (``kernel`` by default; ``cpu_op`` for CPU-only traces, with `ops` choosing
    top-level, leaf or all operators); `sequences` makes one sequence per GPU stream (``stream``), per
    stream group (``group``: compute streams apart from communication streams) or per device
    (``merged``). The scoring of candidate periods and the tracing of their periodic regions run on
    `engine` (default: the current one); the results are the same on CPU and GPU. Without `sub_cycles`
    the segments have none (what ``gpuan fleet`` wants: the steps alone).
    """
    engine = engine or current()
    found = split_sequences(trace, kind, sequences=sequences, ops=ops, engine=engine)
    return [SequenceCycles(seq, detect_sequence(seq, engine, sub_cycles=sub_cycles)) for seq in found]
