"""The types of loaded inputs that are more than one event table: what :mod:`gpuan.trace` hands an analysis
(``analyse(inputs, ...)``) when the analysis reads lazily or reads several things.

A replay's run is lazy: listing it (:func:`gpuan.trace.ranks.load_run`) reads names and metadata only,
and each replay process then loads just the ranks dealt to it (:meth:`RankSource.load`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuan.trace.table import Trace

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class RankSource:
    """One execution rank's events, not yet read: `path` (a trace file, or an OTF2 anchor with `otf2` set)
    and its size in bytes (what a size-balanced deal weighs)."""

    rank: int
    path: Path
    size: int
    otf2: bool = False

    def load(self) -> Trace:
        """Return this rank's trace (its ``rank`` column set); raises TraceError naming a bad file."""
        # the readers load on first use: listing a run, and the analyses that only type their inputs
        # with this module, need none of them
        if self.otf2:
            from gpuan.trace.otf2 import read_otf2

            return read_otf2(self.path, ranks=[self.rank])
        from gpuan.trace.load import load

        return load(self.path, rank=self.rank)


@dataclass(frozen=True)
class RunSources:
    """The per-rank sources of a run (a directory of per-rank traces, or an OTF2 archive), ordered by
    rank; `path` is the run as it was named."""

    path: str
    sources: tuple[RankSource, ...]

    def __iter__(self) -> Iterator[RankSource]:
        return iter(self.sources)

    def __len__(self) -> int:
        return len(self.sources)

    @property
    def ranks(self) -> list[int]:
        """Return the ranks of the run, in order."""
        return [s.rank for s in self.sources]


@dataclass(frozen=True)
class CycleTable:
    """A cycle CSV read back (:func:`gpuan.trace.cycle_csv.read_cycle_csv`): per-position rows
    (``kernel_name``, ``avg_duration_us``, ``min_duration_us``, ``max_duration_us``, ``stddev_us``) plus
    its metadata rows (0 where absent); `path` names it in reports."""

    path: str
    rows: pd.DataFrame
    iterations: int = 0
    avg_cycle_us: float = 0.0
