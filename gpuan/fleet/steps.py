"""A rank's training steps, found by cycle detection (:func:`gpuan.cycles.detect`), never by annotations.

The step sequence of a rank is the one (GPU device, stream group or CPU thread) whose outer cycle covers
the most events; a step is an instance of that cycle. Where no outer cycle covers at least half of any
sequence (a trace of one profiler step: nothing repeats), the rank's longest sequence is one step, every
event a position of it.

Steps are numbered so that ranks agree: the events before a rank's first instance (a warm-up step that
runs other ops, the tail of a step from before the profiler's window) count as as many steps as copies of
the pattern they hold (:func:`leading_steps`), and the instances follow from there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from gpuan.cycles.detect import SequenceCycles
from gpuan.cycles.periods import idle_before
from gpuan.cycles.sequence import Sequence

#: an outer cycle is the step when its instances cover at least this share of its sequence
MIN_COVER = 0.5


@dataclass(frozen=True)
class RankSteps:
    """The steps of one rank: its step `sequence`, the `template` (ids into the sequence's vocabulary, slot
    by slot), and ``positions[m, k]``: the sequence index of step ``first_step + m``'s event at slot `k`.
    `periodic` is False where the whole sequence is one step (no cycle covers half of it)."""

    rank: int
    sequence: Sequence
    template: np.ndarray
    positions: np.ndarray
    first_step: int
    periodic: bool

    @property
    def names(self) -> list[str]:
        """Return the template's names, slot by slot."""
        return [str(w) for w in self.sequence.vocab[self.template]]

    @property
    def steps(self) -> int:
        """Return the number of steps found."""
        return int(self.positions.shape[0])

    @property
    def gaps(self) -> np.ndarray:
        """Return the idle ns before each event of the sequence: since the latest end of all earlier ones."""
        return idle_before(self.sequence.ts, self.sequence.dur)


def find(found: list[SequenceCycles], rank: int) -> RankSteps | None:
    """Return the steps of `rank` from its detected cycles (see the module docstring), or None where it has
    no events of the kind searched."""
    best = None  # (events covered, -sequence index, sequence, cycle)
    for i, sc in enumerate(found):
        for seg in sc.segments:
            cycle = seg.cycle
            if cycle is None:
                continue
            covered = cycle.length * cycle.repetitions
            if covered >= MIN_COVER * len(sc.sequence) and (best is None or (covered, -i) > best[:2]):
                best = (covered, -i, sc.sequence, cycle)
    if best is not None:
        _, _, seq, cycle = best
        positions = np.ascontiguousarray(cycle.positions(), np.int64)
        first = leading_steps(seq.ids[: int(positions[0].min())], cycle.template)
        return RankSteps(rank, seq, np.asarray(cycle.template), positions, first, True)
    seqs = [sc.sequence for sc in found if len(sc.sequence)]
    if not seqs:
        return None
    seq = max(seqs, key=len)  # the first of the longest: sequences come in a fixed order
    return RankSteps(rank, seq, np.asarray(seq.ids), np.arange(len(seq), dtype=np.int64)[None, :], 0, False)


def leading_steps(before: np.ndarray, template: np.ndarray) -> int:
    """Return how many steps the events `before` a rank's first instance count as: the copies of the
    pattern `template` they hold, rounded (the events of each name, up to as many as that many copies
    have, over the pattern's length). A warm-up step that runs a few other ops counts as one; the tail of
    a step that began before the profiler's window, holding less than half a pattern, as none."""
    L = int(template.shape[0])
    if L == 0 or before.shape[0] == 0:
        return 0
    copies = -(-int(before.shape[0]) // L)
    want = Counter(template.tolist())
    have = Counter(before.tolist())
    held = sum(min(count, copies * want[name]) for name, count in have.items() if name in want)
    return int(np.floor(held / L + 0.5))


def rotated(steps: RankSteps, d: int) -> RankSteps:
    """Return `steps` with each step starting `d` slots later in the pattern (so that the pattern starts
    where another rank's does): step m becomes the slots ``d..`` of old step m and ``..d`` of old step
    m + 1, so one step fewer, renumbered by :func:`leading_steps`."""
    if d == 0 or not steps.periodic:
        return steps
    old = steps.positions
    positions = np.concatenate((old[:-1, d:], old[1:, :d]), axis=1)
    template = np.concatenate((steps.template[d:], steps.template[:d]))
    if positions.shape[0] == 0:
        return replace(steps, template=template, positions=positions)
    first = leading_steps(steps.sequence.ids[: int(positions[0].min())], template)
    return replace(steps, template=template, positions=positions, first_step=first)
