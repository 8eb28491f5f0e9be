"""``gpuan.load``: one entry point for every trace format, a directory of per-rank traces, and the cache."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpuan.errors import TraceError, UsageError
from gpuan.trace import parquet
from gpuan.trace.projection import Projection, apply
from gpuan.trace.source import GZIP_MAGIC, open_file
from gpuan.trace.table import Trace

T = TypeVar("T")

Progress = Callable[[int, int], None]


def sniff(path: str | os.PathLike) -> str:
    """Return the format of a trace file ("kineto", "nsys", "nvprof" or "parquet"), from its first bytes."""
    path = str(path)
    with open_file(path) as f:
        head = f.read(4096)
    if not head:
        raise TraceError(path, "empty file")
    if path.endswith((".nsys-rep", ".qdrep")):  # Nsight's own format, which only nsys reads
        raise TraceError(
            path, "an Nsight Systems report: export it with nsys export --type sqlite (then give gpuan the .sqlite)"
        )
    if head.startswith(GZIP_MAGIC):
        return "kineto"
    if head.startswith(b"SQLite format 3\x00"):
        return "nsys"
    if head.startswith(b"PAR1"):
        return "parquet"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] in (b"{", b"["):
        return "kineto"
    if text.startswith(b"==") or b'"Start","Duration"' in head:
        return "nvprof"
    raise TraceError(path, "unknown trace format (expected Kineto JSON, Nsight SQLite, nvprof CSV or Parquet)")


def load(
    path: str | os.PathLike,
    *,
    rank: int | None = None,
    use_cache: bool = True,
    progress: Progress | None = None,
    device: str | None = None,
    projection: Projection | None = None,
    threads: int | None = None,
) -> Trace:
    """Return the Trace of a trace file or of a directory of per-rank trace files.

    Formats are recognised from the content. For a source with a fresh Parquet cache beside it (written
    by ``gpuan convert``), the cache is read instead. `rank` sets the rank of a single file's events.
    With ``device="gpu"`` the event table's columns are also resident on the GPU (``engine.columns`` of
    ``trace.events`` returns them without another upload) and Kineto JSON is parsed there; raises
    :class:`gpuan.engine.EngineError` where there is no GPU. None or "cpu": read on the CPU only.
    With `projection` (what an analysis reads), the table holds only its kinds' rows and its columns, the
    others null: a Parquet file is read that far and no further, and any other source gives the same table.
    `threads` (None: ``GPUAN_THREADS``, else the cores this process may use) is how many threads the read
    uses: a Kineto file's scan and table build, a directory's files read side by side (two at 2 threads;
    `progress` is then called from each file's reading thread, with that file's bytes).
    """
    if device not in (None, "cpu", "gpu"):
        raise UsageError(f"device: {device!r} is not one of cpu, gpu")
    if threads is not None:
        if not isinstance(threads, (int, np.integer)) or isinstance(threads, bool) or threads < 1:
            raise UsageError(f"threads: must be a whole number of at least 1, not {threads!r}")
        threads = int(threads)
    if device != "gpu":
        return _load(
            Path(path), rank=rank, use_cache=use_cache, progress=progress, gpu=False, projection=projection,
            threads=threads,
        )  # fmt: skip
    from gpuan.engine import resolve

    engine = resolve("gpu")
    trace = _load(
        Path(path), rank=rank, use_cache=use_cache, progress=progress, gpu=True, projection=projection, threads=threads
    )
    engine.keep_resident(trace.events)
    return trace


def _load(
    path: Path,
    *,
    rank: int | None,
    use_cache: bool,
    progress: Progress | None,
    gpu: bool,
    projection: Projection | None,
    threads: int | None,
) -> Trace:
    """Return the Trace of a file or directory (see :func:`load`); `gpu`: parse Kineto JSON on the GPU. A
    Parquet file is read by `projection`, any other source read whole and then projected; `threads` as
    :func:`load` takes it."""
    from gpuan.trace.otf2 import anchor_of, read_otf2

    if anchor_of(path) is not None:
        return _ranked(projected(read_otf2(path), projection), rank)
    if path.is_dir():
        return _load_rank_dir(
            path, use_cache=use_cache, progress=progress, gpu=gpu, projection=projection, threads=threads
        )
    if use_cache and path.exists():
        cache = parquet.cache_path(path)
        if parquet.is_fresh(cache, path):
            return _ranked(parquet.read(cache, projection), rank)
    fmt = sniff(path)
    if fmt == "kineto":
        from gpuan.trace.kineto import read_kineto

        return projected(read_kineto(str(path), rank=rank, progress=progress, gpu=gpu, threads=threads), projection)
    if fmt == "parquet":
        trace = parquet.read(path, projection)
    elif fmt == "nsys":
        from gpuan.trace.nsys import read_nsys

        trace = projected(read_nsys(str(path)), projection)
    else:
        from gpuan.trace.nvprof import read_nvprof

        trace = projected(read_nvprof(str(path)), projection)
    return _ranked(trace, rank)


def projected(trace: Trace, projection: Projection | None) -> Trace:
    """Return `trace` with its event table as a projected Parquet read gives it (:func:`apply`)."""
    if projection is None:
        return trace
    return Trace(apply(trace.events, projection), trace._flows, trace.metadata, trace.flow_rows)


def _ranked(trace: Trace, rank: int | None) -> Trace:
    """Return `trace` with its rank set to `rank` (unchanged for None)."""
    return trace if rank is None else with_rank(trace, rank)


def with_rank(trace: Trace, rank: int) -> Trace:
    """Return the trace with its ``rank`` column (events and flows) set to `rank`."""

    def set_rank(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index("rank")
        return t.set_column(i, "rank", pa.array(np.full(t.num_rows, rank, np.int32)))

    meta = dict(trace.metadata, rank=rank)
    flows = trace._flows
    # flows that a reader deferred stay deferred
    new_flows = (lambda: set_rank(flows())) if callable(flows) else set_rank(flows)
    return Trace(set_rank(trace.events), new_flows, meta, trace.flow_rows)


def file_format(path: Path) -> str:
    """Return the format a trace file's reader will report (its ``format`` metadata) from its first bytes
    only: "otf2" for an OTF2 anchor, a gpuan Parquet file's source format, else what :func:`sniff` finds.
    Listing a run this way gives every replay process the same answer before any of them reads a rank."""
    from gpuan.trace.otf2 import anchor_of

    if anchor_of(path) is not None:
        return "otf2"
    fmt = sniff(path)
    return parquet.stored_format(path) if fmt == "parquet" else fmt


def _load_rank_dir(
    directory: Path,
    *,
    use_cache: bool,
    progress: Progress | None,
    gpu: bool,
    projection: Projection | None,
    threads: int | None,
) -> Trace:
    """Load every rank's file and return one trace on a common time base, with a ``rank`` column (each
    file's rank found by :func:`gpuan.trace.ranks.ranked_files`, the rule every command follows), the files
    read by :func:`read_run_files` (side by side, the largest first, where they may be) on `threads`."""
    from gpuan.trace.ranks import ranked_files

    ranked = ranked_files(directory)
    reads = [
        lambda each, f=f: _load(
            f.path, rank=f.rank, use_cache=use_cache, progress=progress, gpu=gpu, projection=projection, threads=each
        )
        for f in ranked
    ]
    traces = read_run_files(reads, [f.path for f in ranked], gpu=gpu, threads=threads)
    return merge_ranks(traces, [f.rank for f in ranked], source=str(directory))


def read_run_files(
    reads: Sequence[Callable[[int], T]], paths: Sequence[Path], *, gpu: bool, threads: int | None = None
) -> list[T]:
    """Return the results of the reads of a run's files (`reads`: one per path of `paths`, each called with
    the threads it may use), in order: side by side, the largest files first
    (:func:`gpuan.trace.threads.files_side_by_side`), where :func:`may_read_side_by_side`; else one after
    another, each with all of `threads`."""
    from gpuan.trace.threads import files_side_by_side

    if not may_read_side_by_side(paths, gpu=gpu):
        return files_side_by_side(reads, threads, one_at_a_time=True)
    return files_side_by_side(reads, threads, sizes=[_size(p) for p in paths])


def _size(path: Path) -> int:
    """Return the size in bytes of the file at `path` (compressed or not: a guide to the order of the reads,
    not a measure), 0 where it is no file (its read says why)."""
    path = Path(path)
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0


def may_read_side_by_side(paths: Sequence[Path], *, gpu: bool) -> bool:
    """Return whether the files `paths` of a run may be read side by side, on threads: not for the GPU (one
    device, whose memory one file's read may fill) nor for OTF2 archives (the OTF2 library takes the
    process's stderr while it reads, to keep its own messages out of it)."""
    from gpuan.trace.otf2 import anchor_of

    return not gpu and not any(anchor_of(p) is not None for p in paths)


def merge_ranks(traces: list[Trace], ranks: list[int], source: str) -> Trace:
    """Return one trace of several ranks: times shifted to the earliest rank's base, ranks set.
    Ranks without events have no time base and do not take part in choosing it."""
    base = min((b for b in map(time_base, traces) if b is not None), default=0)
    shifted = [on_clock(t, r, base) for t, r in zip(traces, ranks)]
    meta = merged_metadata([t.metadata for t in shifted], ranks, base, source)
    return Trace(concat_ranks([t.events for t in shifted]), concat_ranks([t.flows for t in shifted]), meta)


def time_base(trace: Trace) -> int | None:
    """Return the base time (ns) a rank's trace takes part in choosing the run's common base with: its
    ``base_time_ns``, None for a rank without events or flows."""
    return trace.metadata.get("base_time_ns", 0) if len(trace) or trace.flow_count else None


def on_clock(trace: Trace, rank: int, base: int) -> Trace:
    """Return a rank's trace as it is inside the merged run: its ``rank`` set, its times (events and flows)
    shifted from its own base time to the run's common `base`."""
    shift = trace.metadata.get("base_time_ns", 0) - base
    trace = with_rank(trace, rank)
    return Trace(_shift(trace.events, shift), _shift(trace.flows, shift), trace.metadata)


def merged_metadata(metadata: list[dict], ranks: list[int], base: int, source: str) -> dict:
    """Return the metadata of a merged run from its ranks' (`metadata`, each of :func:`on_clock`'s trace, in
    the order of `ranks`): the first rank's devices and distributed info, every rank's metadata by rank."""
    return {
        "source": source,
        "format": "ranks",
        "base_time_ns": base,
        "ranks": sorted(ranks),
        "device_properties": metadata[0].get("device_properties", []),
        "distributed_info": metadata[0].get("distributed_info", {}),
        "per_rank": {str(r): dict(m) for m, r in zip(metadata, ranks)},
    }


def concat_ranks(tables: list[pa.Table]) -> pa.Table:
    """Return the ranks' tables (events, or flows) one after another as one table: one chunk, whose
    dictionary columns hold the words of every rank (in the order they first appear)."""
    return pa.concat_tables(tables).unify_dictionaries().combine_chunks()


def _shift(t: pa.Table, shift: int) -> pa.Table:
    """Return the table with `shift` ns added to its ts column."""
    if shift == 0 or t.num_rows == 0:
        return t
    i = t.schema.get_field_index("ts")
    return t.set_column(i, "ts", pc.add(t["ts"], pa.scalar(shift, pa.int64())))
