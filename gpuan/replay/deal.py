"""Which replay process reads which rank: the run directory's per-rank sources, dealt to the processes.

A source is one rank's events: a trace file of a per-rank directory, or one rank of an OTF2 archive.
Listing them reads names (and, for OTF2, the definitions) only, so every process can list them all and
then read just its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpuan.errors import TraceError
from gpuan.trace.load import load, rank_files, rank_from_name
from gpuan.trace.otf2 import anchor_of, otf2_ranks, read_otf2
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


def sources(run: str | os.PathLike) -> list[Source]:
    """Return the per-rank sources of a run directory (or OTF2 archive), ordered by rank.

    A file's rank is the one in its name (``rank3.json.gz``, ``trace_r12.json``), else its position."""
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
    files = rank_files(run)
    named = [rank_from_name(p) for p in files]
    if all(r is not None for r in named):
        ranks = named
    else:
        ranks = list(range(len(files)))
    if len(set(ranks)) != len(ranks):
        raise TraceError(run, f"two files claim the same rank ({sorted(ranks)})")
    found = sorted(zip(ranks, files))
    return [Source(r, p, p.stat().st_size) for r, p in found]


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
