"""From detected cycles to what users read: distinct patterns and their per-position statistics."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from gpuan.cycles import interleave, periods
from gpuan.cycles.detect import Cycle, Segment, SequenceCycles, realigned
from gpuan.cycles.sequence import Sequence
from gpuan.cycles.signature import signature

STAT_COLUMNS = (
    "index", "kernel_name", "avg_duration_us", "min_duration_us", "max_duration_us", "stddev_us", "count",
    "pct_of_cycle",
)  # fmt: skip


@dataclass(frozen=True)
class Pattern:
    """One distinct repeating pattern: where it was found and all its instances.

    ``role`` is ``cycle`` (a segment's outer cycle) or ``sub-cycle``; ``segment`` indexes the segment of
    its first instance. Rotations of one pattern are one pattern (instances start where the first
    found instance starts).
    """

    sequence: Sequence
    segment: int
    role: str
    cycle: Cycle

    @property
    def names(self) -> list[str]:
        """The event names of the pattern, position by position."""
        return self.sequence.vocab[self.cycle.template].tolist()

    def instance_times(self) -> pd.DataFrame:
        """One row per instance: ``start_ns``, ``end_ns``, ``busy_ns`` (summed durations), ``wall_ns``."""
        return self._times.copy()

    @cached_property
    def _times(self) -> pd.DataFrame:
        # the ordering, the statistics and the tables all need them: made once per pattern
        seq, cyc = self.sequence, self.cycle
        first, last, busy = periods.instance_times(seq.ts, seq.ts + seq.dur, seq.dur, cyc.positions())
        return pd.DataFrame({"start_ns": first, "end_ns": last, "busy_ns": busy, "wall_ns": last - first})

    def streams(self) -> dict[int, int]:
        """How many of the pattern's events run on each stream (in its first instance)."""
        seq = self.sequence
        on = seq.event_streams[self.cycle.positions()[0]]
        values, counts = np.unique(on, return_counts=True)
        return {int(v): int(n) for v, n in zip(values, counts)}

    def order_moved(self) -> np.ndarray:
        """Per instance, the share of its events out of the template's order (0 for an ordered pattern,
        whose instances match the template position by position)."""
        if self.cycle.ordered:
            return np.zeros(self.cycle.repetitions)
        return interleave.moved_share(self.cycle.members)

    def centre_ns(self) -> float:
        """Return the middle of the pattern's span in ns: halfway from its first start to its last end."""
        t = self._times
        return (float(t.start_ns.iloc[0]) + float(t.end_ns.iloc[-1])) / 2

    def stats(self) -> pd.DataFrame:
        """Per position: name, avg/min/max/population-stddev of the duration (us) over the instances
        whose event there has that name, how many did, and the share of the average busy time."""
        seq, cyc = self.sequence, self.cycle
        count, total, lo, hi, m2 = periods.position_stats(seq.ids, seq.dur, cyc.positions(), cyc.template)
        safe = np.maximum(count, 1)
        avg = total / safe / 1e3
        avg_cycle_us = self._times.busy_ns.mean() / 1e3
        return pd.DataFrame(
            {
                "index": np.arange(cyc.length),
                "kernel_name": self.names,
                "avg_duration_us": avg,
                "min_duration_us": np.where(count > 0, lo, 0) / 1e3,
                "max_duration_us": np.where(count > 0, hi, 0) / 1e3,
                "stddev_us": np.sqrt(m2 / safe) / 1e3,
                "count": count,
                "pct_of_cycle": avg / avg_cycle_us * 100 if avg_cycle_us > 0 else np.zeros(cyc.length),
            }
        )


def pattern_signature(names: list[str]) -> str:
    """One string naming a pattern by its kernels' signatures (for telling phases apart)."""
    return "|".join(signature(n) for n in names)


def _canonical(template: np.ndarray) -> tuple[int, ...]:
    """The lexicographically smallest rotation of a pattern: equal for all rotations of one pattern."""
    best = None
    for d in np.flatnonzero(template == template.min()).tolist():
        r = tuple(np.roll(template, -d).tolist())
        if best is None or r < best:
            best = r
    return best


def distinct_patterns(found: list[SequenceCycles]) -> list[Pattern]:
    """Every distinct pattern (outer cycles and sub-cycles), ordered by temporal centre: those of each
    sequence (:func:`sequence_patterns`), one sequence after another, sorted by centre (stable)."""
    out = [p for sc in found for p in sequence_patterns(sc)]
    keyed = [(p.centre_ns(), i, p) for i, p in enumerate(out)]
    keyed.sort(key=lambda x: (x[0], x[1]))
    return [p for _, _, p in keyed]


def sequence_patterns(sc: SequenceCycles) -> list[Pattern]:
    """The distinct patterns of one sequence, in the order first seen (segment by segment, each segment's
    cycle before its sub-cycles).

    A pattern seen in several segments of the sequence (or as a rotation of one seen earlier) becomes one
    pattern whose instances are all of theirs, re-aligned to the first one's rotation.
    """
    out: list[Pattern] = []
    seq = sc.sequence
    by_form: dict[tuple[int, ...], int] = {}
    for si, seg in enumerate(sc.segments):
        cycles = ([("cycle", seg.cycle)] if seg.cycle is not None else []) + [
            ("sub-cycle", sub) for sub in seg.sub_cycles
        ]
        for role, cyc in cycles:
            form = _canonical(cyc.template)
            if form not in by_form:
                by_form[form] = len(out)
                out.append(Pattern(seq, si, role, cyc))
                continue
            first = out[by_form[form]]
            # two rotations of one canonical form: an exact shift exists
            d = periods.rotation_of(first.cycle.template, cyc.template, cyc.length)
            if first.cycle.ordered and cyc.ordered:
                moved = realigned(cyc.starts, cyc.length, d)
                starts = np.union1d(first.cycle.starts, moved)
                merged = Cycle(first.cycle.template, starts, first.cycle.offset, first.cycle.per_parent)
            elif d == 0:
                rows = np.concatenate([first.cycle.positions(), cyc.positions()])
                rows = rows[np.argsort(rows.min(axis=1), kind="stable")]
                merged = Cycle(first.cycle.template, rows.min(axis=1), first.cycle.offset,
                               first.cycle.per_parent, rows)  # fmt: skip
            else:
                # a rotation of an interleaved pattern has other instances: it stays a pattern of its own
                out.append(Pattern(seq, si, role, cyc))
                continue
            out[by_form[form]] = Pattern(seq, first.segment, first.role, merged)
    return out


def _main_cycle(seg: Segment) -> tuple[str, Cycle] | None:
    """A segment's finest repeating unit: its sub-cycle covering most events, else its outer cycle."""
    if seg.sub_cycles:
        best = max(seg.sub_cycles, key=lambda sub: (sub.length * sub.per_parent, -sub.offset))
        return "sub-cycle", best
    if seg.cycle is not None:
        return "cycle", seg.cycle
    return None


def llm_phases(found: list[SequenceCycles], min_share: float = 0.01) -> dict[str, Pattern]:
    """The prefill and decode patterns of an LLM inference trace.

    In the sequence with the most events, the segments holding at least `min_share` of them, or at
    least half an instance of its longest cycle (a prefill is about one decode step long, however
    many steps follow), are the phases; each is represented by its layer (its largest sub-cycle, else
    its cycle). Prefill is the
    earliest phase, decode the latest whose layer has other kernel signatures than prefill's. With one
    phase only, it is returned as ``decode``.
    """
    if not found:
        return {}
    sc = max(found, key=lambda candidate: len(candidate.sequence))
    n = len(sc.sequence)
    longest = max((seg.cycle.length for seg in sc.segments if seg.cycle is not None), default=0)
    least = min(min_share * n, longest / 2) if longest else min_share * n
    phases = []
    for si, seg in enumerate(sc.segments):
        main = _main_cycle(seg)
        if main is not None and seg.end - seg.start >= least:
            phases.append(Pattern(sc.sequence, si, main[0], main[1]))
    if not phases:
        return {}
    prefill = phases[0]
    sig = pattern_signature(prefill.names)
    later = [p for p in phases[1:] if pattern_signature(p.names) != sig]
    if not later:
        return {"decode": phases[-1]}
    return {"prefill": prefill, "decode": later[-1]}
