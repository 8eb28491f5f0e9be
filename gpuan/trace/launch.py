"""Which CPU operator launched each GPU activity: the link every analysis that joins GPU work to the code
behind it uses (roofline scoring, the replay's collectives).

The chain in a PyTorch-profiler trace: kernel / memcpy / memset ⟶ (``correlation``, or the ``ac2g`` flow
arrow where an activity lacks it) ⟶ the runtime call that launched it ⟶ the operator. The operator is the
one the runtime call's ``External id`` names when that operator holds the call on its thread, else the
innermost operator holding the call in time (older traces reuse the correlation as the external id). A
CUDA-graph launch is one runtime call with many activities, so they all link to the op that replayed the
graph. An activity without a runtime call falls back to its own ``External id``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.arrays import unique_rows
from gpuan.trace.nesting import ancestor_where, enclosing


def ints(table: pa.Table, name: str, null: int = -1, rows: np.ndarray | None = None) -> np.ndarray:
    """Return an integer column as int64 numpy, nulls as `null`; only its values at `rows` where given
    (gathered before they are converted: cheaper where the rows are a small share of the table)."""
    column = table[name].combine_chunks() if rows is None else table[name].take(pa.array(rows))
    return column.fill_null(null).to_numpy(zero_copy_only=False).astype(np.int64)


def group_ids(*columns: np.ndarray) -> np.ndarray:
    """Return one int64 id per distinct tuple of the columns (rows in any order), numbered in the order
    of the sorted tuples."""
    return unique_rows(columns)[1]


def match(keys: tuple[np.ndarray, ...], targets: tuple[np.ndarray, ...]) -> np.ndarray:
    """Return, for each row of `keys` (a tuple of int columns), the first row of `targets` with the same
    values, or -1; rows whose key holds -1 match nothing."""
    n = keys[0].shape[0]
    if n == 0 or targets[0].shape[0] == 0:
        return np.full(n, -1, np.int64)
    ids = group_ids(*(np.concatenate([k, t]) for k, t in zip(keys, targets)))
    key_ids, target_ids = ids[:n], ids[n:]
    first = np.full(ids.max() + 1, -1, np.int64)
    rows = np.arange(target_ids.shape[0])
    first[target_ids[::-1]] = rows[::-1]  # the last write wins: the first row
    out = first[key_ids]
    missing = np.zeros(n, bool)
    for k in keys:
        missing |= k == -1
    out[missing] = -1
    return out


def callers(table: pa.Table) -> np.ndarray:
    """Return per row of `table` (ranges with ts, dur) the row of the range that encloses it on its rank,
    process and thread (the op that called it), -1 at top level."""
    start = ints(table, "ts")
    group = group_ids(*(ints(table, c, 0) for c in ("rank", "pid", "tid")))
    return enclosing(group, start, start + ints(table, "dur", 0))


def innermost(points: pa.Table, ranges: pa.Table, by: tuple[str, ...]) -> np.ndarray:
    """Return, for each row of `points`, the row of the innermost range of `ranges` with the same `by`
    columns that holds the point's start, or -1."""
    n, m = points.num_rows, ranges.num_rows
    if n == 0 or m == 0:
        return np.full(n, -1, np.int64)
    start = np.concatenate([ints(ranges, "ts"), ints(points, "ts")])
    end = start + np.concatenate([ints(ranges, "dur", 0), ints(points, "dur", 0)])
    group = group_ids(*(np.concatenate([ints(ranges, c, 0), ints(points, c, 0)]) for c in by))
    is_range = np.arange(m + n) < m
    # a point's own row never holds it: the nearest range above it in the nesting
    parent = enclosing(group, start, end)
    held = ancestor_where(parent, is_range)
    return held[m:]


class Links(NamedTuple):
    """``op_of_activity``: per GPU activity, the row of ``ops`` that launched it (-1: none found);
    ``runtime_of_activity``: the row of ``runtime`` that launched it (-1)."""

    op_of_activity: np.ndarray
    runtime_of_activity: np.ndarray


def link(activities: pa.Table, runtime: pa.Table, ops: pa.Table, flows: pa.Table) -> Links:
    """Return which op and which runtime call launched each GPU activity (kernel, memcpy, memset)."""
    rank_a, rank_r, rank_o = (ints(t, "rank", 0) for t in (activities, runtime, ops))
    corr = ints(activities, "correlation")
    if (corr == -1).any() and flows.num_rows:
        corr = np.where(corr == -1, _flow_ids(activities, flows), corr)
    runtime_of = match((rank_a, corr), (rank_r, ints(runtime, "correlation")))

    # the op of each runtime call: the one its External id names, if that op holds the call on its thread
    by_id = match((rank_r, ints(runtime, "external_id")), (rank_o, ints(ops, "external_id")))
    held = innermost(runtime, ops, ("rank", "pid", "tid"))
    ok = by_id >= 0
    if ok.any():
        r, o = np.flatnonzero(ok), by_id[ok]
        ts_r, ts_o = ints(runtime, "ts")[r], ints(ops, "ts")[o]
        same_thread = (ints(runtime, "tid")[r] == ints(ops, "tid")[o]) & (
            ints(runtime, "pid")[r] == ints(ops, "pid")[o]
        )
        inside = (ts_o <= ts_r) & (ts_r <= ts_o + ints(ops, "dur", 0)[o])
        ok[r] = same_thread & inside
    op_of_runtime = np.where(ok, by_id, held)

    op_of = np.where(runtime_of >= 0, op_of_runtime[np.maximum(runtime_of, 0)] if runtime.num_rows else -1, -1)
    direct = match((rank_a, ints(activities, "external_id")), (rank_o, ints(ops, "external_id")))
    op_of = np.where((runtime_of < 0) & (direct >= 0), direct, op_of)
    return Links(op_of.astype(np.int64), runtime_of)


def _flow_ids(activities: pa.Table, flows: pa.Table) -> np.ndarray:
    """Return the id of the ``ac2g`` flow arrow ending at each activity (its correlation), or -1."""
    cat = flows["cat"].combine_chunks().dictionary_decode()
    phase = flows["phase"].combine_chunks().dictionary_decode()
    ends = flows.filter(pc.and_(pc.equal(cat, "ac2g"), pc.is_in(phase, pa.array(["f", "t"]))))
    rows = match(
        tuple(ints(activities, c, 0) for c in ("rank", "pid", "tid", "ts")),
        tuple(ints(ends, c, 0) for c in ("rank", "pid", "tid", "ts")),
    )
    ids = ints(ends, "id")
    return np.where(rows >= 0, ids[np.maximum(rows, 0)] if ends.num_rows else -1, -1)
