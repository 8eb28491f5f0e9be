"""Totals over the gathered records, on the engine: stragglers per (step, rank) and the collectives'
traffic per (src, dst), as sorts and segmented reductions over :class:`~gpuan.replay.records.Records`
(numpy or CuPy). Every sum here is of integers, hence the same in any order, except the collective bytes
per pair: see :func:`pair_traffic`."""

from __future__ import annotations

import numpy as np

from gpuan.arrays import stable_argsort, to_host, unique_rows
from gpuan.replay.comms import N_TO_ONE, ONE_TO_N, OP, OPS
from gpuan.replay.records import Records, find_sorted, lexsort, reduceat, run_numbers, run_starts

_RING = np.array([op in ("all_reduce", "all_gather", "reduce_scatter") for op in OPS], bool)
_FROM_ROOT = np.array([op in ONE_TO_N for op in OPS], bool)
_ROOTED = np.array([op in ONE_TO_N | N_TO_ONE for op in OPS], bool)


def _per_group(xp, reduce: str, group, values, n_groups: int):
    """Return `reduce` ("add" or "maximum") of int64 `values` per group 0..n_groups-1, 0 where a group has
    none: a sort and a segmented reduction, exact for integers."""
    out = xp.zeros(n_groups, np.int64)
    if group.size:
        by = stable_argsort(xp, group)
        starts = run_starts(xp, group[by])
        out[group[by][starts]] = reduceat(xp, reduce, values[by].astype(np.int64), starts)
    return out


def with_waits(calls: Records, waits: Records) -> tuple[Records, Records]:
    """Return (the calls that have a wait record, their waits), row for row: the collective calls matched."""
    xp = calls.xp
    key = calls["rank"].astype(np.int64) * (1 << 40) + calls["row"]
    want = waits["rank"].astype(np.int64) * (1 << 40) + waits["row"]
    order = stable_argsort(xp, key)
    at, hit = find_sorted(xp, key[order], want)
    return calls[order[at[hit]]], waits[hit]


def stragglers(calls: Records, waits: Records, collectives: Records, messages: Records) -> dict[str, np.ndarray]:
    """Return the straggler table's columns (host arrays), one row per (step, rank) that took part in a
    collective, arrived last to one, or sent a message late: collectives, own wait, mean and max arrival
    delay, times last, the wait caused in collectives and in point-to-point, their total; ordered by the
    total caused (largest first), then step and rank."""
    xp = calls.xp
    mine, wait = with_waits(calls, waits)
    blamed = collectives[(collectives["present"] > 1) & (collectives["late_rank"] >= 0)]
    late = messages[messages["late_sender"] > 0]
    steps = (mine["step"], blamed["step"], late["step"])
    step = xp.concatenate(steps)
    rank = xp.concatenate((mine["rank"], blamed["late_rank"], late["src"]))
    order = lexsort(xp, (rank, step))
    starts = run_starts(xp, step[order], rank[order])
    group = xp.empty(order.size, np.int64)
    group[order] = run_numbers(xp, starts, order.size)  # each row's (step, rank), rows in `steps` order
    ends = np.cumsum([s.size for s in steps]).tolist()
    own, caused, sent_late = group[: ends[0]], group[ends[0] : ends[1]], group[ends[1] :]
    n = starts.size
    count = _per_group(xp, "add", own, xp.ones(own.size, np.int64), n)
    columns = {
        "step": step[order][starts],
        "rank": rank[order][starts],
        "collectives": count,
        "own_wait": _per_group(xp, "add", own, wait["wait"], n),
        # integer sums of ns are exact, so this is the mean pandas computes
        "mean_delay": _per_group(xp, "add", own, wait["delay"], n).astype(np.float64) / xp.maximum(count, 1),
        "max_delay": _per_group(xp, "maximum", own, wait["delay"], n),
        "late": _per_group(xp, "add", own, wait["culprit"], n),
        "caused_wait": _per_group(xp, "add", caused, blamed["total_wait"], n),
        "caused_p2p_wait": _per_group(xp, "add", sent_late, late["late_sender"], n),
    }
    columns["caused_total"] = columns["caused_wait"] + columns["caused_p2p_wait"]
    ranked = lexsort(xp, (columns["rank"], columns["step"], -columns["caused_total"]))
    return {name: to_host(col[ranked]) for name, col in columns.items()}


def pair_traffic(per_call: Records, pg_order) -> dict[str, np.ndarray]:
    """Return the collectives' traffic per (src, dst) as host columns ``src``, ``dst``, ``bytes`` (float,
    summed in collective order) and ``messages``, ordered by src and dst. `per_call` are the matched
    collective calls; ``pg_order(pg ids)`` gives each process group's place in the tables' order (by
    name). A collective of two or more members moves the traffic of its usual algorithm: a ring for
    all-reduce (twice the bytes), all-gather and reduce-scatter; every pair for all-to-all, each member's
    message split evenly; root to each or each to root for rooted ones.

    Finding the transfers is array work; their sum per pair is not: it adds float shares in collective
    order, one at a time (numpy's ``add.at``), on the host, since a parallel sum (pairwise, or atomics on
    a GPU) rounds differently and the table must not depend on the engine."""
    xp = per_call.xp
    if per_call.size == 0:
        return {name: np.zeros(0, np.int64) for name in ("src", "dst", "bytes", "messages")}
    pg = pg_order(per_call["pg"])
    by = lexsort(xp, (per_call["rank"], per_call["seq"], pg))
    calls, pg = per_call[by], pg[by]
    starts = run_starts(xp, pg, calls["seq"])  # the collectives in the tables' order, members by rank
    which = run_numbers(xp, starts, calls.size)
    n = xp.diff(xp.append(starts, calls.size))
    op, rank = calls["op"][starts].astype(np.int64), calls["rank"].astype(np.int64)
    size = reduceat(xp, "maximum", calls["nbytes"], starts).astype(np.float64)
    members, at = n[which], xp.arange(calls.size) - starts[which]
    ring = (xp.asarray(_RING)[op] & (n >= 2))[which]
    per_step = size * (n - 1) / n * xp.where(op == OP["all_reduce"], 2, 1)
    to = starts[which] + (at + 1) % members
    transfers = [(which[ring], rank[ring], rank[to][ring], per_step[which][ring])]  # (collective, src, dst, bytes)
    a2a = xp.flatnonzero(((op == OP["all_to_all"]) & (n >= 2))[which])
    if a2a.size:  # each member to every other member of its collective
        fan = members[a2a]
        first = xp.cumsum(fan) - fan
        out = xp.arange(int(fan.sum()))
        of = xp.searchsorted(first, out, side="right") - 1
        src, dst = a2a[of], starts[which[a2a[of]]] + out - first[of]
        src, dst = src[src != dst], dst[src != dst]
        transfers.append((which[src], rank[src], rank[dst], calls["nbytes"][src] / members[src]))
    peer = calls["peer"][starts].astype(np.int64)
    root = xp.where(peer >= 0, peer, rank[starts])[which]
    leaf = (xp.asarray(_ROOTED)[op] & (n >= 2))[which] & (rank != root)
    down = xp.asarray(_FROM_ROOT)[op][which][leaf]
    transfers.append(
        (which[leaf], xp.where(down, root[leaf], rank[leaf]), xp.where(down, rank[leaf], root[leaf]), size[which][leaf])
    )
    coll, src, dst, nbytes = (to_host(xp.concatenate([t[i] for t in transfers])) for i in range(4))
    in_order = np.argsort(coll, kind="stable")
    pairs, index = unique_rows([src[in_order], dst[in_order]])
    totals = np.zeros(len(pairs), np.float64)
    np.add.at(totals, index, nbytes[in_order])
    return {
        "src": pairs[:, 0],
        "dst": pairs[:, 1],
        "bytes": totals,
        "messages": np.bincount(index, minlength=len(pairs)),
    }
