"""``gpuan cycles TRACE -o BASE``: repeating patterns as uplifter-compatible CSVs, text or JSON summary."""

from __future__ import annotations

import argparse
import sys

from gpuan.cli.arguments import nonempty
from gpuan.options import CYCLES_MODES, CYCLES_OPS, CYCLES_SEQUENCES
from gpuan.trace.kinds import KINDS


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``gpuan cycles`` and its options to the subcommands `sub`; returns nothing."""
    p = sub.add_parser("cycles", help="find repeating kernel patterns (iterations, layers, prefill/decode)")
    p.add_argument("trace", help="trace file or directory of rank traces")
    p.add_argument(
        "-o",
        "--output",
        type=nonempty,
        metavar="BASE",
        help="write BASE_cycle_<k>.csv (all) or BASE_prefill/decode.csv (llm)",
    )
    p.add_argument("--mode", choices=CYCLES_MODES, default="all", help="which patterns to write (default all)")
    p.add_argument(
        "--kind", choices=KINDS, default="kernel", help="events to analyse (default kernel; cpu_op for CPU-only traces)"
    )
    p.add_argument(
        "--ops",
        choices=CYCLES_OPS,
        default="top",
        help="CPU operators: top-level (default), leaves, or all",
    )
    p.add_argument(
        "--sequences",
        choices=CYCLES_SEQUENCES,
        default="group",
        help="GPU events: one sequence per stream, per stream group (compute apart from communication; "
        "default) or per device (all streams merged)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=run)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Run ``gpuan cycles`` with the parsed `args`; returns the exit code."""
    return show(args.trace, args.output, mode=args.mode, kind=args.kind, ops=args.ops,
                sequences=args.sequences, fmt=args.format)  # fmt: skip


def show(
    path: str,
    base: str | None,
    *,
    mode: str = "all",
    kind: str = "kernel",
    ops: str = "top",
    sequences: str = "group",
    fmt: str = "text",
) -> int:
    """Detect the cycles of the trace at `path`, write the CSVs under `base` (if given), print the report;
    returns the exit code. Under ``mpirun`` a run directory's ranks are shared among the processes, each
    searching its ranks' sequences (:mod:`gpuan.cli.dealt`)."""
    from gpuan.cli.dealt import run_over

    options = {"mode": mode, "kind": kind, "ops": ops, "sequences": sequences}

    def plain() -> int:
        from gpuan import cycles
        from gpuan.cli.first_run import cycle_functions
        from gpuan.cli.loading import load_trace
        from gpuan.jit_cache import compiled_beside

        with compiled_beside(cycle_functions(), "gpuan.cli.first_run:cycle_kernels"):
            result = cycles.analyse(load_trace(path, projection=cycles.reads(kind)), **options)
        return _emit(result, path, base, fmt)

    def dealt(procs) -> int:
        from gpuan.cli.dealt import device
        from gpuan.cycles.analysis import PART_SCHEMAS, combine, partial, reads
        from gpuan.trace.dealt import load_dealt, map_ranks

        run = load_dealt(path, procs, device=device(), projection=reads(kind))
        parts = map_ranks(run, lambda trace: partial(trace, **options), PART_SCHEMAS)
        return 0 if parts is None else _emit(combine(parts, **options), path, base, fmt)

    return run_over(path, plain, dealt)


def _emit(result, path: str, base: str | None, fmt: str) -> int:
    """Write the CSVs of a cycles `result` under `base` (if given) and print its report; returns the exit
    code."""
    from gpuan.errors import TraceError
    from gpuan.outputs import cycles as output

    if not result.summary["events"]:
        raise TraceError(path, f"no {result.summary['kind']} events to look for cycles in")
    if base and not output.write_csvs(result, base):
        # not an error (a trace may hold no repetition), but say why no file appeared, beside stdout's report
        what = "prefill or decode phase" if result.summary["mode"] == "llm" else "repeating pattern"
        print(f"gpuan: no {what} found in {path}: no files written", file=sys.stderr)
    print(output.json_text(result, path, base) if fmt == "json" else output.text(result), end="")
    return 0
