"""The Arrow tables and summary of a fleet Result, built on process 0 from the gathered records.

``ranks``: per rank its step sequence, group, pattern length, steps and their times (mean, median, max),
its median own time and its summed excess over the median rank, and its worst step. ``steps``: per (rank,
step) its window on the run's clock (from the end of what ran before it; ``first_ns``: its first op), time,
waiting, own time split into compute, communication and idle, the median rank's values, the typical own
time and the excess (``peers``: the ranks of its group that hold the step, which it is compared with
position by position; with fewer than two, the excess is over the median own time). ``distribution``: per
step the spread of step time across ranks, the rank that took longest, and the one whose own time most
exceeded the median. ``slowest``: the slowest (rank, step) pairs with the median rank's values beside
theirs and what replay says of them. ``causes``: per slowest pair the positions that account for its
excess, with the phase of each (forward, backward, after backward, where the pattern has autograd ops or
backward kernels) and where backward begins. ``outliers``: per group and position, the (rank, step) that
exceeded the median rank most there. Names are the ops' names; ns are int64, medians float64.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from gpuan.fleet import compare, measure
from gpuan.fleet.align import Groups
from gpuan.result import Result


def build(
    ranks: list[int],
    headers: np.ndarray,
    groups: Groups,
    steps: np.ndarray,
    positions: np.ndarray,
    vocab: np.ndarray,
    comm: np.ndarray,
    replayed: Result | None,
    slowest: int,
) -> tuple[dict[str, pa.Table], dict]:
    """Return (the tables, the summary's fleet keys) of the run's `ranks` from the
    :data:`~gpuan.fleet.align.HEADER` of every rank with steps and every rank's
    :data:`~gpuan.fleet.measure.STEP` and :data:`~gpuan.fleet.measure.POSITION` records, the shared
    vocabulary `vocab` (with `comm`, its communication mask), and replay's Result."""
    # one order whatever the number of processes: the gathered records come in process order
    positions, steps = _by_rank(positions), _by_rank(steps)
    reference = _reference_names(groups, positions)
    pos = compare.position_frame(positions, groups, reference)
    step_rows = compare.with_excess(compare.step_frame(steps, pos, comm), pos)
    slow = compare.slowest(step_rows, slowest)
    collectives = waits = None
    if replayed is not None:
        collectives, waits = replayed.to_pandas("collectives"), replayed.to_pandas("collective_waits")
    crossed = compare.replay_of(slow, collectives, waits)
    slow_table = slow.reset_index(drop=True).merge(crossed, on=["rank", "step"], how="left")
    causes = compare.causes(slow, pos, comm)
    backward = {g: compare.phases(names, measure.is_backward(vocab)) for g, names in reference.items()}
    first = np.array([backward[g][0] for g in causes["group"]], np.int64)
    causes["phase"] = compare.phase_of(causes["position"].to_numpy(np.int64), first,
                                       np.array([backward[g][1] for g in causes["group"]], np.int64))  # fmt: skip
    causes["backward_at"] = first
    outliers = compare.outliers(pos, comm)
    for frame in (causes, outliers):
        frame["name"] = vocab[frame["name"].to_numpy(np.int64)] if len(frame) else pd.Series([], dtype=object)
    if len(causes):
        before = causes["before"].to_numpy(np.int64)
        causes["before"] = np.where(before >= 0, vocab[np.maximum(before, 0)], "")
    frames = {
        "ranks": _ranks(ranks, headers, groups, step_rows, vocab),
        "steps": step_rows[_STEP_COLUMNS],
        "distribution": _distribution(step_rows),
        "slowest": slow_table[_SLOW_COLUMNS],
        "causes": causes,
        "outliers": outliers,
    }
    summary = {
        "groups": len(groups.reference),
        "steps": sorted(int(s) for s in step_rows["step"].unique()),
        "step_ns": _spread(frames["ranks"]["median_step_ns"]),
        "slowest": None,
        "replay": {
            "collectives": 0 if collectives is None else len(collectives),
            "wait_ns": 0 if waits is None else int(waits["wait"].sum()),
        },  # fmt: skip
    }
    if len(slow_table):
        top = slow_table.iloc[0]
        summary["slowest"] = {"rank": int(top["rank"]), "step": int(top["step"]), "excess_ns": float(top["excess_ns"])}
    return {name: pa.Table.from_pandas(frame, preserve_index=False) for name, frame in frames.items()}, summary


_STEP_COLUMNS = [
    "rank", "step", "start_ns", "first_ns", "end_ns", "step_ns", "wait_ns", "own_ns", "compute_ns", "comm_ns",
    "idle_ns", "median_step_ns", "median_own_ns", "typical_own_ns", "excess_ns", "peers",
]  # fmt: skip
_SLOW_COLUMNS = [
    "rank", "step", "start_ns", "end_ns", "step_ns", "median_step_ns", "own_ns", "median_own_ns", "typical_own_ns",
    "excess_ns", "wait_ns", "median_wait_ns", "compute_ns", "median_compute_ns", "comm_ns", "median_comm_ns",
    "idle_ns", "median_idle_ns", "peers", "collectives", "late_at", "max_delay_ns", "caused_ns",
]  # fmt: skip


def _by_rank(records: np.ndarray) -> np.ndarray:
    """Return `records` ordered by rank: each rank's records are one run, in their order, and the runs
    come in the order of the processes that sent them, so the runs are put in rank order."""
    rank = records["rank"]
    starts = np.flatnonzero(np.concatenate(([True], rank[1:] != rank[:-1]))) if rank.size else rank[:0]
    if np.all(np.diff(rank[starts]) > 0):
        return records
    ends = np.append(starts[1:], rank.size)
    return np.concatenate([records[starts[i] : ends[i]] for i in np.argsort(rank[starts], kind="stable")])


def _reference_names(groups: Groups, positions: np.ndarray) -> dict[int, np.ndarray]:
    """Return each group's names (shared codes) by position: its reference pattern, or for one-pass ranks
    the reference rank's sequence (every member has the same)."""
    out = {}
    for g, (rank, pattern) in enumerate(zip(groups.reference_rank, groups.reference)):
        if pattern is not None:
            out[g] = np.asarray(pattern, np.int64)
            continue
        mine = positions[positions["rank"] == rank]
        names = np.full(int(mine["position"].max()) + 1 if mine.size else 0, -1, np.int64)
        names[mine["position"]] = mine["name"]
        out[g] = names
    return out


def _ranks(
    ranks: list[int], headers: np.ndarray, groups: Groups, step_rows: pd.DataFrame, vocab: np.ndarray
) -> pd.DataFrame:
    """Return the ``ranks`` table: one row per rank of the run (those without events of the kind searched
    have no sequence, no group (-1) and no steps)."""
    by_rank = step_rows.groupby("rank")
    per = pd.DataFrame({
        "steps": by_rank.size(), "first_step": by_rank["step"].min(), "last_step": by_rank["step"].max(),
        "mean_step_ns": by_rank["step_ns"].mean(), "median_step_ns": by_rank["step_ns"].median(),
        "max_step_ns": by_rank["step_ns"].max(), "median_own_ns": by_rank["own_ns"].median(),
        "excess_ns": by_rank["excess_ns"].sum(),
    })  # fmt: skip
    worst = step_rows.sort_values(["rank", "excess_ns", "step"], ascending=[True, False, True], kind="stable")
    worst = worst.drop_duplicates("rank").set_index("rank")
    per["worst_step"] = worst["step"]
    per["worst_excess_ns"] = worst["excess_ns"]
    out = pd.DataFrame({
        "rank": headers["rank"].astype(np.int64), "sequence": vocab[headers["label"]],
        "periodic": headers["periodic"], "events": headers["events"], "length": headers["length"],
        "group": [groups.group[int(r)] for r in headers["rank"]],
        "rotation": [groups.rotation[int(r)] for r in headers["rank"]],
    })  # fmt: skip
    out = pd.DataFrame({"rank": np.array(ranks, np.int64)}).merge(out, on="rank", how="left")
    out["sequence"] = out["sequence"].fillna("")
    out["periodic"] = out["periodic"].fillna(False).astype(bool)
    for column in ("events", "length", "group", "rotation"):
        out[column] = out[column].fillna(-1 if column == "group" else 0).astype(np.int64)
    out = out.merge(per.reset_index(), on="rank", how="left")
    out["steps"] = out["steps"].fillna(0).astype(np.int64)
    return out


def _distribution(step_rows: pd.DataFrame) -> pd.DataFrame:
    """Return the ``distribution`` table: per step, step time across ranks and who stood out."""
    rows = []
    for step, part in step_rows.groupby("step", sort=True):
        longest = part.sort_values(["step_ns", "rank"], ascending=[False, True], kind="stable").iloc[0]
        worst = part.sort_values(["excess_ns", "rank"], ascending=[False, True], kind="stable").iloc[0]
        rows.append({
            "step": int(step), "ranks": len(part), "min_ns": int(part["step_ns"].min()),
            "median_ns": float(part["step_ns"].median()), "mean_ns": float(part["step_ns"].mean()),
            "max_ns": int(part["step_ns"].max()), "longest_rank": int(longest["rank"]),
            "median_own_ns": float(part["own_ns"].median()), "slowest_rank": int(worst["rank"]),
            "slowest_excess_ns": float(worst["excess_ns"]),
        })  # fmt: skip
    columns = ["step", "ranks", "min_ns", "median_ns", "mean_ns", "max_ns", "longest_rank", "median_own_ns",
               "slowest_rank", "slowest_excess_ns"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _spread(values: pd.Series) -> dict:
    """Return min, median and max of `values` (ns), or zeros when there are none."""
    v = values.dropna()
    if v.empty:
        return {"min": 0.0, "median": 0.0, "max": 0.0}
    return {"min": float(v.min()), "median": float(v.median()), "max": float(v.max())}
