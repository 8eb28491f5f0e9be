"""``gpuan convert TRACE [-o X.parquet]``: write the Parquet cache of a trace.

No analysis: the trace layer reads the trace and writes the file (:func:`gpuan.trace.parquet.write`),
which later loads of the trace pick up while it is fresh."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuan.cli.arguments import nonempty


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the command's parser to `sub` (the subcommands of ``gpuan``)."""
    p = sub.add_parser("convert", help="convert a trace to gpuan's Parquet file (loads in a fraction of the time)")
    p.add_argument("trace", help="trace file or directory of per-rank traces")
    p.add_argument(
        "-o", "--output", type=nonempty, default=None,
        help="Parquet file to write (default: TRACE.gpuan.parquet beside the trace, which later loads pick up)",
    )  # fmt: skip
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the command on the parsed `args`; returns the exit code (0; errors are raised). Under ``mpirun``
    a run directory's ranks are shared among the processes and process 0 writes (:mod:`gpuan.cli.dealt`)."""
    from gpuan.cli.dealt import run_over

    return run_over(args.trace, lambda: _run(args), lambda procs: _run_dealt(args, procs))


def _run_dealt(args: argparse.Namespace, procs) -> int:
    """Convert a run directory whose ranks the processes of an MPI job share: each reads its own, process 0
    writes the file one process alone writes (:func:`gpuan.trace.dealt.write_parquet`)."""
    from gpuan.outputs.files import announce
    from gpuan.trace import parquet
    from gpuan.trace.dealt import load_dealt, write_parquet

    source = Path(args.trace)
    out = Path(args.output) if args.output else parquet.cache_path(source)
    events = write_parquet(load_dealt(args.trace, procs, use_cache=False), out)
    if events is not None:
        announce(out, f"{events:,} events, {out.stat().st_size / 1e6:,.1f} MB")
    return 0


def _run(args: argparse.Namespace) -> int:
    """Convert the trace of `args` in this process; returns the exit code."""
    from gpuan.cli.loading import load_trace
    from gpuan.errors import UsageError
    from gpuan.outputs.files import announce
    from gpuan.trace import parquet

    source = Path(args.trace)
    out = Path(args.output) if args.output else parquet.cache_path(source)
    if out.exists() and out.samefile(source):
        raise UsageError(f"{out}: is the trace itself; name another output file")
    trace = load_trace(args.trace, use_cache=False)
    parquet.write(trace, out, source=source if source.is_file() else None)
    announce(out, f"{trace.events.num_rows:,} events, {out.stat().st_size / 1e6:,.1f} MB")
    return 0
