"""``gpuan compare BASE.csv NEW.csv -o OUT.xlsx|OUT.csv``: two cycle CSVs kernel by kernel.

``--all BASE NEW`` compares every cycle of two ``gpuan cycles -o`` runs: the cycles are paired by the
similarity of their time shares per kernel signature, one XLSX sheet per pair.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuan.cli.arguments import nonempty
from gpuan.errors import TraceError, UsageError
from gpuan.options import COMPARE_MODES


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``gpuan compare`` and its options to the subcommands `sub`; returns nothing."""
    p = sub.add_parser("compare", help="compare two cycle CSVs kernel by kernel (XLSX or CSV)")
    p.add_argument("base", help="baseline cycle CSV (with --all: the BASE given to gpuan cycles -o)")
    p.add_argument("new", help="new cycle CSV (with --all: the BASE of the new run)")
    p.add_argument("-o", "--output", type=nonempty, required=True, metavar="OUT", help="OUT.xlsx or OUT.csv")
    p.add_argument(
        "--mode", choices=COMPARE_MODES, default="align",
        help="align: best rotation + longest common subsequence of signatures (default); "
        "match: by name, then by signature",
    )  # fmt: skip
    p.add_argument("--all", action="store_true", help="compare every cycle file of two gpuan cycles runs")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Load the cycle CSVs, compare them, write the XLSX or CSV and print the report; returns 0."""
    from gpuan import compare
    from gpuan.outputs import compare as output
    from gpuan.trace.cycle_csv import cycle_files, read_cycle_csv

    suffix = Path(args.output).suffix.lower()
    if suffix not in (".xlsx", ".csv"):
        raise UsageError(f"{args.output}: output must end in .xlsx or .csv")
    if args.all and suffix != ".xlsx":
        raise UsageError(f"{args.output}: --all writes one sheet per pair of cycles: use an .xlsx output")
    if args.all:
        base_files, new_files = cycle_files(args.base), cycle_files(args.new)
        bases = [read_cycle_csv(f) for f in base_files]
        news = [read_cycle_csv(f) for f in new_files]
        result = compare.analyse_runs((bases, news), mode=args.mode)
        if not result.summary["pairs"]:
            raise TraceError(
                args.new, f"no cycle resembles one of {args.base} (similarity >= {compare.MIN_SIMILARITY:.0%})"
            )
    else:
        result = compare.analyse((read_cycle_csv(args.base), read_cycle_csv(args.new)), mode=args.mode)
    if suffix == ".csv":
        output.write_csv(result, args.output)
    else:
        output.write_xlsx(result, args.output)
    print(output.text(result), end="")
    return 0
