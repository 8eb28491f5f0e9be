"""``gpuan compare BASE.csv NEW.csv -o OUT.xlsx|OUT.csv``: two cycle CSVs kernel by kernel.

``--all BASE NEW`` compares every cycle of two ``gpuan cycles -o`` runs: the cycles are paired by the
similarity of their time shares per kernel signature, one XLSX sheet per pair.
"""

from __future__ import annotations

import math
from pathlib import Path

from gpuan.cli.arguments import nonempty
from gpuan.errors import TraceError

TOP_CHANGES = 5


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="compare two cycle CSVs kernel by kernel (XLSX or CSV)")
    p.add_argument("base", help="baseline cycle CSV (with --all: the BASE given to gpuan cycles -o)")
    p.add_argument("new", help="new cycle CSV (with --all: the BASE of the new run)")
    p.add_argument("-o", "--output", type=nonempty, required=True, metavar="OUT", help="OUT.xlsx or OUT.csv")
    p.add_argument(
        "--mode", choices=("align", "match"), default="align",
        help="align: best rotation + longest common subsequence of signatures (default); "
        "match: by name, then by signature",
    )  # fmt: skip
    p.add_argument("--all", action="store_true", help="compare every cycle file of two gpuan cycles runs")
    p.set_defaults(run=run)


def cycle_files(base: str) -> list[str]:
    """Return the cycle CSVs of a ``gpuan cycles -o BASE`` run: ``BASE_cycle_1.csv``, ``_2``, ... up to the
    first missing one, else the ``BASE_prefill.csv`` / ``BASE_decode.csv`` that exist."""
    files = []
    while Path(f"{base}_cycle_{len(files) + 1}.csv").is_file():
        files.append(f"{base}_cycle_{len(files) + 1}.csv")
    if not files:
        files = [f for f in (f"{base}_prefill.csv", f"{base}_decode.csv") if Path(f).is_file()]
    if not files:
        raise TraceError(base, f"no cycle CSVs: neither {base}_cycle_1.csv nor {base}_prefill/decode.csv exists")
    return files


def run(args) -> int:
    from gpuan.cycles import compare, csvfile

    kind = Path(args.output).suffix.lower()
    if kind not in (".xlsx", ".csv"):
        raise TraceError(args.output, "output must end in .xlsx or .csv")
    if args.all and kind != ".xlsx":
        raise TraceError(args.output, "--all writes one sheet per pair of cycles: use an .xlsx output")
    pairing = compare.align if args.mode == "align" else compare.match
    if not args.all:
        base, new = csvfile.read(args.base), csvfile.read(args.new)
        frame = pairing(base, new)
        how = f"align, rotation {frame.attrs['rotation']}" if args.mode == "align" else "match"
        if kind == ".csv":
            compare.write_csv(args.output, frame)
        else:
            compare.write_xlsx(args.output, [("Comparison", base, new, frame)])
        print(f"{args.base} vs {args.new} ({how})")
        _print_summary(base, new, frame)
        return 0
    base_files, new_files = cycle_files(args.base), cycle_files(args.new)
    bases = [csvfile.read(f) for f in base_files]
    news = [csvfile.read(f) for f in new_files]
    pairs = compare.pair_cycles(bases, news)
    if not pairs:
        raise TraceError(
            args.new, f"no cycle resembles one of {args.base} (similarity >= {compare.MIN_SIMILARITY:.0%})"
        )
    results = []
    for i, j, sim in pairs:
        frame = pairing(bases[i], news[j])
        results.append((f"Base{i + 1}-New{j + 1} ({sim * 100:.0f}%)", bases[i], news[j], frame))
    compare.write_xlsx(args.output, results)
    for (name, base, new, frame), (i, j, _) in zip(results, pairs):
        print(f"{name}: {base_files[i]} vs {new_files[j]}")
        _print_summary(base, new, frame, top=0)
    for label, files, used in (
        ("baseline", base_files, {p[0] for p in pairs}),
        ("new", new_files, {p[1] for p in pairs}),
    ):
        left = [f for k, f in enumerate(files) if k not in used]
        if left:
            print(f"unpaired {label} cycles: {', '.join(left)}")
    return 0


def _pct(value: float) -> str:
    return f"{value:+.1f}%" if math.isfinite(value) else "-"


def _print_summary(base, new, frame, top: int = TOP_CHANGES) -> None:
    from gpuan.cycles import compare

    counts = frame["match_type"].value_counts()
    print("  " + ", ".join(f"{t} {int(counts.get(t, 0))}" for t in compare.MATCH_TYPES))
    b, n = compare.cycle_time_us(base), compare.cycle_time_us(new)
    print(f"  cycle time {b:,.1f} us -> {n:,.1f} us ({_pct(compare.cycle_change_pct(base, new))})")
    if top <= 0 or frame.empty:
        return
    # a kernel missing on one side counts with 0 µs there: removing or adding it is a time change too
    delta = frame["new_avg"].fillna(0.0) - frame["base_avg"].fillna(0.0)
    print("  largest time changes:")
    for k in delta.abs().sort_values(ascending=False, kind="stable").index[:top]:
        row = frame.loc[k]
        name = row["new_kernel"] or row["base_kernel"]
        print(f"    {delta[k]:+10,.3f} us {_pct(row['change_pct']):>8}  {row['match_type']:<8}  {name[:90]}")
