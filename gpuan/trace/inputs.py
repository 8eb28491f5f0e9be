"""The types of loaded inputs that are more than one event table: what :mod:`gpuan.trace` hands an analysis
(``analyse(inputs, ...)``) when the analysis reads lazily or reads several things.

A replay's run is lazy: listing it (:func:`gpuan.trace.ranks.load_run`) reads names and metadata only,
and each replay process then loads just the ranks dealt to it (:meth:`RankSource.load`). A tensor-access
log is lazy too: :class:`TensorInputs` maps and decodes it one window at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuan.trace.table import Trace

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from gpuan.trace.gguf_map import ModelMap
    from gpuan.trace.projection import Projection
    from gpuan.trace.tensorlog.read import TensorLog


@dataclass(frozen=True)
class RankSource:
    """One execution rank's events, not yet read: `path` (a trace file, or an OTF2 anchor with `otf2` set)
    and its size in bytes (what a size-balanced deal weighs)."""

    rank: int
    path: Path
    size: int
    otf2: bool = False

    def load(
        self,
        *,
        use_cache: bool = True,
        device: str | None = None,
        projection: Projection | None = None,
        threads: int | None = None,
    ) -> Trace:
        """Return this rank's trace (its ``rank`` column set), read as :func:`gpuan.trace.load.load` reads
        a file (`use_cache`, `device`, `projection`, `threads`; an OTF2 rank ignores all but `projection`);
        raises TraceError naming a bad file."""
        # the readers load on first use: listing a run, and the analyses that only type their inputs
        # with this module, need none of them
        if self.otf2:
            from gpuan.trace.load import projected
            from gpuan.trace.otf2 import read_otf2

            return projected(read_otf2(self.path, ranks=[self.rank]), projection)
        from gpuan.trace.load import load

        return load(
            self.path, rank=self.rank, use_cache=use_cache, device=device, projection=projection, threads=threads
        )


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


@dataclass(frozen=True)
class TensorInputs:
    """What a tensor-access analysis reads (:func:`gpuan.trace.tensor_inputs.load_tensor_inputs`): `log`
    (the opened log; its entries stay on disk until :meth:`windows` maps them), `model` (the GGUF layout),
    `units` (the tensors and expert slices accesses are joined to, sorted by offset: start, end, tensor,
    expert), `names` (the tensor name table, or None) and `buffers` (buffer events, or None)."""

    log: TensorLog
    model: ModelMap
    units: pd.DataFrame
    names: pd.DataFrame | None = None
    buffers: pd.DataFrame | None = None

    def span(self) -> tuple[int, int]:
        """Return the timestamps (ns) of the log's first and last used entries."""
        from gpuan.trace.tensorlog.read import entries

        first, last = entries(self.log, 0, 1), entries(self.log, self.log.entries - 1, self.log.entries)
        return int(first["timestamp_ns"][0]), int(last["timestamp_ns"][0])

    def token_hint(self) -> int:
        """Return a first size for per-token arrays: one more than the larger token id of the first and last
        entries. Only a hint: a corrupt last entry must not size those arrays before its window is checked
        (:meth:`windows` refuses it), so ids beyond any token position are left out."""
        from gpuan.trace.tensorlog.formats import TOKEN_LIMIT
        from gpuan.trace.tensorlog.read import entries

        ends = [entries(self.log, i, i + 1)["token_id"][0] for i in (0, self.log.entries - 1)]
        return max([int(t) for t in ends if t < TOKEN_LIMIT], default=0) + 1

    def windows(self, rows: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """Yield (index of the window's first entry, its accesses as columns: see
        :mod:`gpuan.trace.tensorlog.columns`) over the used entries, `rows` entries at a time. Each window is
        its own memory mapping, checked, decoded and dropped before the next, so resident memory stays near
        one window however big the log."""
        from gpuan.trace.tensorlog.columns import accesses
        from gpuan.trace.tensorlog.read import windows

        for start, window in windows(self.log, rows):
            columns = accesses(window, self.log.format)
            del window
            yield start, columns
