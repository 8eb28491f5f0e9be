"""``gpuan tensors LOG --gguf MODEL``: which parts of a model file an instrumented llama.cpp touched, per
tensor, layer, component, expert and token, with the tables, an HTML report and the checks.

Parse → load (:func:`gpuan.trace.tensor_inputs.load_tensor_inputs`) → :func:`gpuan.tensors.analyse` →
emit (:mod:`gpuan.outputs.tensors`)."""

from __future__ import annotations

import argparse

from gpuan.cli.arguments import between, count, nonempty
from gpuan.options import TENSORS_MAX_POINTS

OUTPUT_FORMATS = ("text", "json")


def _output_format(text: str) -> str:
    """Return `text` as an output format; a log layout given here (the option's old meaning) is pointed to
    ``--log-format``."""
    from gpuan.options import TENSOR_LOG_CHOICES

    if text in OUTPUT_FORMATS:
        return text
    if text in TENSOR_LOG_CHOICES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is a log layout: give it with --log-format {text} (--format is the output: text or json)"
        )
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(OUTPUT_FORMATS)})")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the command's parser to `sub` (the subcommands of ``gpuan``)."""
    from gpuan.options import TENSOR_LOG_CHOICES
    from gpuan.outputs.files import TABLE_FORMATS

    p = sub.add_parser(
        "tensors",
        help="tensor-access logs of an instrumented llama.cpp, joined to the GGUF model: hot/cold views",
        description="Analyse a tensor-access log (64-byte seed/packed entries or 256/1024-byte per-operation "
        "entries; read memory-mapped) against its GGUF model file: accesses and bytes per tensor, layer, "
        "component, expert and token, the share of the file never touched, and correctness checks.",
    )
    p.add_argument("log", metavar="LOG", nargs="?", help="the binary tensor-access log")
    p.add_argument("--gguf", metavar="MODEL.gguf", help="the model file the log was recorded with")
    p.add_argument("--names", metavar="TABLE.csv", help="tensor name table (tensor_idx,tensor_name,data_ptr,...)")
    p.add_argument("--buffers", metavar="EVENTS.jsonl", help="buffer alloc/dealloc events (JSON lines)")
    p.add_argument(
        "--log-format",
        choices=TENSOR_LOG_CHOICES,
        default="auto",
        help="log entry layout (default: auto, by plausibility of the fields)",
    )
    p.add_argument(
        "--format",
        type=_output_format,
        default="text",
        metavar="{text,json}",
        help="what to print: the text report (default) or the summary numbers and checks as JSON",
    )
    p.add_argument("-o", "--output", type=nonempty, metavar="OUTDIR", help="directory for the tables (and report.html)")
    p.add_argument("--table-format", choices=TABLE_FORMATS, default="csv", help="format of the tables (default: csv)")
    p.add_argument(
        "--html", type=nonempty, metavar="FILE.html", help="write the HTML report here (default: OUTDIR/report.html)"
    )
    p.add_argument(
        "--max-points",
        type=between(1, TENSORS_MAX_POINTS, " (WebGL fails beyond)"),
        default=200_000,
        help=f"accesses sampled for the scatter and 3-D views (1 to {TENSORS_MAX_POINTS:,}; default 200,000)",
    )
    p.add_argument("--top", type=count, default=10, help="hottest tensors to list (default: 10; 0: none)")
    p.add_argument(
        "--c-header", action="store_true", help="print the path of gpuan_tensor_log.h (the C/C++ log writer) and exit"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Analyse the log against its model, write the tables and HTML report, print the report (or the
    C header's path); returns the exit code (0; errors are raised)."""
    from gpuan.errors import UsageError

    if args.c_header:
        from gpuan.trace.tensorlog import c_header_path

        print(c_header_path())
        return 0
    if not args.log or not args.gguf:
        raise UsageError("gpuan tensors needs a log and --gguf MODEL.gguf")
    from gpuan.outputs import tensors as output
    from gpuan.tensors import analyse
    from gpuan.trace.tensor_inputs import load_tensor_inputs

    inputs = load_tensor_inputs(args.log, args.gguf, args.names, args.buffers, args.log_format)
    result = analyse(inputs, max_points=args.max_points)
    if args.output:
        output.write_tables(result, args.output, args.table_format)
    html = args.html or (f"{args.output}/report.html" if args.output else None)
    if html:
        output.write_html(result, html)
    print(output.json_text(result, args.top) if args.format == "json" else output.text(result, args.top), end="")
    return 0
