"""Sets of time as sorted, disjoint intervals, and how much of any window they cover: what splits a step's
time into the waiting that replay explains and the rest."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Intervals:
    """A set of time: sorted, disjoint, non-empty intervals ``[starts[i], ends[i])`` in ns."""

    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def union(cls, starts: np.ndarray, ends: np.ndarray) -> Intervals:
        """Return the union of the intervals ``[starts[i], ends[i])`` (any order, overlapping or not; empty
        ones are dropped)."""
        starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
        keep = ends > starts
        starts, ends = starts[keep], ends[keep]
        if starts.size == 0:
            return cls(starts, ends)
        order = np.lexsort((ends, starts))
        starts, ends = starts[order], ends[order]
        reach = np.maximum.accumulate(ends)
        # an interval starts a new piece where it begins after everything before it has ended
        new = np.ones(starts.size, bool)
        new[1:] = starts[1:] > reach[:-1]
        first = np.flatnonzero(new)
        last = np.append(first[1:] - 1, starts.size - 1)
        return cls(starts[first], reach[last])

    def minus(self, other: Intervals) -> Intervals:
        """Return the time in this set and not in `other`."""
        if self.starts.size == 0 or other.starts.size == 0:
            return self
        # only the pieces of `other` that touch this set matter (a rank's few waits against its every op)
        other = Intervals(*(a[self.within(other.starts, other.ends) > 0] for a in (other.starts, other.ends)))
        points = np.unique(np.concatenate((self.starts, self.ends, other.starts, other.ends)))
        lo, hi = points[:-1], points[1:]
        keep = self.holds(lo) & ~other.holds(lo)
        return Intervals.union(lo[keep], hi[keep])

    def holds(self, t: np.ndarray) -> np.ndarray:
        """Return, for each time in `t`, whether the set holds it."""
        k = np.searchsorted(self.starts, t, side="right") - 1
        inside = k >= 0
        inside[inside] = t[inside] < self.ends[k[inside]]
        return inside

    @cached_property
    def _done(self) -> np.ndarray:
        """``_done[k]``: the length of the first k intervals together."""
        return np.concatenate(([0], np.cumsum(self.ends - self.starts)))

    def _before(self, t: np.ndarray) -> np.ndarray:
        """Return, for each time in `t`, how much of the set lies before it."""
        k = np.searchsorted(self.starts, t, side="right")  # intervals that start at or before t
        # all of the first k - 1, and of the k-th the part up to t
        last = np.maximum(k - 1, 0)
        partial = np.clip(t - self.starts[last], 0, self.ends[last] - self.starts[last])
        return np.where(k > 0, self._done[last] + partial, 0)

    def within(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Return, for each window ``[lo[i], hi[i])``, how many ns of it the set covers (int64)."""
        lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        if self.starts.size == 0:
            return np.zeros(np.broadcast(lo, hi).shape, np.int64)
        return np.maximum(self._before(hi) - self._before(lo), 0)
