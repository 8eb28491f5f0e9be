"""Interval arithmetic over columns, written once against the engine's array namespace."""

from __future__ import annotations

from gpuan.arrays import stable_argsort
from gpuan.engine import CPU, Engine


def busy_time(group, start, end, n_groups: int, engine: Engine = CPU):
    """Return, per group 0..n_groups-1, the length of the union of the intervals [start, end).

    A sweep over the sorted endpoints: +1 at each start, -1 at each end; a gap between consecutive
    endpoints of a group counts when the running coverage is positive. Each group's deltas sum to zero,
    so one global cumulative sum over (group, time)-sorted endpoints is already per group. Only sort,
    cumsum and elementwise operations: the same code runs on numpy and CuPy.
    """
    xp = engine.xp
    n = start.shape[0]
    if n == 0:
        return xp.zeros(n_groups, dtype=xp.int64)
    t = xp.concatenate([start, end]).astype(xp.int64)
    g = xp.concatenate([group, group]).astype(xp.int64)
    delta = xp.concatenate([xp.ones(n, xp.int64), -xp.ones(n, xp.int64)])
    order = _group_time_order(xp, g, t)
    t, g, delta = t[order], g[order], delta[order]
    cover = xp.cumsum(delta)
    gap = t[1:] - t[:-1]
    counts = (cover[:-1] > 0) & (g[1:] == g[:-1])
    # integer prefix sums keep the totals exact (float weights would round past 2**53 ns)
    cs = xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(xp.where(counts, gap, 0))])
    ids = xp.arange(n_groups, dtype=xp.int64)
    return cs[xp.searchsorted(g[:-1], ids, side="right")] - cs[xp.searchsorted(g[:-1], ids, side="left")]


def _group_time_order(xp, g, t):
    """Return the order that sorts the endpoints by group, then time, equal pairs in their order: that of
    ``xp.lexsort(xp.stack([t, g]))``, by one stable sort of a single int64 key where group and time fit in
    one (two to three times faster than the two-key sort), else by that sort."""
    g_low, t_low = int(g.min()), int(t.min())
    t_span = int(t.max()) - t_low + 1
    if (int(g.max()) - g_low + 1) * t_span < 2**63:
        # exact: each difference is below its span, so the key never wraps
        return stable_argsort(xp, (g - g_low) * t_span + (t - t_low))
    return xp.lexsort(xp.stack([t, g]))
