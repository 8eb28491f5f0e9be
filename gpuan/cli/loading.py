"""How the commands load a trace: a progress bar for long loads (on a terminal, for large files), a
note when the first read compiles the scanner, and an error for a trace with nothing in it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gpuan.errors import TraceError
from gpuan.trace.load import load, sniff
from gpuan.trace.projection import Projection
from gpuan.trace.table import Trace

MIN_BYTES = 64 << 20


def _compiles_first(path: str) -> bool:
    """Whether reading `path` will first compile the Kineto scanner (a directory counts as Kineto)."""
    from gpuan.trace.kineto import scanner_is_compiled

    if scanner_is_compiled():
        return False
    try:
        return os.path.isdir(path) or sniff(path) == "kineto"
    except TraceError:
        return False


@contextmanager
def load_progress(path: str) -> Iterator[Callable[[int, int], None] | None]:
    """Yield a progress callback (bytes done, bytes total) for loading `path`, or None when no bar is
    wanted (not a terminal, a small file, a directory)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    if sys.stderr.isatty() and _compiles_first(path):  # a note for people, not for scripts
        print("gpuan: compiling the trace scanner (first run only, about 15 seconds)", file=sys.stderr)
    if not sys.stderr.isatty() or size < MIN_BYTES:
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        TimeRemainingColumn(), transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task(f"loading {os.path.basename(path)}", total=size)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def load_trace(path: str, *, use_cache: bool = True, projection: Projection | None = None) -> Trace:
    """Return the trace at `path` for a command, read on the GPU and its columns kept there when the engine
    in force is the GPU (``--device gpu``), as far as the command's analysis reads it (`projection`); a
    trace without a single event is bad input."""
    from gpuan.engine import current

    device = "gpu" if current().is_gpu else None
    with load_progress(path) as progress:
        trace = load(path, use_cache=use_cache, progress=progress, device=device, projection=projection)
    if len(trace) == 0 and trace.flow_count == 0:
        # none of the projection's kinds is no empty trace: the analysis says what it lacks
        whole = trace if projection is None else load(path, use_cache=use_cache)
        if len(whole) == 0 and whole.flow_count == 0:
            raise TraceError(path, "empty trace (no events)")
    return trace
