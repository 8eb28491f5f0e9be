"""Fetch records of other ranks: from memory when this process owns the rank, over MPI when another does.

Every process holds, for each rank it owns, a table of records with an int64 ``key`` field. A fetch is a
bulk-synchronous round that every process enters together (a process with nothing to ask passes empty
arrays): requests are batched per owner and exchanged with one Alltoallv, answers return with another.
So two processes that want each other's records never wait on each other outside a collective call,
and cannot deadlock. Answers are cached: a key asked twice crosses the network once. The records are
:class:`~gpuan.replay.records.Records` on the engine's device (numpy's or CuPy's); only the loop over the
ranks of a batch is Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuan.arrays import to_host
from gpuan.engine.procs import Procs
from gpuan.replay.records import Records, find_sorted, lexsort, run_starts, send

_REQUEST = np.dtype([("rank", np.int32), ("origin", np.int32), ("key", np.int64)])


@dataclass
class Fetcher:
    """Answers ``fetch(ranks, keys)`` with the records (dtype `dtype`, with ``rank`` and ``key`` fields) that
    the owning processes hold; `owner[rank]` (an array on the engine `xp`) is the process that owns each
    rank."""

    procs: Procs
    owner: Any
    dtype: np.dtype
    xp: Any = np
    local: dict[int, Records] = field(default_factory=dict)  # owned rank → its records, sorted by key
    cache: dict[int, Records] = field(default_factory=dict)  # remote rank → records fetched so far
    rounds: int = 0
    sent: int = 0  # requests that crossed to another process

    def hold(self, rank: int, records: Records | np.ndarray) -> None:
        """Make `records` (of an owned rank; Records, or structured numpy) answerable."""
        self.local[rank] = Records.of(records, self.xp).sort_by("key")

    def fetch(self, ranks, keys) -> tuple[Records, Any]:
        """Return (the record of each (rank, key), a found mask). Collective: every process must call it."""
        xp = self.xp
        ranks = xp.asarray(ranks, np.int32)
        keys = xp.asarray(keys, np.int64)
        remote = self.owner[ranks] != self.procs.rank if ranks.size else xp.zeros(0, bool)
        missing = remote & ~self._cached(ranks, keys)
        req = Records.zeros(int(missing.sum()), _REQUEST, xp)
        req["rank"], req["origin"], req["key"] = ranks[missing], self.procs.rank, keys[missing]
        req = _unique(req)
        self.rounds += 1
        self.sent += req.size
        got = send(self.procs, req, self.owner[req["rank"]].astype(np.int64))
        answers, found = lookup(self.local, got["rank"], got["key"], self.dtype, xp)
        back = send(self.procs, answers[found], got["origin"][found].astype(np.int64))
        for r in to_host(xp.unique(back["rank"])).tolist():
            old = self.cache.get(r, Records.zeros(0, self.dtype, xp))
            self.cache[r] = Records.concat([old, back[back["rank"] == r]], self.dtype, xp).sort_by("key")
        out_local, found_local = lookup(self.local, ranks, keys, self.dtype, xp)
        out_remote, found_remote = lookup(self.cache, ranks, keys, self.dtype, xp)
        return Records.where(remote, out_remote, out_local), xp.where(remote, found_remote, found_local)

    def _cached(self, ranks, keys):
        return lookup(self.cache, ranks, keys, self.dtype, self.xp)[1]


def _unique(req: Records) -> Records:
    """Return the distinct requests, ordered by rank, origin and key (as numpy's unique orders them)."""
    xp = req.xp
    req = req[lexsort(xp, (req["key"], req["origin"], req["rank"]))]
    return req[run_starts(xp, req["rank"], req["origin"], req["key"])]


def lookup(tables: dict[int, Records], ranks, keys, dtype: np.dtype, xp=np) -> tuple[Records, Any]:
    """Return (the record of each (rank, key) in `tables` (rank → records sorted by key), a found mask).
    The loop is over the distinct ranks asked for (a few), each one a vectorised search."""
    out = Records.zeros(ranks.size, dtype, xp)
    found = xp.zeros(ranks.size, bool)
    for r in to_host(xp.unique(ranks)).tolist():
        table = tables.get(r)
        if table is None or table.size == 0:
            continue
        sel = xp.flatnonzero(ranks == r)
        at, hit = find_sorted(xp, table["key"], keys[sel])
        out[sel[hit]] = table[at[hit]]
        found[sel[hit]] = True
    return out, found
