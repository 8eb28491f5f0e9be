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
    p.add_argument(
        "--max-memory", metavar="SIZE", default=None,
        help="convert a Kineto JSON trace in parts, keeping this process's memory under SIZE (e.g. 2G, 1536M); "
        "chosen by itself for a trace that would not fit in the memory available",
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
    _ceiling(source, args.max_memory)  # --max-memory is for a single Kineto file: the same error as alone
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
    ceiling = _ceiling(source, args.max_memory)
    if ceiling is not None:
        events = _convert_in_parts(source, out, ceiling)
    else:
        trace = load_trace(args.trace, use_cache=False)
        parquet.write(trace, out, source=source if source.is_file() else None)
        events = trace.events.num_rows
    announce(out, f"{events:,} events, {out.stat().st_size / 1e6:,.1f} MB")
    return 0


def _ceiling(source: Path, max_memory: str | None) -> int | None:
    """Return the memory ceiling to convert `source` in parts under (bytes), or None to convert it in
    memory: the one asked for, else half the memory available when the trace would not fit in it."""
    import sys

    from gpuan.errors import UsageError
    from gpuan.trace import bounded
    from gpuan.trace.load import sniff

    fmt = "directory" if source.is_dir() else sniff(source)
    if max_memory is not None:
        ceiling = bounded.parse_size(max_memory)
        if fmt != "kineto":
            what = "a directory of ranks" if fmt == "directory" else f"a {fmt} file"
            raise UsageError(f"--max-memory: {source} is {what}; only Kineto JSON files are converted in parts")
        return ceiling
    if fmt != "kineto":
        return None
    need, have = bounded.memory_estimate(source), bounded.available_bytes()
    if have is None or need <= have:
        return None
    ceiling = have // 2
    print(f"gpuan: {source} needs about {need / 2**30:,.1f} GiB to convert in memory, {have / 2**30:,.1f} GiB is "
          f"available: converting in parts under {ceiling / 2**30:,.1f} GiB (--max-memory to choose)",
          file=sys.stderr)  # fmt: skip
    return ceiling


def _convert_in_parts(source: Path, out: Path, ceiling: int) -> int:
    """Convert the Kineto trace `source` to `out` in parts under `ceiling` bytes; returns its events."""
    from gpuan.cli.loading import load_progress
    from gpuan.trace import bounded

    with load_progress(str(source)) as update:
        progress = None if update is None else (lambda _pass, done, total: update(done, total))
        return bounded.convert(source, out, max_memory=ceiling, progress=progress, cache_of=source)
