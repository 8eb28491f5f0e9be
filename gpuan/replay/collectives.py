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
"""

from __future__ import annotations

import numpy as np

from gpuan.replay.comms import CALL, N_TO_ONE, ONE_TO_N, OP, OPS

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


def owner_of(pg: np.ndarray, seq: np.ndarray, n_procs: int) -> np.ndarray:
    """Return the replay process that matches each collective (the same for all of its records)."""
    mixed = (pg.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ seq.astype(np.uint64)
    return (mixed % np.uint64(n_procs)).astype(np.int64)


def by_collective(recs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (the order that sorts `recs` by group, number and rank; where each collective starts in that
    order; the collective of each sorted record, numbered from 0)."""
    order = np.lexsort((recs["rank"], recs["seq"], recs["pg"]))
    pg, seq = recs["pg"][order], recs["seq"][order]
    starts = np.concatenate(([0], np.flatnonzero((pg[1:] != pg[:-1]) | (seq[1:] != seq[:-1])) + 1))
    group = np.repeat(np.arange(starts.size), np.diff(np.append(starts, recs.size)))
    return order, starts, group


def match(recs: np.ndarray, offsets: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Return (per-record waits, dtype :data:`WAIT`, in the order of `recs`; one row per collective, dtype
    :data:`COLLECTIVE`, ordered by group and number) for collective records (dtype ``CALL``) that hold all
    the present members' records of each collective. `offsets[rank]` (ns) is subtracted from the
    times of that rank's records first (clock alignment)."""
    assert recs.dtype == CALL
    enter = recs["enter"].copy()
    leave = recs["leave"].copy()
    if offsets is not None and recs.size:
        enter -= offsets[recs["rank"]]
        leave -= offsets[recs["rank"]]
    waits = np.zeros(recs.size, WAIT)
    if recs.size == 0:
        return waits, np.zeros(0, COLLECTIVE)
    order, starts, group = by_collective(recs)
    calls = _Sorted(recs[order], enter[order], leave[order], starts, group)
    waits[order] = calls.waits()
    return waits, calls.collectives()


class _Sorted:
    """Collective call records sorted by collective (group, number) and rank, with their (aligned) Enter
    and Leave, where each collective starts, and the collective of each record."""

    def __init__(self, recs: np.ndarray, enter: np.ndarray, leave: np.ndarray, starts: np.ndarray, group: np.ndarray):
        self.recs, self.enter, self.leave, self.starts, self.group = recs, enter, leave, starts, group
        self.first_enter = np.minimum.reduceat(enter, starts)
        self.last_enter = np.maximum.reduceat(enter, starts)
        # the culprit: the latest arriver, the lowest rank among equals (records are by rank within a group)
        is_last = enter == self.last_enter[group]
        self.late_at = np.minimum.reduceat(np.where(is_last, np.arange(recs.size), recs.size), starts)
        self.wait = np.maximum(0, np.minimum(self._waited_for(), leave) - enter)

    def _waited_for(self) -> np.ndarray:
        """Return, per record, the Enter its member waits for: the latest arriver's, or for rooted
        collectives the root's (the root waits for nobody) / on the root, the last sender's."""
        recs, enter, group = self.recs, self.enter, self.group
        rank, root = recs["rank"], recs["peer"]
        until = self.last_enter[group].copy()
        by_root = _BY_ROOT[recs["op"]] & (root >= 0)
        if by_root.any():
            root_enter = _enter_of(rank, root, group, enter)
            known = by_root & (root_enter != np.iinfo(np.int64).min)
            until[known] = root_enter[known]
            until[known & (rank == root)] = enter[known & (rank == root)]
        to_root = _TO_ROOT[recs["op"]] & (root >= 0)
        if to_root.any():
            others_last = np.maximum.reduceat(np.where(rank == root, np.iinfo(np.int64).min, enter), self.starts)
            until[to_root] = np.where(rank[to_root] == root[to_root], others_last[group][to_root], enter[to_root])
        return until

    def waits(self) -> np.ndarray:
        """Return the :data:`WAIT` of each record, in the sorted order."""
        out = np.zeros(self.recs.size, WAIT)
        out["rank"], out["row"], out["wait"] = self.recs["rank"], self.recs["row"], self.wait
        out["delay"] = self.enter - self.first_enter[self.group]
        # nobody is late when all arrive at once
        late = (np.arange(self.recs.size) == self.late_at[self.group]) & (self.last_enter > self.first_enter)[
            self.group
        ]
        out["culprit"] = late
        return out

    def collectives(self) -> np.ndarray:
        """Return one :data:`COLLECTIVE` row per collective."""
        recs, starts = self.recs, self.starts
        first_enter, last_enter = self.first_enter, self.last_enter
        last_leave = np.maximum.reduceat(self.leave, starts)
        op = recs["op"][starts]
        present = np.diff(np.append(starts, recs.size)).astype(np.int32)
        out = np.zeros(starts.size, COLLECTIVE)
        out["pg"], out["seq"], out["op"] = recs["pg"][starts], recs["seq"][starts], op
        out["step"] = np.minimum.reduceat(recs["step"], starts)
        out["members"] = np.maximum.reduceat(recs["members"], starts)
        out["present"] = present
        out["nbytes"] = np.maximum.reduceat(recs["nbytes"], starts)
        out["first_enter"], out["last_enter"], out["last_leave"] = first_enter, last_enter, last_leave
        out["late_rank"] = np.where(last_enter > first_enter, recs["rank"][self.late_at], -1)
        out["skew"] = last_enter - first_enter
        out["total_wait"] = np.add.reduceat(self.wait, starts)
        out["max_wait"] = np.maximum.reduceat(self.wait, starts)
        out["transfer"] = np.maximum(0, last_leave - last_enter)
        out["complete"] = present >= out["members"]
        same_op = np.minimum.reduceat(recs["op"], starts) == np.maximum.reduceat(recs["op"], starts)
        sizes = np.where(recs["nbytes"] > 0, recs["nbytes"], -1)
        smallest = np.minimum.reduceat(np.where(sizes < 0, np.iinfo(np.int64).max, sizes), starts)
        largest = np.maximum.reduceat(sizes, starts)
        # each member of an all-to-all sends what it has for the others (alltoallv, uneven splits)
        out["consistent"] = same_op & ((largest < 0) | (smallest == largest) | (op == OP["all_to_all"]))
        return out


def _enter_of(rank: np.ndarray, who: np.ndarray, group: np.ndarray, enter: np.ndarray) -> np.ndarray:
    """Return, per record, the Enter of rank `who[i]`'s record in the same group (int64 min if absent)."""
    key = group.astype(np.int64) * (1 << 32) + rank
    want = group.astype(np.int64) * (1 << 32) + who
    order = np.argsort(key, kind="stable")
    at = np.clip(np.searchsorted(key[order], want), 0, key.size - 1)
    hit = key[order][at] == want
    return np.where(hit, enter[order][at], np.iinfo(np.int64).min)


#: one member's Leave minus the mean Leave of its collective
DEVIATION = np.dtype([("rank", np.int32), ("dev", np.float64)])


def leave_deviations(recs: np.ndarray) -> np.ndarray:
    """Return, for each member of each complete collective among `recs` (all present members' records of
    each collective), its Leave minus the collective's mean Leave (dtype :data:`DEVIATION`)."""
    if recs.size == 0:
        return np.zeros(0, DEVIATION)
    order, starts, group = by_collective(recs)
    by_group = recs[order]
    counts = np.diff(np.append(starts, by_group.size))
    mean_leave = np.add.reduceat(by_group["leave"].astype(np.float64), starts) / counts
    full = (counts >= np.maximum.reduceat(by_group["members"], starts)) & (counts > 1)
    keep = full[group]
    out = np.zeros(int(keep.sum()), DEVIATION)
    out["rank"], out["dev"] = by_group["rank"][keep], by_group["leave"][keep] - mean_leave[group][keep]
    return out


def clock_offsets(deviations: np.ndarray, n_ranks: int) -> np.ndarray:
    """Return each rank's estimated clock offset in ns (0 for ranks without evidence): the median of its
    :func:`leave_deviations`, since all members of a collective leave it nearly together. Medians keep
    the odd collective whose members leave apart from moving the estimate."""
    out = np.zeros(n_ranks, np.int64)
    order = np.lexsort((deviations["dev"], deviations["rank"]))
    by_rank = deviations[order]
    for rank in np.unique(by_rank["rank"]):
        out[rank] = int(np.round(np.median(by_rank["dev"][by_rank["rank"] == rank])))
    return out
