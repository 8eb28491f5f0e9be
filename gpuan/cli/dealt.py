"""A command over a trace under ``mpirun``: a run directory's ranks dealt among the processes
(:mod:`gpuan.trace.dealt`), anything else read by process 0 alone; process 0 alone prints and writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuan.engine.procs import Procs


def run_over(path: str, plain: Callable[[], int], dealt: Callable[[Procs], int]) -> int:
    """Run a command over the trace at `path`; returns the exit code. Without an MPI launcher (or in a job
    of one process) `plain()` runs as ever. Under ``mpirun -np P`` (P > 1), every process runs
    `dealt(procs)` when `path` is a directory of per-rank traces, each reading only its ranks; otherwise
    (a single file, an OTF2 archive) process 0 runs `plain()` and the others stop at once. A bad input
    that every process meets (they agree on a bad rank file before stopping) is raised by process 0, which
    prints it once; the others return exit code 2 silently."""
    from gpuan.engine.procs import from_launcher

    try:
        procs = from_launcher()
    except RuntimeError:  # a launcher's variables but no mpi4py: one process, as before
        return plain()
    if procs.size == 1:
        return plain()

    def job(procs: Procs) -> int:
        from gpuan.trace.dealt import dealt_run  # after the one-process check: it imports what a run needs

        if not dealt_run(path, procs):
            return plain() if procs.is_root else 0
        return dealt(procs)

    return on_every_process(job, procs)


def on_every_process(job: Callable[[Procs], int], procs: Procs | None = None) -> int:
    """Run `job` on this process of an MPI job (`procs`, else the launcher's), or alone; returns its exit
    code. A bad input that every process meets (they agree on a bad file before stopping) is raised by
    process 0, which prints it once; the others return exit code 2 and say nothing."""
    from gpuan.cli import EXIT_BAD_INPUT
    from gpuan.engine.procs import from_launcher
    from gpuan.errors import TraceError, UsageError

    procs = procs or from_launcher()
    try:
        return job(procs)
    except (TraceError, UsageError):
        if procs.is_root:
            raise
        return EXIT_BAD_INPUT


def device() -> str | None:
    """Return the device a command reads its ranks to: "gpu" where the engine in force is the GPU."""
    from gpuan.engine import current

    return "gpu" if current().is_gpu else None
