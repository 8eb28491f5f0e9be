"""``gpuan replay RUN_DIR``: wait states, stragglers, time breakdown and communication matrix across the
per-rank traces of a run; under ``mpirun -np P`` the ranks are shared among P processes."""

from __future__ import annotations

import argparse
import sys

from gpuan.cli.arguments import count, nonempty


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the command's parser to `sub` (the subcommands of ``gpuan``)."""
    from gpuan.options import REPLAY_DEALS, REPLAY_REPORTS
    from gpuan.outputs.files import TABLE_FORMATS

    p = sub.add_parser(
        "replay", help="cross-rank analysis of a run's per-rank traces (runs under mpirun too)",
        description="Replay the per-rank traces of RUN_DIR (a directory of per-rank traces, or an OTF2 archive): "
        "collective and point-to-point wait states, stragglers per step, time breakdown per rank, communication "
        "matrix. Under 'mpirun -np P gpuan replay ...' each process reads only its share of the ranks.",
    )  # fmt: skip
    p.add_argument("run_dir", metavar="RUN_DIR", help="directory of per-rank traces, or an OTF2 archive")
    p.add_argument("--analysis", default=",".join(REPLAY_REPORTS), metavar="LIST",
                   help=f"comma-separated, from: {', '.join(REPLAY_REPORTS)} (default: all)")  # fmt: skip
    p.add_argument("-o", "--output", type=nonempty, metavar="OUT", help="directory to write the tables to")
    p.add_argument("--table-format", choices=TABLE_FORMATS, default="csv", help="format of the tables (default: csv)")
    p.add_argument("--html", type=nonempty, metavar="FILE.html", help="write the HTML view")
    p.add_argument("--deal", choices=REPLAY_DEALS, default="round-robin",
                   help="how ranks are shared among processes: rank r to process r %% P, or by file size")  # fmt: skip
    p.add_argument("--align-clocks", action="store_true",
                   help="apply the clock offsets estimated from collective completion before matching")  # fmt: skip
    p.add_argument("--top", type=count, default=5, help="stragglers to name (default: 5)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--verbose", action="store_true",
                   help="say on stderr where the replay ran: its engine, processes, and how records crossed between "
                   "them (host memory; device buffers by CUDA-aware MPI, ucxx, or staged via the host)")  # fmt: skip
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the replay on this process; returns the exit code. Process 0 reports; under MPI the others
    stop on bad input with exit code 2 and say nothing, so the one error line is printed once."""
    from gpuan.cli.dealt import on_every_process

    return on_every_process(lambda procs: _run(args, procs))


def _run(args, procs) -> int:
    """Load the run's sources, replay, and on process 0 print and write the results; returns the exit code."""
    from gpuan.outputs import replay as output
    from gpuan.replay import analyse
    from gpuan.trace.ranks import load_run

    sources = load_run(args.run_dir, procs)
    analyses = tuple(a.strip() for a in args.analysis.split(",") if a.strip())
    result = analyse(sources, analyses=analyses, deal=args.deal, align_clocks=args.align_clocks, procs=procs)
    if result is None:  # not process 0: it only helped
        return 0
    if args.verbose:
        from gpuan.engine import current

        crossed = result.summary["diagnostics"]["exchange"]
        print(f"gpuan replay: engine {current().name}, {procs.size} process{'es' * (procs.size > 1)}, "
              f"records exchanged: {crossed}", file=sys.stderr)  # fmt: skip
    if args.output:
        output.write_tables(result, args.output, args.table_format)
    if args.html:
        output.write_html(result, args.html)
    print(output.json_text(result) if args.format == "json" else output.text(result, args.top), end="")
    return 0
