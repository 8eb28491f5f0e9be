"""Convert a Kineto trace to gpuan's Parquet file under a memory ceiling that does not grow with the trace
(``gpuan convert TRACE --max-memory 2G``): the file is read twice in parts (:mod:`gpuan.trace.kineto.parts`),
each part's table spilled to disk, and the parts merged into the Parquet file in the table's order
(:mod:`gpuan.trace.spill`). The file written holds the same table as a conversion in memory."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from gpuan.errors import UsageError

#: what a part costs per row while its table is built (scanned columns, the table, sort orders), measured
#: on traces of gpuan's and ../shared/tools' generators (docs/convert.md)
BYTES_PER_PART_ROW = 400
#: what the merge holds besides the parts' batches: the piece being written and its copies
MERGE_BYTES = 400 << 20
MIN_PART_ROWS = 1 << 16
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Return the bytes a size such as "2G", "1536M", "2.5GiB" or "1000000" stands for (powers of 1024).
    Raises :class:`UsageError` for anything else."""
    m = _SIZE.fullmatch(text)
    if not m:
        raise UsageError(f"--max-memory: {text!r} is not a size (e.g. 2G, 1536M)")
    scale = 1 << (10 * " KMGT".index((m.group(2) or " ").upper()))
    return int(float(m.group(1)) * scale)


def part_rows_for(max_memory: int, threads: int) -> int:
    """Return the rows of one part that keep a conversion under `max_memory` bytes of resident memory,
    given this process's memory now (the interpreter and its libraries) and the reader's fixed buffers.
    Raises :class:`UsageError` when the ceiling leaves no room for a part of useful size."""
    from gpuan.trace.kineto.reader import BLOCK_BYTES

    fixed = resident_bytes() + 4 * BLOCK_BYTES + (64 << 20)  # read buffers, per-thread scratch, strings
    rows = (max_memory - fixed - MERGE_BYTES) // BYTES_PER_PART_ROW
    if rows < MIN_PART_ROWS:
        need = fixed + MERGE_BYTES + MIN_PART_ROWS * BYTES_PER_PART_ROW
        raise UsageError(f"--max-memory {max_memory / 2**20:,.0f} MiB is too little: converting in parts needs "
                         f"at least {need / 2**20:,.0f} MiB here")  # fmt: skip
    return int(rows)


def resident_bytes() -> int:
    """Return this process's resident memory now (0 where /proc does not say)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def convert(
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    max_memory: int,
    threads: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    cache_of: str | os.PathLike | None = None,
) -> int:
    """Write the Parquet file of the Kineto trace `source` to `out` (atomically) in parts whose memory
    stays under `max_memory` bytes; returns the number of events. `progress` is told (pass name, bytes
    done, bytes total); `cache_of` is the source the file records itself as the cache of. Raises
    TraceError for a file that is no readable trace (before anything is written), UsageError for a
    ceiling too low."""
    import pyarrow as pa

    from gpuan.trace import parquet
    from gpuan.trace.kineto.parts import part_traces, whole_file
    from gpuan.trace.kineto.reader import thread_count
    from gpuan.trace.spill import Spill

    source, out = Path(source), Path(out)
    threads = threads or thread_count()
    rows = part_rows_for(max_memory, threads)
    pool = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())  # gives freed batches back to the system at once
    spill = Spill(Path(tempfile.mkdtemp(prefix=out.name + ".parts.", dir=out.parent)))
    try:
        whole = whole_file(str(source), rows, threads=threads, progress=_named(progress, "facts"))
        meta = {}
        for trace in part_traces(str(source), whole, rows, threads=threads, progress=_named(progress, "parts")):
            spill.add(trace.events)
            spill.add_flows(trace.flows)
            meta = trace.metadata
        # flows are a few bytes each once compressed, and ride in the file's metadata as one small file
        flows = parquet.flows_file(spill.flows())
        parquet.write_pieces(spill.merged(parquet.ROW_GROUP_ROWS), meta, flows, out, source=cache_of)
        return spill.rows
    finally:
        spill.remove()
        shutil.rmtree(spill.directory, ignore_errors=True)
        pa.set_memory_pool(pool)


def _named(progress, name: str):
    """Return a (done, total) callback that tells `progress` which pass it is in, or None."""
    if progress is None:
        return None
    return lambda done, total: progress(name, done, total)
