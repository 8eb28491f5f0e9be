"""How alike two cycles are (their time shares per kernel signature), which cycles of two runs pair up,
and the change of the cycle time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from gpuan.cycles.signature import signature
from gpuan.trace.inputs import CycleTable

#: cycles of two runs less alike than this (weighted Jaccard of time shares) are not paired
MIN_SIMILARITY = 0.2


def cycle_time_us(table: CycleTable) -> float:
    """Return the average cycle time of a table in µs: its metadata row, else the sum of the averages."""
    return table.avg_cycle_us if table.avg_cycle_us > 0 else float(table.rows["avg_duration_us"].sum())


def cycle_change_pct(base: CycleTable, new: CycleTable) -> float:
    """Return the change of the cycle time from `base` to `new` in percent (NaN for a 0 baseline)."""
    before, after = cycle_time_us(base), cycle_time_us(new)
    return (after - before) / before * 100.0 if before > 0 else float("nan")


def time_shares(table: CycleTable) -> pd.Series:
    """Return each signature's share of the table's summed average time (0 for all when that sum is 0)."""
    rows = table.rows
    total = float(rows["avg_duration_us"].sum())
    signatures = rows["kernel_name"].map(signature)
    shares = rows["avg_duration_us"] / total if total > 0 else rows["avg_duration_us"] * 0.0
    return shares.groupby(signatures.to_numpy(), sort=True).sum()


def similarity(base: CycleTable, new: CycleTable) -> float:
    """Return the weighted Jaccard similarity (0..1) of the two tables' signature time shares."""
    return _jaccard(time_shares(base), time_shares(new))


def _jaccard(before: pd.Series, after: pd.Series) -> float:
    """The weighted Jaccard similarity (0..1) of two tables' :func:`time_shares`."""
    before, after = before.align(after, fill_value=0.0)
    top = float(np.maximum(before, after).sum())
    return float(np.minimum(before, after).sum()) / top if top > 0 else 0.0


def pair_cycles(base_tables: Sequence[CycleTable], new_tables: Sequence[CycleTable]) -> list[tuple[int, int, float]]:
    """Return ``(i, j, similarity)`` pairs of baseline and new cycles (0-based list indices), sorted by
    ``i``: greedily the most similar pair first (ties: lower ``i``, then lower ``j``), each cycle in at
    most one pair, none below :data:`MIN_SIMILARITY`."""
    before = [time_shares(t) for t in base_tables]  # each table's shares once, not once per pair
    after = [time_shares(t) for t in new_tables]
    scores = [(_jaccard(b, n), i, j) for i, b in enumerate(before) for j, n in enumerate(after)]
    scores.sort(key=lambda entry: (-entry[0], entry[1], entry[2]))
    used_base, used_new, pairs = set(), set(), []
    for score, i, j in scores:
        if score < MIN_SIMILARITY:
            break
        if i in used_base or j in used_new:
            continue
        used_base.add(i)
        used_new.add(j)
        pairs.append((i, j, score))
    return sorted(pairs)
