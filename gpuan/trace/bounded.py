"""Convert a Kineto trace to gpuan's Parquet file under a memory ceiling that does not grow with the trace
(``gpuan convert TRACE --max-memory 2G``): the file is read twice in parts (:mod:`gpuan.trace.kineto.parts`),
each part's table spilled to disk, and the parts merged into the Parquet file in the table's order
(:mod:`gpuan.trace.spill`). The file written holds the same table as a conversion in memory."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from gpuan.errors import UsageError
from gpuan.trace.memory import lean_memory, prompt_collection

#: what a part costs per row while its table is built (scanned columns, the table, sort orders): measured
#: 375 bytes on a 1 GB trace of ../shared/tools/gen_kineto_trace.py (docs/convert.md)
BYTES_PER_PART_ROW = 400
#: the reader's own buffers (three read buffers of a block each, the threads' two sets of scratch rows,
#: the strings: about 160 MB and the strings)
READER_BYTES = 280 << 20
#: what the merge holds: a batch of each run it reads (at most spill.FAN_IN), the 1M-row piece being written
#: and its copy (measured 624 MB above the process's start on that trace)
MERGE_BYTES = 640 << 20
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


def part_rows_for(max_memory: int) -> int:
    """Return the rows of one part that keep a conversion under `max_memory` bytes of resident memory,
    given this process's memory now (the interpreter and its libraries). The two passes over the parts and
    the merge come one after another, so the ceiling holds the largest of them, not their sum. Raises
    :class:`UsageError` when the ceiling leaves no room for a part of useful size or for the merge."""
    here = resident_bytes()
    rows = (max_memory - here - READER_BYTES) // BYTES_PER_PART_ROW
    need = here + max(READER_BYTES + MIN_PART_ROWS * BYTES_PER_PART_ROW, MERGE_BYTES)
    if rows < MIN_PART_ROWS or max_memory < need:
        raise UsageError(f"--max-memory {max_memory / 2**20:,.0f} MiB is too little: converting in parts needs "
                         f"at least {need / 2**20:,.0f} MiB here")  # fmt: skip
    return int(rows)


def memory_estimate(source: str | os.PathLike) -> int:
    """Return about how much memory converting the Kineto file `source` whole takes (bytes): the read
    peaks at about 0.6 times the JSON (docs/ingest.md), plus this process."""
    from gpuan.trace.source import open_bytes

    with open_bytes(str(source), ahead=False) as src:  # the size is in the gzip trailer: nothing to inflate
        size = src.expected_size()
    return int(size * 0.6) + resident_bytes()


def available_bytes() -> int | None:
    """Return the memory the system says is available for a new allocation (MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


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
    from gpuan.trace.spill import Spill
    from gpuan.trace.threads import thread_count

    source, out = Path(source), Path(out)
    threads = threads or thread_count()
    rows = part_rows_for(max_memory)
    pool = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())  # with lean_memory, freed batches go back to the system
    spill = Spill(Path(tempfile.mkdtemp(prefix=out.name + ".parts.", dir=out.parent)))
    meta: dict = {}
    try:
        with lean_memory(), prompt_collection():
            whole = whole_file(str(source), rows, threads=threads, progress=_named(progress, "facts"))
            parts = part_traces(str(source), whole, rows, threads=threads, progress=_named(progress, "parts"))
            for trace in parts:
                spill.add(trace.events)
                spill.add_flows(trace.flows)
                meta = trace.metadata
            parquet.write_pieces(spill.merged(parquet.ROW_GROUP_ROWS), meta, spill.flows(), out, source=cache_of)
        return spill.rows
    finally:
        spill.remove()
        pa.set_memory_pool(pool)


def _named(progress, name: str):
    """Return a (done, total) callback that tells `progress` which pass it is in, or None."""
    if progress is None:
        return None
    return lambda done, total: progress(name, done, total)
