"""On process 0: every rank's steps against the median rank, and the positions that make the slow ones slow.

A step's *own* time is its time less the waiting that replay explains (:mod:`gpuan.fleet.measure`): in a
synchronous job every rank's step lasts about as long as the slowest one's, because the others wait for
it in the collectives; what sets the slow rank apart is the time it spent on its own work. The slowest
(rank, step) pairs are those whose own time most exceeds the median rank's in that step. For each, the
positions of its step (ranks of one group, :mod:`gpuan.fleet.align`, share positions) whose op took longer,
or whose idle time before the op was longer, than the median rank's at the same step and position, are
its causes: compute (an op), communication (a communication op's time beyond its waiting) or idle (time
in no op).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from gpuan.fleet.align import Groups

#: at most this many positions are named per slow step ...
CAUSES = 5
#: ... each holding at least this share of the step's excess (the rest is spread thinly over the step)
CAUSE_SHARE = 0.05
#: a step is slow when its own time exceeds the median rank's by more than this share of the latter
#: (below it, the differences are the noise of every step)
SLOW_SHARE = 0.05


#: the parts of a position's own time, each compared with the median rank's: the op's time (less its
#: waiting), the idle time before it in no op, and the idle time before it in a communication call
PARTS = (("op", "op_own"), ("idle", "idle"), ("comm", "gap_comm"))


def runs(pos: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[tuple[int, int], int]]:
    """Return where each (rank, step) run of positions starts in `pos` (ordered by rank, step, position),
    and each run's index by (rank, step)."""
    rank, step = pos["rank"], pos["step"]
    change = np.ones(rank.size, bool)
    change[1:] = (rank[1:] != rank[:-1]) | (step[1:] != step[:-1])
    starts = np.flatnonzero(change)
    return starts, {(int(r), int(s)): i for i, (r, s) in enumerate(zip(rank[starts], step[starts]))}


def _summed(values: np.ndarray, starts: np.ndarray, how=np.add) -> np.ndarray:
    """Return `values` reduced over each run that `starts` begins (none for no runs)."""
    return how.reduceat(values, starts) if starts.size else values[:0]


def step_frame(steps: np.ndarray, pos: dict[str, np.ndarray], comm: np.ndarray) -> pd.DataFrame:
    """Return one row per (rank, step): its window, time, waiting, own time (the time less the waiting), and
    the own time split into compute, communication and idle (summed over its positions, `pos` of
    :func:`position_frame`), beside the median rank's of the step (``median_*``). `comm` tells, per shared
    name code, whether it is a communication op."""
    df = pd.DataFrame(steps).sort_values(["rank", "step"], kind="stable").reset_index(drop=True)
    df["step_ns"] = df["end"] - df["start"]
    df["own_ns"] = df["step_ns"] - df["wait"]
    starts, _ = runs(pos)
    is_comm = comm[pos["name"]]
    sums = pd.DataFrame({
        "rank": pos["rank"][starts], "step": pos["step"][starts],
        "compute_ns": _summed(np.where(is_comm, 0, pos["op_own"]), starts),
        "comm_ns": _summed(np.where(is_comm, pos["op_own"], 0) + pos["gap_comm"], starts),
        "idle_ns": _summed(pos["idle"], starts),
    })  # fmt: skip
    df = df.merge(sums, on=["rank", "step"], how="left")
    df = df.rename(columns={"start": "start_ns", "first": "first_ns", "end": "end_ns", "wait": "wait_ns"})
    for column in ("step_ns", "own_ns", "wait_ns", "compute_ns", "comm_ns", "idle_ns"):
        df[f"median_{column}"] = df.groupby("step")[column].transform("median")
    return df


def position_frame(
    positions: np.ndarray, groups: Groups, reference_names: dict[int, np.ndarray]
) -> dict[str, np.ndarray]:
    """Return, as columns (numpy arrays: a million rows are not worth a DataFrame), one row per (rank, step,
    position) of `positions` (ordered by rank, step, position) with its group and the parts of its own time
    (:data:`PARTS`), each beside the median over the group's ranks at the same step and position
    (``median_<part>``) and its excess over that (``<part>_excess``). Only positions whose op has the
    group's name there take part (``valid``); ``peers`` counts the group's ranks that hold the step."""
    cols = {name: positions[name].astype(np.int64) for name in ("rank", "step", "position", "name", "before")}
    rank_group = np.full(int(cols["rank"].max(initial=-1)) + 1, -1, np.int64)
    rank_group[list(groups.group)] = list(groups.group.values())
    cols["group"] = rank_group[cols["rank"]]
    cols["op_own"] = positions["dur"] - positions["op_wait"]
    cols["idle"] = positions["gap"] - positions["gap_wait"] - positions["gap_comm"]
    cols["gap_comm"] = positions["gap_comm"].astype(np.int64)
    n = positions.size
    valid, peers = np.zeros(n, bool), np.zeros(n, np.int64)
    medians = {part: np.full(n, np.nan) for part, _ in PARTS}
    for g, names in reference_names.items():
        rows = np.flatnonzero(cols["group"] == g)
        if rows.size == 0:
            continue
        position = cols["position"][rows]
        ok = cols["name"][rows] == names[position]
        ranks, r = np.unique(cols["rank"][rows], return_inverse=True)
        s = cols["step"][rows] - cols["step"][rows].min()
        holds = np.zeros((ranks.size, int(s.max()) + 1), bool)
        holds[r, s] = True
        peers[rows] = holds.sum(axis=0)[s]
        valid[rows] = ok
        for part, column in PARTS:
            cube = np.full((ranks.size, holds.shape[1], names.size), np.nan)
            cube[r[ok], s[ok], position[ok]] = cols[column][rows][ok]
            if ok.all() and holds.all():  # every rank holds every step and position: the plain median
                medians[part][rows] = np.median(cube, axis=0)[s, position]
                continue
            with warnings.catch_warnings():  # a position no rank holds has no median: NaN, as meant
                warnings.simplefilter("ignore", RuntimeWarning)
                medians[part][rows] = np.nanmedian(cube, axis=0)[s, position]
    cols["valid"], cols["peers"] = valid, peers
    for part, column in PARTS:
        cols[f"median_{part}"] = medians[part]
        cols[f"{part}_excess"] = np.where(valid, cols[column] - medians[part], np.nan)
    return cols


def _frame(pos: dict[str, np.ndarray], rows) -> pd.DataFrame:
    """Return the `rows` (indices or a slice) of the columns `pos` as a DataFrame."""
    return pd.DataFrame({name: col[rows] for name, col in pos.items()})


def with_excess(steps: pd.DataFrame, pos: dict[str, np.ndarray]) -> pd.DataFrame:
    """Return `steps` with ``excess_ns``: how much longer the rank took on its own than the median rank.

    Where at least two ranks of the rank's group hold the step, that is the sum over the step's positions
    of the excess of each part over the median rank at that position (the median rank's step, position by
    position, is the typical step: one rank's outlier at one position does not move it); else the own time
    less the median own time of all ranks in the step. ``typical_own_ns`` is the own time less the excess;
    ``peers`` the ranks of the rank's group that hold the step (itself included)."""
    starts, _ = runs(pos)
    excess = sum(np.nan_to_num(pos[f"{part}_excess"], nan=0.0) for part, _ in PARTS)
    summed = pd.DataFrame({
        "rank": pos["rank"][starts], "step": pos["step"][starts], "positional": _summed(excess, starts),
        "peers": _summed(pos["peers"], starts, np.maximum),
    })  # fmt: skip
    out = steps.merge(summed, on=["rank", "step"], how="left")
    fallback = out["own_ns"] - out["median_own_ns"]
    out["peers"] = out["peers"].fillna(0).astype(np.int64)
    out["excess_ns"] = np.where(out["peers"] >= 2, out["positional"], fallback)
    out["typical_own_ns"] = out["own_ns"] - out["excess_ns"]
    return out.drop(columns=["positional"])


def slowest(steps: pd.DataFrame, n: int) -> pd.DataFrame:
    """Return the `n` (rank, step) rows whose own time most exceeds the median rank's (by more than
    :data:`SLOW_SHARE` of it), largest first, ties by rank and step."""
    slow = steps[(steps["excess_ns"] > 0) & (steps["excess_ns"] > SLOW_SHARE * steps["typical_own_ns"])]
    return slow.sort_values(["excess_ns", "rank", "step"], ascending=[False, True, True], kind="stable").head(n)


def _candidates(part: pd.DataFrame, comm: np.ndarray, parts: tuple = PARTS) -> pd.DataFrame:
    """Return one row per position of `part` and part of its time (:data:`PARTS`) with a positive excess:
    group, rank, step, position, where (``op`` or ``before``), category, name, before, value_ns, median_ns,
    excess_ns, and ``order`` (the part's place in :data:`PARTS`, for ties); of the `parts` given."""
    out = []
    for what, column in parts:
        c = part[part[f"{what}_excess"] > 0]
        names = c["name"].to_numpy(np.int64)
        if what == "op":
            category = np.where(comm[names], "communication", "compute")
        else:
            category = np.full(len(c), "idle" if what == "idle" else "communication", dtype=object)
        out.append(pd.DataFrame({
            "group": c["group"].to_numpy(), "rank": c["rank"].to_numpy(), "step": c["step"].to_numpy(),
            "position": c["position"].to_numpy(), "where": "op" if what == "op" else "before",
            "category": category, "name": names, "before": c["before"].to_numpy(np.int64),
            "value_ns": c[column].to_numpy(), "median_ns": c[f"median_{what}"].to_numpy(),
            "excess_ns": c[f"{what}_excess"].to_numpy(), "order": [PARTS.index((what, column))] * len(c),
        }))  # fmt: skip
    return pd.concat(out, ignore_index=True)


def causes(slow: pd.DataFrame, pos: dict[str, np.ndarray], comm: np.ndarray, limit: int = CAUSES) -> pd.DataFrame:
    """Return, for each slow (rank, step), the positions whose op time or idle time before the op (in no op,
    or in a communication call) most exceed the median rank's there: at most `limit`, largest first, each
    at least :data:`CAUSE_SHARE` of the step's excess, until they add up to it. Columns: rank, step, group,
    position, where (``op``/``before``), category (compute, communication, idle), name, before (the op that
    ended last before it), value_ns, median_ns, excess_ns, share (of the step's excess)."""
    rows = []
    starts, index = runs(pos)
    ends = np.append(starts[1:], pos["rank"].size)
    for row in slow.itertuples():
        at = index.get((row.rank, row.step))
        if at is None:
            continue
        part = _frame(pos, slice(starts[at], ends[at]))
        found = _candidates(part[part["valid"]], comm)
        found = found[found["excess_ns"] >= CAUSE_SHARE * row.excess_ns]
        found = found.sort_values(["excess_ns", "position", "order"], ascending=[False, True, True], kind="stable")
        total = 0.0
        for c in found.head(limit).itertuples():
            rows.append({
                "rank": row.rank, "step": row.step, "group": c.group, "position": c.position, "where": c.where,
                "category": c.category, "name": c.name, "before": c.before, "value_ns": c.value_ns,
                "median_ns": c.median_ns, "excess_ns": c.excess_ns, "share": c.excess_ns / row.excess_ns,
            })  # fmt: skip
            total += c.excess_ns
            if total >= row.excess_ns:
                break
    columns = ["rank", "step", "group", "position", "where", "category", "name", "before", "value_ns", "median_ns",
               "excess_ns", "share"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def phases(names: np.ndarray, backward: np.ndarray) -> tuple[int, int]:
    """Return (first, last) position of a step pattern's backward pass: the ops `backward` marks among its
    `names` (shared codes); (-1, -1) where it has none."""
    at = np.flatnonzero(backward[names[names >= 0]]) if names.size else np.zeros(0, np.int64)
    return (int(at[0]), int(at[-1])) if at.size else (-1, -1)


def phase_of(position: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Return the phase of each position given its pattern's backward pass (``first``..``last``, -1 for
    none): forward, backward or after backward ("" where the pattern has no backward pass)."""
    return np.where(
        first < 0, "", np.where(position < first, "forward", np.where(position <= last, "backward", "after backward"))
    )


def outliers(pos: dict[str, np.ndarray], comm: np.ndarray) -> pd.DataFrame:
    """Return, per group and position, the (rank, step) whose op time or idle time before the op there most
    exceeds the median rank's (positions where one does), ordered by group and position."""
    excess = np.stack([pos[f"{part}_excess"] for part, _ in PARTS], axis=1)
    excess = np.where(np.isnan(excess), -np.inf, excess)
    part = np.argmax(excess, axis=1)  # the first of equal parts, in the order of PARTS
    best = excess[np.arange(excess.shape[0]), part]
    rows = np.flatnonzero(best > 0)
    # per (group, position) the first row of the largest excess: rows come ordered by rank, step, position
    key = pd.DataFrame({"group": pos["group"][rows], "position": pos["position"][rows], "best": best[rows]})
    first = key.groupby(["group", "position"], sort=True)["best"].idxmax().to_numpy()
    worst = _frame(pos, rows[first])
    out = []
    for i, (what, _) in enumerate(PARTS):
        out.append(_candidates(worst[part[rows[first]] == i], comm, parts=((what, dict(PARTS)[what]),)))
    columns = ["group", "position", "where", "category", "name", "rank", "step", "value_ns", "median_ns", "excess_ns"]
    return pd.concat(out).sort_values(["group", "position"], kind="stable").reset_index(drop=True)[columns]


def replay_of(slow: pd.DataFrame, collectives: pd.DataFrame | None, waits: pd.DataFrame | None) -> pd.DataFrame:
    """Return, per slow (rank, step), what replay says of the collectives the rank entered in that step's
    window: ``collectives``, ``late_at`` (those it arrived at last), ``max_delay_ns`` (how long after the
    first it arrived, at most, where it was last) and ``caused_ns`` (the others' waiting there)."""
    out = pd.DataFrame({"rank": slow["rank"], "step": slow["step"], "collectives": 0, "late_at": 0,
                        "max_delay_ns": 0, "caused_ns": 0})  # fmt: skip
    if collectives is None or waits is None or collectives.empty:
        return out.reset_index(drop=True)
    keyed = collectives.set_index(["process_group", "seq"])
    for i, row in enumerate(slow.itertuples()):
        mine = waits[(waits["rank"] == row.rank) & (waits["enter"] >= row.start_ns) & (waits["enter"] < row.end_ns)]
        if mine.empty:
            continue
        entered = keyed.loc[list(zip(mine["process_group"], mine["seq"]))]
        late = entered[entered["late_rank"] == row.rank]
        out.iloc[i, 2:] = [len(entered), len(late), int(late["skew"].max()) if len(late) else 0,
                           int(late["total_wait"].sum())]  # fmt: skip
    return out.reset_index(drop=True)
