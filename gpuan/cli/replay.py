"""``gpuan replay RUN_DIR``: wait states, stragglers, time breakdown and communication matrix across the
per-rank traces of a run; under ``mpirun -np P`` the ranks are shared among P processes."""

from __future__ import annotations

import json

from gpuan.cli.arguments import count, nonempty


def add_parser(sub) -> None:
    from gpuan.replay.deal import DEALS
    from gpuan.replay.report import FORMATS
    from gpuan.replay.run import ANALYSES

    p = sub.add_parser(
        "replay", help="cross-rank analysis of a run's per-rank traces (runs under mpirun too)",
        description="Replay the per-rank traces of RUN_DIR (a directory of per-rank traces, or an OTF2 archive): "
        "collective and point-to-point wait states, stragglers per step, time breakdown per rank, communication "
        "matrix. Under 'mpirun -np P gpuan replay ...' each process reads only its share of the ranks.",
    )  # fmt: skip
    p.add_argument("run_dir", metavar="RUN_DIR", help="directory of per-rank traces, or an OTF2 archive")
    p.add_argument("--analysis", default=",".join(ANALYSES), metavar="LIST",
                   help=f"comma-separated, from: {', '.join(ANALYSES)} (default: all)")  # fmt: skip
    p.add_argument("-o", "--output", type=nonempty, metavar="OUT", help="directory to write the tables to")
    p.add_argument("--table-format", choices=FORMATS, default="csv", help="format of the tables (default: csv)")
    p.add_argument("--html", type=nonempty, metavar="FILE.html", help="write the HTML view")
    p.add_argument("--deal", choices=DEALS, default="round-robin",
                   help="how ranks are shared among processes: rank r to process r %% P, or by file size")  # fmt: skip
    p.add_argument("--align-clocks", action="store_true",
                   help="apply the clock offsets estimated from collective completion before matching")  # fmt: skip
    p.add_argument("--top", type=count, default=5, help="stragglers to name (default: 5)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=run)


def run(args) -> int:
    """Run the replay on this process; returns the exit code. Process 0 reports; under MPI the others
    stop on bad input with exit code 2 and say nothing, so the one error line is printed once."""
    from gpuan.cli import EXIT_BAD_INPUT
    from gpuan.errors import TraceError
    from gpuan.replay.procs import procs as default_procs

    procs = default_procs()
    try:
        return _run(args, procs)
    except TraceError:
        # replay() raises the same error on every process (they agree on it before stopping)
        if procs.is_root:
            raise
        return EXIT_BAD_INPUT


def _run(args, procs) -> int:
    """Replay, and on process 0 print and write the results; returns the exit code."""
    from gpuan.errors import TraceError
    from gpuan.replay.report import summary, write_html, write_tables
    from gpuan.replay.run import ANALYSES, replay

    analyses = tuple(a.strip() for a in args.analysis.split(",") if a.strip())
    unknown = sorted(set(analyses) - set(ANALYSES))
    if unknown:
        raise TraceError(args.analysis, f"unknown analysis {', '.join(unknown)}; choose from {', '.join(ANALYSES)}")
    result = replay(args.run_dir, procs=procs, analyses=analyses, deal_by=args.deal, align_clocks=args.align_clocks)
    if result is None:  # not process 0: it only helped
        return 0
    if args.output:
        write_tables(result, args.output, args.table_format)
    if args.html:
        write_html(result, args.html)
    if args.format == "json":
        out = {name: json.loads(df.to_json(orient="records")) for name, df in result.tables.items()}
        out["clock_offsets_ns"] = result.offsets.tolist()
        out["last_to_finish"] = {"rank": result.finish[0], "end_ns": result.finish[1]}
        print(json.dumps(out, indent=1))
    else:
        print(summary(result, args.top))
    return 0
