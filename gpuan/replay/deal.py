"""Which replay process reads which rank: the run directory's per-rank sources, dealt to the processes.

A source is one rank's events: a trace file of a per-rank directory, or one rank of an OTF2 archive.
Listing them reads names and metadata only (each file's own rank, OTF2 definitions), never events, so
every process can list them all and then read just its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpuan.errors import TraceError
from gpuan.replay.procs import Procs
from gpuan.trace.load import load
from gpuan.trace.otf2 import anchor_of, otf2_ranks, read_otf2
from gpuan.trace.ranks import OwnRanks, own_rank, own_ranks, ranked_files
from gpuan.trace.table import Trace

DEALS = ("round-robin", "size")


@dataclass(frozen=True)
class Source:
    """One execution rank's events: `path` (a trace file, or an OTF2 anchor with `otf2` set) and its size
    in bytes (what the size-balanced deal weighs)."""

    rank: int
    path: Path
    size: int
    otf2: bool = False

    def read(self) -> Trace:
        """Return this rank's trace (its ``rank`` column set)."""
        if self.otf2:
            return read_otf2(self.path, ranks=[self.rank])
        return load(self.path, rank=self.rank)


def sources(run: str | os.PathLike, find_own: OwnRanks = own_ranks) -> list[Source]:
    """Return the per-rank sources of a run directory (or OTF2 archive), ordered by rank.

    A file's rank follows the rule of every command (:func:`gpuan.trace.ranks.ranked_files`); `find_own`
    finds the files' own ranks (the replay shares that work among its processes)."""
    run = Path(run)
    anchor = anchor_of(run)
    if anchor is not None:
        sizes = _otf2_sizes(anchor)
        ranks = otf2_ranks(anchor)
        if not ranks:
            raise TraceError(anchor, "OTF2 archive without ranks (no location groups)")
        return [Source(r, anchor, sizes.get(r, 0), otf2=True) for r in ranks]
    if not run.is_dir():
        raise TraceError(run, "not a run directory (expected a directory of per-rank traces or an OTF2 archive)")
    return [Source(f.rank, f.path, f.path.stat().st_size) for f in ranked_files(run, find_own)]


def shared_own_ranks(procs: Procs) -> OwnRanks:
    """Return a finder of files' own ranks that shares the work among the replay processes: process p
    looks at files p, p + P, ... of the listing, and every process gets every answer."""

    def find(files: list[Path]) -> list[int | None]:
        found: dict[int, int | None] = {}
        for part in procs.allgather_small({i: own_rank(files[i]) for i in range(procs.rank, len(files), procs.size)}):
            found.update(part)
        return [found[i] for i in range(len(files))]

    return find


def _otf2_sizes(anchor: Path) -> dict[int, int]:
    # Score-P writes one <location>.evt per location; with one location per rank its number is the rank
    d = anchor.with_suffix("")
    sizes = {}
    if d.is_dir():
        for f in d.glob("*.evt"):
            if f.stem.isdigit():
                sizes[int(f.stem)] = f.stat().st_size
    return sizes


def deal(sizes: list[int], n_procs: int, how: str = "round-robin") -> list[int]:
    """Return the replay process of each source: source i (in rank order) goes to process i % n_procs
    ("round-robin"), or the largest sources go first, each to the least loaded process ("size")."""
    if how not in DEALS:
        raise ValueError(f"unknown deal {how!r}; choose from {', '.join(DEALS)}")
    if how == "round-robin":
        return [i % n_procs for i in range(len(sizes))]
    load_of = [0] * n_procs
    owner = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        p = min(range(n_procs), key=lambda q: (load_of[q], q))
        owner[i] = p
        load_of[p] += max(sizes[i], 1)
    return owner
