"""``gpuan info TRACE``: what is in a trace, as text or JSON."""

from __future__ import annotations

import argparse

from gpuan.cli.arguments import count


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the command's parser to `sub` (the subcommands of ``gpuan``)."""
    p = sub.add_parser("info", help="summarise a trace: events per kind, devices, streams, busy time, top kernels")
    p.add_argument(
        "trace",
        help="trace file (Kineto .json/.json.gz, Nsight .sqlite, nvprof .csv, .parquet) or a directory of rank traces",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--top", type=count, default=10, help="how many kernels to list (default 10)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the command on the parsed `args`; returns the exit code (0; errors are raised)."""
    return show(args.trace, fmt=args.format, top=args.top)


def show(path: str, *, fmt: str = "text", top: int = 10) -> int:
    """Load the trace at `path` and print what is in it as text or JSON; returns the exit code (0). Under
    ``mpirun`` a run directory's ranks are shared among the processes (:mod:`gpuan.cli.dealt`)."""
    from gpuan.cli.dealt import run_over

    def plain() -> int:
        from gpuan.cli.loading import load_trace
        from gpuan.info import analyse, reads

        return _print(analyse(load_trace(path, projection=reads()), top=top), fmt)

    def dealt(procs) -> int:
        from gpuan.cli.dealt import device
        from gpuan.info.analysis import PART_SCHEMAS, combine, partial, reads
        from gpuan.trace.dealt import load_dealt, map_ranks

        run = load_dealt(path, procs, device=device(), projection=reads())
        parts = map_ranks(run, partial, PART_SCHEMAS)
        return 0 if parts is None else _print(combine(parts, run.metadata, top=top), fmt)

    return run_over(path, plain, dealt)


def _print(result, fmt: str) -> int:
    from gpuan.outputs import info as output

    print(output.json_text(result) if fmt == "json" else output.text(result), end="")
    return 0
