"""``gpuan fleet RUN_DIR``: which rank is slow, in which step, and where its extra time went, from the
per-rank traces of a run; under ``mpirun -np P`` the ranks are shared among P processes."""

from __future__ import annotations

import argparse

from gpuan.cli.arguments import count, nonempty


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the command's parser to `sub` (the subcommands of ``gpuan``)."""
    from gpuan.options import CYCLES_OPS, CYCLES_SEQUENCES, REPLAY_DEALS
    from gpuan.outputs.files import TABLE_FORMATS
    from gpuan.trace.kinds import KINDS

    p = sub.add_parser(
        "fleet", help="which rank is slow and why: step times from cycles across ranks (runs under mpirun too)",
        description="Find every rank's steps in RUN_DIR (a directory of per-rank traces) by cycle detection, compare "
        "the ranks step by step, and name the slowest ranks and the positions of their steps (ops, or time in no "
        "op) that made them slow, apart from the waiting that replay explains. Under 'mpirun -np P gpuan fleet ...' "
        "each process reads only its share of the ranks.",
    )  # fmt: skip
    p.add_argument("run_dir", metavar="RUN_DIR", help="directory of per-rank traces")
    p.add_argument("--kind", choices=("auto", *KINDS), default="auto",
                   help="events whose cycles are the steps (default auto: kernels if any rank has them, "
                   "else cpu_op)")  # fmt: skip
    p.add_argument("--sequences", choices=CYCLES_SEQUENCES, default="merged",
                   help="GPU events: one sequence per device (default: merged, so a step holds its communication "
                   "kernels), per stream group, or per stream")  # fmt: skip
    p.add_argument(
        "--ops", choices=CYCLES_OPS, default="top", help="CPU operators: top-level (default), leaves, or all"
    )
    p.add_argument("--top", type=count, default=5, help="slowest (rank, step) pairs to explain (default: 5)")
    p.add_argument("-o", "--output", type=nonempty, metavar="OUT", help="directory to write the tables to")
    p.add_argument("--table-format", choices=TABLE_FORMATS, default="csv", help="format of the tables (default: csv)")
    p.add_argument("--html", type=nonempty, metavar="FILE.html", help="write the HTML view")
    p.add_argument("--deal", choices=REPLAY_DEALS, default="round-robin",
                   help="how ranks are shared among processes: rank r to process r %% P, or by file size")  # fmt: skip
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the fleet view on this process; returns the exit code. Process 0 reports; under MPI the others
    stop on bad input with exit code 2 and say nothing, so the one error line is printed once."""
    from gpuan.cli.dealt import on_every_process

    return on_every_process(lambda procs: _run(args, procs))


def _run(args, procs) -> int:
    """Load the run's sources, analyse, and on process 0 print and write the results; returns the exit code."""
    from gpuan.fleet import analyse
    from gpuan.outputs import fleet as output
    from gpuan.trace.ranks import load_run

    sources = load_run(args.run_dir, procs)
    result = analyse(sources, kind=args.kind, sequences=args.sequences, ops=args.ops, deal=args.deal,
                     slowest=args.top, procs=procs)  # fmt: skip
    if result is None:  # not process 0: it only helped
        return 0
    if args.output:
        output.write_tables(result, args.output, args.table_format)
    if args.html:
        output.write_html(result, args.html)
    print(output.json_text(result) if args.format == "json" else output.text(result), end="")
    return 0
