"""Fetch records of other ranks: from memory when this process owns the rank, over MPI when another does.

Every process holds, for each rank it owns, a table of records with an int64 ``key`` field. A fetch is a
bulk-synchronous round that every process enters together (a process with nothing to ask passes empty
arrays): requests are batched per owner and exchanged with one Alltoallv, answers return with another.
So two processes that want each other's records never wait on each other outside a collective call,
and cannot deadlock. Answers are cached: a key asked twice crosses the network once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpuan.engine.procs import Procs

_REQUEST = np.dtype([("rank", np.int32), ("origin", np.int32), ("key", np.int64)])


@dataclass
class Fetcher:
    """Answers ``fetch(ranks, keys)`` with the records (dtype `dtype`, with ``rank`` and ``key`` fields) that
    the owning processes hold; `owner[rank]` is the process that owns each rank."""

    procs: Procs
    owner: np.ndarray
    dtype: np.dtype
    local: dict[int, np.ndarray] = field(default_factory=dict)  # owned rank → its records, sorted by key
    cache: dict[int, np.ndarray] = field(default_factory=dict)  # remote rank → records fetched so far
    rounds: int = 0
    sent: int = 0  # requests that crossed to another process

    def hold(self, rank: int, records: np.ndarray) -> None:
        """Make `records` (of an owned rank) answerable."""
        self.local[rank] = records[np.argsort(records["key"], kind="stable")]

    def fetch(self, ranks: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (the record of each (rank, key), a found mask). Collective: every process must call it."""
        ranks = np.asarray(ranks, np.int32)
        keys = np.asarray(keys, np.int64)
        remote = self.owner[ranks] != self.procs.rank if ranks.size else np.zeros(0, bool)
        missing = remote & ~self._cached(ranks, keys)
        req = np.zeros(int(missing.sum()), _REQUEST)
        req["rank"], req["origin"], req["key"] = ranks[missing], self.procs.rank, keys[missing]
        req = np.unique(req)
        self.rounds += 1
        self.sent += req.size
        got = self.procs.alltoallv(req, self.owner[req["rank"]].astype(np.int64))
        answers, found = lookup(self.local, got["rank"], got["key"], self.dtype)
        answers = answers[found]
        back = self.procs.alltoallv(answers, got["origin"][found].astype(np.int64))
        for r in np.unique(back["rank"]):
            old = self.cache.get(int(r), np.zeros(0, self.dtype))
            new = np.concatenate((old, back[back["rank"] == r]))
            self.cache[int(r)] = new[np.argsort(new["key"], kind="stable")]
        out_local, found_local = lookup(self.local, ranks, keys, self.dtype)
        out_remote, found_remote = lookup(self.cache, ranks, keys, self.dtype)
        out = np.where(remote, out_remote, out_local)
        return out, np.where(remote, found_remote, found_local)

    def _cached(self, ranks: np.ndarray, keys: np.ndarray) -> np.ndarray:
        return lookup(self.cache, ranks, keys, self.dtype)[1]


def lookup(
    tables: dict[int, np.ndarray], ranks: np.ndarray, keys: np.ndarray, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """Return (the record of each (rank, key) in `tables` (rank → records sorted by key), a found mask)."""
    out = np.zeros(ranks.size, dtype)
    found = np.zeros(ranks.size, bool)
    for r in np.unique(ranks):
        table = tables.get(int(r))
        if table is None or table.size == 0:
            continue
        sel = np.flatnonzero(ranks == r)
        at = np.clip(np.searchsorted(table["key"], keys[sel]), 0, table.size - 1)
        hit = table["key"][at] == keys[sel]
        out[sel[hit]] = table[at[hit]]
        found[sel[hit]] = True
    return out, found
