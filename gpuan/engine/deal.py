"""Which process reads which rank: a run's per-rank sources dealt to the processes of a distributed command
(``gpuan replay``, and ``gpuan info|convert|cycles|sol RUN_DIR`` under ``mpirun``), and each process's
reading of its own ranks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from gpuan.errors import TraceError, UsageError
from gpuan.options import REPLAY_DEALS

if TYPE_CHECKING:
    from gpuan.engine.procs import Procs
    from gpuan.trace.inputs import RankSource, RunSources
    from gpuan.trace.projection import Projection
    from gpuan.trace.table import Trace


def deal(sizes: list[int], n_procs: int, how: str = "round-robin") -> list[int]:
    """Return the process of each source: source i (in rank order) goes to process i % n_procs
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


def owners(sources: RunSources, n_procs: int, how: str = "round-robin") -> np.ndarray:
    """Return, indexed by rank number, the process that reads that rank (-1 where no source has it)."""
    ranks = sources.ranks
    owner = np.full(max(ranks, default=-1) + 1, -1, np.int64)
    owner[ranks] = deal([s.size for s in sources], n_procs, how)
    return owner


def read_own(
    sources: RunSources,
    owner: np.ndarray,
    procs: Procs,
    *,
    use_cache: bool = True,
    device: str | None = None,
    projection: Projection | None = None,
) -> dict[int, Trace]:
    """Return the traces of the ranks dealt to this process (`owner`: :func:`owners`), by rank, in rank
    order (each read by :meth:`~gpuan.trace.inputs.RankSource.load` with `use_cache`, `device` and
    `projection`; side by side as one process's read of a run is: :func:`gpuan.trace.load.read_run_files`).
    Raises the same TraceError on every process when any process cannot read one of its ranks."""
    from gpuan.trace.load import read_run_files

    own = [s for s in sources if owner[s.rank] == procs.rank]
    traces: list[Trace] = []
    error, at = None, -1
    try:
        reads = [_reader(s, use_cache, device, projection) for s in own]
        traces = read_run_files(reads, [s.path for s in own], gpu=device == "gpu")
    except _RankError as e:
        # the lowest bad rank of each process is raised (files_side_by_side raises the first in order): the
        # lowest of those is what one process would meet first, so the error does not depend on the number
        # of processes
        error, at = e.error, e.rank
    procs.raise_together(error, at)
    return {s.rank: t for s, t in zip(own, traces)}


class _RankError(Exception):
    """A rank's TraceError, with the rank."""

    def __init__(self, rank: int, error: TraceError) -> None:
        super().__init__(rank, error)
        self.rank, self.error = rank, error


def _reader(
    source: RankSource, use_cache: bool, device: str | None, projection: Projection | None
) -> Callable[[int], Trace]:
    """Return the read of `source` on a given number of threads, whose TraceError names its rank."""

    def read(threads: int) -> Trace:
        try:
            return source.load(use_cache=use_cache, device=device, projection=projection, threads=threads)
        except TraceError as e:
            raise _RankError(source.rank, e) from e

    return read
