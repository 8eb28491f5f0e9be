"""``gpuan sol TRACE``: speed-of-light (roofline) scoring of every op; ``gpuan sol calibrate``: measure the
ceilings of this machine."""

from __future__ import annotations

import argparse

from gpuan.cli.arguments import count, nonempty


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``gpuan sol`` and its options to the subcommands `sub`; returns nothing."""
    p = sub.add_parser(
        "sol", help="roofline / speed-of-light score of every op (or: gpuan sol calibrate)",
        description="Score every op of TRACE against the GPU's roofs; 'gpuan sol calibrate [--cpu]' measures "
        "this machine's ceilings instead.",
    )  # fmt: skip
    p.add_argument("trace", metavar="TRACE", help="trace with record_shapes (Kineto JSON, ...), or 'calibrate'")
    p.add_argument("--gpu", type=nonempty, metavar="NAME", help="GPU to score against (default: the trace's)")
    p.add_argument(
        "--cpu",
        action="store_true",
        help="this machine's CPU: score against the ceilings 'gpuan sol calibrate --cpu' measured (calibrate: "
        "measure them)",
    )
    p.add_argument("--ceilings", choices=("datasheet", "measured"), default="datasheet",
                   help="datasheet peaks (default) or the ceilings 'gpuan sol calibrate' measured")  # fmt: skip
    p.add_argument(
        "--ceilings-file",
        type=nonempty,
        metavar="FILE",
        help="the ceilings file (default: $GPUAN_CEILINGS or ~/.cache/gpuan/ceilings.json)",
    )
    p.add_argument("--tf32", action="store_true", help="score FP32 matrix ops against TF32 tensor cores")
    p.add_argument(
        "-o", "--output", type=nonempty, metavar="TABLE", help="write every scored op to .csv, .parquet or .xlsx"
    )
    p.add_argument(
        "--html",
        type=nonempty,
        metavar="ROOFLINE.html",
        help="write the roofline chart as one self-contained HTML file",
    )
    p.add_argument("--top", type=count, default=10, metavar="N", help="rows of the by-function and lost-time tables")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gpuan sol`` (or ``gpuan sol calibrate``) with the parsed `args`; returns the exit code. Under
    ``mpirun`` a run directory's ranks are shared among the processes (:mod:`gpuan.cli.dealt`)."""
    if args.trace == "calibrate":
        return _calibrate(args)
    from gpuan.cli.dealt import run_over
    from gpuan.devices.ceilings import read_ceilings
    from gpuan.errors import UsageError
    from gpuan.outputs import sol as output
    from gpuan.sol.analysis import LOST_ROWS

    # --cpu roofs are always measured ones; datasheet roofs read no ceilings file
    measured = args.cpu or args.ceilings == "measured"
    if args.ceilings_file and not measured:
        raise UsageError("--ceilings-file needs --ceilings measured or --cpu")
    if args.output:
        output.check_table_path(args.output)
    # the lost-time table holds at least the rows the XLSX "top lost" sheet shows
    options = {"gpu": args.gpu, "cpu": args.cpu, "tf32": args.tf32, "top": max(args.top, LOST_ROWS)}

    def plain() -> int:
        from gpuan.cli.loading import load_trace
        from gpuan.sol import analyse, reads

        trace = load_trace(args.trace, projection=reads())
        ceilings = read_ceilings(args.ceilings_file) if measured else "datasheet"
        return _emit(args, analyse(trace, ceilings=ceilings, **options))

    def dealt(procs) -> int:
        from gpuan.cli.dealt import device
        from gpuan.sol.analysis import combine, reads
        from gpuan.sol.score import ACTIVITY_KINDS, EVENT_WORDS, RANK_OPS_SCHEMAS, rank_ops
        from gpuan.trace.dealt import any_rank, load_dealt, map_ranks, unified_dictionaries

        run = load_dealt(args.trace, procs, device=device(), projection=reads())
        ceilings = read_ceilings(args.ceilings_file) if measured else "datasheet"
        gpu_activity = any_rank(run, lambda trace: len(trace.of_kind(*ACTIVITY_KINDS)) > 0)
        parts = map_ranks(run, lambda trace: rank_ops(trace, gpu_activity), RANK_OPS_SCHEMAS)
        words = unified_dictionaries(run, "events", EVENT_WORDS)
        if parts is None:  # not process 0: it only helped
            return 0
        return _emit(args, combine(parts, run.metadata, words, gpu_activity=gpu_activity, ceilings=ceilings, **options))

    return run_over(args.trace, plain, dealt)


def _emit(args: argparse.Namespace, result) -> int:
    """Write the files asked for and print the report of a sol `result`; returns the exit code."""
    from gpuan.outputs import sol as output

    if args.output:
        output.write_table(result, args.output)
    if args.html:
        from gpuan.outputs.roofline_chart import write_html

        write_html(result, args.html)
    print(output.json_text(result) if args.format == "json" else output.text(result, top=args.top), end="")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    """Measure this machine's ceilings (``gpuan sol calibrate``), save and print them; returns the exit code."""
    from gpuan.devices.calibrate import calibrate
    from gpuan.outputs.sol import calibration_text

    name, ceilings, path = calibrate(cpu=args.cpu, path=args.ceilings_file)
    print(calibration_text(name, ceilings, path), end="")
    return 0
