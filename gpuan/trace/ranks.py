"""Which rank each trace of a per-rank directory holds: one rule, for every command that reads one.

A file's rank is the one its own metadata gives (Kineto ``distributedInfo.rank``, the rank a gpuan
Parquet file recorded, the one MPI rank of an Nsight Systems export or OTF2 archive), else the number in
its name (``rank3``, ``_r12``, ``-r5``), else its place in the listing. The listing is in natural order
(numbers in names compared as numbers: ``worker9`` before ``worker10``). Two files with one rank are an
error naming both. Finding a file's own rank reads no events (see :mod:`gpuan.trace.kineto.peek`), so a
replay can list a run (:func:`load_run`, its processes sharing the look at the files) and deal its ranks
to its processes before any of them reads one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuan.errors import TraceError
from gpuan.trace.inputs import RankSource, RunSources
from gpuan.trace.load import file_format, sniff
from gpuan.trace.nsys import nsys_rank
from gpuan.trace.otf2 import anchor_of, otf2_ranks
from gpuan.trace.parquet import stored_rank

if TYPE_CHECKING:
    from gpuan.engine.procs import Procs

TRACE_SUFFIXES = (".json", ".json.gz", ".gz", ".sqlite", ".csv", ".parquet", ".otf2")
_RANK_IN_NAME = re.compile(r"(?:rank|_r|-r)[_-]?(\d+)", re.IGNORECASE)
_DIGITS = re.compile(r"(\d+)")

#: finds the own rank (or None) of each file of a listing
OwnRanks = Callable[[list[Path]], list["int | None"]]


@dataclass(frozen=True)
class RankedFile:
    """A trace file of a per-rank directory and the rank it holds; ``how`` the rank was found: "its
    metadata", "its name" or "its place in the listing"."""

    rank: int
    path: Path
    how: str


def natural_key(name: str) -> tuple:
    """Return the sort key of a file name that compares the numbers in it as numbers ("w9" < "w10");
    names equal that way ("r01", "r1") fall back to plain order."""
    parts = _DIGITS.split(name)
    # split keeps text at even and digits at odd positions: the key compares like with like
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def trace_files(directory: Path) -> list[Path]:
    """Return the trace files of a per-rank directory in natural order (caches excluded). A directory
    without any, or with files of more than one format, raises TraceError naming it; a file whose first
    bytes are no trace raises it naming the file."""
    files = sorted(
        (
            p
            for p in directory.iterdir()
            if p.is_file() and p.name.endswith(TRACE_SUFFIXES) and not p.name.endswith(".gpuan.parquet")
        ),
        key=lambda p: natural_key(p.name),
    )
    if not files:
        names = ", ".join("*" + s for s in TRACE_SUFFIXES)
        raise TraceError(directory, f"directory holds no trace files ({names})")
    formats = {file_format(p) for p in files}
    if len(formats) > 1:
        # each format keeps its own clock: their times cannot share one axis
        raise TraceError(directory, f"directory mixes trace formats ({', '.join(sorted(formats))})")
    return files


def rank_in_name(path: Path) -> int | None:
    """Return the rank written in a file name ("rank3.json.gz", "trace_r12.json"), or None."""
    m = _RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


def own_rank(path: Path) -> int | None:
    """Return the rank a trace file's own metadata gives it, or None, reading no events: a Kineto file's
    ``distributedInfo.rank``, a gpuan Parquet file's recorded rank, the MPI rank of an Nsight Systems
    export or of an OTF2 archive that holds one rank. A file whose metadata cannot be read answers None
    (reading the file then says what is wrong with it)."""
    if anchor_of(path) is not None:
        try:
            ranks = otf2_ranks(path)
        except TraceError:
            return None
        return ranks[0] if len(ranks) == 1 else None
    fmt = sniff(path)
    if fmt == "parquet":
        return stored_rank(path)
    if fmt == "kineto":
        from gpuan.trace.kineto.peek import file_rank  # loads the compiled scanner: only when needed

        return file_rank(path)
    if fmt == "nsys":
        return nsys_rank(path)
    return None


def own_ranks(files: list[Path]) -> list[int | None]:
    """Return :func:`own_rank` of each file."""
    return [own_rank(p) for p in files]


def ranked_files(directory: Path, find_own: OwnRanks = own_ranks) -> list[RankedFile]:
    """Return the trace files of a per-rank directory with their ranks, ordered by rank (see the module's
    rule). `find_own` finds the files' own ranks (a replay shares that work among its processes). Raises
    TraceError naming the directory when the listing is bad (:func:`trace_files`) or two files hold one
    rank."""
    files = trace_files(directory)
    own = find_own(files)
    ranked = []
    for i, (p, r) in enumerate(zip(files, own)):
        named = rank_in_name(p)
        if r is not None:
            ranked.append(RankedFile(r, p, "its metadata"))
        elif named is not None:
            ranked.append(RankedFile(named, p, "its name"))
        else:
            ranked.append(RankedFile(i, p, "its place in the listing"))
    ranked.sort(key=lambda f: f.rank)
    for a, b in zip(ranked, ranked[1:]):
        if a.rank == b.rank:
            raise TraceError(
                directory, f"two files hold rank {a.rank}: {a.path.name} ({a.how}) and {b.path.name} ({b.how})"
            )
    return ranked


def load_run(run: str | os.PathLike, procs: Procs | None = None) -> RunSources:
    """Return the per-rank sources of a run directory (or OTF2 archive), ordered by rank, reading no
    events: each source's :meth:`~gpuan.trace.inputs.RankSource.load` reads its rank later.

    A file's rank follows the rule of every command (:func:`ranked_files`). With `procs` (the processes
    of a distributed replay, every one of which calls this) the processes share the look at the files'
    own ranks, and a run that cannot be listed raises the same TraceError on every process, so that none
    is left waiting in the replay's exchanges. Raises TraceError naming the run (or the file) when it
    cannot be listed."""
    if procs is None:
        return _list_run(run, own_ranks)
    sources, error = None, None
    try:
        sources = _list_run(run, _shared_own_ranks(procs))
    except TraceError as e:
        error = e
    procs.raise_together(error)
    return sources


def _shared_own_ranks(procs: Procs) -> OwnRanks:
    """Return a finder of files' own ranks that shares the work among `procs`: process p looks at files
    p, p + P, ... of the listing, and every process gets every answer."""

    def find(files: list[Path]) -> list[int | None]:
        """Return the own rank (or None) of each of `files`."""
        found: dict[int, int | None] = {}
        for part in procs.allgather_small({i: own_rank(files[i]) for i in range(procs.rank, len(files), procs.size)}):
            found.update(part)
        return [found[i] for i in range(len(files))]

    return find


def _list_run(run: str | os.PathLike, find_own: OwnRanks) -> RunSources:
    """Return the per-rank sources of a run (:func:`load_run`), `find_own` finding the files' own ranks."""
    path = Path(run)
    anchor = anchor_of(path)
    if anchor is not None:
        sizes = _otf2_sizes(anchor)
        ranks = otf2_ranks(anchor)
        if not ranks:
            raise TraceError(anchor, "OTF2 archive without ranks (no location groups)")
        return RunSources(str(run), tuple(RankSource(r, anchor, sizes.get(r, 0), otf2=True) for r in ranks))
    if not path.is_dir():
        raise TraceError(path, "not a run directory (expected a directory of per-rank traces or an OTF2 archive)")
    files = ranked_files(path, find_own)
    return RunSources(str(run), tuple(RankSource(f.rank, f.path, f.path.stat().st_size) for f in files))


def _otf2_sizes(anchor: Path) -> dict[int, int]:
    # Score-P writes one <location>.evt per location; with one location per rank its number is the rank
    events_dir = anchor.with_suffix("")
    sizes = {}
    if events_dir.is_dir():
        for evt in events_dir.glob("*.evt"):
            if evt.stem.isdigit():
                sizes[int(evt.stem)] = evt.stat().st_size
    return sizes
