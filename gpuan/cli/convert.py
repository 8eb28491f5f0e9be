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
    """Run the command on the parsed `args`; returns the exit code (0; errors are raised)."""
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
