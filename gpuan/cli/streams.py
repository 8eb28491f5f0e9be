"""``gpuan streams TRACE --streams N``: the predicted N-stream timeline of a single-stream trace."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gpuan.cli.arguments import nonempty, positive
from gpuan.options import STREAMS_LAUNCH_ORDERS, STREAMS_UNDIMENSIONED


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the command's parser to `sub` (the subcommands of ``gpuan``)."""
    p = sub.add_parser("streams", help="predict the timeline of a single-stream trace's work on N streams")
    p.add_argument("trace", help="single-stream trace (Kineto JSON, Nsight SQLite or nvprof CSV)")
    p.add_argument("--streams", type=positive, required=True, metavar="N", help="number of streams to predict")
    p.add_argument(
        "--launch-order",
        choices=STREAMS_LAUNCH_ORDERS,
        default="breadth",
        help="host issue order: operation k of every stream first (breadth, default) or stream by stream",
    )
    p.add_argument("--gpu", type=nonempty, metavar="NAME", help="GPU to simulate (default: the one the trace recorded)")
    p.add_argument("--stream", type=int, help="which stream's work to use, if the trace has several")
    p.add_argument(
        "--undimensioned",
        choices=tuple(STREAMS_UNDIMENSIONED),
        default="device",
        help="what a kernel without grid/block sizes is taken to be (both totals are printed either way): "
        + "; ".join(f"{k}: {v}" for k, v in STREAMS_UNDIMENSIONED.items())
        + " (default: device)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=nonempty,
        metavar="PREDICTED.json",
        help="write the predicted timeline as Chrome-trace JSON",
    )
    p.add_argument(
        "--measured", type=nonempty, metavar="TRACE", help="a measured N-stream trace of the same work to compare with"
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=run)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Run the command on the parsed `args`; returns the exit code (0; errors are raised)."""
    from gpuan.cli.first_run import stream_functions
    from gpuan.cli.loading import load_trace
    from gpuan.jit_cache import compiled_beside, compiled_on_disk
    from gpuan.outputs import streams as output
    from gpuan.streams import analyse, reads, simulate

    # a note for people, not for scripts: without numba's on-disk cache the first simulation compiles the
    # event loop, in a process of its own while the trace is read
    if sys.stderr.isatty() and not compiled_on_disk(simulate._run):
        print("gpuan: compiling the stream simulator (first run only, about 20 seconds)", file=sys.stderr)
    with compiled_beside(stream_functions(), "gpuan.cli.first_run:stream_loop"):
        trace = load_trace(args.trace, projection=reads())
        measured = load_trace(args.measured, projection=reads()) if args.measured else None
        with simulation_progress() as progress:
            result = analyse(
                trace, streams=args.streams, gpu=args.gpu, launch_order=args.launch_order, stream=args.stream,
                undimensioned=args.undimensioned, measured=measured, source=args.trace,
                measured_source=args.measured, progress=progress,
            )  # fmt: skip
    if args.output:
        output.write_timeline(result, args.output)
    print(output.json_text(result) if args.format == "json" else output.text(result, args.output), end="")
    return 0


@contextmanager
def simulation_progress() -> Iterator[Callable[[int, int], None] | None]:
    """Yield a progress callback (operations simulated, operations) that shows a bar on stderr once a
    simulation has run a while, or None when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    bar = Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), transient=True, console=Console(stderr=True),
    )  # fmt: skip
    task = None

    def update(done: int, total: int) -> None:
        nonlocal task
        if task is None:  # the bar appears with the first report, after the simulation's first second
            bar.start()
            task = bar.add_task("simulating", total=total)
        bar.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        if task is not None:
            bar.stop()
