"""``gpuan sol TRACE``: speed-of-light (roofline) scoring of every op; ``gpuan sol calibrate``: measure the
ceilings of this machine."""

from __future__ import annotations

import json

from gpuan.cli.arguments import count, nonempty


def add_parser(sub) -> None:
    p = sub.add_parser(
        "sol", help="roofline / speed-of-light score of every op (or: gpuan sol calibrate)",
        description="Score every op of TRACE against the device's roofs; 'gpuan sol calibrate [--cpu]' measures "
        "this machine's ceilings instead.",
    )  # fmt: skip
    p.add_argument("trace", metavar="TRACE", help="trace with record_shapes (Kineto JSON, ...), or 'calibrate'")
    p.add_argument(
        "--device",
        dest="gpu_name",
        metavar="NAME",
        help="device to score against (default: the trace's; 'cpu' for this machine's calibrated CPU)",
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
    p.add_argument("--cpu", action="store_true", help="calibrate: measure this machine's CPU, not a GPU")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.trace == "calibrate":
        return _calibrate(args)
    from gpuan.cli.loading import load_trace
    from gpuan.sol import report, score

    scored = score(
        load_trace(args.trace), args.gpu_name, ceilings=args.ceilings, ceilings_file=args.ceilings_file,
        tf32=args.tf32,
    )  # fmt: skip
    if args.output:
        report.write_table(scored, args.output)
    if args.html:
        from gpuan.sol.chart import write_html

        write_html(scored, args.html)
    if args.format == "json":
        df = report.frame(scored)
        out = {
            "totals": report.totals(scored, df),
            # every share is of totals.op_ms (the ops' times summed)
            "by_layer_type": _records(report.section(df, "layer", scored.op_ns)),
            "by_function": _records(report.section(df, "name", scored.op_ns)),
            "by_phase": _records(report.by_phase(df, scored.op_ns)),
            "roofs": {"flops": scored.roofs.flops, "memory_bandwidth": scored.roofs.memory_bandwidth,
                      "l2_bytes": scored.roofs.l2_bytes, "l2_bandwidth": scored.roofs.l2_bandwidth,
                      "sources": scored.roofs.sources},
        }  # fmt: skip
        print(json.dumps(out, indent=1, default=float))
    else:
        print(report.render(scored, top=args.top), end="")
    return 0


def _records(table) -> dict:
    return {str(k): {c: (None if v != v else v) for c, v in row.items()} for k, row in table.to_dict("index").items()}


def _calibrate(args) -> int:
    from gpuan.sol.calibrate import calibrate

    name, result, path = calibrate(cpu=args.cpu, path=args.ceilings_file)
    print(f"measured ceilings of {name}, saved to {path}")
    print(f"  memory bandwidth {result['memory_bandwidth'] / 1e9:,.1f} GB/s")
    if result.get("l2_bandwidth"):
        print(f"  L2 bandwidth {result['l2_bandwidth'] / 1e9:,.1f} GB/s (data up to {result['l2_bytes'] >> 10:,} KiB)")
    for key, value in sorted(result["flops"].items()):
        print(f"  {key:12} {value / 1e12:,.3f} TFLOP/s")
    return 0
