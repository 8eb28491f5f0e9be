"""Collective matching and its wait states, over the records of every member rank of some collectives.

The k-th call of a process group on each member rank is one collective. With Enter/Leave the start and
end of each member's call:
- N x N (all-reduce, all-gather, reduce-scatter, all-to-all, barrier): a member waits
  max(0, min(latest Enter, own Leave) - own Enter); the latest arriver is the culprit;
- Late Broadcast (broadcast, scatter, with a known root): the same against the root's Enter;
- Early Reduce (reduce, gather, with a known root): the root waits for the latest other member.
Transfer time is the last Leave minus the latest Enter. A collective is ``complete`` when all of its
group's members are in the run, ``consistent`` when they agree on the operation and the message size (the
size of an all-to-all may differ between members).

All of it is array work over :class:`~gpuan.replay.records.Records` on the engine their columns are on
(numpy's or CuPy's): sorts, segmented reductions (:func:`~gpuan.replay.records.reduceat`) and gathers.
"""

from __future__ import annotations

import numpy as np

from gpuan.arrays import stable_argsort, to_host
from gpuan.replay.comms import CALL, N_TO_ONE, ONE_TO_N, OP, OPS
from gpuan.replay.records import Records, find_sorted, lexsort, reduceat, run_numbers, run_starts

#: per record: what the owner of its collective found
WAIT = np.dtype([("rank", np.int32), ("row", np.int64), ("wait", np.int64), ("delay", np.int64), ("culprit", np.bool_)])
#: per collective
COLLECTIVE = np.dtype(
    [
        ("pg", np.int64), ("seq", np.int64), ("op", np.int16), ("step", np.int64), ("members", np.int32),
        ("present", np.int32), ("nbytes", np.int64), ("first_enter", np.int64), ("last_enter", np.int64),
        ("late_rank", np.int32), ("skew", np.int64), ("total_wait", np.int64), ("max_wait", np.int64),
        ("transfer", np.int64), ("last_leave", np.int64), ("complete", np.bool_), ("consistent", np.bool_),
    ]
)  # fmt: skip

_BY_ROOT = np.array([OPS[i] in ONE_TO_N for i in range(len(OPS))], bool)
_TO_ROOT = np.array([OPS[i] in N_TO_ONE for i in range(len(OPS))], bool)


def owner_of(pg, seq, n_procs: int):
    """Return the replay process that matches each collective (the same for all of its records)."""
    mixed = (pg.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ seq.astype(np.uint64)
    return (mixed % np.uint64(n_procs)).astype(np.int64)


def by_collective(recs: Records) -> tuple:
    """Return (the order that sorts `recs` by group, number and rank; where each collective starts in that
    order; the collective of each sorted record, numbered from 0)."""
    xp = recs.xp
    order = lexsort(xp, (recs["rank"], recs["seq"], recs["pg"]))
    starts = run_starts(xp, recs["pg"][order], recs["seq"][order])
    return order, starts, run_numbers(xp, starts, recs.size)


def match(recs: np.ndarray | Records, offsets=None) -> tuple[Records, Records]:
    """Return (per-record waits, dtype :data:`WAIT`, in the order of `recs`; one row per collective, dtype
    :data:`COLLECTIVE`, ordered by group and number) for collective records (dtype ``CALL``, structured
    numpy or Records on any engine: the results are on the same) that hold all the present members'
    records of each collective. `offsets[rank]` (ns) is subtracted from the times of that rank's records
    first (clock alignment)."""
    recs = Records.of(recs) if isinstance(recs, np.ndarray) else recs
    assert recs.dtype == CALL
    xp = recs.xp
    enter = recs["enter"].copy()
    leave = recs["leave"].copy()
    if offsets is not None and recs.size:
        shift = xp.asarray(offsets)[recs["rank"]]
        enter -= shift
        leave -= shift
    waits = Records.zeros(recs.size, WAIT, xp)
    if recs.size == 0:
        return waits, Records.zeros(0, COLLECTIVE, xp)
    order, starts, group = by_collective(recs)
    calls = _Sorted(recs[order], enter[order], leave[order], starts, group)
    waits[order] = calls.waits()
    return waits, calls.collectives()


class _Sorted:
    """Collective call records sorted by collective (group, number) and rank, with their (aligned) Enter
    and Leave, where each collective starts, and the collective of each record."""

    def __init__(self, recs: Records, enter, leave, starts, group):
        xp = self.xp = recs.xp
        self.recs, self.enter, self.leave, self.starts, self.group = recs, enter, leave, starts, group
        self.first_enter = reduceat(xp, "minimum", enter, starts)
        self.last_enter = reduceat(xp, "maximum", enter, starts)
        # the culprit: the latest arriver, the lowest rank among equals (records are by rank within a group)
        is_last = enter == self.last_enter[group]
        self.late_at = reduceat(xp, "minimum", xp.where(is_last, xp.arange(recs.size), recs.size), starts)
        self.wait = xp.maximum(0, xp.minimum(self._waited_for(), leave) - enter)

    def _waited_for(self):
        """Return, per record, the Enter its member waits for: the latest arriver's, or for rooted
        collectives the root's (the root waits for nobody) / on the root, the last sender's."""
        xp, recs, enter, group = self.xp, self.recs, self.enter, self.group
        rank, root = recs["rank"], recs["peer"]
        until = self.last_enter[group].copy()
        by_root = xp.asarray(_BY_ROOT)[recs["op"]] & (root >= 0)
        if by_root.any():
            root_enter = _enter_of(xp, rank, root, group, enter)
            known = by_root & (root_enter != np.iinfo(np.int64).min)
            until[known] = root_enter[known]
            until[known & (rank == root)] = enter[known & (rank == root)]
        to_root = xp.asarray(_TO_ROOT)[recs["op"]] & (root >= 0)
        if to_root.any():
            others_last = reduceat(xp, "maximum", xp.where(rank == root, np.iinfo(np.int64).min, enter), self.starts)
            until[to_root] = xp.where(rank[to_root] == root[to_root], others_last[group][to_root], enter[to_root])
        return until

    def waits(self) -> Records:
        """Return the :data:`WAIT` of each record, in the sorted order."""
        xp = self.xp
        out = Records.zeros(self.recs.size, WAIT, xp)
        out["rank"], out["row"], out["wait"] = self.recs["rank"], self.recs["row"], self.wait
        out["delay"] = self.enter - self.first_enter[self.group]
        # nobody is late when all arrive at once
        late = (xp.arange(self.recs.size) == self.late_at[self.group]) & (self.last_enter > self.first_enter)[
            self.group
        ]
        out["culprit"] = late
        return out

    def collectives(self) -> Records:
        """Return one :data:`COLLECTIVE` row per collective."""
        xp, recs, starts = self.xp, self.recs, self.starts
        first_enter, last_enter = self.first_enter, self.last_enter
        last_leave = reduceat(xp, "maximum", self.leave, starts)
        op = recs["op"][starts]
        present = xp.diff(xp.append(starts, recs.size)).astype(np.int32)
        out = Records.zeros(starts.size, COLLECTIVE, xp)
        out["pg"], out["seq"], out["op"] = recs["pg"][starts], recs["seq"][starts], op
        out["step"] = reduceat(xp, "minimum", recs["step"], starts)
        out["members"] = reduceat(xp, "maximum", recs["members"], starts)
        out["present"] = present
        out["nbytes"] = reduceat(xp, "maximum", recs["nbytes"], starts)
        out["first_enter"], out["last_enter"], out["last_leave"] = first_enter, last_enter, last_leave
        out["late_rank"] = xp.where(last_enter > first_enter, recs["rank"][self.late_at], -1)
        out["skew"] = last_enter - first_enter
        out["total_wait"] = reduceat(xp, "add", self.wait, starts)
        out["max_wait"] = reduceat(xp, "maximum", self.wait, starts)
        out["transfer"] = xp.maximum(0, last_leave - last_enter)
        out["complete"] = present >= out["members"]
        same_op = reduceat(xp, "minimum", recs["op"], starts) == reduceat(xp, "maximum", recs["op"], starts)
        sizes = xp.where(recs["nbytes"] > 0, recs["nbytes"], -1)
        smallest = reduceat(xp, "minimum", xp.where(sizes < 0, np.iinfo(np.int64).max, sizes), starts)
        largest = reduceat(xp, "maximum", sizes, starts)
        # each member of an all-to-all sends what it has for the others (alltoallv, uneven splits)
        out["consistent"] = same_op & ((largest < 0) | (smallest == largest) | (op == OP["all_to_all"]))
        return out


def _enter_of(xp, rank, who, group, enter):
    """Return, per record, the Enter of rank `who[i]`'s record in the same group (int64 min if absent)."""
    key = group.astype(np.int64) * (1 << 32) + rank
    want = group.astype(np.int64) * (1 << 32) + who
    order = stable_argsort(xp, key)
    at, hit = find_sorted(xp, key[order], want)
    return xp.where(hit, enter[order][at], np.iinfo(np.int64).min)


#: one member's Leave minus the mean Leave of its collective
DEVIATION = np.dtype([("rank", np.int32), ("dev", np.float64)])


def leave_deviations(recs: Records) -> Records:
    """Return, for each member of each complete collective among `recs` (all present members' records of
    each collective), its Leave minus the collective's mean Leave (dtype :data:`DEVIATION`)."""
    xp = recs.xp
    if recs.size == 0:
        return Records.zeros(0, DEVIATION, xp)
    order, starts, group = by_collective(recs)
    by_group = recs[order]
    counts = xp.diff(xp.append(starts, by_group.size))
    # the Leaves summed as integers, exact on either engine: CuPy's add.reduceat is a cumulative sum over
    # all rows, differenced, which in float64 rounds once the running total passes 2**53 ns
    mean_leave = reduceat(xp, "add", by_group["leave"], starts).astype(np.float64) / counts
    full = (counts >= reduceat(xp, "maximum", by_group["members"], starts)) & (counts > 1)
    keep = full[group]
    out = Records.zeros(int(keep.sum()), DEVIATION, xp)
    out["rank"], out["dev"] = by_group["rank"][keep], by_group["leave"][keep] - mean_leave[group][keep]
    return out


def clock_offsets(deviations: Records, n_ranks: int) -> np.ndarray:
    """Return each rank's estimated clock offset in ns (0 for ranks without evidence), on the host: the
    median of its :func:`leave_deviations`, since all members of a collective leave it nearly together.
    Medians keep the odd collective whose members leave apart from moving the estimate."""
    xp = deviations.xp
    order = lexsort(xp, (deviations["dev"], deviations["rank"]))
    rank, dev = deviations["rank"][order], deviations["dev"][order]
    starts = run_starts(xp, rank)
    counts = xp.diff(xp.append(starts, rank.size))
    # numpy's median: the middle value, or the mean of the two middle values, of each rank's sorted run
    median = (dev[starts + (counts - 1) // 2] + dev[starts + counts // 2]) / 2
    out = np.zeros(n_ranks, np.int64)
    found = xp.round(median).astype(np.int64)
    out[to_host(rank[starts])] = to_host(found)
    return out
