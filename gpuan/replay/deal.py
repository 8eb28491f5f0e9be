"""Which replay process reads which rank: the run's per-rank sources dealt to the processes."""

from __future__ import annotations

import numpy as np

from gpuan.errors import UsageError
from gpuan.options import REPLAY_DEALS
from gpuan.trace.inputs import RunSources


def deal(sizes: list[int], n_procs: int, how: str = "round-robin") -> list[int]:
    """Return the replay process of each source: source i (in rank order) goes to process i % n_procs
    ("round-robin"), or the largest sources go first, each to the least loaded process ("size")."""
    if how not in REPLAY_DEALS:
        raise UsageError(f"unknown deal {how!r}; choose from {', '.join(REPLAY_DEALS)}")
    if how == "round-robin":
        return [i % n_procs for i in range(len(sizes))]
    load_of = [0] * n_procs
    owner = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        least = min(range(n_procs), key=lambda proc: (load_of[proc], proc))
        owner[i] = least
        load_of[least] += max(sizes[i], 1)
    return owner


def owners(sources: RunSources, n_procs: int, how: str) -> np.ndarray:
    """Return, indexed by rank number, the process that reads that rank (-1 where no source has it)."""
    ranks = sources.ranks
    owner = np.full(max(ranks, default=-1) + 1, -1, np.int64)
    owner[ranks] = deal([s.size for s in sources], n_procs, how)
    return owner
